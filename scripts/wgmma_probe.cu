/* wgmma_probe.cu — the first step of attention kernels of ctrain's own on
 * sm_90 (docs/kernels.md, "What is left at seq 512 fp8"): Hopper's warpgroup
 * matrix multiply (wgmma) from plain CUDA C++ with inline PTX, no CUTLASS.
 * A measurement and a check of the layouts, not a test; it needs sm_90 (built
 * for sm_90a: wgmma exists only there).
 *
 *   make build/wgmma_probe     (CUDA builds with 90 in ARCH)
 *   build/wgmma_probe
 *
 * What it settles before any attention kernel is written on it:
 *   1. The shared-memory matrix descriptor of a K-major operand without
 *      swizzle. The tile is stored as 8 x 8 "core matrices" (8 rows of 16
 *      bytes, 128 contiguous bytes each); core (r / 8, k / 8) of a 64 x 64
 *      bf16 tile sits at ((r / 8) 8 + k / 8) 128 bytes. The descriptor holds
 *      the start address, a leading-dimension byte offset (LBO) and a
 *      stride-dimension byte offset (SBO), each >> 4. Which of the two steps
 *      along K (128 bytes here) and which along the rows (1,024) is read from
 *      the ISA's prose; the probe runs both assignments and says which one
 *      gives A B^T.
 *   2. The accumulator's layout, m64n64 f32: warp w of the warpgroup holds
 *      rows 16 w + lane / 4 and that + 8; for each 8-column block i, columns
 *      8 i + 2 (lane % 4) and + 1, as d[4 i + 0 .. 3] = (row, c), (row, c + 1),
 *      (row + 8, c), (row + 8, c + 1): mma.sync's m16n8 layout, four warps
 *      high.
 *   3. A from registers (the form O += P V takes, P never written to shared
 *      memory): for a 16-wide K slice j, a thread's four 32-bit registers
 *      are the bf16 pairs of its accumulator entries d[8 j + 0, 1], d[8 j +
 *      2, 3], d[8 j + 4, 5], d[8 j + 6, 7], so S's accumulator becomes P's
 *      operand without a shuffle.
 *   4. A first flash-attention forward (p 0, no mask) built on 1-3, against a
 *      double-precision reference, and its time at BERT-large's seq 512.
 *   5. TMA copies of two 64 x 64 tiles of a 2-D tensor map in the 128-byte
 *      swizzle, completed through an mbarrier, then multiplied by wgmma: the
 *      loads the pipelined forward will use (docs/kernels.md).
 * Each of 1-3 computes C = A B^T for A, B 64 x 64 bf16 (K = 64: four k16
 * steps) against a double-precision reference of the same bf16 values
 * (tolerance: f32 accumulation, 1e-3 relative to the largest |C|), then
 * times 4,096 back-to-back tiles a block over 132 x 4 blocks (TFLOP/s, no
 * loads between: the tensor cores' rate with operands in shared memory).
 */
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops/wgmma_sm90.cuh"

#define CHECK(x)                                                                              \
    do {                                                                                      \
        cudaError_t e_ = (x);                                                                 \
        if (e_ != cudaSuccess) {                                                              \
            fprintf(stderr, "wgmma_probe: %s failed: %s\n", #x, cudaGetErrorString(e_));     \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

enum { TILE = 64, CORE_BYTES = 128 };

/* byte offset of element (r, k) of a 64 x 64 bf16 K-major tile in core matrices */
__host__ __device__ static inline unsigned core_offset(int r, int k)
{
    return (unsigned)(((r / 8) * 8 + k / 8) * CORE_BYTES + (r % 8) * 16 + (k % 8) * 2);
}

/* The 128-byte swizzle (TMA's SWIZZLE_128B, wgmma's layout type 1) is
 * ops/wgmma_sm90.cuh's sw128_off: row r at 128 r, its 16-byte chunk c / 8 at
 * chunk (c / 8) ^ (r % 8); a tile starts on 1,024 bytes. */

/* The descriptor of the k16 slice j of a tile at smem address base: the slice
 * starts two core matrices (2 x 128 bytes) further along K per j. swap: the
 * two offsets the other way round. No swizzle (bits 62-63 zero). */
__device__ static inline uint64_t desc_of(uint32_t base, int j, int swap)
{
    const uint32_t addr = base + (uint32_t)j * 2 * CORE_BYTES;
    const uint64_t along_k = CORE_BYTES, along_rows = 8 * CORE_BYTES;
    const uint64_t lbo = swap ? along_rows : along_k, sbo = swap ? along_k : along_rows;
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((lbo >> 4) << 16) | ((sbo >> 4) << 32);
}

/* The products, bf16, from ops/wgmma_sm90.cuh: d (+)= A B^T over one k16
 * slice with both operands in shared memory (ss) or A from four registers in
 * the layout of 3. (rs); the _tb forms read B MN-major (transposed, A B).
 * accumulate 0 overwrites d. */
using BF = __nv_bfloat16;
__device__ static inline void mma_ss(float (&d)[32], uint64_t da, uint64_t db, int accumulate)
{
    wg_mma_ss<BF, 0>(d, da, db, accumulate);
}
__device__ static inline void mma_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t db,
                                     int accumulate)
{
    wg_mma_rs<BF, 0>(d, a, db, accumulate);
}
__device__ static inline void mma_ss_tb(float (&d)[32], uint64_t da, uint64_t db, int accumulate)
{
    wg_mma_ss<BF, 1>(d, da, db, accumulate);
}
__device__ static inline void mma_rs_tb(float (&d)[32], const uint32_t (&a)[4], uint64_t db,
                                        int accumulate)
{
    wg_mma_rs<BF, 1>(d, a, db, accumulate);
}

/* The 128-byte-swizzle descriptor (layout type 1 in bits 62-63) of k16 slice
 * j of a 64-wide tile at base: K-major (the rows are M or N, K along a row):
 * the slice starts 32 bytes further along the row, SBO 1,024 bytes from one
 * 8-row group to the next, LBO unused (1); MN-major (the rows are K, N along
 * a row, B read transposed): the slice starts 16 rows (2,048 bytes) further,
 * SBO 1,024 from one 8-row group of K to the next, LBO (between 64-wide
 * groups along N) unused at N 64. swap: LBO and SBO the other way round. */
__device__ static inline uint64_t desc_sw128(uint32_t base, int j, int mn_major, int swap)
{
    const uint32_t addr = base + (uint32_t)j * (mn_major ? 2048u : 32u);
    const uint64_t lbo = swap ? 1024 : 16, sbo = swap ? 16 : 1024;
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((lbo >> 4) << 16) | ((sbo >> 4) << 32) |
           (1ull << 62);
}

/* No-swizzle descriptor of k16 slice j of an MN-major 64 x 64 tile stored as
 * core matrices of 8 K-rows x 8 N-values (16 bytes along N), core (k / 8, n /
 * 8) at ((n / 8) 8 + k / 8) 128 bytes (mn_offset): the slice starts 2 cores
 * (256 bytes) further along K; swap 0: LBO along N (1,024), SBO along K (128),
 * swap 1 the other way. */
__host__ __device__ static inline unsigned mn_offset(int k, int n)
{
    return (unsigned)(((n / 8) * 8 + k / 8) * CORE_BYTES + (k % 8) * 16 + (n % 8) * 2);
}
__device__ static inline uint64_t desc_mn(uint32_t base, int j, int swap)
{
    const uint32_t addr = base + (uint32_t)j * 2 * CORE_BYTES;
    const uint64_t along_n = 8 * CORE_BYTES, along_k = CORE_BYTES;
    const uint64_t lbo = swap ? along_k : along_n, sbo = swap ? along_n : along_k;
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((lbo >> 4) << 16) | ((sbo >> 4) << 32);
}

__device__ static inline void wg_commit_wait(void)
{
    wg_commit();
    wg_wait<0>();
}

/* C (64 x 64, row-major f32) from the accumulator layout of 2. */
__device__ static inline void store_acc(float *C, const float (&d)[32])
{
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, r = 16 * w + lane / 4;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const int c = 8 * i + 2 * (lane % 4);
        C[r * TILE + c] = d[4 * i];
        C[r * TILE + c + 1] = d[4 * i + 1];
        C[(r + 8) * TILE + c] = d[4 * i + 2];
        C[(r + 8) * TILE + c + 1] = d[4 * i + 3];
    }
}

/* A's registers for k16 slice j of a row-major 64 x 64 bf16 matrix in global
 * memory, as 3. lays them out (thread t of the warpgroup). */
__device__ static inline void a_regs(uint32_t a[4], const __nv_bfloat16 *A, int j)
{
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int r = 16 * w + lane / 4, k = 16 * j + 2 * (lane % 4);
    const __nv_bfloat16 *p0 = A + r * TILE + k, *p1 = A + (r + 8) * TILE + k;
    a[0] = pack2<BF>(__bfloat162float(p0[0]), __bfloat162float(p0[1]));
    a[1] = pack2<BF>(__bfloat162float(p1[0]), __bfloat162float(p1[1]));
    a[2] = pack2<BF>(__bfloat162float(p0[8]), __bfloat162float(p0[9]));
    a[3] = pack2<BF>(__bfloat162float(p1[8]), __bfloat162float(p1[9]));
}

/* one warpgroup (128 threads): C = A B^T, A and B row-major [64, 64] bf16 in
 * global memory; FORM 0 both from shared memory, 1 A from registers (a
 * template argument: no branch between the fence and the wait, which would
 * make the compiler insert waits of its own); swap as desc_of. reps > 1: the
 * product again that many times (timing), C the last. */
template <int FORM>
__global__ void __launch_bounds__(128) tile_kernel(float *C, const __nv_bfloat16 *A,
                                                   const __nv_bfloat16 *B, int swap, int reps)
{
    __shared__ __align__(128) unsigned char sa[TILE * TILE * 2], sb[TILE * TILE * 2];
    for (int i = threadIdx.x; i < TILE * TILE; i += blockDim.x) {
        const int r = i / TILE, k = i % TILE;
        *(__nv_bfloat16 *)(sa + core_offset(r, k)) = A[i];
        *(__nv_bfloat16 *)(sb + core_offset(r, k)) = B[i];
    }
    fence_proxy_async();
    __syncthreads();
    const uint32_t base_a = (uint32_t)__cvta_generic_to_shared(sa);
    const uint32_t base_b = (uint32_t)__cvta_generic_to_shared(sb);
    uint32_t ar[4][4];
    if (FORM == 1)
#pragma unroll
        for (int j = 0; j < 4; j++) a_regs(ar[j], A, j);
    float d[32];
#pragma unroll
    for (int i = 0; i < 32; i++) d[i] = 0.0f;
    for (int it = 0; it < reps; it++) {
        wg_fence();
#pragma unroll
        for (int j = 0; j < 4; j++) {
            if constexpr (FORM == 0)
                mma_ss(d, desc_of(base_a, j, swap), desc_of(base_b, j, swap), j > 0);
            else
                mma_rs(d, ar[j], desc_of(base_b, j, swap), j > 0);
        }
        wg_commit_wait();
    }
    store_acc(C + (size_t)blockIdx.x * TILE * TILE, d);
}

/* The layouts the attention kernels load with cp.async or TMA (no shuffles
 * of their own): MODE 1 A and B K-major in the 128-byte swizzle, C = A B^T;
 * MODE 2 A from registers, B MN-major in the 128-byte swizzle (B stored [K][N],
 * N along a row: V, dO, Q, K as the products P V, P^T dO, dS^T Q, dS K read
 * them), C = A B; MODE 3 the same with B MN-major in core matrices without
 * swizzle; MODE 4 A K-major and B MN-major, both in the swizzle and in shared
 * memory. swap as desc_sw128 / desc_mn. */
template <int MODE>
__global__ void __launch_bounds__(128) layout_kernel(float *C, const __nv_bfloat16 *A,
                                                     const __nv_bfloat16 *B, int swap)
{
    __shared__ __align__(1024) unsigned char sa[TILE * TILE * 2], sb[TILE * TILE * 2];
    for (int i = threadIdx.x; i < TILE * TILE; i += blockDim.x) {
        const int r = i / TILE, c = i % TILE;   /* A[r][c]; B[r][c]: (n, k) in 1, (k, n) else */
        *(__nv_bfloat16 *)(sa + sw128_off(r, c)) = A[i];
        *(__nv_bfloat16 *)(sb + (MODE == 3 ? mn_offset(r, c) : sw128_off(r, c))) = B[i];
    }
    fence_proxy_async();
    __syncthreads();
    const uint32_t base_a = (uint32_t)__cvta_generic_to_shared(sa);
    const uint32_t base_b = (uint32_t)__cvta_generic_to_shared(sb);
    uint32_t ar[4][4];
#pragma unroll
    for (int j = 0; j < 4; j++) a_regs(ar[j], A, j);
    float d[32];
#pragma unroll
    for (int i = 0; i < 32; i++) d[i] = 0.0f;
    wg_fence();
#pragma unroll
    for (int j = 0; j < 4; j++) {
        if constexpr (MODE == 1)
            mma_ss(d, desc_sw128(base_a, j, 0, swap), desc_sw128(base_b, j, 0, swap), j > 0);
        else if constexpr (MODE == 2)
            mma_rs_tb(d, ar[j], desc_sw128(base_b, j, 1, swap), j > 0);
        else if constexpr (MODE == 3)
            mma_rs_tb(d, ar[j], desc_mn(base_b, j, swap), j > 0);
        else
            mma_ss_tb(d, desc_sw128(base_a, j, 0, swap), desc_sw128(base_b, j, 1, swap), j > 0);
    }
    wg_commit_wait();
    store_acc(C, d);
}

static float frand(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) / 16777216.0f * 2.0f - 1.0f;
}

/* ---- 4. a first flash-attention forward on these pieces (p 0, no mask) ----
 * One warpgroup a block takes 64 query rows of one (b, h); [B, T, H, Dh = 64]
 * bf16 in, O the same and lse f32 [B, H, T] out. Per key tile of 64: K, and V
 * transposed (V^T: the P V product's B operand K-major along the keys), go
 * into shared memory in core matrices; S = Q K^T by four shared-memory
 * wgmmas; the online softmax on S's accumulator (a row's 64 values sit in
 * the four lanes of a quad, 16 each: two shuffles for its max and its sum),
 * exp2 of the scaled scores; P packed to bf16 straight from the accumulator
 * (3.) and O += P V by four register-A wgmmas after O's rows are rescaled.
 * No pipelining yet (each tile loaded, then used): the layouts first, the
 * speed after. T must be a multiple of 64 (no tail handling yet; the
 * probe's shapes are). */
template <int SWAP>
__global__ void __launch_bounds__(128) flash_fwd_kernel(__nv_bfloat16 *O, float *lse,
                                                        const __nv_bfloat16 *Q,
                                                        const __nv_bfloat16 *K,
                                                        const __nv_bfloat16 *V, int T, int H)
{
    __shared__ __align__(128) unsigned char sq[TILE * TILE * 2], sk[TILE * TILE * 2],
        sv[TILE * TILE * 2];
    const int q0 = blockIdx.x * TILE, b = blockIdx.y / H, h = blockIdx.y % H;
    const size_t row = (size_t)H * TILE;   /* elements from one token to the next */
    const __nv_bfloat16 *qb = Q + ((size_t)b * T * H + h) * TILE;
    for (int i = threadIdx.x; i < TILE * TILE; i += 128)
        *(__nv_bfloat16 *)(sq + core_offset(i / TILE, i % TILE)) =
            qb[(size_t)(q0 + i / TILE) * row + i % TILE];
    const uint32_t aq = (uint32_t)__cvta_generic_to_shared(sq);
    const uint32_t ak = (uint32_t)__cvta_generic_to_shared(sk);
    const uint32_t av = (uint32_t)__cvta_generic_to_shared(sv);
    const float c = 0.125f * 1.4426950408889634f;   /* 1 / sqrt(64), in log2 units */
    float o[32], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < 32; i++) o[i] = 0.0f;
    for (int k0 = 0; k0 < T; k0 += TILE) {
        __syncthreads();   /* the previous tile's products are done with sk, sv */
        const __nv_bfloat16 *kb = K + ((size_t)b * T * H + h) * TILE + (size_t)k0 * row;
        const __nv_bfloat16 *vb = V + ((size_t)b * T * H + h) * TILE + (size_t)k0 * row;
        for (int i = threadIdx.x; i < TILE * TILE; i += 128) {
            const int key = i / TILE, d = i % TILE;
            *(__nv_bfloat16 *)(sk + core_offset(key, d)) = kb[(size_t)key * row + d];
            *(__nv_bfloat16 *)(sv + core_offset(d, key)) = vb[(size_t)key * row + d];
        }
        fence_proxy_async();   /* Q's stores too, on the first tile */
        __syncthreads();
        float s[32];
#pragma unroll
        for (int i = 0; i < 32; i++) s[i] = 0.0f;   /* read as "+f"; j = 0 overwrites it */
        wg_fence();
#pragma unroll
        for (int j = 0; j < 4; j++) mma_ss(s, desc_of(aq, j, SWAP), desc_of(ak, j, SWAP), j > 0);
        wg_commit_wait();
        /* rows r (entries 4 i, 4 i + 1) and r + 8 (4 i + 2, 4 i + 3) */
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int i = 0; i < 8; i++) {
            mx[0] = fmaxf(mx[0], fmaxf(s[4 * i], s[4 * i + 1]) * c);
            mx[1] = fmaxf(mx[1], fmaxf(s[4 * i + 2], s[4 * i + 3]) * c);
        }
        float alpha[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
            const float mn = fmaxf(m[r], mx[r]);
            alpha[r] = exp2f(m[r] - mn);   /* 0 on the first tile (m = -inf) */
            m[r] = mn;
            l[r] *= alpha[r];
        }
        uint32_t pa[4][4];
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const float p0 = exp2f(s[4 * i] * c - m[0]), p1 = exp2f(s[4 * i + 1] * c - m[0]);
            const float p2 = exp2f(s[4 * i + 2] * c - m[1]), p3 = exp2f(s[4 * i + 3] * c - m[1]);
            l[0] += p0 + p1;
            l[1] += p2 + p3;
            pa[i / 2][2 * (i % 2)] = pack2<BF>(p0, p1);       /* row r, keys 16 j + ... */
            pa[i / 2][2 * (i % 2) + 1] = pack2<BF>(p2, p3);   /* row r + 8 */
            o[4 * i] *= alpha[0];
            o[4 * i + 1] *= alpha[0];
            o[4 * i + 2] *= alpha[1];
            o[4 * i + 3] *= alpha[1];
        }
        wg_fence();
#pragma unroll
        for (int j = 0; j < 4; j++) mma_rs(o, pa[j], desc_of(av, j, SWAP), 1);
        wg_commit_wait();
    }
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, r0 = 16 * w + lane / 4;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    }
    __nv_bfloat16 *ob = O + ((size_t)b * T * H + h) * TILE;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const int d = 8 * i + 2 * (lane % 4);
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const size_t t = (size_t)(q0 + r0 + 8 * r);
            *(__nv_bfloat162 *)(ob + t * row + d) =
                __floats2bfloat162_rn(o[4 * i + 2 * r] / l[r], o[4 * i + 2 * r + 1] / l[r]);
        }
    }
    if (lane % 4 == 0)
#pragma unroll
        for (int r = 0; r < 2; r++)
            lse[((size_t)b * H + h) * T + q0 + r0 + 8 * r] =
                (m[r] + log2f(l[r])) * 0.6931471805599453f;
}

/* 4.: against a double-precision softmax attention on B 2, H 2, T 192 (the
 * same bf16 inputs), then timed at BERT-large's seq 512 bs 32 (H 16). */
static int flash_check(int swap)
{
    const int B = 2, H = 2, T = 192, D = TILE;   /* T a multiple of 64: the kernel's rows */
    const size_t n = (size_t)B * T * H * D;
    __nv_bfloat16 *hq = (__nv_bfloat16 *)malloc(n * 2), *hk = (__nv_bfloat16 *)malloc(n * 2),
                  *hv = (__nv_bfloat16 *)malloc(n * 2), *ho = (__nv_bfloat16 *)malloc(n * 2);
    unsigned seed = 777u;
    for (size_t i = 0; i < n; i++) {
        hq[i] = __float2bfloat16(2.0f * frand(&seed));
        hk[i] = __float2bfloat16(2.0f * frand(&seed));
        hv[i] = __float2bfloat16(frand(&seed));
    }
    __nv_bfloat16 *dq, *dk, *dv, *dO;
    float *dl;
    CHECK(cudaMalloc(&dq, n * 2));
    CHECK(cudaMalloc(&dk, n * 2));
    CHECK(cudaMalloc(&dv, n * 2));
    CHECK(cudaMalloc(&dO, n * 2));
    CHECK(cudaMalloc(&dl, (size_t)B * H * T * 4));
    CHECK(cudaMemcpy(dq, hq, n * 2, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dk, hk, n * 2, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dv, hv, n * 2, cudaMemcpyHostToDevice));
    (swap ? flash_fwd_kernel<1> : flash_fwd_kernel<0>)<<<dim3(T / TILE, B * H), 128>>>(
        dO, dl, dq, dk, dv, T, H);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(ho, dO, n * 2, cudaMemcpyDeviceToHost));
    float *hl = (float *)malloc((size_t)B * H * T * sizeof(float));
    CHECK(cudaMemcpy(hl, dl, (size_t)B * H * T * 4, cudaMemcpyDeviceToHost));
    double err = 0.0, omax = 0.0, lerr = 0.0;
    double *sc = (double *)malloc((size_t)T * sizeof(double));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const size_t tq = (size_t)b * T + t;   /* token index over the batch */
                double mx = -1e300, sum = 0.0;
                for (int u = 0; u < T; u++) {
                    const size_t tk = (size_t)b * T + u;
                    double a = 0.0;
                    for (int d = 0; d < D; d++)
                        a += (double)__bfloat162float(hq[(tq * H + h) * D + d]) *
                             (double)__bfloat162float(hk[(tk * H + h) * D + d]);
                    sc[u] = a * 0.125;
                    mx = fmax(mx, sc[u]);
                }
                for (int u = 0; u < T; u++) sum += (sc[u] = exp(sc[u] - mx));
                lerr = fmax(lerr, fabs(mx + log(sum) - (double)hl[((size_t)b * H + h) * T + t]));
                for (int d = 0; d < D; d++) {
                    double a = 0.0;
                    for (int u = 0; u < T; u++)
                        a += sc[u] *
                             (double)__bfloat162float(hv[(((size_t)b * T + u) * H + h) * D + d]);
                    a /= sum;
                    omax = fmax(omax, fabs(a));
                    err = fmax(err, fabs(a - (double)__bfloat162float(ho[(tq * H + h) * D + d])));
                }
            }
    /* P and O rounded to bf16; lse from f32 sums */
    const int ok = err <= 2e-2 * omax && lerr <= 1e-3;
    printf("%s flash forward (p 0) on wgmma: max |O - ref| %.3g (largest |O| %.3g), max |lse - "
           "ref| %.3g\n", ok ? "PASS" : "FAIL", err, omax, lerr);
    free(hl);
    cudaFree(dq); cudaFree(dk); cudaFree(dv); cudaFree(dO); cudaFree(dl);
    free(hq); free(hk); free(hv); free(ho); free(sc);
    /* the rate at BERT-large seq 512 bs 32 (zeroed inputs: time only) */
    const int Bt = 32, Ht = 16, Tt = 512;
    const size_t nt = (size_t)Bt * Tt * Ht * D;
    CHECK(cudaMalloc(&dq, nt * 2));
    CHECK(cudaMalloc(&dk, nt * 2));
    CHECK(cudaMalloc(&dv, nt * 2));
    CHECK(cudaMalloc(&dO, nt * 2));
    CHECK(cudaMalloc(&dl, (size_t)Bt * Ht * Tt * 4));
    CHECK(cudaMemset(dq, 0, nt * 2));
    CHECK(cudaMemset(dk, 0, nt * 2));
    CHECK(cudaMemset(dv, 0, nt * 2));
    auto kern = swap ? flash_fwd_kernel<1> : flash_fwd_kernel<0>;
    const dim3 grid(Tt / TILE, Bt * Ht);
    kern<<<grid, 128>>>(dO, dl, dq, dk, dv, Tt, Ht);   /* warm-up */
    CHECK(cudaGetLastError());
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    CHECK(cudaEventRecord(e0));
    for (int it = 0; it < 20; it++) kern<<<grid, 128>>>(dO, dl, dq, dk, dv, Tt, Ht);
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    float ms = 0.0f;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    ms /= 20.0f;
    const double flop = 4.0 * Bt * Ht * (double)Tt * Tt * D;
    printf("  flash forward, B 32, H 16, T 512, Dh 64: %.3f ms a call, %.0f TFLOP/s (cuDNN's "
           "without dropout: 0.093 ms on an H100, 2026-12-05)\n", ms, flop / (ms * 1e-3) * 1e-12);
    CHECK(cudaEventDestroy(e0));
    CHECK(cudaEventDestroy(e1));
    cudaFree(dq); cudaFree(dk); cudaFree(dv); cudaFree(dO); cudaFree(dl);
    return ok;
}


/* ---- 5. TMA and an mbarrier: the loads of the pipelined forward (plan in
 * docs/kernels.md) ----
 * A [256, 192] bf16 matrix in global memory stands for the [B T, 3 D] projection.
 * A 2-D tensor map over it (cuTensorMapEncodeTiled, fetched from the driver
 * through the runtime: no link to libcuda) with a 64 x 64 box in the 128-byte
 * swizzle. One thread arms an mbarrier with the bytes to come and issues two
 * TMA copies, the tiles at (row 64, column 64) and (row 128, column 128); every
 * thread waits on the barrier's phase 0. Then C = A B^T from the two tiles by
 * K-major descriptors (desc_sw128), against the reference: right only if the
 * TMA's swizzle is the one the cp.async loaders write (sw128_off). */
__device__ static inline void mbar_init(uint32_t bar, uint32_t count)
{
#if WG_ARCH_OK
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
#endif
}
__device__ static inline void mbar_expect_tx(uint32_t bar, uint32_t bytes)
{
#if WG_ARCH_OK
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar),
                 "r"(bytes) : "memory");
#endif
}
__device__ static inline void mbar_wait(uint32_t bar, uint32_t parity)
{
#if WG_ARCH_OK
    asm volatile("{\n.reg .pred p;\nWAIT_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra WAIT_%=;\n}\n" ::"r"(bar), "r"(parity) : "memory");
#endif
}
__device__ static inline void tma_load_2d(uint32_t dst, const CUtensorMap *map, int c0, int r0,
                                          uint32_t bar)
{
#if WG_ARCH_OK
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst), "l"((uint64_t)map), "r"(c0),
                 "r"(r0), "r"(bar) : "memory");
#endif
}

__global__ void __launch_bounds__(128) tma_kernel(float *C, const __grid_constant__ CUtensorMap map)
{
    __shared__ __align__(1024) unsigned char sa[TILE * TILE * 2], sb[TILE * TILE * 2];
    __shared__ __align__(8) uint64_t bar_mem;
    const uint32_t bar = (uint32_t)__cvta_generic_to_shared(&bar_mem);
    const uint32_t base_a = (uint32_t)__cvta_generic_to_shared(sa);
    const uint32_t base_b = (uint32_t)__cvta_generic_to_shared(sb);
    if (threadIdx.x == 0) {
        mbar_init(bar, 1);
        fence_proxy_async();   /* the barrier's initialisation, visible to the TMA unit */
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        mbar_expect_tx(bar, 2 * TILE * TILE * 2);
        tma_load_2d(base_a, &map, 64, 64, bar);
        tma_load_2d(base_b, &map, 128, 128, bar);
    }
    mbar_wait(bar, 0);
    float d[32];
#pragma unroll
    for (int i = 0; i < 32; i++) d[i] = 0.0f;
    wg_fence();
#pragma unroll
    for (int j = 0; j < 4; j++)
        mma_ss(d, desc_sw128(base_a, j, 0, 0), desc_sw128(base_b, j, 0, 0), j > 0);
    wg_commit_wait();
    store_acc(C, d);
}

static int tma_check(void)
{
    const int R = 256, Cc = 192;
    __nv_bfloat16 *h = (__nv_bfloat16 *)malloc((size_t)R * Cc * 2);
    unsigned seed = 4242u;
    for (int i = 0; i < R * Cc; i++) h[i] = __float2bfloat16(frand(&seed));
    void *fn = NULL;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess || !fn) {
        printf("FAIL TMA: no cuTensorMapEncodeTiled from the driver (%d)\n", (int)q);
        free(h);
        return 0;
    }
    typedef CUresult (*Encode)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                               const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                               const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                               CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
    __nv_bfloat16 *dm;
    float *dC, *hC = (float *)malloc(TILE * TILE * sizeof(float));
    CHECK(cudaMalloc(&dm, (size_t)R * Cc * 2));
    CHECK(cudaMalloc(&dC, TILE * TILE * sizeof(float)));
    CHECK(cudaMemcpy(dm, h, (size_t)R * Cc * 2, cudaMemcpyHostToDevice));
    CUtensorMap map;
    const cuuint64_t dims[2] = {(cuuint64_t)Cc, (cuuint64_t)R};   /* innermost first */
    const cuuint64_t strides[1] = {(cuuint64_t)Cc * 2};           /* bytes, dims 1.. */
    const cuuint32_t box[2] = {TILE, TILE}, estr[2] = {1, 1};
    const CUresult e = ((Encode)fn)(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, dm, dims, strides,
                                    box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                    CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    int ok = 0;
    if (e != CUDA_SUCCESS) {
        printf("FAIL TMA: cuTensorMapEncodeTiled returned %d\n", (int)e);
    } else {
        tma_kernel<<<1, 128>>>(dC, map);
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        CHECK(cudaMemcpy(hC, dC, TILE * TILE * sizeof(float), cudaMemcpyDeviceToHost));
        double err = 0.0, cmax = 0.0;
        for (int r = 0; r < TILE; r++)
            for (int c = 0; c < TILE; c++) {
                double ref = 0.0;
                for (int k = 0; k < TILE; k++)
                    ref += (double)__bfloat162float(h[(64 + r) * Cc + 64 + k]) *
                           (double)__bfloat162float(h[(128 + c) * Cc + 128 + k]);
                err = fmax(err, fabs((double)hC[r * TILE + c] - ref));
                cmax = fmax(cmax, fabs(ref));
            }
        ok = err <= 1e-3 * cmax;
        printf("%s TMA (2-D map, 64 x 64 box, 128-byte swizzle) + mbarrier + wgmma: max |C - "
               "ref| %.3g (largest %.3g)\n", ok ? "PASS" : "FAIL", err, cmax);
    }
    cudaFree(dm); cudaFree(dC);
    free(h); free(hC);
    return ok;
}

int main(void)
{
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("wgmma_probe: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
    if (prop.major != 9) {
        printf("SKIP: wgmma needs sm_90\n");
        return 0;
    }
    const int n = TILE * TILE, sms = prop.multiProcessorCount;
    __nv_bfloat16 *hA = (__nv_bfloat16 *)malloc(n * 2), *hB = (__nv_bfloat16 *)malloc(n * 2);
    double *ref = (double *)malloc(n * sizeof(double));
    float *hC = (float *)malloc(n * sizeof(float));
    unsigned seed = 12345u;
    for (int i = 0; i < n; i++) {
        hA[i] = __float2bfloat16(frand(&seed));
        hB[i] = __float2bfloat16(frand(&seed));
    }
    double cmax = 0.0;
    for (int r = 0; r < TILE; r++)
        for (int c = 0; c < TILE; c++) {
            double s = 0.0;
            for (int k = 0; k < TILE; k++)
                s += (double)__bfloat162float(hA[r * TILE + k]) *
                     (double)__bfloat162float(hB[c * TILE + k]);
            ref[r * TILE + c] = s;
            cmax = fmax(cmax, fabs(s));
        }
    __nv_bfloat16 *dA, *dB;
    float *dC;
    const int blocks = 4 * sms;
    CHECK(cudaMalloc(&dA, n * 2));
    CHECK(cudaMalloc(&dB, n * 2));
    CHECK(cudaMalloc(&dC, (size_t)blocks * n * sizeof(float)));
    CHECK(cudaMemcpy(dA, hA, n * 2, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dB, hB, n * 2, cudaMemcpyHostToDevice));
    int passed = 0, failed = 0, right[2] = {-1, -1};
    for (int form = 0; form < 2; form++)
        for (int swap = 0; swap < 2; swap++) {
            CHECK(cudaMemset(dC, 0, n * sizeof(float)));
            (form ? tile_kernel<1> : tile_kernel<0>)<<<1, 128>>>(dC, dA, dB, swap, 1);
            CHECK(cudaGetLastError());
            CHECK(cudaDeviceSynchronize());
            CHECK(cudaMemcpy(hC, dC, n * sizeof(float), cudaMemcpyDeviceToHost));
            double err = 0.0;
            for (int i = 0; i < n; i++) err = fmax(err, fabs((double)hC[i] - ref[i]));
            const int ok = err <= 1e-3 * cmax;
            printf("  %s, LBO/SBO %s: max |C - ref| %.3g (largest |C| %.3g): %s\n",
                   form ? "A from registers" : "A and B from shared memory",
                   swap ? "rows / K" : "K / rows", err, cmax, ok ? "right" : "wrong");
            if (ok && right[form] < 0) right[form] = swap;
        }
    for (int form = 0; form < 2; form++) {
        const char *name = form ? "A from registers" : "both from shared memory";
        if (right[form] >= 0) {
            printf("PASS wgmma %s: A B^T with LBO/SBO %s\n", name,
                   right[form] ? "rows / K" : "K / rows");
            passed++;
        } else {
            printf("FAIL wgmma %s: neither descriptor assignment gives A B^T\n", name);
            failed++;
        }
    }
    /* the swizzled and transposed layouts (A B against A B^T: B's rows are K) */
    {
        double *ref_t = (double *)malloc(n * sizeof(double)), tmax = 0.0;
        for (int r = 0; r < TILE; r++)
            for (int c = 0; c < TILE; c++) {
                double s = 0.0;
                for (int k = 0; k < TILE; k++)
                    s += (double)__bfloat162float(hA[r * TILE + k]) *
                         (double)__bfloat162float(hB[k * TILE + c]);
                ref_t[r * TILE + c] = s;
                tmax = fmax(tmax, fabs(s));
            }
        static const char *names[5] = {"", "A, B K-major, 128-byte swizzle (A B^T)",
                                       "A in registers, B MN-major, 128-byte swizzle (A B)",
                                       "A in registers, B MN-major, core matrices (A B)",
                                       "A K-major, B MN-major, both swizzled (A B)"};
        for (int mode = 1; mode <= 4; mode++) {
            int good = -1;
            for (int swap = 0; swap < 2; swap++) {
                CHECK(cudaMemset(dC, 0, n * sizeof(float)));
                auto k = mode == 1 ? layout_kernel<1> : mode == 2 ? layout_kernel<2>
                                                    : mode == 3 ? layout_kernel<3>
                                                                : layout_kernel<4>;
                k<<<1, 128>>>(dC, dA, dB, swap);
                CHECK(cudaGetLastError());
                CHECK(cudaDeviceSynchronize());
                CHECK(cudaMemcpy(hC, dC, n * sizeof(float), cudaMemcpyDeviceToHost));
                const double *rf = mode == 1 ? ref : ref_t;
                const double mx = mode == 1 ? cmax : tmax;
                double err = 0.0;
                for (int i = 0; i < n; i++) err = fmax(err, fabs((double)hC[i] - rf[i]));
                printf("  %s, swap %d: max |C - ref| %.3g (largest %.3g)\n", names[mode], swap,
                       err, mx);
                if (err <= 1e-3 * mx && good < 0) good = swap;
            }
            /* ops/wgmma_sm90.cuh's wg_desc is swap 0 (LBO 16, SBO 1,024): the
             * swizzled forms pass only with it */
            if (good >= 0 && (mode == 3 || good == 0)) {
                printf("PASS wgmma %s with swap %d\n", names[mode], good);
                passed++;
            } else {
                printf("FAIL wgmma %s: %s\n", names[mode],
                       good < 0 ? "neither assignment" : "only swap 1, not wg_desc's swap 0");
                failed++;
            }
        }
        free(ref_t);
    }
    /* the rate: 4,096 tiles a block, operands staying in shared memory */
    for (int form = 0; form < 2; form++) {
        if (right[form] < 0) continue;
        const int reps = 4096;
        cudaEvent_t e0, e1;
        CHECK(cudaEventCreate(&e0));
        CHECK(cudaEventCreate(&e1));
        auto kern = form ? tile_kernel<1> : tile_kernel<0>;
        kern<<<blocks, 128>>>(dC, dA, dB, right[form], 16);   /* warm-up */
        CHECK(cudaGetLastError());
        CHECK(cudaEventRecord(e0));
        kern<<<blocks, 128>>>(dC, dA, dB, right[form], reps);
        CHECK(cudaEventRecord(e1));
        CHECK(cudaEventSynchronize(e1));
        float ms = 0.0f;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        const double flop = 2.0 * TILE * TILE * TILE * (double)reps * blocks;
        printf("  %s: %d blocks x %d tiles in %.3f ms: %.0f TFLOP/s (one warpgroup a block, "
               "each k16 step waited for)\n", form ? "A from registers" : "both from shared memory",
               blocks, reps, ms, flop / (ms * 1e-3) * 1e-12);
        CHECK(cudaEventDestroy(e0));
        CHECK(cudaEventDestroy(e1));
    }
    if (right[0] >= 0 && right[1] == right[0]) {
        if (flash_check(right[0])) passed++;
        else failed++;
    } else {
        printf("  the flash forward needs both forms right with one descriptor: not run\n");
    }
    if (tma_check()) passed++;
    else failed++;
    cudaFree(dA); cudaFree(dB); cudaFree(dC);
    free(hA); free(hB); free(ref); free(hC);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
