/* step.h — one optimizer step, shared by `ctrain train` and `ctrain bench`.
 *
 *   for k in 1..K (accumulation):
 *       feed -> static input tensors (async copy from pinned memory)
 *       loss = model loss (ops record the tape; autocast picks dtypes)
 *       backward from d(loss) = scale / K (scale: the fp16 grad scaler's, on
 *       the device; 1 otherwise) -> gradients += into the one buffer
 *       (multi-GPU: the last micro-batch's backward all-reduces the gradient
 *       buckets as they complete; dist_grads_ready waits for them, train/parallel/dist.h)
 *   unscale + inf/nan check (fp16) -> clip (optional) -> optimizer (skips
 *   itself on the device flag) -> scaler update -> zero gradients
 *
 * trainer_step queues all of that and returns without waiting for the
 * device: the caller decides when to sync (trainer_loss_value, ctx_sync,
 * an event), so the next step's host work overlaps this step's GPU work.
 *
 * The Trainer and the pieces a step is made of: trainer.h; the CUDA graph
 * capture of those pieces: step_graph.h. This file is the top of the three:
 * it starts, steps and frees a Trainer, and chooses eager or replayed.
 */
#ifndef CTRAIN_TRAIN_STEP_H
#define CTRAIN_TRAIN_STEP_H

#include "trainer.h"
#include "run_options.h"
#include "train/parallel/dist.h"

/* Optimizer (o->optim, lr, momentum, ...), grad scaler (on exactly when the
 * context autocasts to f16) and schedule (o->schedule over total_steps; the
 * "step" schedule decays x0.1 at 1/3 and 2/3 of the run). The feed must have
 * at least o->accum batches per epoch. */
void trainer_init(Trainer *t, Ctx *c, Feed *fd, Model *m, const TrainOptions *o, long total_steps);
/* Queue one optimizer step (accum micro-batches). No host sync. */
void trainer_step(Trainer *t);
/* The last micro-batch's loss as a float: waits for the device. NaN before
 * the first step. */
float trainer_loss_value(Trainer *t);
/* The epoch (from 1) the last micro-batch belonged to. */
long trainer_epoch(const Trainer *t);
void trainer_free(Trainer *t);

/* Multi-GPU (d from dist_setup; NULL: nothing happens). After trainer_init
 * (and trainer_resume): rank 0's weights and buffers go to every rank, the
 * gradient buckets are planned (dist_attach), t->dist = d, and data
 * parallel gets the buffers and the loop's callbacks (train/parallel/dist.h:
 * DistModel, DistHooks), not the Trainer. */
void trainer_dist_attach(Trainer *t, Dist *d);
/* The mean loss of every micro-batch since the last call (or the start, or
 * the resume), averaged over the ranks; waits for the device, and starts the
 * next interval. Every rank must call it at the same steps. NaN when no
 * micro-batch ran. What the progress line and --log report. */
float trainer_loss_interval(Trainer *t);

/* Training checkpoints (--save FILE --save-every N, --resume FILE): one
 * safetensors file with the parameters and buffers under their PyTorch names
 * (as ckpt_save writes them) plus
 *   __ctrain.optimizer.<i>      F32 [P]  state blocks (SGD: momentum; AdamW, LAMB: m, v)
 *   __ctrain.optimizer.step     I64 [1]  AdamW / LAMB step counter (not for SGD)
 *   __ctrain.scaler             F32 [1]  loss scale
 *   __ctrain.scaler.counts      I64 [2]  growth tracker, skipped steps
 *   __ctrain.step               I64 [1]  optimizer steps done
 *   __ctrain.micro              I64 [1]  micro-batches fed (the data position)
 *   __ctrain.rng_offset         I64 [1]  the context's Philox offset (u64 bits)
 * and metadata ctrain_checkpoint=training, steps (the position) and the
 * options that define the run (resume_check.h: model, optimizer, batch,
 * accum, seed, precision, lr, schedule, total_steps, data, ...). Parameter
 * loaders (ctrain eval --load) skip the __ctrain.* entries of such a file.
 * Resuming restores all of it, so the remaining steps are bit-identical to
 * an uninterrupted run with the same flags (the schedule is rebuilt from
 * this run's --steps / --epochs, which must give the saved total).
 * Both end the program with a message and a hint on failure; the save is
 * atomic (a failed save leaves the previous file). Both synchronize. */
void trainer_save(Trainer *t, const TrainOptions *o, const char *path);
/* Refuses a file whose run-defining options differ from o (resume_check.h;
 * o->resume_change lets the named ones differ). */
void trainer_resume(Trainer *t, const TrainOptions *o, const char *path);
/* 1 when path opens as a training checkpoint (metadata ctrain_checkpoint). */
int ckpt_is_training(const char *path);

#endif
