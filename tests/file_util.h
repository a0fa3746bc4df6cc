/* file_util.h — whole-file reads and writes for the tests that make their
 * own input files (vocabularies, corpora, damaged shards and IDX files).
 * Header-only; a failure ends the test program with the path and cause. */
#ifndef CTRAIN_TESTS_FILE_UTIL_H
#define CTRAIN_TESTS_FILE_UTIL_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Write n bytes of p as the whole file path. */
static inline void file_write(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f)) {
        fprintf(stderr, "test: cannot write %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

/* The whole file (malloc'd, NUL-terminated) and its size in *n; NULL when
 * it cannot be opened. */
static inline char *file_read(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc(len > 0 ? (size_t)len + 1 : 1);
    if (!b || len < 0 || fread(b, 1, (size_t)len, f) != (size_t)len) {
        fprintf(stderr, "test: cannot read %s\n", path);
        exit(1);
    }
    fclose(f);
    b[len] = 0;
    *n = (size_t)len;
    return b;
}

#endif
