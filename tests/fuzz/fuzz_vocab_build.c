/* fuzz_vocab_build.c — libFuzzer harness: a corpus file through
 * `ctrain vocab` (data/vocab_build.h vocab_build_opts), then the vocab it
 * writes through wordpiece_load and back over the corpus.
 *
 * Input: byte 0 picks the mode (cased, uncased, cased NFC), the score
 * (frequency, likelihood) and whether fortunes-cls's held-out entries are
 * dropped (textcls_exclude_held_out, as --exclude-held-out); byte 1 the
 * size (16 + 8 x byte 1 lines); the rest is the corpus, written to a
 * temporary directory ($TMPDIR, else /dev/shm, else /tmp; made once per
 * process, removed at exit). Checked, on a built vocab: it loads, has at
 * most `size` lines and [PAD] [UNK] [CLS] [SEP] [MASK] as ids 0-4, and (with
 * every document kept) tokenizing the corpus gives [UNK] only for words of
 * more than 100 code points, as vocab_build.h promises. A refusal must say
 * why.
 */
#include "fuzz_util.h"
#include "data/text_cls.h"
#include "data/vocab_build.h"

static char g_dir[64], g_corpus[96], g_vocab[96];

static void remove_dir(void)
{
    unlink(g_corpus);
    unlink(g_vocab);
    rmdir(g_dir);
}

static int count_long(void *ctx, const char *word, size_t nbytes, size_t nchars)
{
    (void)word, (void)nbytes;
    *(uint64_t *)ctx += nchars > WP_MAX_WORD_CHARS;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_dir[0]) {
        fuzz_quiet();
        fuzz_tmpdir(g_dir, remove_dir);
        snprintf(g_corpus, sizeof g_corpus, "%s/corpus.txt", g_dir);
        snprintf(g_vocab, sizeof g_vocab, "%s/vocab.txt", g_dir);
    }
    if (size < 2) return 0;
    int mode = data[0] % 3, filter = (data[0] >> 3) & 1;
    VocabOpts opts = {.size = 16 + 8 * data[1], .mode = mode, .score = (data[0] >> 2) & 1};
    TextClsExclude x = {.frac = 0.5};
    if (filter) {
        opts.keep = textcls_exclude_held_out;
        opts.keep_ctx = &x;
    }
    const char *text = (const char *)data + 2;
    size_t n = size - 2;
    FILE *f = fopen(g_corpus, "wb");
    if (!f || fwrite(text, 1, n, f) != n || fclose(f)) abort();
    unlink(g_vocab);

    char err[1024] = "";
    VocabStats stats;
    int st = vocab_build_opts(g_corpus, &opts, g_vocab, &stats, err, sizeof err);
    if (st) {
        fuzz_check(err[0], "vocab_build refused (%d) without a message", st);
        fuzz_check(access(g_vocab, F_OK) != 0, "a refused build left %s", g_vocab);
        return 0;
    }
    Wordpiece wp;
    st = wordpiece_load(&wp, g_vocab, mode, err, sizeof err);
    fuzz_check(st == 0, "the built vocab does not load: %s", err);
    fuzz_check(wp.V <= (uint32_t)opts.size && wp.V == stats.lines, "%u lines, size %d, stats %u",
               wp.V, opts.size, stats.lines);
    fuzz_check(wp.pad_id == 0 && wp.unk_id == 1 && wp.cls_id == 2 && wp.sep_id == 3 &&
                   wp.mask_id == 4,
               "specials at %d %d %d %d %d", wp.pad_id, wp.unk_id, wp.cls_id, wp.sep_id,
               wp.mask_id);
    if (!filter) {
        WpIds ids = {0};
        st = wordpiece_encode(&wp, &ids, text, n, err, sizeof err);
        fuzz_check(st == 0, "the corpus it was built from: %s", err);
        uint64_t unk = 0, long_words = 0;
        for (size_t i = 0; i < ids.n; i++) unk += ids.ids[i] == wp.unk_id;
        BasicTok bt;
        basictok_init(&bt, mode);
        basictok_run(&bt, text, n, count_long, &long_words, err, sizeof err);
        basictok_free(&bt);
        fuzz_check(unk == long_words, "%llu [UNK] in the corpus, %llu words over %d characters",
                   (unsigned long long)unk, (unsigned long long)long_words, WP_MAX_WORD_CHARS);
        wpids_free(&ids);
    }
    wordpiece_free(&wp);
    return 0;
}
