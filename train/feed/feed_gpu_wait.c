/* feed_gpu_wait.c — the GPU's stall for each batch, from two events around
 * a feed's next() (the method: feed_gpu_wait.h). */
#include "feed_gpu_wait.h"

#include <string.h>
#include "engine/error.h"

void feed_gpu_wait_init(FeedGpuWait *w, Ctx *c)
{
    memset(w, 0, sizeof *w);
#ifdef CTRAIN_CUDA
    if (c->device != DEV_CUDA) return;
    for (int i = 0; i < FEED_GPU_WAIT_RING; i++) {
        CUDA_CHECK(cudaEventCreate(&w->before[i]));
        CUDA_CHECK(cudaEventCreate(&w->after[i]));
    }
    w->on = 1;
#else
    (void)c;
#endif
}

#ifdef CTRAIN_CUDA
/* Read the oldest pairs that have completed; wait: also the oldest one
 * even if it has not (the ring is full). */
static void read_done(FeedGpuWait *w, int wait)
{
    while (w->pending > 0) {
        cudaEvent_t a = w->after[w->head];
        if (wait) {
            CUDA_CHECK(cudaEventSynchronize(a));
            wait = 0;
        } else {
            cudaError_t e = cudaEventQuery(a);
            if (e == cudaErrorNotReady) return;
            CUDA_CHECK(e);
        }
        float ms = 0.0f;
        CUDA_CHECK(cudaEventElapsedTime(&ms, w->before[w->head], a));
        if (ms > 0.0f) w->s += 1e-3 * (double)ms;
        w->head = (w->head + 1) % FEED_GPU_WAIT_RING;
        w->pending--;
        w->read++;
    }
}
#endif

void feed_gpu_wait_begin(FeedGpuWait *w, Ctx *c)
{
#ifdef CTRAIN_CUDA
    if (!w->on) return;
    read_done(w, w->pending == FEED_GPU_WAIT_RING);
    const int k = (w->head + w->pending) % FEED_GPU_WAIT_RING;
    CUDA_CHECK(cudaEventRecord(w->before[k], c->stream));
#else
    (void)w, (void)c;
#endif
}

void feed_gpu_wait_end(FeedGpuWait *w, Ctx *c)
{
#ifdef CTRAIN_CUDA
    if (!w->on) return;
    const int k = (w->head + w->pending) % FEED_GPU_WAIT_RING;
    CUDA_CHECK(cudaEventRecord(w->after[k], c->stream));
    w->pending++;
#else
    (void)w, (void)c;
#endif
}

double feed_gpu_wait_s(FeedGpuWait *w)
{
#ifdef CTRAIN_CUDA
    if (!w->on) return -1.0;
    read_done(w, 0);
    return w->s;
#else
    (void)w;
    return -1.0;
#endif
}

void feed_gpu_wait_free(FeedGpuWait *w)
{
#ifdef CTRAIN_CUDA
    if (!w->on) return;
    for (int i = 0; i < FEED_GPU_WAIT_RING; i++) {
        cudaEventDestroy(w->before[i]);
        cudaEventDestroy(w->after[i]);
    }
    w->on = 0;
#else
    (void)w;
#endif
}
