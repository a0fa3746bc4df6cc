/* softmax.cu — CUDA softmax over the last dim and fused log-softmax +
 * cross-entropy (ops/softmax.h); ops/softmax.c is the CPU reference.
 *
 * Shapes: R rows, C classes (the last dim). Storage dt in {f32, f16, bf16},
 * math in f32, results rounded to nearest even on store; lse, loss and
 * nvalid are f32, nbad is i32, all in device memory.
 *
 * softmax:  y[r,c] = exp(x[r,c] - m_r) / s_r,  m_r = max_j x[r,j],  s_r = sum_j exp(x[r,j] - m_r)
 * cross-entropy, eps = label smoothing, q_r = (1 - eps) onehot(t_r) + eps / C:
 *   lse_r  = m_r + log s_r
 *   loss_r = (1 - eps) (lse_r - x[r,t_r]) + eps (lse_r - sum_c x[r,c] / C)
 *   loss   = sum_r loss_r / nvalid  over rows with t_r != ignore_index (0 if none)
 *
 * Row kernels: one warp per row when C <= 1024 (8 rows per 256-thread block),
 * one block per row above (256..1024 threads by C). Each thread keeps an
 * online (max, sum) pair over its strided columns — one read of the row for
 * the statistics, a second (mostly from L2) to write — and the pairs merge in
 * a fixed shuffle/shared-memory tree, so results are bit-reproducible.
 *
 * Cross-entropy forward is two kernels, because the contract has no scratch
 * buffer and a hidden __device__ scratch would not be safe under CUDA graphs
 * or several streams:
 *   1. ce_lse (row kernel): lse[r] for every row whose target is usable;
 *      ignored rows (and out-of-range ones) get lse 0 and are not read;
 *   2. ce_reduce (one block of 1024 threads): recomputes loss_r from lse[r]
 *      and x[r,t_r] for strided rows — one gathered element per row — and
 *      sums in double in a fixed order, then writes *loss, *nvalid, *nbad.
 *      No float atomics, no host sync. With eps > 0 loss_r also needs the
 *      row sum, so kernel 2 re-reads the valid rows (one warp per row): this
 *      is one SM's bandwidth, cheap for C ~ 1000 but slow for large
 *      vocabularies; a per-row scratch in the contract would remove it.
 * Targets outside [0, C) that are not ignore_index are counted into *nbad and
 * otherwise treated as ignored (not in nvalid, no loss, zero gradient), so a
 * bad label never reads out of bounds; the op layer reports *nbad != 0.
 *
 * Backward is elementwise given lse: a 2D grid (column tiles x rows) with
 *   dx[r,c] (+)= (*dloss / *nvalid) * (exp(x[r,c] - lse_r) - q_r[c])
 * reading dloss and nvalid from device memory.
 */
#include "softmax.h"

#include <cuda_runtime.h>
#include <limits.h>
#include <math.h>

#include "engine/error.h"
#include "cuda_util.cuh"

namespace {

/* ---- online (max, sum of exp) pairs and fixed-order reductions ---- */

struct MaxSum {
    float m, s; /* running max, sum_j exp(x_j - m) */
};

/* Add one value. -inf adds nothing (also while m is still -inf: no 0 * inf);
 * NaN makes s NaN, so a NaN logit poisons the row as it should. */
__device__ __forceinline__ void ms_add(MaxSum &a, float x)
{
    if (x > a.m) {
        a.s = a.s * expf(a.m - x) + 1.0f;
        a.m = x;
    } else if (x != -INFINITY) {
        a.s += expf(x - a.m);
    }
}

/* Merge two pairs. Symmetric in a and b, so every lane of a butterfly ends
 * with the same bits. */
__device__ __forceinline__ MaxSum ms_merge(MaxSum a, MaxSum b)
{
    MaxSum r;
    r.m = fmaxf(a.m, b.m);
    if (r.m == -INFINITY) {
        r.s = 0.0f;
        return r;
    }
    r.s = a.s * expf(a.m - r.m) + b.s * expf(b.m - r.m);
    return r;
}

__device__ __forceinline__ MaxSum warp_ms(MaxSum a)
{
    for (int o = 16; o > 0; o >>= 1) {
        MaxSum b;
        b.m = __shfl_xor_sync(FULL_MASK, a.m, o);
        b.s = __shfl_xor_sync(FULL_MASK, a.s, o);
        a = ms_merge(a, b);
    }
    return a;
}

/* Block-wide reductions (blockDim.x a multiple of 32, at most 1024): every
 * warp reduces the per-warp results itself, so all threads get the result
 * without a broadcast; the trailing barrier lets sh be reused. */
__device__ __forceinline__ MaxSum block_ms(MaxSum a, MaxSum *sh)
{
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    a = warp_ms(a);
    if (lane == 0) sh[w] = a;
    __syncthreads();
    MaxSum b = {-INFINITY, 0.0f};
    if (lane < nw) b = sh[lane];
    b = warp_ms(b);
    __syncthreads();
    return b;
}

__device__ __forceinline__ float block_sum(float v, float *sh)
{
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    if (lane == 0) sh[w] = v;
    __syncthreads();
    float b = lane < nw ? sh[lane] : 0.0f;
    b = warp_sum(b);
    __syncthreads();
    return b;
}

/* Which row this thread works on, its index in the row's group, the group
 * width. WARP: a warp per row; else a block per row. */
template <bool WARP> struct RowPos {
    size_t r;
    int i, w;
    __device__ RowPos()
    {
        if (WARP) {
            r = (size_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
            i = threadIdx.x & 31;
            w = 32;
        } else {
            r = blockIdx.x;
            i = threadIdx.x;
            w = blockDim.x;
        }
    }
};

/* (max, sum exp) of row xr: four independent loads in flight per thread. */
template <typename T, bool WARP>
__device__ __forceinline__ MaxSum row_maxsum(const T *xr, int C, int i, int w, MaxSum *sh)
{
    MaxSum a = {-INFINITY, 0.0f};
    for (int c = i; c < C; c += 4 * w) {
        float v[4];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const int cc = c + k * w;
            v[k] = cc < C ? to_f32(xr[cc]) : -INFINITY;
        }
#pragma unroll
        for (int k = 0; k < 4; k++) ms_add(a, v[k]);
    }
    return WARP ? warp_ms(a) : block_ms(a, sh);
}

/* ---- softmax ---- */

template <typename T, bool WARP>
__global__ void __launch_bounds__(1024) softmax_fwd_kernel(T *y, const T *x, size_t R, int C)
{
    __shared__ MaxSum sh[32];
    const RowPos<WARP> p;
    if (p.r >= R) return; /* whole warp (WARP) or never (block per row) */
    const T *xr = x + p.r * (size_t)C;
    T *yr = y + p.r * (size_t)C;
    const MaxSum a = row_maxsum<T, WARP>(xr, C, p.i, p.w, sh);
    const float inv = 1.0f / a.s;
#pragma unroll 4
    for (int c = p.i; c < C; c += p.w) yr[c] = from_f32<T>(expf(to_f32(xr[c]) - a.m) * inv);
}

/* forward: y[r,c] = exp(x[r,c]) / sum_j exp(x[r,j])
 *   so dx[r,c] (+)= y[r,c] * (dy[r,c] - sum_j dy[r,j] y[r,j]) */
template <typename T, bool WARP>
__global__ void __launch_bounds__(1024)
    softmax_bwd_kernel(T *dx, const T *dy, const T *y, size_t R, int C, int accum)
{
    __shared__ float sh[32];
    const RowPos<WARP> p;
    if (p.r >= R) return;
    const size_t off = p.r * (size_t)C;
    const T *dyr = dy + off, *yr = y + off;
    T *dxr = dx + off;
    float dot = 0.0f;
    for (int c = p.i; c < C; c += 4 * p.w) {
        float a[4], b[4];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const int cc = c + k * p.w;
            a[k] = cc < C ? to_f32(dyr[cc]) : 0.0f;
            b[k] = cc < C ? to_f32(yr[cc]) : 0.0f;
        }
#pragma unroll
        for (int k = 0; k < 4; k++) dot += a[k] * b[k];
    }
    dot = WARP ? warp_sum(dot) : block_sum(dot, sh);
#pragma unroll 4
    for (int c = p.i; c < C; c += p.w) {
        float g = to_f32(yr[c]) * (to_f32(dyr[c]) - dot);
        if (accum) g += to_f32(dxr[c]);
        dxr[c] = from_f32<T>(g);
    }
}

/* ---- cross-entropy ---- */

__device__ __forceinline__ bool target_ok(int t, int C, int ignore)
{
    return t != ignore && t >= 0 && t < C;
}

/* Kernel 1: lse[r] = m_r + log s_r for rows with a usable target, else 0. */
template <typename T, bool WARP>
__global__ void __launch_bounds__(1024)
    ce_lse_kernel(float *lse, const T *x, const int32_t *tg, size_t R, int C, int ignore)
{
    __shared__ MaxSum sh[32];
    const RowPos<WARP> p;
    if (p.r >= R) return;
    if (!target_ok(tg[p.r], C, ignore)) { /* uniform over the row's group */
        if (p.i == 0) lse[p.r] = 0.0f;
        return;
    }
    const MaxSum a = row_maxsum<T, WARP>(x + p.r * (size_t)C, C, p.i, p.w, sh);
    if (p.i == 0) lse[p.r] = a.m + logf(a.s);
}

constexpr int CE_REDUCE_THREADS = 1024;
constexpr size_t CE_BWD_BLOCKS = 2048;   /* the vector backward's grid: ~16 blocks an SM */

/* Kernel 2, one block: loss_r from lse_r, summed in double in a fixed order
 * (thread/warp strided rows, then a fixed tree); writes the three outputs. */
template <typename T>
__global__ void __launch_bounds__(1024)
    ce_reduce_kernel(float *loss, float *nvalid, int32_t *nbad, const T *x,
                     const int32_t *tg, const float *lse, size_t R, int C, int ignore,
                     float eps)
{
    __shared__ double sh_acc[32];
    __shared__ int sh_valid[32], sh_bad[32];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    double acc = 0.0;
    int valid = 0, bad = 0;
    if (eps == 0.0f) {
        /* loss_r = lse_r - x[r,t_r]: one gathered element per row */
        for (size_t r = threadIdx.x; r < R; r += blockDim.x) {
            const int t = tg[r];
            if (t == ignore) continue;
            if (t < 0 || t >= C) { bad++; continue; }
            valid++;
            acc += (double)lse[r] - (double)to_f32(x[r * (size_t)C + t]);
        }
    } else {
        /* loss_r also needs sum_c x[r,c]: a warp per row re-reads it */
        for (size_t r = w; r < R; r += nw) {
            const int t = tg[r];
            if (t == ignore) continue;
            if (t < 0 || t >= C) { bad += lane == 0; continue; }
            const T *xr = x + r * (size_t)C;
            float s = 0.0f;
            for (int c = lane; c < C; c += 4 * 32) {
                float v[4];
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    const int cc = c + k * 32;
                    v[k] = cc < C ? to_f32(xr[cc]) : 0.0f;
                }
                s += (v[0] + v[1]) + (v[2] + v[3]);
            }
            s = warp_sum(s);
            if (lane == 0) {
                const double l = lse[r];
                valid++;
                acc += (1.0 - (double)eps) * (l - (double)to_f32(xr[t])) +
                       (double)eps * (l - (double)s / C);
            }
        }
    }
    acc = warp_sum(acc);
    valid = warp_sum(valid);
    bad = warp_sum(bad);
    if (lane == 0) {
        sh_acc[w] = acc;
        sh_valid[w] = valid;
        sh_bad[w] = bad;
    }
    __syncthreads();
    if (w == 0) {
        acc = lane < nw ? sh_acc[lane] : 0.0;
        valid = lane < nw ? sh_valid[lane] : 0;
        bad = lane < nw ? sh_bad[lane] : 0;
        acc = warp_sum(acc);
        valid = warp_sum(valid);
        bad = warp_sum(bad);
        if (lane == 0) {
            *loss = valid ? (float)(acc / valid) : 0.0f;
            *nvalid = (float)valid;
            if (nbad) *nbad = bad;
        }
    }
}

/* One element of the backward below: g (exp(x - lse) - q) (+ old with
 * accum), rounded once; both backward kernels call it, so they give the
 * same bits. dx may be x itself (the op writes the gradient over logits
 * nothing else holds): a thread reads each element before it writes it,
 * and no pointer here is __restrict__. */
template <typename T>
__device__ __forceinline__ T ce_grad(T x, float lse, float g, float q, int accum, T old)
{
    const float pr = expf(to_f32(x) - lse);
    float v = g * (pr - q);
    if (accum) v += to_f32(old);
    return from_f32<T>(v);
}

/* forward: loss = sum_r -sum_c q_r[c] (x[r,c] - lse_r) / nvalid,  sum_c q_r[c] = 1
 *   and d lse_r / d x[r,c] = softmax(x)[r,c], so
 *   dx[r,c] (+)= dloss * (exp(x[r,c] - lse_r) - q_r[c]) / nvalid   (0 for ignored rows) */
template <typename T>
__global__ void ce_bwd_kernel(T *dx, const float *dloss, const T *x, const float *lse,
                              const float *nvalid, const int32_t *tg, size_t R, int C,
                              int ignore, float eps, int accum)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    const float nv = *nvalid;
    const float g = nv > 0.0f ? *dloss / nv : 0.0f;
    const float qoff = eps / C, qon = (1.0f - eps) + qoff;
    for (size_t r = blockIdx.y; r < R; r += gridDim.y) {
        const int t = tg[r];
        const size_t i = r * (size_t)C + c;
        if (!target_ok(t, C, ignore)) {
            if (!accum) dx[i] = from_f32<T>(0.0f);
            continue;
        }
        dx[i] = ce_grad<T>(x[i], lse[r], g, c == t ? qon : qoff, accum, accum ? dx[i] : T());
    }
}

/* The same backward on 16-byte vectors (C % V == 0, x and dx 16-byte
 * aligned: BERT's padded vocabulary, 30,528 columns): a thread owns V
 * columns and walks rows_per_block rows. The kernel above gives every
 * (256 columns, row) its own block: 614 K blocks for BERT-large's 5,120
 * masked rows, whose launches, not the 625 MB moved, set its time (0.94 ms
 * on an H100, 0.66 TB/s). Each element is ce_grad, as above. */
template <typename T>
__global__ void ce_bwd_vec_kernel(T *dx, const float *dloss, const T *x, const float *lse,
                                  const float *nvalid, const int32_t *tg, size_t R, int C,
                                  int ignore, float eps, int accum, size_t rows_per_block)
{
    constexpr int V = 16 / sizeof(T);
    const int c0 = (blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (c0 >= C) return;   /* C % V == 0: a vector is wholly inside or outside */
    const float nv = *nvalid;
    const float g = nv > 0.0f ? *dloss / nv : 0.0f;
    const float qoff = eps / C, qon = (1.0f - eps) + qoff;
    const size_t r0 = (size_t)blockIdx.y * rows_per_block;
    const size_t r1 = r0 + rows_per_block < R ? r0 + rows_per_block : R;
    for (size_t r = r0; r < r1; r++) {
        const int t = tg[r];
        Vec<T, V> *d = reinterpret_cast<Vec<T, V> *>(dx + r * (size_t)C + c0);
        Vec<T, V> o;
        if (!target_ok(t, C, ignore)) {
            if (!accum) {
#pragma unroll
                for (int k = 0; k < V; k++) o.v[k] = from_f32<T>(0.0f);
                *d = o;
            }
            continue;
        }
        const Vec<T, V> a = *reinterpret_cast<const Vec<T, V> *>(x + r * (size_t)C + c0);
        Vec<T, V> old{};
        if (accum) old = *d;
        const float l = lse[r];
#pragma unroll
        for (int k = 0; k < V; k++)
            o.v[k] = ce_grad<T>(a.v[k], l, g, c0 + k == t ? qon : qoff, accum, old.v[k]);
        *d = o;
    }
}

/* ---- launch helpers ---- */

struct RowLaunch {
    bool warp;
    unsigned blocks;
    int threads;
};

RowLaunch row_launch(size_t R, size_t C)
{
    RowLaunch L;
    if (C <= 1024) {
        L.warp = true;
        L.threads = 256;
        L.blocks = (unsigned)((R + 7) / 8);
    } else {
        L.warp = false;
        L.threads = C <= 4096 ? 256 : C <= 16384 ? 512 : 1024;
        L.blocks = (unsigned)R;
    }
    return L;
}

void check_sizes(const char *fn, size_t R, size_t C)
{
    /* grid.x counts rows; column indices (plus the 4-wide unroll) stay in int */
    if (R > (size_t)INT_MAX || C > ((size_t)1 << 30))
        ct_fatal_hint("split the rows into several calls",
                      "%s: R = %zu, C = %zu: R must be below 2^31 and C at most 2^30", fn,
                      R, C);
}

template <typename T>
void softmax_fwd_launch(void *y, const void *x, size_t R, size_t C, cudaStream_t s)
{
    const RowLaunch L = row_launch(R, C);
    if (L.warp)
        softmax_fwd_kernel<T, true><<<L.blocks, L.threads, 0, s>>>(
            (T *)y, (const T *)x, R, (int)C);
    else
        softmax_fwd_kernel<T, false><<<L.blocks, L.threads, 0, s>>>(
            (T *)y, (const T *)x, R, (int)C);
    CUDA_CHECK_LAUNCH();
}

template <typename T>
void softmax_bwd_launch(void *dx, const void *dy, const void *y, size_t R, size_t C,
                        int accum, cudaStream_t s)
{
    const RowLaunch L = row_launch(R, C);
    if (L.warp)
        softmax_bwd_kernel<T, true><<<L.blocks, L.threads, 0, s>>>(
            (T *)dx, (const T *)dy, (const T *)y, R, (int)C, accum);
    else
        softmax_bwd_kernel<T, false><<<L.blocks, L.threads, 0, s>>>(
            (T *)dx, (const T *)dy, (const T *)y, R, (int)C, accum);
    CUDA_CHECK_LAUNCH();
}

template <typename T>
void ce_fwd_launch(float *loss, float *lse, float *nvalid, int32_t *nbad, const void *x,
                   const int32_t *t, size_t R, size_t C, int ignore, float eps,
                   cudaStream_t s)
{
    if (R > 0) {
        const RowLaunch L = row_launch(R, C);
        if (L.warp)
            ce_lse_kernel<T, true><<<L.blocks, L.threads, 0, s>>>(
                lse, (const T *)x, t, R, (int)C, ignore);
        else
            ce_lse_kernel<T, false><<<L.blocks, L.threads, 0, s>>>(
                lse, (const T *)x, t, R, (int)C, ignore);
        CUDA_CHECK_LAUNCH();
    }
    /* runs even for R == 0: the outputs are then loss 0, nvalid 0, nbad 0 */
    ce_reduce_kernel<T><<<1, CE_REDUCE_THREADS, 0, s>>>(loss, nvalid, nbad, (const T *)x,
                                                         t, lse, R, (int)C, ignore, eps);
    CUDA_CHECK_LAUNCH();
}

template <typename T>
void ce_bwd_launch(void *dx, const float *dloss, const void *x, const float *lse,
                   const float *nvalid, const int32_t *t, size_t R, size_t C, int ignore,
                   float eps, int accum, cudaStream_t s)
{
    constexpr size_t V = 16 / sizeof(T);
    if (C % V == 0 && is_aligned(dx, 16) && is_aligned(x, 16)) {
        /* about CE_BWD_BLOCKS blocks, each over a run of rows */
        const int threads = threads_for(C / V, 256);
        const size_t col_blocks = (C / V + threads - 1) / threads;
        size_t rows_per_block = (R * col_blocks + CE_BWD_BLOCKS - 1) / CE_BWD_BLOCKS;
        if (rows_per_block < 1) rows_per_block = 1;
        if ((R + rows_per_block - 1) / rows_per_block > 65535)
            rows_per_block = (R + 65534) / 65535;
        const size_t row_blocks = (R + rows_per_block - 1) / rows_per_block;
        const dim3 grid((unsigned)col_blocks, (unsigned)row_blocks);
        ce_bwd_vec_kernel<T><<<grid, threads, 0, s>>>((T *)dx, dloss, (const T *)x, lse, nvalid,
                                                      t, R, (int)C, ignore, eps, accum,
                                                      rows_per_block);
        CUDA_CHECK_LAUNCH();
        return;
    }
    const int threads = threads_for(C, 256);
    dim3 grid((unsigned)((C + threads - 1) / threads), (unsigned)(R < 65535 ? R : 65535));
    ce_bwd_kernel<T><<<grid, threads, 0, s>>>((T *)dx, dloss, (const T *)x, lse, nvalid, t,
                                              R, (int)C, ignore, eps, accum);
    CUDA_CHECK_LAUNCH();
}

} // namespace

extern "C" void softmax_forward_cuda(void *y, const void *x, DType dt, size_t R, size_t C,
                                     cudaStream_t s)
{
    check_sizes("softmax_forward_cuda", R, C);
    if (R == 0 || C == 0) return;
    dispatch_float(dt, "softmax_forward_cuda", [&](auto tag) {
        softmax_fwd_launch<decltype(tag)>(y, x, R, C, s);
    });
}

extern "C" void softmax_backward_cuda(void *dx, const void *dy, const void *y, DType dt,
                                      size_t R, size_t C, int accum, cudaStream_t s)
{
    check_sizes("softmax_backward_cuda", R, C);
    if (R == 0 || C == 0) return;
    dispatch_float(dt, "softmax_backward_cuda", [&](auto tag) {
        softmax_bwd_launch<decltype(tag)>(dx, dy, y, R, C, accum, s);
    });
}

extern "C" void cross_entropy_forward_cuda(float *loss, float *lse, float *nvalid,
                                           int32_t *nbad, const void *x, DType dt,
                                           const int32_t *t, size_t R, size_t C,
                                           int ignore_index, float smoothing,
                                           cudaStream_t s)
{
    check_sizes("cross_entropy_forward_cuda", R, C);
    dispatch_float(dt, "cross_entropy_forward_cuda", [&](auto tag) {
        ce_fwd_launch<decltype(tag)>(loss, lse, nvalid, nbad, x, t, R, C, ignore_index,
                                     smoothing, s);
    });
}

extern "C" void cross_entropy_backward_cuda(void *dx, const float *dloss, const void *x,
                                            const float *lse, const float *nvalid, DType dt,
                                            const int32_t *t, size_t R, size_t C,
                                            int ignore_index, float smoothing, int accum,
                                            cudaStream_t s)
{
    check_sizes("cross_entropy_backward_cuda", R, C);
    if (R == 0 || C == 0) return;
    dispatch_float(dt, "cross_entropy_backward_cuda", [&](auto tag) {
        ce_bwd_launch<decltype(tag)>(dx, dloss, x, lse, nvalid, t, R, C, ignore_index,
                                     smoothing, accum, s);
    });
}
