/* attention_fused.cu — fused (flash-style) attention forward and backward on
 * CUDA. Contract, math and status: ops/attention_fused.h.
 *
 * Shape letters: B batch, H heads, T tokens, Dh head width (DH, a template
 * argument: 32, 64 or 128); BH = B H heads.
 *
 * Layout of the work (version 1: plain f32 FMA, no tensor cores):
 *   - a block is FA_WARPS warps; a warp owns RPW rows (query rows in the
 *     forward and dq kernels, key rows in the dk/dv kernel), so a block owns
 *     ROWS = FA_WARPS RPW rows of one head (grid: T / ROWS tiles x BH);
 *   - the other side streams through shared memory in tiles of 32 rows
 *     (converted to f32, row stride DH + 1 so lane l reading row l is free of
 *     bank conflicts); lane l owns the l-th row of the tile for the dot
 *     products (one score per lane), then the tile's 32 scores are
 *     broadcast with __shfl_sync and every lane accumulates DH / 32 output
 *     columns (lane + 32 c) in registers;
 *   - softmax statistics (running max m, sum l) are per warp row and every
 *     lane holds the same bits (xor butterflies in warp_max / warp_sum).
 * Mask shift (header): every block first reduces M_b = max_j mask[b, j] and
 * adds mask[b, j] - M_b to the scores (0 as the shift when M_b = -inf: all
 * scores stay -inf and the -inf row rules below apply).
 * Dispatch: attention_fused_forward_cuda / _backward_cuda send f16 / bf16
 * with 16-byte aligned pointers to the tensor-core kernels
 * (ops/attention_fa_tc.cu) when the device has them; the rest (f16 / bf16
 * off 16-byte alignment, or a device without them) runs here, in f32 math.
 * f32 storage has no kernel here: the op sends it to the cuBLASLt path,
 * which is faster for it (ops/attention_op.c, attention_kernel_choose).
 * Dropout: element idx = ((b H + h) T + i) T + j keeps iff drop_keep_bit (ops/
 * dropout_mask.h: 8 bits of Philox an element, sixteen a call), as every
 * attention path; here one Philox call per element (16x the work needed;
 * the tensor-core kernels share one call between 8 or 16 keys: not worth it
 * here, where the FMA products dominate).
 */
#include <math.h>
#include <stdint.h>
#include <initializer_list>
#include <type_traits>

#include "engine/error.h"
#include "engine/mem.h"
#include "attention_fused.h"
#include "dropout_mask.h"
#include "cuda_util.cuh"
#include "dropout.h"

namespace {

constexpr int FA_WARPS = 4;  /* warps per block */
constexpr int FA_TILE = 32;  /* rows per streamed tile: one per lane */

template <int DH> struct FaCfg {
    static_assert(DH % 32 == 0, "DH must be a multiple of 32");
    static constexpr int RPW = DH <= 64 ? 4 : 2;  /* rows per warp (smem < 48 KB at DH 128) */
    static constexpr int ROWS = FA_WARPS * RPW;   /* rows owned by a block */
    static constexpr int LD = DH + 1;             /* padded stride of a streamed tile */
    static constexpr int CPL = DH / 32;           /* output columns per lane */
};

/* keep bit of flat element idx (ops/dropout_mask.h) */
__device__ __forceinline__ bool fa_keep(uint64_t idx, float p, uint64_t seed, uint64_t offset)
{
    return drop_keep_bit(seed, offset, idx, drop_threshold(p)) != 0;
}

/* The shift subtracted from the mask row: M_b = max_j mb[j], 0 without a
 * mask or when every key is -inf (then every score stays -inf). Every
 * thread of the block calls it. */
__device__ float fa_mask_shift(const float *mb, int T)
{
    __shared__ float red[FA_WARPS];
    if (!mb) return 0.0f;
    float m = -INFINITY;
    for (int j = threadIdx.x; j < T; j += blockDim.x) m = fmaxf(m, mb[j]);
    m = warp_max(m);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
    __syncthreads();
    m = red[0];
    for (int w = 1; w < FA_WARPS; w++) m = fmaxf(m, red[w]);
    return m == -INFINITY ? 0.0f : m;
}

/* dst[r * LD + e] = src[r0 + r][e] in f32 for r < n (0 past row T); whole block. */
template <typename E, int DH, int LD>
__device__ __forceinline__ void fa_load_rows(float *dst, const E *src, int r0, int n, int T)
{
    for (int x = threadIdx.x; x < n * DH; x += blockDim.x) {
        const int r = x / DH, e = x % DH;
        dst[r * LD + e] = r0 + r < T ? to_f32(src[(size_t)(r0 + r) * DH + e]) : 0.0f;
    }
}

/* ---- forward ----
 * s = scale q k^T + mask - M_b,  online softmax:  m' = max(m, rowmax s),
 * l = l e^(m - m') + rowsum e^(s - m'),  acc = acc e^(m - m') + (keep s_d e^(s - m')) v
 * out = acc / l,  lse = m + log l */
template <typename E, int DH>
__global__ void __launch_bounds__(FA_WARPS * 32)
    fa_fwd_kernel(E *out, float *lse, const E *q, const E *k, const E *v, const float *mask,
                  float scale, float p, float sd, uint64_t seed, uint64_t offset,
                  const uint64_t *rng_base, int H, int T)
{
    using C = FaCfg<DH>;
    __shared__ float qs[C::ROWS * DH];
    __shared__ float ks[FA_TILE * C::LD], vs[FA_TILE * C::LD];
    if (rng_base) offset += *rng_base; /* inside a CUDA graph (dropout.h) */
    const int bh = blockIdx.y, b = bh / H, i0 = blockIdx.x * C::ROWS;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const size_t hoff = (size_t)bh * T * DH;
    q += hoff; k += hoff; v += hoff; out += hoff;
    const float *mb = mask ? mask + (size_t)b * T : NULL;
    const float shift = fa_mask_shift(mb, T);
    fa_load_rows<E, DH, DH>(qs, q, i0, C::ROWS, T);

    float m[C::RPW], l[C::RPW], acc[C::RPW][C::CPL];
#pragma unroll
    for (int rr = 0; rr < C::RPW; rr++) {
        m[rr] = -INFINITY;
        l[rr] = 0.0f;
#pragma unroll
        for (int c = 0; c < C::CPL; c++) acc[rr][c] = 0.0f;
    }
    for (int j0 = 0; j0 < T; j0 += FA_TILE) {
        __syncthreads(); /* the previous tile is used up (first pass: qs is loaded) */
        fa_load_rows<E, DH, C::LD>(ks, k, j0, FA_TILE, T);
        fa_load_rows<E, DH, C::LD>(vs, v, j0, FA_TILE, T);
        __syncthreads();
        const int j = j0 + lane;
        const float mj = j < T ? (mb ? mb[j] - shift : 0.0f) : -INFINITY;
#pragma unroll
        for (int rr = 0; rr < C::RPW; rr++) {
            const int r = warp * C::RPW + rr, i = i0 + r;
            float dot = 0.0f;
#pragma unroll 16
            for (int e = 0; e < DH; e++) dot += qs[r * DH + e] * ks[lane * C::LD + e];
            const float s = j < T ? scale * dot + mj : -INFINITY;
            const float mnew = fmaxf(m[rr], warp_max(s));
            /* every score so far -inf: use 0 as the shift so nothing is NaN (all terms 0) */
            const float mu = mnew == -INFINITY ? 0.0f : mnew;
            const float pj = expf(s - mu);
            const float corr = expf(m[rr] - mu);
            l[rr] = l[rr] * corr + warp_sum(pj);
            m[rr] = mnew;
            float pdj = pj;
            if (p > 0.0f)
                pdj = (i < T && j < T &&
                       fa_keep(((uint64_t)bh * T + i) * T + j, p, seed, offset))
                          ? pj * sd
                          : 0.0f;
#pragma unroll
            for (int c = 0; c < C::CPL; c++) acc[rr][c] *= corr;
            for (int jj = 0; jj < FA_TILE; jj++) {
                const float w = __shfl_sync(FULL_MASK, pdj, jj);
#pragma unroll
                for (int c = 0; c < C::CPL; c++) acc[rr][c] += w * vs[jj * C::LD + lane + 32 * c];
            }
        }
    }
#pragma unroll
    for (int rr = 0; rr < C::RPW; rr++) {
        const int i = i0 + warp * C::RPW + rr;
        if (i >= T) continue;
        const float inv = l[rr] > 0.0f ? 1.0f / l[rr] : 0.0f;
#pragma unroll
        for (int c = 0; c < C::CPL; c++)
            out[(size_t)i * DH + lane + 32 * c] = from_f32<E>(acc[rr][c] * inv);
        if (lane == 0) lse[(size_t)bh * T + i] = l[rr] > 0.0f ? m[rr] + logf(l[rr]) : -INFINITY;
    }
}

/* ---- backward ---- */

/* D_i = rowsum(dout_i * out_i) (= rowsum_j dPd_ij Pd_ij), one warp per row;
 * D is [B, H, T]; dout and out [B, H, T, Dh], or [B, T, H, Dh] (bthd) */
template <typename E>
__global__ void __launch_bounds__(256)
    fa_bwd_rowdot_kernel(float *D, const E *dout, const E *out, size_t R, int Dh, int H, int T,
                         int bthd)
{
    const size_t r = (size_t)blockIdx.x * 8 + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (r >= R) return;
    size_t at = r * Dh;
    if (bthd) {   /* r = (b H + h) T + i  ->  ((b T + i) H + h) Dh */
        const size_t i = r % T, bh = r / T, h = bh % H, b = bh / H;
        at = ((b * T + i) * H + h) * Dh;
    }
    float s = 0.0f;
    for (int e = lane; e < Dh; e += 32)
        s += to_f32(dout[at + e]) * to_f32(out[at + e]);
    s = warp_sum(s);
    if (lane == 0) D[r] = s;
}

/* The same D with 16-byte loads (Dh % 8 == 0, dout and out 16-byte
 * aligned: the tensor-core path's tensors always are). 8 lanes a row, 4
 * rows a warp: lane k of a row adds the products of its vectors k, k + 8,
 * ... element by element in order, then the row's 8 lanes are added by an
 * xor butterfly (3 steps). One warp a row with 2-byte loads (above) ran at
 * ~40% of the copy bandwidth (H100, BERT-large bs 256 seq 128: 126 us for
 * 134 MB a layer). A different order of the same sum: D's bits differ from
 * the kernel above, deterministically. */
constexpr int ROWDOT_LANES = 8;
constexpr int ROWDOT_ROWS = 256 / ROWDOT_LANES;   /* a block's rows */

template <typename E>
__global__ void __launch_bounds__(256)
    fa_bwd_rowdot_vec_kernel(float *D, const E *dout, const E *out, size_t R, int Dh, int H,
                             int T, int bthd)
{
    const size_t r = (size_t)blockIdx.x * ROWDOT_ROWS + threadIdx.x / ROWDOT_LANES;
    const int k = threadIdx.x % ROWDOT_LANES;
    float s = 0.0f;
    if (r < R) {   /* no early return: the whole warp takes part in the shuffles */
        size_t at = r * Dh;
        if (bthd) {
            const size_t i = r % T, bh = r / T, h = bh % H, b = bh / H;
            at = ((b * T + i) * H + h) * Dh;
        }
        for (int e = 8 * k; e < Dh; e += 8 * ROWDOT_LANES) {
            union { uint4 u; E v[8]; } a, o;
            a.u = *(const uint4 *)(dout + at + e);
            o.u = *(const uint4 *)(out + at + e);
#pragma unroll
            for (int j = 0; j < 8; j++) s += to_f32(a.v[j]) * to_f32(o.v[j]);
        }
    }
#pragma unroll
    for (int m = ROWDOT_LANES / 2; m > 0; m /= 2) s += __shfl_xor_sync(0xffffffffu, s, m);
    if (r < R && k == 0) D[r] = s;
}

/* P_ij = exp(s_ij - lse_i) (0 for a row with no distribution) */
__device__ __forceinline__ float fa_prob(float s, float lse_i)
{
    return lse_i == -INFINITY ? 0.0f : expf(s - lse_i);
}

/* dq_i = scale sum_j dS_ij k_j,  dS_ij = P_ij (keep s_d dout_i . v_j - D_i).
 * A warp owns RPW query rows; key tiles stream through shared memory. */
template <typename E, int DH>
__global__ void __launch_bounds__(FA_WARPS * 32)
    fa_bwd_dq_kernel(E *dq, const E *q, const E *k, const E *v, const E *dout,
                     const float *lse, const float *D, const float *mask, float scale, float p,
                     float sd, uint64_t seed, uint64_t offset, const uint64_t *rng_base, int H,
                     int T, int accum)
{
    using C = FaCfg<DH>;
    __shared__ float qs[C::ROWS * DH], dos[C::ROWS * DH];
    __shared__ float ks[FA_TILE * C::LD], vs[FA_TILE * C::LD];
    if (rng_base) offset += *rng_base;
    const int bh = blockIdx.y, b = bh / H, i0 = blockIdx.x * C::ROWS;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const size_t hoff = (size_t)bh * T * DH;
    q += hoff; k += hoff; v += hoff; dout += hoff; dq += hoff;
    const float *mb = mask ? mask + (size_t)b * T : NULL;
    const float shift = fa_mask_shift(mb, T);
    fa_load_rows<E, DH, DH>(qs, q, i0, C::ROWS, T);
    fa_load_rows<E, DH, DH>(dos, dout, i0, C::ROWS, T);

    float lse_r[C::RPW], D_r[C::RPW], acc[C::RPW][C::CPL];
#pragma unroll
    for (int rr = 0; rr < C::RPW; rr++) {
        const int i = i0 + warp * C::RPW + rr;
        lse_r[rr] = i < T ? lse[(size_t)bh * T + i] : -INFINITY;
        D_r[rr] = i < T ? D[(size_t)bh * T + i] : 0.0f;
#pragma unroll
        for (int c = 0; c < C::CPL; c++) acc[rr][c] = 0.0f;
    }
    for (int j0 = 0; j0 < T; j0 += FA_TILE) {
        __syncthreads();
        fa_load_rows<E, DH, C::LD>(ks, k, j0, FA_TILE, T);
        fa_load_rows<E, DH, C::LD>(vs, v, j0, FA_TILE, T);
        __syncthreads();
        const int j = j0 + lane;
        const float mj = j < T ? (mb ? mb[j] - shift : 0.0f) : -INFINITY;
#pragma unroll
        for (int rr = 0; rr < C::RPW; rr++) {
            const int r = warp * C::RPW + rr, i = i0 + r;
            float dqk = 0.0f, ddv = 0.0f;
#pragma unroll 16
            for (int e = 0; e < DH; e++) {
                dqk += qs[r * DH + e] * ks[lane * C::LD + e];
                ddv += dos[r * DH + e] * vs[lane * C::LD + e];
            }
            const float s = j < T ? scale * dqk + mj : -INFINITY;
            const float P = fa_prob(s, lse_r[rr]);
            const bool keep = p == 0.0f || (i < T && j < T &&
                                            fa_keep(((uint64_t)bh * T + i) * T + j, p, seed, offset));
            const float dP = keep ? ddv * sd : 0.0f;
            const float dS = P * (dP - D_r[rr]);
            for (int jj = 0; jj < FA_TILE; jj++) {
                const float w = __shfl_sync(FULL_MASK, dS, jj);
#pragma unroll
                for (int c = 0; c < C::CPL; c++) acc[rr][c] += w * ks[jj * C::LD + lane + 32 * c];
            }
        }
    }
#pragma unroll
    for (int rr = 0; rr < C::RPW; rr++) {
        const int i = i0 + warp * C::RPW + rr;
        if (i >= T) continue;
#pragma unroll
        for (int c = 0; c < C::CPL; c++) {
            E *o = dq + (size_t)i * DH + lane + 32 * c;
            *o = from_f32<E>(scale * acc[rr][c] + (accum ? to_f32(*o) : 0.0f));
        }
    }
}

/* dv_j = sum_i Pd_ij dout_i,  dk_j = scale sum_i dS_ij q_i.
 * A warp owns RPW key rows; query tiles (q, dout, lse, D) stream through
 * shared memory. dk or dv may be NULL. */
template <typename E, int DH>
__global__ void __launch_bounds__(FA_WARPS * 32)
    fa_bwd_dkdv_kernel(E *dk, E *dv, const E *q, const E *k, const E *v, const E *dout,
                       const float *lse, const float *D, const float *mask, float scale,
                       float p, float sd, uint64_t seed, uint64_t offset,
                       const uint64_t *rng_base, int H, int T, int accum_k, int accum_v)
{
    using C = FaCfg<DH>;
    __shared__ float ks[C::ROWS * DH], vs[C::ROWS * DH];
    __shared__ float qs[FA_TILE * C::LD], dos[FA_TILE * C::LD];
    __shared__ float lses[FA_TILE], Ds[FA_TILE];
    if (rng_base) offset += *rng_base;
    const int bh = blockIdx.y, b = bh / H, j0 = blockIdx.x * C::ROWS;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const size_t hoff = (size_t)bh * T * DH;
    q += hoff; k += hoff; v += hoff; dout += hoff;
    const float *mb = mask ? mask + (size_t)b * T : NULL;
    const float shift = fa_mask_shift(mb, T);
    fa_load_rows<E, DH, DH>(ks, k, j0, C::ROWS, T);
    fa_load_rows<E, DH, DH>(vs, v, j0, C::ROWS, T);

    float mj[C::RPW], dka[C::RPW][C::CPL], dva[C::RPW][C::CPL];
#pragma unroll
    for (int rr = 0; rr < C::RPW; rr++) {
        const int j = j0 + warp * C::RPW + rr;
        mj[rr] = j < T ? (mb ? mb[j] - shift : 0.0f) : -INFINITY;
#pragma unroll
        for (int c = 0; c < C::CPL; c++) dka[rr][c] = dva[rr][c] = 0.0f;
    }
    for (int t0 = 0; t0 < T; t0 += FA_TILE) {
        __syncthreads();
        fa_load_rows<E, DH, C::LD>(qs, q, t0, FA_TILE, T);
        fa_load_rows<E, DH, C::LD>(dos, dout, t0, FA_TILE, T);
        if (threadIdx.x < FA_TILE) {
            const int i = t0 + threadIdx.x;
            lses[threadIdx.x] = i < T ? lse[(size_t)bh * T + i] : -INFINITY;
            Ds[threadIdx.x] = i < T ? D[(size_t)bh * T + i] : 0.0f;
        }
        __syncthreads();
        const int i = t0 + lane;
        const float lse_i = lses[lane], D_i = Ds[lane];
#pragma unroll
        for (int rr = 0; rr < C::RPW; rr++) {
            const int r = warp * C::RPW + rr, j = j0 + r;
            float dqk = 0.0f, ddv = 0.0f;
#pragma unroll 16
            for (int e = 0; e < DH; e++) {
                dqk += qs[lane * C::LD + e] * ks[r * DH + e];
                ddv += dos[lane * C::LD + e] * vs[r * DH + e];
            }
            const float s = scale * dqk + mj[rr]; /* -inf past T */
            const float P = fa_prob(s, lse_i);
            const bool keep = p == 0.0f || (i < T && j < T &&
                                            fa_keep(((uint64_t)bh * T + i) * T + j, p, seed, offset));
            const float pd = keep ? P * sd : 0.0f;
            const float dS = P * ((keep ? ddv * sd : 0.0f) - D_i);
            for (int ii = 0; ii < FA_TILE; ii++) {
                const float wv = __shfl_sync(FULL_MASK, pd, ii);
                const float ws = __shfl_sync(FULL_MASK, dS, ii);
#pragma unroll
                for (int c = 0; c < C::CPL; c++) {
                    dva[rr][c] += wv * dos[ii * C::LD + lane + 32 * c];
                    dka[rr][c] += ws * qs[ii * C::LD + lane + 32 * c];
                }
            }
        }
    }
#pragma unroll
    for (int rr = 0; rr < C::RPW; rr++) {
        const int j = j0 + warp * C::RPW + rr;
        if (j >= T) continue;
#pragma unroll
        for (int c = 0; c < C::CPL; c++) {
            const size_t at = hoff + (size_t)j * DH + lane + 32 * c;
            if (dk) dk[at] = from_f32<E>(scale * dka[rr][c] + (accum_k ? to_f32(dk[at]) : 0.0f));
            if (dv) dv[at] = from_f32<E>(dva[rr][c] + (accum_v ? to_f32(dv[at]) : 0.0f));
        }
    }
}

/* every non-NULL pointer 16-byte aligned (cp.async in the tensor-core kernels) */
bool fa_aligned16(std::initializer_list<const void *> ps)
{
    for (const void *p : ps)
        if (p && !is_aligned(p, 16)) return false;
    return true;
}

/* Calls f with a value of the C++ type that stores dt, f16 or bf16: the
 * types the fused path runs (ops/attention_op.c sends f32 to the cuBLASLt
 * path; no f32 kernel is compiled here). */
template <typename F> void fa_dispatch_half(DType dt, const char *what, F f)
{
    switch (dt) {
    case DT_F16: f(__half()); break;
    case DT_BF16: f(__nv_bfloat16()); break;
    default:
        ct_fatal("%s: dtype %s has no fused kernel (f16 or bf16; the op runs f32 attention "
                 "on the cuBLASLt path)", what, dtype_name(dt));
    }
}

void fa_check_sizes(size_t B, size_t H, size_t T, size_t Dh, const char *what)
{
    CT_ASSERT(T <= 0x7fffffff && Dh <= 0x7fffffff && B * H <= 65535 && H > 0,
              "%s: B = %zu, H = %zu, T = %zu, Dh = %zu out of range (B H <= 65535)", what, B, H,
              T, Dh);
}

} // namespace

extern "C" void attention_fused_forward_cuda(Ctx *c, void *out, float *lse, uint64_t *keep_out,
                                             const void *q, const void *k, const void *v,
                                             const float *mask, DType dt, float p, uint64_t seed,
                                             uint64_t offset, size_t B, size_t H, size_t T,
                                             size_t Dh, int bthd)
{
    const size_t BH = B * H;
    if (BH == 0 || T == 0) return;
    const bool tc = attention_fa_tc_supports(c, dt, Dh) && fa_aligned16({out, q, k, v});
    CT_ASSERT(tc || !bthd, "attention_fused_forward_cuda: [B, T, H, Dh] needs the tensor-core "
              "kernels (%s, Dh %zu) and 16-byte aligned tensors", dtype_name(dt), Dh);
    if (tc) {
        attention_fa_tc_forward_cuda(c, out, lse, keep_out, q, k, v, mask, dt, p, seed, offset,
                                     B, H, T, Dh, bthd);
        return;
    }
    fa_check_sizes(B, H, T, Dh, "attention_fused_forward_cuda");
    /* the FMA kernel draws its bits per element; the saved mask (for a
     * tensor-core backward) comes from the backward's own draw: same bits */
    if (keep_out) attention_fa_tc_keep_bits_cuda(c, keep_out, p, seed, offset, B, H, T);
    const float scale = 1.0f / sqrtf((float)Dh), sd = drop_scale(p);
    fa_dispatch_half(dt, "attention_fused_forward_cuda", [&](auto tag) {
        using E = decltype(tag);
        dispatch_head_dim(Dh, "attention_fused_forward_cuda", [&](auto dh) {
            constexpr int DH = decltype(dh)::value;
            const dim3 grid((unsigned)((T + FaCfg<DH>::ROWS - 1) / FaCfg<DH>::ROWS), (unsigned)BH);
            fa_fwd_kernel<E, DH><<<grid, FA_WARPS * 32, 0, c->stream>>>(
                (E *)out, lse, (const E *)q, (const E *)k, (const E *)v, mask, scale, p, sd,
                seed, offset, c->rng_base, (int)H, (int)T);
            CUDA_CHECK_LAUNCH();
        });
    });
}

/* forward: out = Pd v,  Pd = keep s_d softmax(scale q k^T + mask)
 *   so dv = Pd^T dout,  dS = P (dP - D),  D = rowsum(dout * out),
 *      dq = scale dS k,  dk = scale dS^T q */
extern "C" void attention_fused_backward_cuda(Ctx *c, void *dq, void *dk, void *dv,
                                              const void *dout, const void *q, const void *k,
                                              const void *v, const void *out, const float *lse,
                                              const float *mask, const uint64_t *keep_in,
                                              DType dt, float p, uint64_t seed, uint64_t offset,
                                              size_t B, size_t H, size_t T, size_t Dh,
                                              int accum_q, int accum_k, int accum_v, int bthd)
{
    const size_t BH = B * H, R = BH * T;
    if (BH == 0 || T == 0 || (!dq && !dk && !dv)) return;
    fa_check_sizes(B, H, T, Dh, "attention_fused_backward_cuda");
    const float scale = 1.0f / sqrtf((float)Dh), sd = drop_scale(p);
    const bool tc = attention_fa_tc_supports(c, dt, Dh) && fa_aligned16({dq, dk, dv, dout, q, k, v});
    CT_ASSERT(tc || !bthd, "attention_fused_backward_cuda: [B, T, H, Dh] needs the tensor-core "
              "kernels (%s, Dh %zu) and 16-byte aligned tensors", dtype_name(dt), Dh);
    float *D = (float *)mem_alloc(c, R * sizeof(float));
    fa_dispatch_half(dt, "attention_fused_backward_cuda", [&](auto tag) {
        using E = decltype(tag);
        CT_ASSERT((R + 7) / 8 <= 0x7fffffffu, "attention_fused_backward_cuda: %zu rows", R);
        if (Dh % 8 == 0 && fa_aligned16({dout, out}))
            fa_bwd_rowdot_vec_kernel<E>
                <<<(unsigned)((R + ROWDOT_ROWS - 1) / ROWDOT_ROWS), 256, 0, c->stream>>>(
                    D, (const E *)dout, (const E *)out, R, (int)Dh, (int)H, (int)T, bthd);
        else
            fa_bwd_rowdot_kernel<E><<<(unsigned)((R + 7) / 8), 256, 0, c->stream>>>(
                D, (const E *)dout, (const E *)out, R, (int)Dh, (int)H, (int)T, bthd);
        CUDA_CHECK_LAUNCH();
        if (tc) {
            attention_fa_tc_backward_cuda(c, dq, dk, dv, dout, q, k, v, lse, D, mask, keep_in,
                                          dt, p, seed, offset, B, H, T, Dh, accum_q, accum_k,
                                          accum_v, bthd);
            return;
        }
        dispatch_head_dim(Dh, "attention_fused_backward_cuda", [&](auto dh) {
            constexpr int DH = decltype(dh)::value;
            const dim3 grid((unsigned)((T + FaCfg<DH>::ROWS - 1) / FaCfg<DH>::ROWS), (unsigned)BH);
            if (dk || dv) {
                fa_bwd_dkdv_kernel<E, DH><<<grid, FA_WARPS * 32, 0, c->stream>>>(
                    (E *)dk, (E *)dv, (const E *)q, (const E *)k, (const E *)v, (const E *)dout,
                    lse, D, mask, scale, p, sd, seed, offset, c->rng_base, (int)H, (int)T,
                    accum_k, accum_v);
                CUDA_CHECK_LAUNCH();
            }
            if (dq) {
                fa_bwd_dq_kernel<E, DH><<<grid, FA_WARPS * 32, 0, c->stream>>>(
                    (E *)dq, (const E *)q, (const E *)k, (const E *)v, (const E *)dout, lse, D,
                    mask, scale, p, sd, seed, offset, c->rng_base, (int)H, (int)T, accum_q);
                CUDA_CHECK_LAUNCH();
            }
        });
    });
    mem_free(c, D, R * sizeof(float));
}
