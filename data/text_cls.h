/* text_cls.h — a labelled text-classification set for BERT fine-tuning,
 * built from the Debian `fortunes` package (apt-get install fortunes).
 *
 * Layout read: FORTUNES_DEFAULT_DIR/<topic>, one file per topic ("art",
 * "computers", "food", ...), entries separated by lines holding a single
 * '%'. Each entry is an example; its label is its topic's index among the
 * chosen topics. The package's NAME.dat indexes (binary), NAME.u8 symbolic
 * links and dot files are not topics.
 *
 * Topics: the given names, or else the n_topics files with the most
 * entries (ties: name order). Labels number the chosen topics in name
 * order, so the same choice always gives the same labels.
 *
 * Split: an example is held out when splitmix64(fnv1a64(topic) ^ entry
 * index in its file) mod 10^6 < held_out_frac x 10^6: deterministic, the
 * same for every run and machine, independent of which other topics are
 * chosen, and about held_out_frac of every topic.
 *
 * Batches: input_ids [B, T] = [CLS] entry tokens (cut to T-2) [SEP] [PAD]...,
 * attention_mask [B, T] = 1 on the non-pad part, token_type_ids [B, T] = 0,
 * labels [B]. Shape letters: B batch, T tokens.
 */
#ifndef CTRAIN_DATA_TEXT_CLS_H
#define CTRAIN_DATA_TEXT_CLS_H

#include <stddef.h>
#include <stdint.h>

#include "wordpiece.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FORTUNES_DEFAULT_DIR "/usr/share/games/fortunes"

typedef enum {
    TEXTCLS_OK = 0,
    TEXTCLS_ERR_OPEN = -1,    /* the folder cannot be opened */
    TEXTCLS_ERR_READ = -2,    /* a fortune file cannot be read */
    TEXTCLS_ERR_UTF8 = -3,    /* a fortune file is not UTF-8 */
    TEXTCLS_ERR_EMPTY = -4,   /* the folder holds no fortune files */
    TEXTCLS_ERR_TOPICS = -5,  /* fewer topics than asked, an unknown or repeated topic */
    TEXTCLS_ERR_NOMEM = -6,
} TextClsStatus;
#define TEXTCLS_HELD_OUT 0.1   /* --data fortunes-cls holds out this share of each topic */

typedef struct {
    uint32_t n_topics;
    char **topics;        /* [n_topics]: label -> topic name */
    uint32_t *topic_size; /* [n_topics]: examples of each */
    uint32_t n;           /* examples */
    char *blob;           /* all entry texts, each NUL-terminated */
    uint64_t *text_off;   /* [n]: entry i is blob + text_off[i] */
    int32_t *label;       /* [n] */
    uint8_t *held_out;    /* [n] 1: in the held-out split */
    uint32_t *train, n_train; /* example indices of each split, in order */
    uint32_t *test, n_test;
    int32_t *ids;         /* after textcls_tokenize: all tokens */
    uint64_t *ids_off;    /* [n + 1] */
} TextCls;

/* Load from dir (FORTUNES_DEFAULT_DIR when NULL): the listed topics when
 * topics != NULL (n_topics names), else the n_topics largest. Returns 0, or
 * a negative TextClsStatus with a message in err; textcls_hint says what to
 * do. On failure ds is left empty. */
int textcls_load_fortunes(TextCls *ds, const char *dir, const char *const *topics,
                          int n_topics, double held_out_frac, char *err, size_t errlen);

/* What to do about a failed textcls_load_fortunes / textcls_tokenize, by
 * its status and the dir it was given (NULL: the default folder, which the
 * fortunes package installs). */
const char *textcls_hint(int status, const char *dir);

/* Tokenize every example with wp (keeps the ids in ds). 0, or a negative
 * TextClsStatus with err. */
int textcls_tokenize(TextCls *ds, Wordpiece *wp, char *err, size_t errlen);

void textcls_free(TextCls *ds);

/* The split rule alone: 1 when entry `entry` (0-based among its file's
 * non-blank entries) of the fortune file named `topic` is held out. */
int textcls_entry_held_out(const char *topic, uint32_t entry, double held_out_frac);

/* Pre-training without the evaluation texts: a CorpusDocFilter
 * (data/corpus.h) for `ctrain vocab|shard --exclude-held-out` that drops,
 * from every fortune file, the entries fortunes-cls holds out (topic = the
 * file's name, less a ".u8" suffix; entries counted as textcls_load_fortunes
 * counts them, so the same entries for any --classes). Other files are kept
 * whole. ctx points to a TextClsExclude, zeroed but for frac. */
typedef struct {
    double frac;          /* held_out_frac: TEXTCLS_HELD_OUT for fortunes-cls */
    const char *path;     /* the file being read */
    uint32_t entry;       /* its non-blank entries so far */
} TextClsExclude;
int textcls_exclude_held_out(void *ctx, const char *path, int fortune_file, const char *doc,
                             size_t len);

const char *textcls_text(const TextCls *ds, uint32_t i);

/* A batch of the examples idx [B] (after textcls_tokenize); token_type_ids
 * may be NULL. cls/sep/pad: the vocab's ids. */
void textcls_batch(int32_t *input_ids, int32_t *token_type_ids, int32_t *attention_mask,
                   int32_t *labels, const TextCls *ds, const uint32_t *idx, int B, int T,
                   int32_t cls_id, int32_t sep_id, int32_t pad_id);

#ifdef __cplusplus
}
#endif
#endif
