/* vocab_build.h — build a WordPiece vocab.txt from a text corpus
 * (`ctrain vocab --corpus PATH --size N --out vocab.txt`); the corpus is a
 * file or a directory tree of UTF-8 text files, read as data/corpus.h says.
 *
 * Training: bottom-up merging of pieces (WordPiece, Schuster & Nakajima
 * 2012; the "##" continuation form of BERT):
 *   1. basic-tokenize the corpus (data/wordpiece.h, lowercase for uncased)
 *      and count the words; words over 100 code points are left out (the
 *      tokenizer makes them [UNK] whatever the vocab)
 *   2. each word starts as its characters: the first as itself, the rest
 *      "##"-prefixed ("word" = w ##o ##r ##d)
 *   3. repeatedly merge the best adjacent pair (a, b) into the piece a + b
 *      without b's "##". "Best", by VocabOpts.score:
 *        VOCAB_SCORE_FREQ (default): the highest count(ab), counts weighted
 *          by word frequency: BPE's rule, which Hugging Face's tokenizers
 *          WordPieceTrainer uses for BERT vocabularies;
 *        VOCAB_SCORE_LIKELIHOOD: the highest count(ab) / (count(a) count(b)),
 *          the WordPiece likelihood criterion (compared exactly in 128-bit
 *          integers). On small corpora it favours pieces that are rare but
 *          always together: on the fortunes package (2.6 MB, 8000 lines) it
 *          spends its merges on timestamps and spelled-out rare words and
 *          never makes "the"; the frequency rule does not.
 *      Ties go to the pair whose a, then b, is first in byte order, so the
 *      result is the same on every machine.
 *   4. stop when the vocab has `size` lines, or nothing is left to merge.
 * Output, one token a line: [PAD] [UNK] [CLS] [SEP] [MASK] (ids 0-4), every
 * character seen (byte order), every character again with "##", then the
 * merged pieces in the order they were made. Because every character is in
 * both forms, tokenizing the corpus with the vocab never gives [UNK] (except
 * for >100-character words).
 */
#ifndef CTRAIN_DATA_VOCAB_BUILD_H
#define CTRAIN_DATA_VOCAB_BUILD_H

#include <stddef.h>
#include <stdint.h>

#include "corpus.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a build saw and made. */
typedef struct {
    uint64_t files, binary_skipped, bytes;
    uint64_t words, distinct_words, long_words; /* long: > 100 code points, left out */
    uint32_t alphabet;                          /* distinct characters */
    uint32_t merges, lines;                     /* merges done, lines written */
    uint64_t dropped;                           /* documents opts->keep left out */
} VocabStats;

typedef enum { VOCAB_SCORE_FREQ = 0, VOCAB_SCORE_LIKELIHOOD = 1 } VocabScore;

typedef struct {
    int size;      /* lines at most, specials included (at least 5 + 2 x the alphabet) */
    int mode;      /* WP_UNCASED (lower-case, strip accents), WP_CASED or WP_CASED_NFC */
    int score;     /* VocabScore */
    /* NULL: every byte of the corpus counts. Else the files are cut into
     * documents as shards are (data/text_shards.h, SHARD_DOC_AUTO) and only
     * the documents keep accepts count. */
    CorpusDocFilter keep;
    void *keep_ctx;
} VocabOpts;

/* Build a vocab. The folder of out_path is checked first (CORPUS_ERR_WRITE
 * before the corpus is read). Returns 0, or a negative CorpusStatus
 * (data/corpus.h) with a one-line message in err; vocab_hint then says what
 * to do. stats may be NULL. */
int vocab_build_opts(const char *corpus_path, const VocabOpts *opts, const char *out_path,
                     VocabStats *stats, char *err, size_t errlen);

/* What to do about a failed vocab_build_opts, by its status and stats (a
 * size too small for the corpus's characters names the least size that
 * fits), written into buf; returns buf. */
const char *vocab_hint(char *buf, size_t buflen, int status, const VocabStats *stats);

/* The CLI's entry point: VOCAB_SCORE_FREQ, no statistics. */
int vocab_build(const char *corpus_path, int size, int mode, const char *out_path,
                char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
