/* wordpiece.h — BERT's tokenizer: a standard vocab.txt, the basic tokenizer
 * and greedy WordPiece, token for token as Hugging Face's BertTokenizer
 * (BasicTokenizer + WordpieceTokenizer) for uncased and cased vocabularies.
 *
 * vocab.txt: one token per line, id = line number from 0 (a final newline
 * adds no line; a '\r' before the newline is dropped; an empty line is a
 * token that never matches; when a token appears twice the later line's id
 * wins, as in HF's load_vocab; a UTF-8 byte-order mark before the first
 * line is dropped, with a warning). The specials are looked up by name:
 * [PAD] [UNK] [CLS] [SEP] [MASK]; only [UNK] is required.
 *
 * Vocabulary hash (wordpiece_vocab_hash, kept in Wordpiece.hash): FNV-1a 64
 * (data/data_util.h) over every token in id order joined by '\n', i.e. the
 * bytes of vocab.txt with its '\r's, BOM and final newline removed. A token
 * shard stores it (data/text_shards.h), so training can tell a reordered
 * or edited vocab of the same size from the one the shard was made with.
 *
 * Text -> ids, in the order HF applies the steps:
 *   1. clean: drop U+0000, U+FFFD and control characters (utf8.h); map
 *      whitespace (' ' \t \n \r, category Zs) to a space
 *   2. put spaces around each CJK ideograph (utf8_is_cjk)
 *   3. cased with WP_CASED_NFC only: NFC (the Python BertTokenizer of
 *      transformers 4.x normalizes here; transformers 5's BertTokenizer,
 *      every BertTokenizerFast and Google's original BERT do not, so plain
 *      cased leaves "e" + U+0301 as two characters; uncased is the same
 *      either way, since step 5 takes the NFD of the result). Until
 *      2026-11-30 ctrain's cased mode was the NFC one: a cased vocab built
 *      before then goes with WP_CASED_NFC (--cased-nfc), or decomposed
 *      accents in the text may find no piece and become [UNK].
 *   4. split on whitespace (space, U+2028, U+2029: Python's str.split())
 *   5. uncased only: lower-case each word (Python str.lower(), final sigma
 *      included), then strip accents (NFD, drop category Mn)
 *   6. split each word on punctuation: every punctuation character is a
 *      word of its own
 *   7. WordPiece per word: a word of more than 100 code points is [UNK];
 *      otherwise the longest vocab entry that prefixes it, then the longest
 *      "##"-prefixed entry that prefixes the rest, and so on; a word with a
 *      rest no entry matches is one [UNK].
 * Input must be UTF-8: a bad byte sequence is an error naming its byte
 * offset (utf8_validate), never replaced.
 *
 * Not reproduced: HF splits the special-token strings ("[MASK]" typed in the
 * text) off before step 1; here they are text like any other. Unassigned
 * code points: see utf8.h.
 *
 * Threads: a Wordpiece keeps scratch buffers; use one per thread.
 */
#ifndef CTRAIN_DATA_WORDPIECE_H
#define CTRAIN_DATA_WORDPIECE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WP_MAX_WORD_CHARS 100 /* HF's max_input_chars_per_word */

typedef enum {
    WP_OK = 0,
    WP_ERR_OPEN = -1,   /* file missing or unreadable */
    WP_ERR_FORMAT = -2, /* not a vocab file: empty, no [UNK], too many lines */
    WP_ERR_UTF8 = -3,   /* input text (or the vocab) is not UTF-8 */
    WP_ERR_NOMEM = -4,
} WpStatus;

/* A word of the basic tokenizer: UTF-8 bytes (not NUL-terminated) and its
 * length in code points. A nonzero return stops basictok_run with it. */
typedef int (*BasicWordFn)(void *ctx, const char *word, size_t nbytes, size_t nchars);

/* The normalization of a vocabulary (wordpiece_load's and basictok_init's
 * `mode`; steps 3 and 5 above). */
enum {
    WP_CASED = 0,       /* case and accents kept, no normalization */
    WP_UNCASED = 1,     /* lower-case + strip accents */
    WP_CASED_NFC = 2,   /* cased, NFC first (transformers 4.x's Python BertTokenizer) */
};

/* Steps 1-6 above: text -> words. Scratch buffers grow as needed. */
typedef struct {
    int lowercase;            /* 1: uncased (lower-case + strip accents) */
    int nfc;                  /* 1: WP_CASED_NFC */
    char *w;                  /* the word being collected, bytes */
    size_t wn, wcap;
    uint32_t *cp, *t1, *t2;   /* code points of it, and normalized forms */
    size_t ccap;              /* capacity of each, in code points */
    char *piece;              /* UTF-8 of the normalized word */
    size_t pcap;
} BasicTok;

void basictok_init(BasicTok *bt, int mode);
void basictok_free(BasicTok *bt);

/* Split text[0..len) into words, calling fn for each in order. Returns 0,
 * WP_ERR_UTF8 / WP_ERR_NOMEM with a message in err, or fn's nonzero return. */
int basictok_run(BasicTok *bt, const char *text, size_t len, BasicWordFn fn, void *ctx,
                 char *err, size_t errlen);

/* A growable id list. */
typedef struct {
    int32_t *ids;
    size_t n, cap;
} WpIds;

int wpids_push(WpIds *v, int32_t id); /* 0, or WP_ERR_NOMEM */
void wpids_free(WpIds *v);

typedef struct {
    uint32_t V;                  /* vocab size (lines) */
    char **tok;                  /* [V] NUL-terminated tokens, in blob */
    uint32_t *len;               /* [V] byte lengths */
    char *blob;
    uint32_t *slot_word;         /* hash of whole tokens: id + 1, 0 = empty */
    uint32_t *slot_cont;         /* hash of "##" tokens, keyed without the "##" */
    uint32_t mask;               /* slots - 1 */
    uint32_t max_word, max_cont; /* longest key of each, bytes */
    int32_t pad_id, unk_id, cls_id, sep_id, mask_id; /* -1 when absent ([UNK] never) */
    uint64_t hash;               /* wordpiece_vocab_hash of the tokens */
    int lowercase;
    BasicTok bt;
    WpIds *out;                  /* the list wordpiece_encode appends to */
} Wordpiece;

/* Load vocab_path; mode: WP_UNCASED, WP_CASED or WP_CASED_NFC. Returns 0, or a
 * negative WpStatus with a one-line message in err; wordpiece_hint(status)
 * then says what to do. */
int wordpiece_load(Wordpiece *wp, const char *vocab_path, int mode, char *err,
                   size_t errlen);

/* What to do about a failed wordpiece_load, by its status. */
const char *wordpiece_hint(int status);

/* The vocabulary hash of the header above, over wp's V tokens. */
uint64_t wordpiece_vocab_hash(const Wordpiece *wp);

/* Which of the n tokens names[] wp lacks: their names joined by ", " into
 * buf (always terminated); returns how many are missing. */
int wordpiece_missing(char *buf, size_t buflen, const Wordpiece *wp, const char *const *names,
                      int n);

/* The same from tokens in memory (id = index). */
int wordpiece_init_tokens(Wordpiece *wp, const char *const *tokens, uint32_t n, int mode,
                          char *err, size_t errlen);

void wordpiece_free(Wordpiece *wp);

/* Id of a token, or -1. */
int32_t wordpiece_id(const Wordpiece *wp, const char *token);

/* Token of an id ("" for an id out of range). */
const char *wordpiece_token(const Wordpiece *wp, int32_t id);

/* Append the ids of text[0..len) to out. Returns 0, or WP_ERR_UTF8 /
 * WP_ERR_NOMEM with the message in err ("invalid UTF-8 at byte offset ..."). */
int wordpiece_encode(Wordpiece *wp, WpIds *out, const char *text, size_t len, char *err,
                     size_t errlen);

/* Step 7 alone, for one basic-tokenizer word. Returns 0 or WP_ERR_NOMEM. */
int wordpiece_encode_word(const Wordpiece *wp, WpIds *out, const char *word, size_t nbytes,
                          size_t nchars);

/* The tokens of ids joined by single spaces into buf (truncated to fit,
 * always terminated); returns the length the whole string needs. */
size_t wordpiece_join(char *buf, size_t buflen, const Wordpiece *wp, const int32_t *ids,
                      size_t n);

#ifdef __cplusplus
}
#endif
#endif
