/* trainer.h — the Trainer (what one optimizer step works on) and the three
 * pieces a step is made of:
 *
 *   trainer_feed_next    the next micro-batch into the feed's static input tensors
 *   trainer_micro_body   one micro-batch: forward, then backward from
 *                        d(loss) = scale / K into the one gradient buffer (+=);
 *                        the step's last micro-batch also all-reduces the
 *                        gradients (several GPUs) and, with the overlapped
 *                        update, updates each bucket as it becomes final
 *   trainer_update_body  unscale + inf/nan check -> clip -> optimizer (skips
 *                        itself on the device flag) -> scaler update -> zero grads
 *
 * The calls run one way, from the top down:
 *   step.c        trainer_init / trainer_step / trainer_free (step.h): a step
 *                 runs these pieces eagerly, or replays their CUDA graphs
 *   step_graph.c  captures the same pieces into CUDA graphs (step_graph.h)
 *   trainer.c     the pieces; they drive the overlapped update (overlap.h) and
 *                 data parallel (train/parallel/dist.h), which see the
 *                 parameter and gradient buffers, never the Trainer
 *
 * The Trainer borrows the context, the feed and the model (the caller builds
 * and frees them: the benchmark builds models the CLI cannot name) and owns
 * the optimizer state, the grad scaler, the schedule and the --graph state.
 */
#ifndef CTRAIN_TRAIN_TRAINER_H
#define CTRAIN_TRAIN_TRAINER_H

#include <stdint.h>
#include "engine/ctx.h"
#include "engine/tensor.h"
#include "models/model.h"
#include "train/feed/feed.h"
#include "grad_scaler.h"
#include "train/optim/optimizer.h"
#include "schedule.h"

/* --graph: the step captured as CUDA graphs (how and why: step_graph.h). */
typedef enum { GRAPH_OFF = 0, GRAPH_WARMUP, GRAPH_ON, GRAPH_FAILED } GraphState;

typedef struct StepGraph {
    GraphState state;
    long warmup_steps;       /* eager steps before capture */
    long replays;            /* update-graph replays so far (--trace) */
#ifdef CTRAIN_CUDA
    cudaGraphExec_t micro, update;
    cudaGraphExec_t micro_first;   /* several GPUs with --accum K: micro-batches 1..K-1,
                                      which do not all-reduce (NULL otherwise) */
    float *lr_table;         /* [n_table] learning rate per step (device) */
    int64_t n_table;
    int64_t *step_dev;       /* optimizer steps done (device) */
    uint64_t *rng_base;      /* Philox offset at the next micro-batch's start (device) */
    uint64_t rng_per_micro;  /* counter blocks one micro-batch draws */
    Tensor *loss;            /* the last micro-batch's loss, copied by the micro graph */
    size_t graph_mem;        /* bytes the graphs' allocation nodes hold */
#endif
    char why[256];           /* GRAPH_FAILED: the reason */
} StepGraph;

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
    Tensor *loss_acc;        /* f32 [1]: the sum of every micro-batch's loss since the last
                                trainer_loss_interval (added on the device, in the graphs too) */
    long loss_acc_n;         /* micro-batches in that sum (the host knows how many ran) */
    StepGraph graph;         /* --graph: the captured step (train/loop/step_graph.h) */
    long graph_start;        /* the step warm-up counts from (a resumed run's first) */
    struct Dist *dist;       /* multi-GPU: set by trainer_dist_attach (step.h); NULL alone */
    int overlap;             /* the update overlaps backward (train/loop/overlap.h) */
    DType grad_reduce;       /* --grad-reduce: the sharded update needs f32 (train/parallel/dist.h) */
    int overlap_step;        /* this step's updates are queued already (by the hooks) */
    struct Overlap *ov;      /* its machinery (train/loop/overlap.h), made at the first step */
    int grad_fresh;          /* this step's backward writes each gradient first, nothing zeroed
                              * the buffer (CTRAIN_GRAD_FRESH: params_grad_fresh) */
    int grads_stale;         /* the last update left the gradients unzeroed */
    /* Called as each step starts, with the steps taken so far (NULL: none).
     * `ctrain train` and the bench set it to the CUPTI timeline's
     * (train/bench/timeline.h) on a CUDA device; the loop knows no profiler. */
    void (*on_step)(long step);
} Trainer;

/* The pieces of a step, shared by the eager step (step.c) and the CUDA graph
 * capture (step_graph.c). None of them moves the counters (step, micro). */
/* t->loss_acc += loss (one f32), queued on the context's stream: the eager
 * step and the captured micro-batch both call it. */
void trainer_loss_accumulate(Trainer *t, const Tensor *loss);
void trainer_feed_next(Trainer *t);            /* the next micro-batch into feed->in */
/* forward + backward; returns the loss. last: the step's last micro-batch
 * (with several GPUs, the one whose backward all-reduces the gradients;
 * with the overlapped update, the one whose backward updates). During a
 * capture the learning rate must already be in optimizer_lr_dev. */
Tensor *trainer_micro_body(Trainer *t, int last);
void trainer_update_body(Trainer *t, int lr_on_device);   /* unscale ... zero grads */

#endif
