/* file_util.h — whole-file reads and writes for the tests that make their
 * own input files (vocabularies, corpora, damaged shards and IDX files).
 * Header-only; a failure ends the test program with the path and cause. */
#ifndef CTRAIN_TESTS_FILE_UTIL_H
#define CTRAIN_TESTS_FILE_UTIL_H

#include <dirent.h>
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

/* The one file PREFIX*.txt in dir (a plan store's file, ops/plan_store.h),
 * its path into out; 0 when there is not exactly one. */
static inline int store_file(const char *dir, const char *prefix, char *out, size_t n)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    int found = 0;
    size_t lp = strlen(prefix);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (strncmp(e->d_name, prefix, lp) == 0 && l > 4 && strcmp(e->d_name + l - 4, ".txt") == 0) {
            found++;
            snprintf(out, n, "%s/%s", dir, e->d_name);
        }
    }
    closedir(d);
    return found == 1;
}

#endif
