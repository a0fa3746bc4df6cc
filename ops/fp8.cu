/* fp8.cu — the CUDA half of ops/fp8.h: the scaled cast to E4M3 / E5M2 with
 * the tensor's amax, and the delayed-scaling update, bit-identical to the
 * CPU reference (ops/fp8.c) because both convert with ops/fp8_cvt.h.
 *
 * Shape letters: n elements; T tensors of one update, L history length.
 *
 *   cast:    q[i] = fp8(x[i] * *scale);  *amax = max(*amax, max_i |x[i]|)
 *   cast-transpose (x row-major [R, C]):
 *            qt[c * R + r] = fp8(x[r * C + c] * *scale)   (and q = the cast)
 *   update:  per tensor t (one thread each):
 *            history[t, step mod L] = finite(amax[t]) ? amax[t] : 0
 *            m = max over history[t, :]
 *            scale[t] = fmt_max / m / 2^margin  when m > 0 and finite
 *            scale_inv[t] = 1 / scale[t]
 *
 * The cast is a grid-stride pass; each block reduces |x| with warp_max and
 * one atomicMax on the float's bits (a non-negative float orders like its
 * unsigned bit pattern; NaN is skipped with fmaxf's rule, +inf is the
 * largest such pattern), so the amax does not depend on the block order.
 * The conversion itself is integer arithmetic (fp8_cvt.h), not the
 * hardware's cvt.rn.satfinite instruction: the same bits on every card and
 * on the CPU.
 *
 * The cast-transpose goes through shared memory a 64 x 64 tile at a time
 * (a grid-stride loop over tiles): the block reads the tile's rows with
 * consecutive threads on consecutive columns, converts, keeps the codes in
 * shared memory (rows padded to 68 bytes, so a warp reading a column of
 * the tile touches 32 different banks) and writes them out along the
 * tile's columns, which are rows of qt; both global passes are coalesced.
 * Its amax is the cast's: warp_max, then one atomicMax per block.
 */
#include "fp8.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "cuda_util.cuh"
#include "engine/error.h"
#include "fp8_cvt.h"

namespace {

const int FP8_THREADS = 256;
const unsigned FP8_MAX_BLOCKS = 4096;

/* *amax = max(*amax, max of every thread's m): the warp's fmaxf butterfly,
 * then warp 0 over the per-warp maxima and one atomicMax on the bits. */
__device__ __forceinline__ void block_amax_atomic(float m, float *amax)
{
    m = warp_max(m);
    __shared__ float part[FP8_THREADS / 32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) part[warp] = m;
    __syncthreads();
    if (warp == 0) {
        m = warp_max(lane < FP8_THREADS / 32 ? part[lane] : 0.0f);
        if (lane == 0) atomicMax((unsigned int *)amax, __float_as_uint(m));
    }
}

template <typename T>
__global__ void fp8_cast_kernel(uint8_t *__restrict__ q, float *amax, const T *__restrict__ x,
                                size_t n, const float *scale, int fmt)
{
    const float s = *scale;
    float m = 0.0f;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const float v = to_f32(x[i]);
        q[i] = fp8_cvt_from_f32(v * s, fmt);
        m = fmaxf(m, fabsf(v));
    }
    block_amax_atomic(m, amax);
}

/* Cast-transpose tiles: TILE x TILE elements; the block's FP8_THREADS
 * threads cover TILE columns x TILE_ROWS rows per pass. */
const int TILE = 64;
const int TILE_ROWS = FP8_THREADS / TILE;
const int TILE_PITCH = TILE + 4;   /* 68 bytes = 17 words: a tile column hits 32 banks */


template <typename T>
__global__ void fp8_cast_transpose_kernel(uint8_t *__restrict__ qt, uint8_t *__restrict__ q,
                                          float *amax, const T *__restrict__ x, size_t rows,
                                          size_t cols, const float *scale, int fmt)
{
    __shared__ uint8_t tile[TILE][TILE_PITCH];
    const float s = *scale;
    const int tx = threadIdx.x % TILE, ty = threadIdx.x / TILE;
    const size_t tiles_c = (cols + TILE - 1) / TILE;
    const size_t ntiles = tiles_c * ((rows + TILE - 1) / TILE);
    float m = 0.0f;
    for (size_t t = blockIdx.x; t < ntiles; t += gridDim.x) {
        const size_t r0 = t / tiles_c * TILE, c0 = t % tiles_c * TILE;
        /* in: tile row i is x's row r0 + i; thread tx reads column c0 + tx */
        const size_t c = c0 + tx;
        for (int i = ty; i < TILE; i += TILE_ROWS) {
            const size_t r = r0 + i;
            if (r < rows && c < cols) {
                const float v = to_f32(x[r * cols + c]);
                const uint8_t code = fp8_cvt_from_f32(v * s, fmt);
                tile[i][tx] = code;
                if (q) q[r * cols + c] = code;
                m = fmaxf(m, fabsf(v));
            }
        }
        __syncthreads();
        /* out: tile column i is qt's row c0 + i; thread tx writes its column r0 + tx */
        const size_t r = r0 + tx;
        for (int i = ty; i < TILE; i += TILE_ROWS) {
            const size_t cq = c0 + i;
            if (r < rows && cq < cols) qt[cq * rows + r] = tile[tx][i];
        }
        __syncthreads();   /* the next tile overwrites this one */
    }
    block_amax_atomic(m, amax);
}

__global__ void fp8_amax_zero_kernel(float *amax, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) amax[i] = 0.0f;
}

__global__ void fp8_scale_update_kernel(float *history, int len, const long long *step,
                                        const float *amax, int ntensors, float fmt_max,
                                        float headroom, float *scale, float *scale_inv,
                                        int *overflow)
{
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= ntensors) return;
    float *h = history + (size_t)t * len;
    const float a = amax[t];
    const bool bad = !isfinite(a);
    h[*step % len] = bad ? 0.0f : a;
    if (bad && overflow) overflow[t] = 1;
    float m = 0.0f;
    for (int i = 0; i < len; i++) m = fmaxf(m, h[i]);
    if (m > 0.0f) {
        /* the CPU's order: fmt_max / m / 2^margin */
        const float s = fmt_max / m / headroom;
        if (isfinite(s) && s > 0.0f) scale[t] = s;
    }
    scale_inv[t] = 1.0f / scale[t];
}

} // namespace

void fp8_cast_cuda(uint8_t *q, float *amax, const void *x, DType xt, size_t n,
                   const float *scale, Fp8Format f, cudaStream_t s)
{
    if (n == 0) return;
    const unsigned blocks = grid_for(n, FP8_THREADS, FP8_MAX_BLOCKS);
    dispatch_float(xt, "fp8_cast_cuda", [&](auto tag) {
        using T = decltype(tag);
        fp8_cast_kernel<T><<<blocks, FP8_THREADS, 0, s>>>(q, amax, (const T *)x, n, scale,
                                                          (int)f);
    });
    CUDA_CHECK_LAUNCH();
}

void fp8_cast_transpose_cuda(uint8_t *qt, uint8_t *q, float *amax, const void *x, DType xt,
                             size_t rows, size_t cols, const float *scale, Fp8Format f,
                             cudaStream_t s)
{
    if (rows == 0 || cols == 0) return;
    const size_t tiles = ((rows + TILE - 1) / TILE) * ((cols + TILE - 1) / TILE);
    const unsigned blocks = grid_for(tiles, 1, FP8_MAX_BLOCKS);
    dispatch_float(xt, "fp8_cast_transpose_cuda", [&](auto tag) {
        using T = decltype(tag);
        fp8_cast_transpose_kernel<T><<<blocks, FP8_THREADS, 0, s>>>(
            qt, q, amax, (const T *)x, rows, cols, scale, (int)f);
    });
    CUDA_CHECK_LAUNCH();
}

void fp8_amax_zero_cuda(float *amax, int n, cudaStream_t s)
{
    if (n <= 0) return;
    fp8_amax_zero_kernel<<<(n + 255) / 256, 256, 0, s>>>(amax, n);
    CUDA_CHECK_LAUNCH();
}

void fp8_scale_update_cuda(float *history, int len, const long long *step, const float *amax,
                           int ntensors, Fp8Format f, int margin, float *scale,
                           float *scale_inv, int *overflow, cudaStream_t s)
{
    CT_ASSERT(len > 0 && margin >= 0 && margin < 64 && ntensors >= 0,
              "fp8_scale_update_cuda: history length %d, margin %d, %d tensors", len, margin,
              ntensors);
    if (ntensors == 0) return;
    fp8_scale_update_kernel<<<(ntensors + 127) / 128, 128, 0, s>>>(
        history, len, step, amax, ntensors, fp8_max(f), ldexpf(1.0f, margin), scale, scale_inv,
        overflow);
    CUDA_CHECK_LAUNCH();
}
