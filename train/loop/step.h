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
 * The Trainer borrows the context, the feed and the model (the caller builds
 * and frees them: the benchmark builds models the CLI cannot name) and owns
 * the optimizer state, the grad scaler and the schedule.
 */
#ifndef CTRAIN_TRAIN_STEP_H
#define CTRAIN_TRAIN_STEP_H

#include "engine/ctx.h"
#include "engine/tensor.h"
#include "models/model.h"
#include "train/feed/feed.h"
#include "grad_scaler.h"
#include "train/optim/optimizer.h"
#include "run_options.h"
#include "schedule.h"
#include "step_graph.h"

typedef struct Trainer {
    Ctx *ctx;
    Feed *feed;
    Model *model;
    Optimizer opt;
    GradScaler scaler;
    Schedule sched;
    int accum;               /* micro-batches per optimizer step */
    float clip;              /* global-norm clip; 0: off */
    float label_smoothing;
    long steps_per_epoch;    /* optimizer steps per pass over the feed */
    long step;               /* optimizer steps taken */
    long micro;              /* micro-batches fed */
    float lr;                /* the learning rate of the last step */
    Tensor *last_loss;       /* the last micro-batch's loss (device), kept until the next step */
    StepGraph graph;         /* --graph: the captured step (train/loop/step_graph.h) */
    long graph_start;        /* the step warm-up counts from (a resumed run's first) */
    struct Dist *dist;       /* multi-GPU: set by dist_attach (train/parallel/dist.h); NULL alone */
    int overlap;             /* the update overlaps backward (train/loop/overlap.h) */
    DType grad_reduce;       /* --grad-reduce: the sharded update needs f32 (train/parallel/dist.h) */
    int overlap_step;        /* this step's updates are queued already (by the hooks) */
    struct Overlap *ov;      /* its machinery (train/loop/overlap.h), made at the first step */
} Trainer;

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

/* The pieces of a step, shared by the eager step and the CUDA graph capture
 * (train/loop/step_graph.c). None of them moves the counters (step, micro). */
void trainer_feed_next(Trainer *t);            /* the next micro-batch into feed->in */
/* forward + backward; returns the loss. last: the step's last micro-batch
 * (with several GPUs, the one whose backward all-reduces the gradients;
 * with the overlapped update, the one whose backward updates). During a
 * capture the learning rate must already be in optimizer_lr_dev. */
Tensor *trainer_micro_body(Trainer *t, int last);
void trainer_update_body(Trainer *t, int lr_on_device);   /* unscale ... zero grads */
/* The overlapped update's range step (train/loop/overlap.h): optimizer on
 * [begin, end), then those gradients zeroed, queued on stream (a
 * cudaStream_t; NULL on the CPU). */
void trainer_update_range(Trainer *t, size_t begin, size_t end, void *stream);

/* --graph (train/loop/step_graph.c): capture after the warm-up steps (state
 * becomes GRAPH_ON, or GRAPH_FAILED with a logged reason); one replayed step;
 * the loss of the last replayed micro-batch; release. */
void trainer_graph_capture(Trainer *t);
void trainer_graph_step(Trainer *t);
float trainer_graph_loss(Trainer *t);
void trainer_graph_free(Trainer *t);

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
 * and metadata ctrain_checkpoint=training, model, optimizer, precision,
 * batch, accum, seed, steps. Parameter loaders (ctrain eval --load) skip the
 * __ctrain.* entries of such a file. Resuming restores all of it, so the
 * remaining steps are bit-identical to an uninterrupted run with the same
 * flags (the schedule is rebuilt from this run's --steps / --epochs).
 * Both end the program with a message and a hint on failure; the save is
 * atomic (a failed save leaves the previous file). Both synchronize. */
void trainer_save(Trainer *t, const TrainOptions *o, const char *path);
/* Refuses a file whose model, optimizer, batch, accum or seed differ from o. */
void trainer_resume(Trainer *t, const TrainOptions *o, const char *path);
/* 1 when path opens as a training checkpoint (metadata ctrain_checkpoint). */
int ckpt_is_training(const char *path);

#endif
