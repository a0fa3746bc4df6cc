/* wordpiece.c — the basic tokenizer and greedy WordPiece (see wordpiece.h).
 *
 * The basic tokenizer makes one pass over the bytes. A word collects the
 * bytes of its kept characters; at whitespace it is finished: a pure-ASCII
 * word (the common case) is lower-cased and split on punctuation in place,
 * any other is decoded to code points, normalized (uncased: lower + strip
 * accents; cased: nothing, or NFC for WP_CASED_NFC) and split, then re-encoded. CJK ideographs end the
 * word and are words of their own. Removed characters (controls, U+FFFD)
 * join their neighbours, as in HF ("a\u200Bb" is one word).
 *
 * WordPiece looks pieces up in two open-addressing hash tables: whole tokens,
 * and "##" tokens keyed without the "##", so a continuation piece is looked
 * up from the word's bytes with no copy. From each start the hashes of all
 * candidate lengths come from one FNV-1a pass, so trying the candidates
 * longest first costs a probe each, not a rehash. The longest key of each
 * table bounds the first candidate, which changes nothing in the result (a
 * longer candidate cannot match).
 */
#include "wordpiece.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"
#include "engine/error.h"
#include "engine/log.h"
#include "data_util.h"

const char *wordpiece_hint(int status)
{
    switch (status) {
    case WP_OK: return NULL;
    case WP_ERR_OPEN: return "check the --vocab path";
    case WP_ERR_FORMAT:
        return "a vocab.txt holds one token a line, [PAD] [UNK] [CLS] [SEP] [MASK] among "
               "them: build one with ctrain vocab --corpus DIR --size N --out vocab.txt";
    case WP_ERR_UTF8:
        return "convert the vocab to UTF-8 (iconv -f LATIN1 -t UTF-8), or build one with "
               "ctrain vocab --corpus DIR --size N --out vocab.txt";
    default: return "free some memory and retry";
    }
}

int wpids_push(WpIds *v, int32_t id)
{
    if (v->n == v->cap && data_grow((void **)&v->ids, &v->cap, v->n + 1, sizeof *v->ids))
        return WP_ERR_NOMEM;
    v->ids[v->n++] = id;
    return 0;
}

void wpids_free(WpIds *v)
{
    free(v->ids);
    memset(v, 0, sizeof *v);
}

/* ---- basic tokenizer ---------------------------------------------------- */

void basictok_init(BasicTok *bt, int mode)
{
    memset(bt, 0, sizeof *bt);
    bt->lowercase = mode == WP_UNCASED;
    bt->nfc = mode == WP_CASED_NFC;
}

void basictok_free(BasicTok *bt)
{
    free(bt->w);
    free(bt->cp);
    free(bt->t1);
    free(bt->t2);
    free(bt->piece);
    basictok_init(bt, 0);
}

/* ASCII byte classes: the basic tokenizer's first decision per byte. */
enum { BC_WORD, BC_PUNCT, BC_SPACE, BC_DROP, BC_HIGH };

/* The class of each byte, a table built at compile time: in ASCII every
 * printable character that is not a letter or digit is BERT punctuation. */
#define BC4(c) byte_class_c(c), byte_class_c(c + 1), byte_class_c(c + 2), byte_class_c(c + 3)
#define BC16(c) BC4(c), BC4(c + 4), BC4(c + 8), BC4(c + 12)
#define BC64(c) BC16(c), BC16(c + 16), BC16(c + 32), BC16(c + 48)
#define byte_class_c(c)                                                                    \
    ((c) >= 0x80 ? BC_HIGH                                                                 \
     : (c) == ' ' || (c) == '\t' || (c) == '\n' || (c) == '\r' ? BC_SPACE                  \
     : (c) < 0x20 || (c) == 0x7F ? BC_DROP                                                 \
     : ((c) >= '0' && (c) <= '9') || ((c) >= 'a' && (c) <= 'z') || ((c) >= 'A' && (c) <= 'Z') \
         ? BC_WORD                                                                         \
         : BC_PUNCT)
static const uint8_t bclass[256] = {BC64(0), BC64(64), BC64(128), BC64(192)};

/* Split a pure-ASCII word on punctuation. */
static int emit_ascii(BasicTok *bt, char *w, size_t n, BasicWordFn fn, void *ctx)
{
    if (bt->lowercase)
        for (size_t k = 0; k < n; k++)
            if ((uint8_t)(w[k] - 'A') < 26) w[k] = (char)(w[k] + 32);
    size_t start = 0;
    for (size_t k = 0; k < n; k++) {
        if (bclass[(uint8_t)w[k]] == BC_WORD) continue;
        int r;
        if (k > start && (r = fn(ctx, w + start, k - start, k - start))) return r;
        if ((r = fn(ctx, w + k, 1, 1))) return r;
        start = k + 1;
    }
    return n > start ? fn(ctx, w + start, n - start, n - start) : 0;
}

/* A word with non-ASCII characters: decode, normalize, split, re-encode. */
static int emit_unicode(BasicTok *bt, BasicWordFn fn, void *ctx)
{
    const uint8_t *w = (const uint8_t *)bt->w;
    size_t nb = bt->wn, n = 0;
    size_t need = UTF8_MAX_DECOMP * nb; /* code points <= bytes; NFD expands <= 4x */
    if (need > bt->ccap) {
        size_t cap = bt->ccap ? bt->ccap : 64;
        while (cap < need) cap *= 2;
        uint32_t *a = realloc(bt->cp, cap * sizeof *a);
        if (a) bt->cp = a;
        uint32_t *b = a ? realloc(bt->t1, cap * sizeof *b) : NULL;
        if (b) bt->t1 = b;
        uint32_t *c = b ? realloc(bt->t2, cap * sizeof *c) : NULL;
        if (!c) return WP_ERR_NOMEM;
        bt->t2 = c;
        bt->ccap = cap;
    }
    for (size_t i = 0; i < nb;) /* already validated */
        utf8_next(w, nb, &i, &bt->cp[n++]);
    uint32_t *s;
    size_t m;
    if (bt->lowercase) {
        utf8_lower_word(bt->t1, bt->cp, n);
        m = utf8_strip_accents(bt->t2, bt->t1, n);
        s = bt->t2;
    } else if (bt->nfc) {
        m = utf8_nfc(bt->t1, bt->cp, n);
        s = bt->t1;
    } else {
        m = n;
        s = bt->cp;
    }
    if (data_grow((void **)&bt->piece, &bt->pcap, 4 * m + 1, 1)) return WP_ERR_NOMEM;
    char *p = bt->piece;
    size_t pb = 0, pstart = 0, pchars = 0;
    for (size_t k = 0; k < m; k++) {
        int r;
        if (!utf8_is_punct(s[k])) {
            pb += utf8_encode(p + pb, s[k]);
            pchars++;
            continue;
        }
        if (pchars && (r = fn(ctx, p + pstart, pb - pstart, pchars))) return r;
        size_t k0 = pb;
        pb += utf8_encode(p + pb, s[k]);
        if ((r = fn(ctx, p + k0, pb - k0, 1))) return r;
        pstart = pb;
        pchars = 0;
    }
    return pchars ? fn(ctx, p + pstart, pb - pstart, pchars) : 0;
}

static int flush_word(BasicTok *bt, int nonascii, BasicWordFn fn, void *ctx)
{
    if (!bt->wn) return 0;
    int r = nonascii ? emit_unicode(bt, fn, ctx) : emit_ascii(bt, bt->w, bt->wn, fn, ctx);
    bt->wn = 0;
    return r;
}

int basictok_run(BasicTok *bt, const char *text, size_t len, BasicWordFn fn, void *ctx,
                 char *err, size_t errlen)
{
    const uint8_t *s = (const uint8_t *)text;
    size_t i = 0;
    int nonascii = 0, r;
    bt->wn = 0;
    while (i < len) {
        /* A run of printable ASCII joins the word as it is. */
        size_t j = i;
        while (j < len && bclass[s[j]] <= BC_PUNCT) j++;
        if (bt->wn + (j - i) + 4 > bt->wcap &&
            data_grow((void **)&bt->w, &bt->wcap, bt->wn + (j - i) + 4, 1))
            return ct_fail(err, errlen, WP_ERR_NOMEM, "out of memory tokenizing");
        memcpy(bt->w + bt->wn, s + i, j - i);
        bt->wn += j - i;
        i = j;
        if (i == len) break;
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            if (bclass[c] == BC_SPACE) {
                if ((r = flush_word(bt, nonascii, fn, ctx))) goto fail;
                nonascii = 0;
            }
            continue;
        }
        size_t at = i;
        uint32_t cp;
        int bad = utf8_next(s, len, &i, &cp);
        if (bad) {
            utf8_describe(err, errlen, s, len, at, bad);
            return WP_ERR_UTF8;
        }
        if (cp == 0xFFFD || utf8_is_control(cp)) continue;
        if (utf8_is_whitespace(cp) || cp == 0x2028 || cp == 0x2029) {
            if ((r = flush_word(bt, nonascii, fn, ctx))) goto fail;
            nonascii = 0;
        } else if (utf8_is_cjk(cp)) {
            if ((r = flush_word(bt, nonascii, fn, ctx))) goto fail;
            nonascii = 0;
            if ((r = fn(ctx, text + at, i - at, 1))) goto fail;
        } else {
            memcpy(bt->w + bt->wn, s + at, i - at);
            bt->wn += i - at;
            nonascii = 1;
        }
    }
    if ((r = flush_word(bt, nonascii, fn, ctx))) goto fail;
    return 0;
fail:
    bt->wn = 0;
    if (r == WP_ERR_NOMEM) ct_fail(err, errlen, r, "out of memory tokenizing");
    return r;
}

/* ---- vocabulary ----------------------------------------------------------- */

/* FNV-1a, byte by byte: the hash of every prefix of a word comes out of one
 * pass, which is what the greedy longest-match search asks for. */
#define FNV_BASIS 2166136261u
#define FNV_PRIME 16777619u

static uint32_t hash_bytes(const char *s, size_t n)
{
    uint32_t h = FNV_BASIS;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * FNV_PRIME;
    return h;
}

/* The slot of key (hash h) in table: its own, or the empty one where it
 * would go. skip: bytes of the stored token before the key ("##": 2). */
static uint32_t *slot_find(const Wordpiece *wp, uint32_t *table, uint32_t h, const char *key,
                           size_t n, size_t skip)
{
    for (h &= wp->mask;; h = (h + 1) & wp->mask) {
        uint32_t *sl = &table[h];
        if (!*sl) return sl;
        uint32_t id = *sl - 1;
        if (wp->len[id] == n + skip && !memcmp(wp->tok[id] + skip, key, n)) return sl;
    }
}

/* Build the tables from wp->tok / wp->len (wp->V entries). */
static int vocab_index(Wordpiece *wp, const char *name, char *err, size_t errlen)
{
    uint32_t slots = 64;
    while (slots < 2u * wp->V + 2) slots *= 2;
    wp->mask = slots - 1;
    wp->slot_word = calloc(slots, sizeof(uint32_t));
    wp->slot_cont = calloc(slots, sizeof(uint32_t));
    if (!wp->slot_word || !wp->slot_cont)
        return ct_fail(err, errlen, WP_ERR_NOMEM, "out of memory indexing %s", name);
    for (uint32_t id = 0; id < wp->V; id++) {
        const char *t = wp->tok[id];
        size_t n = wp->len[id];
        if (!n) continue;
        *slot_find(wp, wp->slot_word, hash_bytes(t, n), t, n, 0) = id + 1; /* later wins */
        if (n > wp->max_word) wp->max_word = (uint32_t)n;
        if (n > 2 && t[0] == '#' && t[1] == '#') {
            *slot_find(wp, wp->slot_cont, hash_bytes(t + 2, n - 2), t + 2, n - 2, 2) = id + 1;
            if (n - 2 > wp->max_cont) wp->max_cont = (uint32_t)(n - 2);
        }
    }
    wp->pad_id = wordpiece_id(wp, "[PAD]");
    wp->unk_id = wordpiece_id(wp, "[UNK]");
    wp->cls_id = wordpiece_id(wp, "[CLS]");
    wp->sep_id = wordpiece_id(wp, "[SEP]");
    wp->mask_id = wordpiece_id(wp, "[MASK]");
    if (wp->unk_id < 0)
        return ct_fail(err, errlen, WP_ERR_FORMAT, "%s has no [UNK] token, so it is not a BERT "
                       "vocab.txt", name);
    wp->hash = wordpiece_vocab_hash(wp);
    return 0;
}

uint64_t wordpiece_vocab_hash(const Wordpiece *wp)
{
    uint64_t h = DATA_FNV64_BASIS;
    for (uint32_t id = 0; id < wp->V; id++) {
        if (id) h = data_fnv1a64(h, "\n", 1);
        h = data_fnv1a64(h, wp->tok[id], wp->len[id]);
    }
    return h;
}

int wordpiece_missing(char *buf, size_t buflen, const Wordpiece *wp, const char *const *names,
                      int n)
{
    int missing = 0;
    size_t k = 0;
    if (buflen) buf[0] = 0;
    for (int i = 0; i < n; i++) {
        if (wordpiece_id(wp, names[i]) >= 0) continue;
        if (k < buflen) k += (size_t)snprintf(buf + k, buflen - k, "%s%s", missing ? ", " : "",
                                              names[i]);
        missing++;
    }
    return missing;
}

/* Split blob (n bytes, owned by wp afterwards) into lines. */
static int vocab_parse(Wordpiece *wp, char *blob, size_t n, const char *name, char *err,
                       size_t errlen)
{
    wp->blob = blob;
    if (n >= 3 && !memcmp(blob, "\xEF\xBB\xBF", 3)) { /* a byte-order mark: not a token */
        LOG_W("%s starts with a UTF-8 byte-order mark (EF BB BF); it is ignored", name);
        blob += 3;
        n -= 3;
    }
    size_t bad;
    char msg[200];
    if (utf8_validate(blob, n, &bad, msg, sizeof msg))
        return ct_fail(err, errlen, WP_ERR_UTF8, "%s: %s", name, msg);
    uint64_t lines = 0;
    for (size_t i = 0; i < n; i++) lines += blob[i] == '\n';
    if (n && blob[n - 1] != '\n') lines++;
    if (!lines)
        return ct_fail(err, errlen, WP_ERR_FORMAT, "%s is empty; a vocab.txt has one token a "
                       "line", name);
    if (lines > INT32_MAX)
        return ct_fail(err, errlen, WP_ERR_FORMAT, "%s has %llu lines; at most %d tokens "
                       "are supported", name, (unsigned long long)lines, INT32_MAX);
    wp->V = (uint32_t)lines;
    wp->tok = malloc(lines * sizeof *wp->tok);
    wp->len = malloc(lines * sizeof *wp->len);
    if (!wp->tok || !wp->len)
        return ct_fail(err, errlen, WP_ERR_NOMEM, "out of memory loading %s", name);
    size_t start = 0;
    uint32_t id = 0;
    for (size_t i = 0; i <= n && id < wp->V; i++) {
        if (i < n && blob[i] != '\n') continue;
        size_t e = i;
        if (e > start && blob[e - 1] == '\r') e--;
        blob[e] = 0; /* blob has one spare byte at [n] */
        wp->tok[id] = blob + start;
        wp->len[id] = (uint32_t)(e - start);
        id++;
        start = i + 1;
    }
    return vocab_index(wp, name, err, errlen);
}

int wordpiece_load(Wordpiece *wp, const char *path, int mode, char *err, size_t errlen)
{
    memset(wp, 0, sizeof *wp);
    basictok_init(&wp->bt, mode);
    wp->lowercase = mode == WP_UNCASED;
    FILE *f = fopen(path, "rb");
    if (!f)
        return ct_fail(err, errlen, WP_ERR_OPEN, "cannot open vocab %s: %s", path,
                       strerror(errno));
    size_t cap = 0, n = 0;
    char *blob = NULL;
    for (;;) {
        if (data_grow((void **)&blob, &cap, n + 65537, 1)) {
            fclose(f);
            free(blob);
            return ct_fail(err, errlen, WP_ERR_NOMEM, "out of memory reading %s", path);
        }
        size_t got = fread(blob + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
    }
    int rerr = ferror(f);
    fclose(f);
    if (rerr) {
        free(blob);
        return ct_fail(err, errlen, WP_ERR_OPEN, "cannot read vocab %s", path);
    }
    int st = vocab_parse(wp, blob, n, path, err, errlen);
    if (st) wordpiece_free(wp);
    return st;
}

int wordpiece_init_tokens(Wordpiece *wp, const char *const *tokens, uint32_t n, int mode,
                          char *err, size_t errlen)
{
    memset(wp, 0, sizeof *wp);
    basictok_init(&wp->bt, mode);
    wp->lowercase = mode == WP_UNCASED;
    size_t bytes = 1;
    for (uint32_t i = 0; i < n; i++) bytes += strlen(tokens[i]) + 1;
    char *blob = malloc(bytes);
    if (!blob) return ct_fail(err, errlen, WP_ERR_NOMEM, "out of memory building a vocab");
    size_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        size_t l = strlen(tokens[i]);
        memcpy(blob + k, tokens[i], l);
        blob[k + l] = '\n';
        k += l + 1;
    }
    int st = vocab_parse(wp, blob, k, "vocab", err, errlen);
    if (st) wordpiece_free(wp);
    return st;
}

void wordpiece_free(Wordpiece *wp)
{
    free(wp->tok);
    free(wp->len);
    free(wp->blob);
    free(wp->slot_word);
    free(wp->slot_cont);
    basictok_free(&wp->bt);
    memset(wp, 0, sizeof *wp);
}

int32_t wordpiece_id(const Wordpiece *wp, const char *token)
{
    size_t n = strlen(token);
    if (!n || !wp->slot_word) return -1;
    uint32_t s = *slot_find(wp, wp->slot_word, hash_bytes(token, n), token, n, 0);
    return s ? (int32_t)(s - 1) : -1;
}

const char *wordpiece_token(const Wordpiece *wp, int32_t id)
{
    return id >= 0 && (uint32_t)id < wp->V ? wp->tok[id] : "";
}

/* ---- WordPiece ------------------------------------------------------------ */

int wordpiece_encode_word(const Wordpiece *wp, WpIds *out, const char *w, size_t nb,
                          size_t nchars)
{
    if (nchars > WP_MAX_WORD_CHARS) return wpids_push(out, wp->unk_id);
    uint32_t ph[4 * WP_MAX_WORD_CHARS + 1]; /* ph[k]: hash of the k bytes from start */
    size_t mark = out->n, start = 0;
    while (start < nb) {
        int cont = start > 0;
        size_t maxlen = cont ? wp->max_cont : wp->max_word;
        size_t end = nb - start > maxlen ? start + maxlen : nb;
        while (end < nb && ((uint8_t)w[end] & 0xC0) == 0x80) end--; /* a character boundary */
        uint32_t h = FNV_BASIS;
        for (size_t k = start; k < end; k++)
            ph[k - start + 1] = h = (h ^ (uint8_t)w[k]) * FNV_PRIME;
        uint32_t *table = cont ? wp->slot_cont : wp->slot_word, sl = 0;
        while (end > start) {
            sl = *slot_find(wp, table, ph[end - start], w + start, end - start, cont ? 2 : 0);
            if (sl) break;
            do end--;
            while (end > start && ((uint8_t)w[end] & 0xC0) == 0x80);
        }
        if (!sl) {
            out->n = mark;
            return wpids_push(out, wp->unk_id);
        }
        if (wpids_push(out, (int32_t)sl - 1)) return WP_ERR_NOMEM;
        start = end;
    }
    return 0;
}

static int encode_word_cb(void *ctx, const char *w, size_t nb, size_t nchars)
{
    Wordpiece *wp = ctx;
    return wordpiece_encode_word(wp, wp->out, w, nb, nchars);
}

int wordpiece_encode(Wordpiece *wp, WpIds *out, const char *text, size_t len, char *err,
                     size_t errlen)
{
    wp->out = out;
    int r = basictok_run(&wp->bt, text, len, encode_word_cb, wp, err, errlen);
    wp->out = NULL;
    return r;
}

size_t wordpiece_join(char *buf, size_t buflen, const Wordpiece *wp, const int32_t *ids,
                      size_t n)
{
    size_t k = 0, kept = 0; /* needed length, length written */
    for (size_t i = 0; i < n; i++) {
        const char *t = wordpiece_token(wp, ids[i]);
        size_t l = strlen(t);
        if (kept == k && k + (i > 0) + l < buflen) {
            if (i) buf[kept++] = ' ';
            memcpy(buf + kept, t, l);
            kept += l;
        }
        k += (i > 0) + l;
    }
    if (buflen) buf[kept] = 0;
    return k;
}
