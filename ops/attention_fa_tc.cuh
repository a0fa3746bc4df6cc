/* attention_fa_tc.cuh — what the tensor-core attention kernels share
 * (ops/attention_fa_tc.cu: forward, ops/attention_fa_tc_bwd.cu: backward):
 * tile sizes, the PTX wrappers (mma.sync, ldmatrix, cp.async), the block-level
 * pieces (tile loads, mask maximum, dropout bits) and the dispatch helpers.
 * The design, the fragment layouts and the online softmax are explained at
 * the top of ops/attention_fa_tc.cu. Everything here is in an anonymous
 * namespace: each of the two files gets its own copy. */
#ifndef CTRAIN_OPS_ATTENTION_FA_TC_CUH
#define CTRAIN_OPS_ATTENTION_FA_TC_CUH

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <type_traits>
#include "engine/error.h"
#include "engine/mem.h"
#include "attention_fused.h"
#include "dropout_mask.h"
#include "cuda_util.cuh"
#include "dropout.h"
#include "mma_sm80.cuh"

namespace {

constexpr int TC_WARPS = 4;
constexpr int TC_THREADS = TC_WARPS * 32;
constexpr int TC_ROWS = 64; /* rows a block owns, and rows of a streamed tile */

template <int DH> struct TcCfg {
    static_assert(DH == 32 || DH == 64 || DH == 128, "DH must be 32, 64 or 128");
    static constexpr int LDS = DH + 8;          /* shared row stride in elements (padded) */
    static constexpr int TILE = TC_ROWS * LDS;  /* elements of one 64-row tile */
    static constexpr int KS = DH / 16;          /* k-steps of 16 over the head width */
    static constexpr int NT = DH / 8;           /* n-tiles of 8 over the head width */
    static constexpr int CHUNKS = DH / 8;       /* 16-byte chunks per row */
    /* shared bytes: tiles + per-tile f32 aux arrays (2 x 64 each) + keep words (2 x 64) */
    static constexpr size_t smem(int tiles, int aux_arrays)
    {
        return (size_t)tiles * TILE * 2 + (size_t)aux_arrays * 2 * 64 * 4 + 2 * 64 * 8;
    }
    static constexpr size_t SMEM_FWD = smem(5, 1);  /* Q, 2 K, 2 V; mask */
    static constexpr size_t SMEM_DQ = smem(6, 1);   /* Q, dO, 2 K, 2 V; mask */
    static constexpr size_t SMEM_DKDV = smem(6, 2); /* K, V, 2 Q, 2 dO; lse, D */
};

/* ---- (the PTX wrappers, ex2 among them: ops/mma_sm80.cuh) ---- */

/* dst[e, e+1] = (x, y) (+ the old values when accum), rounded once to E */
template <typename E>
__device__ __forceinline__ void store2(E *dst, float x, float y, int accum)
{
    uint32_t *d = reinterpret_cast<uint32_t *>(dst);
    if (accum) {
        const float2 o = unpack2<E>(*d);
        x += o.x;
        y += o.y;
    }
    *d = pack2<E>(x, y);
}

/* ---- block-level pieces ---- */

/* Key j's mask term in log2 units, less the row's maximum; -inf past T. */
__device__ __forceinline__ float tc_mask_log2(const float *mb, float mmax, int j, int T)
{
    return j < T ? (mb ? (mb[j] - mmax) * LOG2E_F32 : 0.0f) : -INFINITY;
}


/* Layouts. [B, H, T, Dh] (bthd 0): head bh = b H + h is T rows of DH, row
 * stride DH. [B, T, H, Dh] (bthd 1, BERT's projections split by a reshape
 * alone): head (b, h) starts at (b T H + h) DH, row stride H DH. Everything
 * indexed per row (lse, D, the dropout bits) keeps the [B, H, T] order, so
 * both layouts draw and save the same mask. */
template <int DH>
__device__ __forceinline__ size_t tc_head_offset(int bh, int H, int T, int bthd)
{
    if (!bthd) return (size_t)bh * T * DH;
    const int b = bh / H, h = bh - b * H;
    return ((size_t)b * T * H + h) * DH;
}
template <int DH> __device__ __forceinline__ int tc_row_stride(int H, int bthd)
{
    return bthd ? H * DH : DH;
}

/* Rows r0 .. r0+63 (< T) of a head (global row stride ld): 64 x DH elements
 * to shared memory (row stride LDS) with cp.async; rows past T become zeros. */
template <typename E, int DH>
__device__ __forceinline__ void tc_load_tile(E *dst, const E *src, int r0, int T, int ld)
{
    using C = TcCfg<DH>;
    static_assert(TC_ROWS * C::CHUNKS % TC_THREADS == 0, "whole passes of the block");
#pragma unroll
    for (int it = 0; it < TC_ROWS * C::CHUNKS / TC_THREADS; it++) {
        const int x = threadIdx.x + it * TC_THREADS;
        const int r = x / C::CHUNKS, ch = x % C::CHUNKS;
        const bool ok = r0 + r < T;
        const E *s = ok ? src + (size_t)(r0 + r) * ld + ch * 8 : src;
        cp_async16(smem_u32(dst + r * C::LDS + ch * 8), s, ok);
    }
}

/* Keep bits of keys col .. col+7 (col < T) of flat query row `row` (= bh T + i):
 * bit e = element row T + col + e (ops/dropout_mask.h); 0 for keys past T. */
__device__ __forceinline__ unsigned tc_keep8(uint64_t row, int col, int T, uint32_t thr,
                                             uint64_t seed, uint64_t offset)
{
    const uint64_t idx0 = row * (uint64_t)T + (uint64_t)col;
    if ((idx0 & 7) == 0 && col + 8 <= T) /* one whole group (always when T % 8 == 0) */
        return drop_keep8(seed, offset, idx0 >> 3, thr);
    unsigned bits = 0; /* a run that straddles two groups, or ends past T */
    for (uint64_t gg = idx0 >> 3; gg <= (idx0 + 7) >> 3; gg++) {
        const unsigned kb = drop_keep8(seed, offset, gg, thr);
#pragma unroll
        for (int w = 0; w < 8; w++) {
            const int64_t e = (int64_t)(8 * gg + w) - (int64_t)idx0; /* key col + e */
            if (e >= 0 && e < 8 && col + (int)e < T && ((kb >> w) & 1u)) bits |= 1u << e;
        }
    }
    return bits;
}

/* keep[x] bit y = keep bit of element (query r0 + x, key c0 + y) of head bh
 * (flat index ((bh T + r0 + x) T + c0 + y)), for x, y < 64; 0 outside T x T.
 * Thread work item = (x, byte): the 8 keys c0 + 8 byte .. + 7 of row x. */
__device__ void tc_keep_tile(uint64_t *keep, uint64_t bhT, int r0, int c0, int T, uint32_t thr,
                             uint64_t seed, uint64_t offset)
{
    unsigned char *kb = reinterpret_cast<unsigned char *>(keep);
    for (int x = threadIdx.x; x < 64 * 8; x += TC_THREADS) {
        const int row = r0 + (x >> 3), col = c0 + (x & 7) * 8;
        kb[x] = row < T && col < T
                    ? (unsigned char)tc_keep8(bhT + (uint64_t)row, col, T, thr, seed, offset)
                    : 0; /* byte x & 7 of keep[x >> 3]: little-endian */
    }
}

/* Rows r0 .. r0+63 (< T) of a head (row stride ld) set to 0 (a block whose
 * mask row is all -inf; skipped when accumulating: adding 0). */
template <typename E, int DH> __device__ void tc_zero_rows(E *dst, int r0, int T, int ld)
{
    if (!dst) return;
    for (int x = threadIdx.x; x < TC_ROWS * DH; x += TC_THREADS) {
        const int r = x / DH;
        if (r0 + r < T) dst[(size_t)(r0 + r) * ld + x % DH] = from_f32<E>(0.0f);
    }
}

/* B fragments of two n-tiles (rows n0..n0+15 of an n-major tile, columns
 * k0..k0+15): b[0], b[1] for n-tile n0, b[2], b[3] for n0 + 8. */
template <int LDS>
__device__ __forceinline__ void ldsm_b_nmajor(uint32_t (&b)[4], const void *tile, int n0, int k0,
                                              int lane)
{
    const int row = n0 + (lane & 7) + ((lane >> 4) << 3), col = k0 + ((lane >> 3) & 1) * 8;
    ldsm_x4(b, smem_u32((const unsigned short *)tile + row * LDS + col));
}
/* B fragments of two n-tiles from a k-major tile (rows k0..k0+15 = k,
 * columns n0..n0+15 = n), via ldmatrix.trans. */
template <int LDS>
__device__ __forceinline__ void ldsm_b_kmajor(uint32_t (&b)[4], const void *tile, int k0, int n0,
                                              int lane)
{
    const int row = k0 + (lane & 7) + ((lane >> 3) & 1) * 8, col = n0 + (lane >> 4) * 8;
    ldsm_x4_t(b, smem_u32((const unsigned short *)tile + row * LDS + col));
}
/* A fragment of rows m0..m0+15, columns k0..k0+15 of a row-major tile */
template <int LDS>
__device__ __forceinline__ void ldsm_a(uint32_t (&a)[4], const void *tile, int m0, int k0,
                                       int lane)
{
    ldsm_x4(a, smem_u32((const unsigned short *)tile + (m0 + (lane & 15)) * LDS + k0 +
                        (lane >> 4) * 8));
}

/* A fragment for the k-step over columns 16kk .. 16kk+15 of a 16-row f32
 * C-fragment array (n-tiles 2kk and 2kk + 1), rounded to E. */
template <typename E>
__device__ __forceinline__ void c_to_a(uint32_t (&a)[4], const float (&c0)[4], const float (&c1)[4])
{
    a[0] = pack2<E>(c0[0], c0[1]);
    a[1] = pack2<E>(c0[2], c0[3]);
    a[2] = pack2<E>(c1[0], c1[1]);
    a[3] = pack2<E>(c1[2], c1[3]);
}

void tc_check_sizes(size_t B, size_t H, size_t T, const char *what)
{
    CT_ASSERT(T <= 0x7fffffff && B * H <= 65535 && H > 0,
              "%s: B = %zu, H = %zu, T = %zu out of range (B H <= 65535)", what, B, H, T);
}

} // namespace

#endif
