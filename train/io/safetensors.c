/* safetensors.c — the safetensors reader (mmap, a strict JSON parser for
 * the header, offset validation, the CRC32 check) and the dtype names; the
 * writer is safetensors_write.c.
 *
 * The header parser is a small recursive-descent JSON parser that knows the
 * schema: the top level is an object of tensor entries and "__metadata__";
 * unknown keys inside a tensor entry are skipped (as the reference
 * implementation does), any JSON value included. Strings are checked to be
 * valid UTF-8 and escapes (\uXXXX with surrogate pairs too) are decoded.
 * Syntax errors report the byte position within the header.
 */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include "engine/error.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c assumes a little-endian host (the format's byte order)"
#endif

/* ---- dtypes: every name the format defines with a whole-byte size ---- */

typedef struct { const char *name; size_t size; int dtype; } StDtype;
static const StDtype st_dtypes[] = {
    {"F32", 4, DT_F32}, {"F16", 2, DT_F16}, {"BF16", 2, DT_BF16}, {"I64", 8, DT_I64},
    {"I32", 4, DT_I32}, {"U8", 1, DT_U8},   {"F64", 8, -1},       {"I16", 2, -1},
    {"I8", 1, -1},      {"U16", 2, -1},     {"U32", 4, -1},       {"U64", 8, -1},
    {"BOOL", 1, -1},    {"F8_E4M3", 1, -1}, {"F8_E5M2", 1, -1},   {"F8_E8M0", 1, -1},
};
#define N_ST_DTYPES (sizeof st_dtypes / sizeof st_dtypes[0])

const char *st_dtype_name(DType dt)
{
    for (size_t i = 0; i < N_ST_DTYPES; i++)
        if (st_dtypes[i].dtype == (int)dt) return st_dtypes[i].name;
    return NULL;
}

const char *st_shape_str(char *buf, size_t len, int ndim, const int64_t *shape)
{
    size_t o = 0;
    o += (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < ndim && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (o < len) snprintf(buf + o, len - o, "]");
    return buf;
}

/* ---- a growable byte buffer (the parser's decoded strings) ---- */

typedef struct { char *p; size_t len, cap; int oom; } Buf;

static void buf_put(Buf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = (char *)realloc(b->p, cap);
        if (!p) { b->oom = 1; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

/* ---- the header parser ---- */

typedef struct Json {
    const char *s;
    size_t n, pos;
    const char *path;
    char *err;
    size_t errlen;
    int depth;
} Json;

static int json_err(Json *j, const char *what)
{
    return ct_fail(j->err, j->errlen, ST_ERR_FORMAT,
                   "%s: JSON syntax error at byte %zu of the header (file offset %zu): %s",
                   j->path, j->pos, j->pos + 8, what);
}

static void json_ws(Json *j)
{
    while (j->pos < j->n && (j->s[j->pos] == ' ' || j->s[j->pos] == '\t' ||
                             j->s[j->pos] == '\n' || j->s[j->pos] == '\r'))
        j->pos++;
}

/* Skip whitespace, then expect character c. */
static int json_expect(Json *j, char c, const char *what)
{
    json_ws(j);
    if (j->pos >= j->n || j->s[j->pos] != c) return json_err(j, what);
    j->pos++;
    return ST_OK;
}

static int json_peek(Json *j)
{
    json_ws(j);
    return j->pos < j->n ? (unsigned char)j->s[j->pos] : -1;
}

static void utf8_put(Buf *b, uint32_t cp)
{
    char u[4];
    size_t n;
    if (cp < 0x80) { u[0] = (char)cp; n = 1; }
    else if (cp < 0x800) { u[0] = (char)(0xC0 | (cp >> 6)); u[1] = (char)(0x80 | (cp & 0x3F)); n = 2; }
    else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | (cp >> 12)); u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F)); n = 3;
    } else {
        u[0] = (char)(0xF0 | (cp >> 18)); u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); u[3] = (char)(0x80 | (cp & 0x3F)); n = 4;
    }
    buf_put(b, u, n);
}

/* Length of the valid UTF-8 sequence at p (at most avail bytes), 0 if invalid. */
static size_t utf8_valid(const unsigned char *p, size_t avail)
{
    uint32_t cp;
    size_t n;
    if (p[0] < 0x80) return 1;
    if ((p[0] & 0xE0) == 0xC0) { n = 2; cp = p[0] & 0x1F; }
    else if ((p[0] & 0xF0) == 0xE0) { n = 3; cp = p[0] & 0x0F; }
    else if ((p[0] & 0xF8) == 0xF0) { n = 4; cp = p[0] & 0x07; }
    else return 0;
    if (n > avail) return 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return n;
}

static int hex4(Json *j, uint32_t *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++, j->pos++) {
        if (j->pos >= j->n) return json_err(j, "unfinished \\u escape");
        char c = j->s[j->pos];
        int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10
              : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
        if (d < 0) return json_err(j, "bad hex digit in \\u escape");
        *v = *v * 16 + (uint32_t)d;
    }
    return ST_OK;
}

/* A string literal, decoded into *out (malloc'd). */
static int json_string(Json *j, char **out)
{
    *out = NULL;
    if (json_expect(j, '"', "expected a string")) return ST_ERR_FORMAT;
    Buf b = {0};
    buf_put(&b, "", 0);
    for (;;) {
        if (j->pos >= j->n) { free(b.p); return json_err(j, "unterminated string"); }
        unsigned char c = (unsigned char)j->s[j->pos];
        if (c == '"') { j->pos++; break; }
        if (c < 0x20) { free(b.p); return json_err(j, "control character in a string"); }
        if (c == '\\') {
            j->pos++;
            if (j->pos >= j->n) { free(b.p); return json_err(j, "unterminated string"); }
            char e = j->s[j->pos++];
            const char *simple = strchr("\"\\/bfnrt", e);
            if (e && simple) {
                static const char repl[] = "\"\\/\b\f\n\r\t";
                buf_put(&b, &repl[simple - "\"\\/bfnrt"], 1);
            } else if (e == 'u') {
                uint32_t cp, lo;
                if (hex4(j, &cp)) { free(b.p); return ST_ERR_FORMAT; }
                if (cp >= 0xDC00 && cp <= 0xDFFF) { free(b.p); return json_err(j, "lone low surrogate"); }
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    if (j->pos + 2 > j->n || j->s[j->pos] != '\\' || j->s[j->pos + 1] != 'u') {
                        free(b.p);
                        return json_err(j, "high surrogate without a low surrogate");
                    }
                    j->pos += 2;
                    if (hex4(j, &lo)) { free(b.p); return ST_ERR_FORMAT; }
                    if (lo < 0xDC00 || lo > 0xDFFF) { free(b.p); return json_err(j, "bad low surrogate"); }
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                }
                if (cp == 0) { free(b.p); return json_err(j, "\\u0000 in a string"); }
                utf8_put(&b, cp);
            } else {
                j->pos--;
                free(b.p);
                return json_err(j, "unknown escape in a string");
            }
            continue;
        }
        size_t n = utf8_valid((const unsigned char *)j->s + j->pos, j->n - j->pos);
        if (!n) { free(b.p); return json_err(j, "invalid UTF-8 in a string"); }
        buf_put(&b, j->s + j->pos, n);
        j->pos += n;
    }
    if (b.oom) { free(b.p); return json_err(j, "out of host memory"); }
    *out = b.p;
    return ST_OK;
}

/* A non-negative integer (shape and offsets). */
static int json_uint(Json *j, uint64_t *v)
{
    json_ws(j);
    size_t start = j->pos;
    *v = 0;
    while (j->pos < j->n && j->s[j->pos] >= '0' && j->s[j->pos] <= '9') {
        if (__builtin_mul_overflow(*v, 10, v) ||
            __builtin_add_overflow(*v, (uint64_t)(j->s[j->pos] - '0'), v)) {
            j->pos = start;
            return json_err(j, "integer too large");
        }
        j->pos++;
    }
    if (j->pos == start) return json_err(j, "expected a non-negative integer");
    if (j->s[start] == '0' && j->pos - start > 1) { j->pos = start; return json_err(j, "leading zero in a number"); }
    if (j->pos < j->n && (j->s[j->pos] == '.' || j->s[j->pos] == 'e' || j->s[j->pos] == 'E'))
        return json_err(j, "expected an integer");
    return ST_OK;
}

static int json_skip(Json *j);

static int json_skip_number(Json *j)
{
    size_t p = j->pos;
    if (p < j->n && j->s[p] == '-') p++;
    size_t d = p;
    while (p < j->n && j->s[p] >= '0' && j->s[p] <= '9') p++;
    if (p == d) return json_err(j, "expected a value");
    if (j->s[d] == '0' && p - d > 1) return json_err(j, "leading zero in a number");
    if (p < j->n && j->s[p] == '.') {
        size_t f = ++p;
        while (p < j->n && j->s[p] >= '0' && j->s[p] <= '9') p++;
        if (p == f) { j->pos = p; return json_err(j, "expected a digit after '.'"); }
    }
    if (p < j->n && (j->s[p] == 'e' || j->s[p] == 'E')) {
        p++;
        if (p < j->n && (j->s[p] == '+' || j->s[p] == '-')) p++;
        size_t f = p;
        while (p < j->n && j->s[p] >= '0' && j->s[p] <= '9') p++;
        if (p == f) { j->pos = p; return json_err(j, "expected a digit in the exponent"); }
    }
    j->pos = p;
    return ST_OK;
}

/* Any JSON value (for unknown keys inside a tensor entry). */
static int json_skip(Json *j)
{
    int c = json_peek(j);
    if (c == '"') {
        char *s;
        int r = json_string(j, &s);
        free(s);
        return r;
    }
    if (c == '{' || c == '[') {
        if (++j->depth > 64) return json_err(j, "nested too deeply");
        j->pos++;
        char close = c == '{' ? '}' : ']';
        if (json_peek(j) == close) { j->pos++; j->depth--; return ST_OK; }
        for (;;) {
            if (c == '{') {
                if (json_peek(j) != '"') return json_err(j, "expected a key");
                if (json_skip(j) || json_expect(j, ':', "expected ':' after a key")) return ST_ERR_FORMAT;
            }
            if (json_skip(j)) return ST_ERR_FORMAT;
            int d = json_peek(j);
            if (d == close) { j->pos++; j->depth--; return ST_OK; }
            if (d != ',') return json_err(j, c == '{' ? "expected ',' or '}'" : "expected ',' or ']'");
            j->pos++;
        }
    }
    static const char *words[3] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t l = strlen(words[i]);
        if (j->pos + l <= j->n && memcmp(j->s + j->pos, words[i], l) == 0) { j->pos += l; return ST_OK; }
    }
    if (c == '-' || (c >= '0' && c <= '9')) return json_skip_number(j);
    return json_err(j, c < 0 ? "unexpected end of the header" : "expected a value");
}

/* [u64, u64, ...] into v (at most max), count into *n. */
static int json_uint_array(Json *j, uint64_t *v, int max, int *n, const char *what)
{
    *n = 0;
    if (json_expect(j, '[', what)) return ST_ERR_FORMAT;
    if (json_peek(j) == ']') { j->pos++; return ST_OK; }
    for (;;) {
        uint64_t x;
        if (json_uint(j, &x)) return ST_ERR_FORMAT;
        if (*n == max) return json_err(j, "too many elements");
        v[(*n)++] = x;
        int c = json_peek(j);
        if (c == ']') { j->pos++; return ST_OK; }
        if (c != ',') return json_err(j, "expected ',' or ']'");
        j->pos++;
    }
}

static int parse_entry(Json *j, StEntry *e)
{
    int have_dtype = 0, have_shape = 0, have_off = 0;
    size_t at = j->pos;
    if (json_expect(j, '{', "expected '{' for a tensor entry")) return ST_ERR_FORMAT;
    if (json_peek(j) != '}') {
        for (;;) {
            char *key;
            if (json_string(j, &key)) return ST_ERR_FORMAT;
            if (json_expect(j, ':', "expected ':' after a key")) { free(key); return ST_ERR_FORMAT; }
            int r = ST_OK;
            if (strcmp(key, "dtype") == 0) {
                char *dt;
                r = json_string(j, &dt);
                if (!r) {
                    const StDtype *d = NULL;
                    for (size_t i = 0; i < N_ST_DTYPES; i++)
                        if (strcmp(st_dtypes[i].name, dt) == 0) d = &st_dtypes[i];
                    if (!d) {
                        r = ct_fail(j->err, j->errlen, ST_ERR_FORMAT,
                                    "%s: tensor '%s' has unknown dtype \"%s\" (known: F32 F16 BF16 "
                                    "I64 I32 U8 F64 I16 I8 U16 U32 U64 BOOL F8_*)", j->path,
                                    e->name, dt);
                    } else {
                        e->dtype_name = d->name;
                        e->dtype = d->dtype;
                        e->elem_size = d->size;
                        have_dtype = 1;
                    }
                    free(dt);
                }
            } else if (strcmp(key, "shape") == 0) {
                uint64_t s[ST_MAX_DIMS];
                r = json_uint_array(j, s, ST_MAX_DIMS, &e->ndim, "expected '[' for the shape");
                for (int i = 0; i < e->ndim; i++) {
                    if (s[i] > (uint64_t)INT64_MAX) { r = json_err(j, "shape too large"); break; }
                    e->shape[i] = (int64_t)s[i];
                }
                have_shape = 1;
            } else if (strcmp(key, "data_offsets") == 0) {
                uint64_t o[2];
                int n;
                r = json_uint_array(j, o, 2, &n, "expected '[' for data_offsets");
                if (!r && n != 2) r = json_err(j, "data_offsets needs two numbers [begin, end]");
                e->begin = o[0];
                e->end = o[1];
                have_off = 1;
            } else {
                r = json_skip(j);
            }
            free(key);
            if (r) return r;
            int c = json_peek(j);
            if (c == '}') break;
            if (c != ',') return json_err(j, "expected ',' or '}'");
            j->pos++;
        }
    }
    j->pos++;
    if (!have_dtype || !have_shape || !have_off)
        return ct_fail(j->err, j->errlen, ST_ERR_FORMAT,
                       "%s: tensor '%s' (byte %zu of the header) has no \"%s\"", j->path, e->name,
                       at, !have_dtype ? "dtype" : !have_shape ? "shape" : "data_offsets");
    return ST_OK;
}

static int parse_metadata(Json *j, StFile *f)
{
    if (json_peek(j) == 'n') return json_skip(j);   /* "__metadata__": null */
    if (json_expect(j, '{', "expected '{' for __metadata__")) return ST_ERR_FORMAT;
    if (json_peek(j) == '}') { j->pos++; return ST_OK; }
    int cap = 0;
    for (;;) {
        char *k, *v;
        json_ws(j);
        if (f->nmeta == ST_MAX_META)
            return ct_fail(j->err, j->errlen, ST_ERR_FORMAT, "%s: __metadata__ has more than %d "
                           "keys, the most ctrain reads (a damaged or hostile file)", j->path,
                           ST_MAX_META);
        if (json_string(j, &k)) return ST_ERR_FORMAT;
        if (json_expect(j, ':', "expected ':' after a key")) { free(k); return ST_ERR_FORMAT; }
        if (json_peek(j) != '"') { free(k); return json_err(j, "__metadata__ values must be strings"); }
        if (json_string(j, &v)) { free(k); return ST_ERR_FORMAT; }
        if (f->nmeta == cap) {
            cap = cap ? 2 * cap : 8;
            char **m = (char **)realloc(f->meta, (size_t)cap * 2 * sizeof *m);
            if (!m) { free(k); free(v); return json_err(j, "out of host memory"); }
            f->meta = m;
        }
        f->meta[2 * f->nmeta] = k;
        f->meta[2 * f->nmeta + 1] = v;
        f->nmeta++;
        int c = json_peek(j);
        if (c == '}') { j->pos++; return ST_OK; }
        if (c != ',') return json_err(j, "expected ',' or '}'");
        j->pos++;
    }
}

static int parse_header(Json *j, StFile *f)
{
    int cap = 0, have_meta = 0;
    if (json_expect(j, '{', "expected '{'")) return ST_ERR_FORMAT;
    if (json_peek(j) != '}') {
        for (;;) {
            if (json_peek(j) != '"') return json_err(j, "expected a tensor name");
            size_t at = j->pos;   /* json_peek skipped the whitespace */
            char *key;
            if (json_string(j, &key)) return ST_ERR_FORMAT;
            if (json_expect(j, ':', "expected ':' after a key")) { free(key); return ST_ERR_FORMAT; }
            int r;
            if (strcmp(key, "__metadata__") == 0) {
                free(key);
                if (have_meta) { j->pos = at; return json_err(j, "__metadata__ appears twice"); }
                have_meta = 1;
                r = parse_metadata(j, f);
            } else {
                if (f->n == ST_MAX_TENSORS) {
                    free(key);
                    return ct_fail(j->err, j->errlen, ST_ERR_FORMAT, "%s: the header lists more "
                                   "than %d tensors, the most ctrain reads (a damaged or hostile "
                                   "file)", j->path, ST_MAX_TENSORS);
                }
                if (f->n == cap) {
                    cap = cap ? 2 * cap : 64;
                    StEntry *e = (StEntry *)realloc(f->e, (size_t)cap * sizeof *e);
                    if (!e) { free(key); return json_err(j, "out of host memory"); }
                    f->e = e;
                }
                StEntry *e = &f->e[f->n++];
                memset(e, 0, sizeof *e);
                e->name = key;
                r = parse_entry(j, e);
            }
            if (r) return r;
            int c = json_peek(j);
            if (c == '}') break;
            if (c != ',') return json_err(j, "expected ',' or '}'");
            j->pos++;
        }
    }
    j->pos++;
    json_ws(j);   /* the writer pads with spaces */
    if (j->pos != j->n) return json_err(j, "unexpected text after the header object");
    return ST_OK;
}

/* ---- reader ---- */

static int cmp_entry_name(const void *a, const void *b)
{
    return strcmp((*(const StEntry *const *)a)->name, (*(const StEntry *const *)b)->name);
}

static int cmp_entry_off(const void *a, const void *b)
{
    const StEntry *x = *(const StEntry *const *)a, *y = *(const StEntry *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* by_name, and a name listed twice refused by name (sorted: n log n). */
static int index_names(StFile *f, char *err, size_t errlen)
{
    f->by_name = (const StEntry **)malloc(((size_t)f->n + 1) * sizeof *f->by_name);
    if (!f->by_name) return ct_fail(err, errlen, ST_ERR_IO, "%s: out of host memory", f->path);
    for (int i = 0; i < f->n; i++) f->by_name[i] = &f->e[i];
    qsort(f->by_name, (size_t)f->n, sizeof *f->by_name, cmp_entry_name);
    for (int i = 1; i < f->n; i++)
        if (strcmp(f->by_name[i - 1]->name, f->by_name[i]->name) == 0)
            return ct_fail(err, errlen, ST_ERR_FORMAT, "%s: tensor name '%s' appears twice in the "
                           "header", f->path, f->by_name[i]->name);
    return ST_OK;
}

/* Two metadata pairs {key, value} by key. */
static int cmp_meta_pair(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The metadata pairs sorted by key (for st_meta), and a key listed twice
 * refused by name. */
static int sort_meta(StFile *f, char *err, size_t errlen)
{
    if (f->nmeta > 1) qsort(f->meta, (size_t)f->nmeta, 2 * sizeof *f->meta, cmp_meta_pair);
    for (int i = 1; i < f->nmeta; i++)
        if (strcmp(f->meta[2 * i - 2], f->meta[2 * i]) == 0)
            return ct_fail(err, errlen, ST_ERR_FORMAT, "%s: __metadata__ key '%s' appears twice "
                           "in the header", f->path, f->meta[2 * i]);
    return ST_OK;
}

/* Offsets: each tensor's size matches its shape, nothing past the end,
 * tightly packed (no gaps, no overlaps, nothing after the last tensor). */
static int validate_offsets(StFile *f, char *err, size_t errlen)
{
    const StEntry *last = NULL;
    char sh[128];
    for (int i = 0; i < f->n; i++) {
        StEntry *e = &f->e[i];
        size_t numel = 1, bytes;
        for (int d = 0; d < e->ndim; d++)
            if (__builtin_mul_overflow(numel, (size_t)e->shape[d], &numel))
                return ct_fail(err, errlen, ST_ERR_FORMAT, "%s: tensor '%s' has an impossible shape %s",
                               f->path, e->name, st_shape_str(sh, sizeof sh, e->ndim, e->shape));
        if (__builtin_mul_overflow(numel, e->elem_size, &bytes))
            return ct_fail(err, errlen, ST_ERR_FORMAT, "%s: tensor '%s' has an impossible shape %s",
                           f->path, e->name, st_shape_str(sh, sizeof sh, e->ndim, e->shape));
        e->numel = numel;
        if (e->end < e->begin || e->end - e->begin != bytes)
            return ct_fail(err, errlen, ST_ERR_FORMAT, "%s: tensor '%s' is %s %s (%zu bytes) but its "
                           "data_offsets [%llu, %llu] hold %lld bytes", f->path, e->name,
                           e->dtype_name, st_shape_str(sh, sizeof sh, e->ndim, e->shape), bytes,
                           (unsigned long long)e->begin, (unsigned long long)e->end,
                           (long long)(e->end - e->begin));
        if (!last || e->end > last->end) last = e;
    }
    if (last && last->end > f->data_size)
        return ct_fail(err, errlen, ST_ERR_TRUNCATED, "%s is truncated: tensor '%s' ends at byte %llu "
                       "of the data section but the file has only %zu bytes of data (file size "
                       "%zu, expected %llu)", f->path, last->name, (unsigned long long)last->end,
                       f->data_size, f->size, (unsigned long long)(8 + f->header_len + last->end));
    const StEntry **by_off = (const StEntry **)malloc(((size_t)f->n + 1) * sizeof *by_off);
    if (!by_off) return ct_fail(err, errlen, ST_ERR_IO, "%s: out of host memory", f->path);
    for (int i = 0; i < f->n; i++) by_off[i] = &f->e[i];
    qsort(by_off, (size_t)f->n, sizeof *by_off, cmp_entry_off);
    uint64_t expect = 0;
    int code = ST_OK;
    for (int i = 0; i < f->n && !code; i++) {
        const StEntry *e = by_off[i];
        if (e->begin < expect)
            code = ct_fail(err, errlen, ST_ERR_FORMAT, "%s: tensors '%s' and '%s' overlap in the "
                           "data section", f->path, by_off[i - 1]->name, e->name);
        else if (e->begin > expect)
            code = ct_fail(err, errlen, ST_ERR_FORMAT, "%s: a gap of %llu bytes before tensor '%s' "
                           "in the data section", f->path, (unsigned long long)(e->begin - expect),
                           e->name);
        expect = e->end;
    }
    free(by_off);
    if (!code && expect != f->data_size)
        code = ct_fail(err, errlen, ST_ERR_FORMAT, "%s: %llu bytes after the last tensor (the header "
                       "does not describe the whole file)", f->path,
                       (unsigned long long)(f->data_size - expect));
    return code;
}

static int verify_crc(const StFile *f, char *err, size_t errlen)
{
    const char *s = st_meta(f, ST_CRC_KEY);
    if (!s) return ST_OK;
    char *end;
    unsigned long want = strtoul(s, &end, 16);
    if (strlen(s) != 8 || *end)
        return ct_fail(err, errlen, ST_ERR_FORMAT, "%s: metadata " ST_CRC_KEY " is \"%s\", not 8 hex "
                       "digits", f->path, s);
    uLong got = crc32_z(0L, Z_NULL, 0);
    if (f->data_size) got = crc32_z(got, f->data, f->data_size);
    if ((got & 0xffffffffUL) != want)
        return ct_fail(err, errlen, ST_ERR_CHECKSUM, "%s: checksum mismatch: the file is corrupt "
                       "(stored crc32 %s, data section has %08lx)", f->path, s,
                       (unsigned long)got & 0xffffffffUL);
    return ST_OK;
}

int st_open(const char *path, StFile *f, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ct_fail(err, errlen, ST_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return ct_fail(err, errlen, ST_ERR_IO, "cannot read %s: %s", path, strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return ct_fail(err, errlen, ST_ERR_IO, "cannot read %s: it is a directory", path);
    }
    f->path = strdup(path);
    f->size = (size_t)st.st_size;
    int code = ST_OK;
    if (f->size == 0) {
        close(fd);
        code = ct_fail(err, errlen, ST_ERR_FORMAT, "%s is empty (0 bytes), not a safetensors file", path);
        goto fail;
    }
    void *m = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m != MAP_FAILED) {
        f->base = (uint8_t *)m;
        f->mapped = 1;
    } else {   /* e.g. a pipe or a filesystem without mmap: read it */
        f->base = (uint8_t *)malloc(f->size);
        size_t got = 0;
        while (f->base && got < f->size) {
            ssize_t r = read(fd, f->base + got, f->size - got);
            if (r <= 0) break;
            got += (size_t)r;
        }
        if (!f->base || got != f->size) {
            int e = errno;
            close(fd);
            code = ct_fail(err, errlen, ST_ERR_IO, "cannot read %s: %s", path,
                           f->base ? strerror(e) : "out of host memory");
            goto fail;
        }
    }
    close(fd);
    if (f->size < 8) {
        code = ct_fail(err, errlen, ST_ERR_FORMAT, "%s is %zu bytes, too short for a safetensors file "
                       "(not a safetensors file, or truncated)", path, f->size);
        goto fail;
    }
    uint64_t n = 0;
    for (int i = 0; i < 8; i++) n |= (uint64_t)f->base[i] << (8 * i);
    f->header_len = n;
    if (n > ST_MAX_HEADER || n < 2) {
        code = ct_fail(err, errlen, ST_ERR_FORMAT, "%s is not a safetensors file: its first 8 bytes "
                       "give a header length of %llu (expected 2 to %llu)", path,
                       (unsigned long long)n, (unsigned long long)ST_MAX_HEADER);
        goto fail;
    }
    if (f->size > 8 && f->base[8] != '{') {
        code = ct_fail(err, errlen, ST_ERR_FORMAT, "%s is not a safetensors file: the header does "
                       "not start with '{'", path);
        goto fail;
    }
    if (n > f->size - 8) {
        code = ct_fail(err, errlen, ST_ERR_TRUNCATED, "%s is truncated: the header is %llu bytes but "
                       "the file ends after %zu", path, (unsigned long long)n, f->size - 8);
        goto fail;
    }
    Json j = {(const char *)f->base + 8, (size_t)n, 0, path, err, errlen, 0};
    code = parse_header(&j, f);
    if (code) goto fail;
    f->data = f->base + 8 + n;
    f->data_size = f->size - 8 - (size_t)n;
    /* names first: a tensor listed twice would otherwise read as two that overlap */
    code = index_names(f, err, errlen);
    if (!code) code = sort_meta(f, err, errlen);
    if (!code) code = validate_offsets(f, err, errlen);
    if (code) goto fail;
    for (int i = 0; i < f->n; i++) f->e[i].data = f->data + f->e[i].begin;
    code = verify_crc(f, err, errlen);
    if (code) goto fail;
    return ST_OK;
fail:
    st_close(f);
    return code;
}

const StEntry *st_find(const StFile *f, const char *name)
{
    size_t lo = 0, hi = (size_t)f->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(f->by_name[mid]->name, name);
        if (c == 0) return f->by_name[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

const char *st_meta(const StFile *f, const char *key)
{
    size_t lo = 0, hi = (size_t)f->nmeta;   /* sorted by key (sort_meta) */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(f->meta[2 * mid], key);
        if (c == 0) return f->meta[2 * mid + 1];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

void st_close(StFile *f)
{
    if (f->base) {
        if (f->mapped) munmap(f->base, f->size);
        else free(f->base);
    }
    for (int i = 0; i < f->n; i++) free(f->e[i].name);
    for (int i = 0; i < 2 * f->nmeta; i++) free(f->meta[i]);
    free(f->e);
    free(f->meta);
    free(f->by_name);
    free(f->path);
    memset(f, 0, sizeof *f);
}
