/* json_read.h — a small JSON reader for the tests that walk the bench's
 * file (test_bench, test_bench_data): jparse_file reads a whole document
 * into a tree of J values (NULL when it is not JSON); jget / jnum / jtext
 * look a key up (NAN / "" when absent or of another type). The read buffer
 * is static (1 MiB): parse one file, then the next. Header-only; include
 * once per test program, after check.h.
 */
#ifndef CTRAIN_TESTS_JSON_READ_H
#define CTRAIN_TESTS_JSON_READ_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } JType;
typedef struct J {
    JType t;
    double num;
    char *str;              /* J_STR */
    struct J **items;       /* J_ARR, J_OBJ values */
    char **keys;            /* J_OBJ */
    int n;
} J;

static const char *jp;
static int jbad;

static inline void jws(void) { while (*jp == ' ' || *jp == '\n' || *jp == '\t' || *jp == '\r') jp++; }

static inline char *jstr(void)
{
    if (*jp != '"') { jbad = 1; return NULL; }
    jp++;
    char *s = malloc(strlen(jp) + 1);
    size_t n = 0;
    while (*jp && *jp != '"') {
        if (*jp == '\\') {
            jp++;
            if (*jp == 'u') { s[n++] = '?'; jp += 5; continue; }
            s[n++] = *jp == 'n' ? '\n' : *jp == 't' ? '\t' : *jp;
            jp++;
            continue;
        }
        s[n++] = *jp++;
    }
    if (*jp != '"') jbad = 1; else jp++;
    s[n] = 0;
    return s;
}

static inline J *jval(void)
{
    J *v = calloc(1, sizeof *v);
    jws();
    if (*jp == '{' || *jp == '[') {
        int obj = *jp == '{';
        v->t = obj ? J_OBJ : J_ARR;
        jp++;
        jws();
        while (!jbad && *jp != (obj ? '}' : ']')) {
            v->items = realloc(v->items, (size_t)(v->n + 1) * sizeof *v->items);
            v->keys = realloc(v->keys, (size_t)(v->n + 1) * sizeof *v->keys);
            v->keys[v->n] = NULL;
            if (obj) {
                jws();
                v->keys[v->n] = jstr();
                jws();
                if (*jp++ != ':') jbad = 1;
            }
            v->items[v->n++] = jval();
            jws();
            if (*jp == ',') jp++;
            else if (*jp != (obj ? '}' : ']')) jbad = 1;
            jws();
        }
        if (*jp) jp++;
    } else if (*jp == '"') {
        v->t = J_STR;
        v->str = jstr();
    } else if (!strncmp(jp, "true", 4) || !strncmp(jp, "false", 5)) {
        v->t = J_BOOL;
        v->num = *jp == 't';
        jp += *jp == 't' ? 4 : 5;
    } else if (!strncmp(jp, "null", 4)) {
        v->t = J_NULL;
        jp += 4;
    } else {
        char *end;
        v->t = J_NUM;
        v->num = strtod(jp, &end);
        if (end == jp) jbad = 1;
        jp = end;
    }
    return v;
}

static inline void jfree(J *v)
{
    if (!v) return;
    for (int i = 0; i < v->n; i++) {
        jfree(v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
    free(v);
}

static inline J *jparse_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    jp = buf;
    jbad = 0;
    J *v = jval();
    jws();
    if (jbad || *jp) { jfree(v); return NULL; }
    return v;
}

static inline J *jget(const J *o, const char *key)
{
    if (!o || o->t != J_OBJ) return NULL;
    for (int i = 0; i < o->n; i++) if (!strcmp(o->keys[i], key)) return o->items[i];
    return NULL;
}

static inline double jnum(const J *o, const char *key)
{
    J *v = jget(o, key);
    return v && v->t == J_NUM ? v->num : NAN;
}

static inline const char *jtext(const J *o, const char *key)
{
    J *v = jget(o, key);
    return v && v->t == J_STR ? v->str : "";
}

#endif
