/* jsonlog.h — one JSON object per line (--log FILE), for scripts and plots.
 *
 *   JsonLine j; json_begin(&j, "step");
 *   json_int(&j, "step", 100); json_num(&j, "loss", 0.53);
 *   json_end(&j, f);                 -> {"event":"step","step":100,"loss":0.53}
 * Non-finite numbers are written as null (JSON has no NaN).
 */
#ifndef CTRAIN_TRAIN_JSONLOG_H
#define CTRAIN_TRAIN_JSONLOG_H

#include <stdint.h>
#include <stdio.h>

typedef struct JsonLine {
    char buf[4096];
    size_t len;
} JsonLine;

void json_begin(JsonLine *j, const char *event);
void json_int(JsonLine *j, const char *key, int64_t v);
void json_num(JsonLine *j, const char *key, double v);
void json_str(JsonLine *j, const char *key, const char *v);
/* Close the object and write it with a newline (flushes); f may be NULL. */
void json_end(JsonLine *j, FILE *f);

#endif
