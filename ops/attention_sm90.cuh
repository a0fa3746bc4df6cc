/* attention_sm90.cuh — what the sm_90 attention kernels share
 * (ops/attention_sm90.cu: forward, ops/attention_sm90_bwd.cu: backward):
 * sizes, the mask's maximum, the dropout bits of a quad's two rows, the
 * product helpers (2^x and the type dispatch come from ops/mma_sm80.cuh and
 * ops/cuda_util.cuh). Everything is in an anonymous namespace: each file gets
 * its own copy. */
#ifndef CTRAIN_OPS_ATTENTION_SM90_CUH
#define CTRAIN_OPS_ATTENTION_SM90_CUH

#include <math.h>
#include <stdint.h>

#include "engine/error.h"
#include "attention_sm90.h"
#include "dropout_mask.h"
#include "cuda_util.cuh"
#include "dropout.h"
#include "mma_sm80.cuh"
#include "wgmma_sm90.cuh"

namespace {

constexpr int SM90_TILE = 64 * 64 * 2;   /* bytes of a 64 x 64 16-bit tile */
/* The forward streams K and V through a ring of three buffers: while tile n is
 * used, tile n + 1 is copied, and the P V product of tile n - 1 may still read
 * its V (it is waited for with tile n's S, not at tile n's top:
 * sm90_ring_ready). Its shared memory: Q (64 rows a warpgroup), K and V three
 * times each, + 1 KiB to align the base to 1,024. The backward's dq and dkdv
 * kernels stream theirs through the same ring; the clusters' form keeps two
 * buffers and sm90_tile_ready. */
constexpr int SM90_FWD_BUFS = 3;
/* the forward's running max moves only when a row's max passes it by more
 * than this (log2 units): P <= 2^8 between moves (ops/attention_sm90.cu) */
constexpr float SM90_LAZY = 8.0f;
__device__ __forceinline__ int sm90_fwd_next(int buf)
{
    return buf == SM90_FWD_BUFS - 1 ? 0 : buf + 1;
}
constexpr size_t sm90_smem_fwd(int nwg)
{
    return (size_t)(nwg + 2 * SM90_FWD_BUFS) * SM90_TILE + 1024;
}

/* the 64 keep bits of row 16 w + g (r 0) and of row 16 w + g + 8 (r 1) of a
 * 64 x 64 tile for thread lane = 4 g + t: lane t draws group (16 keys) t of
 * both rows, one Philox call each; rowg0 = the flat query row (bh T + i) of r 0 */
__device__ __forceinline__ void sm90_keep_rows(uint64_t (&kw)[2], uint64_t rowg0, int k0, int T,
                                               uint32_t thr, uint64_t seed, uint64_t offset,
                                               int lane)
{
    const int t = lane & 3;
    uint32_t w = 0;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const uint64_t col = (uint64_t)(k0 + 16 * t);
        const uint64_t grp = ((rowg0 + 8 * r) * (uint64_t)T + col) >> 4;
        w |= drop_keep16(seed, offset, grp, thr) << (16 * r);
    }
    uint32_t q[4];
#pragma unroll
    for (int s = 0; s < 4; s++) q[s] = __shfl_sync(FULL_MASK, w, (lane & ~3) | s);
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int sh = 16 * r;
        const uint64_t lo = ((q[0] >> sh) & 0xFFFFu) | (((q[1] >> sh) & 0xFFFFu) << 16);
        const uint64_t hi = ((q[2] >> sh) & 0xFFFFu) | (((q[3] >> sh) & 0xFFFFu) << 16);
        kw[r] = lo | (hi << 32);
    }
}

/* the mask terms log2e (mask_j - max mask) of a thread's 16 key columns
 * 8 c + 2 t (+ 1) of the tile at k0 (0 without a mask), each one fma with
 * nmm = -log2e max mask (sm90_mask_shift): the forward and both backward
 * kernels make every term this way, so P has the same bits in each */
__device__ __forceinline__ float sm90_mask_shift(float mmax)
{
    return -mmax * LOG2E_F32;
}
__device__ __forceinline__ void sm90_mask_terms(float (&mt)[16], const float *mb, int k0,
                                                float nmm, int t)
{
#pragma unroll
    for (int c = 0; c < 8; c++) {
        if (mb) {
            const float2 x = *reinterpret_cast<const float2 *>(mb + k0 + 8 * c + 2 * t);
            mt[2 * c] = fmaf(x.x, LOG2E_F32, nmm);
            mt[2 * c + 1] = fmaf(x.y, LOG2E_F32, nmm);
        } else {
            mt[2 * c] = mt[2 * c + 1] = 0.0f;
        }
    }
}

/* d = A B^T over K = 64: A [64, 64] and B [64, 64] K-major tiles at shared
 * addresses a and b (four wgmmas; not committed) */
template <typename E>
__device__ __forceinline__ void sm90_abt(float (&d)[32], uint32_t a, uint32_t b)
{
#pragma unroll
    for (int j = 0; j < 4; j++) wg_mma_ss<E, 0>(d, wg_desc(a, j, false), wg_desc(b, j, false), j);
}
/* d (+)= A B over K = 64: A from registers (wg_acc_to_a, four k slices), B a
 * [64, 64] tile read MN-major at b; first: d is overwritten (not committed) */
template <typename E>
__device__ __forceinline__ void sm90_ab(float (&d)[32], const uint32_t (&a)[4][4], uint32_t b,
                                        bool first)
{
#pragma unroll
    for (int j = 0; j < 4; j++) wg_mma_rs<E, 1>(d, a[j], wg_desc(b, j, true), !first || j > 0);
}

/* a 16-bit pair stored at p */
__device__ __forceinline__ void st_pair(void *p, uint32_t v)
{
    *reinterpret_cast<uint32_t *>(p) = v;
}

/* Keep bit of accumulator column 8 c + 2 t + e from a row's 64 bits already
 * shifted right by 2 t (ks = kw >> 2 t): a constant position once c and e are
 * unrolled, where a shift by 8 c + 2 t + e of the 64-bit word is not. */
__device__ __forceinline__ bool sm90_kept(uint64_t ks, int c, int e)
{
    return (ks >> (8 * c + e)) & 1u;
}

/* the top of a tile's step in the forward's ring: this thread's copies of
 * tile n landed and are visible to wgmma, then a barrier: everyone's did, and
 * every warpgroup has waited (in its step n - 1) for its products of tile
 * n - 2, so that tile's buffers are free for tile n + 1 */
__device__ __forceinline__ void sm90_ring_ready()
{
    cp_async_wait<0>();
    fence_proxy_async();
    __syncthreads();
}

/* the same with two buffers (the backward's clusters' form): first this warpgroup's products
 * of the step before are done, so the other buffer is free after the barrier */
__device__ __forceinline__ void sm90_tile_ready()
{
    wg_wait<0>();
    sm90_ring_ready();
}

} // namespace

#endif
