/* text_cls.c — the fortunes classification set: topics, entries, the
 * held-out split and [CLS] text [SEP] batches (see text_cls.h).
 *
 * Two passes over the directory: the first counts each topic's entries (to
 * pick the largest), the second keeps the chosen topics' entries.
 */
#include "text_cls.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "corpus.h"
#include "text_shards.h"
#include "engine/error.h"
#include "data_util.h"

static uint64_t fnv1a64(const char *s) { return data_fnv1a64(DATA_FNV64_BASIS, s, strlen(s)); }

const char *textcls_hint(int status, const char *dir)
{
    switch (status) {
    case TEXTCLS_OK: return NULL;
    case TEXTCLS_ERR_OPEN:
        return dir ? "check the path: --data fortunes-cls:DIR takes a folder of fortune files"
                   : "install the fortunes package (bash scripts/setup.sh, or apt-get install "
                     "fortunes), or pass --data fortunes-cls:DIR with a folder of fortune files";
    case TEXTCLS_ERR_READ: return "check the file's permissions, or remove it from the folder";
    case TEXTCLS_ERR_UTF8: return "convert the file to UTF-8 (iconv -f LATIN1 -t UTF-8) or "
                                  "remove it from the folder";
    case TEXTCLS_ERR_EMPTY: return "--data fortunes-cls:DIR takes a folder of fortune files "
                                   "(entries separated by lines holding a single '%')";
    case TEXTCLS_ERR_TOPICS: return "pass a smaller --classes";
    default: return "free some memory and retry";
    }
}

/* The split rule of text_cls.h. */
static int held_out(uint64_t topic_hash, uint32_t entry, double frac)
{
    uint64_t h = data_mix64((topic_hash ^ entry) + DATA_MIX64_GOLDEN) % 1000000u; /* splitmix64 */
    return (double)h < frac * 1e6;
}

int textcls_entry_held_out(const char *topic, uint32_t entry, double held_out_frac)
{
    return held_out(fnv1a64(topic), entry, held_out_frac);
}

/* ---- collecting entries ----------------------------------------------------- */

typedef struct {
    TextCls *ds;
    int keep;             /* 0: count only */
    uint32_t count;       /* entries of the current file */
    int32_t label;
    uint64_t topic_hash;
    double frac;
    size_t blob_n, blob_cap, cap;
    int nomem;
} Collect;

static int is_blank_text(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\n' && p[i] != '\r' && p[i] != '\v' &&
            p[i] != '\f')
            return 0;
    return 1;
}

static int collect_entry(void *ctx, const char *doc, size_t len)
{
    Collect *c = ctx;
    if (is_blank_text(doc, len)) return 0;
    uint32_t idx = c->count++;
    if (!c->keep) return 0;
    TextCls *ds = c->ds;
    if (ds->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 1024;
        uint64_t *o = realloc(ds->text_off, cap * sizeof *o);
        if (o) ds->text_off = o;
        int32_t *l = o ? realloc(ds->label, cap * sizeof *l) : NULL;
        if (l) ds->label = l;
        uint8_t *h = l ? realloc(ds->held_out, cap) : NULL;
        if (!h) return c->nomem = 1;
        ds->held_out = h;
        c->cap = cap;
    }
    if (c->blob_n + len + 1 > c->blob_cap) {
        size_t cap = c->blob_cap ? c->blob_cap : 1 << 16;
        while (cap < c->blob_n + len + 1) cap *= 2;
        char *b = realloc(ds->blob, cap);
        if (!b) return c->nomem = 1;
        ds->blob = b;
        c->blob_cap = cap;
    }
    memcpy(ds->blob + c->blob_n, doc, len);
    ds->blob[c->blob_n + len] = 0;
    ds->text_off[ds->n] = c->blob_n;
    c->blob_n += len + 1;
    ds->label[ds->n] = c->label;
    ds->held_out[ds->n] = held_out(c->topic_hash, idx, c->frac);
    ds->n++;
    return 0;
}

/* Entries of dir/name into c; 0, or a negative TextClsStatus with err. */
static int read_topic(Collect *c, const char *dir, const char *name, char *err, size_t errlen)
{
    size_t l = strlen(dir) + strlen(name) + 2;
    char *path = malloc(l);
    if (!path) return ct_fail(err, errlen, TEXTCLS_ERR_NOMEM, "out of memory");
    snprintf(path, l, "%s/%s", dir, name);
    char *text;
    size_t n;
    int st = corpus_read(path, 1, &text, &n, err, errlen);
    free(path);
    if (st < 0)
        return st == CORPUS_ERR_UTF8 ? TEXTCLS_ERR_UTF8
               : st == CORPUS_ERR_NOMEM ? TEXTCLS_ERR_NOMEM : TEXTCLS_ERR_READ;
    c->count = 0;
    if (st == 0) {
        shard_split_docs(text, n, SHARD_DOC_PERCENT, NULL, collect_entry, c);
        free(text);
    }
    if (c->nomem)
        return ct_fail(err, errlen, TEXTCLS_ERR_NOMEM, "out of memory reading %s/%s", dir, name);
    return 0;
}

typedef struct {
    char *name;
    uint32_t count;
} Topic;

static int by_count(const void *a, const void *b)
{
    const Topic *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const Topic *)a)->name, ((const Topic *)b)->name);
}

/* Topic files of dir: regular files, names without '.' (not NAME.dat or
 * NAME.u8), each with its entry count. */
static int list_topics(Topic **out, size_t *nout, const char *dir, char *err, size_t errlen)
{
    *out = NULL;
    *nout = 0;
    DIR *d = opendir(dir);
    if (!d)
        return ct_fail(err, errlen, TEXTCLS_ERR_OPEN, "cannot open fortunes directory %s: %s",
                       dir, strerror(errno));
    Topic *t = NULL;
    size_t n = 0, cap = 0;
    int st = 0;
    struct dirent *e;
    Collect c = {0};
    while (!st && (e = readdir(d))) {
        if (e->d_name[0] == '.' || strchr(e->d_name, '.')) continue;
        size_t l = strlen(dir) + strlen(e->d_name) + 2;
        char *path = malloc(l);
        if (!path) { st = ct_fail(err, errlen, TEXTCLS_ERR_NOMEM, "out of memory"); break; }
        snprintf(path, l, "%s/%s", dir, e->d_name);
        struct stat sb;
        int regular = lstat(path, &sb) == 0 && S_ISREG(sb.st_mode);
        free(path);
        if (!regular) continue;
        if ((st = read_topic(&c, dir, e->d_name, err, errlen))) break;
        if (!c.count) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            Topic *q = realloc(t, cap * sizeof *q);
            if (!q) { st = ct_fail(err, errlen, TEXTCLS_ERR_NOMEM, "out of memory"); break; }
            t = q;
        }
        if (!(t[n].name = strdup(e->d_name))) { st = ct_fail(err, errlen, TEXTCLS_ERR_NOMEM, "out of memory"); break; }
        t[n++].count = c.count;
    }
    closedir(d);
    if (st) {
        for (size_t i = 0; i < n; i++) free(t[i].name);
        free(t);
        return st;
    }
    *out = t;
    *nout = n;
    return 0;
}

int textcls_load_fortunes(TextCls *ds, const char *dir, const char *const *topics,
                          int n_topics, double held_out_frac, char *err, size_t errlen)
{
    memset(ds, 0, sizeof *ds);
    if (!dir) dir = FORTUNES_DEFAULT_DIR;
    if (n_topics < 1)
        return ct_fail(err, errlen, TEXTCLS_ERR_TOPICS, "need at least 1 topic (got %d)", n_topics);
    Topic *all;
    size_t nall;
    int st = list_topics(&all, &nall, dir, err, errlen);
    if (st) return st;
    if (!nall) st = ct_fail(err, errlen, TEXTCLS_ERR_EMPTY, "%s holds no fortune files", dir);
    Topic *chosen = calloc((size_t)n_topics, sizeof *chosen);
    if (!st && !chosen) st = ct_fail(err, errlen, TEXTCLS_ERR_NOMEM, "out of memory");
    if (!st && topics) {
        for (int i = 0; i < n_topics && !st; i++) {
            size_t k = 0;
            while (k < nall && strcmp(all[k].name, topics[i])) k++;
            if (k == nall)
                st = ct_fail(err, errlen, TEXTCLS_ERR_TOPICS, "no fortune topic \"%s\" in %s",
                             topics[i], dir);
            else
                chosen[i] = all[k];
        }
    } else if (!st) {
        if ((size_t)n_topics > nall)
            st = ct_fail(err, errlen, TEXTCLS_ERR_TOPICS, "%s has %zu fortune topics, %d were "
                         "asked for", dir, nall, n_topics);
        else {
            qsort(all, nall, sizeof *all, by_count);
            memcpy(chosen, all, (size_t)n_topics * sizeof *chosen);
        }
    }
    if (!st) {
        qsort(chosen, (size_t)n_topics, sizeof *chosen, by_name);
        for (int i = 1; i < n_topics && !st; i++)
            if (!strcmp(chosen[i].name, chosen[i - 1].name))
                st = ct_fail(err, errlen, TEXTCLS_ERR_TOPICS, "topic \"%s\" listed twice",
                             chosen[i].name);
    }
    if (!st) {
        ds->n_topics = (uint32_t)n_topics;
        ds->topics = calloc((size_t)n_topics, sizeof *ds->topics);
        ds->topic_size = calloc((size_t)n_topics, sizeof *ds->topic_size);
        if (!ds->topics || !ds->topic_size) st = ct_fail(err, errlen, TEXTCLS_ERR_NOMEM, "out of memory");
    }
    Collect c = {.ds = ds, .keep = 1, .frac = held_out_frac};
    for (int i = 0; i < n_topics && !st; i++) {
        if (!(ds->topics[i] = strdup(chosen[i].name))) {
            st = ct_fail(err, errlen, TEXTCLS_ERR_NOMEM, "out of memory");
            break;
        }
        c.label = i;
        c.topic_hash = fnv1a64(chosen[i].name);
        st = read_topic(&c, dir, chosen[i].name, err, errlen);
        ds->topic_size[i] = c.count;
    }
    free(chosen);
    for (size_t i = 0; i < nall; i++) free(all[i].name);
    free(all);
    if (!st) {
        ds->train = malloc((ds->n ? ds->n : 1) * sizeof *ds->train);
        ds->test = malloc((ds->n ? ds->n : 1) * sizeof *ds->test);
        if (!ds->train || !ds->test) st = ct_fail(err, errlen, TEXTCLS_ERR_NOMEM, "out of memory");
        for (uint32_t i = 0; !st && i < ds->n; i++) {
            if (ds->held_out[i]) ds->test[ds->n_test++] = i;
            else ds->train[ds->n_train++] = i;
        }
    }
    if (st) textcls_free(ds);
    return st;
}

int textcls_exclude_held_out(void *ctx, const char *path, int fortune_file, const char *doc,
                             size_t len)
{
    TextClsExclude *x = ctx;
    if (!x->path || strcmp(x->path, path)) {
        x->path = path;
        x->entry = 0;
    }
    if (!fortune_file || is_blank_text(doc, len)) return 1;   /* not an entry of the split */
    const char *slash = strrchr(path, '/'), *name = slash ? slash + 1 : path;
    /* NAME.u8 is the package's link to NAME: a copy that followed the links
     * holds the same entries twice, and both must go the same way */
    char topic[256];
    size_t n = strlen(name);
    if (n > 3 && n - 3 < sizeof topic && !strcmp(name + n - 3, ".u8")) {
        memcpy(topic, name, n - 3);
        topic[n - 3] = 0;
        name = topic;
    }
    return !textcls_entry_held_out(name, x->entry++, x->frac);
}

const char *textcls_text(const TextCls *ds, uint32_t i) { return ds->blob + ds->text_off[i]; }

int textcls_tokenize(TextCls *ds, Wordpiece *wp, char *err, size_t errlen)
{
    WpIds ids = {0};
    free(ds->ids_off);
    ds->ids_off = malloc(((size_t)ds->n + 1) * sizeof *ds->ids_off);
    if (!ds->ids_off) return ct_fail(err, errlen, TEXTCLS_ERR_NOMEM, "out of memory");
    ds->ids_off[0] = 0;
    for (uint32_t i = 0; i < ds->n; i++) {
        const char *t = textcls_text(ds, i);
        char msg[256];
        int r = wordpiece_encode(wp, &ids, t, strlen(t), msg, sizeof msg);
        if (r) {
            wpids_free(&ids);
            return ct_fail(err, errlen, r == WP_ERR_UTF8 ? TEXTCLS_ERR_UTF8 : TEXTCLS_ERR_NOMEM,
                           "fortune topic %s: %s", ds->topics[ds->label[i]],
                           r == WP_ERR_UTF8 ? msg : "out of memory tokenizing");
        }
        ds->ids_off[i + 1] = ids.n;
    }
    free(ds->ids);
    ds->ids = ids.ids; /* owned by ds now */
    return 0;
}

void textcls_batch(int32_t *input_ids, int32_t *token_type_ids, int32_t *attention_mask,
                   int32_t *labels, const TextCls *ds, const uint32_t *idx, int B, int T,
                   int32_t cls_id, int32_t sep_id, int32_t pad_id)
{
    for (int b = 0; b < B; b++) {
        uint32_t i = idx[b];
        int32_t *x = input_ids + (size_t)b * T, *m = attention_mask + (size_t)b * T;
        uint64_t n = ds->ids_off[i + 1] - ds->ids_off[i];
        int len = n > (uint64_t)(T - 2) ? T - 2 : (int)n, t = 0;
        x[t++] = cls_id;
        /* ds->ids is NULL when every entry tokenized to nothing: NULL + 0 is UB */
        if (len > 0) memcpy(x + t, ds->ids + ds->ids_off[i], (size_t)len * sizeof *x);
        t += len;
        x[t++] = sep_id;
        for (int k = 0; k < T; k++) m[k] = k < t;
        for (; t < T; t++) x[t] = pad_id;
        if (token_type_ids) memset(token_type_ids + (size_t)b * T, 0, (size_t)T * sizeof(int32_t));
        labels[b] = ds->label[i];
    }
}

void textcls_free(TextCls *ds)
{
    for (uint32_t i = 0; ds->topics && i < ds->n_topics; i++) free(ds->topics[i]);
    free(ds->topics);
    free(ds->topic_size);
    free(ds->blob);
    free(ds->text_off);
    free(ds->label);
    free(ds->held_out);
    free(ds->train);
    free(ds->test);
    free(ds->ids);
    free(ds->ids_off);
    memset(ds, 0, sizeof *ds);
}
