/* test_text_shards.c — token shards (data/text_shards.h) and the documents
 * they are cut into, on the generated corpus of text_corpus.h tokenized
 * with a vocab built from it.
 *
 * Checked: the document rules (fortune '%' lines, blank-line paragraphs,
 * whole files); a write / read round trip (u16 and u32 ids) that reproduces
 * the tokenizer's ids; the CTTOK2 header carries the vocab's hash, and a
 * CTTOK1 file written by hand is still read (without one); damaged files
 * (cut, flipped byte, bad magic, extra bytes) refused with their message; a
 * corpus with no token to mask (only empty documents, only [UNK]) refused
 * with a count; an --out in a missing folder refused before the corpus is
 * read; a missing corpus; the hint of each cause, in the user's words.
 * Temp files live in one mkdtemp directory, removed at the end.
 */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "data/text_shards.h"
#include "data/vocab_build.h"
#include "data/wordpiece.h"
/* check.h's helpers are static; this program does not use all of them. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "check.h"
#pragma GCC diagnostic pop
#include "file_util.h"
#include "text_corpus.h"

static char tmp[256];

static void check_msg(const char *name, const char *err, const char *want)
{
    check_true(name, strstr(err, want) != NULL, "message \"%s\" lacks \"%s\"", err, want);
}

/* ---- shards --------------------------------------------------------------- */

typedef struct {
    char docs[8][64];
    int n;
} DocList;

static int grab(void *ctx, const char *doc, size_t len)
{
    DocList *d = ctx;
    if (d->n < 8) snprintf(d->docs[d->n++], 64, "%.*s", (int)len, doc);
    return 0;
}

/* A CTTOK1 shard (the format before the vocab hash), written by hand: the
 * 24-byte header, offsets, u16 tokens, CRC-32 of all after the magic. */
static void write_v1(const char *path, uint32_t V, const uint16_t *tok, const uint64_t *off,
                     uint32_t D)
{
    uint64_t N = off[D];
    size_t n = 24 + 8 * ((size_t)D + 1) + 2 * N + 4;
    uint8_t *b = calloc(1, n);
    memcpy(b, "CTTOK1\0\0", 8);
    memcpy(b + 8, &V, 4);
    memcpy(b + 12, &D, 4);
    memcpy(b + 16, &N, 8);
    memcpy(b + 24, off, 8 * ((size_t)D + 1));
    memcpy(b + 24 + 8 * ((size_t)D + 1), tok, 2 * N);
    uint32_t crc = (uint32_t)crc32(crc32(0, Z_NULL, 0), b + 8, (uInt)(n - 12));
    memcpy(b + n - 4, &crc, 4);
    file_write(path, b, n);
    free(b);
}

static void test_shards(void)
{
    char err[1024], vocab[600], corpus[512], shard[600], p[700];
    /* document rules */
    DocList d = {0};
    int pct = -1;
    const char *fort = "one\n%\ntwo\n\nlines\n%\n%\nthree";
    shard_split_docs(fort, strlen(fort), SHARD_DOC_AUTO, &pct, grab, &d);
    check_true("docs.percent", pct == 1 && d.n == 3 && !strcmp(d.docs[0], "one\n") &&
               !strcmp(d.docs[1], "two\n\nlines\n") && !strcmp(d.docs[2], "three"),
               "pct %d, %d docs: \"%s\" \"%s\"", pct, d.n, d.docs[0], d.docs[1]);
    memset(&d, 0, sizeof d);
    const char *para = "\n\npara one\nline\n \t\n\npara two\r\n\r\nlast";
    shard_split_docs(para, strlen(para), SHARD_DOC_AUTO, &pct, grab, &d);
    check_true("docs.blank", pct == 0 && d.n == 3 && !strcmp(d.docs[0], "para one\nline\n") &&
               !strcmp(d.docs[1], "para two\r\n") && !strcmp(d.docs[2], "last"),
               "%d docs: \"%s\" \"%s\"", d.n, d.docs[0], d.docs[1]);
    memset(&d, 0, sizeof d);
    shard_split_docs(para, strlen(para), SHARD_DOC_FILE, NULL, grab, &d);
    check_true("docs.file", d.n == 1, "%d docs", d.n);

    snprintf(vocab, sizeof vocab, "%s/built.txt", tmp);
    snprintf(corpus, sizeof corpus, "%s/corpus", tmp);
    snprintf(shard, sizeof shard, "%s/corpus.tok", tmp);
    Wordpiece wp;
    if (wordpiece_load(&wp, vocab, WP_UNCASED, err, sizeof err)) {
        check_true("shard.vocab", 0, "%s", err);
        return;
    }
    ShardStats ss;
    int st = shard_write(corpus, &wp, shard, SHARD_DOC_AUTO, &ss, err, sizeof err);
    check_true("shard.write", st == 0, "status %d: %s", st, err);
    TextShard s;
    st = shard_open(&s, shard, err, sizeof err);
    check_true("shard.open", st == 0, "status %d: %s", st, err);
    if (st) { wordpiece_free(&wp); return; }
    /* 40 paragraphs in a.txt and sub/c.txt, 40 fortune entries in b.txt */
    check_true("shard.docs", s.n_docs == 120 && ss.docs == 120 && s.width == 2 &&
               s.vocab_size == wp.V && s.n_tokens == ss.tokens && ss.unk == 0,
               "%u docs, width %d, V %u, %llu tokens, %llu unk", s.n_docs, s.width,
               s.vocab_size, (unsigned long long)s.n_tokens, (unsigned long long)ss.unk);
    check_true("shard.vocab_hash", s.version == 2 && s.has_hash && s.vocab_hash == wp.hash &&
               wp.hash == wordpiece_vocab_hash(&wp), "version %d, hash %016llx, vocab %016llx",
               s.version, (unsigned long long)s.vocab_hash, (unsigned long long)wp.hash);
    /* document 0 = the first paragraph of a.txt, tokenized again here */
    snprintf(p, sizeof p, "%s/a.txt", corpus);
    size_t n;
    char *a = file_read(p, &n);
    char *end = strstr(a, "\n\n");
    WpIds ids = {0};
    wordpiece_encode(&wp, &ids, a, (size_t)(end - a) + 1, err, sizeof err);
    int same = ids.n == s.offsets[1] - s.offsets[0];
    for (size_t k = 0; same && k < ids.n; k++) same = (uint32_t)ids.ids[k] == shard_token(&s, k);
    check_true("shard.doc0", same, "doc 0: %zu ids vs %llu in the shard", ids.n,
               (unsigned long long)(s.offsets[1] - s.offsets[0]));
    wpids_free(&ids);
    free(a);
    size_t size = s.size;
    uint64_t tok_at = SHARD_HEADER_BYTES + 8ull * (s.n_docs + 1);
    shard_close(&s);

    /* damaged copies */
    char *good = file_read(shard, &n);
    snprintf(p, sizeof p, "%s/bad.tok", tmp);
    file_write(p, good, size - 10);
    st = shard_open(&s, p, err, sizeof err);
    check_true("shard.truncated", st == SHARD_ERR_TRUNCATED, "status %d: %s", st, err);
    check_msg("shard.truncated_msg", err, "is truncated: its header promises");
    file_write(p, good, 20);
    st = shard_open(&s, p, err, sizeof err);
    check_true("shard.truncated_header", st == SHARD_ERR_TRUNCATED, "status %d: %s", st, err);
    good[tok_at + 7] ^= 0x10;
    file_write(p, good, size);
    st = shard_open(&s, p, err, sizeof err);
    check_true("shard.crc", st == SHARD_ERR_CORRUPT, "status %d: %s", st, err);
    check_msg("shard.crc_msg", err, "is damaged: its contents have CRC-32");
    good[tok_at + 7] ^= 0x10;
    good[0] = 'X';
    file_write(p, good, size);
    st = shard_open(&s, p, err, sizeof err);
    check_true("shard.magic", st == SHARD_ERR_FORMAT, "status %d: %s", st, err);
    check_msg("shard.magic_msg", err, "is not a token shard");
    good[0] = 'C';
    char *longer = malloc(size + 3);
    memcpy(longer, good, size);
    memcpy(longer + size, "xyz", 3);
    file_write(p, longer, size + 3);
    st = shard_open(&s, p, err, sizeof err);
    check_true("shard.extra", st == SHARD_ERR_FORMAT, "status %d: %s", st, err);
    check_msg("shard.extra_msg", err, "3 bytes after the end");
    check_true("shard.hint", shard_hint(SHARD_ERR_CORRUPT) != NULL, "no hint");
    free(longer);
    free(good);
    snprintf(p, sizeof p, "%s/none.tok", tmp);
    st = shard_open(&s, p, err, sizeof err);
    check_true("shard.missing", st == SHARD_ERR_OPEN, "status %d: %s", st, err);
    /* the hint speaks the user's words: a command, no internal function */
    check_true("shard.missing_hint", strstr(shard_hint(st), "ctrain shard --corpus") &&
               !strstr(shard_hint(st), "shard_write"), "hint: %s", shard_hint(st));

    /* a CTTOK1 shard: read, with no vocab hash */
    const uint16_t t1[5] = {7, 8, 9, 10, 11};
    const uint64_t o1[3] = {0, 2, 5};
    snprintf(p, sizeof p, "%s/v1.tok", tmp);
    write_v1(p, wp.V, t1, o1, 2);
    st = shard_open(&s, p, err, sizeof err);
    int v1ok = st == 0 && s.version == 1 && !s.has_hash && s.n_docs == 2 && s.n_tokens == 5 &&
               s.vocab_size == wp.V && s.offsets[1] == 2;
    for (int k = 0; v1ok && k < 5; k++) v1ok = shard_token(&s, (uint64_t)k) == t1[k];
    check_true("shard.v1_reads", v1ok, "status %d: %s", st, err);
    if (!st) shard_close(&s);

    /* corpora with nothing to mask: refused, with a count */
    char c2[600];
    snprintf(c2, sizeof c2, "%s/emptydocs", tmp);
    mkdir(c2, 0700);
    snprintf(p, sizeof p, "%s/a", c2);
    file_write(p, "%\n%\n%\n", 6);
    snprintf(p, sizeof p, "%s/b", c2);
    file_write(p, "\n \n\n", 4);
    snprintf(p, sizeof p, "%s/empty.tok", tmp);
    st = shard_write(c2, &wp, p, SHARD_DOC_AUTO, &ss, err, sizeof err);
    check_true("shard.empty_docs", st == SHARD_ERR_EMPTY && access(p, F_OK) != 0, "status %d: %s",
               st, err);
    check_msg("shard.empty_docs_msg", err, "gives 0 tokens: its 2 files hold no document with text");
    check_msg("shard.empty_docs_hint", shard_hint(st), "ctrain vocab --corpus");
    snprintf(p, sizeof p, "%s/unk.txt", c2);
    file_write(p, "\xe5\x8c\x97\xe4\xba\xac\n", 7);   /* two CJK ideographs the vocab lacks */
    snprintf(p, sizeof p, "%s/empty.tok", tmp);
    st = shard_write(c2, &wp, p, SHARD_DOC_AUTO, &ss, err, sizeof err);
    check_true("shard.all_unk", st == SHARD_ERR_EMPTY && ss.unk == 2, "status %d: %s", st, err);
    check_msg("shard.all_unk_msg", err, "gives 2 tokens, all [UNK] (2) or special tokens");

    /* outputs and corpora that are not there */
    snprintf(p, sizeof p, "%s/nodir/x.tok", tmp);
    st = shard_write(corpus, &wp, p, SHARD_DOC_AUTO, &ss, err, sizeof err);
    check_true("shard.out_dir", st == SHARD_ERR_WRITE, "status %d: %s", st, err);
    check_msg("shard.out_dir_msg", err, "cannot write shard ");
    check_msg("shard.out_dir_msg2", err, "/nodir does not exist");
    check_true("shard.out_dir_hint", strstr(shard_hint(st), "--out") &&
               !strstr(shard_hint(st), "damaged"), "hint: %s", shard_hint(st));
    snprintf(c2, sizeof c2, "%s/no_corpus", tmp);
    snprintf(p, sizeof p, "%s/x.tok", tmp);
    st = shard_write(c2, &wp, p, SHARD_DOC_AUTO, &ss, err, sizeof err);
    check_true("shard.no_corpus", st == SHARD_ERR_CORPUS, "status %d: %s", st, err);
    check_msg("shard.no_corpus_hint", shard_hint(st), "check the --corpus path");

    /* u32 ids for a vocab over 65535, and an empty document */
    uint32_t toks[6] = {70000, 5, 69999, 0, 65536, 12};
    uint64_t off[4] = {0, 2, 2, 6};
    snprintf(p, sizeof p, "%s/wide.tok", tmp);
    st = shard_write_tokens(p, 70001, 0x1234, toks, off, 3, err, sizeof err);
    st = st ? st : shard_open(&s, p, err, sizeof err);
    int ok = st == 0 && s.width == 4 && s.n_docs == 3 && s.n_tokens == 6;
    for (int k = 0; ok && k < 6; k++) ok = shard_token(&s, (uint64_t)k) == toks[k];
    check_true("shard.u32", ok && s.vocab_hash == 0x1234, "status %d: %s", st, err);
    if (!st) shard_close(&s);
    st = shard_write_tokens(p, 70000, 0x1234, toks, off, 3, err, sizeof err);
    st = st ? st : shard_open(&s, p, err, sizeof err);
    check_true("shard.id_range", st == SHARD_ERR_FORMAT && strstr(err, "outside the vocab"),
               "status %d: %s", st, err);
    wordpiece_free(&wp);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    return remove(path);
}

int main(void)
{
    snprintf(tmp, sizeof tmp, "/tmp/ctrain_shards_XXXXXX");
    if (!mkdtemp(tmp)) {
        fprintf(stderr, "test: mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    char corpus[512], vocab[600], err[1024];
    snprintf(corpus, sizeof corpus, "%s/corpus", tmp);
    snprintf(vocab, sizeof vocab, "%s/built.txt", tmp);
    make_corpus(corpus);
    int st = vocab_build(corpus, 200, WP_UNCASED, vocab, err, sizeof err);
    check_true("vocab.built", st == 0, "status %d: %s", st, err);
    if (!st) test_shards();
    nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return check_summary();
}
