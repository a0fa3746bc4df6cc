/* utf8.h — strict UTF-8 decoding and the Unicode properties BERT's
 * tokenizer needs (data/wordpiece.h is the user).
 *
 * Decoding follows the Unicode standard's table of well-formed byte
 * sequences (Table 3-7): overlong forms (C0 AF for '/'), surrogates
 * (ED A0 80), code points past U+10FFFF, stray continuation bytes and cut
 * sequences are refused, never replaced by U+FFFD. utf8_validate names the
 * byte offset of the first bad sequence and what is wrong with it:
 *   invalid UTF-8 at byte offset 12: overlong 2-byte encoding (C0 AF) of U+002F
 *
 * Properties, as Hugging Face's BertTokenizer defines them (its Python
 * helpers _is_whitespace, _is_control, _is_punctuation, _is_chinese_char):
 *   whitespace   ' ' \t \n \r and general category Zs
 *   control      category C* except \t \n \r: Cc, Cf, Co (private use) and
 *                the noncharacters (U+FDD0..FDEF, U+xxFFFE/F). HF also drops
 *                unassigned code points (Cn) of its Python's Unicode version;
 *                here they are kept (which ones are unassigned changes with
 *                every Unicode release).
 *   punctuation  ASCII 33-47, 58-64, 91-96, 123-126, and category P*
 *   CJK          the CJK Unified Ideograph blocks BERT lists (utf8_is_cjk)
 * and for lower-casing and accent stripping: the simple lower-case mapping
 * (all scripts), canonical combining classes, canonical decompositions (all
 * but the CJK compatibility ideographs; Hangul syllables algorithmically),
 * NFC composition, and category Mn.
 *
 * The tables are data/utf8_tables.h, generated from Unicode 14.0 (Python
 * 3.11's unicodedata) by the script at its end; UTF8_UNICODE_VERSION says
 * which. A text is a sequence of code points: uint32_t cp.
 */
#ifndef CTRAIN_DATA_UTF8_H
#define CTRAIN_DATA_UTF8_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Why a byte sequence is not UTF-8 (utf8_next's negative returns). */
typedef enum {
    UTF8_BAD_CONT = -1,      /* a continuation byte (80..BF) where a character starts */
    UTF8_BAD_BYTE = -2,      /* C0, C1 or F5..FF: never in UTF-8 */
    UTF8_BAD_TRUNC = -3,     /* the input ends inside a sequence */
    UTF8_BAD_SEQ = -4,       /* a lead byte not followed by enough continuation bytes */
    UTF8_BAD_OVERLONG = -5,  /* a longer encoding than the code point needs */
    UTF8_BAD_SURROGATE = -6, /* U+D800..U+DFFF */
    UTF8_BAD_RANGE = -7,     /* past U+10FFFF */
} Utf8Bad;

/* The longest canonical decomposition of one code point (U+1F82). */
#define UTF8_MAX_DECOMP 4

/* Decode the character at s[*pos] (*pos < n) into *cp and advance *pos.
 * Returns 0, or a negative Utf8Bad with *pos left at the bad sequence. */
int utf8_next(const uint8_t *s, size_t n, size_t *pos, uint32_t *cp);

/* "invalid UTF-8 at byte offset N: <what>" for the bad sequence at s[off],
 * where utf8_next returned code. */
void utf8_describe(char *err, size_t errlen, const uint8_t *s, size_t n, size_t off, int code);

/* 0 when s[0..n) is UTF-8; otherwise -1, *bad_off (may be NULL) = offset of
 * the first bad sequence and the utf8_describe message in err. */
int utf8_validate(const char *s, size_t n, size_t *bad_off, char *err, size_t errlen);

/* UTF-8 bytes of cp (1 to 4) into out; returns the count. cp must be a
 * scalar value (< 0x110000, not a surrogate). */
size_t utf8_encode(char *out, uint32_t cp);

int utf8_is_whitespace(uint32_t cp);
int utf8_is_control(uint32_t cp);
int utf8_is_punct(uint32_t cp);
int utf8_is_cjk(uint32_t cp);
int utf8_is_mn(uint32_t cp);

/* Simple lower-case mapping (U+0130 maps to 'i'). */
uint32_t utf8_lower(uint32_t cp);
/* Canonical combining class (0 for starters). */
int utf8_ccc(uint32_t cp);
/* Full canonical decomposition of cp into out [UTF8_MAX_DECOMP]; returns the
 * count (1 with out[0] = cp when cp does not decompose). */
int utf8_decompose(uint32_t *out, uint32_t cp);

/* Python's str.lower() on a token: out[i] = lower(in[i]), except that
 * capital sigma becomes final sigma (U+03C2) at the end of a word (Unicode's
 * Final_Sigma context, as Python applies it). out and in may not overlap. */
void utf8_lower_word(uint32_t *out, const uint32_t *in, size_t n);

/* NFD, then drop category Mn: BERT's accent stripping. out needs room for
 * UTF8_MAX_DECOMP * n; returns the output length. */
size_t utf8_strip_accents(uint32_t *out, const uint32_t *in, size_t n);

/* NFC: out needs room for UTF8_MAX_DECOMP * n (the decomposition is built
 * there first); returns the output length. */
size_t utf8_nfc(uint32_t *out, const uint32_t *in, size_t n);

/* The Unicode version of the tables, e.g. "14.0.0". */
const char *utf8_unicode_version(void);

#ifdef __cplusplus
}
#endif
#endif
