/* amp.cu — CUDA grad scaler and clipping kernels (contract and math in
 * ops/amp.h); ops/amp.c is the CPU reference.
 *
 * Shape letters: n gradient elements.
 *
 *   unscale:  inv = (float)(1 / (double)scale);  g = g * inv;  found_inf |= !finite(g)
 *   update:   inf: scale *= backoff, tracker = 0, skipped++
 *             else: tracker++; at growth_interval: scale *= growth (if finite), tracker = 0
 *   clip:     norm = sqrt(sum g^2);  coef = max_norm / (norm + 1e-6);  g *= coef if coef < 1
 *
 * Unscale and clip are grid-stride elementwise passes, float4 wide when g is
 * 16-byte aligned. The unscale kernel keeps a per-thread "bad" bit and ORs it
 * over the block with __syncthreads_or; one thread per block stores 1 when
 * set (identical stores, so the flag does not depend on the order).
 *
 * The norm: pass 1 uses B = min(AMP_NORM_PARTIALS, ceil(n / 16384)) blocks
 * (a function of n only); thread t of block b adds g[i]^2 in double for
 * i = b * 256 + t, then every B * 256 further, four loads in flight; a fixed
 * tree over the block writes partial[b]. Pass 2 (one block) adds the B
 * partials in a fixed order and writes norm = (float)sqrt(sum). Rerunning on
 * the same n gives the same bits, wherever g sits in memory. Pass 3 scales g
 * in place when the coefficient is below 1. The double accumulation costs
 * one DFMA per element, which stays under the memory time even on GPUs with
 * 1/64-rate fp64 (4090: ~0.6 T DFMA/s against ~0.25 T elements/s read at
 * 1 TB/s).
 */
#include "amp.h"

#include <cuda_runtime.h>
#include <math_constants.h>
#include <stdint.h>

#include "engine/error.h"
#include "cuda_util.cuh"

namespace {

const int AMP_THREADS = 256;
const int AMP_WARPS = AMP_THREADS / 32;
const unsigned AMP_MAX_BLOCKS = 4096;   /* elementwise passes: grid-stride beyond */
const size_t NORM_PER_BLOCK = 16384;    /* pass 1: at least 64 elements a thread */

__device__ __forceinline__ bool finite_f32(float x)
{
    return (__float_as_uint(x) & 0x7f800000u) != 0x7f800000u;
}

/* Sum over the block in a fixed tree; the result is valid in thread 0. */
__device__ double block_sum_d(double x)
{
    __shared__ double part[AMP_WARPS];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    x = warp_sum(x);
    if (lane == 0) part[warp] = x;
    __syncthreads();
    x = 0.0;
    if (warp == 0) x = warp_sum(lane < AMP_WARPS ? part[lane] : 0.0);
    return x;
}

__device__ __forceinline__ float unscale_one(float x, float inv, bool &bad)
{
    const float r = inv == 1.0f ? x : __fmul_rn(x, inv);
    bad |= !finite_f32(r);
    return r;
}

__global__ void unscale_check_kernel(float *g, int *found_inf, size_t n, const float *scale,
                                     int vec)
{
    const float inv = __double2float_rn(__ddiv_rn(1.0, (double)*scale));
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    bool bad = false;
    size_t head = 0;
    if (vec) {
        const size_t n4 = n / 4;
        float4 *g4 = reinterpret_cast<float4 *>(g);
        for (size_t i = tid; i < n4; i += stride) {
            float4 x = g4[i];
            x.x = unscale_one(x.x, inv, bad);
            x.y = unscale_one(x.y, inv, bad);
            x.z = unscale_one(x.z, inv, bad);
            x.w = unscale_one(x.w, inv, bad);
            g4[i] = x;
        }
        head = n4 * 4;
    }
    for (size_t i = head + tid; i < n; i += stride) g[i] = unscale_one(g[i], inv, bad);
    /* every thread of the block reaches this point (no early return) */
    if (__syncthreads_or(bad) && threadIdx.x == 0) *found_inf = 1;
}

__global__ void scaler_update_kernel(float *scale, int *growth_tracker, int64_t *skipped,
                                     const int *found_inf, double growth_factor,
                                     double backoff_factor, int growth_interval)
{
    if (*found_inf) {
        *scale = __double2float_rn(__dmul_rn((double)*scale, backoff_factor));
        *growth_tracker = 0;
        if (skipped) *skipped += 1;
        return;
    }
    const int successful = *growth_tracker + 1;
    if (successful == growth_interval) {
        const float grown = __double2float_rn(__dmul_rn((double)*scale, growth_factor));
        if (finite_f32(grown)) *scale = grown; /* never grow to inf */
        *growth_tracker = 0;
    } else {
        *growth_tracker = successful;
    }
}

size_t norm_blocks(size_t n)
{
    size_t b = (n + NORM_PER_BLOCK - 1) / NORM_PER_BLOCK;
    if (b > AMP_NORM_PARTIALS) b = AMP_NORM_PARTIALS;
    return b;
}

/* partial[b] = sum of g[i]^2 over i = b * 256 + t + k * gridDim.x * 256. */
__global__ void norm_partial_kernel(double *partial, const float *g, size_t n,
                                    const int *found_inf)
{
    if (found_inf && *found_inf) return; /* uniform over the grid */
    const size_t step = (size_t)gridDim.x * AMP_THREADS;
    size_t i = (size_t)blockIdx.x * AMP_THREADS + threadIdx.x;
    double acc = 0.0;
    for (; i + 3 * step < n; i += 4 * step) {
        const double a = g[i], b = g[i + step], c = g[i + 2 * step], d = g[i + 3 * step];
        acc += a * a;
        acc += b * b;
        acc += c * c;
        acc += d * d;
    }
    for (; i < n; i += step) {
        const double a = g[i];
        acc += a * a;
    }
    acc = block_sum_d(acc);
    if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

/* norm = sqrt(sum of the B partials), one block; +inf when the step is skipped. */
__global__ void norm_final_kernel(float *norm, const double *partial, int B,
                                  const int *found_inf)
{
    if (found_inf && *found_inf) {
        if (threadIdx.x == 0) *norm = CUDART_INF_F;
        return; /* uniform over the block */
    }
    double acc = 0.0;
    for (int b = threadIdx.x; b < B; b += AMP_THREADS) acc += partial[b];
    acc = block_sum_d(acc);
    if (threadIdx.x == 0) *norm = __double2float_rn(__dsqrt_rn(acc));
}

__global__ void clip_kernel(float *g, size_t n, const float *norm, float max_norm,
                            const int *found_inf, int vec)
{
    if (found_inf && *found_inf) return;
    const float coef = __fdiv_rn(max_norm, __fadd_rn(*norm, 1e-6f));
    if (coef >= 1.0f) return; /* clamp(coef, max=1) = 1 leaves g as is; NaN goes on */
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t head = 0;
    if (vec) {
        const size_t n4 = n / 4;
        float4 *g4 = reinterpret_cast<float4 *>(g);
        for (size_t i = tid; i < n4; i += stride) {
            float4 x = g4[i];
            x.x = __fmul_rn(x.x, coef);
            x.y = __fmul_rn(x.y, coef);
            x.z = __fmul_rn(x.z, coef);
            x.w = __fmul_rn(x.w, coef);
            g4[i] = x;
        }
        head = n4 * 4;
    }
    for (size_t i = head + tid; i < n; i += stride) g[i] = __fmul_rn(g[i], coef);
}

unsigned elementwise_blocks(size_t n, int vec)
{
    const size_t items = vec ? n / 4 + n % 4 : n;
    return grid_for(items, AMP_THREADS, AMP_MAX_BLOCKS);
}

} // namespace

extern "C" void amp_unscale_check_cuda(float *g, int *found_inf, size_t n, const float *scale,
                                       cudaStream_t s)
{
    if (n == 0) return;
    CT_ASSERT(g && found_inf && scale, "amp_unscale_check_cuda: g, found_inf and scale must be device pointers");
    const int vec = (uintptr_t)g % 16 == 0;
    unscale_check_kernel<<<elementwise_blocks(n, vec), AMP_THREADS, 0, s>>>(g, found_inf, n,
                                                                            scale, vec);
    CUDA_CHECK_LAUNCH();
}

extern "C" void amp_scaler_update_cuda(float *scale, int *growth_tracker, int64_t *skipped,
                                       const int *found_inf, double growth_factor,
                                       double backoff_factor, int growth_interval,
                                       cudaStream_t s)
{
    CT_ASSERT(scale && growth_tracker && found_inf,
              "amp_scaler_update_cuda: scale, growth_tracker and found_inf must be device pointers");
    scaler_update_kernel<<<1, 1, 0, s>>>(scale, growth_tracker, skipped, found_inf,
                                         growth_factor, backoff_factor, growth_interval);
    CUDA_CHECK_LAUNCH();
}

extern "C" void amp_clip_grad_norm_cuda(float *g, float *norm, double *partial, size_t n,
                                        float max_norm, const int *found_inf, cudaStream_t s)
{
    CT_ASSERT(norm && (n == 0 || (g && partial)),
              "amp_clip_grad_norm_cuda: g, norm and partial must be device pointers");
    const size_t B = norm_blocks(n);
    if (B > 0) {
        norm_partial_kernel<<<(unsigned)B, AMP_THREADS, 0, s>>>(partial, g, n, found_inf);
        CUDA_CHECK_LAUNCH();
    }
    norm_final_kernel<<<1, AMP_THREADS, 0, s>>>(norm, partial, (int)B, found_inf);
    CUDA_CHECK_LAUNCH();
    if (max_norm <= 0.0f || n == 0) return;
    const int vec = (uintptr_t)g % 16 == 0;
    clip_kernel<<<elementwise_blocks(n, vec), AMP_THREADS, 0, s>>>(g, n, norm, max_norm,
                                                                  found_inf, vec);
    CUDA_CHECK_LAUNCH();
}
