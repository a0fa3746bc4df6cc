/* fuzz_wordpiece.c — libFuzzer harness: arbitrary text through the UTF-8
 * layer (data/utf8.h) and the tokenizer (data/wordpiece.h) with a small
 * fixed vocabulary, the path every corpus and fortune entry takes.
 *
 * Input: byte 0 picks the vocabulary's mode (cased, uncased, cased NFC)
 * and the document rule of data/text_shards.h (shard_split_docs); the rest
 * is the text. Checked: utf8_validate agrees with decoding by utf8_next;
 * on valid text every code point's properties and normal forms stay in
 * their bounds (decompose <= UTF8_MAX_DECOMP, re-encoding gives the same
 * bytes), every id is in the vocabulary, encoding the text whole and
 * document by document both succeed; invalid text is refused with a
 * message at the first bad byte, by utf8_validate and by the tokenizer.
 */
#include "fuzz_util.h"
#include "data/text_shards.h"
#include "data/utf8.h"

static Wordpiece g_wp[3];

typedef struct {
    Wordpiece *wp;
    int valid;     /* the whole text is UTF-8: so is every document */
    WpIds ids;
} Docs;

static int on_doc(void *ctx, const char *doc, size_t len)
{
    Docs *d = ctx;
    char err[256];
    int st = wordpiece_encode(d->wp, &d->ids, doc, len, err, sizeof err);
    fuzz_check(st == 0 || (!d->valid && st == WP_ERR_UTF8), "a document: status %d: %s", st, err);
    return 0;
}

static void check_props(const uint8_t *s, size_t n)
{
    uint32_t *cp = malloc((n + 1) * sizeof *cp), *t = malloc((UTF8_MAX_DECOMP * n + 1) * sizeof *t);
    if (!cp || !t) abort();
    size_t pos = 0, k = 0;
    while (pos < n) {
        size_t at = pos;
        int r = utf8_next(s, n, &pos, &cp[k]);
        fuzz_check(r == 0 && pos > at && pos - at <= 4, "valid text, utf8_next %d at %zu", r, at);
        char enc[4];
        size_t l = utf8_encode(enc, cp[k]);
        fuzz_check(l == pos - at && !memcmp(enc, s + at, l), "U+%04X re-encoded", cp[k]);
        uint32_t d[UTF8_MAX_DECOMP];
        int nd = utf8_decompose(d, cp[k]);
        fuzz_check(nd >= 1 && nd <= UTF8_MAX_DECOMP, "U+%04X decomposes to %d", cp[k], nd);
        fuzz_check(utf8_lower(cp[k]) < 0x110000 && utf8_ccc(cp[k]) >= 0 && utf8_ccc(cp[k]) < 256,
                   "U+%04X", cp[k]);
        (void)(utf8_is_whitespace(cp[k]) + utf8_is_control(cp[k]) + utf8_is_punct(cp[k]) +
               utf8_is_cjk(cp[k]) + utf8_is_mn(cp[k]));
        k++;
    }
    size_t m = utf8_strip_accents(t, cp, k);
    fuzz_check(m <= UTF8_MAX_DECOMP * k, "strip_accents: %zu of %zu", m, k);
    m = utf8_nfc(t, cp, k);
    fuzz_check(m <= UTF8_MAX_DECOMP * k, "NFC made %zu code points of %zu", m, k);
    utf8_lower_word(t, cp, k);
    free(cp);
    free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    if (!ready) {
        fuzz_quiet();
        fuzz_vocab_init(&g_wp[0], WP_CASED);
        fuzz_vocab_init(&g_wp[1], WP_UNCASED);
        fuzz_vocab_init(&g_wp[2], WP_CASED_NFC);
        ready = 1;
    }
    if (!size) return 0;
    Wordpiece *wp = &g_wp[data[0] % 3];
    int mode = (data[0] / 3) % 4;
    const char *text = (const char *)data + 1;
    size_t n = size - 1;
    char err[256] = "", err2[256] = "";
    size_t bad = 0;
    int valid = utf8_validate(text, n, &bad, err, sizeof err) == 0;
    if (valid) check_props((const uint8_t *)text, n);
    else fuzz_check(err[0] && bad < n, "refused at %zu of %zu: '%s'", bad, n, err);

    WpIds ids = {0};
    int st = wordpiece_encode(wp, &ids, text, n, err2, sizeof err2);
    fuzz_check(valid ? st == 0 : st == WP_ERR_UTF8, "valid %d, status %d: %s", valid, st, err2);
    for (size_t i = 0; i < ids.n; i++)
        fuzz_check(ids.ids[i] >= 0 && (uint32_t)ids.ids[i] < wp->V, "id %d", ids.ids[i]);
    char joined[512];
    wordpiece_join(joined, sizeof joined, wp, ids.ids, ids.n);
    wpids_free(&ids);
    Docs d = {wp, valid, {0}};
    int percent;
    shard_split_docs(text, n, mode, &percent, on_doc, &d);
    wpids_free(&d.ids);
    return 0;
}
