/* feed_types.h — the contract every feed kind fills (Feed) and what a feed
 * is built from (FeedSpec). Header only: the public front is feed.h
 * (feed_open picks the kind); the kinds (feed_image.c, feed_text.c,
 * feed_cls.c) and their shared staging (feed_stage.c) include this, so no
 * kind includes the dispatcher above it.
 *
 * Shape letters: B batch, T tokens a sequence, S image side, M masked rows.
 */
#ifndef CTRAIN_TRAIN_FEED_TYPES_H
#define CTRAIN_TRAIN_FEED_TYPES_H

#include <stdint.h>
#include "engine/ctx.h"
#include "engine/tensor.h"

typedef struct Feed Feed;

#define FEED_MAX_IN 5          /* BERT MLM: ids, token types, mask, masked rows, labels */

struct Feed {
    char desc[128];
    int n_in;                  /* tensors the model's loss takes (inputs, labels last) */
    Tensor *in[FEED_MAX_IN];
    int batch;
    long batches_per_epoch;
    int classes;
    int vocab_size;            /* text feeds with a vocabulary: its size (0: none) */
    int has_eval;              /* a held-out split exists */
    const char *const *class_names; /* [classes] label -> name, or NULL */
    /* Fill in[] with batch `batch_index` of `epoch`. */
    void (*next)(Feed *f, Ctx *c, uint64_t epoch, uint32_t batch_index);
    /* Loader images/s so far (NAN when not applicable). */
    double (*data_rate)(Feed *f);
    /* Evaluation: start, then next until it returns 0; n = rows in this batch
     * (the tensors in *in have n rows; labels in[n_in - 1]). */
    void (*eval_start)(Feed *f, Ctx *c);
    int (*eval_next)(Feed *f, Ctx *c, Tensor **in, int *n);
    void (*free)(Feed *f, Ctx *c);
    void *impl;
};

typedef struct FeedSpec {
    const char *data;          /* --data */
    const char *model;         /* decides flat vs images */
    int batch, eval_batch;
    int image_size;            /* 0: default for the data set */
    int workers;
    int classes;               /* synthetic */
    uint64_t seed;
    int seq;                   /* BERT: tokens per sequence */
    const char *vocab;         /* BERT: vocab.txt for mlm:SHARD */
    int vocab_size;            /* BERT synthetic: ids drawn from [0, vocab_size) */
} FeedSpec;

#endif
