/* conv_stem.cu — ResNet's stem as an implicit GEMM on the tensor cores (the
 * math and the plan: ops/conv_stem.h).
 *
 *   staged  X[r, 3 (col + 3) + c] = x[n, 2p - 3 + r, col, c]   (7 rows, 0 outside x)
 *           A[q, k] = X[off[k] + 6 q],  off[k] = (k / 21) XP + k % 21   (never formed)
 *   forward   y[q, o] = sum_k A[q, k] w[o, k]                 (mma.sync, f32 accumulation)
 *   wgrad     dw[o, k] (+)= sum_(rows, q) dy[q, o] A[q, k]     (per-block partials, then
 *                                                            their sum in block order)
 *
 * mma.sync fragments (PTX ISA; g = lane / 4, t = lane % 4):
 *   TF32 m16n8k8   a0 (g, t) a1 (g + 8, t) a2 (g, t + 4) a3 (g + 8, t + 4);
 *                  b0 (k t, n g) b1 (k t + 4, n g)
 *   16-bit m16n8k16 (bf16, f16)
 *                  a0 (g, 2t..2t+1) a1 (g + 8, 2t..) a2 (g, 2t+8..) a3 (g + 8, 2t+8..);
 *                  b0 (k 2t..2t+1, n g) b1 (k 2t+8..2t+9, n g)
 *   both           c0, c1 (g, 2t..2t+1) c2, c3 (g + 8, 2t..2t+1)
 * The forward: a warp takes 16 pixels of the row x the 64 filters (eight n8
 * tiles), its A fragment read from X through the offset table, B from w^T
 * held in shared memory (rows 156 / 168 elements apart: the lanes' loads hit
 * 32 banks). The weight gradient: C = dy^T A, a warp takes 16 filters x
 * half of KP's n8 tiles; its A is dy^T (dy staged by pixel, rows 72 elements
 * apart: a 16-byte load of dy is one 16-byte store, and the fragment's reads
 * hit distinct banks), its B the patches, read from X with the lane's ten
 * offsets kept in registers.
 * Staging a row is latency: each thread issues all of a part's global loads
 * (a few input rows at a time, stage_rows; dy's row in 16-byte vectors)
 * before any of its stores, so a row waits for a handful of loads' latency
 * (two in the forward, about six in the weight gradient), not one a value.
 */
#include "conv_stem.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda_util.cuh"
#include "engine/error.h"

namespace {

const int KS = 147;          /* 7 x 7 x 3 */
const int CO = 64;           /* filters */
const int ROWS = 7;          /* input rows a row of output reads */
const int WG_THREADS = 256;  /* the weight gradient's eight warps */
const int WG_TILES = 10;     /* n8 tiles of KP a weight-gradient warp takes, at most */

/* The tensor-core form of a storage type: the k of one mma, K padded, the
 * row pitch of w^T in shared memory, the value shared memory holds. */
template <typename T> struct Tc;
template <> struct Tc<float> {
    static constexpr int KK = 8, KP = 152, LDK = 156, LDD = 72;
    using S = float;
    __device__ static float put(float v)   /* TF32: 10 mantissa bits, to nearest */
    {
        uint32_t r;
        asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(v));
        return __uint_as_float(r);
    }
};
template <> struct Tc<__nv_bfloat16> {
    static constexpr int KK = 16, KP = 160, LDK = 168, LDD = 72;
    using S = __nv_bfloat16;
    __device__ static __nv_bfloat16 put(__nv_bfloat16 v) { return v; }
};
template <> struct Tc<__half> {   /* bf16's form, f16's mma */
    static constexpr int KK = 16, KP = 160, LDK = 168, LDD = 72;
    using S = __half;
    __device__ static __half put(__half v) { return v; }
};

__device__ __forceinline__ uint32_t bits(float v) { return __float_as_uint(v); }
__device__ __forceinline__ uint32_t bits(__nv_bfloat16 v) { return __bfloat16_as_ushort(v); }
__device__ __forceinline__ uint32_t bits(__half v) { return __half_as_ushort(v); }

/* X[o + r] as the mma reads it; o < 0 (k past 147) is 0 */
template <typename S> __device__ __forceinline__ uint32_t xv(const S *X, int o, int r)
{
    return o >= 0 ? bits(X[o + r]) : 0u;
}

/* c += a b on one m16n8 tile, the shape and operand type picked by the tag's
 * type: TF32 m16n8k8 (float), m16n8k16 in bf16 or f16 */
#define STEM_MMA(TAG, SHAPE_TYPES)                                                              \
    __device__ __forceinline__ void mma(float *c, const uint32_t *a, uint32_t b0, uint32_t b1, \
                                        TAG)                                                   \
    {                                                                                          \
        asm("mma.sync.aligned." SHAPE_TYPES " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "          \
            "{%0,%1,%2,%3};"                                                                   \
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                   \
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));                   \
    }
STEM_MMA(float, "m16n8k8.row.col.f32.tf32.tf32.f32")
STEM_MMA(__nv_bfloat16, "m16n8k16.row.col.f32.bf16.bf16.f32")
STEM_MMA(__half, "m16n8k16.row.col.f32.f16.f16.f32")
#undef STEM_MMA

/* Input rows r0 .. r0 + NR - 1 of output row (n, p) into X: every load of
 * the part first (into registers), then every store. A thread takes STAGE_K
 * consecutive columns, c3 = STAGE_K tid + k (XW <= STAGE_K blockDim: the
 * launchers check), so its loads share one address a row. */
const int STAGE_K = 4;
template <typename T, int NR>
__device__ __forceinline__ void stage_part(typename Tc<T>::S *X, int XP, const T *x, int n,
                                           int p, int H, int W, int XW, int r0)
{
    const int c0 = STAGE_K * (int)threadIdx.x, i0 = c0 - 9;
    T v[NR][STAGE_K];
#pragma unroll
    for (int rr = 0; rr < NR; rr++) {
        const int h = 2 * p - 3 + r0 + rr;
        const bool in = h >= 0 && h < H;
        const T *xr = x + (in ? ((int64_t)n * H + h) * W * 3 : 0);
#pragma unroll
        for (int k = 0; k < STAGE_K; k++)
            v[rr][k] = in && i0 + k >= 0 && i0 + k < 3 * W ? xr[i0 + k] : T(0.0f);
    }
    if (c0 >= XW) return;
#pragma unroll
    for (int rr = 0; rr < NR; rr++)
#pragma unroll
        for (int k = 0; k < STAGE_K; k++)
            if (c0 + k < XW) X[(r0 + rr) * XP + c0 + k] = Tc<T>::put(v[rr][k]);
}

/* The 7 input rows of output row (n, p), columns -3 .. 2Q + 1, into X (row
 * pitch XP): X[r XP + i + 9] = x[n, 2p - 3 + r] at flat index i = 3 col + c;
 * in parts of NR rows, to keep the registers in flight few (the forward takes
 * 4 + 3; the weight gradient, whose accumulators hold 40, 2 + 2 + 2 + 1). */
template <typename T, int NR>
__device__ void stage_rows(typename Tc<T>::S *X, int XP, const T *x, int n, int p, int H, int W,
                           int Q)
{
    const int XW = (2 * Q + 5) * 3;
#pragma unroll
    for (int r0 = 0; r0 + NR <= ROWS; r0 += NR) stage_part<T, NR>(X, XP, x, n, p, H, W, XW, r0);
    if constexpr (ROWS % NR != 0)
        stage_part<T, ROWS % NR>(X, XP, x, n, p, H, W, XW, ROWS - ROWS % NR);
}

/* dy's row dr (Q pixels x CO filters) into D by pixel (D[q LDD + o]): with
 * vec, 16-byte loads, NV a thread in flight before their stores; else one
 * value at a time (dy not 16-byte aligned) */
template <typename T, int NV>
__device__ __forceinline__ void stage_dy(typename Tc<T>::S *D, const T *dr, int Q, bool vec)
{
    using C = Tc<T>;
    if (!vec) {
        for (int e = threadIdx.x; e < Q * CO; e += blockDim.x)
            D[e / CO * C::LDD + e % CO] = C::put(dr[e]);
        return;
    }
    constexpr int VEC = 16 / (int)sizeof(T);
    const int nv = Q * CO / VEC;
    const uint4 *src = reinterpret_cast<const uint4 *>(dr);
    for (int b = 0; b < nv; b += NV * (int)blockDim.x) {
        uint4 u[NV];
#pragma unroll
        for (int k = 0; k < NV; k++) {
            const int e = b + (int)threadIdx.x + k * (int)blockDim.x;
            if (e < nv) u[k] = src[e];
        }
#pragma unroll
        for (int k = 0; k < NV; k++) {
            const int e = b + (int)threadIdx.x + k * (int)blockDim.x;
            if (e >= nv) continue;
            const int q = e * VEC / CO, o = e * VEC % CO;
            uint4 w = u[k];
            if constexpr (C::KK == 8) {   /* TF32: each value rounded as put does */
                w.x = __float_as_uint(C::put(__uint_as_float(w.x)));
                w.y = __float_as_uint(C::put(__uint_as_float(w.y)));
                w.z = __float_as_uint(C::put(__uint_as_float(w.z)));
                w.w = __float_as_uint(C::put(__uint_as_float(w.w)));
            }
            *reinterpret_cast<uint4 *>(D + q * C::LDD + o) = w;
        }
    }
}

/* off[k] for k < KP (-1 past K) */
template <typename T> __device__ void offsets(int *off, int XP)
{
    for (int k = threadIdx.x; k < Tc<T>::KP; k += blockDim.x)
        off[k] = k < KS ? k / 21 * XP + k % 21 : -1;
}

__device__ __forceinline__ void store2(float *y, float a, float b)
{
    *(float2 *)y = make_float2(a, b);
}
__device__ __forceinline__ void store2(__nv_bfloat16 *y, float a, float b)
{
    *(__nv_bfloat162 *)y = __floats2bfloat162_rn(a, b);
}
__device__ __forceinline__ void store2(__half *y, float a, float b)
{
    *(__half2 *)y = __floats2half2_rn(a, b);
}

/* blockDim Q / 16 warps; dynamic shared memory: w^T [CO][LDK], X [ROWS][XP], off [KP] */
template <typename T>
__global__ void __launch_bounds__(CONV_STEM_MAX_Q * 2)
    stem_fwd_kernel(T *y, const T *x, const T *w, int N, int H, int W, int P, int Q, int XP)
{
    using C = Tc<T>;
    using S = typename C::S;
    extern __shared__ __align__(16) unsigned char smem[];
    S *Bs = (S *)smem;
    S *X = Bs + CO * C::LDK;
    int *off = (int *)(X + ROWS * XP);
    for (int e = threadIdx.x; e < CO * C::KP; e += blockDim.x) {
        const int o = e / C::KP, k = e % C::KP;
        Bs[o * C::LDK + k] = C::put(k < KS ? w[o * KS + k] : T(0.0f));
    }
    offsets<T>(off, XP);
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int q0 = 16 * (threadIdx.x >> 5) + g;
    const int r0 = 6 * q0, r1 = r0 + 48;   /* pixels q0 and q0 + 8 */
    const int64_t rows = (int64_t)N * P;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        __syncthreads();   /* the previous row's X is read (and w^T, off are in) */
        stage_rows<T, 4>(X, XP, x, (int)(row / P), (int)(row % P), H, W, Q);
        __syncthreads();
        float acc[8][4];
#pragma unroll
        for (int j = 0; j < 8; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
        /* TF32 fully unrolled (19 steps: 1.77 -> 1.05 ms at bs 256), bf16 two at a time
         * (fully: 0.76 -> 0.88 ms) */
#pragma unroll(C::KK == 8 ? 19 : 2)
        for (int kk = 0; kk < C::KP; kk += C::KK) {
            uint32_t a[4];
            if constexpr (C::KK == 8) {
                const int oa = off[kk + t], ob = off[kk + t + 4];
                a[0] = xv(X, oa, r0);
                a[1] = xv(X, oa, r1);
                a[2] = xv(X, ob, r0);
                a[3] = xv(X, ob, r1);
            } else {
                const int k0 = kk + 2 * t;
                const int o0 = off[k0], o1 = off[k0 + 1], o2 = off[k0 + 8], o3 = off[k0 + 9];
                a[0] = xv(X, o0, r0) | xv(X, o1, r0) << 16;
                a[1] = xv(X, o0, r1) | xv(X, o1, r1) << 16;
                a[2] = xv(X, o2, r0) | xv(X, o3, r0) << 16;
                a[3] = xv(X, o2, r1) | xv(X, o3, r1) << 16;
            }
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const S *bp = Bs + (8 * j + g) * C::LDK + kk;
                uint32_t b0, b1;
                if constexpr (C::KK == 8) {
                    b0 = bits(bp[t]);
                    b1 = bits(bp[t + 4]);
                } else {
                    b0 = *(const uint32_t *)(bp + 2 * t);
                    b1 = *(const uint32_t *)(bp + 2 * t + 8);
                }
                mma(acc[j], a, b0, b1, T());
            }
        }
        T *yr = y + row * (int64_t)Q * CO;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int o = 8 * j + 2 * t;
            store2(yr + q0 * CO + o, acc[j][0], acc[j][1]);
            store2(yr + (q0 + 8) * CO + o, acc[j][2], acc[j][3]);
        }
    }
}

/* Eight warps; dynamic shared memory: dy's row D [MAX_Q][LDD] by pixel,
 * X [ROWS][XP], off [KP]. part[blockIdx.x] [CO][KP] receives the block's sum; vec:
 * dy is 16-byte aligned. */
template <typename T>
__global__ void __launch_bounds__(WG_THREADS, 3)
    stem_wgrad_kernel(float *part, const T *dy, const T *x, int N, int H, int W, int P, int Q,
                      int XP, bool vec)
{
    using C = Tc<T>;
    using S = typename C::S;
    constexpr int NT = C::KP / 8;                       /* n8 tiles of KP: 19 or 20 */
    extern __shared__ __align__(16) unsigned char smem[];
    /* D first: its 16-byte stores need an address the compiler sees aligned
     * (after X, whose size is a kernel argument, it splits each into four) */
    S *D = (S *)smem;
    S *X = D + CONV_STEM_MAX_Q * C::LDD;
    int *off = (int *)(X + ROWS * XP);
    offsets<T>(off, XP);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int c0 = 16 * (warp & 3);                    /* filters c0 .. c0 + 15 */
    const int tile0 = (warp >> 2) * WG_TILES;           /* n8 tiles tile0 .. */
    const int ntiles = (warp >> 2) ? NT - WG_TILES : WG_TILES;
    float acc[WG_TILES][4];
#pragma unroll
    for (int j = 0; j < WG_TILES; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
    __syncthreads();
    int ob[WG_TILES];                                   /* this lane's k: tile j's column g */
#pragma unroll
    for (int j = 0; j < WG_TILES; j++) ob[j] = j < ntiles ? off[8 * (tile0 + j) + g] : -1;
    const int64_t rows = (int64_t)N * P;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        __syncthreads();   /* the previous row's X and D are read */
        stage_rows<T, 2>(X, XP, x, (int)(row / P), (int)(row % P), H, W, Q);
        stage_dy<T, 2>(D, dy + row * (int64_t)Q * CO, Q, vec);
        __syncthreads();
#pragma unroll 2
        for (int mm = 0; mm < Q; mm += C::KK) {
            uint32_t a[4];
            if constexpr (C::KK == 8) {
                const S *d0 = D + (mm + t) * C::LDD + c0 + g, *d1 = d0 + 4 * C::LDD;
                a[0] = bits(d0[0]);
                a[1] = bits(d0[8]);
                a[2] = bits(d1[0]);
                a[3] = bits(d1[8]);
            } else {   /* rows: filters c0 + g (+ 8); the pair: pixels mm + 2t, + 1 (+ 8) */
                const S *d0 = D + (mm + 2 * t) * C::LDD + c0 + g, *d1 = d0 + 8 * C::LDD;
                a[0] = bits(d0[0]) | bits(d0[C::LDD]) << 16;
                a[1] = bits(d0[8]) | bits(d0[C::LDD + 8]) << 16;
                a[2] = bits(d1[0]) | bits(d1[C::LDD]) << 16;
                a[3] = bits(d1[8]) | bits(d1[C::LDD + 8]) << 16;
            }
#pragma unroll
            for (int j = 0; j < WG_TILES; j++) {
                if (j >= ntiles) break;
                uint32_t b0, b1;
                if constexpr (C::KK == 8) {
                    b0 = xv(X, ob[j], 6 * (mm + t));
                    b1 = xv(X, ob[j], 6 * (mm + t + 4));
                } else {
                    const int r = 6 * (mm + 2 * t);
                    b0 = xv(X, ob[j], r) | xv(X, ob[j], r + 6) << 16;
                    b1 = xv(X, ob[j], r + 48) | xv(X, ob[j], r + 54) << 16;
                }
                mma(acc[j], a, b0, b1, T());
            }
        }
    }
    float *pb = part + (size_t)blockIdx.x * CO * C::KP;
#pragma unroll
    for (int j = 0; j < WG_TILES; j++) {
        if (j >= ntiles) break;
        const int k = 8 * (tile0 + j) + 2 * t;
        pb[(c0 + g) * C::KP + k] = acc[j][0];
        pb[(c0 + g) * C::KP + k + 1] = acc[j][1];
        pb[(c0 + g + 8) * C::KP + k] = acc[j][2];
        pb[(c0 + g + 8) * C::KP + k + 1] = acc[j][3];
    }
}

/* dw[o, k] (+)= sum over b of part[b][o][k], b in order. */
__global__ void stem_wgrad_finish_kernel(float *dw, const float *part, int parts, int kp,
                                         int accum)
{
    const int e = blockIdx.x * blockDim.x + threadIdx.x;   /* o KS + k */
    if (e >= KS * CO) return;
    const int o = e / KS, k = e % KS;
    float s = 0.0f;
    for (int b = 0; b < parts; b++) s += part[((size_t)b * CO + o) * kp + k];
    dw[e] = accum ? dw[e] + s : s;
}

/* the weight gradient's blocks: three an SM of the current device (asked each
 * call: a process may use several devices) */
int wg_blocks(void) { return 3 * sm_count(); }

/* X's row pitch: (2Q + 5) 3 values, up to a multiple of 8 */
int x_pitch(int Q) { return ((2 * Q + 5) * 3 + 7) / 8 * 8; }

template <typename F> void dispatch_stem(DType dt, F f)
{
    if (dt == DT_F32) f(float());
    else if (dt == DT_BF16) f(__nv_bfloat16());
    else if (dt == DT_F16) f(__half());
    else ct_fatal("conv_stem: type %s (f32 as TF32, bf16 or f16)", dtype_name(dt));
}

} // namespace

extern "C" size_t conv_stem_part_floats(void) { return (size_t)wg_blocks() * CO * 160; }

extern "C" void conv_stem_forward_launch(void *y, const void *x, const void *w, DType dt, int N,
                                         int H, int W, int P, int Q, void *stream)
{
    CT_ASSERT(Q % 16 == 0 && Q <= CONV_STEM_MAX_Q, "conv_stem: output width %d", Q);
    /* stage_part: a thread stages STAGE_K columns of X, 2Q threads */
    CT_ASSERT((2 * Q + 5) * 3 <= STAGE_K * Q * 2, "conv_stem: output width %d", Q);
    const int64_t rows = (int64_t)N * P;
    if (rows == 0) return;
    const int XP = x_pitch(Q);
    dispatch_stem(dt, [&](auto tag) {
        using T = decltype(tag);
        using C = Tc<T>;
        const size_t sm = (size_t)(CO * C::LDK + ROWS * XP) * sizeof(typename C::S) +
                          C::KP * sizeof(int);
        smem_optin(stem_fwd_kernel<T>, sm);
        /* as many blocks as fit at once: one wave, each taking rows in turn */
        int per_sm = 0;
        CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, stem_fwd_kernel<T>,
                                                                 Q * 2, sm));
        const int64_t cap = (int64_t)(per_sm > 0 ? per_sm : 1) * sm_count();
        const unsigned blocks = (unsigned)(rows < cap ? rows : cap);
        stem_fwd_kernel<T><<<blocks, Q * 2, sm, (cudaStream_t)stream>>>(
            (T *)y, (const T *)x, (const T *)w, N, H, W, P, Q, XP);
    });
    CUDA_CHECK_LAUNCH();
}

extern "C" void conv_stem_wgrad_launch(float *dw, float *part, const void *dy, const void *x,
                                       DType dt, int N, int H, int W, int P, int Q, int accum,
                                       void *stream)
{
    CT_ASSERT(Q % 16 == 0 && Q <= CONV_STEM_MAX_Q, "conv_stem: output width %d", Q);
    CT_ASSERT((2 * Q + 5) * 3 <= STAGE_K * WG_THREADS, "conv_stem: output width %d", Q);
    const int XP = x_pitch(Q), parts = wg_blocks();
    int kp = 0;
    dispatch_stem(dt, [&](auto tag) {
        using T = decltype(tag);
        using C = Tc<T>;
        kp = C::KP;
        const size_t sm = (size_t)(ROWS * XP + CONV_STEM_MAX_Q * C::LDD) *
                              sizeof(typename C::S) + C::KP * sizeof(int);
        const bool vec = ((uintptr_t)dy & 15u) == 0;
        smem_optin(stem_wgrad_kernel<T>, sm);
        stem_wgrad_kernel<T><<<parts, WG_THREADS, sm, (cudaStream_t)stream>>>(
            part, (const T *)dy, (const T *)x, N, H, W, P, Q, XP, vec);
    });
    CUDA_CHECK_LAUNCH();
    stem_wgrad_finish_kernel<<<(KS * CO + 255) / 256, 256, 0, (cudaStream_t)stream>>>(
        dw, part, parts, kp, accum);
    CUDA_CHECK_LAUNCH();
}
