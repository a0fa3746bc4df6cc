/* batchnorm.cu — CUDA batch normalization with the fused residual add and
 * ReLU (the contract and the math are in batchnorm.h, the reference in
 * batchnorm.c).
 *
 * Shape letters: x [M, C], M = N*H*W rows, C channels (contiguous).
 *
 * Activations have storage type T (f32, f16, bf16); all math is f32 and
 * stores round to nearest even. Per-channel vectors are f32.
 *
 * Reductions over rows (statistics, and the two gradient sums), deterministic
 * with no atomics:
 *   pass 1: grid (ceil(C / cols), G). A block of BN_THREADS threads owns
 *           `cols` = min(C, 32) channels and `lanes` = 256 / cols row lanes;
 *           thread (lane, col) walks rows r0 + lane, r0 + lane + lanes, ...
 *           of its chunk, so consecutive threads read consecutive addresses
 *           (for C < 32 a block reads whole rows back to back). The lanes are
 *           combined by a fixed tree in shared memory and the block writes
 *           the chunk's partial for each of its channels into scratch [G, C].
 *   pass 2: eight threads per channel fold every eighth partial in order,
 *           then a fixed three-level tree combines their eight results.
 * Statistics: each thread folds its values four at a time into a running
 * (count, mean, M2) by Chan's merge; partials carry (mean, M2) and their
 * counts follow from the chunking. Gradient sums are plain f32 sums.
 * The backward's pass 1 gives each thread V = 16 / sizeof(T) channels
 * (cols / V threads a row, BN_THREADS V / cols row lanes) when C is a
 * multiple of V, one channel otherwise: the layout, and so the order of the
 * sums, follows from C alone; the loads are 16-byte vectors where the
 * pointers are aligned, V single loads where not.
 * G comes from (M, C) alone (batchnorm_chunks), so every addition order is
 * fixed by the shape: two runs give the same bits.
 *
 * Per-element passes (apply, and dx / dz) move 16 bytes per access when C
 * is a multiple of the vector width V and every pointer is 16-byte
 * aligned: a thread keeps one group of V channels, its parameters loaded
 * once as float4s, and walks rows (when C / V <= 256: every ResNet shape in
 * f16 / bf16, all but C = 2048 in f32);
 * else a grid-stride loop over vectors reloads each vector's parameters,
 * its channel stepped rather than recomputed with a modulo.
 */
#include <stdint.h>

#include "engine/error.h"
#include "batchnorm.h"
#include "cuda_util.cuh"

namespace {

const int EW_THREADS = 256;
const unsigned EW_MAX_BLOCKS = 65535;

/* (n, mean, m2) += (nb, mean_b, m2_b): Chan's parallel merge of two sets
 * (m2 = sum of squared deviations from the set's mean). */
__device__ __forceinline__ void welford_merge(float &n, float &mean, float &m2, float nb,
                                              float mean_b, float m2_b)
{
    if (nb == 0.0f) return;
    float nn = n + nb;
    float wb = nb / nn;
    float delta = mean_b - mean;
    mean += delta * wb;
    m2 += m2_b + delta * delta * n * wb;
    n = nn;
}

/* Smallest power of two >= v (v >= 1). */
__device__ __forceinline__ unsigned pow2_ceil(unsigned v)
{
    unsigned p = 1;
    while (p < v) p <<= 1;
    return p;
}

/* ---- statistics ---- */

/* Thread t = lane * cols + col puts its (n, mean, m2) in shared memory; the
 * lanes of each column are merged by a fixed tree (lane with lane + h, h
 * halving), leaving the column's total at lane 0. Every thread calls it. */
__device__ __forceinline__ void welford_tree(float *sn, float *smean, float *sm2, float n,
                                             float mean, float m2, unsigned t, unsigned lane,
                                             unsigned lanes, unsigned cols)
{
    sn[t] = n;
    smean[t] = mean;
    sm2[t] = m2;
    __syncthreads();
    for (unsigned h = pow2_ceil(lanes) >> 1; h > 0; h >>= 1) {
        if (lane < h && lane + h < lanes) {
            unsigned o = t + h * cols;
            float a = sn[t], am = smean[t], a2 = sm2[t];
            welford_merge(a, am, a2, sn[o], smean[o], sm2[o]);
            sn[t] = a;
            smean[t] = am;
            sm2[t] = a2;
        }
        __syncthreads();
    }
}

/* Pass 1: (mean, M2) of chunk blockIdx.y for channels blockIdx.x * cols + col. */
template <typename T>
__global__ void bn_stats_partial_kernel(float *pmean, float *pm2, const T *x, size_t M, size_t C,
                                        unsigned cols, unsigned lanes, size_t rows_per_chunk)
{
    __shared__ float sn[BN_THREADS], smean[BN_THREADS], sm2[BN_THREADS];
    unsigned t = threadIdx.x, col = t % cols, lane = t / cols;
    size_t c = (size_t)blockIdx.x * cols + col;
    size_t r0 = (size_t)blockIdx.y * rows_per_chunk;
    size_t r1 = r0 + rows_per_chunk < M ? r0 + rows_per_chunk : M;
    float n = 0.0f, mean = 0.0f, m2 = 0.0f;
    if (lane < lanes && c < C) {
        size_t L = lanes, r = r0 + lane;
        /* four loads in flight, folded in as one group of four */
        for (; r + 3 * L < r1; r += 4 * L) {
            float v0 = to_f32(x[r * C + c]);
            float v1 = to_f32(x[(r + L) * C + c]);
            float v2 = to_f32(x[(r + 2 * L) * C + c]);
            float v3 = to_f32(x[(r + 3 * L) * C + c]);
            float gm = ((v0 + v1) + (v2 + v3)) * 0.25f;
            float d0 = v0 - gm, d1 = v1 - gm, d2 = v2 - gm, d3 = v3 - gm;
            float gm2 = (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3);
            welford_merge(n, mean, m2, 4.0f, gm, gm2);
        }
        for (; r < r1; r += L) welford_merge(n, mean, m2, 1.0f, to_f32(x[r * C + c]), 0.0f);
    }
    welford_tree(sn, smean, sm2, n, mean, m2, t, lane, lanes, cols);
    if (lane == 0 && c < C) {
        pmean[(size_t)blockIdx.y * C + c] = smean[t];
        pm2[(size_t)blockIdx.y * C + c] = sm2[t];
    }
}

/* Channel c's statistics from its batch mean mu and sum of squared
 * deviations m2 over M rows: invstd, and the running update (unbiased
 * variance). The roundings are pinned (no contraction left to the
 * compiler), so the two kernels that call this give the same bits. */
__device__ __forceinline__ void bn_finish_channel(size_t c, float mu, float m2, size_t M,
                                                  float *mean, float *invstd, float *rmean,
                                                  float *rvar, float momentum, float eps)
{
    float var = __fdiv_rn(m2, (float)M);
    mean[c] = mu;
    invstd[c] = __frcp_rn(__fsqrt_rn(__fadd_rn(var, eps)));
    if (rmean && rvar) {
        float unbiased = __fdiv_rn(m2, (float)(M - 1));
        float keep = __fsub_rn(1.0f, momentum);
        rmean[c] = __fadd_rn(__fmul_rn(keep, rmean[c]), __fmul_rn(momentum, mu));
        rvar[c] = __fadd_rn(__fmul_rn(keep, rvar[c]), __fmul_rn(momentum, unbiased));
    }
}

/* Pass 2, both reductions: a block of FIN_COLS x FIN_LANES threads takes
 * FIN_COLS channels; lane l of channel c folds partials g = l, l + FIN_LANES,
 * ... in order, then the lanes are combined by a fixed tree (l with l + 4,
 * then + 2, then + 1). The order depends on G alone, so the result is as
 * deterministic as one thread walking g = 0..G-1, and the G loads of a
 * channel are spread over eight threads instead of one chain of dependent
 * L2 round trips (59 us a call at G = 512 on the H200, now ~2). */
const unsigned FIN_COLS = 32, FIN_LANES = 8;

/* Statistics: the chunks' (mean, m2) merged; then either the statistics
 * (mean, invstd, the running update and the batch counter:
 * bn_finish_channel) or, with m2_out, the moments alone (mean and the sum
 * of squared deviations). */
__global__ void bn_stats_finish_kernel(float *mean, float *invstd, float *m2_out, float *rmean,
                                       float *rvar, int64_t *nbt, const float *pmean,
                                       const float *pm2,
                                       size_t G, size_t rows_per_chunk, size_t M, size_t C,
                                       float momentum, float eps)
{
    __shared__ float sn[FIN_COLS * FIN_LANES], smean[FIN_COLS * FIN_LANES],
        sm2[FIN_COLS * FIN_LANES];
    unsigned t = threadIdx.x, col = t % FIN_COLS, lane = t / FIN_COLS;
    size_t c = (size_t)blockIdx.x * FIN_COLS + col;
    if (blockIdx.x == 0 && t == 0 && nbt) *nbt += 1;
    float n = 0.0f, mu = 0.0f, m2 = 0.0f;
    if (c < C) {
#pragma unroll 4
        for (size_t g = lane; g < G; g += FIN_LANES) {
            size_t left = M - g * rows_per_chunk;
            size_t rows = left < rows_per_chunk ? left : rows_per_chunk;
            welford_merge(n, mu, m2, (float)rows, pmean[g * C + c], pm2[g * C + c]);
        }
    }
    welford_tree(sn, smean, sm2, n, mu, m2, t, lane, FIN_LANES, FIN_COLS);
    if (lane != 0 || c >= C) return;
    mu = smean[t];
    m2 = sm2[t];
    if (m2_out) {
        mean[c] = mu;
        m2_out[c] = m2;
        return;
    }
    bn_finish_channel(c, mu, m2, M, mean, invstd, rmean, rvar, momentum, eps);
}

/* The same statistics from moments taken earlier (batchnorm_moments_cuda):
 * mean, invstd, the running update and the batch counter. */
__global__ void bn_from_moments_kernel(float *mean, float *invstd, float *rmean, float *rvar,
                                       int64_t *nbt, const float *mom_mean, const float *mom_m2,
                                       size_t M, size_t C, float momentum, float eps)
{
    size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c == 0 && nbt) *nbt += 1;
    if (c >= C) return;
    bn_finish_channel(c, mom_mean[c], mom_m2[c], M, mean, invstd, rmean, rvar, momentum, eps);
}

/* mg, mgx, dgamma, dbeta from the totals sg = sum g, sgx = sum g xhat */
__global__ void bn_backward_sums_kernel(float *mg, float *mgx, float *dgamma, float *dbeta,
                                        const float *sg, const float *sgx, size_t M, size_t C,
                                        int accum_p)
{
    size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float a = sg[c], b = sgx[c];
    mg[c] = a / (float)M;
    mgx[c] = b / (float)M;
    if (dbeta) dbeta[c] = accum_p ? dbeta[c] + a : a;
    if (dgamma) dgamma[c] = accum_p ? dgamma[c] + b : b;
}

/* s = gamma invstd, b = beta - mean s */
__global__ void bn_scale_bias_kernel(float *scale, float *bias, const float *mean,
                                     const float *invstd, const float *gamma, const float *beta,
                                     size_t C)
{
    size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float sc = gamma ? __fmul_rn(gamma[c], invstd[c]) : invstd[c];
    scale[c] = sc;
    bias[c] = __fsub_rn(beta ? beta[c] : 0.0f, __fmul_rn(mean[c], sc));
}

/* (mean, m2) of M rows from their sum and sum of squares, in double */
__global__ void bn_moments_from_sums_kernel(float *mean, float *m2, const float *sum,
                                            const float *sq, size_t M, size_t C)
{
    size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double s = sum[c], mu = s / (double)M, v = (double)sq[c] - s * mu;
    mean[c] = (float)mu;
    m2[c] = isnan(v) ? (float)v : v > 0.0 ? (float)v : 0.0f;   /* NaN stays NaN */
}

__global__ void bn_eval_stats_kernel(float *mean, float *invstd, const float *rmean,
                                     const float *rvar, float eps, size_t C)
{
    size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    mean[c] = rmean[c];
    invstd[c] = 1.0f / sqrtf(rvar[c] + eps);
}

/* ---- forward apply ---- */

/* The pre-activation (x - mean) s + beta with s = gamma invstd, each
 * rounding pinned (no contraction left to the compiler, and the CPU
 * reference's order): what the forward applies, and what the backward's
 * relu mode 2 recomputes, are the same bits. A missing gamma is 1 (1 *
 * invstd is invstd exactly), a missing beta 0. */
__device__ __forceinline__ float bn_pre_s(float x, float mean, float s, float beta)
{
    return __fadd_rn(__fmul_rn(__fsub_rn(x, mean), s), beta);
}

/* o[k] = p[c0 + k] for the V channels of a thread (or dflt when p is NULL):
 * two or one 16-byte loads for V = 8 or 4 (the host checks the alignment),
 * scalar loads for V = 1. */
template <int V, bool A = true>
__device__ __forceinline__ void load_ch(float (&o)[V], const float *p, size_t c0, float dflt)
{
    if (!p) {
#pragma unroll
        for (int k = 0; k < V; k++) o[k] = dflt;
    } else if constexpr (V % 4 == 0 && A) {
#pragma unroll
        for (int k = 0; k < V; k += 4) {
            float4 q = __ldg(reinterpret_cast<const float4 *>(p + c0 + k));
            o[k] = q.x;
            o[k + 1] = q.y;
            o[k + 2] = q.z;
            o[k + 3] = q.w;
        }
    } else {
#pragma unroll
        for (int k = 0; k < V; k++) o[k] = __ldg(p + c0 + k);
    }
}

/* s[k] = gamma invstd of the thread's V channels (bn_pre's scale), from
 * the invstd already loaded (is). */
template <int V, bool A = true>
__device__ __forceinline__ void load_scale(float (&sc)[V], const float *gamma,
                                           const float (&is)[V], size_t c0)
{
    load_ch<V, A>(sc, gamma, c0, 1.0f);
#pragma unroll
    for (int k = 0; k < V; k++) sc[k] = __fmul_rn(sc[k], is[k]);
}

/* The first channel of vector i and how far a grid stride moves it, in
 * 32-bit arithmetic where the tensor allows (a 64-bit modulo is ~100
 * instructions, as much as the rest of a vector's work). */
template <int V>
__device__ __forceinline__ void channel_of(size_t i, size_t stride, size_t nvec, size_t C,
                                           size_t &c0, size_t &cstep)
{
    if (nvec * V <= 0xffffffffu && stride * V <= 0xffffffffu) {
        c0 = (unsigned)(i * V) % (unsigned)C;
        cstep = (unsigned)(stride * V) % (unsigned)C;
    } else {
        c0 = (i * V) % C;
        cstep = (stride * V) % C;
    }
}

/* The ReLU's mask of one element under relu mode 2: recomputed from x
 * (no residual), rounded to the storage type as the forward's output was
 * (mode 1 reads the output itself: y > 0). */
template <typename T>
__device__ __forceinline__ bool bn_keep2_s(T x, float mean, float s, float beta)
{
    return to_f32(from_f32<T>(bn_pre_s(to_f32(x), mean, s, beta))) > 0.0f;
}

/* The per-element passes (the forward's apply, the backward's dx / dz) as
 * an Op walked over vectors of V channels in one of two ways:
 *   grid   (walk_grid) a grid-stride loop over all vectors, the channel of
 *          each stepped (a thread moves about one vector, so it loads its
 *          parameters for each);
 *   rows   (walk_rows, when C / V <= EW_THREADS) a thread keeps one channel
 *          group (its parameters in registers, loaded once) and walks rows:
 *          EW_THREADS / (C / V) rows a block at a time, the grid striding
 *          over rows.
 * An Op has load(c0) (the parameters of channels c0..c0+V-1) and apply(i)
 * (vector i). */
template <int V, typename Op>
__device__ __forceinline__ void walk_grid(Op &op, size_t nvec, size_t C)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nvec) return;
    size_t c0, cstep;
    channel_of<V>(i, stride, nvec, C, c0, cstep);
    for (; i < nvec; i += stride) {
        op.load(c0);
        op.apply(i);
        c0 += cstep;
        if (c0 >= C) c0 -= C;
    }
}

template <int V, typename Op>
__device__ __forceinline__ void walk_rows(Op &op, size_t M, unsigned CV)
{
    unsigned rpb = blockDim.x / CV, t = threadIdx.x, cg = t % CV, lane = t / CV;
    if (lane >= rpb) return;
    op.load((size_t)cg * V);
    size_t step = (size_t)gridDim.x * rpb;
#pragma unroll 2
    for (size_t r = (size_t)blockIdx.x * rpb + lane; r < M; r += step) op.apply(r * CV + cg);
}

/* ROWS: walk_rows over M rows of C / V vectors; else walk_grid over n
 * vectors. */
template <typename Op, int V, bool ROWS>
__global__ void __launch_bounds__(EW_THREADS, 2) bn_elem_kernel(Op op, size_t n, size_t C)
{
    if constexpr (ROWS) walk_rows<V>(op, n, (unsigned)(C / V));
    else walk_grid<V>(op, n, C);
}

/* y = act((x - mean) gamma invstd + beta + z), V elements (V channels) a
 * vector. */
template <typename T, int V> struct BnFwdOp {
    T *y;
    const T *x, *z;
    const float *mean, *invstd, *gamma, *beta;
    int relu;
    float mu[V], sc[V], be[V];
    __device__ __forceinline__ void load(size_t c0)
    {
        float is[V];
        load_ch<V>(mu, mean, c0, 0.0f);
        load_ch<V>(is, invstd, c0, 0.0f);
        load_scale<V>(sc, gamma, is, c0);
        load_ch<V>(be, beta, c0, 0.0f);
    }
    __device__ __forceinline__ void apply(size_t i)
    {
        Vec<T, V> xv = reinterpret_cast<const Vec<T, V> *>(x)[i], zv, yv;
        if (z) zv = reinterpret_cast<const Vec<T, V> *>(z)[i];
#pragma unroll
        for (int k = 0; k < V; k++) {
            float v = bn_pre_s(to_f32(xv.v[k]), mu[k], sc[k], be[k]);
            if (z) v = __fadd_rn(v, to_f32(zv.v[k]));
            if (relu) v = v > 0.0f ? v : 0.0f;
            yv.v[k] = from_f32<T>(v);
        }
        reinterpret_cast<Vec<T, V> *>(y)[i] = yv;
    }
};

/* The BN + add + ReLU forward with cuDNN's mask beside y (batchnorm.h,
 * batchnorm_forward_cudnn_mask_cuda). A warp takes one item (channel block
 * cb of 64, pixel pair k) at a time, as cuDNN's kernel lays it out: lane t
 * the pixel 2 k + t / 16 and channels cb 64 + (t % 16) 4 .. + 3; y from
 * BnFwdOp's arithmetic (the same bits), then one ballot a channel of the
 * four, "zeroed" = !(y > 0) as our own backward reads y, and lanes 0..3
 * store the item's four words. Pixels past M store nothing and set no bit;
 * items run to P32 / 2, so the padding's bits are written 0. */
template <typename T>
__global__ void bn_fwd_cudnn_mask_kernel(T *y, uint32_t *mask, const T *x, const T *z,
                                        const float *mean, const float *invstd,
                                        const float *gamma, const float *beta, size_t M,
                                        size_t C, size_t p32)
{
    const unsigned lane = threadIdx.x & 31;
    const size_t CB = C / 64, items = CB * (p32 / 2);
    const size_t warp = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const size_t nwarps = (size_t)gridDim.x * blockDim.x / 32;
    for (size_t it = warp; it < items; it += nwarps) {
        const size_t cb = it % CB, k = it / CB;
        const size_t p = 2 * k + lane / 16, c0 = cb * 64 + (lane % 16) * 4;
        float mu[4], sc[4], be[4], is[4];
        load_ch<4>(mu, mean, c0, 0.0f);
        load_ch<4>(is, invstd, c0, 0.0f);
        load_scale<4>(sc, gamma, is, c0);
        load_ch<4>(be, beta, c0, 0.0f);
        bool zeroed[4] = {false, false, false, false};
        if (p < M) {
            const size_t i = (p * C + c0) / 4;
            Vec<T, 4> xv = reinterpret_cast<const Vec<T, 4> *>(x)[i];
            Vec<T, 4> zv = reinterpret_cast<const Vec<T, 4> *>(z)[i], yv;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                float v = bn_pre_s(to_f32(xv.v[j]), mu[j], sc[j], be[j]);
                v = __fadd_rn(v, to_f32(zv.v[j]));
                v = v > 0.0f ? v : 0.0f;
                yv.v[j] = from_f32<T>(v);
                zeroed[j] = !(to_f32(yv.v[j]) > 0.0f);
            }
            reinterpret_cast<Vec<T, 4> *>(y)[i] = yv;
        }
        uint32_t word = 0;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const uint32_t b = __ballot_sync(0xffffffffu, zeroed[j]);
            if (lane == (unsigned)j) word = b;
        }
        if (lane < 4) mask[cb * p32 * 2 + k * 4 + lane] = word;
    }
}

/* *count += the bits of a and b that differ among the real pixels' bits of
 * two masks in cuDNN's layout (n words = C / 64 blocks of p32 2): word i
 * holds pixels 2 k and 2 k + 1 (k = i % (p32 2) / 4) in its low and high
 * halves, and a padding pixel's half (p >= M) is not compared. */
__global__ void bn_mask_diff_kernel(unsigned long long *count, const uint32_t *a,
                                    const uint32_t *b, size_t n, size_t M, size_t p32)
{
    unsigned long long mine = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t p = i % (p32 * 2) / 4 * 2;
        const uint32_t keep = p + 1 < M ? 0xffffffffu : p < M ? 0x0000ffffu : 0u;
        mine += __popc((a[i] ^ b[i]) & keep);
    }
    if (mine) atomicAdd(count, mine);
}

/* ---- backward ---- */

/* Pass 1: sum g and sum g xhat over chunk blockIdx.y, g = dy masked by the
 * ReLU. The block's `cols` channels are covered by cols / V threads of V
 * channels each (16-byte loads when V > 1), so a block has BN_THREADS V /
 * cols row lanes; the lanes are combined by a fixed tree in shared memory. */
/* Vector j of V elements at p: one access when A (16-byte aligned), else V. */
template <typename T, int V, bool A>
__device__ __forceinline__ Vec<T, V> load_vec(const T *p, size_t j)
{
    if constexpr (A) {
        return reinterpret_cast<const Vec<T, V> *>(p)[j];
    } else {
        Vec<T, V> v;
#pragma unroll
        for (int k = 0; k < V; k++) v.v[k] = p[j * V + k];
        return v;
    }
}

template <typename T, int V, bool A>
__global__ void bn_backward_partial_kernel(float *psg, float *psgx, const T *dy, const T *x,
                                           const T *y, const float *mean, const float *invstd,
                                           const float *gamma, const float *beta, int relu,
                                           size_t M, size_t C, unsigned cols,
                                           size_t rows_per_chunk)
{
    __shared__ float s1[BN_THREADS * V], s2[BN_THREADS * V];
    unsigned tpr = cols / V, lanes = BN_THREADS / tpr;
    unsigned t = threadIdx.x, cv = t % tpr, lane = t / tpr;
    size_t c0 = (size_t)blockIdx.x * cols + (size_t)cv * V;
    size_t r0 = (size_t)blockIdx.y * rows_per_chunk;
    size_t r1 = r0 + rows_per_chunk < M ? r0 + rows_per_chunk : M;
    float a[V], b[V];
#pragma unroll
    for (int k = 0; k < V; k++) a[k] = b[k] = 0.0f;
    if (lane < lanes && c0 < C) {
        float mu[V], is[V], sc[V], be[V];
        load_ch<V, A>(mu, mean, c0, 0.0f);
        load_ch<V, A>(is, invstd, c0, 0.0f);
        if (relu == 2) {   /* the mask's pre-activation */
            load_scale<V, A>(sc, gamma, is, c0);
            load_ch<V, A>(be, beta, c0, 0.0f);
        }
        size_t CV = C / V, step = (size_t)lanes * CV;
        size_t j = (r0 + lane) * CV + c0 / V, j1 = r1 * CV;
#pragma unroll 4
        for (; j < j1; j += step) {
            Vec<T, V> dv = load_vec<T, V, A>(dy, j), xv = load_vec<T, V, A>(x, j), yv;
            if (relu == 1) yv = load_vec<T, V, A>(y, j);
#pragma unroll
            for (int k = 0; k < V; k++) {
                float g = to_f32(dv.v[k]);
                if ((relu == 1 && !(to_f32(yv.v[k]) > 0.0f)) ||
                    (relu == 2 && !bn_keep2_s<T>(xv.v[k], mu[k], sc[k], be[k])))
                    g = 0.0f;
                float xhat = (to_f32(xv.v[k]) - mu[k]) * is[k];
                a[k] += g;
                b[k] += g * xhat;
            }
        }
    }
#pragma unroll
    for (int k = 0; k < V; k++) {
        s1[t * V + k] = a[k];
        s2[t * V + k] = b[k];
    }
    __syncthreads();
    for (unsigned h = pow2_ceil(lanes) >> 1; h > 0; h >>= 1) {
        if (lane < h && lane + h < lanes) {
            unsigned o = (t + h * tpr) * V;
#pragma unroll
            for (int k = 0; k < V; k++) {
                s1[t * V + k] += s1[o + k];
                s2[t * V + k] += s2[o + k];
            }
        }
        __syncthreads();
    }
    if (lane == 0 && c0 < C) {
#pragma unroll
        for (int k = 0; k < V; k++) {
            psg[(size_t)blockIdx.y * C + c0 + k] = s1[t * V + k];
            psgx[(size_t)blockIdx.y * C + c0 + k] = s2[t * V + k];
        }
    }
}

/* Pass 2 of the backward (the FIN_COLS x FIN_LANES layout of the
 * statistics' finish): sum g and sum g xhat over the G partials ->
 * dbeta, dgamma (+)=, and the means mg = sum g / M, mgx = sum g xhat / M
 * that dx needs. */
__global__ void bn_backward_finish_kernel(float *mg, float *mgx, float *dgamma, float *dbeta,
                                          const float *psg, const float *psgx, size_t G,
                                          size_t M, size_t C, int accum_p)
{
    __shared__ float s1[FIN_COLS * FIN_LANES], s2[FIN_COLS * FIN_LANES];
    unsigned t = threadIdx.x, col = t % FIN_COLS, lane = t / FIN_COLS;
    size_t c = (size_t)blockIdx.x * FIN_COLS + col;
    float a = 0.0f, b = 0.0f;
    if (c < C) {
#pragma unroll 4
        for (size_t g = lane; g < G; g += FIN_LANES) {
            a += psg[g * C + c];
            b += psgx[g * C + c];
        }
    }
    s1[t] = a;
    s2[t] = b;
    __syncthreads();
    for (unsigned h = FIN_LANES / 2; h > 0; h >>= 1) {
        if (lane < h) {
            s1[t] += s1[t + h * FIN_COLS];
            s2[t] += s2[t + h * FIN_COLS];
        }
        __syncthreads();
    }
    if (lane != 0 || c >= C) return;
    a = s1[t];
    b = s2[t];
    mg[c] = a / (float)M;
    mgx[c] = b / (float)M;
    if (dbeta) dbeta[c] = accum_p ? dbeta[c] + a : a;
    if (dgamma) dgamma[c] = accum_p ? dgamma[c] + b : b;
}

/* Pass 3, per element:
 *   forward: y = act(gamma xhat + beta + z)   so   g = y > 0 ? dy : 0 (ReLU),
 *   dz (+)= g;  dx (+)= gamma invstd (g - mg - xhat mgx)   (training)
 *               dx (+)= gamma invstd g                     (eval) */
template <typename T, int V> struct BnDxOp {
    T *dx, *dz;
    const T *dy, *x, *y;
    const float *mean, *invstd, *gamma, *beta, *mg, *mgx;
    int training, relu, accum_x, accum_z;
    /* sc = gamma invstd serves both the mask's pre-activation (pinned) and
     * dx's factor (the same product: a lone multiply has nothing to
     * contract with) */
    float mu[V], is[V], sc[V], be[V], m1[V], m2[V];
    __device__ __forceinline__ void load(size_t c0)
    {
        load_ch<V>(mu, mean, c0, 0.0f);
        load_ch<V>(is, invstd, c0, 0.0f);
        if (relu == 2 || dx) load_scale<V>(sc, gamma, is, c0);
        if (relu == 2) load_ch<V>(be, beta, c0, 0.0f);
        if (dx && training) {
            load_ch<V>(m1, mg, c0, 0.0f);
            load_ch<V>(m2, mgx, c0, 0.0f);
        }
    }
    __device__ __forceinline__ void apply(size_t i)
    {
        Vec<T, V> dyv = reinterpret_cast<const Vec<T, V> *>(dy)[i], yv, xv;
        if (relu == 1) yv = reinterpret_cast<const Vec<T, V> *>(y)[i];
        if (relu == 2 || (dx && training)) xv = reinterpret_cast<const Vec<T, V> *>(x)[i];
        float g[V];
#pragma unroll
        for (int k = 0; k < V; k++) {
            g[k] = to_f32(dyv.v[k]);
            if (relu == 1 && !(to_f32(yv.v[k]) > 0.0f)) g[k] = 0.0f;
            if (relu == 2 && !bn_keep2_s<T>(xv.v[k], mu[k], sc[k], be[k])) g[k] = 0.0f;
        }
        if (dx) {
            Vec<T, V> o;
            if (accum_x) o = reinterpret_cast<const Vec<T, V> *>(dx)[i];
#pragma unroll
            for (int k = 0; k < V; k++) {
                float kk = sc[k];
                float v;
                if (training) {
                    float xhat = (to_f32(xv.v[k]) - mu[k]) * is[k];
                    v = kk * (g[k] - m1[k] - xhat * m2[k]);
                } else {
                    v = kk * g[k];
                }
                if (accum_x) v += to_f32(o.v[k]);
                o.v[k] = from_f32<T>(v);
            }
            reinterpret_cast<Vec<T, V> *>(dx)[i] = o;
        }
        if (dz) {
            Vec<T, V> o;
            if (accum_z) o = reinterpret_cast<const Vec<T, V> *>(dz)[i];
#pragma unroll
            for (int k = 0; k < V; k++) {
                float v = g[k];
                if (accum_z) v += to_f32(o.v[k]);
                o.v[k] = from_f32<T>(v);
            }
            reinterpret_cast<Vec<T, V> *>(dz)[i] = o;
        }
    }
};

/* Launch op over the n = M C elements: rows when the vectors allow and
 * C / V <= EW_THREADS, else the grid-stride walk (V = 1 when not vec). */
template <int V, typename OpV, typename Op1>
void launch_elem(const OpV &opv, const Op1 &op1, bool vec, size_t M, size_t C, cudaStream_t s)
{
    const size_t n = M * C;
    if (vec && C / V <= (size_t)EW_THREADS) {
        size_t rpb = EW_THREADS / (C / V);
        /* about four rows a thread, so the parameters' loads are spread */
        const unsigned blocks = grid_for((M + 3) / 4, (unsigned)rpb, EW_MAX_BLOCKS);
        bn_elem_kernel<OpV, V, true><<<blocks, EW_THREADS, 0, s>>>(opv, M, C);
    } else if (vec) {
        const unsigned blocks = grid_for(n / V, EW_THREADS, EW_MAX_BLOCKS);
        bn_elem_kernel<OpV, V, false><<<blocks, EW_THREADS, 0, s>>>(opv, n / V, C);
    } else {
        const unsigned blocks = grid_for(n, EW_THREADS, EW_MAX_BLOCKS);
        bn_elem_kernel<Op1, 1, false><<<blocks, EW_THREADS, 0, s>>>(op1, n, C);
    }
    CUDA_CHECK_LAUNCH();
}

/* Every pointer given is 16-byte aligned (NULLs are): the activations for
 * the kernels' Vec accesses, the f32 [C] parameters for load_ch's float4s. */
bool vec_ok(const void *a, const void *b, const void *c, const void *d, const float *p0,
            const float *p1, const float *p2, const float *p3)
{
    const void *all[8] = {a, b, c, d, p0, p1, p2, p3};
    for (int k = 0; k < 8; k++)
        if (all[k] && !is_aligned(all[k], 16)) return false;
    return true;
}

/* Blocks of the pass-2 kernels for C channels. */
unsigned fin_blocks(size_t C) { return (unsigned)((C + FIN_COLS - 1) / FIN_COLS); }

/* Grid of the reduction passes; checks the scratch and returns G. */
size_t reduction_grid(const char *what, size_t M, size_t C, size_t scratch_bytes, dim3 *grid,
                      size_t *rows_per_chunk)
{
    size_t need = batchnorm_scratch_bytes(M, C);
    if (scratch_bytes < need)
        ct_fatal("%s: scratch of %zu bytes is smaller than batchnorm_scratch_bytes(%zu, %zu) = %zu",
                 what, scratch_bytes, M, C, need);
    size_t G = batchnorm_chunks(M, C, rows_per_chunk);
    size_t cols = batchnorm_cols(C), col_blocks = (C + cols - 1) / cols;
    if (col_blocks > 0x7fffffffu || G > 65535)
        ct_fatal("%s: [%zu, %zu] is more than one grid can cover", what, M, C);
    *grid = dim3((unsigned)col_blocks, (unsigned)G);
    return G;
}

/* Pass 1 of the statistics of x into scratch (partial means, then partial
 * M2s, [G, C] each); returns G, the rows of a chunk in *rpc. */
size_t stats_partials(const char *what, const void *x, DType dt, size_t M, size_t C,
                      void *scratch, size_t scratch_bytes, size_t *rpc, cudaStream_t s)
{
    dim3 grid;
    size_t G = reduction_grid(what, M, C, scratch_bytes, &grid, rpc);
    float *pmean = (float *)scratch, *pm2 = pmean + G * C;
    unsigned cols = (unsigned)batchnorm_cols(C), lanes = (unsigned)batchnorm_lanes(C);
    size_t r = *rpc;
    dispatch_float(dt, what, [&](auto tag) {
        using T = decltype(tag);
        bn_stats_partial_kernel<T><<<grid, BN_THREADS, 0, s>>>(pmean, pm2, (const T *)x, M, C,
                                                               cols, lanes, r);
        CUDA_CHECK_LAUNCH();
    });
    return G;
}

/* num_batches_tracked += 1: the batch counter for the cuDNN path, which
 * updates the running statistics but not the counter. */
__global__ void bn_count_kernel(int64_t *nbt) { *nbt += 1; }

} /* namespace */

extern "C" void batchnorm_stats_cuda(float *mean, float *invstd, float *running_mean,
                                     float *running_var, int64_t *num_batches_tracked,
                                     const void *x, DType dt, float momentum, float eps,
                                     size_t M, size_t C, void *scratch, size_t scratch_bytes,
                                     cudaStream_t s)
{
    if (C == 0) return;
    CT_ASSERT(M >= 1, "batchnorm_stats_cuda: no rows (M = 0)");
    if (running_mean && running_var)
        CT_ASSERT(M >= 2, "batchnorm_stats_cuda: the unbiased variance needs M >= 2 rows");
    size_t rpc;
    size_t G = stats_partials("batchnorm_stats_cuda", x, dt, M, C, scratch, scratch_bytes, &rpc,
                              s);
    float *pmean = (float *)scratch, *pm2 = pmean + G * C;
    bn_stats_finish_kernel<<<fin_blocks(C), FIN_COLS * FIN_LANES, 0, s>>>(
        mean, invstd, NULL, running_mean, running_var, num_batches_tracked, pmean, pm2, G, rpc,
        M, C, momentum, eps);
    CUDA_CHECK_LAUNCH();
}

extern "C" void batchnorm_moments_cuda(float *mean, float *m2, const void *x, DType dt,
                                       size_t M, size_t C, void *scratch, size_t scratch_bytes,
                                       cudaStream_t s)
{
    if (C == 0) return;
    CT_ASSERT(M >= 1, "batchnorm_moments_cuda: no rows (M = 0)");
    size_t rpc;
    size_t G = stats_partials("batchnorm_moments_cuda", x, dt, M, C, scratch, scratch_bytes,
                              &rpc, s);
    float *pmean = (float *)scratch, *pm2 = pmean + G * C;
    bn_stats_finish_kernel<<<fin_blocks(C), FIN_COLS * FIN_LANES, 0, s>>>(
        mean, NULL, m2, NULL, NULL, NULL, pmean, pm2, G, rpc, M, C, 0.0f, 0.0f);
    CUDA_CHECK_LAUNCH();
}

extern "C" void batchnorm_backward_sums_cuda(float *mg, float *mgx, float *dgamma,
                                             float *dbeta, const float *sg, const float *sgx,
                                             size_t M, size_t C, int accum_p, cudaStream_t s)
{
    if (C == 0) return;
    CT_ASSERT(M >= 1, "batchnorm_backward_sums_cuda: no rows (M = 0)");
    bn_backward_sums_kernel<<<(unsigned)((C + 255) / 256), 256, 0, s>>>(mg, mgx, dgamma, dbeta,
                                                                         sg, sgx, M, C, accum_p);
    CUDA_CHECK_LAUNCH();
}

extern "C" void batchnorm_scale_bias_cuda(float *scale, float *bias, const float *mean,
                                          const float *invstd, const float *gamma,
                                          const float *beta, size_t C, cudaStream_t s)
{
    if (C == 0) return;
    bn_scale_bias_kernel<<<(unsigned)((C + 255) / 256), 256, 0, s>>>(scale, bias, mean, invstd,
                                                                     gamma, beta, C);
    CUDA_CHECK_LAUNCH();
}

extern "C" void batchnorm_moments_from_sums_cuda(float *mean, float *m2, const float *sum,
                                                 const float *sq, size_t M, size_t C,
                                                 cudaStream_t s)
{
    if (C == 0) return;
    CT_ASSERT(M >= 1, "batchnorm_moments_from_sums_cuda: no rows (M = 0)");
    bn_moments_from_sums_kernel<<<(unsigned)((C + 255) / 256), 256, 0, s>>>(mean, m2, sum, sq, M,
                                                                          C);
    CUDA_CHECK_LAUNCH();
}

extern "C" void batchnorm_stats_from_moments_cuda(float *mean, float *invstd,
                                                  float *running_mean, float *running_var,
                                                  int64_t *num_batches_tracked,
                                                  const float *mom_mean, const float *mom_m2,
                                                  float momentum, float eps, size_t M, size_t C,
                                                  cudaStream_t s)
{
    if (C == 0) return;
    CT_ASSERT(M >= 1, "batchnorm_stats_from_moments_cuda: no rows (M = 0)");
    if (running_mean && running_var)
        CT_ASSERT(M >= 2, "batchnorm_stats_from_moments_cuda: the unbiased variance needs M >= 2 "
                          "rows");
    bn_from_moments_kernel<<<(unsigned)((C + 255) / 256), 256, 0, s>>>(
        mean, invstd, running_mean, running_var, num_batches_tracked, mom_mean, mom_m2, M, C,
        momentum, eps);
    CUDA_CHECK_LAUNCH();
}

extern "C" void batchnorm_count_cuda(int64_t *num_batches_tracked, cudaStream_t s)
{
    if (!num_batches_tracked) return;
    bn_count_kernel<<<1, 1, 0, s>>>(num_batches_tracked);
    CUDA_CHECK_LAUNCH();
}

extern "C" void batchnorm_eval_stats_cuda(float *mean, float *invstd, const float *running_mean,
                                          const float *running_var, float eps, size_t C,
                                          cudaStream_t s)
{
    if (C == 0) return;
    bn_eval_stats_kernel<<<(unsigned)((C + 255) / 256), 256, 0, s>>>(mean, invstd, running_mean,
                                                                     running_var, eps, C);
    CUDA_CHECK_LAUNCH();
}

extern "C" void batchnorm_forward_cuda(void *y, const void *x, const void *z, const float *mean,
                                       const float *invstd, const float *gamma,
                                       const float *beta, DType dt, int relu, size_t M, size_t C,
                                       cudaStream_t s)
{
    if (M * C == 0) return;
    dispatch_float(dt, "batchnorm_forward_cuda", [&](auto tag) {
        using T = decltype(tag);
        constexpr int V = 16 / sizeof(T);
        bool vec = C % V == 0 && vec_ok(y, x, z, NULL, mean, invstd, gamma, beta);
        BnFwdOp<T, V> opv = {(T *)y, (const T *)x, (const T *)z, mean, invstd, gamma, beta,
                             relu, {}, {}, {}};
        BnFwdOp<T, 1> op1 = {(T *)y, (const T *)x, (const T *)z, mean, invstd, gamma, beta,
                             relu, {}, {}, {}};
        launch_elem<V>(opv, op1, vec, M, C, s);
    });
}

extern "C" size_t batchnorm_cudnn_mask_bytes(size_t M, size_t C)
{
    return (M + 31) / 32 * 32 * C / 8;
}

extern "C" int batchnorm_forward_cudnn_mask_cuda(void *y, void *mask, const void *x,
                                                 const void *z, const float *mean,
                                                 const float *invstd, const float *gamma,
                                                 const float *beta, DType dt, size_t M,
                                                 size_t C, cudaStream_t s)
{
    if (M == 0 || C == 0 || C % 64 != 0 || !z || !mask) return 0;
    if (dt != DT_F32 && dt != DT_F16 && dt != DT_BF16) return 0;
    const size_t vb = 4 * dtype_size(dt);
    const void *acts[3] = {y, x, z};
    for (int k = 0; k < 3; k++)
        if (!is_aligned(acts[k], vb)) return 0;
    if (!vec_ok(NULL, NULL, NULL, mask, mean, invstd, gamma, beta)) return 0;
    const size_t p32 = (M + 31) / 32 * 32, items = C / 64 * (p32 / 2);
    const unsigned blocks = grid_for(items * 32, EW_THREADS, EW_MAX_BLOCKS);
    dispatch_float(dt, "batchnorm_forward_cudnn_mask_cuda", [&](auto tag) {
        using T = decltype(tag);
        bn_fwd_cudnn_mask_kernel<T><<<blocks, EW_THREADS, 0, s>>>(
            (T *)y, (uint32_t *)mask, (const T *)x, (const T *)z, mean, invstd, gamma, beta, M,
            C, p32);
        CUDA_CHECK_LAUNCH();
    });
    return 1;
}

extern "C" void batchnorm_mask_diff_cuda(unsigned long long *count, const void *a,
                                         const void *b, size_t M, size_t C, cudaStream_t s)
{
    const size_t n = batchnorm_cudnn_mask_bytes(M, C) / 4;
    if (n == 0) return;
    bn_mask_diff_kernel<<<grid_for(n, EW_THREADS, 1024), EW_THREADS, 0, s>>>(
        count, (const uint32_t *)a, (const uint32_t *)b, n, M, (M + 31) / 32 * 32);
    CUDA_CHECK_LAUNCH();
}

extern "C" void batchnorm_backward_cuda(void *dx, void *dz, float *dgamma, float *dbeta,
                                        const void *dy, const void *x, const void *y,
                                        const float *mean, const float *invstd,
                                        const float *gamma, const float *beta, DType dt,
                                        int training, int relu,
                                        size_t M, size_t C, int accum_x, int accum_z,
                                        int accum_p, void *scratch, size_t scratch_bytes,
                                        cudaStream_t s)
{
    if (C == 0) return;
    CT_ASSERT(relu >= 0 && relu <= 2, "batchnorm_backward_cuda: relu mode %d (0, 1 or 2)", relu);
    CT_ASSERT(relu != 1 || y, "batchnorm_backward_cuda: the ReLU mask is read from y, got NULL");
    CT_ASSERT(relu != 2 || !dz, "batchnorm_backward_cuda: relu mode 2 recomputes the mask "
                                "without a residual; dz must be NULL");
    if (M == 0) {
        if (dgamma && !accum_p) CUDA_CHECK(cudaMemsetAsync(dgamma, 0, C * sizeof(float), s));
        if (dbeta && !accum_p) CUDA_CHECK(cudaMemsetAsync(dbeta, 0, C * sizeof(float), s));
        return;
    }
    int need_sums = dgamma || dbeta || (dx && training);
    float *mg = NULL, *mgx = NULL;
    if (need_sums) {
        dim3 grid;
        size_t rpc;
        size_t G = reduction_grid("batchnorm_backward_cuda", M, C, scratch_bytes, &grid, &rpc);
        float *psg = (float *)scratch, *psgx = psg + G * C;
        mg = psgx + G * C;
        mgx = mg + C;
        unsigned cols = (unsigned)batchnorm_cols(C);
        dispatch_float(dt, "batchnorm_backward_cuda", [&](auto tag) {
            using T = decltype(tag);
            /* the layout (so the sums' order) from C alone; the accesses from
             * the pointers: vectors where aligned, the same lanes element by
             * element where not (only what the mode reads is checked) */
            constexpr int V = 16 / sizeof(T);
            const void *yr = relu == 1 ? y : NULL;
            const float *br = relu == 2 ? beta : NULL, *gr = relu == 2 ? gamma : NULL;
            bool al = vec_ok(dy, x, yr, NULL, mean, invstd, gr, br);
            if (C % V == 0 && al)
                bn_backward_partial_kernel<T, V, true><<<grid, BN_THREADS, 0, s>>>(
                    psg, psgx, (const T *)dy, (const T *)x, (const T *)y, mean, invstd, gamma,
                    beta, relu, M, C, cols, rpc);
            else if (C % V == 0)
                bn_backward_partial_kernel<T, V, false><<<grid, BN_THREADS, 0, s>>>(
                    psg, psgx, (const T *)dy, (const T *)x, (const T *)y, mean, invstd, gamma,
                    beta, relu, M, C, cols, rpc);
            else
                bn_backward_partial_kernel<T, 1, false><<<grid, BN_THREADS, 0, s>>>(
                    psg, psgx, (const T *)dy, (const T *)x, (const T *)y, mean, invstd, gamma,
                    beta, relu, M, C, cols, rpc);
            CUDA_CHECK_LAUNCH();
        });
        bn_backward_finish_kernel<<<fin_blocks(C), FIN_COLS * FIN_LANES, 0, s>>>(
            mg, mgx, dgamma, dbeta, psg, psgx, G, M, C, accum_p);
        CUDA_CHECK_LAUNCH();
    }
    batchnorm_backward_dx_cuda(dx, dz, dy, x, y, mean, invstd, gamma, beta, mg, mgx, dt, training,
                               relu, M, C, accum_x, accum_z, s);
}

extern "C" void batchnorm_backward_dx_cuda(void *dx, void *dz, const void *dy, const void *x,
                                           const void *y, const float *mean,
                                           const float *invstd, const float *gamma,
                                           const float *beta,
                                           const float *mg, const float *mgx, DType dt,
                                           int training, int relu, size_t M, size_t C,
                                           int accum_x, int accum_z, cudaStream_t s)
{
    if ((!dx && !dz) || M * C == 0) return;
    dispatch_float(dt, "batchnorm_backward_cuda", [&](auto tag) {
        using T = decltype(tag);
        constexpr int V = 16 / sizeof(T);
        bool vec = C % V == 0 && vec_ok(dy, dx, dz, x, mean, invstd, gamma, beta) &&
                   vec_ok(y, NULL, NULL, NULL, mg, mgx, NULL, NULL);
        BnDxOp<T, V> opv = {(T *)dx, (T *)dz, (const T *)dy, (const T *)x, (const T *)y, mean,
                            invstd, gamma, beta, mg, mgx, training, relu, accum_x, accum_z,
                            {}, {}, {}, {}, {}, {}};
        BnDxOp<T, 1> op1 = {(T *)dx, (T *)dz, (const T *)dy, (const T *)x, (const T *)y, mean,
                            invstd, gamma, beta, mg, mgx, training, relu, accum_x, accum_z,
                            {}, {}, {}, {}, {}, {}};
        launch_elem<V>(opv, op1, vec, M, C, s);
    });
}
