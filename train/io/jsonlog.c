/* jsonlog.c — JSON-lines records on the JSON writer (jsonw.h). */
#include "jsonlog.h"

void json_begin(JsonLine *j, const char *event)
{
    jsonw_init_fixed(&j->w, j->buf, sizeof j->buf, 0);
    jsonw_obj_begin(&j->w, NULL);
    jsonw_str(&j->w, "event", event);
}

void json_int(JsonLine *j, const char *key, int64_t v) { jsonw_int(&j->w, key, v); }
void json_num(JsonLine *j, const char *key, double v) { jsonw_num(&j->w, key, v); }
void json_str(JsonLine *j, const char *key, const char *v) { jsonw_str(&j->w, key, v); }

void json_end(JsonLine *j, FILE *f)
{
    jsonw_obj_end(&j->w);
    if (!f) return;
    fprintf(f, "%s\n", j->buf);
    fflush(f);
}
