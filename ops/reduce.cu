/* reduce.cu — CUDA sum and mean over the last dimension (contract in reduce.h).
 *
 * Shape letters: R rows, C columns (the reduced, last dim).
 *
 *   forward:  y[r] = scale * sum_c x[r,c]      (scale 1 for sum, 1/C for mean)
 *   backward: dx[r,c] (+)= scale * dy[r]
 *
 * x and dx have storage type T (f32, f16, bf16); y and dy are f32; sums run in
 * f32. Deterministic: no atomics, and every addition order is fixed by (R, C)
 * alone (not by the GPU, the pointer alignment or the run):
 *   - C <= WARP_ROW_MAX: one warp per row; lane l sums c = l, l+32, ... in
 *     order, then a shuffle tree.
 *   - longer rows: one block per row segment; thread t sums c = t, t+256, ...
 *     in order, a shuffle tree per warp, then a tree over the warps.
 *   - few long rows (R = 1, C = 10^7): each row is cut into S segments (S from
 *     R and C only), pass 1 writes partial[r, s], pass 2 reduces the [R, S]
 *     partials with the warp-per-row kernel, which applies the scale.
 */
#include <stdint.h>

#include "engine/error.h"
#include "cuda_util.cuh"
#include "reduce.h"

static const int RED_THREADS = 256;                 /* per block, 8 warps */
static const int RED_WARPS = RED_THREADS / 32;
static const size_t WARP_ROW_MAX = 1024;            /* rows up to this long: a warp each */
static const size_t RED_TARGET_BLOCKS = 512;        /* enough to fill any current GPU */
static const size_t RED_MIN_SEGMENT = 16384;        /* 64 elements a thread at least */
static const unsigned RED_MAX_GRID = 65535;

/* Sum of p[c] for c = first, first + step, ... < end, in that order; four
 * loads are issued before they are added so memory latency overlaps. */
template <typename T>
__device__ __forceinline__ float strided_sum(const T *p, size_t first, size_t end, size_t step)
{
    float acc = 0.0f;
    size_t c = first;
    for (; c + 3 * step < end; c += 4 * step) {
        float v0 = to_f32(p[c]), v1 = to_f32(p[c + step]);
        float v2 = to_f32(p[c + 2 * step]), v3 = to_f32(p[c + 3 * step]);
        acc += v0;
        acc += v1;
        acc += v2;
        acc += v3;
    }
    for (; c < end; c += step) acc += to_f32(p[c]);
    return acc;
}

/* y[r] = scale * sum_c x[r,c], one warp per row, RED_WARPS rows per block. */
template <typename T>
__global__ void reduce_rows_warp_kernel(float *y, const T *x, float scale, size_t R, size_t C)
{
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    size_t step = (size_t)gridDim.x * RED_WARPS;
    for (size_t r = (size_t)blockIdx.x * RED_WARPS + warp; r < R; r += step) {
        float acc = warp_sum(strided_sum(x + r * C, (size_t)lane, C, 32));
        if (lane == 0) y[r] = scale * acc;
    }
}

/* out[r * S + s] = scale * sum of x[r, c] over segment s = blockIdx.x of row r
 * (columns [s * seg, min(C, (s + 1) * seg))); one block per segment, rows
 * strided over gridDim.y. */
template <typename T>
__global__ void reduce_rows_block_kernel(float *out, const T *x, float scale, size_t R,
                                         size_t C, size_t seg)
{
    __shared__ float warp_part[RED_WARPS];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    size_t S = gridDim.x, s = blockIdx.x;
    size_t c0 = s * seg, c1 = c0 + seg < C ? c0 + seg : C;
    for (size_t r = blockIdx.y; r < R; r += gridDim.y) {
        float acc = strided_sum(x + r * C, c0 + threadIdx.x, c1, RED_THREADS);
        acc = warp_sum(acc);
        if (lane == 0) warp_part[warp] = acc;
        __syncthreads();
        if (warp == 0) {
            acc = lane < RED_WARPS ? warp_part[lane] : 0.0f;
            acc = warp_sum(acc);
            if (lane == 0) out[r * S + s] = scale * acc;
        }
        __syncthreads(); /* warp_part is reused by the next row */
    }
}

template <typename T>
static void launch_rows_warp(float *y, const T *x, float scale, size_t R, size_t C,
                             cudaStream_t s)
{
    const unsigned blocks = grid_for(R, RED_WARPS, RED_MAX_GRID); /* a warp per row */
    reduce_rows_warp_kernel<T><<<blocks, RED_THREADS, 0, s>>>(y, x, scale, R, C);
    CUDA_CHECK_LAUNCH();
}

extern "C" void reduce_sum_forward_cuda(float *y, const void *x, DType dt, float scale,
                                        size_t R, size_t C, cudaStream_t s)
{
    if (R == 0) return;
    if (C == 0) { /* empty sum */
        CUDA_CHECK(cudaMemsetAsync(y, 0, R * sizeof(float), s));
        return;
    }
    /* segments per row: only when there are too few rows to fill the GPU */
    size_t S = (RED_TARGET_BLOCKS + R - 1) / R;
    size_t max_seg = (C + RED_MIN_SEGMENT - 1) / RED_MIN_SEGMENT;
    if (S > max_seg) S = max_seg;
    if (S < 1) S = 1;
    size_t seg = (C + S - 1) / S;
    S = (C + seg - 1) / seg; /* no empty segment at the end */

    dispatch_float(dt, "reduce_sum_forward_cuda", [&](auto tag) {
        using T = decltype(tag);
        const T *xt = (const T *)x;
        if (S == 1 && C <= WARP_ROW_MAX) {
            launch_rows_warp<T>(y, xt, scale, R, C, s);
        } else if (S == 1) {
            dim3 grid(1, (unsigned)(R < RED_MAX_GRID ? R : RED_MAX_GRID));
            reduce_rows_block_kernel<T><<<grid, RED_THREADS, 0, s>>>(y, xt, scale, R, C, C);
            CUDA_CHECK_LAUNCH();
        } else {
            /* S > 1 only when R < RED_TARGET_BLOCKS, so R fits in grid.y */
            float *partial = NULL;
            CUDA_CHECK(cudaMallocAsync((void **)&partial, R * S * sizeof(float), s));
            dim3 grid((unsigned)S, (unsigned)R);
            reduce_rows_block_kernel<T><<<grid, RED_THREADS, 0, s>>>(partial, xt, 1.0f, R, C, seg);
            CUDA_CHECK_LAUNCH();
            launch_rows_warp<float>(y, partial, scale, R, S, s);
            CUDA_CHECK(cudaFreeAsync(partial, s));
        }
    });
}

/* forward: y[r] = scale * sum_c x[r,c]   so   dx[r,c] (+)= scale * dy[r]
 * Flat index over dx, V elements per access when dx allows it; the row and
 * column are computed once per vector and then stepped. */
template <typename T, int V>
__global__ void reduce_backward_kernel(T *dx, const float *dy, float scale, size_t n, size_t C,
                                       int accum)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t nv = n / V;
    for (size_t i = tid; i < nv; i += stride) {
        Vec<T, V> o;
        if (accum) o = reinterpret_cast<const Vec<T, V> *>(dx)[i];
        size_t r = i * V / C, c = i * V % C;
#pragma unroll
        for (int k = 0; k < V; k++) {
            float g = scale * dy[r];
            o.v[k] = from_f32<T>(accum ? to_f32(o.v[k]) + g : g);
            if (++c == C) { c = 0; r++; }
        }
        reinterpret_cast<Vec<T, V> *>(dx)[i] = o;
    }
    for (size_t i = nv * V + tid; i < n; i += stride) {
        float g = scale * dy[i / C];
        dx[i] = from_f32<T>(accum ? to_f32(dx[i]) + g : g);
    }
}

extern "C" void reduce_sum_backward_cuda(void *dx, DType dt, const float *dy, float scale,
                                         size_t R, size_t C, int accum, cudaStream_t s)
{
    size_t n = R * C;
    if (n == 0) return;
    dispatch_float(dt, "reduce_sum_backward_cuda", [&](auto tag) {
        using T = decltype(tag);
        constexpr int V = 16 / sizeof(T);
        bool vec = ((uintptr_t)dx % 16) == 0;
        size_t work = vec ? (n + V - 1) / V : n;
        const unsigned blocks = grid_for(work, RED_THREADS, RED_MAX_GRID);
        if (vec)
            reduce_backward_kernel<T, V><<<blocks, RED_THREADS, 0, s>>>(
                (T *)dx, dy, scale, n, C, accum);
        else
            reduce_backward_kernel<T, 1><<<blocks, RED_THREADS, 0, s>>>(
                (T *)dx, dy, scale, n, C, accum);
        CUDA_CHECK_LAUNCH();
    });
}
