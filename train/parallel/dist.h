/* dist.h — multi-GPU data parallel over NCCL: one process per GPU, one or
 * several machines.
 *
 * Starting (dist_env.h lists the variables):
 *   ctrain train --gpus N ...      N processes on this machine (dist_launch.h)
 *   CTRAIN_RANK=.. CTRAIN_WORLD_SIZE=.. CTRAIN_LOCAL_RANK=.. CTRAIN_MASTER_ADDR=..
 *   CTRAIN_MASTER_PORT=.. ctrain train ...     (by hand or a scheduler, any machines)
 *   mpirun -np N [-x CTRAIN_MASTER_ADDR=host0] ctrain train ...   (Open MPI)
 * Each rank uses GPU = its local rank (CUDA_VISIBLE_DEVICES picks which).
 * Rank 0 makes the NCCL unique id and hands it to the others over TCP
 * (dist_rdzv.h); then one NCCL communicator (and a second one for --sync-bn
 * batch norm, so its all-reduces on the compute stream never interleave
 * with the gradient buckets' on the communication stream).
 *
 * One step (train/loop/trainer.c calls dist_backward_begin and dist_grads_ready):
 *   every rank: its own batch (the feeds take rank r's share, train/feed/feed.h)
 *   backward of the last micro-batch: GradReady (dist_bucket.h) sees which
 *     gradient buckets are final; each is averaged (ncclAvg, in place: a
 *     reduce-scatter then an all-gather when the gradients are in a
 *     symmetric NCCL window, where NCCL has them, else one all-reduce; see
 *     dist_regbuf.h)
 *     on a separate high-priority stream as soon as it is, overlapping the
 *     rest of backward: an event recorded on the compute stream, waited on
 *     by the communication stream. Earlier micro-batches of --accum K only
 *     accumulate, locally.
 *   dist_grads_ready: the buckets not issued yet, then the compute stream
 *     waits for the communication stream; unscale, clip and the optimizer
 *     follow on every rank with identical gradients, so the weights stay
 *     identical without being sent again (except with the sharded update
 *     below, where each rank updates a share and the shares are sent).
 * --grad-reduce bf16 (opt-in; default f32): each bucket's f32 gradients
 * are rounded to bf16 into a shadow buffer, the shadow is averaged over
 * the ranks (ncclBfloat16, ncclAvg), and the average is cast back over the
 * f32 gradients (overwritten, not added to), all on the communication
 * stream once backward is done with the bucket. Half the bytes go over NCCL (BERT-large:
 * 0.67 GB a step instead of 1.34 GB); the shadow costs 2 bytes of device
 * memory per parameter. Numerics, the same as PyTorch DDP's
 * bf16_compress_hook: each rank's gradient is rounded to bf16 (8
 * significant bits, relative error up to 2^-8) before the sum, and the
 * average is rounded again (NCCL scales each contribution by 1/N, exact for
 * 2, 4, 8 ranks, and rounds its partial sums to bf16: with more than 2
 * ranks once per addition). bf16 keeps f32's exponent range, so only the
 * extremes fare differently (subnormals below ~1e-40 become 0, finite values
 * within 2^-9 of f32's largest become inf), and inf / NaN pass through, so
 * the fp16 overflow check below works unchanged. The optimizer still sees
 * f32 gradients and keeps f32 master weights. The default stays f32 because
 * then 2 GPUs x B train like 1 GPU x 2B to 1e-5 (tests/gpu_dist.c); with
 * bf16 each update is off by up to a few 2^-8 of itself. --bucket-mb still
 * counts the f32 gradients (a bucket's message is half that). Measured
 * on 2 H200s over NVLink it gains nothing for BERT-large (91.8% against
 * 91.7%; probably because its two casts move about as many bytes through
 * HBM as the all-reduce saves).
 * fp16: the gradients are all-reduced BEFORE the grad scaler unscales and
 * checks them, so an inf or NaN on any rank reaches every rank (inf and NaN
 * survive the average), every rank sets found_inf, and all skip the step
 * together; the scale stays the same everywhere. Clipping sees the averaged
 * gradients, so every rank computes the same norm.
 * CUDA graphs: nothing here syncs the host during the step; the NCCL calls,
 * event records and waits are capturable; the communication stream is
 * joined back before the step ends.
 *
 * What it knows of the training: the buffers and a few facts (DistModel:
 * the parameter set with its one gradient buffer, the optimizer's state
 * blocks) and the loop's callbacks (DistHooks: hand a final bucket to the
 * overlapped update, record its progress, free the captured graphs at the
 * end), which the loop registers (trainer_dist_attach, train/loop/step.h).
 * It never sees the Trainer or the command-line options: dist_setup and
 * dist_launch_if_asked take DistOptions and plain values, and the caller
 * applies what they tell it (this rank's GPU, whether it writes files).
 *
 * Rank 0 alone writes --log and --save files and prints the progress; the
 * other ranks print only errors, prefixed "rank R: ". Every rank loads
 * --load / --resume files. Logged losses are averaged over the ranks.
 *
 * Failure: the launcher stops every rank when one fails (dist_launch.h).
 * Each rank also runs a watchdog thread that ends the process, naming the
 * rank and the cause, when NCCL reports an asynchronous error, when the
 * set-up does not finish, or when the GPU makes no progress for
 * --dist-timeout seconds (a collective waiting for a rank that died or
 * hangs): it aborts the communicator (ncclCommAbort) and exits. Progress is
 * the completion of marker events recorded after each step
 * (dist_step_done); a rank legitimately slower than the timeout (a long
 * checkpoint save on rank 0 while the others wait) needs a larger
 * --dist-timeout. Checkpoint saves are atomic, so a stopped run never
 * leaves a half-written file.
 */
#ifndef CTRAIN_TRAIN_DIST_H
#define CTRAIN_TRAIN_DIST_H

#include <stddef.h>
#include "dist_env.h"
#include "engine/ctx.h"
#include "engine/params.h"

typedef struct Dist Dist;

/* --gpus N (N > 1) in a process that is not a rank already: become the
 * launcher of N ranks running this same command ("train" or "bench-rank"
 * with argv); returns 1 with the exit status in *rc. 0: go on. device: the
 * run's --device (the ranks need CUDA). */
int dist_launch_if_asked(const DistOptions *o, Device device, const char *cmd, int argc,
                         char **argv, int *rc);

/* NULL when this process trains alone. Otherwise this is a rank: reads the
 * environment and quiets the non-main ranks (stdout to /dev/null, errors
 * only). What the caller applies to its own options: train on GPU
 * dist_device_id(d), and unless dist_is_main(d) write no --log, --save or
 * --save-every files (rank 0 writes them). device: the run's --device;
 * save_every (--save-every N, 0: off) and saves (1: a --save file): what
 * rank 0 will write, which every rank must know (dist_before_save). Call
 * before building the context. */
Dist *dist_setup(const DistOptions *o, Device device, long save_every, int saves);
/* The GPU this rank trains on: its local rank (d not NULL). */
int dist_device_id(const Dist *d);

/* After ctx_init: rendezvous, NCCL, the watchdog. The context learns its
 * rank (feeds take their share), a per-rank dropout seed, and with
 * --sync-bn the batch-norm all-reduce. */
void dist_start(Dist *d, Ctx *c);

/* What data parallel needs of the model being trained. It sees these
 * buffers, never the training loop's structures. */
#define DIST_MAX_STATE 2
typedef struct DistModel {
    ParamSet *params;     /* the weights, the buffers and the one gradient buffer, which
                             may move into NCCL's memory (params_grad_move) */
    float *state[DIST_MAX_STATE];   /* the optimizer's state blocks, each laid out like the
                                       weights (the sharded update gathers them) */
    int n_state;
    int overlap;          /* the update overlaps backward (train/loop/overlap.h): the
                             sharded update rides on it */
    int batch;            /* this rank's batch (the log line) */
} DistModel;

/* What data parallel calls back into the training loop, each with user. */
typedef struct DistHooks {
    void *user;
    /* 1 while the step's last backward queues the overlapped update itself
     * (each bucket, once averaged, goes to bucket_final); else 0 */
    int (*overlapped)(void *user);
    /* bucket b = [begin, end) of the gradients is final on producer (a
     * cudaStream_t: the communication stream): queue its update */
    void (*bucket_final)(void *user, int b, size_t begin, size_t end, void *producer);
    /* record event (a cudaEvent_t) on the update stream: done once every
     * update queued so far is (the sharded update's all-gather waits on it) */
    void (*record_update)(void *user, void *event);
    /* dist_finish, before NCCL is torn down: free the step's CUDA graphs (a
     * captured step's all-reduces hold NCCL's plans until then) and forget d */
    void (*release)(void *user);
} DistHooks;

/* After the trainer is built (and resumed): rank 0's weights and buffers go
 * to every rank, the gradient buckets are planned; d keeps m's facts and
 * the hooks. No-op when d is NULL. (The loop's side: trainer_dist_attach,
 * train/loop/step.h.) */
void dist_attach(Dist *d, const DistModel *m, const DistHooks *h);

/* trainer.c: before each micro-batch's backward; last = 1 for the step's last
 * micro-batch, the one whose backward all-reduces. No-op when d is NULL. */
void dist_backward_begin(Dist *d, int last);

/* trainer.c: after the micro-batches, before unscale / clip / optimizer: the
 * remaining buckets, then the compute stream waits for the all-reduces.
 * No-op when d is NULL. */
void dist_grads_ready(Dist *d);

/* After each trainer_step, outside any CUDA graph capture: the watchdog's
 * progress marker. No-op when d is NULL. */
void dist_step_done(Dist *d);

/* The loss (one f32 on the device, at loss) averaged over the ranks, in
 * place, on the compute stream (the caller reads it back). Every rank must
 * call it at the same steps. No-op when d is NULL. */
void dist_loss_average(Dist *d, float *loss);

/* n floats on the device (x) replaced by their maximum over the ranks, in
 * place, on the compute stream, without waiting (capturable): the FP8
 * recipe's amaxes, so every rank scales with the same values. Every rank
 * must call it at the same steps. No-op when d is NULL. */
void dist_max_f32(Dist *d, float *x, size_t n);

/* Every rank, at the same point: 1 when ok is nonzero on every rank, 0
 * when it is 0 on any (an eager all-reduce on the compute stream; waits for
 * the device). d NULL: ok. The CUDA-graph capture asks this before it
 * replays: NCCL requires that a collective be graph-captured on every rank
 * or on none, so a rank whose capture failed takes all ranks back to eager. */
int dist_all_ok(Dist *d, int ok);
/* The largest of every rank's v (NULL: v). Waits for the device; not in a graph. */
int dist_all_max(Dist *d, int v);

/* Around a host section that can block on the other ranks without
 * recording a progress marker (capturing the step into CUDA graphs: NCCL
 * calls, instantiation, dist_all_ok): the watchdog ends the rank, saying
 * `what`, when the section has not finished within --dist-timeout seconds.
 * No-op when d is NULL. `what` must outlive the section. */
void dist_host_section_begin(Dist *d, const char *what);
void dist_host_section_end(Dist *d);

/* The sharded update, CTRAIN_DIST_SHARD: 1 on, 0 off, unset: on for a model
 * of at least DIST_SHARD_AUTO_PARAMS parameters (anything else is fatal).
 * Each bucket is reduce-scattered instead of all-reduced, each rank updates
 * its share of the bucket's weights on the overlapped update's stream
 * (train/loop/overlap.h) and the shares are all-gathered back, all next to
 * backward: every rank does 1/N of the optimizer's work. Weights as
 * without it (bit for bit with 2 ranks). Needs what the overlapped update
 * needs (SGD or AdamW, no --clip, no fp16 scaler) and f32 gradient
 * reduction; without them every rank updates every weight (with a warning
 * when CTRAIN_DIST_SHARD=1 asked for it). The optimizer state moves only in
 * this rank's shares: dist_sync_state gathers it (every rank) before a
 * checkpoint is written.
 * Why a size: the update's time grows with the parameters, the all-gather
 * of the weights costs about the same everywhere. Measured on 2 H200s
 * (bench --gpus 2, bf16): BERT-large (335M) 91.7% -> 94.7%, BERT-base
 * (110M) 91.9% -> 92.2%, ResNet-50 (26M) 97.7% -> 97.2%.
 * *asked (may be NULL): 1 when the variable was set. */
#define DIST_SHARD_AUTO_PARAMS 100000000u
int dist_shard_wanted(size_t n_params, int *asked);
/* Every rank: the optimizer state's shares to every rank, if any step was
 * sharded since the last gather. No-op for NULL. */
void dist_sync_state(Dist *d);
/* Every rank, before the point where rank 0 may write a training
 * checkpoint (after step `step`, or at the end of the run): the gather
 * above when rank 0's --save / --save-every will write one there. */
void dist_before_save(Dist *d, long step, int at_end);

/* 1 on rank 0 or when alone (d NULL). */
int dist_is_main(const Dist *d);
/* The gradient buckets of the plan (0 before dist_attach or for NULL). */
int dist_buckets(const Dist *d);

/* Every rank, before freeing the trainer and the context: a barrier (so
 * rank 0's last save and evaluation are done), then NCCL and the watchdog
 * are torn down. No-op when d is NULL. */
void dist_finish(Dist *d);

#endif
