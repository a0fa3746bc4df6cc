/* utf8.c — strict UTF-8 decoding and the Unicode properties of utf8.h.
 *
 * Lookups are binary searches over the generated tables (data/utf8_tables.h)
 * with a fast path for the code points below the first table entry, so ASCII
 * and Latin-1 text never search. Normalization works on one token at a time
 * (the tokenizer's whitespace-separated words): the text around a token is a
 * space, which composes with nothing, so per-token NFC equals whole-text NFC.
 *
 * NFC (UAX #15): full canonical decomposition, canonical ordering (a stable
 * sort of each run of nonzero combining classes), then composition of each
 * character with the last starter unless a character in between blocks it
 * (class 0, or a class >= its own). Hangul syllables decompose and compose
 * arithmetically (Unicode ch. 3.12). Not covered: the CJK compatibility
 * ideographs (F900-FAFF, 2F800-2FA1F) keep their code points, where NFC and
 * NFD map them to unified ideographs.
 *
 * Final sigma: Python's str.lower() turns capital sigma into final sigma when
 * a cased letter precedes it and none follows, skipping case-ignorable
 * characters (Unicode 3.13, Final_Sigma). Both properties are exact: the
 * "cased" table was made by asking Python, and case-ignorable is built from
 * categories as Unicode defines it (checked against Python for every code
 * point when the tables were generated).
 */
#include "utf8.h"

#include <stdio.h>
#include <string.h>

#include "utf8_tables.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* ---- decoding --------------------------------------------------------- */

int utf8_next(const uint8_t *s, size_t n, size_t *pos, uint32_t *cp)
{
    size_t i = *pos;
    uint8_t b0 = s[i];
    if (b0 < 0x80) {
        *cp = b0;
        *pos = i + 1;
        return 0;
    }
    if (b0 < 0xC0) return UTF8_BAD_CONT;
    if (b0 < 0xC2 || b0 > 0xF4) return UTF8_BAD_BYTE;
    int need = b0 < 0xE0 ? 1 : b0 < 0xF0 ? 2 : 3;
    uint32_t c = b0 & (0x3F >> need);
    for (int k = 1; k <= need; k++) {
        if (i + (size_t)k >= n) return UTF8_BAD_TRUNC;
        uint8_t b = s[i + (size_t)k];
        if ((b & 0xC0) != 0x80) return UTF8_BAD_SEQ;
        c = c << 6 | (b & 0x3F);
    }
    if ((need == 2 && c < 0x800) || (need == 3 && c < 0x10000)) return UTF8_BAD_OVERLONG;
    if (c >= 0xD800 && c <= 0xDFFF) return UTF8_BAD_SURROGATE;
    if (c > 0x10FFFF) return UTF8_BAD_RANGE;
    *cp = c;
    *pos = i + 1 + (size_t)need;
    return 0;
}

void utf8_describe(char *err, size_t errlen, const uint8_t *s, size_t n, size_t off, int code)
{
    if (!err || !errlen) return;
    uint8_t b0 = s[off];
    int need = b0 < 0xE0 ? 1 : b0 < 0xF0 ? 2 : 3;
    char seq[16] = "";
    size_t k = 0;
    for (int j = 0; j <= need && off + (size_t)j < n && k + 4 < sizeof seq; j++)
        k += (size_t)snprintf(seq + k, sizeof seq - k, j ? " %02X" : "%02X", s[off + (size_t)j]);
    uint32_t c = b0 & (0x3F >> need);
    for (int j = 1; j <= need && off + (size_t)j < n; j++) c = c << 6 | (s[off + (size_t)j] & 0x3F);
    int w = snprintf(err, errlen, "invalid UTF-8 at byte offset %zu: ", off);
    if (w < 0 || (size_t)w >= errlen) return;
    char *e = err + w;
    size_t el = errlen - (size_t)w;
    switch (code) {
    case UTF8_BAD_CONT:
        snprintf(e, el, "unexpected continuation byte %02X (no lead byte before it)", b0);
        break;
    case UTF8_BAD_BYTE:
        if ((b0 == 0xC0 || b0 == 0xC1) && off + 1 < n && (s[off + 1] & 0xC0) == 0x80)
            snprintf(e, el, "overlong 2-byte encoding (%02X %02X) of U+%04X", b0, s[off + 1],
                     (uint32_t)(b0 & 0x1F) << 6 | (s[off + 1] & 0x3F));
        else if (b0 == 0xC0 || b0 == 0xC1)
            snprintf(e, el, "byte %02X (an overlong 2-byte lead) never occurs in UTF-8", b0);
        else
            snprintf(e, el, "byte %02X never occurs in UTF-8", b0);
        break;
    case UTF8_BAD_TRUNC:
        snprintf(e, el, "truncated sequence (%s): lead byte %02X needs %d continuation "
                 "byte%s, the input ends after %zu", seq, b0, need, need > 1 ? "s" : "",
                 n - off - 1);
        break;
    case UTF8_BAD_SEQ:
        snprintf(e, el, "truncated sequence (%s): lead byte %02X needs %d continuation "
                 "byte%s (80..BF)", seq, b0, need, need > 1 ? "s" : "");
        break;
    case UTF8_BAD_OVERLONG:
        snprintf(e, el, "overlong %d-byte encoding (%s) of U+%04X", need + 1, seq, c);
        break;
    case UTF8_BAD_SURROGATE:
        snprintf(e, el, "encoded surrogate U+%04X (%s); UTF-8 carries no surrogates", c, seq);
        break;
    case UTF8_BAD_RANGE:
        snprintf(e, el, "code point U+%X (%s) is past U+10FFFF", c, seq);
        break;
    default:
        snprintf(e, el, "bad sequence (%s)", seq);
    }
}

int utf8_validate(const char *str, size_t n, size_t *bad_off, char *err, size_t errlen)
{
    const uint8_t *s = (const uint8_t *)str;
    size_t i = 0;
    while (i < n) {
        /* ASCII runs eight bytes at a time. */
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i >= n) break;
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        size_t at = i;
        int r = utf8_next(s, n, &i, &cp);
        if (r) {
            if (bad_off) *bad_off = at;
            utf8_describe(err, errlen, s, n, at, r);
            return -1;
        }
    }
    return 0;
}

size_t utf8_encode(char *out, uint32_t cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- properties --------------------------------------------------------- */

static int in_ranges(const U8Range *r, size_t n, uint32_t cp)
{
    if (cp < r[0].lo || cp > r[n - 1].hi) return 0;
    size_t lo = 0, hi = n;
    while (lo < hi) { /* first range with hi >= cp */
        size_t mid = (lo + hi) / 2;
        if (r[mid].hi < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && r[lo].lo <= cp;
}

int utf8_is_whitespace(uint32_t cp)
{
    switch (cp) {
    case ' ': case '\t': case '\n': case '\r':
    case 0x00A0: case 0x1680: case 0x202F: case 0x205F: case 0x3000:
        return 1;
    default:
        return cp >= 0x2000 && cp <= 0x200A; /* the rest of category Zs */
    }
}

int utf8_is_control(uint32_t cp)
{
    if (cp == '\t' || cp == '\n' || cp == '\r') return 0;
    if (cp < 0x20 || (cp >= 0x7F && cp < 0xA0)) return 1;          /* Cc */
    if (cp >= 0xE000 && cp <= 0xF8FF) return 1;                    /* Co */
    if (cp >= 0xF0000) return 1;                                   /* Co, planes 15-16 */
    if ((cp >= 0xFDD0 && cp <= 0xFDEF) || (cp & 0xFFFE) == 0xFFFE) /* noncharacters */
        return 1;
    return in_ranges(u8_cf, COUNT(u8_cf), cp);                     /* Cf */
}

int utf8_is_punct(uint32_t cp)
{
    if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
        (cp >= 123 && cp <= 126))
        return 1;
    if (cp < 0xA1) return 0;
    return in_ranges(u8_punct, COUNT(u8_punct), cp);
}

int utf8_is_cjk(uint32_t cp)
{
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

int utf8_is_mn(uint32_t cp)
{
    return cp >= 0x300 && in_ranges(u8_mn, COUNT(u8_mn), cp);
}

/* The lower-case run holding cp, or NULL. */
static const U8Case *lower_run(uint32_t cp)
{
    size_t lo = 0, hi = COUNT(u8_lower);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (u8_lower[mid].hi < cp) lo = mid + 1;
        else hi = mid;
    }
    if (lo == COUNT(u8_lower) || u8_lower[lo].lo > cp) return NULL;
    const U8Case *r = &u8_lower[lo];
    return (cp - r->lo) % (uint32_t)r->stride == 0 ? r : NULL;
}

uint32_t utf8_lower(uint32_t cp)
{
    if (cp < 0x80) return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
    if (cp < 0xC0) return cp;
    const U8Case *r = lower_run(cp);
    return r ? (uint32_t)((int32_t)cp + r->delta) : cp;
}

int utf8_ccc(uint32_t cp)
{
    if (cp < 0x300) return 0;
    size_t lo = 0, hi = COUNT(u8_ccc);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (u8_ccc[mid].hi < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < COUNT(u8_ccc) && u8_ccc[lo].lo <= cp ? (int)u8_ccc[lo].ccc : 0;
}

/* ---- decomposition and composition ------------------------------------ */

/* Hangul syllables (Unicode ch. 3.12): S = SBASE + (L * VCOUNT + V) * TCOUNT + T. */
enum {
    SBASE = 0xAC00, LBASE = 0x1100, VBASE = 0x1161, TBASE = 0x11A7,
    LCOUNT = 19, VCOUNT = 21, TCOUNT = 28, NCOUNT = VCOUNT * TCOUNT, SCOUNT = LCOUNT * NCOUNT,
};

static const U8Decomp *decomp_find(uint32_t cp)
{
    if (cp < 0xC0) return NULL;
    size_t lo = 0, hi = COUNT(u8_decomp);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (u8_decomp[mid].cp < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < COUNT(u8_decomp) && u8_decomp[lo].cp == cp ? &u8_decomp[lo] : NULL;
}

int utf8_decompose(uint32_t *out, uint32_t cp)
{
    if (cp >= SBASE && cp < SBASE + SCOUNT) {
        uint32_t s = cp - SBASE;
        out[0] = LBASE + s / NCOUNT;
        out[1] = VBASE + (s % NCOUNT) / TCOUNT;
        if (s % TCOUNT == 0) return 2;
        out[2] = TBASE + s % TCOUNT;
        return 3;
    }
    const U8Decomp *d = decomp_find(cp);
    if (!d) {
        out[0] = cp;
        return 1;
    }
    /* The first part may decompose again (U+1E08 -> U+00C7 U+0301 -> C U+0327
     * U+0301); the second never does (checked by the generator's data). */
    int k = utf8_decompose(out, d->a);
    if (d->b) out[k++] = d->b;
    return k;
}

/* The primary composite of a and b, or 0. */
static uint32_t compose(uint32_t a, uint32_t b)
{
    if (a >= LBASE && a < LBASE + LCOUNT && b >= VBASE && b < VBASE + VCOUNT)
        return SBASE + ((a - LBASE) * VCOUNT + (b - VBASE)) * TCOUNT;
    if (a >= SBASE && a < SBASE + SCOUNT && (a - SBASE) % TCOUNT == 0 && b > TBASE &&
        b < TBASE + TCOUNT)
        return a + (b - TBASE);
    if (b < 0x300) return 0;
    size_t lo = 0, hi = COUNT(u8_comp);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const U8Comp *m = &u8_comp[mid];
        if (m->a < a || (m->a == a && m->b < b)) lo = mid + 1;
        else hi = mid;
    }
    if (lo < COUNT(u8_comp) && u8_comp[lo].a == a && u8_comp[lo].b == b)
        return u8_decomp[u8_comp[lo].di].cp;
    return 0;
}

/* Full decomposition of in into out, then canonical ordering. */
static size_t nfd(uint32_t *out, const uint32_t *in, size_t n)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++) m += (size_t)utf8_decompose(out + m, in[i]);
    /* Stable insertion sort of each run of nonzero classes: runs are a few
     * marks long. */
    for (size_t i = 1; i < m; i++) {
        int cc = utf8_ccc(out[i]);
        if (cc == 0) continue;
        uint32_t c = out[i];
        size_t j = i;
        while (j > 0) {
            int pc = utf8_ccc(out[j - 1]);
            if (pc == 0 || pc <= cc) break;
            out[j] = out[j - 1];
            j--;
        }
        out[j] = c;
    }
    return m;
}

size_t utf8_nfc(uint32_t *out, const uint32_t *in, size_t n)
{
    /* Below U+0300 every character is NFC-stable and a starter. */
    size_t i = 0;
    while (i < n && in[i] < 0x300) i++;
    if (i == n) {
        if (out != in) memcpy(out, in, n * sizeof *in);
        return n;
    }
    size_t m = nfd(out, in, n);
    size_t o = 0;
    long sp = -1;    /* index in out of the last starter */
    int last_cc = 0; /* class of the last character kept after it */
    for (size_t k = 0; k < m; k++) {
        uint32_t c = out[k];
        int cc = utf8_ccc(c);
        if (sp >= 0) {
            int adjacent = (size_t)sp == o - 1;
            int blocked = !adjacent && (last_cc == 0 || last_cc >= cc);
            uint32_t p = blocked ? 0 : compose(out[sp], c);
            if (p) {
                out[sp] = p;
                continue;
            }
        }
        if (cc == 0) sp = (long)o;
        last_cc = cc;
        out[o++] = c;
    }
    return o;
}

size_t utf8_strip_accents(uint32_t *out, const uint32_t *in, size_t n)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = in[i];
        if (c < 0xC0) {
            out[m++] = c;
            continue;
        }
        uint32_t d[UTF8_MAX_DECOMP];
        int k = utf8_decompose(d, c);
        for (int j = 0; j < k; j++)
            if (!utf8_is_mn(d[j])) out[m++] = d[j];
    }
    return m;
}

/* ---- lower case with final sigma ------------------------------------- */

/* Case_Ignorable (Unicode 3.13): Mn Me Cf Lm Sk, and the Word_Break
 * MidLetter / MidNumLet / Single_Quote characters listed here. */
static int case_ignorable(uint32_t c)
{
    switch (c) {
    case '\'': case '.': case ':': case 0xB7: case 0x387: case 0x55F: case 0x5F4:
    case 0x2018: case 0x2019: case 0x2024: case 0x2027: case 0xFE13: case 0xFE52:
    case 0xFE55: case 0xFF07: case 0xFF0E: case 0xFF1A:
        return 1;
    default:
        break;
    }
    if (c < 0x5E) return 0;
    return utf8_is_mn(c) || in_ranges(u8_lm_sk_me, COUNT(u8_lm_sk_me), c) ||
           in_ranges(u8_cf, COUNT(u8_cf), c);
}

static int cased(uint32_t c)
{
    if (c < 0x80) return (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
    return in_ranges(u8_cased, COUNT(u8_cased), c);
}

void utf8_lower_word(uint32_t *out, const uint32_t *in, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (in[i] != 0x3A3) {
            out[i] = utf8_lower(in[i]);
            continue;
        }
        size_t j = i;
        while (j > 0 && case_ignorable(in[j - 1])) j--;
        int final = j > 0 && cased(in[j - 1]);
        if (final) {
            j = i + 1;
            while (j < n && case_ignorable(in[j])) j++;
            final = j == n || !cased(in[j]);
        }
        out[i] = final ? 0x3C2 : 0x3C3;
    }
}

const char *utf8_unicode_version(void) { return UTF8_UNICODE_VERSION; }
