/* step.h — one optimizer step, shared by `ctrain train` and `ctrain bench`.
 *
 *   for k in 1..K (accumulation):
 *       feed -> static input tensors (async copy from pinned memory)
 *       loss = model loss (ops record the tape; autocast picks dtypes)
 *       backward from d(loss) = scale / K (scale: the fp16 grad scaler's, on
 *       the device; 1 otherwise) -> gradients += into the one buffer
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

#include "../engine/ctx.h"
#include "../engine/tensor.h"
#include "../models/model.h"
#include "feed.h"
#include "grad_scaler.h"
#include "optimizer.h"
#include "options.h"
#include "schedule.h"

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

#endif
