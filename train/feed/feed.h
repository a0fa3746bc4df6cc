/* feed.h — what puts each batch into the model's static input tensors.
 *
 * The step never allocates its inputs: a Feed owns device tensors of the
 * batch's shape (in[0..n_in)) and refills them before every micro-batch,
 * by an asynchronous copy from pinned host memory that overlaps the
 * previous step's GPU work. Kinds:
 *   flat      Fashion-MNIST as [B, 784] for the MLP (host-side batching);
 *   loader    an ImageSource (ImageFolder, Fashion-MNIST resized to RGB,
 *             host synthetic) through the threaded loader, NHWC [B, S, S, 3];
 *   synthetic random images and labels generated once on the device: no
 *             host work and no copies per step, for throughput runs.
 * Evaluation goes through feed_eval_* over the held-out split, with a
 * partial last batch.
 *
 * Data parallel (ctx->dp_world > 1, train/parallel/dist.h): every training feed
 * gives this rank its share. Shuffled data: each epoch's permutation is the
 * same on every rank and rank r takes positions r, r + world, ...
 * (shuffle_shard in data/shuffle.h; the remainder is dropped so all ranks
 * take the same number of steps). Synthetic data: rank r makes rows
 * r B .. r B + B - 1 of one world x B batch (different data on every rank,
 * and N ranks x B equal one process with batch N B). Evaluation is not
 * split: every rank walks the whole held-out split (rank 0 reports it).
 */
#ifndef CTRAIN_TRAIN_FEED_H
#define CTRAIN_TRAIN_FEED_H

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

/* Text feeds for BERT (train/feed/feed_text.c): synthetic token batches, or
 * masked-LM batches from a pre-tokenized shard ("mlm:SHARD"). Inputs:
 * ids i32 [B, T], token types i32 [B, T], additive mask f32 [B, T],
 * masked rows i32 [M] and their labels i32 [M] (-100 on padding slots),
 * M = B x mlm_max_masked(T) (data/mlm.h). */
void feed_text_open(Feed *f, Ctx *c, const FeedSpec *spec);

/* BERT fine-tuning on the fortunes topic set (train/feed/feed_cls.c):
 * "fortunes-cls[:DIR]" with --vocab; spec->classes topics (0: 4). Inputs:
 * ids, token types and mask as above, then labels i32 [B] (the topic);
 * classes = topics; held-out split for evaluation. feed_text_open hands
 * these specs to it. */
int feed_is_cls(const char *data);
void feed_cls_open(Feed *f, Ctx *c, const FeedSpec *spec);

/* The data-parallel world size the feeds split for (1 when alone). */
int feed_world(const Ctx *c);

/* Build the feed for --data; fatal with a hint when the data is unusable. */
void feed_open(Feed *f, Ctx *c, const FeedSpec *spec);
void feed_close(Feed *f, Ctx *c);

#endif
