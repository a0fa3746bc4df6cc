/* jsonw.c — the JSON writer (jsonw.h). */
#include "jsonw.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void jsonw_init(JsonW *w, int style)
{
    memset(w, 0, sizeof *w);
    w->style = style;
}

void jsonw_init_fixed(JsonW *w, char *buf, size_t cap, int style)
{
    memset(w, 0, sizeof *w);
    w->style = style;
    w->buf = buf;
    w->cap = cap;
    w->fixed = 1;
    buf[0] = 0;
}

void jsonw_reset(JsonW *w)
{
    w->len = 0;
    if (w->buf) w->buf[0] = 0;
    w->oom = 0;
    w->depth = 0;
    memset(w->has_item, 0, sizeof w->has_item);
}

void jsonw_free(JsonW *w)
{
    if (!w->fixed) free(w->buf);
    memset(w, 0, sizeof *w);
}

static void put(JsonW *w, const char *s, size_t n)
{
    if (w->fixed) {
        size_t room = w->cap - 1 - w->len;
        if (n > room) { n = room; w->oom = 1; }
    } else {
        if (w->oom) return;
        if (w->len + n + 1 > w->cap) {
            size_t cap = w->cap ? w->cap : 256;
            while (w->len + n + 1 > cap) cap *= 2;
            char *p = (char *)realloc(w->buf, cap);
            if (!p) { w->oom = 1; return; }
            w->buf = p;
            w->cap = cap;
        }
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    w->buf[w->len] = 0;
}

static void puts_(JsonW *w, const char *s) { put(w, s, strlen(s)); }

static void putf(JsonW *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(JsonW *w, const char *fmt, ...)
{
    char buf[64];   /* a number */
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0) put(w, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

void jsonw_raw(JsonW *w, const char *s) { puts_(w, s); }

void jsonw_string(JsonW *w, const char *s)
{
    const int short_esc = w->style & JSONW_SHORT_ESCAPES;
    puts_(w, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { char e[2] = {'\\', (char)c}; put(w, e, 2); }
        else if (short_esc && c == '\n') puts_(w, "\\n");
        else if (short_esc && c == '\t') puts_(w, "\\t");
        else if (c < 0x20) putf(w, "\\u%04x", c);
        else put(w, (const char *)&c, 1);
    }
    puts_(w, "\"");
}

static void newline_indent(JsonW *w, int depth)
{
    puts_(w, "\n");
    for (int i = 0; i < depth; i++) puts_(w, "  ");
}

/* Comma (pretty: then newline and indent) before an item, then its key. */
static void item(JsonW *w, const char *key)
{
    const int pretty = w->style & JSONW_PRETTY;
    int d = w->depth < JSONW_MAX_DEPTH - 1 ? w->depth : JSONW_MAX_DEPTH - 1;
    if (w->has_item[d]) puts_(w, ",");
    if (pretty && (d > 0 || w->has_item[d])) newline_indent(w, d);
    w->has_item[d] = 1;
    if (key) {
        jsonw_string(w, key);
        puts_(w, pretty ? ": " : ":");
    }
}

static void open_(JsonW *w, const char *key, const char *brace)
{
    item(w, key);
    puts_(w, brace);
    w->depth++;
    if (w->depth < JSONW_MAX_DEPTH) w->has_item[w->depth] = 0;
}

static void close_(JsonW *w, const char *brace)
{
    int had = w->depth < JSONW_MAX_DEPTH ? w->has_item[w->depth] : 1;
    w->depth--;
    if ((w->style & JSONW_PRETTY) && had) newline_indent(w, w->depth);
    puts_(w, brace);
}

void jsonw_obj_begin(JsonW *w, const char *key) { open_(w, key, "{"); }
void jsonw_obj_end(JsonW *w) { close_(w, "}"); }
void jsonw_arr_begin(JsonW *w, const char *key) { open_(w, key, "["); }
void jsonw_arr_end(JsonW *w) { close_(w, "]"); }

void jsonw_str(JsonW *w, const char *key, const char *v)
{
    item(w, key);
    if (v) jsonw_string(w, v);
    else puts_(w, "null");
}

void jsonw_int(JsonW *w, const char *key, int64_t v)
{
    item(w, key);
    putf(w, "%lld", (long long)v);
}

void jsonw_uint(JsonW *w, const char *key, uint64_t v)
{
    item(w, key);
    putf(w, "%llu", (unsigned long long)v);
}

void jsonw_num(JsonW *w, const char *key, double v)
{
    item(w, key);
    if (!isfinite(v)) puts_(w, "null");
    else if (!(w->style & JSONW_EXACT_NUMBERS)) putf(w, "%.9g", v);
    /* integers (bytes, counts) exactly; measurements to 10 significant digits */
    else if (v == floor(v) && fabs(v) < 9007199254740992.0) putf(w, "%.0f", v);
    else putf(w, "%.10g", v);
}

void jsonw_bool(JsonW *w, const char *key, int v)
{
    item(w, key);
    puts_(w, v ? "true" : "false");
}
