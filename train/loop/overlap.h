/* overlap.h — the overlapped update: the optimizer updates each bucket of
 * parameters as soon as backward has finished its gradients, on a stream of
 * the lowest priority, while backward goes on with the layers before it.
 *
 *   compute stream:  lr -> optimizer_split_begin -> backward ........... wait(done) -> next step
 *                                                      | bucket k final
 *   update stream:                                     +-> update [begin_k, end_k), zero its grads
 *
 * With several GPUs a bucket is final once its all-reduce is done (the
 * update stream waits on the communication stream, train/parallel/dist.c), so the
 * last all-reduces are hidden behind the first buckets' updates instead of
 * the whole optimizer pass coming after them. Buckets and readiness are the
 * data-parallel ones (train/parallel/dist_bucket.h): a bucket is final once no later
 * backward node adds into its gradients, and no later node reads its weights
 * either (a node that reads a weight is the one that adds into its
 * gradient), so an update never changes what backward still uses.
 *
 * Priorities: the compute stream sits one level above the lowest
 * (engine/context.c), the update stream at the lowest, so the update's blocks
 * take SMs that backward leaves idle and do not queue ahead of it; the
 * all-reduces' stream is the highest. (While the GPU image decoder runs,
 * the compute stream is at the lowest too, engine/ctx.h: the update then
 * shares it as an equal.)
 *
 * When (overlap_mode): CTRAIN_OVERLAP_UPDATE=1, or the sharded
 * update with several GPUs (train/parallel/dist.h: by default for models of 100M
 * parameters or more), with SGD or AdamW, no gradient clipping, no fp16
 * grad scaler (both need every gradient before any update; when one of the
 * variables asked for it a warning names what prevents it, the default
 * falls back quietly); the step's last micro-batch only. The values are the whole-buffer step's, bit for bit:
 * the same elementwise math, split by ranges.
 *
 * Alone, off by default: on one H200 it made BERT-large bf16 2% and
 * ResNet-50 1.4% slower, and on two it gained 0.2% (docs/multi-gpu.md,
 * "Tried and removed"):
 * the update's memory traffic slows the backward next to it by about what
 * it hides. It stays as an option (a slower link, a bigger optimizer state,
 * or a GPU with bandwidth to spare may tip it) and as a worked example.
 *
 * It sees the buffers (parameters, gradients, the optimizer), not the
 * Trainer: the step's pieces (trainer.c) open it and drive it, and data
 * parallel hands it the buckets through the loop's callbacks (step.c).
 */
#ifndef CTRAIN_TRAIN_OVERLAP_H
#define CTRAIN_TRAIN_OVERLAP_H

#include <stddef.h>
#include "engine/ctx.h"
#include "engine/params.h"
#include "train/optim/optimizer.h"
#include "train/parallel/dist.h"

typedef struct Overlap Overlap;

/* 1 when this run overlaps its updates (CTRAIN_OVERLAP_UPDATE=1 or the
 * sharded update wanted, and nothing prevents it; warns what does when a
 * variable asked for it). The run: c (its data-parallel world), ps (its
 * parameter count), opt, the gradient reduction's type, the clip norm (0:
 * off) and whether the fp16 grad scaler is on. */
int overlap_mode(const Ctx *c, const ParamSet *ps, const Optimizer *opt, DType grad_reduce,
                 float clip, int scaler_on);

/* The machinery for the parameters ps updated by opt: alone (dist NULL),
 * its own bucket plan and readiness tracker (bucket size
 * CTRAIN_OVERLAP_BUCKET_MB, default dist_bucket_mb_auto); with dist, the
 * data-parallel buckets. */
Overlap *overlap_open(Ctx *c, ParamSet *ps, Optimizer *opt, const Dist *dist);
/* Before the backward of a micro-batch (alone): the last one hooks the walk. */
void overlap_backward_begin(Overlap *o, int last);
/* Bucket b = [begin, end) is final on `producer` (a cudaStream_t; the
 * compute stream alone, the communication stream with several GPUs; NULL
 * on the CPU, where the update runs now). */
void overlap_bucket_final(Overlap *o, int b, size_t begin, size_t end, void *producer);
/* Record `event` (a cudaEvent_t) on the update stream: done once every
 * update queued so far is (the sharded update's all-gather waits on it). */
void overlap_record(Overlap *o, void *event);
/* After backward: alone, the buckets the walk did not hand over; then the
 * compute stream waits for every update. */
void overlap_grads_ready(Overlap *o);
void overlap_close(Overlap *o);
/* For tests: buckets updated during backward's walk (not after it), summed
 * over the steps; buckets in the plan. */
int overlap_early_buckets(const Overlap *o);
int overlap_buckets(const Overlap *o);

#endif
