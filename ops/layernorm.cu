/* layernorm.cu — CUDA LayerNorm over the last dim (contract and math in
 * ops/layernorm.h; ops/layernorm.c is the CPU reference).
 *
 * Shape letters: R rows, D the normalized width. Storage dt in {f32, f16,
 * bf16} for x, y, dy, dx; gamma, beta, dgamma, dbeta, mean, invstd are f32.
 * All math in f32; stores round to nearest even.
 *
 * Forward: one warp per row (8 rows per 256-thread block). Two passes over
 * the row for mean and variance (the row is in L1 after the first), a third
 * to write y. Warp sums use an xor butterfly, so every lane holds the same
 * bits and the result does not depend on scheduling.
 *
 * Backward: a block owns a chunk of consecutive rows; for each row it forms
 * the two row sums sum(g) and sum(g * xhat) (g = dy * gamma) with a fixed
 * block tree and writes dx; meanwhile each thread adds dy * xhat and dy into
 * the per-block column partials of the columns it owns (thread t owns
 * columns t, t + blockDim, ...: no two threads touch the same partial, no
 * atomics). The partials live in shared memory when 2 D floats fit (D <=
 * 6112), else in the block's slice of the global scratch. A second kernel
 * adds the chunk partials per column in chunk order. The chunking depends
 * only on (R, D), so dgamma/dbeta are bit-reproducible run to run.
 */
#include <stdint.h>

#include "engine/error.h"
#include "cuda_util.cuh"
#include "layernorm.h"

namespace {

/* Two block-wide sums at once (blockDim.x a multiple of 32); every thread
 * gets both results; the trailing barrier lets red be reused. */
__device__ __forceinline__ void block_sum2(float &a, float &b, float *red)
{
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    a = warp_sum(a);
    b = warp_sum(b);
    if (lane == 0) {
        red[w] = a;
        red[32 + w] = b;
    }
    __syncthreads();
    a = warp_sum(lane < nw ? red[lane] : 0.0f);
    b = warp_sum(lane < nw ? red[32 + lane] : 0.0f);
    __syncthreads();
}

constexpr int LN_FWD_WARPS = 8;
constexpr size_t LN_BWD_TARGET_BLOCKS = 512;
constexpr size_t LN_BWD_MIN_ROWS = 4;
constexpr size_t LN_SHARED_LIMIT = 48 * 1024; /* no opt-in needed below this */

/* forward: one warp per row */
template <typename T>
__global__ void __launch_bounds__(LN_FWD_WARPS * 32)
    ln_fwd_kernel(T *y, float *mean, float *invstd, const T *x, const float *gamma,
                  const float *beta, float eps, size_t R, int D)
{
    const size_t r = (size_t)blockIdx.x * LN_FWD_WARPS + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (r >= R) return; /* the whole warp */
    const T *xr = x + r * (size_t)D;
    T *yr = y + r * (size_t)D;
    float s = 0.0f;
    for (int d = lane; d < D; d += 32) s += to_f32(xr[d]);
    const float mu = warp_sum(s) / (float)D;
    float q = 0.0f;
    for (int d = lane; d < D; d += 32) {
        const float t = to_f32(xr[d]) - mu;
        q += t * t;
    }
    const float is = 1.0f / sqrtf(warp_sum(q) / (float)D + eps);
    for (int d = lane; d < D; d += 32)
        yr[d] = from_f32<T>((to_f32(xr[d]) - mu) * is * gamma[d] + beta[d]);
    if (lane == 0) {
        mean[r] = mu;
        invstd[r] = is;
    }
}

/* forward: y = (x - mean) * invstd * gamma + beta
 *   so dx = invstd * (g - mean(g) - xhat * mean(g * xhat)),  g = dy * gamma,
 *      dgamma += sum_r dy * xhat,  dbeta += sum_r dy
 * part: [gridDim.x][2][D] chunk partials (dgamma's, then dbeta's), or NULL. */
template <typename T>
__global__ void __launch_bounds__(256)
    ln_bwd_kernel(T *dx, float *part, const T *dy, const T *x, const float *mean,
                  const float *invstd, const float *gamma, size_t R, int D,
                  size_t rows_per_chunk, int accum_x, int acc_in_shared)
{
    extern __shared__ float sh[];
    float *red = sh; /* 64 floats for block_sum2 */
    float *acc = part ? (acc_in_shared ? sh + 64 : part + (size_t)blockIdx.x * 2 * D) : NULL;
    const int tid = threadIdx.x, bd = blockDim.x;
    if (acc)
        for (int d = tid; d < D; d += bd) {
            acc[d] = 0.0f;
            acc[D + d] = 0.0f;
        }
    const size_t r0 = (size_t)blockIdx.x * rows_per_chunk;
    const size_t r1 = r0 + rows_per_chunk < R ? r0 + rows_per_chunk : R;
    for (size_t r = r0; r < r1; r++) {
        const T *xr = x + r * (size_t)D, *dyr = dy + r * (size_t)D;
        const float mu = mean[r], is = invstd[r];
        float s1 = 0.0f, s2 = 0.0f;
        for (int d = tid; d < D; d += bd) {
            const float xh = (to_f32(xr[d]) - mu) * is, dyv = to_f32(dyr[d]);
            const float g = dyv * gamma[d];
            s1 += g;
            s2 += g * xh;
            if (acc) {
                acc[d] += dyv * xh;
                acc[D + d] += dyv;
            }
        }
        if (!dx) continue; /* uniform over the block */
        block_sum2(s1, s2, red);
        const float m1 = s1 / (float)D, m2 = s2 / (float)D;
        T *dxr = dx + r * (size_t)D;
        for (int d = tid; d < D; d += bd) {
            const float xh = (to_f32(xr[d]) - mu) * is;
            float v = is * (to_f32(dyr[d]) * gamma[d] - m1 - xh * m2);
            if (accum_x) v += to_f32(dxr[d]);
            dxr[d] = from_f32<T>(v);
        }
    }
    if (acc && acc_in_shared) {
        float *out = part + (size_t)blockIdx.x * 2 * D;
        for (int d = tid; d < D; d += bd) {
            out[d] = acc[d];
            out[D + d] = acc[D + d];
        }
    }
}

/* dgamma[d] (+)= sum_g part[g][0][d],  dbeta[d] (+)= sum_g part[g][1][d].
 * A block per tile of FIN_COLS columns; slice y of FIN_SLICES adds chunks
 * y, y + FIN_SLICES, ... in order, then the slice sums are added in slice
 * order: a fixed order, so reruns agree bit for bit. (One thread per
 * column walking all G chunks took 33 us at BERT-large's G 512, D 1024:
 * 1.6 ms of a 28 ms step; docs/kernels.md, "BERT-large, one GPU".) */
constexpr int FIN_COLS = 32, FIN_SLICES = 16;

__global__ void __launch_bounds__(FIN_COLS *FIN_SLICES)
    ln_bwd_finish_kernel(float *dgamma, float *dbeta, const float *part, size_t G, int D,
                         int accum_gamma, int accum_beta)
{
    __shared__ float sg[FIN_SLICES][FIN_COLS + 1], sb[FIN_SLICES][FIN_COLS + 1];
    const int tx = threadIdx.x, ty = threadIdx.y, d = blockIdx.x * FIN_COLS + tx;
    float a = 0.0f, b = 0.0f;
    if (d < D)
        for (size_t g = ty; g < G; g += FIN_SLICES) {
            a += part[g * 2 * D + d];
            b += part[g * 2 * D + D + d];
        }
    sg[ty][tx] = a;
    sb[ty][tx] = b;
    __syncthreads();
    if (ty != 0 || d >= D) return;
    a = 0.0f;
    b = 0.0f;
    for (int y = 0; y < FIN_SLICES; y++) {
        a += sg[y][tx];
        b += sb[y][tx];
    }
    if (dgamma) dgamma[d] = accum_gamma ? dgamma[d] + a : a;
    if (dbeta) dbeta[d] = accum_beta ? dbeta[d] + b : b;
}

} // namespace

extern "C" void layernorm_forward_cuda(void *y, float *mean, float *invstd, const void *x,
                                       const float *gamma, const float *beta, DType dt,
                                       float eps, size_t R, size_t D, cudaStream_t s)
{
    if (R == 0) return;
    CT_ASSERT(D > 0 && D <= 0x7fffffff, "layernorm_forward_cuda: D = %zu out of range", D);
    size_t blocks = (R + LN_FWD_WARPS - 1) / LN_FWD_WARPS;
    CT_ASSERT(blocks <= 0x7fffffffu, "layernorm_forward_cuda: R = %zu rows is too many", R);
    dispatch_float(dt, "layernorm_forward_cuda", [&](auto tag) {
        using T = decltype(tag);
        ln_fwd_kernel<T><<<(unsigned)blocks, LN_FWD_WARPS * 32, 0, s>>>(
            (T *)y, mean, invstd, (const T *)x, gamma, beta, eps, R, (int)D);
        CUDA_CHECK_LAUNCH();
    });
}

extern "C" void layernorm_backward_cuda(void *dx, float *dgamma, float *dbeta, const void *dy,
                                        const void *x, const float *mean,
                                        const float *invstd, const float *gamma, DType dt,
                                        size_t R, size_t D, int accum_x, int accum_gamma,
                                        int accum_beta, cudaStream_t s)
{
    if (D == 0) return;
    CT_ASSERT(D <= 0x7fffffff, "layernorm_backward_cuda: D = %zu out of range", D);
    const int want_params = dgamma != NULL || dbeta != NULL;
    if (R == 0) {
        if (dgamma && !accum_gamma) CUDA_CHECK(cudaMemsetAsync(dgamma, 0, D * sizeof(float), s));
        if (dbeta && !accum_beta) CUDA_CHECK(cudaMemsetAsync(dbeta, 0, D * sizeof(float), s));
        return;
    }
    if (!dx && !want_params) return;
    size_t rows_per_chunk = (R + LN_BWD_TARGET_BLOCKS - 1) / LN_BWD_TARGET_BLOCKS;
    if (rows_per_chunk < LN_BWD_MIN_ROWS) rows_per_chunk = LN_BWD_MIN_ROWS;
    const size_t G = (R + rows_per_chunk - 1) / rows_per_chunk;
    const int threads = threads_for(D, 256);
    const size_t acc_bytes = 2 * D * sizeof(float), red_bytes = 64 * sizeof(float);
    const int acc_in_shared = want_params && red_bytes + acc_bytes <= LN_SHARED_LIMIT;
    const size_t smem = red_bytes + (acc_in_shared ? acc_bytes : 0);
    float *part = NULL;
    if (want_params) CUDA_CHECK(cudaMallocAsync((void **)&part, G * acc_bytes, s));
    dispatch_float(dt, "layernorm_backward_cuda", [&](auto tag) {
        using T = decltype(tag);
        ln_bwd_kernel<T><<<(unsigned)G, threads, smem, s>>>(
            (T *)dx, part, (const T *)dy, (const T *)x, mean, invstd, gamma, R, (int)D,
            rows_per_chunk, accum_x, acc_in_shared);
        CUDA_CHECK_LAUNCH();
    });
    if (want_params) {
        ln_bwd_finish_kernel<<<(unsigned)((D + FIN_COLS - 1) / FIN_COLS),
                               dim3(FIN_COLS, FIN_SLICES), 0, s>>>(dgamma, dbeta, part, G,
                                                                    (int)D, accum_gamma,
                                                                    accum_beta);
        CUDA_CHECK_LAUNCH();
        CUDA_CHECK(cudaFreeAsync(part, s));
    }
}
