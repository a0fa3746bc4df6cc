/* text_shards.c — write and read pre-tokenized shard files (format and
 * document rules in text_shards.h).
 *
 * The writer keeps all ids in memory (4 bytes a token) and writes the file
 * once at the end, since the document offsets precede the tokens; the
 * reader loads the whole file and checks it before handing out pointers
 * into it. Shape letters: D documents, N tokens, V vocab size.
 */
#include "text_shards.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "corpus.h"
#include "data_util.h"
#include "engine/error.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "text_shards.c maps the little-endian arrays of a shard directly: little-endian hosts only"
#endif

const char *shard_hint(int status)
{
    switch (status) {
    case SHARD_OK: return NULL;
    case SHARD_ERR_OPEN: return "check the shard path; make a shard with: ctrain shard "
                                "--corpus DIR --vocab vocab.txt --out FILE";
    case SHARD_ERR_NOMEM: return "a shard is loaded whole: free memory or split the corpus";
    case SHARD_ERR_WRITE: return "pass --out a path in an existing folder you can write to "
                                 "(with free space)";
    case SHARD_ERR_TEXT: return "convert the file to UTF-8 (iconv -f LATIN1 -t UTF-8) or "
                                "remove it from the corpus";
    case SHARD_ERR_CORPUS: return "check the --corpus path (a UTF-8 text file or a folder of "
                                  "them)";
    case SHARD_ERR_EMPTY: return "use a corpus with text, and a vocab.txt built from it: ctrain "
                                 "vocab --corpus DIR --size N --out vocab.txt";
    case SHARD_ERR_LIMIT: return "split the corpus into several shards";
    default: return "the file is damaged or is not a token shard: make it again with ctrain "
                    "shard, from its corpus and the same vocab.txt";
    }
}

/* zlib's crc32 takes at most UINT_MAX bytes a call. */
static uint32_t crc_update(uint32_t crc, const uint8_t *p, size_t n)
{
    while (n) {
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = (uint32_t)crc32(crc, p, k);
        p += k;
        n -= k;
    }
    return crc;
}

/* ---- documents ----------------------------------------------------------- */

/* The line starting at p (up to end) without its '\n' and a '\r' before it. */
static size_t line_len(const char *p, const char *end, const char **next)
{
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *e = nl ? nl : end;
    *next = nl ? nl + 1 : end;
    size_t n = (size_t)(e - p);
    if (n && p[n - 1] == '\r') n--;
    return n;
}

static int is_blank(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\v' && p[i] != '\f') return 0;
    return 1;
}

int shard_split_docs(const char *text, size_t len, int mode, int *percent,
                     int (*fn)(void *ctx, const char *doc, size_t len), void *ctx)
{
    const char *end = text + len, *p, *next;
    if (mode == SHARD_DOC_AUTO) {
        mode = SHARD_DOC_BLANK;
        for (p = text; p < end; p = next) {
            size_t n = line_len(p, end, &next);
            if (n == 1 && p[0] == '%') {
                mode = SHARD_DOC_PERCENT;
                break;
            }
        }
    }
    if (percent) *percent = mode == SHARD_DOC_PERCENT;
    if (mode == SHARD_DOC_FILE) return len ? fn(ctx, text, len) : 0;
    const char *doc = NULL; /* start of the current document */
    int r;
    for (p = text; p < end; p = next) {
        size_t n = line_len(p, end, &next);
        int sep = mode == SHARD_DOC_PERCENT ? (n == 1 && p[0] == '%') : is_blank(p, n);
        if (sep) {
            if (doc && (r = fn(ctx, doc, (size_t)(p - doc)))) return r;
            doc = NULL;
        } else if (!doc) {
            doc = p;
        }
    }
    return doc ? fn(ctx, doc, (size_t)(end - doc)) : 0;
}

/* ---- writing ----------------------------------------------------------------- */

typedef struct {
    Wordpiece *wp;
    WpIds ids;            /* all tokens so far */
    uint64_t *off;        /* [docs + 1] */
    size_t noff, offcap;
    char *err;
    size_t errlen;
    const char *path;
    int fortune_file;     /* the current file was split at '%' lines */
    CorpusDocFilter keep;
    void *keep_ctx;
    uint64_t dropped;
} ShardBuild;

static int add_doc(void *ctx, const char *doc, size_t len)
{
    ShardBuild *b = ctx;
    if (b->keep && !b->keep(b->keep_ctx, b->path, b->fortune_file, doc, len)) {
        b->dropped++;
        return 0;
    }
    size_t before = b->ids.n;
    char msg[256];
    int st = wordpiece_encode(b->wp, &b->ids, doc, len, msg, sizeof msg);
    if (st == WP_ERR_UTF8) /* the file was validated; cannot happen */
        return ct_fail(b->err, b->errlen, SHARD_ERR_TEXT, "%s: %s", b->path, msg);
    if (st) return ct_fail(b->err, b->errlen, SHARD_ERR_NOMEM, "out of memory tokenizing %s",
                           b->path);
    if (b->ids.n == before) return 0; /* an empty document */
    if (b->noff == b->offcap) {
        size_t c = b->offcap ? 2 * b->offcap : 1024;
        uint64_t *o = realloc(b->off, c * sizeof *o);
        if (!o) return ct_fail(b->err, b->errlen, SHARD_ERR_NOMEM, "out of memory");
        b->off = o;
        b->offcap = c;
    }
    b->off[b->noff++] = b->ids.n;
    return 0;
}

/* Write header, offsets, tokens and CRC to f; 0 or -1 (errno set). */
static int write_body(FILE *f, uint32_t V, uint64_t vocab_hash, const uint32_t *tokens,
                      const uint64_t *off, uint32_t D)
{
    uint64_t N = off[D];
    uint8_t hdr[SHARD_HEADER_BYTES];
    memcpy(hdr, SHARD_MAGIC, 8);
    memcpy(hdr + 8, &V, 4);
    memcpy(hdr + 12, &D, 4);
    memcpy(hdr + 16, &N, 8);
    memcpy(hdr + 24, &vocab_hash, 8);
    uint32_t crc = crc_update((uint32_t)crc32(0, Z_NULL, 0), hdr + 8, SHARD_HEADER_BYTES - 8);
    if (fwrite(hdr, 1, sizeof hdr, f) != sizeof hdr) return -1;
    size_t ob = 8 * ((size_t)D + 1);
    crc = crc_update(crc, (const uint8_t *)off, ob);
    if (fwrite(off, 1, ob, f) != ob) return -1;
    if (V > 65535) {
        crc = crc_update(crc, (const uint8_t *)tokens, 4 * N);
        if (fwrite(tokens, 4, N, f) != N) return -1;
    } else {
        uint16_t chunk[4096];
        for (uint64_t k = 0; k < N;) {
            size_t m = N - k < 4096 ? (size_t)(N - k) : 4096;
            for (size_t j = 0; j < m; j++) chunk[j] = (uint16_t)tokens[k + j];
            crc = crc_update(crc, (const uint8_t *)chunk, 2 * m);
            if (fwrite(chunk, 2, m, f) != m) return -1;
            k += m;
        }
    }
    return fwrite(&crc, 4, 1, f) == 1 ? 0 : -1;
}

int shard_write_tokens(const char *out_path, uint32_t V, uint64_t vocab_hash,
                       const uint32_t *tokens, const uint64_t *off, uint32_t D, char *err,
                       size_t errlen)
{
    if (!V) return ct_fail(err, errlen, SHARD_ERR_FORMAT, "shard %s: vocab size 0", out_path);
    size_t l = strlen(out_path) + 8;
    char *tmp = malloc(l);
    if (!tmp) return ct_fail(err, errlen, SHARD_ERR_NOMEM, "out of memory");
    snprintf(tmp, l, "%s.tmp", out_path);
    FILE *f = fopen(tmp, "wb");
    int bad = !f || write_body(f, V, vocab_hash, tokens, off, D);
    int e = errno;
    if (f && fclose(f)) bad = 1, e = errno;
    if (bad || rename(tmp, out_path)) {
        if (!bad) e = errno;
        unlink(tmp);
        free(tmp);
        return ct_fail(err, errlen, SHARD_ERR_WRITE, "cannot write %s: %s", out_path,
                       strerror(e));
    }
    free(tmp);
    return 0;
}

int shard_write(const char *corpus_path, Wordpiece *wp, const char *out_path, int doc_mode,
                ShardStats *stats, char *err, size_t errlen)
{
    return shard_write_filtered(corpus_path, wp, out_path, doc_mode, NULL, NULL, stats, err,
                                errlen);
}

int shard_write_filtered(const char *corpus_path, Wordpiece *wp, const char *out_path,
                         int doc_mode, CorpusDocFilter keep, void *keep_ctx, ShardStats *stats,
                         char *err, size_t errlen)
{
    ShardStats dummy;
    if (!stats) stats = &dummy;
    memset(stats, 0, sizeof *stats);
    if (doc_mode < SHARD_DOC_AUTO || doc_mode > SHARD_DOC_PERCENT)
        return ct_fail(err, errlen, SHARD_ERR_FORMAT, "unknown document mode %d", doc_mode);
    if (data_check_output(out_path, "shard", err, errlen)) return SHARD_ERR_WRITE;
    CorpusFiles cf;
    int st = corpus_list(&cf, corpus_path, err, errlen);
    if (st) return st == CORPUS_ERR_NOMEM ? SHARD_ERR_NOMEM : SHARD_ERR_CORPUS;
    ShardBuild b = {.wp = wp, .err = err, .errlen = errlen, .keep = keep, .keep_ctx = keep_ctx};
    b.off = malloc(1024 * sizeof *b.off);
    b.offcap = 1024;
    if (!b.off) st = ct_fail(err, errlen, SHARD_ERR_NOMEM, "out of memory");
    else b.off[b.noff++] = 0;
    for (size_t i = 0; i < cf.n && !st; i++) {
        char *text;
        size_t n;
        int r = corpus_read(cf.files[i], cf.is_dir, &text, &n, err, errlen);
        if (r == 1) {
            stats->binary_skipped++;
            continue;
        }
        if (r) {
            st = r == CORPUS_ERR_UTF8 ? SHARD_ERR_TEXT
                 : r == CORPUS_ERR_NOMEM ? SHARD_ERR_NOMEM : SHARD_ERR_CORPUS;
            break;
        }
        stats->files++;
        stats->bytes += n;
        b.path = cf.files[i];
        st = shard_split_docs(text, n, doc_mode, &b.fortune_file, add_doc, &b);
        free(text);
    }
    if (!st && b.noff - 1 > UINT32_MAX)
        st = ct_fail(err, errlen, SHARD_ERR_LIMIT, "%s has %zu documents; a shard holds at "
                     "most %u", corpus_path, b.noff - 1, UINT32_MAX);
    stats->dropped = b.dropped;
    if (!st) {
        stats->docs = b.noff - 1;
        stats->tokens = b.ids.n;
        uint64_t maskable = 0;
        for (size_t k = 0; k < b.ids.n; k++) {
            int32_t t = b.ids.ids[k];
            stats->unk += t == wp->unk_id;
            maskable += t != wp->unk_id && t != wp->pad_id && t != wp->cls_id &&
                        t != wp->sep_id && t != wp->mask_id;
        }
        if (!stats->files)
            st = ct_fail(err, errlen, SHARD_ERR_CORPUS, "corpus %s holds no text file (%llu "
                         "binary files skipped)", corpus_path,
                         (unsigned long long)stats->binary_skipped);
        else if (!stats->tokens)
            st = ct_fail(err, errlen, SHARD_ERR_EMPTY, "corpus %s gives 0 tokens: its %llu "
                         "files hold no document with text%s; one masked-LM sequence needs "
                         "at least 1 token to mask", corpus_path,
                         (unsigned long long)stats->files,
                         b.dropped ? " that the filter (--exclude-held-out) keeps" : "");
        else if (!maskable)
            st = ct_fail(err, errlen, SHARD_ERR_EMPTY, "corpus %s gives %llu tokens, all "
                         "[UNK] (%llu) or special tokens: none that masked-LM training can "
                         "mask; one sequence needs at least 1 token that is not [UNK] or a "
                         "special token", corpus_path,
                         (unsigned long long)stats->tokens, (unsigned long long)stats->unk);
    }
    if (!st)  /* ids are int32 >= 0 from the tokenizer: the same bits as u32 */
        st = shard_write_tokens(out_path, wp->V, wordpiece_vocab_hash(wp),
                                (const uint32_t *)b.ids.ids, b.off, (uint32_t)(b.noff - 1), err,
                                errlen);
    wpids_free(&b.ids);
    free(b.off);
    corpus_files_free(&cf);
    return st;
}

/* ---- reading ------------------------------------------------------------------ */

int shard_open(TextShard *s, const char *path, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    FILE *f = fopen(path, "rb");
    if (!f)
        return ct_fail(err, errlen, SHARD_ERR_OPEN, "cannot open shard %s: %s", path,
                       strerror(errno));
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    while (buf) {
        if (n == cap) {
            uint8_t *q = realloc(buf, cap * 2);
            if (!q) { free(buf); buf = NULL; break; }
            buf = q;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (!got) break;
    }
    int rerr = ferror(f);
    fclose(f);
    if (!buf) return ct_fail(err, errlen, SHARD_ERR_NOMEM, "out of memory reading %s", path);
    if (rerr) {
        free(buf);
        return ct_fail(err, errlen, SHARD_ERR_OPEN, "cannot read shard %s", path);
    }
    int st = SHARD_OK;
    uint32_t V = 0, D = 0;
    uint64_t N = 0, want = 0, hash = 0;
    int w = 2;
    int version = n >= 8 && !memcmp(buf, SHARD_MAGIC_V1, 8) ? 1 : 2;
    size_t hb = version == 1 ? SHARD_HEADER_BYTES_V1 : SHARD_HEADER_BYTES;
    if (n >= 8 && version == 2 && memcmp(buf, SHARD_MAGIC, 8)) {
        st = ct_fail(err, errlen, SHARD_ERR_FORMAT, "%s is not a token shard: it starts with "
                     "%02x %02x %02x %02x %02x %02x, a shard with \"CTTOK2\" (or \"CTTOK1\")",
                     path, buf[0], buf[1], buf[2], buf[3], buf[4], buf[5]);
    } else if (n < hb + 8 + 4) {
        st = ct_fail(err, errlen, SHARD_ERR_TRUNCATED, "%s is truncated: %zu bytes, fewer than "
                     "the %zu of an empty shard", path, n, hb + 8 + 4);
    } else {
        memcpy(&V, buf + 8, 4);
        memcpy(&D, buf + 12, 4);
        memcpy(&N, buf + 16, 8);
        if (version == 2) memcpy(&hash, buf + 24, 8);
        w = V > 65535 ? 4 : 2;
        /* hb + 8(D+1) + wN + 4, refusing headers whose sizes overflow */
        if (V == 0 || N > (UINT64_MAX / 8))
            st = ct_fail(err, errlen, SHARD_ERR_FORMAT, "%s: damaged header (vocab size %u, "
                         "%llu tokens)", path, V, (unsigned long long)N);
        else
            want = hb + 8 * ((uint64_t)D + 1) + (uint64_t)w * N + 4;
        if (!st && n < want)
            st = ct_fail(err, errlen, SHARD_ERR_TRUNCATED, "%s is truncated: its header "
                         "promises %llu bytes (%u documents, %llu tokens), the file has %zu",
                         path, (unsigned long long)want, D, (unsigned long long)N, n);
        else if (!st && n > want)
            st = ct_fail(err, errlen, SHARD_ERR_FORMAT, "%s has %llu bytes after the end its "
                         "header promises (%llu bytes)", path,
                         (unsigned long long)(n - want), (unsigned long long)want);
    }
    if (!st) {
        uint32_t stored, crc = crc_update((uint32_t)crc32(0, Z_NULL, 0), buf + 8, n - 12);
        memcpy(&stored, buf + n - 4, 4);
        if (crc != stored)
            st = ct_fail(err, errlen, SHARD_ERR_CORRUPT, "%s is damaged: its contents have "
                         "CRC-32 %08x, the file records %08x", path, crc, stored);
    }
    uint64_t *off = (uint64_t *)(buf + hb);
    if (!st && (off[0] != 0 || off[D] != N))
        st = ct_fail(err, errlen, SHARD_ERR_FORMAT, "%s: document offsets run from %llu to "
                     "%llu, not 0 to %llu tokens", path, (unsigned long long)off[0],
                     (unsigned long long)off[D], (unsigned long long)N);
    for (uint32_t d = 0; !st && d < D; d++)
        if (off[d + 1] < off[d])
            st = ct_fail(err, errlen, SHARD_ERR_FORMAT, "%s: document %u ends (%llu) before "
                         "it starts (%llu)", path, d, (unsigned long long)off[d + 1],
                         (unsigned long long)off[d]);
    if (!st) {
        s->version = version;
        s->has_hash = version >= 2;
        s->vocab_hash = hash;
        s->vocab_size = V;
        s->n_docs = D;
        s->n_tokens = N;
        s->offsets = off;
        s->width = w;
        s->tokens = buf + hb + 8 * ((size_t)D + 1);
        s->buf = buf;
        s->size = n;
        for (uint64_t k = 0; k < N; k++) {
            uint32_t t = shard_token(s, k);
            if (t >= V) {
                st = ct_fail(err, errlen, SHARD_ERR_FORMAT, "%s: token %llu is id %u, outside "
                             "the vocab of %u", path, (unsigned long long)k, t, V);
                break;
            }
        }
    }
    if (st) {
        free(buf);
        memset(s, 0, sizeof *s);
    }
    return st;
}

void shard_close(TextShard *s)
{
    free(s->buf);
    memset(s, 0, sizeof *s);
}
