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

/* What a feed has done since it opened (cumulative: a caller takes the
 * difference of two readings for an interval's rates). */
typedef struct FeedStats {
    uint64_t images;           /* training images (samples) handed to the model */
    double wait_s;             /* time next() blocked waiting for a batch that was not ready:
                                  the host stood still for the data (the GPU may have had the
                                  step before to run meanwhile: an upper bound of its wait) */
    double gpu_wait_s;         /* the GPU's own stall for the batches, on its clock
                                  (feed_gpu_wait.h); negative: not measured (a CPU context) */
    double decode_s;           /* decoder busy time, summed over its threads / streams */
    int decode_parallel;       /* threads (or engines) decode_s is summed over; capacity =
                                  images / decode_s * decode_parallel */
    uint64_t cpu_fallback;     /* images the GPU decoder gave to the CPU decoder */
    char decode[64];           /* what decodes: "gpu (nvJPEG hardware)", "cpu (libjpeg-turbo,
                                  16 threads)", "none" (synthetic, token shards) */
} FeedStats;

#define FEED_MAX_IN 5          /* BERT MLM: ids, token types, mask, masked rows, labels */

struct Feed {
    char desc[128];
    int n_in;                  /* tensors the model's loss takes (inputs, labels last) */
    Tensor *in[FEED_MAX_IN];   /* NULL where the batch has no such input (synthetic BERT:
                                * no padding, so no attention mask) */
    int batch;
    long batches_per_epoch;
    int classes;
    int vocab_size;            /* text feeds with a vocabulary: its size (0: none) */
    int has_eval;              /* a held-out split exists */
    long eval_rows;            /* its rows (eval_next's n summed over a pass): the ETA */
    const char *const *class_names; /* [classes] label -> name, or NULL */
    /* Fill in[] with batch `batch_index` of `epoch`. */
    void (*next)(Feed *f, Ctx *c, uint64_t epoch, uint32_t batch_index);
    /* Cumulative statistics (NULL: the feed makes no data on the host). */
    void (*stats)(Feed *f, FeedStats *s);
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
    const char *decode;        /* --decode: "auto", "gpu", "cpu" (images; NULL: auto) */
} FeedSpec;

#endif
