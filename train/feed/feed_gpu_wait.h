/* feed_gpu_wait.h — how long the GPU stood still for the data, measured on
 * the GPU's own clock.
 *
 * A feed's next() blocks the host until a batch is ready, but with the step
 * queued ahead (a captured graph, or kernels the host is still ahead of)
 * the GPU may have had work all that time: the host's wait bounds the GPU's
 * idle share from above only. So next() brackets itself with two events on
 * the context's stream:
 *
 *   before   recorded on entry: reached when the stream has finished the
 *            previous step (or at once, if it had already);
 *   after    recorded on return, after the batch's wait and copies were
 *            queued: reached when they have run.
 *
 * The GPU time between them is the stream's stall for this batch: 0 plus
 * the copies when the batch was ready in time, the whole wait when it was
 * not (the decode stream's event, or the host's late enqueue). The sum over
 * batches is the data wait that bounds training; the pairs are read once
 * they have completed (cudaEventQuery, no sync), at most RING - 1 behind.
 * On a CPU context it measures nothing (gpu_wait_s stays negative).
 */
#ifndef CTRAIN_TRAIN_FEED_GPU_WAIT_H
#define CTRAIN_TRAIN_FEED_GPU_WAIT_H

#include "engine/ctx.h"
#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>
#endif

enum { FEED_GPU_WAIT_RING = 8 };

typedef struct FeedGpuWait {
    int on;                        /* a CUDA context: events made */
    int head, pending;             /* the oldest unread pair, pairs recorded and unread */
    double s;                      /* the read pairs' GPU time, seconds */
    long read;                     /* pairs read */
#ifdef CTRAIN_CUDA
    cudaEvent_t before[FEED_GPU_WAIT_RING], after[FEED_GPU_WAIT_RING];
#endif
} FeedGpuWait;

void feed_gpu_wait_init(FeedGpuWait *w, Ctx *c);
/* next()'s entry and return, on c's stream (outside any graph capture) */
void feed_gpu_wait_begin(FeedGpuWait *w, Ctx *c);
void feed_gpu_wait_end(FeedGpuWait *w, Ctx *c);
/* The stall of every batch whose pair has completed, seconds; -1 on a CPU
 * context (nothing measured). */
double feed_gpu_wait_s(FeedGpuWait *w);
void feed_gpu_wait_free(FeedGpuWait *w);

#endif
