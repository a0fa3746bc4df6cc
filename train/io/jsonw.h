/* jsonw.h — the one JSON writer. Text goes into a buffer (growing, or the
 * caller's fixed array); the writer escapes strings, formats numbers and
 * places the commas (and, pretty, the newlines and indents) between the
 * items of objects and arrays. Every JSON ctrain writes goes through it:
 * the JSON-lines records (jsonlog.h), the safetensors header
 * (safetensors.h), the benchmark file (train/bench/bench_json.h) and the
 * Chrome trace (train/bench/timeline_fmt.h).
 *
 *   JsonW w; jsonw_init(&w, 0);
 *   jsonw_obj_begin(&w, NULL);
 *   jsonw_str(&w, "model", "bert-base"); jsonw_int(&w, "batch", 32);
 *   jsonw_arr_begin(&w, "shape"); jsonw_int(&w, NULL, 2); jsonw_arr_end(&w);
 *   jsonw_obj_end(&w);            -> {"model":"bert-base","batch":32,"shape":[2]}
 *   ... w.buf (NUL-terminated, w.len bytes) ...; jsonw_free(&w);
 *
 * Style flags (jsonw_init), each what that file's readers have always had:
 *   0                    compact; numbers to 9 significant digits ("%.9g");
 *                        control characters as \u00XX
 *   JSONW_PRETTY         one item a line, two spaces an indent level, ": "
 *                        after a key (files a person reads: the bench's)
 *   JSONW_SHORT_ESCAPES  newline and tab as \n and \t
 *   JSONW_EXACT_NUMBERS  integral values below 2^53 in full (byte counts),
 *                        others to 10 significant digits
 * Non-finite numbers are written as null (JSON has no NaN or inf); a writer
 * that leaves unmeasured figures out checks before it writes. Strings are
 * bytes: '"', '\' and bytes below 0x20 escaped, the rest (UTF-8) as is.
 * Keys are escaped like strings.
 */
#ifndef CTRAIN_TRAIN_JSONW_H
#define CTRAIN_TRAIN_JSONW_H

#include <stddef.h>
#include <stdint.h>

enum {
    JSONW_PRETTY = 1,
    JSONW_SHORT_ESCAPES = 2,
    JSONW_EXACT_NUMBERS = 4,
};

#define JSONW_MAX_DEPTH 32

typedef struct JsonW {
    char *buf;                    /* the text, NUL-terminated */
    size_t len, cap;
    int fixed;                    /* buf is the caller's array: text past cap - 1 bytes is cut */
    int oom;                      /* an allocation failed or the text was cut: it is incomplete */
    int style;                    /* JSONW_* flags */
    int depth;
    unsigned char has_item[JSONW_MAX_DEPTH]; /* per depth: an item was written (comma next) */
} JsonW;

/* A growing buffer (jsonw_free releases it). */
void jsonw_init(JsonW *w, int style);
/* The caller's buf[cap] (cap >= 1), nothing to free; the text keeps its
 * first cap - 1 bytes. */
void jsonw_init_fixed(JsonW *w, char *buf, size_t cap, int style);
/* Empty again, the buffer kept. */
void jsonw_reset(JsonW *w);
void jsonw_free(JsonW *w);

/* Objects and arrays; key NULL for an array element or the top-level value. */
void jsonw_obj_begin(JsonW *w, const char *key);
void jsonw_obj_end(JsonW *w);
void jsonw_arr_begin(JsonW *w, const char *key);
void jsonw_arr_end(JsonW *w);

/* Items (key NULL in an array). A NULL string is written as null. */
void jsonw_str(JsonW *w, const char *key, const char *v);
void jsonw_int(JsonW *w, const char *key, int64_t v);
void jsonw_uint(JsonW *w, const char *key, uint64_t v);
void jsonw_num(JsonW *w, const char *key, double v);
void jsonw_bool(JsonW *w, const char *key, int v);

/* Pieces, for text around the items (a trailing newline, padding): */
void jsonw_raw(JsonW *w, const char *s);
/* One string literal, escaped, with no comma or key before it. */
void jsonw_string(JsonW *w, const char *s);

#endif
