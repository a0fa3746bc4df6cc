/* text_shards.h — pre-tokenized corpora: a corpus (data/vocab_build.h walks
 * it) tokenized once into a binary shard file that training reads back.
 *
 * Documents. A file is cut into documents by the rule of ShardDocMode:
 *   SHARD_DOC_AUTO     (default) a file with any line that is exactly "%"
 *                      is a fortune file (the Debian fortunes package:
 *                      entries between "%" lines); any other file is cut
 *                      at blank lines (paragraphs)
 *   SHARD_DOC_FILE     one document per file
 *   SHARD_DOC_BLANK    paragraphs: runs of lines separated by one or more
 *                      blank lines (lines of only whitespace)
 *   SHARD_DOC_PERCENT  fortune entries: lines with a single '%' separate
 * A document that tokenizes to nothing (an empty entry) is dropped. Files
 * come in corpus order (sorted paths), documents in file order. A corpus
 * that gives no token, or none that masked-LM training can mask (every
 * token [UNK] or a special: a vocab that does not fit the corpus), is
 * refused (SHARD_ERR_EMPTY): such a shard would train with a loss of 0.
 *
 * Format CTTOK2 (all integers little-endian), the one shard_write writes:
 *   offset 0   magic  "CTTOK2\0\0"                               8 bytes
 *          8   u32    vocab_size (V)
 *         12   u32    n_docs (D)
 *         16   u64    n_tokens (N)
 *         24   u64    vocab_hash: wordpiece_vocab_hash of the vocab.txt the
 *                     shard was made with (FNV-1a 64 over its tokens in id
 *                     order joined by '\n'; data/wordpiece.h)
 *         32   u64    doc_offsets [D + 1]: doc d is tokens [off[d], off[d+1]);
 *                     off[0] = 0, off[D] = N, non-decreasing
 *              tokens [N]: u16 when V <= 65535, else u32 (each < V)
 *              u32    CRC-32 (zlib) of every byte after the magic and before it
 * The size is implied by the header: 32 + 8 (D + 1) + w N + 4. The reader
 * checks magic, size (a cut file says how many bytes are missing), CRC,
 * offsets and token range, and refuses the file with a message that names it.
 *
 * CTTOK1, the format before, is CTTOK2 without the vocab_hash field (a
 * 24-byte header). It is still read (TextShard.has_hash = 0): only its
 * vocab size can be checked against a vocab.txt; `ctrain shard` again
 * writes the CTTOK2 form.
 */
#ifndef CTRAIN_DATA_TEXT_SHARDS_H
#define CTRAIN_DATA_TEXT_SHARDS_H

#include <stddef.h>
#include <stdint.h>

#include "corpus.h"
#include "wordpiece.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SHARD_MAGIC "CTTOK2\0\0"
#define SHARD_HEADER_BYTES 32
#define SHARD_MAGIC_V1 "CTTOK1\0\0"   /* read only: no vocab_hash */
#define SHARD_HEADER_BYTES_V1 24

typedef enum {
    SHARD_DOC_AUTO = 0,
    SHARD_DOC_FILE = 1,
    SHARD_DOC_BLANK = 2,
    SHARD_DOC_PERCENT = 3,
} ShardDocMode;

typedef enum {
    SHARD_OK = 0,
    SHARD_ERR_OPEN = -1,      /* the shard file is missing or unreadable */
    SHARD_ERR_FORMAT = -2,    /* not a shard: magic, header, offsets, token ids */
    SHARD_ERR_TRUNCATED = -3, /* shorter than the header promises */
    SHARD_ERR_CORRUPT = -4,   /* CRC-32 mismatch */
    SHARD_ERR_NOMEM = -5,
    SHARD_ERR_WRITE = -6,     /* the output cannot be written (its folder, the disk) */
    SHARD_ERR_TEXT = -7,      /* the corpus is not UTF-8 */
    SHARD_ERR_CORPUS = -8,    /* the corpus is missing, unreadable or holds no text file */
    SHARD_ERR_EMPTY = -9,     /* the corpus gives no token masked-LM training can use */
    SHARD_ERR_LIMIT = -10,    /* more documents than a shard holds */
} ShardStatus;

typedef struct {
    int version;          /* 2 (CTTOK2), or 1 (CTTOK1: no vocab hash) */
    int has_hash;         /* vocab_hash is known (version 2) */
    uint64_t vocab_hash;  /* wordpiece_vocab_hash of the shard's vocab.txt */
    uint32_t vocab_size;  /* V */
    uint32_t n_docs;      /* D */
    uint64_t n_tokens;    /* N */
    uint64_t *offsets;    /* [D + 1] */
    int width;            /* bytes per token: 2 or 4 */
    const void *tokens;   /* [N] u16 or u32, inside buf */
    uint8_t *buf;         /* the whole file */
    size_t size;
} TextShard;

/* What shard_write did. */
typedef struct {
    uint64_t files, binary_skipped, bytes, docs, tokens, unk;
    uint64_t dropped;     /* documents the filter left out */
} ShardStats;

/* Tokenize the corpus at corpus_path with wp into out_path (written to
 * out_path.tmp, then renamed; its folder is checked before the corpus is
 * read). Returns 0, or a negative ShardStatus with a one-line message in
 * err; shard_hint(status) then says what to do. stats may be NULL. */
int shard_write(const char *corpus_path, Wordpiece *wp, const char *out_path, int doc_mode,
                ShardStats *stats, char *err, size_t errlen);

/* Same, keeping only the documents keep(keep_ctx, ...) accepts (data/corpus.h;
 * keep NULL: all); stats->dropped counts the others. */
int shard_write_filtered(const char *corpus_path, Wordpiece *wp, const char *out_path,
                         int doc_mode, CorpusDocFilter keep, void *keep_ctx, ShardStats *stats,
                         char *err, size_t errlen);

/* Write tokens [N] with doc_offsets [D + 1] as a shard of a vocab of
 * vocab_size tokens with hash vocab_hash (tests, tools; no emptiness check). */
int shard_write_tokens(const char *out_path, uint32_t vocab_size, uint64_t vocab_hash,
                       const uint32_t *tokens, const uint64_t *doc_offsets, uint32_t n_docs,
                       char *err, size_t errlen);

/* Read and check path. Returns 0, or a negative ShardStatus with a one-line
 * message in err; shard_hint(status) then says what to do. On failure s is
 * left empty (shard_close on it is safe). */
int shard_open(TextShard *s, const char *path, char *err, size_t errlen);
void shard_close(TextShard *s);

/* What to do about a failed shard_open or shard_write, by its status. */
const char *shard_hint(int status);

/* Token k of the shard (k < N). */
static inline uint32_t shard_token(const TextShard *s, uint64_t k)
{
    return s->width == 2 ? ((const uint16_t *)s->tokens)[k] : ((const uint32_t *)s->tokens)[k];
}

/* Documents of one file's text under mode: calls fn(ctx, doc, len) for each
 * document's bytes in order (shard_write's splitter, exposed for tests and
 * for data/text_cls.c). A nonzero return from fn stops and is returned.
 * `percent` reports whether the file was taken as a fortune file. */
int shard_split_docs(const char *text, size_t len, int mode, int *percent,
                     int (*fn)(void *ctx, const char *doc, size_t len), void *ctx);

#ifdef __cplusplus
}
#endif
#endif
