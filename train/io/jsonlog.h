/* jsonlog.h — one JSON object per line (--log FILE), for scripts and plots.
 *
 *   JsonLine j; json_begin(&j, "step");
 *   json_int(&j, "step", 100); json_num(&j, "loss", 0.53);
 *   json_end(&j, f);                 -> {"event":"step","step":100,"loss":0.53}
 * Written by the JSON writer (jsonw.h) in its compact style: numbers to 9
 * significant digits, non-finite ones as null (JSON has no NaN). A record
 * is at most 4095 bytes (the rest is cut).
 *
 * A failed write of the --log file stops the run (json_log, json_log_close):
 * "ctrain: cannot write log file FILE: <strerror>" and a hint to free space
 * or pass --log elsewhere, then exit(1). A training log that silently loses
 * steps is worse than a stopped run, whose checkpoint (--save-every)
 * survives. Each record is flushed, so a full disk is noticed at that
 * record, not at exit (the log is small).
 */
#ifndef CTRAIN_TRAIN_JSONLOG_H
#define CTRAIN_TRAIN_JSONLOG_H

#include <stdint.h>
#include <stdio.h>
#include "jsonw.h"

typedef struct JsonLine {
    JsonW w;                 /* writes into buf */
    char buf[4096];
} JsonLine;

void json_begin(JsonLine *j, const char *event);
void json_int(JsonLine *j, const char *key, int64_t v);
void json_num(JsonLine *j, const char *key, double v);
void json_str(JsonLine *j, const char *key, const char *v);
/* Close the object and write it with a newline (flushes); f may be NULL.
 * Returns 0, or -1 when the write or the flush failed (errno says why). */
int json_end(JsonLine *j, FILE *f);
/* json_end to the --log file at path; a failed write is fatal (above). */
void json_log(JsonLine *j, FILE *f, const char *path);
/* fclose the --log file at path (f may be NULL); a failure is fatal. */
void json_log_close(FILE *f, const char *path);

#endif
