/* plan_store.c — searched choices on disk, one file per family and machine
 * (plan_store.h says what the file holds and how it is written). */
#include "plan_store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/atomic_file.h"
#include "engine/error.h"
#include "engine/log.h"
#include "engine/settings.h"

#define STORE_HEADER                                                                   \
    "# ctrain plan store, format 1: \"key<TAB>value\" a line after the identity; delete " \
    "the file to search again"
#define STORE_FILE_MAX (8u << 20)

typedef struct {
    char *key, *value;
} Pair;

struct PlanStore {
    char *path;       /* NULL: memory only */
    char *lock_path;
    char *identity;
    Pair *p;
    int n, cap;
    int skipped;      /* lines of the file that did not parse */
    int said_write;   /* a failed write said once */
};

/* ---- pairs ---- */

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    CT_ASSERT(d != NULL, "plan_store: out of host memory");
    memcpy(d, s, n);
    return d;
}

/* A key or value the file can hold: non-empty, shorter than max, printable
 * ASCII (space included, tab excluded). */
static int storable(const char *s, size_t max)
{
    size_t n = 0;
    for (; s[n]; n++)
        if ((unsigned char)s[n] < 0x20 || (unsigned char)s[n] > 0x7e) return 0;
    return n > 0 && n < max;
}

static int find(const PlanStore *s, const char *key)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->p[i].key, key) == 0) return i;
    return -1;
}

static void set_pair(PlanStore *s, const char *key, const char *value)
{
    int i = find(s, key);
    if (i >= 0) {
        free(s->p[i].value);
        s->p[i].value = dup_str(value);
        return;
    }
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 32;
        Pair *grown = realloc(s->p, sizeof(Pair) * (size_t)cap);
        CT_ASSERT(grown != NULL, "plan_store: out of host memory for %d pairs", cap);
        s->p = grown;
        s->cap = cap;
    }
    s->p[s->n].key = dup_str(key);
    s->p[s->n].value = dup_str(value);
    s->n++;
}

static void clear_pairs(PlanStore *s)
{
    for (int i = 0; i < s->n; i++) {
        free(s->p[i].key);
        free(s->p[i].value);
    }
    s->n = 0;
}

/* ---- the file ---- */

/* The pairs of the file at s->path added to `into` (which may be s): 0, or
 * -1 when the file is absent, too large, of another format or identity
 * (nothing added). Lines that do not parse are counted in *skipped. */
static int read_file(const PlanStore *s, PlanStore *into, int *skipped, int quiet)
{
    FILE *f = fopen(s->path, "rb");
    if (!f) return -1;
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || st.st_size > (off_t)STORE_FILE_MAX) {
        if (!quiet)
            LOG_W("plan store %s is over %u MiB: not read (delete it; plans are searched again)",
                  s->path, STORE_FILE_MAX >> 20);
        fclose(f);
        return -1;
    }
    char line[PLAN_STORE_KEY_MAX + PLAN_STORE_VALUE_MAX + 16];
    int ok = fgets(line, sizeof line, f) && strncmp(line, STORE_HEADER, strlen(STORE_HEADER)) == 0;
    size_t idl = strlen(s->identity);
    ok = ok && fgets(line, sizeof line, f) && strncmp(line, "identity\t", 9) == 0 &&
         strncmp(line + 9, s->identity, idl) == 0 && line[9 + idl] == '\n';
    if (!ok) {
        if (!quiet)
            LOG_I("plan store %s: another format or machine; its plans are searched again and "
                  "the file replaced", s->path);
        fclose(f);
        return -1;
    }
    while (fgets(line, sizeof line, f)) {
        size_t n = strlen(line);
        const int whole = n > 0 && line[n - 1] == '\n';
        if (!whole) { /* too long for any pair, or a last line without its end */
            (*skipped)++;
            int ch;
            while ((ch = fgetc(f)) != EOF && ch != '\n') {}
            continue;
        }
        line[n - 1] = '\0';
        char *tab = strchr(line, '\t');
        if (!tab) {
            (*skipped)++;
            continue;
        }
        *tab = '\0';
        if (!storable(line, PLAN_STORE_KEY_MAX) || !storable(tab + 1, PLAN_STORE_VALUE_MAX)) {
            (*skipped)++;
            continue;
        }
        set_pair(into, line, tab + 1);
    }
    fclose(f);
    return 0;
}

/* mkdir -p of path's folder: 0, or -1 with errno set. */
static int make_dirs(const char *dir)
{
    char buf[1024];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *q = buf + 1; *q; q++) {
        if (*q != '/') continue;
        *q = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
        *q = '/';
    }
    return mkdir(buf, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

static void say_write_failed(PlanStore *s, const char *what)
{
    if (s->said_write) return;
    s->said_write = 1;
    LOG_W("cannot keep searched plans in %s (%s): the next run searches again; set "
          "CTRAIN_PLAN_CACHE to a writable folder, or to off", s->path, what);
}

/* ---- the API ---- */

const char *plan_store_default_dir(char *buf, size_t n)
{
    const char *v = setting_str(SET_PLAN_CACHE);
    if (v && strcmp(v, "off") == 0) return NULL;
    int w;
    if (v) w = snprintf(buf, n, "%s", v);
    else if ((v = setting_str(SET_XDG_CACHE_HOME)) != NULL) w = snprintf(buf, n, "%s/ctrain", v);
    else if ((v = setting_str(SET_HOME)) != NULL) w = snprintf(buf, n, "%s/.cache/ctrain", v);
    else return NULL;
    return w > 0 && (size_t)w < n ? buf : NULL;
}

PlanStore *plan_store_open(const char *dir, const char *family, const char *identity)
{
    PlanStore *s = calloc(1, sizeof *s);
    CT_ASSERT(s != NULL, "plan_store: out of host memory");
    s->identity = dup_str(identity);
    for (char *q = s->identity; *q; q++) /* one line of printable ASCII */
        if ((unsigned char)*q < 0x20 || (unsigned char)*q > 0x7e) *q = ' ';
    if (!dir || !*dir) return s;
    /* FAMILY-IDENTITY: letters and digits lowered, every other run one '-' */
    char slug[160];
    size_t k = 0;
    for (const char *q = identity; *q && k < sizeof slug - 1; q++) {
        char ch = *q;
        if (ch >= 'A' && ch <= 'Z') ch = (char)(ch - 'A' + 'a');
        if ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9')) slug[k++] = ch;
        else if (k > 0 && slug[k - 1] != '-') slug[k++] = '-';
    }
    while (k > 0 && slug[k - 1] == '-') k--;
    slug[k] = '\0';
    size_t pl = strlen(dir) + strlen(family) + k + 16;
    s->path = malloc(pl);
    s->lock_path = malloc(pl + 8);
    CT_ASSERT(s->path && s->lock_path, "plan_store: out of host memory");
    snprintf(s->path, pl, "%s/%s-%s.txt", dir, family, slug);
    snprintf(s->lock_path, pl + 8, "%s.lock", s->path);
    if (read_file(s, s, &s->skipped, 0) == 0) {
        if (s->skipped)
            LOG_W("plan store %s: %d unreadable line%s skipped (searched again, and dropped "
                  "when the file is next written)", s->path, s->skipped,
                  s->skipped == 1 ? "" : "s");
        LOG_D("plan store %s: %d plan%s read", s->path, s->n, s->n == 1 ? "" : "s");
    }
    return s;
}

PlanStore *plan_store_open_default(const char *family, const char *identity, const char *what)
{
    char dir[1024];
    PlanStore *s = plan_store_open(plan_store_default_dir(dir, sizeof dir), family, identity);
    if (plan_store_count(s) > 0)
        LOG_I("%d %s kept by earlier runs on this card are taken from %s (CTRAIN_PLAN_CACHE=off "
              "searches afresh)", plan_store_count(s), what, plan_store_path(s));
    return s;
}

void plan_store_close(PlanStore *s)
{
    if (!s) return;
    clear_pairs(s);
    free(s->p);
    free(s->path);
    free(s->lock_path);
    free(s->identity);
    free(s);
}

const char *plan_store_get(const PlanStore *s, const char *key)
{
    int i = find(s, key);
    return i >= 0 ? s->p[i].value : NULL;
}

int plan_store_put(PlanStore *s, const char *key, const char *value)
{
    if (!storable(key, PLAN_STORE_KEY_MAX) || !storable(value, PLAN_STORE_VALUE_MAX)) return -1;
    set_pair(s, key, value);
    if (!s->path || s->said_write) return 1;

    char dir[1024];
    snprintf(dir, sizeof dir, "%s", s->path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    if (slash && make_dirs(dir) != 0) {
        say_write_failed(s, strerror(errno));
        return 1;
    }
    int lk = open(s->lock_path, O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (lk < 0 || flock(lk, LOCK_EX) != 0) {
        say_write_failed(s, strerror(errno));
        if (lk >= 0) close(lk);
        return 1;
    }
    /* what is on disk now (other processes' pairs), then ours over it */
    PlanStore merged = {0};
    merged.identity = s->identity;
    merged.path = s->path;
    int skipped = 0;
    read_file(s, &merged, &skipped, 1);
    for (int i = 0; i < s->n; i++) set_pair(&merged, s->p[i].key, s->p[i].value);

    char tmp[1100], err[1200];
    int rc = 1;
    FILE *f = atomic_file_open(s->path, tmp, sizeof tmp, err, sizeof err);
    if (f) {
        fprintf(f, "%s\nidentity\t%s\n", STORE_HEADER, s->identity);
        for (int i = 0; i < merged.n; i++)
            fprintf(f, "%s\t%s\n", merged.p[i].key, merged.p[i].value);
        rc = atomic_file_commit(f, tmp, s->path, err, sizeof err) == 0 ? 0 : 1;
    }
    if (rc) say_write_failed(s, err);
    clear_pairs(&merged);
    free(merged.p);
    flock(lk, LOCK_UN);
    close(lk);
    return rc;
}

const char *plan_store_path(const PlanStore *s) { return s->path; }
int plan_store_count(const PlanStore *s) { return s->n; }
int plan_store_skipped(const PlanStore *s) { return s->skipped; }
