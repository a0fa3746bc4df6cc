/* wgmma_sm90.cuh — Hopper's warpgroup matrix multiply (wgmma) from inline PTX,
 * no CUTLASS: what the sm_90 attention kernels (ops/attention_sm90.cu) share.
 * The layouts below were checked on an H100 by scripts/wgmma_probe.cu (each
 * form against a double-precision reference) before any kernel used them.
 *
 * A warpgroup is 4 consecutive warps (128 threads) of a block. One
 * wgmma.m64n64k16 multiplies a 64 x 16 slice of A by a 16 x 64 slice of B
 * into 64 x 64 f32 accumulators spread over the warpgroup, 32 a thread:
 *   thread (warp w, lane = 4 g + t) holds rows 16 w + g and 16 w + g + 8;
 *   d[4 i + 0, 1] = row 16 w + g,     columns 8 i + 2 t, + 1  (i = 0 .. 7)
 *   d[4 i + 2, 3] = row 16 w + g + 8, the same columns
 * which is mma.sync's m16n8 layout four warps high. A may come from
 * registers in the layout of mma.sync's A fragment: for k slice j the four
 * registers are the (f16 / bf16) pairs of accumulator entries d[8 j + 0, 1],
 * d[8 j + 2, 3], d[8 j + 4, 5], d[8 j + 6, 7], so S's accumulator becomes P's
 * operand without a shuffle (wg_acc_to_a).
 *
 * Shared-memory operands are described by a 64-bit descriptor (start address,
 * leading and stride byte offsets, swizzle mode). Every tile here is 64
 * elements (128 bytes) wide and stored in the 128-byte swizzle: row r at
 * 128 r bytes, its 16-byte chunk c stored at chunk c ^ (r % 8) (sw128_off);
 * the tile starts on 1,024 bytes. Two ways to read such a tile:
 *   K-major   rows are M (or N), K runs along a row: A of S = Q K^T (Q) and
 *             its B (K, as K^T). Slice j starts 32 j bytes into the tile;
 *             SBO = 1,024 (one 8-row group to the next), LBO unused.
 *   MN-major  rows are K, N runs along a row (B read transposed, the tnsp-b
 *             immediate 1): V in O = P V, dO in dV = P^T dO, Q in dK = dS^T Q,
 *             K in dQ = dS K: a [tokens, Dh] tile as it is in memory. Slice j
 *             starts 16 rows (2,048 bytes) in; SBO = 1,024, LBO unused at N 64.
 * Ordering: a wgmma reads its accumulators and shared memory asynchronously.
 * wg_fence() before the first wgmma of a batch (the registers written by
 * ordinary instructions are ready), wg_commit() after it, wg_wait<N>() until
 * at most N batches are in flight; wg_keep(d) after a wait, so that no read
 * of d is scheduled above the wait (the asm's outputs carry no such order).
 * Shared memory written by cp.async or ordinary stores is made visible to
 * wgmma (the async proxy) by fence_proxy_async() in each writing thread
 * before the barrier that publishes it.
 * On anything but sm_90a the wrappers compile to traps (the kernels are
 * launched only where attention_sm90_supports says so).
 */
#ifndef CTRAIN_OPS_WGMMA_SM90_CUH
#define CTRAIN_OPS_WGMMA_SM90_CUH

#include <stdint.h>
#include <type_traits>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include "mma_sm80.cuh"

namespace {

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define WG_ARCH_OK 1
#else
#define WG_ARCH_OK 0
#endif

/* byte offset of element (r, c) of a 64-wide 16-bit tile in the 128-byte swizzle */
__host__ __device__ __forceinline__ uint32_t sw128_off(int r, int c)
{
    return (uint32_t)(r * 128 + (((c >> 3) ^ (r & 7)) << 4) + ((c & 7) << 1));
}

/* descriptor of k slice j (16 wide) of a swizzled tile at shared address base */
__device__ __forceinline__ uint64_t wg_desc(uint32_t base, int j, bool mn_major)
{
    const uint32_t addr = base + (uint32_t)j * (mn_major ? 2048u : 32u);
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)(16 >> 4) << 16) |
           ((uint64_t)(1024 >> 4) << 32) | (1ull << 62);
}

#define WG_ACC_OPS(d)                                                                         \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),       \
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]),            \
        "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]),         \
        "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),         \
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),         \
        "+f"(d[31])
#define WG_ACC_LIST                                                                           \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "  \
    "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define WG_SS(T, TA, TB)                                                                      \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                 \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." T "." T " " WG_ACC_LIST        \
                 ", %32, %33, p, 1, 1, " TA ", " TB ";\n}\n"                                  \
                 : WG_ACC_OPS(d)                                                              \
                 : "l"(da), "l"(db), "r"(acc))
#define WG_RS(T, TB)                                                                          \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                 \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." T "." T " " WG_ACC_LIST        \
                 ", {%32, %33, %34, %35}, %36, p, 1, 1, " TB ";\n}\n"                         \
                 : WG_ACC_OPS(d)                                                              \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc))

/* d (+)= A B over one k slice, A (TA 0) K-major, (TA 1) MN-major, B (TB 0)
 * K-major, (TB 1) MN-major, both in shared memory; acc 0 overwrites d. E:
 * __half or __nv_bfloat16. */
template <typename E, int TB, int TA = 0>
__device__ __forceinline__ void wg_mma_ss(float (&d)[32], uint64_t da, uint64_t db, int acc)
{
    static_assert(!TA || TB, "A MN-major only with B MN-major (the one form used)");
#if WG_ARCH_OK
    if constexpr (std::is_same<E, __half>::value) {
        if constexpr (TA) WG_SS("f16", "1", "1");
        else if constexpr (TB) WG_SS("f16", "0", "1");
        else WG_SS("f16", "0", "0");
    } else {
        if constexpr (TA) WG_SS("bf16", "1", "1");
        else if constexpr (TB) WG_SS("bf16", "0", "1");
        else WG_SS("bf16", "0", "0");
    }
#else
    (void)d; (void)da; (void)db; (void)acc;
    __trap();
#endif
}
/* the same with A's slice from four registers (wg_acc_to_a) */
template <typename E, int TB>
__device__ __forceinline__ void wg_mma_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t db,
                                          int acc)
{
#if WG_ARCH_OK
    if constexpr (std::is_same<E, __half>::value) {
        if constexpr (TB) WG_RS("f16", "1"); else WG_RS("f16", "0");
    } else {
        if constexpr (TB) WG_RS("bf16", "1"); else WG_RS("bf16", "0");
    }
#else
    (void)d; (void)a; (void)db; (void)acc;
    __trap();
#endif
}
#undef WG_SS
#undef WG_RS

__device__ __forceinline__ void wg_fence()
{
#if WG_ARCH_OK
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wg_commit()
{
#if WG_ARCH_OK
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N> __device__ __forceinline__ void wg_wait()
{
#if WG_ARCH_OK
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
/* after wg_wait: the accumulators' later reads stay below it */
__device__ __forceinline__ void wg_keep(float (&d)[32])
{
#pragma unroll
    for (int i = 0; i < 32; i++) asm volatile("" : "+f"(d[i])::"memory");
}
__device__ __forceinline__ void fence_proxy_async()
{
#if WG_ARCH_OK
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

/* Thread-block clusters (the fused backward's dQ, ops/attention_sm90_bwd.cu):
 * the blocks of a cluster run at once on one GPC and read each other's shared
 * memory. cluster_map gives the address in block rank's shared memory of the
 * local address addr; barrier.cluster.arrive (release) and .wait (acquire)
 * are the two halves of a barrier over every thread of the cluster: the
 * stores before an arrive are seen by the loads after the matching wait. */
__device__ __forceinline__ uint32_t cluster_rank()
{
    uint32_t r = 0;
#if WG_ARCH_OK
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
#endif
    return r;
}
__device__ __forceinline__ uint32_t cluster_map(uint32_t addr, uint32_t rank)
{
    uint32_t d = addr;
#if WG_ARCH_OK
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(d) : "r"(addr), "r"(rank));
#else
    (void)rank;
#endif
    return d;
}
__device__ __forceinline__ float4 ld_cluster_f4(uint32_t addr)
{
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#if WG_ARCH_OK
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "r"(addr)
                 : "memory");
#else
    (void)addr;
#endif
    return v;
}
__device__ __forceinline__ void cluster_arrive()
{
#if WG_ARCH_OK
    asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_wait()
{
#if WG_ARCH_OK
    asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#endif
}

/* A's registers for k slice j from an accumulator (columns 16 j .. 16 j + 15),
 * rounded to E */
template <typename E>
__device__ __forceinline__ void wg_acc_to_a(uint32_t (&a)[4], const float (&d)[32], int j)
{
    a[0] = pack2<E>(d[8 * j + 0], d[8 * j + 1]);
    a[1] = pack2<E>(d[8 * j + 2], d[8 * j + 3]);
    a[2] = pack2<E>(d[8 * j + 4], d[8 * j + 5]);
    a[3] = pack2<E>(d[8 * j + 6], d[8 * j + 7]);
}

/* Rows r0 .. r0 + ROWS - 1 (< T; zeros past it) of a [tokens, 64] head view
 * (row stride ld elements) into a swizzled tile at shared address dst, with
 * cp.async by NT threads (thread index tid): 8 threads a row, each 16 bytes,
 * so a warp reads 4 whole rows and writes 512 contiguous bytes. */
template <int ROWS, int NT, typename E>
__device__ __forceinline__ void wg_load_tile(uint32_t dst, const E *src, int r0, int T, size_t ld,
                                             int tid)
{
    static_assert(ROWS * 8 % NT == 0, "whole passes");
#pragma unroll
    for (int it = 0; it < ROWS * 8 / NT; it++) {
        const int x = tid + it * NT, r = x >> 3, ch = x & 7;
        const bool ok = r0 + r < T;
        const E *s = ok ? src + (size_t)(r0 + r) * ld + ch * 8 : src;
        cp_async16(dst + sw128_off(r, 8 * ch), s, ok);
    }
}

} // namespace

#endif
