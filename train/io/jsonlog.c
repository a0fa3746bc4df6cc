/* jsonlog.c — building and writing JSON-lines records. */
#include "jsonlog.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

static void json_put(JsonLine *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void json_put(JsonLine *j, const char *fmt, ...)
{
    if (j->len >= sizeof j->buf - 1) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(j->buf + j->len, sizeof j->buf - j->len, fmt, ap);
    va_end(ap);
    if (n > 0) j->len += (size_t)n;
    if (j->len > sizeof j->buf - 1) j->len = sizeof j->buf - 1;
}

static void json_key(JsonLine *j, const char *key) { json_put(j, ",\"%s\":", key); }

static void json_escaped(JsonLine *j, const char *s)
{
    json_put(j, "\"");
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') json_put(j, "\\%c", ch);
        else if (ch < 0x20) json_put(j, "\\u%04x", ch);
        else json_put(j, "%c", ch);
    }
    json_put(j, "\"");
}

void json_begin(JsonLine *j, const char *event)
{
    j->len = 0;
    json_put(j, "{\"event\":");
    json_escaped(j, event);
}

void json_int(JsonLine *j, const char *key, int64_t v)
{
    json_key(j, key);
    json_put(j, "%lld", (long long)v);
}

void json_num(JsonLine *j, const char *key, double v)
{
    json_key(j, key);
    if (isfinite(v)) json_put(j, "%.9g", v);
    else json_put(j, "null");
}

void json_str(JsonLine *j, const char *key, const char *v)
{
    json_key(j, key);
    json_escaped(j, v);
}

void json_end(JsonLine *j, FILE *f)
{
    json_put(j, "}");
    if (!f) return;
    fprintf(f, "%s\n", j->buf);
    fflush(f);
}
