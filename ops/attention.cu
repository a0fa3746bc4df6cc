/* attention.cu — CUDA scaled dot-product attention (contract and math in
 * ops/attention.h; ops/attention.c is the CPU reference).
 *
 * Shape letters: B batch, H heads, T tokens, Dh head width; BH = B H heads,
 * R = BH T rows of the [BH, T, T] score / probability matrices.
 *
 * Forward (4 launches):
 *   1. S = q k^T          cuBLASLt, batch BH, f32 output (the logits keep f32
 *                          precision whatever the input type);
 *   2. fused row kernel:  P = softmax(scale S + mask[b]) stored in dt (kept for
 *                          the backward), Pd = dropout(P) stored in dt;
 *   3. out = Pd v         cuBLASLt, batch BH.
 *   Temporaries: S (4 bytes per score) and Pd (p > 0 only), freed at once.
 * Backward:
 *   Pd = dropout(P)       (p > 0: attention_dropout_cuda on the stored P,
 *                          the same bits the forward used);
 *   dv  = Pd^T dout       cuBLASLt (beta 1 when accumulating);
 *   dPd = dout v^T        cuBLASLt into a dt buffer;
 *   fused row kernel:     dS = P (keep ? dPd s : 0) - P rowsum(dPd Pd), in place;
 *   dq = scale dS k,  dk = scale dS^T q   cuBLASLt with alpha = scale.
 *   Temporaries: dPd/dS in dt, Pd in dt (p > 0 only).
 *
 * Row kernels: one warp per row, 8 rows per 256-thread block. A lane takes
 * groups of eight consecutive elements aligned to the flat [BH, T, T] index
 * and their eight mask bits, one Philox call (the mask's definition is
 * ops/dropout_mask.h). Warp sums use an xor butterfly: every lane gets the
 * same bits, and the result does not depend on scheduling.
 */
#include <math.h>
#include <stdint.h>

#include "engine/error.h"
#include "engine/mem.h"
#include "attention.h"
#include "dropout_mask.h"
#include "cuda_util.cuh"
#include "dropout.h"
#include "matmul.h"

namespace {

constexpr int ROW_WARPS = 8;

/* The eight mask bits of counter group g (flat elements 8g .. 8g+7): bit k
 * = keep (ops/dropout_mask.h). */
__device__ __forceinline__ unsigned keep_bits(uint64_t g, float p, uint64_t seed,
                                              uint64_t offset)
{
    if (p == 0.0f) return 0xffu;
    return drop_keep8(seed, offset, g, drop_threshold(p));
}

/* Pd = keep ? P s : 0 over n elements, eight (one counter group) a thread
 * a pass: the backward's rebuild of the forward's Pd, the same expression. */
template <typename E>
__global__ void attn_dropout_kernel(E *pd, const E *probs, size_t n, uint32_t thr, float s,
                                    uint64_t seed, uint64_t offset, const uint64_t *rng_base)
{
    if (rng_base) offset += *rng_base;   /* inside a CUDA graph (dropout.h) */
    const size_t groups = (n + 7) / 8;
    for (size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x; g < groups;
         g += (size_t)gridDim.x * blockDim.x) {
        const unsigned kb = drop_keep8(seed, offset, g, thr);
#pragma unroll
        for (int e = 0; e < 8; e++) {
            const size_t idx = 8 * g + e;
            if (idx < n) pd[idx] = from_f32<E>((kb >> e) & 1u ? to_f32(probs[idx]) * s : 0.0f);
        }
    }
}

/* forward: P = softmax(scale S + mask[b]),  Pd = keep ? P s : 0 (from P as stored) */
template <typename E>
__global__ void __launch_bounds__(ROW_WARPS * 32)
    attn_softmax_fwd_kernel(E *probs, E *pd, const float *S, const float *mask, float scale,
                            float p, float s, uint64_t seed, uint64_t offset,
                            const uint64_t *rng_base, size_t R, size_t HT, int T)
{
    if (rng_base) offset += *rng_base;   /* inside a CUDA graph (dropout.h) */
    const size_t r = (size_t)blockIdx.x * ROW_WARPS + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (r >= R) return; /* the whole warp */
    const size_t base = r * (size_t)T;
    const float *Sr = S + base;
    const float *mb = mask ? mask + (r / HT) * (size_t)T : NULL;
    float m = -INFINITY;
    for (int j = lane; j < T; j += 32) m = fmaxf(m, scale * Sr[j] + (mb ? mb[j] : 0.0f));
    m = warp_max(m);
    float sum = 0.0f;
    if (m != -INFINITY)
        for (int j = lane; j < T; j += 32) sum += expf(scale * Sr[j] + (mb ? mb[j] : 0.0f) - m);
    sum = warp_sum(sum);
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    /* groups of eight aligned to the flat index, covering this row */
    const uint64_t g0 = base / 8, g1 = (base + T - 1) / 8;
    for (uint64_t g = g0 + lane; g <= g1; g += 32) {
        const unsigned kb = pd ? keep_bits(g, p, seed, offset) : 0u;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const uint64_t idx = 8 * g + k;
            if (idx < base || idx >= base + T) continue;
            const int j = (int)(idx - base);
            const float e =
                m == -INFINITY ? 0.0f : expf(scale * Sr[j] + (mb ? mb[j] : 0.0f) - m) * inv;
            const E pv = from_f32<E>(e);
            probs[idx] = pv;
            if (pd) pd[idx] = from_f32<E>((kb >> k) & 1u ? to_f32(pv) * s : 0.0f);
        }
    }
}

/* forward: Pd = keep ? P s : 0,  P = softmax(S)
 *   so dP = keep ? dPd s : 0  and  dS = P (dP - rowsum(dP P)),  rowsum(dP P) = rowsum(dPd Pd) */
template <typename E>
__global__ void __launch_bounds__(ROW_WARPS * 32)
    attn_softmax_bwd_kernel(E *dS, const E *dPd, const E *probs, float p, float s,
                            uint64_t seed, uint64_t offset, const uint64_t *rng_base, size_t R,
                            int T)
{
    if (rng_base) offset += *rng_base;
    const size_t r = (size_t)blockIdx.x * ROW_WARPS + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (r >= R) return;
    const size_t base = r * (size_t)T;
    const uint64_t g0 = base / 8, g1 = (base + T - 1) / 8;
    float rs = 0.0f;
    for (uint64_t g = g0 + lane; g <= g1; g += 32) {
        const unsigned kb = keep_bits(g, p, seed, offset);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const uint64_t idx = 8 * g + k;
            if (idx < base || idx >= base + T) continue;
            const float pv = to_f32(probs[idx]);
            /* Pd as the forward stored it (rounded to E) */
            const float pdv = p == 0.0f ? pv : ((kb >> k) & 1u ? to_f32(from_f32<E>(pv * s)) : 0.0f);
            rs += to_f32(dPd[idx]) * pdv;
        }
    }
    rs = warp_sum(rs);
    /* each lane rewrites only the elements it read: dS may alias dPd */
    for (uint64_t g = g0 + lane; g <= g1; g += 32) {
        const unsigned kb = keep_bits(g, p, seed, offset);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const uint64_t idx = 8 * g + k;
            if (idx < base || idx >= base + T) continue;
            const float pv = to_f32(probs[idx]);
            const float dp = (kb >> k) & 1u ? to_f32(dPd[idx]) * s : 0.0f;
            dS[idx] = from_f32<E>(pv * (dp - rs));
        }
    }
}

unsigned row_blocks(size_t R, const char *what)
{
    const size_t b = (R + ROW_WARPS - 1) / ROW_WARPS;
    CT_ASSERT(b <= 0x7fffffffu, "%s: %zu rows is too many", what, R);
    return (unsigned)b;
}

/* C[bh] = alpha op(A[bh]) op(B[bh]) + beta C[bh] over the BH heads. */
void attn_mm(Ctx *c, void *C, DType tc, const void *A, const void *Bm, DType tab, size_t M,
             size_t N, size_t K, int ta, int tb, float alpha, float beta, size_t BH,
             size_t sA, size_t sB, size_t sC)
{
    matmul_cuda(c->lt, matmul_plan_cache_get(c), c->workspace, c->workspace_bytes, c->stream,
                C, tc, A, Bm, tab, (int)M, (int)N, (int)K, ta, tb, alpha, beta, (int)BH,
                (long long)sA, (long long)sB, (long long)sC, c->allow_tf32, NULL);
}

void attn_check_sizes(size_t B, size_t H, size_t T, size_t Dh, const char *what)
{
    CT_ASSERT(T <= 0x7fffffff && Dh <= 0x7fffffff && B * H <= 0x7fffffff,
              "%s: B = %zu, H = %zu, T = %zu, Dh = %zu out of range", what, B, H, T, Dh);
}

} // namespace

extern "C" void attention_softmax_forward_cuda(void *probs, void *pd, const float *S,
                                               const float *mask, DType dt, float scale,
                                               float p, uint64_t seed, uint64_t offset,
                                               const uint64_t *rng_base, size_t B, size_t H,
                                               size_t T, cudaStream_t s)
{
    const size_t R = B * H * T;
    if (R == 0 || T == 0) return;
    CT_ASSERT(T <= 0x7fffffff, "attention_softmax_forward_cuda: T = %zu out of range", T);
    const unsigned blocks = row_blocks(R, "attention_softmax_forward_cuda");
    const float sc = drop_scale(p);
    dispatch_float(dt, "attention_softmax_forward_cuda", [&](auto tag) {
        using Tp = decltype(tag);
        attn_softmax_fwd_kernel<Tp><<<blocks, ROW_WARPS * 32, 0, s>>>(
            (Tp *)probs, p > 0.0f ? (Tp *)pd : NULL, S, mask, scale, p, sc, seed, offset,
            rng_base, R, H * T, (int)T);
        CUDA_CHECK_LAUNCH();
    });
}

extern "C" void attention_softmax_backward_cuda(void *dS, const void *dPd, const void *probs,
                                                DType dt, float p, uint64_t seed,
                                                uint64_t offset, const uint64_t *rng_base,
                                                size_t rows, size_t T, cudaStream_t s)
{
    if (rows == 0 || T == 0) return;
    CT_ASSERT(T <= 0x7fffffff, "attention_softmax_backward_cuda: T = %zu out of range", T);
    const unsigned blocks = row_blocks(rows, "attention_softmax_backward_cuda");
    const float sc = drop_scale(p);
    dispatch_float(dt, "attention_softmax_backward_cuda", [&](auto tag) {
        using Tp = decltype(tag);
        attn_softmax_bwd_kernel<Tp><<<blocks, ROW_WARPS * 32, 0, s>>>(
            (Tp *)dS, (const Tp *)dPd, (const Tp *)probs, p, p > 0.0f ? sc : 1.0f, seed,
            offset, rng_base, rows, (int)T);
        CUDA_CHECK_LAUNCH();
    });
}

extern "C" void attention_forward_cuda(Ctx *c, void *out, void *probs, const void *q,
                                       const void *k, const void *v, const float *mask,
                                       DType dt, float p, uint64_t seed, uint64_t offset,
                                       size_t B, size_t H, size_t T, size_t Dh)
{
    const size_t BH = B * H, TT = T * T, TD = T * Dh, es = dtype_size(dt);
    if (BH == 0 || T == 0) return;
    attn_check_sizes(B, H, T, Dh, "attention_forward_cuda");
    const float scale = 1.0f / sqrtf((float)Dh);
    /* S = q k^T in f32 */
    float *S = (float *)mem_alloc(c, BH * TT * sizeof(float));
    attn_mm(c, S, DT_F32, q, k, dt, T, T, Dh, 0, 1, 1.0f, 0.0f, BH, TD, TD, TT);
    /* P = softmax(scale S + mask), Pd = dropout(P) */
    void *pd = p > 0.0f ? mem_alloc(c, BH * TT * es) : NULL;
    attention_softmax_forward_cuda(probs, pd, S, mask, dt, scale, p, seed, offset, c->rng_base,
                                   B, H, T, c->stream);
    mem_free(c, S, BH * TT * sizeof(float));
    /* out = Pd v */
    attn_mm(c, out, dt, pd ? pd : probs, v, dt, T, Dh, T, 0, 0, 1.0f, 0.0f, BH, TT, TD, TD);
    if (pd) mem_free(c, pd, BH * TT * es);
}

/* forward: out = Pd v,  Pd = dropout(softmax(scale q k^T + mask))
 *   so dv = Pd^T dout,  dS = P (dP - rowsum(dPd Pd)) with dPd = dout v^T,
 *      dq = scale dS k,  dk = scale dS^T q */
extern "C" void attention_backward_cuda(Ctx *c, void *dq, void *dk, void *dv, const void *dout,
                                        const void *q, const void *k, const void *v,
                                        const void *probs, DType dt, float p, uint64_t seed,
                                        uint64_t offset, size_t B, size_t H, size_t T,
                                        size_t Dh, int accum_q, int accum_k, int accum_v)
{
    const size_t BH = B * H, TT = T * T, TD = T * Dh, es = dtype_size(dt);
    if (BH == 0 || T == 0) return;
    attn_check_sizes(B, H, T, Dh, "attention_backward_cuda");
    const float scale = 1.0f / sqrtf((float)Dh);
    if (dv) {
        /* Pd rebuilt from the stored P: the bits the forward multiplied by v */
        void *pd = NULL;
        if (p > 0.0f) {
            pd = mem_alloc(c, BH * TT * es);
            attention_dropout_cuda(pd, probs, dt, p, seed, offset, c->rng_base, BH * TT,
                                   c->stream);
        }
        attn_mm(c, dv, dt, pd ? pd : probs, dout, dt, T, Dh, T, 1, 0, 1.0f,
                accum_v ? 1.0f : 0.0f, BH, TT, TD, TD);
        if (pd) mem_free(c, pd, BH * TT * es);
    }
    if (!dq && !dk) return;
    void *dS = mem_alloc(c, BH * TT * es);
    attn_mm(c, dS, dt, dout, v, dt, T, T, Dh, 0, 1, 1.0f, 0.0f, BH, TD, TD, TT); /* dPd */
    attention_softmax_backward_cuda(dS, dS, probs, dt, p, seed, offset, c->rng_base, BH * T, T,
                                    c->stream);
    if (dq)
        attn_mm(c, dq, dt, dS, k, dt, T, Dh, T, 0, 0, scale, accum_q ? 1.0f : 0.0f, BH, TT, TD,
                TD);
    if (dk)
        attn_mm(c, dk, dt, dS, q, dt, T, Dh, T, 1, 0, scale, accum_k ? 1.0f : 0.0f, BH, TT, TD,
                TD);
    mem_free(c, dS, BH * TT * es);
}

extern "C" void attention_dropout_cuda(void *pd, const void *probs, DType dt, float p,
                                       uint64_t seed, uint64_t offset, const uint64_t *rng_base,
                                       size_t n, cudaStream_t s)
{
    if (n == 0) return;
    const uint32_t thr = drop_threshold(p);
    const float sc = drop_scale(p);
    const unsigned blocks = grid_for((n + 7) / 8, 256, 65535);
    dispatch_float(dt, "attention_dropout_cuda", [&](auto tag) {
        using E = decltype(tag);
        attn_dropout_kernel<E><<<blocks, 256, 0, s>>>((E *)pd, (const E *)probs, n, thr, sc, seed,
                                                      offset, rng_base);
    });
    CUDA_CHECK_LAUNCH();
}
