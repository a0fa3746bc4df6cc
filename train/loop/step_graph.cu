/* step_graph.cu — the two tiny kernels that keep a replayed CUDA graph's
 * per-step values on the device (train/loop/step_graph.h): the learning rate
 * fetched from the tabulated schedule, and the counters advanced. One
 * thread each: they run once per step. */
#include <stdint.h>
#include <cuda_runtime.h>
#include "engine/error.h"

namespace {

/* *lr = table[clamp(*step, 0, n - 1)] */
__global__ void lr_fetch_kernel(float *lr, const float *table, int64_t n, const int64_t *step)
{
    int64_t s = *step;
    if (s < 0) s = 0;
    if (s >= n) s = n - 1;
    *lr = table[s];
}

__global__ void advance_kernel(int64_t *step, int64_t dstep, uint64_t *rng, uint64_t drng)
{
    if (step) *step += dstep;
    if (rng) *rng += drng;
}

} // namespace

extern "C" void step_graph_lr_fetch_cuda(float *lr, const float *table, int64_t n,
                                         const int64_t *step, cudaStream_t s)
{
    lr_fetch_kernel<<<1, 1, 0, s>>>(lr, table, n, step);
    CUDA_CHECK_LAUNCH();
}

extern "C" void step_graph_advance_cuda(int64_t *step, int64_t dstep, uint64_t *rng,
                                        uint64_t drng, cudaStream_t s)
{
    advance_kernel<<<1, 1, 0, s>>>(step, dstep, rng, drng);
    CUDA_CHECK_LAUNCH();
}
