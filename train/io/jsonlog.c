/* jsonlog.c — JSON-lines records on the JSON writer (jsonw.h). */
#include "jsonlog.h"

#include <errno.h>
#include <string.h>
#include "engine/error.h"

void json_begin(JsonLine *j, const char *event)
{
    jsonw_init_fixed(&j->w, j->buf, sizeof j->buf, 0);
    jsonw_obj_begin(&j->w, NULL);
    jsonw_str(&j->w, "event", event);
}

void json_int(JsonLine *j, const char *key, int64_t v) { jsonw_int(&j->w, key, v); }
void json_num(JsonLine *j, const char *key, double v) { jsonw_num(&j->w, key, v); }
void json_str(JsonLine *j, const char *key, const char *v) { jsonw_str(&j->w, key, v); }

int json_end(JsonLine *j, FILE *f)
{
    jsonw_obj_end(&j->w);
    if (!f) return 0;
    /* fputs may only buffer; the flush is where a full disk shows */
    if (fputs(j->buf, f) == EOF || fputc('\n', f) == EOF || fflush(f) == EOF) return -1;
    return 0;
}

#define LOG_HINT_FMT "free space on the disk of %s or pass --log elsewhere"

static void log_failed(const char *what, const char *path, int err)
{
    char hint[1200];
    snprintf(hint, sizeof hint, LOG_HINT_FMT, path);
    ct_fatal_hint(hint, "cannot %s log file %s: %s", what, path, strerror(err));
}

void json_log(JsonLine *j, FILE *f, const char *path)
{
    errno = 0;
    if (json_end(j, f) != 0) log_failed("write", path, errno ? errno : EIO);
}

void json_log_close(FILE *f, const char *path)
{
    if (!f) return;
    errno = 0;
    int bad = ferror(f);           /* an earlier write that failed unseen */
    if (fclose(f) != 0 || bad) log_failed("close", path, errno ? errno : EIO);
}
