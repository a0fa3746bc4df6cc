/* test_wordpiece.c — the BERT tokenizer, the vocab builder and vocab files.
 *
 * Tokenizer: a hand-written vocab (written by the test) and cases whose
 * expected tokens are what Hugging Face's BertTokenizer gives (uncased and
 * cased): punctuation, accents (precomposed and combining), CJK, [UNK], the
 * 100-character word limit, greedy WordPiece, whitespace and control
 * characters, final sigma, and invalid UTF-8 refused with its byte offset.
 * Vocab builder: a generated corpus (files in a tree, plus a hidden file, a
 * binary file and a symlink that must be skipped): specials first, every
 * character in both forms, the size respected, byte-identical output on a
 * second run, and no [UNK] when the corpus is tokenized with the result.
 * Vocab files: a UTF-8 byte-order mark is dropped; the vocabulary hash is
 * FNV-1a 64 of the tokens joined by '\n' (computed here from the file's
 * bytes) and tells a reordered vocab of the same size apart; every failure
 * has one hint, by status, none in the message.
 * (Token shards: test_text_shards.c.)
 * Temp files live in one mkdtemp directory, removed at the end.
 */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "data/utf8.h"
#include "data/vocab_build.h"
#include "data/wordpiece.h"
#include "engine/log.h"
/* check.h's helpers are static; this program does not use all of them. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "check.h"
#pragma GCC diagnostic pop
#include "file_util.h"
#include "text_corpus.h"

static char tmp[256];

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void check_msg(const char *name, const char *err, const char *want)
{
    check_true(name, strstr(err, want) != NULL, "message \"%s\" lacks \"%s\"", err, want);
}

/* text (len bytes) through wp; expect the tokens joined by spaces. */
static void check_tok_n(const char *name, Wordpiece *wp, const char *text, size_t len,
                        const char *want)
{
    WpIds ids = {0};
    char err[256] = "", got[2048];
    int st = wordpiece_encode(wp, &ids, text, len, err, sizeof err);
    wordpiece_join(got, sizeof got, wp, ids.ids, ids.n);
    check_true(name, st == 0 && !strcmp(got, want), "got \"%s\" (status %d %s), want \"%s\"",
               got, st, err, want);
    wpids_free(&ids);
}

static void check_tok(const char *name, Wordpiece *wp, const char *text, const char *want)
{
    check_tok_n(name, wp, text, strlen(text), want);
}

static const char *const VOCAB[] = {
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", ",", "!", "don", "'",
    "t", "cafe", "naive", "resume", "Café", "naïve", "résumé", "我", "爱", "北", "京", "un",
    "##aff", "##able", "a", "##a", "##world", "οδος", "σοφος", "ς", "привет", "—", "«",
    "»", "$", "5", "Hello", "World", "é", "##é", "ハ", "##ン", "Cafe", "##\xcc\x81",
};

static void test_tokenizer(void)
{
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/vocab.txt", tmp);
    FILE *f = fopen(path, "w");
    for (size_t i = 0; i < sizeof VOCAB / sizeof *VOCAB; i++) fprintf(f, "%s\n", VOCAB[i]);
    fclose(f);
    Wordpiece un, ca, cn;
    int st = wordpiece_load(&un, path, WP_UNCASED, err, sizeof err);
    check_true("vocab.load", st == 0, "status %d: %s", st, err);
    if (st) return;
    wordpiece_load(&ca, path, WP_CASED, err, sizeof err);
    wordpiece_load(&cn, path, WP_CASED_NFC, err, sizeof err);
    check_true("vocab.specials", un.pad_id == 0 && un.unk_id == 1 && un.cls_id == 2 &&
               un.sep_id == 3 && un.mask_id == 4 && un.V == sizeof VOCAB / sizeof *VOCAB,
               "pad %d unk %d cls %d sep %d mask %d V %u", un.pad_id, un.unk_id, un.cls_id,
               un.sep_id, un.mask_id, un.V);
    check_true("vocab.lookup", wordpiece_id(&un, "##aff") == 23 &&
               !strcmp(wordpiece_token(&un, 22), "un") && wordpiece_id(&un, "nope") == -1,
               "id(##aff) %d", wordpiece_id(&un, "##aff"));

    check_tok("tok.hello_world", &un, "Hello, World!", "hello , world !");
    check_tok("tok.hello_world_cased", &ca, "Hello, World!", "Hello , World !");
    check_tok("tok.accents_uncased", &un, "Café naïve résumé", "cafe naive resume");
    check_tok("tok.accents_cased", &ca, "Café naïve résumé", "Café naïve résumé");
    /* combining acute (NFD input): kept as it is for cased (transformers 5's
     * BertTokenizer, BertTokenizerFast), composed for --cased-nfc
     * (transformers 4.x's Python BertTokenizer), stripped for uncased */
    check_tok("tok.combining_cased", &ca, "Cafe\xcc\x81", "Cafe ##\xcc\x81");
    check_tok("tok.combining_cased_nfc", &cn, "Cafe\xcc\x81", "Café");
    check_tok("tok.combining_uncased", &un, "CAFE\xcc\x81", "cafe");
    check_tok("tok.precomposed_cased_nfc", &cn, "Café naïve", "Café naïve");
    check_tok("tok.apostrophe", &un, "don't", "don ' t");
    check_tok("tok.chinese", &un, "我爱北京", "我 爱 北 京");
    check_tok("tok.chinese_in_word", &un, "hello我world", "hello 我 world");
    check_tok("tok.unknown", &un, "hello qqq world", "hello [UNK] world");
    check_tok("tok.partial_unknown", &un, "unaffablex", "[UNK]");
    check_tok("tok.wordpiece", &un, "unaffable", "un ##aff ##able");
    char word[128];
    memset(word, 'a', 101);
    word[101] = 0;
    check_tok("tok.101_chars_unk", &un, word, "[UNK]");
    {
        WpIds ids = {0};
        wordpiece_encode(&un, &ids, word, 100, err, sizeof err);
        int ok = ids.n == 100 && ids.ids[0] == 25;
        for (size_t i = 1; ok && i < ids.n; i++) ok = ids.ids[i] == 26;
        check_true("tok.100_chars", ok, "%zu ids, want a + 99 x ##a", ids.n);
        wpids_free(&ids);
    }
    /* 101 accented characters are 202 bytes: the limit counts characters */
    {
        char w2[256] = "";
        for (int i = 0; i < 100; i++) strcat(w2, "\xc3\xa9"); /* é */
        WpIds ids = {0};
        wordpiece_encode(&ca, &ids, w2, strlen(w2), err, sizeof err);
        check_true("tok.100_chars_utf8", ids.n == 100 && ids.ids[0] == 39,
                   "%zu ids (first %d)", ids.n, ids.n ? ids.ids[0] : -1);
        strcat(w2, "\xc3\xa9");
        ids.n = 0;
        wordpiece_encode(&ca, &ids, w2, strlen(w2), err, sizeof err);
        check_true("tok.101_chars_utf8_unk", ids.n == 1 && ids.ids[0] == 1, "%zu ids", ids.n);
        wpids_free(&ids);
    }
    check_tok("tok.whitespace", &un, "\thello\r\nworld\xc2\xa0hello\xe3\x80\x80world  \n",
              "hello world hello world");
    check_tok("tok.line_separator", &un, "hello\xe2\x80\xa8world", "hello world");
    check_tok("tok.only_space", &un, " \t\r\n\xc2\xa0", "");
    check_tok("tok.empty", &un, "", "");
    /* controls (Cc, Cf), U+FFFD and NUL are dropped and join their neighbours */
    check_tok_n("tok.controls", &un, "hel\x01lo\xe2\x80\x8bworld \x7f\xef\xbf\xbd! a\0",
                strlen("hel\x01lo\xe2\x80\x8bworld \x7f\xef\xbf\xbd! a") + 1,
                "hello ##world ! a");
    check_tok("tok.final_sigma", &un, "ΟΔΟΣ ΣΟΦΟΣ", "οδος σοφος");
    check_tok("tok.lone_sigma", &un, "Σ", "[UNK]"); /* σ, not final: no cased letter before */
    check_tok("tok.cyrillic", &un, "ПРИВЕТ", "привет");
    check_tok("tok.unicode_punct", &un, "hello—world «hello»", "hello — world « hello »");
    check_tok("tok.ascii_symbols", &un, "$5", "$ 5");
    /* uncased NFD turns the voiced mark of パ into a separate Mn and drops it */
    check_tok("tok.kana_uncased", &un, "パン", "ハ ##ン");

    /* invalid UTF-8: error with the byte offset, nothing emitted silently */
    struct { const char *name, *text, *want; } bad[] = {
        {"utf8.lone_continuation", "ab\x80" "cd", "byte offset 2: unexpected continuation byte 80"},
        {"utf8.truncated", "abc\xe4\xbd", "byte offset 3: truncated sequence (E4 BD)"},
        {"utf8.cut_by_ascii", "\xe4\xbd" "a", "byte offset 0: truncated sequence"},
        {"utf8.overlong", "x\xc0\xaf", "byte offset 1: overlong 2-byte encoding (C0 AF) of U+002F"},
        {"utf8.overlong3", "\xe0\x80\xaf", "overlong 3-byte encoding (E0 80 AF)"},
        {"utf8.surrogate", "\xed\xa0\x80", "encoded surrogate U+D800"},
        {"utf8.too_big", "\xf4\x90\x80\x80", "past U+10FFFF"},
        {"utf8.ff", "ok \xff", "byte offset 3: byte FF never occurs"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        WpIds ids = {0};
        err[0] = 0;
        st = wordpiece_encode(&un, &ids, bad[i].text, strlen(bad[i].text), err, sizeof err);
        check_true(bad[i].name, st == WP_ERR_UTF8 && strstr(err, bad[i].want),
                   "status %d, message \"%s\", want \"%s\"", st, err, bad[i].want);
        wpids_free(&ids);
    }
    size_t off = 0;
    check_true("utf8.validate_ok", utf8_validate("h\xc3\xa9\xe4\xbd\xa0\xf0\x9f\x98\x80", 10,
                                                 &off, err, sizeof err) == 0, "%s", err);

    /* vocab files that are not vocab files */
    Wordpiece w3;
    char p2[600];
    snprintf(p2, sizeof p2, "%s/missing.txt", tmp);
    st = wordpiece_load(&w3, p2, WP_UNCASED, err, sizeof err);
    check_true("vocab.missing", st == WP_ERR_OPEN, "status %d", st);
    check_msg("vocab.missing_msg", err, "No such file");
    snprintf(p2, sizeof p2, "%s/nounk.txt", tmp);
    file_write(p2, "[PAD]\nhello\n", 12);
    st = wordpiece_load(&w3, p2, WP_UNCASED, err, sizeof err);
    check_true("vocab.no_unk", st == WP_ERR_FORMAT, "status %d", st);
    check_true("vocab.no_unk_one_hint", !strstr(err, "hint") &&
               strstr(wordpiece_hint(st), "build one with ctrain vocab") &&
               !strstr(wordpiece_hint(st), "path"), "message \"%s\", hint \"%s\"", err,
               wordpiece_hint(st));
    check_msg("vocab.missing_hint", wordpiece_hint(WP_ERR_OPEN), "check the --vocab path");
    file_write(p2, "[UNK]\nh\xe9llo\n", 12);
    st = wordpiece_load(&w3, p2, WP_UNCASED, err, sizeof err);
    check_true("vocab.latin1", st == WP_ERR_UTF8 && strstr(err, "byte offset 7"),
               "status %d: %s", st, err);
    check_msg("vocab.latin1_hint", wordpiece_hint(st), "iconv");
    /* CRLF lines, duplicates (the later id wins), no final newline */
    file_write(p2, "[UNK]\r\nab\r\n##c\r\nab", 18);
    st = wordpiece_load(&w3, p2, WP_UNCASED, err, sizeof err);
    check_true("vocab.crlf_dup", st == 0 && w3.V == 4 && wordpiece_id(&w3, "ab") == 3 &&
               wordpiece_id(&w3, "##c") == 2, "status %d V %u id(ab) %d", st, w3.V,
               wordpiece_id(&w3, "ab"));
    if (!st) wordpiece_free(&w3);

    /* a UTF-8 byte-order mark before [PAD]: dropped (with a warning), so
     * [PAD] is id 0 and the hash is that of the file without it */
    const char plain[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nab\n##c\n";
    char bom[64];
    snprintf(bom, sizeof bom, "\xEF\xBB\xBF%s", plain);
    file_write(p2, bom, strlen(bom));
    LogLevel level = log_get_level();
    log_set_level(LOG_ERROR);   /* the warning is expected */
    st = wordpiece_load(&w3, p2, WP_UNCASED, err, sizeof err);
    log_set_level(level);
    check_true("vocab.bom", st == 0 && w3.V == 7 && w3.pad_id == 0 && w3.mask_id == 4 &&
               wordpiece_id(&w3, "[PAD]") == 0, "status %d: %s; [PAD] id %d", st, err,
               st ? -2 : w3.pad_id);
    /* the hash: FNV-1a 64 of the lines joined by '\n' (no final newline) */
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i + 1 < sizeof plain - 1; i++)
        h = (h ^ (uint8_t)plain[i]) * 0x100000001B3ull;
    check_true("vocab.hash_fnv1a64", !st && w3.hash == h && wordpiece_vocab_hash(&w3) == h,
               "hash %016llx, want %016llx", (unsigned long long)w3.hash,
               (unsigned long long)h);
    uint64_t h_bom = st ? 0 : w3.hash;
    if (!st) wordpiece_free(&w3);
    const char *const same[7] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "ab", "##c"};
    const char *const swapped[7] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "##c", "ab"};
    Wordpiece w4, w5;
    wordpiece_init_tokens(&w4, same, 7, WP_UNCASED, err, sizeof err);
    wordpiece_init_tokens(&w5, swapped, 7, WP_UNCASED, err, sizeof err);
    check_true("vocab.hash_same", w4.hash == h_bom, "%016llx vs %016llx",
               (unsigned long long)w4.hash, (unsigned long long)h_bom);
    check_true("vocab.hash_order", w5.hash != w4.hash && w5.V == w4.V, "reordered vocab, same hash");
    const char *const need[3] = {"[PAD]", "[CLS]", "[SEP]"};
    char miss[64];
    const char *const few[3] = {"[UNK]", "[CLS]", "x"};
    Wordpiece w6;
    wordpiece_init_tokens(&w6, few, 3, WP_UNCASED, err, sizeof err);
    int nm = wordpiece_missing(miss, sizeof miss, &w6, need, 3);
    check_true("vocab.missing_named", nm == 2 && !strcmp(miss, "[PAD], [SEP]"), "%d: %s", nm,
               miss);
    wordpiece_free(&w4);
    wordpiece_free(&w5);
    wordpiece_free(&w6);
    wordpiece_free(&un);
    wordpiece_free(&ca);
    wordpiece_free(&cn);
}

/* ---- vocab builder ------------------------------------------------------- */

static int count_unk(Wordpiece *wp, const char *corpus, uint64_t *ntok)
{
    CorpusFiles cf;
    char err[512];
    corpus_list(&cf, corpus, err, sizeof err);
    WpIds ids = {0};
    for (size_t i = 0; i < cf.n; i++) {
        char *b;
        size_t n;
        if (corpus_read(cf.files[i], cf.is_dir, &b, &n, err, sizeof err)) continue;
        wordpiece_encode(wp, &ids, b, n, err, sizeof err);
        free(b);
    }
    int unk = 0;
    for (size_t k = 0; k < ids.n; k++) unk += ids.ids[k] == wp->unk_id;
    *ntok = ids.n;
    wpids_free(&ids);
    corpus_files_free(&cf);
    return unk;
}

static void test_vocab_build(void)
{
    char corpus[512], out[600], out2[600], err[1024];
    snprintf(corpus, sizeof corpus, "%s/corpus", tmp);
    make_corpus(corpus);
    snprintf(out, sizeof out, "%s/built.txt", tmp);
    snprintf(out2, sizeof out2, "%s/built2.txt", tmp);

    CorpusFiles cf;
    int st = corpus_list(&cf, corpus, err, sizeof err);
    check_true("corpus.list", st == 0 && cf.n == 4, "status %d, %zu files (want a.txt b.txt "
               "index.dat sub/c.txt)", st, cf.n);
    if (!st) corpus_files_free(&cf);

    VocabStats vs;
    VocabOpts o = {200, WP_UNCASED, VOCAB_SCORE_FREQ, NULL, NULL};
    double t0 = now_s();
    st = vocab_build_opts(corpus, &o, out, &vs, err, sizeof err);
    double dt = now_s() - t0;
    check_true("vocab_build.ok", st == 0, "status %d: %s", st, err);
    if (st) return;
    check_true("vocab_build.skips", vs.files == 3 && vs.binary_skipped == 1,
               "files %llu, binary %llu", (unsigned long long)vs.files,
               (unsigned long long)vs.binary_skipped);
    size_t n1, n2;
    char *v1 = file_read(out, &n1);
    int lines = 0;
    for (size_t i = 0; i < n1; i++) lines += v1[i] == '\n';
    check_true("vocab_build.size", lines == 200 && vs.lines == 200, "%d lines", lines);
    check_true("vocab_build.specials_first",
               !strncmp(v1, "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n", 31), "starts \"%.40s\"", v1);
    st = vocab_build(corpus, 200, WP_UNCASED, out2, err, sizeof err);
    v1 = v1 ? v1 : strdup("");
    char *v2 = file_read(out2, &n2);
    check_true("vocab_build.deterministic", st == 0 && v2 && n1 == n2 && !memcmp(v1, v2, n1),
               "second build differs (%zu vs %zu bytes)", n1, n2);
    free(v2);

    Wordpiece wp;
    st = wordpiece_load(&wp, out, WP_UNCASED, err, sizeof err);
    check_true("vocab_build.loads", st == 0, "%s", err);
    if (st) { free(v1); return; }
    /* every character of the corpus, with and without ##, after the specials */
    const char *chars[] = {"a", "d", "e", "g", "i", "k", "l", "m", "n", "o", "p", "q", "r",
                           "s", "t", "u", "v", ",", ".", "ß", "h", "%"};
    int ok = 1;
    char bad[64] = "";
    for (size_t i = 0; i < sizeof chars / sizeof *chars; i++) {
        char cont[16];
        snprintf(cont, sizeof cont, "##%s", chars[i]);
        int a = wordpiece_id(&wp, chars[i]), b = wordpiece_id(&wp, cont);
        if (a < 5 || b < 5 || (uint32_t)b >= 5 + 2 * vs.alphabet) {
            ok = 0;
            snprintf(bad, sizeof bad, "%s: %d %d", chars[i], a, b);
        }
    }
    check_true("vocab_build.alphabet", ok && vs.alphabet == sizeof chars / sizeof *chars,
               "alphabet %u, missing %s", vs.alphabet, bad);
    check_true("vocab_build.no_accents", wordpiece_id(&wp, "é") < 0, "uncased: é stripped");
    check_true("vocab_build.no_hidden", wordpiece_id(&wp, "z") < 0, "hidden file was read");
    check_true("vocab_build.merged",
               wordpiece_id(&wp, "the") >= 0 || wordpiece_id(&wp, "##ing") >= 0,
               "frequent syllables not merged");
    uint64_t ntok;
    int unk = count_unk(&wp, corpus, &ntok);
    check_true("vocab_build.no_unk", unk == 0 && ntok > 1000, "%d [UNK] in %llu tokens", unk,
               (unsigned long long)ntok);
    wordpiece_free(&wp);
    free(v1);
    printf("  vocab_build: %llu words (%llu distinct), %u merges in %.3f s\n",
           (unsigned long long)vs.words, (unsigned long long)vs.distinct_words, vs.merges, dt);

    /* likelihood score: also deterministic and complete */
    o.score = VOCAB_SCORE_LIKELIHOOD;
    st = vocab_build_opts(corpus, &o, out2, &vs, err, sizeof err);
    check_true("vocab_build.likelihood", st == 0 && vs.lines == 200, "status %d: %s", st, err);

    /* a size below the alphabet: refused with the size to use */
    o.size = 20;
    st = vocab_build_opts(corpus, &o, out2, &vs, err, sizeof err);
    check_true("vocab_build.too_small", st == CORPUS_ERR_ARG, "status %d", st);
    char hint[128];
    check_msg("vocab_build.too_small_hint", vocab_hint(hint, sizeof hint, st, &vs),
              "pass --size 49 or more");
    check_true("vocab_build.too_small_no_inline_hint", !strstr(err, "hint"), "%s", err);
    /* a file that is not UTF-8: its path and the offset */
    char badf[600];
    snprintf(badf, sizeof badf, "%s/sub/latin1.txt", corpus);
    file_write(badf, "caf\xe9 au lait\n", 13);
    st = vocab_build(corpus, 200, WP_UNCASED, out2, err, sizeof err);
    check_true("vocab_build.bad_utf8", st == CORPUS_ERR_UTF8, "status %d", st);
    check_msg("vocab_build.bad_utf8_msg", err, "latin1.txt: invalid UTF-8 at byte offset 3");
    check_true("vocab_build.bad_utf8_one_hint", !strstr(err, "hint") &&
               strstr(vocab_hint(hint, sizeof hint, st, NULL), "iconv"), "message \"%s\", "
               "hint \"%s\"", err, hint);
    unlink(badf);
    snprintf(badf, sizeof badf, "%s/nowhere", tmp);
    st = vocab_build(badf, 200, WP_UNCASED, out2, err, sizeof err);
    check_true("vocab_build.missing", st == CORPUS_ERR_OPEN, "status %d: %s", st, err);
    check_msg("vocab_build.missing_hint", vocab_hint(hint, sizeof hint, st, NULL),
              "check the --corpus path");
    /* an --out whose folder does not exist: refused before the corpus is
     * read (a missing corpus too gives this error), naming the output */
    snprintf(out2, sizeof out2, "%s/nodir/v.txt", tmp);
    st = vocab_build(badf, 200, WP_UNCASED, out2, err, sizeof err);
    check_true("vocab_build.out_dir", st == CORPUS_ERR_WRITE, "status %d: %s", st, err);
    char want[1400];
    snprintf(want, sizeof want, "cannot write vocab %s: the folder %s/nodir does not exist",
             out2, tmp);
    check_msg("vocab_build.out_dir_msg", err, want);
    vocab_hint(hint, sizeof hint, st, NULL);
    check_true("vocab_build.out_dir_hint", strstr(hint, "--out") && !strstr(hint, "corpus"),
               "hint: %s", hint);
}

/* Throughput of the tokenizer on the generated corpus, repeated to ~4 MB. */
static void bench_tokenizer(void)
{
    char vocab[600], p[600], err[512];
    snprintf(vocab, sizeof vocab, "%s/built.txt", tmp);
    snprintf(p, sizeof p, "%s/corpus/a.txt", tmp);
    Wordpiece wp;
    if (wordpiece_load(&wp, vocab, WP_UNCASED, err, sizeof err)) return;
    size_t n;
    char *a = file_read(p, &n);
    size_t reps = (4u << 20) / (n ? n : 1) + 1, total = reps * n;
    char *big = malloc(total);
    for (size_t r = 0; r < reps; r++) memcpy(big + r * n, a, n);
    WpIds ids = {0};
    double t0 = now_s();
    int st = wordpiece_encode(&wp, &ids, big, total, err, sizeof err);
    double dt = now_s() - t0;
    check_true("bench.ok", st == 0 && ids.n > total / 10, "status %d", st);
    printf("  tokenizer: %.1f MB in %.3f s = %.1f MB/s (%zu tokens)\n", total / 1e6, dt,
           total / 1e6 / dt, ids.n);
    wpids_free(&ids);
    free(big);
    free(a);
    wordpiece_free(&wp);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    return remove(path);
}

int main(void)
{
    snprintf(tmp, sizeof tmp, "/tmp/ctrain_wordpiece_XXXXXX");
    if (!mkdtemp(tmp)) {
        fprintf(stderr, "test: mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    test_tokenizer();
    test_vocab_build();
    bench_tokenizer();
    nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return check_summary();
}
