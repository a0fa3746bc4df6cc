/* corpus.c — list a corpus's files and read them (rules in corpus.h). */
#include "corpus.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "utf8.h"
#include "engine/error.h"
#include "data_util.h"

const char *corpus_hint(int status)
{
    switch (status) {
    case CORPUS_ERR_OPEN: return "check the --corpus path (a UTF-8 text file or a folder of them)";
    case CORPUS_ERR_UTF8: return "convert the file to UTF-8 (iconv -f LATIN1 -t UTF-8) or remove "
                                 "it from the corpus";
    case CORPUS_ERR_NOMEM: return "free some memory, or use a smaller corpus";
    case CORPUS_ERR_WRITE: return "pass --out a path in an existing folder you can write to "
                                  "(with free space)";
    default: return NULL;
    }
}

typedef struct {
    char **v;
    size_t n, cap;
} PathList;

static int path_push(PathList *l, const char *p)
{
    if (data_grow((void **)&l->v, &l->cap, l->n + 1, sizeof *l->v)) return -1;
    if (!(l->v[l->n] = strdup(p))) return -1;
    l->n++;
    return 0;
}

/* Regular files below dir, recursively; no symlinks, no dot names. */
static int walk(PathList *l, const char *dir, int depth, char *err, size_t errlen)
{
    if (depth > 64)
        return ct_fail(err, errlen, CORPUS_ERR_OPEN, "%s: directories nested over 64 deep",
                       dir);
    DIR *d = opendir(dir);
    if (!d)
        return ct_fail(err, errlen, CORPUS_ERR_OPEN, "cannot open directory %s: %s", dir,
                       strerror(errno));
    int st = 0;
    struct dirent *e;
    while (!st && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        char *p = malloc(len);
        if (!p) {
            st = ct_fail(err, errlen, CORPUS_ERR_NOMEM, "out of memory listing %s", dir);
            break;
        }
        snprintf(p, len, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (lstat(p, &sb) == 0) {
            if (S_ISDIR(sb.st_mode)) st = walk(l, p, depth + 1, err, errlen);
            else if (S_ISREG(sb.st_mode) && path_push(l, p))
                st = ct_fail(err, errlen, CORPUS_ERR_NOMEM, "out of memory listing %s", dir);
        }
        free(p);
    }
    closedir(d);
    return st;
}

static int cmp_path(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int corpus_list(CorpusFiles *cf, const char *path, char *err, size_t errlen)
{
    memset(cf, 0, sizeof *cf);
    struct stat sb;
    if (stat(path, &sb) != 0)
        return ct_fail(err, errlen, CORPUS_ERR_OPEN, "cannot open corpus %s: %s", path,
                       strerror(errno));
    PathList l = {0};
    int st = 0;
    if (S_ISDIR(sb.st_mode)) {
        cf->is_dir = 1;
        size_t n = strlen(path);
        while (n > 1 && path[n - 1] == '/') n--; /* "dir/" lists as dir/x, not dir//x */
        char *dir = strndup(path, n);
        st = dir ? walk(&l, dir, 0, err, errlen)
                 : ct_fail(err, errlen, CORPUS_ERR_NOMEM, "out of memory");
        free(dir);
        if (!st && l.n == 0)
            st = ct_fail(err, errlen, CORPUS_ERR_OPEN,
                         "corpus directory %s holds no files (names starting with '.' and "
                         "symbolic links are skipped)", path);
    } else if (path_push(&l, path)) {
        st = ct_fail(err, errlen, CORPUS_ERR_NOMEM, "out of memory");
    }
    if (st) {
        for (size_t i = 0; i < l.n; i++) free(l.v[i]);
        free(l.v);
        return st;
    }
    qsort(l.v, l.n, sizeof *l.v, cmp_path);
    cf->files = l.v;
    cf->n = l.n;
    return 0;
}

void corpus_files_free(CorpusFiles *cf)
{
    for (size_t i = 0; i < cf->n; i++) free(cf->files[i]);
    free(cf->files);
    memset(cf, 0, sizeof *cf);
}

int corpus_read(const char *path, int skip_binary, char **buf, size_t *n, char *err,
                size_t errlen)
{
    *buf = NULL;
    *n = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ct_fail(err, errlen, CORPUS_ERR_OPEN, "cannot open %s: %s", path,
                       strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || S_ISDIR(sb.st_mode)) {
        close(fd);
        return ct_fail(err, errlen, CORPUS_ERR_OPEN, "cannot read %s: %s", path,
                       strerror(S_ISDIR(sb.st_mode) ? EISDIR : errno));
    }
    size_t cap = sb.st_size > 0 ? (size_t)sb.st_size + 1 : 4096, len = 0;
    char *b = malloc(cap);
    if (!b) {
        close(fd);
        return ct_fail(err, errlen, CORPUS_ERR_NOMEM, "out of memory reading %s", path);
    }
    for (;;) {
        if (len + 1 >= cap && data_grow((void **)&b, &cap, len + 4096, 1)) {
            free(b);
            close(fd);
            return ct_fail(err, errlen, CORPUS_ERR_NOMEM, "out of memory reading %s", path);
        }
        ssize_t r = read(fd, b + len, cap - len - 1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            free(b);
            close(fd);
            return ct_fail(err, errlen, CORPUS_ERR_OPEN, "cannot read %s: %s", path,
                           strerror(e));
        }
        if (r == 0) break;
        len += (size_t)r;
    }
    close(fd);
    b[len] = 0;
    if (skip_binary && memchr(b, 0, len < 4096 ? len : 4096)) {
        free(b);
        return 1;
    }
    size_t bad;
    char msg[200];
    if (utf8_validate(b, len, &bad, msg, sizeof msg)) {
        free(b);
        return ct_fail(err, errlen, CORPUS_ERR_UTF8, "%s: %s", path, msg);
    }
    *buf = b;
    *n = len;
    return 0;
}
