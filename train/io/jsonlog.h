/* jsonlog.h — one JSON object per line (--log FILE), for scripts and plots.
 *
 *   JsonLine j; json_begin(&j, "step");
 *   json_int(&j, "step", 100); json_num(&j, "loss", 0.53);
 *   json_end(&j, f);                 -> {"event":"step","step":100,"loss":0.53}
 * Written by the JSON writer (jsonw.h) in its compact style: numbers to 9
 * significant digits, non-finite ones as null (JSON has no NaN). A record
 * is at most 4095 bytes (the rest is cut).
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
/* Close the object and write it with a newline (flushes); f may be NULL. */
void json_end(JsonLine *j, FILE *f);

#endif
