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
 * come in corpus order (sorted paths), documents in file order.
 *
 * Format (all integers little-endian):
 *   offset 0   magic  "CTTOK1\0\0"                               8 bytes
 *          8   u32    vocab_size (V)
 *         12   u32    n_docs (D)
 *         16   u64    n_tokens (N)
 *         24   u64    doc_offsets [D + 1]: doc d is tokens [off[d], off[d+1]);
 *                     off[0] = 0, off[D] = N, non-decreasing
 *              tokens [N]: u16 when V <= 65535, else u32 (each < V)
 *              u32    CRC-32 (zlib) of every byte after the magic and before it
 * The size is implied by the header: 24 + 8 (D + 1) + w N + 4. The reader
 * checks magic, size (a cut file says how many bytes are missing), CRC,
 * offsets and token range, and refuses the file with a message that names it.
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

#define SHARD_MAGIC "CTTOK1\0\0"
#define SHARD_HEADER_BYTES 24

typedef enum {
    SHARD_DOC_AUTO = 0,
    SHARD_DOC_FILE = 1,
    SHARD_DOC_BLANK = 2,
    SHARD_DOC_PERCENT = 3,
} ShardDocMode;

typedef enum {
    SHARD_OK = 0,
    SHARD_ERR_OPEN = -1,      /* missing or unreadable (also: the corpus) */
    SHARD_ERR_FORMAT = -2,    /* not a shard: magic, header, offsets, token ids */
    SHARD_ERR_TRUNCATED = -3, /* shorter than the header promises */
    SHARD_ERR_CORRUPT = -4,   /* CRC-32 mismatch */
    SHARD_ERR_NOMEM = -5,
    SHARD_ERR_WRITE = -6,
    SHARD_ERR_TEXT = -7,      /* the corpus is not UTF-8 */
} ShardStatus;

typedef struct {
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
 * out_path.tmp, then renamed). Returns 0, or a negative ShardStatus with a
 * one-line message in err. stats may be NULL. */
int shard_write(const char *corpus_path, Wordpiece *wp, const char *out_path, int doc_mode,
                ShardStats *stats, char *err, size_t errlen);

/* Same, keeping only the documents keep(keep_ctx, ...) accepts (data/corpus.h;
 * keep NULL: all); stats->dropped counts the others. */
int shard_write_filtered(const char *corpus_path, Wordpiece *wp, const char *out_path,
                         int doc_mode, CorpusDocFilter keep, void *keep_ctx, ShardStats *stats,
                         char *err, size_t errlen);

/* Write tokens [N] with doc_offsets [D + 1] as a shard (tests, tools). */
int shard_write_tokens(const char *out_path, uint32_t vocab_size, const uint32_t *tokens,
                       const uint64_t *doc_offsets, uint32_t n_docs, char *err, size_t errlen);

/* Read and check path. Returns 0, or a negative ShardStatus with a one-line
 * message in err; shard_hint(status) then says what to do. On failure s is
 * left empty (shard_close on it is safe). */
int shard_open(TextShard *s, const char *path, char *err, size_t errlen);
void shard_close(TextShard *s);

/* What to do about a failed shard_open, by its status. */
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
