/* fuzz_text_cls.c — libFuzzer harness: fortune files through the
 * fortunes-cls data set (data/text_cls.h), as --data fortunes-cls:DIR reads
 * them: topics, entries, the held-out split, tokenizing with a small fixed
 * vocabulary, and [CLS] text [SEP] batches of every example.
 *
 * Input: byte 0 picks the topic count (1 to 4), the held-out share (0,
 * 1/3, 2/3, 1) and whether the topics are named or the largest are taken;
 * the rest, split at NUL bytes, is up to 8 topic files "a" .. "h" in a
 * temporary directory (made once per process, removed at exit; in
 * $TMPDIR, else /dev/shm, else /tmp). Checked:
 * the split holds every example once, labels name a chosen topic, batch ids
 * are in the vocabulary and the mask covers [CLS] .. [SEP]. Every topic's
 * entries also go through textcls_exclude_held_out, the filter of
 * `ctrain vocab|shard --exclude-held-out`, which must drop exactly the
 * held-out ones. A refusal must say why.
 */
#include "fuzz_util.h"
#include "data/text_cls.h"
#include "data/text_shards.h"

#define NFILES 8
#define T 12

static char g_dir[64];
static Wordpiece g_wp;

static void remove_dir(void)
{
    char p[80];
    for (int i = 0; i < NFILES; i++) {
        snprintf(p, sizeof p, "%s/%c", g_dir, 'a' + i);
        unlink(p);
    }
    rmdir(g_dir);
}

typedef struct {
    TextClsExclude x;
    const char *path;
    double frac;
    uint32_t kept, dropped;
} Excl;

static int on_entry(void *ctx, const char *doc, size_t len)
{
    Excl *e = ctx;
    if (textcls_exclude_held_out(&e->x, e->path, 1, doc, len)) e->kept++;
    else e->dropped++;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_dir[0]) {
        fuzz_quiet();
        fuzz_tmpdir(g_dir, remove_dir);
        fuzz_vocab_init(&g_wp, WP_UNCASED);
    }
    if (!size) return 0;
    int n_topics = 1 + (data[0] & 3), named = (data[0] >> 2) & 1;
    double frac = ((data[0] >> 3) & 3) / 3.0;
    size_t pos = 1;
    int nfiles = 0;
    char path[80];
    for (; nfiles < NFILES && pos <= size; nfiles++) {
        size_t e = pos;
        while (e < size && data[e]) e++;
        snprintf(path, sizeof path, "%s/%c", g_dir, 'a' + nfiles);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(data + pos, 1, e - pos, f) != e - pos || fclose(f)) abort();
        pos = e + 1;
    }
    for (int i = nfiles; i < NFILES; i++) {
        snprintf(path, sizeof path, "%s/%c", g_dir, 'a' + i);
        unlink(path);
    }

    static const char *const names[] = {"a", "b", "c", "d"};
    TextCls ds;
    char err[512] = "";
    if (textcls_load_fortunes(&ds, g_dir, named ? names : NULL, n_topics, frac, err, sizeof err)) {
        fuzz_check(err[0], "textcls_load_fortunes refused without a message");
        return 0;
    }
    fuzz_check(ds.n_train + ds.n_test == ds.n, "split %u + %u of %u", ds.n_train, ds.n_test, ds.n);
    for (uint32_t i = 0; i < ds.n; i++)
        fuzz_check(ds.label[i] >= 0 && (uint32_t)ds.label[i] < ds.n_topics, "label %d",
                   ds.label[i]);
    if (textcls_tokenize(&ds, &g_wp, err, sizeof err) == 0) {
        int32_t ids[4 * T], tt[4 * T], mask[4 * T], labels[4];
        for (int split = 0; split < 2; split++) {
            const uint32_t *idx = split ? ds.test : ds.train;
            uint32_t n = split ? ds.n_test : ds.n_train;
            for (uint32_t b = 0; b < n; b += 4) {
                int B = n - b < 4 ? (int)(n - b) : 4;
                textcls_batch(ids, tt, mask, labels, &ds, idx + b, B, T, g_wp.cls_id,
                              g_wp.sep_id, g_wp.pad_id);
                for (int k = 0; k < B * T; k++)
                    fuzz_check(ids[k] >= 0 && (uint32_t)ids[k] < g_wp.V && tt[k] == 0 &&
                                   (mask[k] == 0 || mask[k] == 1),
                               "row %d: id %d type %d mask %d", k / T, ids[k], tt[k], mask[k]);
                for (int r = 0; r < B; r++)
                    fuzz_check(ids[r * T] == g_wp.cls_id && mask[r * T] == 1 &&
                                   labels[r] == ds.label[idx[b + r]],
                               "row %d", r);
            }
        }
    } else {
        fuzz_check(err[0], "textcls_tokenize refused without a message");
    }
    /* the pre-training filter drops exactly the held-out entries of each topic */
    for (uint32_t t = 0; t < ds.n_topics; t++) {
        snprintf(path, sizeof path, "%s/%s", g_dir, ds.topics[t]);
        FILE *f = fopen(path, "rb");
        if (!f) abort();
        static char text[1 << 20];
        size_t n = fread(text, 1, sizeof text, f);
        fclose(f);
        Excl e = {.x = {.frac = frac}, .path = path};
        shard_split_docs(text, n, SHARD_DOC_PERCENT, NULL, on_entry, &e);
        uint32_t held = 0;
        for (uint32_t i = 0; i < ds.n; i++) held += ds.label[i] == (int32_t)t && ds.held_out[i];
        fuzz_check(e.dropped == held && e.kept + e.dropped >= ds.topic_size[t],
                   "topic %s: the filter drops %u, the split holds out %u", ds.topics[t],
                   e.dropped, held);
    }
    textcls_free(&ds);
    return 0;
}
