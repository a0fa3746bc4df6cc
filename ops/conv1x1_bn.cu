/* conv1x1_bn.cu — the 1 x 1 convolution with the batch norm around it (the
 * math, and when it runs: ops/conv1x1_bn.h; its host side: conv1x1_bn.c).
 *
 *   prologue  a[m, c] = E(relu(fma(y[m, c], s[c], b[c])))     (plain: y)
 *   GEMM      z[m, k] = E(sum_c a[m, c] w[k, c])               (mma.sync, f32)
 *   epilogue  part[tile][0][k] = sum of z[m, k], part[tile][1][k] = of z^2,
 *             over the tile's rows m < M, from z's stored values
 *   finish    sums[h][k] = part summed over tiles in two fixed-order passes
 *
 * and its backward twins, the unit's 1 x 1 gradients without a written:
 *   data      g[m, c] = keep[m, c] E(sum_k dz[m, k] w[k, c])     the same kernel, w
 *             read transposed; the epilogue reads y for the ReLU's mask and
 *             xhat, and sums g and g xhat per tile (then the same finish)
 *   filter    dw[k, c] = sum_m dz[m, k] relu(y s + b)[m, c]       a GEMM reduced over
 *             M: f32 partials per split of the rows, summed in order
 *
 * A block: 8 warps as 4 (rows, 32 each) x 2 (channels, BN / 2 each) over a
 * tile of 128 rows x BN output channels; a warp holds 2 x (BN / 16) mma
 * accumulators. The grid is persistent (the blocks that fit, two an SM with
 * the largest shared-memory carveout): block i takes tiles i, i + grid, ...,
 * numbered with the channel slice fastest, so the blocks side by side read
 * the same rows of y (from L2 after the first). A tile is C / 64 chunks of
 * 64 input channels; the chunks of all of a block's tiles are one stream,
 * copied STAGES - 1 ahead with cp.async (y's 128 x 64 and w's BN x 64, each
 * row's 16-byte pieces at (piece ^ row % 8), so an ldmatrix's eight rows
 * fall in eight bank groups): the next tile's first chunks land while this
 * one's products and stores run. Rows past M are zero-filled, never stored
 * and left out of the sums. The prologue works on a's fragments after
 * ldmatrix (channels 2t, 2t + 1, 2t + 8, 2t + 9 of the k-step). z goes out
 * through a warp's 16 x 32 staging tile (rows 40 elements apart: the
 * fragments' 4-byte writes hit 32 banks), a row's 64 bytes as four 16-byte
 * stores. The sums: a lane's four rows, the eight lanes of a column by a
 * fixed butterfly, the four row warps in order.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda_util.cuh"
#include "engine/error.h"
#include "mma_sm80.cuh"

namespace {

const int BM = 128;      /* rows a tile */
const int CK = 64;       /* input channels a chunk */
const int STAGES = 3;    /* chunks in flight */
const int THREADS = 256;
const int SP = 40;       /* staging tile row pitch (elements) */

template <int BN> constexpr int smem_bytes()
{
    return STAGES * (BM + BN) * CK * 2 + 4 * 2 * BN * 4 + 8 * 16 * SP * 2;
}

/* the filter gradient's: its two operands' chunks, STAGES deep */
template <int BN> constexpr int smem_bytes_wgrad() { return STAGES * CK * (128 + BN) * 2; }

/* element (r, 8 p) of a swizzled 64-column tile */
__device__ __forceinline__ int swz(int r, int p) { return r * CK + ((p ^ (r & 7)) << 3); }

/* two elements of a (channels c, c + 1) through the prologue */
template <typename E> __device__ __forceinline__ uint32_t pro2(uint32_t w, float2 s, float2 b)
{
    const float2 f = unpack2<E>(w);
    return pack2<E>(fmaxf(__fmaf_rn(f.x, s.x, b.x), 0.0f), fmaxf(__fmaf_rn(f.y, s.y, b.y), 0.0f));
}

/* the pipeline's first STAGES - 1 chunks (a group committed for each, empty
 * past total, so that the waits count alike) */
template <typename Load> __device__ __forceinline__ void pipe_fill(Load &load, int total)
{
#pragma unroll
    for (int f = 0; f < STAGES - 1; f++) {
        if (f < total) load(f);
        cp_async_commit();
    }
}

template <int MT, int NT> __device__ __forceinline__ void zero_acc(float (&acc)[MT][NT][4])
{
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0;
}

/* The per-channel vectors of a launch: the forward's prologue (s, b; s
 * NULL: plain), or the data gradient's epilogue (the batch norm's mean,
 * invstd, gamma, beta at the GEMM's N channels, and its input y [M, N]) */
struct Bn {
    const float *s, *b;
    const float *mean, *invstd, *gamma, *beta;
    const void *y;
};

/* p[0], p[1] (4-byte aligned: a parameter view may be no more) */
__device__ __forceinline__ float2 ld2(const float *p)
{
    return make_float2(__ldg(p), __ldg(p + 1));
}

/* The data gradient's mask and normalised input at channels (c, c + 1) of
 * one row: keep = E(pre) > 0 with pre = ((y - mean) (gamma invstd)) + beta
 * rounded as batch norm's relu mode 2 recomputes it (ops/batchnorm.cu,
 * bn_keep2_s), xhat = (y - mean) invstd */
template <typename E>
__device__ __forceinline__ void keep_xhat(uint32_t yv, float2 mu, float2 is, float2 ga,
                                          float2 be, bool &k0, bool &k1, float2 &xh)
{
    const float2 f = unpack2<E>(yv);
    const float d0 = __fsub_rn(f.x, mu.x), d1 = __fsub_rn(f.y, mu.y);
    const float p0 = __fadd_rn(__fmul_rn(d0, __fmul_rn(ga.x, is.x)), be.x);
    const float p1 = __fadd_rn(__fmul_rn(d1, __fmul_rn(ga.y, is.y)), be.y);
    const float2 r = unpack2<E>(pack2<E>(p0, p1));
    k0 = r.x > 0.0f;
    k1 = r.y > 0.0f;
    xh = make_float2((f.x - mu.x) * is.x, (f.y - mu.y) * is.y);
}

/* DG = false: the forward, z [M, K] = prologue(a [M, C]) w^T, w [K, C].
 * DG = true: the data gradient, z [M, K] = mask (a w) with a = dz [M, C]
 * (the convolution's output gradient: C here is its K) and w [C, K] (its
 * filters: K here is its C), the sums of z and of z xhat in the epilogue. */
template <typename E, int BN, bool DG, bool ST>
__global__ void __launch_bounds__(THREADS, 2)
    conv1x1_bn_kernel(E *z, float *part, const E *y, const Bn bn, const E *w, int M, int C, int K)
{
    const float *s = DG ? nullptr : bn.s, *b = bn.b;
    constexpr int WN = BN / 2, NT = WN / 8, MT = 2;
    extern __shared__ __align__(128) unsigned char smem[];
    E *As = reinterpret_cast<E *>(smem);
    E *Ws = As + STAGES * BM * CK;
    float *red = reinterpret_cast<float *>(Ws + STAGES * BN * CK); /* [4][2][BN] */
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp & 3, wn = warp >> 2, g = lane >> 2, t = lane & 3;
    E *stg = reinterpret_cast<E *>(red + 4 * 2 * BN) + warp * 16 * SP;
    const int ntn = K / BN, tiles = (M + BM - 1) / BM * ntn, nck = C / CK;
    const int mine = (int)blockIdx.x < tiles ? (tiles - 1 - (int)blockIdx.x) / gridDim.x + 1 : 0;
    const int total = mine * nck;
    const bool plain = s == nullptr;
    auto load = [&](int f) {
        const int tile = blockIdx.x + (f / nck) * gridDim.x, ck = f % nck;
        const int tm = tile / ntn, tn = tile % ntn;
        E *as = As + (f % STAGES) * BM * CK, *ws = Ws + (f % STAGES) * BN * CK;
#pragma unroll
        for (int q = 0; q < BM * 8 / THREADS; q++) {
            const int i = tid + q * THREADS, r = i >> 3, p = i & 7;
            const int row = tm * BM + r, ok = row < M;
            cp_async16(smem_u32(as + swz(r, p)), y + (size_t)(ok ? row : 0) * C + ck * CK + 8 * p,
                       ok);
        }
#pragma unroll
        for (int q = 0; q < BN * 8 / THREADS; q++) {
            const int i = tid + q * THREADS, r = i >> 3, p = i & 7;
            if (DG) /* w's rows ck * CK + r (reduction), 64-column slabs of the tile's BN */
                cp_async16(smem_u32(ws + (r >> 6) * CK * CK + swz(r & 63, p)),
                           w + (size_t)(ck * CK + (r & 63)) * K + tn * BN + (r >> 6) * 64 + 8 * p,
                           true);
            else
                cp_async16(smem_u32(ws + swz(r, p)),
                           w + (size_t)(tn * BN + r) * C + ck * CK + 8 * p, true);
        }
    };
    pipe_fill(load, total);
    float acc[MT][NT][4];
    zero_acc(acc);
    for (int f = 0; f < total; f++) {
        cp_async_wait<STAGES - 2>();
        __syncthreads(); /* chunk f landed; stage (f - 1) % STAGES is read by every warp */
        if (f + STAGES - 1 < total) load(f + STAGES - 1);
        cp_async_commit();
        const E *as = As + (f % STAGES) * BM * CK, *ws = Ws + (f % STAGES) * BN * CK;
        const int ck = f % nck;
#pragma unroll
        for (int kk = 0; kk < CK; kk += 16) {
            uint32_t af[MT][4];
#pragma unroll
            for (int i = 0; i < MT; i++)
                ldsm_x4(af[i], smem_u32(as + swz(wm * 32 + 16 * i + (lane & 15),
                                                 (kk >> 3) + (lane >> 4))));
            if (!plain) {
                const int c = ck * CK + kk + 2 * t;
                const float2 s0 = __ldg(reinterpret_cast<const float2 *>(s + c));
                const float2 s1 = __ldg(reinterpret_cast<const float2 *>(s + c + 8));
                const float2 b0 = __ldg(reinterpret_cast<const float2 *>(b + c));
                const float2 b1 = __ldg(reinterpret_cast<const float2 *>(b + c + 8));
#pragma unroll
                for (int i = 0; i < MT; i++) {
                    af[i][0] = pro2<E>(af[i][0], s0, b0);
                    af[i][1] = pro2<E>(af[i][1], s0, b0);
                    af[i][2] = pro2<E>(af[i][2], s1, b1);
                    af[i][3] = pro2<E>(af[i][3], s1, b1);
                }
            }
#pragma unroll
            for (int jj = 0; jj < NT / 2; jj++) {
                uint32_t bf[4];
                if (DG) { /* w stored k-major: the transposing load */
                    const int r = kk + (lane & 7) + ((lane >> 3) & 1) * 8;
                    const int n = wn * WN + 16 * jj + ((lane >> 4) << 3);
                    ldsm_x4_t(bf, smem_u32(ws + (n >> 6) * CK * CK + swz(r, (n & 63) >> 3)));
                } else {
                    const int n = wn * WN + 16 * jj + (lane & 7) + ((lane >> 4) << 3);
                    ldsm_x4(bf, smem_u32(ws + swz(n, (kk >> 3) + ((lane >> 3) & 1))));
                }
#pragma unroll
                for (int i = 0; i < MT; i++) {
                    mma16816<E>(acc[i][2 * jj], af[i], bf[0], bf[1]);
                    mma16816<E>(acc[i][2 * jj + 1], af[i], bf[2], bf[3]);
                }
            }
        }
        if (ck != nck - 1) continue;
        /* the tile's epilogue */
        const int tile = blockIdx.x + (f / nck) * gridDim.x, tm = tile / ntn, tn = tile % ntn;
#pragma unroll
        for (int h = 0; h < NT / 4; h++) {
            float sm[4][4] = {};
#pragma unroll
            for (int i = 0; i < MT; i++) {
                const int row = tm * BM + wm * 32 + 16 * i;
                const bool lo_ok = row + g < M, hi_ok = row + g + 8 < M;
#pragma unroll
                for (int jl = 0; jl < 4; jl++) {
                    const int j = 4 * h + jl;
                    float2 x0 = make_float2(0.0f, 0.0f), x1 = x0;
                    if (DG) { /* the ReLU's mask and xhat from y, rows past M masked off */
                        const int c = tn * BN + wn * WN + 32 * h + 8 * jl + 2 * t;
                        const float2 mu = ld2(bn.mean + c);
                        const float2 is = ld2(bn.invstd + c);
                        const float2 ga = ld2(bn.gamma + c);
                        const float2 be = ld2(bn.beta + c);
                        const uint32_t *yp = static_cast<const uint32_t *>(bn.y);
                        const uint32_t y0 = lo_ok ? __ldg(yp + ((size_t)(row + g) * K + c) / 2) : 0;
                        const uint32_t y1 =
                            hi_ok ? __ldg(yp + ((size_t)(row + g + 8) * K + c) / 2) : 0;
                        bool k00, k01, k10, k11;
                        keep_xhat<E>(y0, mu, is, ga, be, k00, k01, x0);
                        keep_xhat<E>(y1, mu, is, ga, be, k10, k11, x1);
                        acc[i][j][0] = k00 && lo_ok ? acc[i][j][0] : 0.0f;
                        acc[i][j][1] = k01 && lo_ok ? acc[i][j][1] : 0.0f;
                        acc[i][j][2] = k10 && hi_ok ? acc[i][j][2] : 0.0f;
                        acc[i][j][3] = k11 && hi_ok ? acc[i][j][3] : 0.0f;
                    }
                    const uint32_t lo = pack2<E>(acc[i][j][0], acc[i][j][1]);
                    const uint32_t hi = pack2<E>(acc[i][j][2], acc[i][j][3]);
                    *reinterpret_cast<uint32_t *>(stg + g * SP + 8 * jl + 2 * t) = lo;
                    *reinterpret_cast<uint32_t *>(stg + (g + 8) * SP + 8 * jl + 2 * t) = hi;
                    if constexpr (ST) {
                        const float2 f0 = lo_ok ? unpack2<E>(lo) : make_float2(0.0f, 0.0f);
                        const float2 f1 = hi_ok ? unpack2<E>(hi) : make_float2(0.0f, 0.0f);
                        sm[jl][0] += f0.x + f1.x;
                        sm[jl][1] += f0.y + f1.y;
                        if (DG) { /* sum g xhat */
                            sm[jl][2] += f0.x * x0.x + f1.x * x1.x;
                            sm[jl][3] += f0.y * x0.y + f1.y * x1.y;
                        } else {
                            sm[jl][2] += f0.x * f0.x + f1.x * f1.x;
                            sm[jl][3] += f0.y * f0.y + f1.y * f1.y;
                        }
                    }
                    acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0;
                }
                __syncwarp();
                const int col = tn * BN + wn * WN + 32 * h;
#pragma unroll
                for (int q = 0; q < 2; q++) {
                    const int e = lane + 32 * q, r = e >> 2, pc = e & 3;
                    if (row + r < M)
                        *reinterpret_cast<uint4 *>(z + (size_t)(row + r) * K + col + 8 * pc) =
                            *reinterpret_cast<const uint4 *>(stg + r * SP + 8 * pc);
                }
                __syncwarp();
            }
            if constexpr (ST) {
#pragma unroll
                for (int jl = 0; jl < 4; jl++) {
#pragma unroll
                    for (int o = 4; o < 32; o <<= 1) /* over g: lanes t, t + 4, ..., t + 28 */
#pragma unroll
                        for (int e = 0; e < 4; e++)
                            sm[jl][e] += __shfl_xor_sync(0xffffffffu, sm[jl][e], o);
                    const int cl = wn * WN + 32 * h + 8 * jl + 2 * t;
                    if (g == 0) {
                        red[(wm * 2 + 0) * BN + cl] = sm[jl][0];
                        red[(wm * 2 + 0) * BN + cl + 1] = sm[jl][1];
                        red[(wm * 2 + 1) * BN + cl] = sm[jl][2];
                        red[(wm * 2 + 1) * BN + cl + 1] = sm[jl][3];
                    }
                }
            }
        }
        if constexpr (ST) {
            __syncthreads(); /* red is whole (its next write comes after the loop's barrier) */
            for (int i = tid; i < 2 * BN; i += THREADS) {
                const int hh = i / BN, k = i % BN;
                float v = red[hh * BN + k];
                for (int q = 1; q < 4; q++) v += red[(q * 2 + hh) * BN + k];
                part[((size_t)tm * 2 + hh) * K + tn * BN + k] = v;
            }
        }
    }
    cp_async_wait<0>();
}

/* The filter gradient's twin: dw[k, c] = sum_m dz[m, k] a[m, c] with a =
 * relu(y s + b) made in registers as the forward's prologue makes it. A
 * GEMM whose reduction is M: block (tile, split) takes a 128 x BN tile of dw
 * (k rows, c columns; 8 warps as 4 x 2, as the forward's) and the split's
 * run of 64-row chunks, dz's 64 x 128 and y's 64 x BN copied STAGES - 1
 * ahead into swizzled 64-column slabs; both operands are read transposed
 * (ldmatrix.trans: dz's rows are m, its columns k; y's likewise). Rows past M
 * are zero-filled in dz, so their a (relu(b), not 0) adds nothing. The
 * block's f32 tile goes to part[split] (fixed order: the finish sums the
 * splits in order). */
template <typename E, int BN>
__global__ void __launch_bounds__(THREADS, 2)
    conv1x1_wgrad_bn_kernel(float *part, const E *dz, const E *y, const float *s, const float *b,
                            int M, int C, int K, int chunks_per_split)
{
    constexpr int WN = BN / 2, NT = WN / 8, MT = 2, BK = 128;
    extern __shared__ __align__(128) unsigned char smem[];
    E *Ds = reinterpret_cast<E *>(smem);
    E *Ys = Ds + STAGES * CK * BK;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp & 3, wn = warp >> 2, g = lane >> 2, t = lane & 3;
    const int ntc = C / BN, tile = blockIdx.x, tk = tile / ntc, tc = tile % ntc;
    const int split = blockIdx.y, nch = (M + CK - 1) / CK;
    const int f0 = split * chunks_per_split;
    const int f1 = f0 + chunks_per_split < nch ? f0 + chunks_per_split : nch;
    const int total = f1 > f0 ? f1 - f0 : 0;
    auto load = [&](int f) {
        const int m0 = (f0 + f) * CK;
        E *ds = Ds + (f % STAGES) * CK * BK, *ys = Ys + (f % STAGES) * CK * BN;
#pragma unroll
        for (int q = 0; q < BK * 8 / THREADS; q++) { /* dz: 64 rows x 128 columns */
            const int i = tid + q * THREADS, r = (i >> 3) & 63, sl = i >> 9, pc = i & 7;
            const int row = m0 + r, ok = row < M;
            cp_async16(smem_u32(ds + sl * CK * CK + swz(r, pc)),
                       dz + (size_t)(ok ? row : 0) * K + tk * BK + sl * 64 + 8 * pc, ok);
        }
#pragma unroll
        for (int q = 0; q < BN * 8 / THREADS; q++) { /* y: 64 rows x BN columns */
            const int i = tid + q * THREADS, r = (i >> 3) & 63, sl = i >> 9, pc = i & 7;
            const int row = m0 + r, ok = row < M;
            cp_async16(smem_u32(ys + sl * CK * CK + swz(r, pc)),
                       y + (size_t)(ok ? row : 0) * C + tc * BN + sl * 64 + 8 * pc, ok);
        }
    };
    /* the prologue's s, b of the channels this lane's B fragments hold */
    float2 sc[NT], bc[NT];
#pragma unroll
    for (int j = 0; j < NT; j++) {
        const int c = tc * BN + wn * WN + 8 * j + g;
        sc[j] = make_float2(__ldg(s + c), __ldg(s + c));
        bc[j] = make_float2(__ldg(b + c), __ldg(b + c));
    }
    pipe_fill(load, total);
    float acc[MT][NT][4];
    zero_acc(acc);
    for (int f = 0; f < total; f++) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        if (f + STAGES - 1 < total) load(f + STAGES - 1);
        cp_async_commit();
        const E *ds = Ds + (f % STAGES) * CK * BK, *ys = Ys + (f % STAGES) * CK * BN;
#pragma unroll
        for (int kk = 0; kk < CK; kk += 16) {
            uint32_t af[MT][4];
#pragma unroll
            for (int i = 0; i < MT; i++) { /* A[k][m] = dz[m][k]: stored rows m */
                const int q = lane >> 3, r = kk + (lane & 7) + ((q >> 1) << 3);
                const int k = wm * 32 + 16 * i + ((q & 1) << 3);
                ldsm_x4_t(af[i], smem_u32(ds + (k >> 6) * CK * CK + swz(r, (k & 63) >> 3)));
            }
#pragma unroll
            for (int jj = 0; jj < NT / 2; jj++) {
                uint32_t bf[4];
                const int r = kk + (lane & 7) + ((lane >> 3) & 1) * 8;
                const int n = wn * WN + 16 * jj + ((lane >> 4) << 3);
                ldsm_x4_t(bf, smem_u32(ys + (n >> 6) * CK * CK + swz(r, (n & 63) >> 3)));
                bf[0] = pro2<E>(bf[0], sc[2 * jj], bc[2 * jj]);
                bf[1] = pro2<E>(bf[1], sc[2 * jj], bc[2 * jj]);
                bf[2] = pro2<E>(bf[2], sc[2 * jj + 1], bc[2 * jj + 1]);
                bf[3] = pro2<E>(bf[3], sc[2 * jj + 1], bc[2 * jj + 1]);
#pragma unroll
                for (int i = 0; i < MT; i++) {
                    mma16816<E>(acc[i][2 * jj], af[i], bf[0], bf[1]);
                    mma16816<E>(acc[i][2 * jj + 1], af[i], bf[2], bf[3]);
                }
            }
        }
    }
    cp_async_wait<0>();
    float *out = part + (size_t)split * K * C;
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++) {
            const int k = tk * BK + wm * 32 + 16 * i + g, c = tc * BN + wn * WN + 8 * j + 2 * t;
            *reinterpret_cast<float2 *>(out + (size_t)k * C + c) =
                make_float2(acc[i][j][0], acc[i][j][1]);
            *reinterpret_cast<float2 *>(out + (size_t)(k + 8) * C + c) =
                make_float2(acc[i][j][2], acc[i][j][3]);
        }
}

/* dw[i] (+)= sum over the S splits of part[s][i], in order */
template <typename O>
__global__ void conv1x1_wgrad_finish_kernel(O *dw, const float *part, int S, size_t n, int accum)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = 0.0f;
    for (int q = 0; q < S; q++) v += part[(size_t)q * n + i];
    if (accum) v += to_f32(dw[i]);
    dw[i] = from_f32<O>(v);
}

/* out [P][2][K] = the sums of part [G][2][K] in P slices of rows: a block
 * 32 channels x 8 lanes of rows (lane l takes l, l + 8, ...), then the
 * lanes in order */
__global__ void conv1x1_bn_finish_kernel(float *out, const float *part, int G, int K)
{
    __shared__ float r[2][8][32];
    const int P = gridDim.y, p = blockIdx.y;
    const int lo = (int)((long long)G * p / P), hi = (int)((long long)G * (p + 1) / P);
    const int k = blockIdx.x * 32 + (threadIdx.x & 31), l = threadIdx.x >> 5;
    float s = 0.0f, q = 0.0f;
    if (k < K)
        for (int i = lo + l; i < hi; i += 8) {
            s += part[((size_t)i * 2) * K + k];
            q += part[((size_t)i * 2 + 1) * K + k];
        }
    r[0][l][threadIdx.x & 31] = s;
    r[1][l][threadIdx.x & 31] = q;
    __syncthreads();
    if (l < 2 && k < K) {
        float v = 0.0f;
        for (int i = 0; i < 8; i++) v += r[l][i][threadIdx.x & 31];
        out[((size_t)p * 2 + l) * K + k] = v;
    }
}

template <typename E, int BN, bool DG, bool ST>
void launch(void *z, float *part, const void *y, const Bn &bn, const void *w, int M, int C, int K,
            cudaStream_t st)
{
    auto kern = conv1x1_bn_kernel<E, BN, DG, ST>;
    /* the opt-in and the carveout are settings of the current device: made
     * once a device, with the grid they allow (blocks an SM x SMs) */
    static int grid_of[64];
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CT_ASSERT(dev >= 0 && dev < 64, "conv1x1_bn: device %d", dev);
    if (!grid_of[dev]) {
        smem_optin(kern, smem_bytes<BN>());
        CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributePreferredSharedMemoryCarveout,
                                        cudaSharedmemCarveoutMaxShared));
        int per_sm = 0;
        CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, THREADS,
                                                                 smem_bytes<BN>()));
        grid_of[dev] = (per_sm > 0 ? per_sm : 1) * sm_count();
    }
    const int tiles = (M + BM - 1) / BM * (K / BN);
    const int cap = grid_of[dev];
    kern<<<tiles < cap ? tiles : cap, THREADS, smem_bytes<BN>(), st>>>(
        (E *)z, part, (const E *)y, bn, (const E *)w, M, C, K);
    CUDA_CHECK_LAUNCH();
}

/* the kernel for E, the tile's width (128 where K allows) and the direction:
 * the data gradient's epilogue spills at 128 channels, so 64; the forward
 * without statistics when there are no partials to write */
template <typename E, bool DG>
void launch_e(void *z, float *part, const void *a, const Bn &bn, const void *w, int M, int C,
              int K, cudaStream_t st_)
{
    const bool wide = K % 128 == 0, st = part != nullptr;
    if constexpr (DG) launch<E, 64, true, true>(z, part, a, bn, w, M, C, K, st_);
    else if (wide && st) launch<E, 128, false, true>(z, part, a, bn, w, M, C, K, st_);
    else if (wide) launch<E, 128, false, false>(z, part, a, bn, w, M, C, K, st_);
    else if (st) launch<E, 64, false, true>(z, part, a, bn, w, M, C, K, st_);
    else launch<E, 64, false, false>(z, part, a, bn, w, M, C, K, st_);
}

template <bool DG>
void launch_dt(void *z, float *part, const void *a, const Bn &bn, const void *w, DType dt, size_t M,
               int C, int K, cudaStream_t st_)
{
    CT_ASSERT(M > 0 && M <= (size_t)1 << 30 && C % CK == 0 && K % 64 == 0 && K <= 2048,
              "conv1x1_bn: M %zu, C %d, K %d outside the kernel's shapes", M, C, K);
    CT_ASSERT(part || !DG, "conv1x1_bn: the data gradient's sums need partials");
    if (dt == DT_BF16) launch_e<__nv_bfloat16, DG>(z, part, a, bn, w, (int)M, C, K, st_);
    else if (dt == DT_F16) launch_e<__half, DG>(z, part, a, bn, w, (int)M, C, K, st_);
    else ct_fatal("conv1x1_bn: type %s (f16 or bf16)", dtype_name(dt));
}

/* The filter gradient's splits of M (and the chunks of 64 rows each takes):
 * about two blocks an SM over the (K / 128) x (C / 64) tiles */
int wgrad_splits(size_t M, int C, int K, int *cps)
{
    const int tiles = (K / 128) * (C / 64), nch = (int)((M + CK - 1) / CK);
    int S = (2 * sm_count() + tiles - 1) / tiles;
    if (S > nch) S = nch;
    *cps = (nch + S - 1) / S;
    return (nch + *cps - 1) / *cps;
}

/* The filter gradient's launch: (K / 128) x (C / 64) tiles, each split
 * over M so that the grid fills the card twice (the splits, and so the
 * sum's order, depend on the shape and the card's multiprocessors), then
 * the ordered finish into dw of type tdw. */
template <typename E>
void launch_wgrad(void *dw, DType tdw, int accum, float *part, size_t part_floats, const void *dz,
                  const void *y, const float *s, const float *b, int M, int C, int K,
                  cudaStream_t st)
{
    auto kern = conv1x1_wgrad_bn_kernel<E, 64>;
    static int done[64];
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CT_ASSERT(dev >= 0 && dev < 64, "conv1x1_bn: device %d", dev);
    if (!done[dev]) {
        smem_optin(kern, smem_bytes_wgrad<64>());
        CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributePreferredSharedMemoryCarveout,
                                        cudaSharedmemCarveoutMaxShared));
        done[dev] = 1;
    }
    const int tiles = (K / 128) * (C / 64);
    int cps = 0;
    const int S = wgrad_splits(M, C, K, &cps);
    CT_ASSERT((size_t)S * K * C <= part_floats, "conv1x1_wgrad_bn: %d splits past the scratch",
              S);
    kern<<<dim3(tiles, S), THREADS, smem_bytes_wgrad<64>(), st>>>(
        part, (const E *)dz, (const E *)y, s, b, M, C, K, cps);
    CUDA_CHECK_LAUNCH();
    const size_t n = (size_t)K * C;
    const unsigned blocks = (unsigned)((n + 255) / 256);
    if (tdw == DT_F32)
        conv1x1_wgrad_finish_kernel<<<blocks, 256, 0, st>>>((float *)dw, part, S, n, accum);
    else if (tdw == DT_BF16)
        conv1x1_wgrad_finish_kernel<<<blocks, 256, 0, st>>>((__nv_bfloat16 *)dw, part, S, n,
                                                             accum);
    else if (tdw == DT_F16)
        conv1x1_wgrad_finish_kernel<<<blocks, 256, 0, st>>>((__half *)dw, part, S, n, accum);
    else
        ct_fatal("conv1x1_wgrad_bn: gradient type %s", dtype_name(tdw));
    CUDA_CHECK_LAUNCH();
}

} // namespace

/* shared memory a block of the kernel takes at K output channels */
extern "C" size_t conv1x1_bn_smem(int K)
{
    return K % 128 == 0 ? (size_t)smem_bytes<128>() : (size_t)smem_bytes<64>();
}

/* partials a call needs, in floats: [G][2][K] then the finish's [64][2][K] */
extern "C" size_t conv1x1_bn_part_floats(size_t M, int K)
{
    return ((M + BM - 1) / BM + 64) * 2 * (size_t)K;
}

extern "C" void conv1x1_bn_finish(float *sums, float *part, size_t M, int K, void *stream);

extern "C" void conv1x1_bn_launch(void *z, float *sums, float *part, const void *y,
                                  const float *scale, const float *bias, const void *w, DType dt,
                                  size_t M, int C, int K, void *stream)
{
    CT_ASSERT(part || !sums, "conv1x1_bn: sums need partials");
    const Bn bn = {scale, bias, nullptr, nullptr, nullptr, nullptr, nullptr};
    launch_dt<false>(z, part, y, bn, w, dt, M, C, K, (cudaStream_t)stream);
    if (sums) conv1x1_bn_finish(sums, part, M, K, stream);
}

extern "C" void conv1x1_dgrad_bn_launch(void *g, float *sums, float *part, const void *dz,
                                        const void *w, const void *y, const float *mean,
                                        const float *invstd, const float *gamma,
                                        const float *beta, DType dt, size_t M, int C, int K,
                                        void *stream)
{
    const Bn bn = {nullptr, nullptr, mean, invstd, gamma, beta, y};
    launch_dt<true>(g, part, dz, bn, w, dt, M, K, C, (cudaStream_t)stream);
    conv1x1_bn_finish(sums, part, M, C, stream);
}

extern "C" void conv1x1_bn_finish(float *sums, float *part, size_t M, int K, void *stream)
{
    cudaStream_t st = (cudaStream_t)stream;
    const int G = (int)((M + BM - 1) / BM), P = G < 64 * 16 ? (G + 15) / 16 : 64;
    float *mid = part + (size_t)G * 2 * K;
    conv1x1_bn_finish_kernel<<<dim3((K + 31) / 32, P), 256, 0, st>>>(mid, part, G, K);
    CUDA_CHECK_LAUNCH();
    conv1x1_bn_finish_kernel<<<dim3((K + 31) / 32, 1), 256, 0, st>>>(sums, mid, P, K);
    CUDA_CHECK_LAUNCH();
}

/* the filter gradient's scratch: a K x C tile of floats a split */
extern "C" size_t conv1x1_wgrad_bn_part_floats(size_t M, int C, int K)
{
    int cps = 0;
    return (size_t)wgrad_splits(M, C, K, &cps) * K * C;
}

extern "C" void conv1x1_wgrad_bn_launch(void *dw, DType tdw, int accum, float *part,
                                        size_t part_floats, const void *dz, const void *y,
                                        const float *scale, const float *bias, DType dt,
                                        size_t M, int C, int K, void *stream)
{
    cudaStream_t st = (cudaStream_t)stream;
    CT_ASSERT(M > 0 && M <= (size_t)1 << 30 && C % 64 == 0 && K % 128 == 0,
              "conv1x1_wgrad_bn: M %zu, C %d, K %d outside the kernel's shapes", M, C, K);
    if (dt == DT_BF16)
        launch_wgrad<__nv_bfloat16>(dw, tdw, accum, part, part_floats, dz, y, scale, bias,
                                    (int)M, C, K, st);
    else if (dt == DT_F16)
        launch_wgrad<__half>(dw, tdw, accum, part, part_floats, dz, y, scale, bias, (int)M, C, K,
                             st);
    else
        ct_fatal("conv1x1_wgrad_bn: type %s (f16 or bf16)", dtype_name(dt));
}
