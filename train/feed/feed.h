/* feed.h — what puts each batch into the model's static input tensors.
 *
 * The step never allocates its inputs: a Feed (feed_types.h) owns device
 * tensors of the batch's shape (in[0..n_in)) and refills them before every
 * micro-batch, by an asynchronous copy from pinned host memory that overlaps
 * the previous step's GPU work (feed_stage.h). Kinds, picked by feed_open
 * from --model and --data:
 *   flat      Fashion-MNIST as [B, 784] for the MLP (host-side batching);
 *   loader    an ImageSource (ImageFolder, Fashion-MNIST resized to RGB,
 *             host synthetic) through the threaded loader, NHWC [B, S, S, 3];
 *             an ImageFolder's JPEGs decoded on the CPU or the GPU
 *             (--decode, feed_decode.h);
 *   synthetic random images and labels generated once on the device: no
 *             host work and no copies per step, for throughput runs
 *             (these three: feed_image.h);
 *   text      BERT: synthetic tokens or masked-LM batches from a shard
 *             (feed_text.h);
 *   cls       BERT fine-tuning on the fortunes topic set (feed_cls.h).
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

#include "feed_types.h"

/* --data names the fortunes topic set ("fortunes-cls[:DIR]"): the BERT
 * classification feed, and the classification head under --head auto. */
int feed_is_cls(const char *data);

/* Build the feed for --data; fatal with a hint when the data is unusable. */
void feed_open(Feed *f, Ctx *c, const FeedSpec *spec);
void feed_close(Feed *f, Ctx *c);

/* The feed's cumulative statistics now (FeedStats, feed_types.h): zeros and
 * decode "none" for a feed that keeps none (synthetic data, token shards);
 * returns whether it keeps them. */
int feed_stats_now(Feed *f, FeedStats *s);

#endif
