/* conv1x1_bn_probe.cu — does a 1 x 1 convolution of our own, with the batch
 * norm's apply + ReLU in its prologue and the next batch norm's statistics in
 * its epilogue, beat cuBLAS's GEMM with the two separate passes around it?
 * (docs/kernels.md, "The 1 x 1 convolutions as GEMMs of our own with the
 * batch norm around them"). A measurement, not a test: nothing in ctrain
 * calls this kernel yet.
 *
 * Over NHWC rows a 1 x 1 convolution is a GEMM. For a [M, C] (the previous
 * convolution's raw output, bf16), the batch norm's per-channel scale s and
 * shift b [C] (f32), and the filters W [K, C] (bf16):
 *
 *   separate   a2 = bf16(relu(a s + b))            (one pass: reads a, writes a2)
 *              y  = bf16(a2 W^T)                   (cuBLAS, f32 accumulation)
 *              sum[k] = sum_m y[m, k], sq[k] = sum_m y[m, k]^2   (one pass: reads y)
 *   fused      the same three in one kernel: a2 made in registers as a is
 *              loaded (never stored), y written once, the sums of y's stored
 *              (bf16) values taken from the accumulators, per block of 128
 *              rows, then a [K] finish in a fixed order (deterministic).
 *
 * Without the prologue (--plain: a bottleneck's first 1 x 1, whose input is
 * the block's input) a2 = a. The kernel (the second form; the first, a's
 * fragments loaded from global memory straight into registers and one
 * tile a block, ran at 2-3x its floor on an H100, results/h100-2026-12-06/
 * conv1x1-probe/): a persistent grid, a and W copied a 64-channel chunk at
 * a time into swizzled shared memory with cp.async, three chunks in
 * flight across tiles, ldmatrix, the prologue on a's fragments in
 * registers, mma.sync m16n8k16 bf16 with f32 accumulators; 8 warps as 4
 * (rows) x 2 (channels) over a 128 x BN tile.
 *
 * Checks: y against cuBLAS's (relative norm; the inputs are bit for bit the
 * same, the accumulation order differs), the sums against the separate
 * pass's. Times: CUDA events, median of 20 after 3 warm-ups, each piece;
 * beside them both ways' floors at the card's copy bandwidth (a 1 GiB device
 * copy, measured first), and "sep ideal": cuBLAS's measured GEMM with the
 * two passes at that bandwidth, the separate way at its best. The separate
 * passes here are kernels of this file (16-byte apply, a column-pair
 * statistics pass), not cuDNN's batch norm,
 * whose forward does the same two passes (docs/kernels.md: at 67-81% of the
 * bandwidth in ResNet's step).
 *
 *   build/conv1x1_bn_probe [N] [--plain] [--bn64]
 *     N images (default 256); --bn64: 64 output channels a block everywhere
 *     (else 128 where K allows: more products a loaded A word, more
 *     registers)
 *
 * Shapes: ResNet-50's 1 x 1 convolutions at N images (stage: rows, C -> K).
 */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/error.h"
#include "ops/attention_fa_tc.cuh" /* cp.async, ldmatrix, mma.sync */

namespace {

const int BM = 128;     /* rows a block: 8 warps x 16 */
const int CKC = 64;     /* input channels a chunk */
const int THREADS = 256;

/* the prologue, as the separate pass computes it */
__device__ __forceinline__ float bn_relu(float a, float s, float b)
{
    return fmaxf(__fmaf_rn(a, s, b), 0.0f);
}

__device__ __forceinline__ uint32_t pack2(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
}

/* a word of two bf16 a[.., c], a[.., c + 1] through the prologue */
__device__ __forceinline__ uint32_t pro(uint32_t w, const float *s, const float *b, int c,
                                        bool plain)
{
    if (plain) return w;
    __nv_bfloat162 v = *reinterpret_cast<__nv_bfloat162 *>(&w);
    const float2 f = __bfloat1622float2(v);
    return pack2(bn_relu(f.x, s[c], b[c]), bn_relu(f.y, s[c + 1], b[c + 1]));
}

/* pro on a word already split: channels c, c + 1 take (s.x, b.x), (s.y, b.y) */
__device__ __forceinline__ uint32_t pro2(uint32_t w, float2 s, float2 b)
{
    const float2 f = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162 *>(&w));
    return pack2(bn_relu(f.x, s.x, b.x), bn_relu(f.y, s.y, b.y));
}

/* y [M, K] = bf16(pro(a) W^T), part [M / 128][2][K]: a row block's sums of y
 * and y^2 per channel (its 128 rows: a lane's four, the warp's eight lanes
 * by a fixed butterfly, then the four row warps in order). M % 128 == 0,
 * C % 64 == 0, K % BN == 0.
 *
 * A persistent grid (two blocks an SM); block i takes the tiles i, i + grid,
 * ..., a tile being 128 rows x BN output channels, numbered with the channel
 * slice fastest (the blocks side by side share a's rows through L2). A tile
 * is C / 64 chunks; the chunks of all the block's tiles are one stream,
 * copied STAGES - 1 ahead with cp.async into shared memory (a's 128 x 64
 * and W's BN x 64, each 16-byte piece at column piece (p ^ row % 8), so the
 * eight rows an ldmatrix reads sit in eight bank groups): the next tile's
 * first chunks are in flight while this one's products and stores run.
 * Warps: 4 along rows (32 each) x 2 along channels (BN / 2 each); a's
 * fragments go through the prologue in registers after ldmatrix (their
 * channels are 2t, 2t + 1, 2t + 8, 2t + 9 of the k-step). */
const int STAGES = 3;
const int SP = 40; /* a warp's y staging tile [16][32]: row pitch (bf16), rows 20 banks apart */
template <int BN> constexpr int smem_bytes()
{
    return STAGES * (BM + BN) * CKC * 2 + 4 * 2 * BN * 4 + 8 * 16 * SP * 2;
}
/* chunk piece (row r, 16-byte piece p) of a 64-column swizzled tile */
__device__ __forceinline__ int swz(int r, int p)
{
    return r * CKC + ((p ^ (r & 7)) << 3);
}
template <int BN>
__global__ void __launch_bounds__(THREADS, 2)
    conv1x1_bn_kernel(__nv_bfloat16 *y, float *part, const __nv_bfloat16 *a, const float *s,
                      const float *b, const __nv_bfloat16 *W, int M, int C, int K, bool plain)
{
    constexpr int WN = BN / 2, NT = WN / 8, MT = 2;
    extern __shared__ __align__(128) unsigned char smem[];
    __nv_bfloat16 *As = reinterpret_cast<__nv_bfloat16 *>(smem);
    __nv_bfloat16 *Ws = As + STAGES * BM * CKC;
    float *red = reinterpret_cast<float *>(Ws + STAGES * BN * CKC); /* [4][2][BN] */
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp & 3, wn = warp >> 2, g = lane >> 2, t = lane & 3;
    __nv_bfloat16 *stg = reinterpret_cast<__nv_bfloat16 *>(red + 4 * 2 * BN) + warp * 16 * SP;
    const int ntn = K / BN, tiles = (M / BM) * ntn, nck = C / CKC;
    const int mine = (int)blockIdx.x < tiles ? (tiles - 1 - (int)blockIdx.x) / gridDim.x + 1 : 0;
    const int total = mine * nck;
    auto load = [&](int f) {
        const int tile = blockIdx.x + (f / nck) * gridDim.x, ck = f % nck;
        const int tm = tile / ntn, tn = tile % ntn;
        __nv_bfloat16 *as = As + (f % STAGES) * BM * CKC, *ws = Ws + (f % STAGES) * BN * CKC;
        const __nv_bfloat16 *ag = a + (size_t)tm * BM * C + ck * CKC;
        const __nv_bfloat16 *wg = W + (size_t)tn * BN * C + ck * CKC;
#pragma unroll
        for (int q = 0; q < BM * 8 / THREADS; q++) {
            const int i = tid + q * THREADS, r = i >> 3, p = i & 7;
            cp_async16(smem_u32(as + swz(r, p)), ag + (size_t)r * C + 8 * p, true);
        }
#pragma unroll
        for (int q = 0; q < BN * 8 / THREADS; q++) {
            const int i = tid + q * THREADS, r = i >> 3, p = i & 7;
            cp_async16(smem_u32(ws + swz(r, p)), wg + (size_t)r * C + 8 * p, true);
        }
    };
#pragma unroll
    for (int f = 0; f < STAGES - 1; f++) {
        if (f < total) load(f);
        cp_async_commit();
    }
    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0;
    for (int f = 0; f < total; f++) {
        cp_async_wait<STAGES - 2>();
        __syncthreads(); /* chunk f landed; stage (f - 1) % STAGES is read by every warp */
        if (f + STAGES - 1 < total) load(f + STAGES - 1);
        cp_async_commit();
        const __nv_bfloat16 *as = As + (f % STAGES) * BM * CKC, *ws = Ws + (f % STAGES) * BN * CKC;
        const int ck = f % nck;
#pragma unroll
        for (int kk = 0; kk < CKC; kk += 16) {
            uint32_t af[MT][4];
#pragma unroll
            for (int i = 0; i < MT; i++) {
                const int r = wm * 32 + 16 * i + (lane & 15);
                ldsm_x4(af[i], smem_u32(as + swz(r, (kk >> 3) + (lane >> 4))));
            }
            if (!plain) {
                const int c = ck * CKC + kk + 2 * t;
                const float2 s0 = __ldg(reinterpret_cast<const float2 *>(s + c));
                const float2 s1 = __ldg(reinterpret_cast<const float2 *>(s + c + 8));
                const float2 b0 = __ldg(reinterpret_cast<const float2 *>(b + c));
                const float2 b1 = __ldg(reinterpret_cast<const float2 *>(b + c + 8));
#pragma unroll
                for (int i = 0; i < MT; i++) {
                    af[i][0] = pro2(af[i][0], s0, b0);
                    af[i][1] = pro2(af[i][1], s0, b0);
                    af[i][2] = pro2(af[i][2], s1, b1);
                    af[i][3] = pro2(af[i][3], s1, b1);
                }
            }
#pragma unroll
            for (int jj = 0; jj < NT / 2; jj++) {
                uint32_t bf[4];
                const int n = wn * WN + 16 * jj + (lane & 7) + ((lane >> 4) << 3);
                ldsm_x4(bf, smem_u32(ws + swz(n, (kk >> 3) + ((lane >> 3) & 1))));
#pragma unroll
                for (int i = 0; i < MT; i++) {
                    mma16816<__nv_bfloat16>(acc[i][2 * jj], af[i], bf[0], bf[1]);
                    mma16816<__nv_bfloat16>(acc[i][2 * jj + 1], af[i], bf[2], bf[3]);
                }
            }
        }
        if (ck != nck - 1) continue;
        /* the tile's epilogue: y as stored, its sums from the stored values; y
         * through the warp's staging tile, 16 rows x 32 channels at a time, so
         * that each row's 64 bytes go out as four 16-byte stores */
        const int tile = blockIdx.x + (f / nck) * gridDim.x, tm = tile / ntn, tn = tile % ntn;
#pragma unroll
        for (int h = 0; h < NT / 4; h++) {
            float sm[4][4] = {};
#pragma unroll
            for (int i = 0; i < MT; i++) {
#pragma unroll
                for (int jl = 0; jl < 4; jl++) {
                    const int j = 4 * h + jl;
                    const uint32_t lo = pack2(acc[i][j][0], acc[i][j][1]);
                    const uint32_t hi = pack2(acc[i][j][2], acc[i][j][3]);
                    *reinterpret_cast<uint32_t *>(stg + g * SP + 8 * jl + 2 * t) = lo;
                    *reinterpret_cast<uint32_t *>(stg + (g + 8) * SP + 8 * jl + 2 * t) = hi;
                    const float2 f0 = unpack2<__nv_bfloat16>(lo), f1 = unpack2<__nv_bfloat16>(hi);
                    sm[jl][0] += f0.x + f1.x;
                    sm[jl][1] += f0.y + f1.y;
                    sm[jl][2] += f0.x * f0.x + f1.x * f1.x;
                    sm[jl][3] += f0.y * f0.y + f1.y * f1.y;
                    acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0;
                }
                __syncwarp();
                const size_t row = (size_t)tm * BM + wm * 32 + 16 * i;
                const int col = tn * BN + wn * WN + 32 * h;
#pragma unroll
                for (int q = 0; q < 2; q++) {
                    const int c = lane + 32 * q, r = c >> 2, pc = c & 3;
                    *reinterpret_cast<uint4 *>(y + (row + r) * K + col + 8 * pc) =
                        *reinterpret_cast<const uint4 *>(stg + r * SP + 8 * pc);
                }
                __syncwarp();
            }
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
        __syncthreads(); /* red is whole (the next write to it is after the loop's barrier) */
        for (int i = tid; i < 2 * BN; i += THREADS) {
            const int h = i / BN, k = i % BN;
            float v = red[h * BN + k];
            for (int w = 1; w < 4; w++) v += red[(w * 2 + h) * BN + k];
            part[((size_t)tm * 2 + h) * K + tn * BN + k] = v;
        }
    }
    cp_async_wait<0>();
}

/* the separate passes */
/* a2 = pro(a), 8 channels (16 bytes) a thread; C % 8 == 0 */
__global__ void apply_kernel(__nv_bfloat16 *a2, const __nv_bfloat16 *a, const float *s,
                             const float *b, size_t n, int C)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n / 8;
         i += (size_t)gridDim.x * blockDim.x) {
        const int c = (int)((8 * i) % (size_t)C);
        uint4 v = reinterpret_cast<const uint4 *>(a)[i];
        v.x = pro(v.x, s, b, c, false);
        v.y = pro(v.y, s, b, c + 2, false);
        v.z = pro(v.z, s, b, c + 4, false);
        v.w = pro(v.w, s, b, c + 6, false);
        reinterpret_cast<uint4 *>(a2)[i] = v;
    }
}

/* part [M / 128][2][K]: a block's 128 rows, 256 threads as K / 2 column pairs
 * x the rest over rows (in order: row slices, then their sums in order) */
__global__ void stats_kernel(float *part, const __nv_bfloat16 *y, int K)
{
    __shared__ float r[2][256][2];
    const int pairs = K / 2 < 256 ? K / 2 : 256, slices = 256 / pairs;
    const int pc = threadIdx.x % pairs, sl = threadIdx.x / pairs;
    for (int p = pc; p < K / 2; p += pairs) {
        float s0 = 0.0f, s1 = 0.0f, q0 = 0.0f, q1 = 0.0f;
        if (sl < slices) {
            const __nv_bfloat16 *py = y + (size_t)blockIdx.x * BM * K + 2 * p;
            for (int row = sl; row < BM; row += slices) {
                const float2 v = __bfloat1622float2(
                    *reinterpret_cast<const __nv_bfloat162 *>(py + (size_t)row * K));
                s0 += v.x;
                s1 += v.y;
                q0 += v.x * v.x;
                q1 += v.y * v.y;
            }
        }
        r[0][threadIdx.x][0] = s0;
        r[0][threadIdx.x][1] = s1;
        r[1][threadIdx.x][0] = q0;
        r[1][threadIdx.x][1] = q1;
        __syncthreads();
        if (sl == 0)
            for (int h = 0; h < 2; h++) {
                float u = 0.0f, v = 0.0f;
                for (int k = 0; k < slices; k++) {
                    u += r[h][k * pairs + pc][0];
                    v += r[h][k * pairs + pc][1];
                }
                part[((size_t)blockIdx.x * 2 + h) * K + 2 * p] = u;
                part[((size_t)blockIdx.x * 2 + h) * K + 2 * p + 1] = v;
            }
        __syncthreads();
    }
}

/* out [P][2][K] = the sums of G partials [G][2][K] in P slices (slice p
 * rows [p G / P, (p + 1) G / P)): a block 32 channels x 8 lanes of rows
 * (lane l takes l, l + 8, ...), then the lanes in order. Called twice (G
 * partials to P, then P to one): a fixed order, and enough blocks to fill
 * the card at K = 64 */
__global__ void finish_kernel(float *out, const float *part, int G, int K)
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
/* out [2][K] from part [G][2][K], through mid [64][2][K] */
void finish(float *out, float *mid, const float *part, int G, int K)
{
    const int P = G < 64 * 16 ? (G + 15) / 16 : 64;
    finish_kernel<<<dim3((K + 31) / 32, P), 256>>>(mid, part, G, K);
    finish_kernel<<<dim3((K + 31) / 32, 1), 256>>>(out, mid, P, K);
}

struct Shape {
    const char *name;
    int hw, C, K; /* rows = N hw */
};

float median(float *v, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            const float x = v[j];
            v[j] = v[j - 1];
            v[j - 1] = x;
        }
    return v[n / 2];
}

uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

float from_bf16(uint16_t h)
{
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint32_t lcg = 12345u;
float urand(float lo, float hi)
{
    lcg = lcg * 1664525u + 1013904223u;
    return lo + (hi - lo) * (float)(lcg >> 8) / 16777216.0f;
}

} // namespace

int main(int argc, char **argv)
{
    int N = 256;
    bool plain = false, bn64 = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--plain")) plain = true;
        else if (!strcmp(argv[i], "--bn64")) bn64 = true;
        else N = atoi(argv[i]);
    }
    if (N < 1) {
        fprintf(stderr, "usage: conv1x1_bn_probe [N] [--plain] [--bn64]\n");
        return 2;
    }
    const Shape shapes[] = {
        {"stage 1 conv3 64->256", 56 * 56, 64, 256},
        {"stage 1 conv1 256->64", 56 * 56, 256, 64},
        {"stage 2 conv3 128->512", 28 * 28, 128, 512},
        {"stage 2 conv1 512->128", 28 * 28, 512, 128},
        {"stage 3 conv3 256->1024", 14 * 14, 256, 1024},
        {"stage 3 conv1 1024->256", 14 * 14, 1024, 256},
        {"stage 4 conv3 512->2048", 7 * 7, 512, 2048},
        {"stage 4 conv1 2048->512", 7 * 7, 2048, 512},
    };
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    printf("conv1x1_bn_probe: %s, N %d, %s, %s; times in us (median of 20)\n", prop.name, N,
           plain ? "no prologue (--plain)" : "BN apply + ReLU prologue",
           bn64 ? "64 channels a block" : "128 channels a block where K allows");
    /* the copy bandwidth: 1 GiB device to device, read + write */
    double bw;
    {
        const size_t nb = (size_t)1 << 30;
        void *x0, *x1;
        CUDA_CHECK(cudaMalloc(&x0, nb));
        CUDA_CHECK(cudaMalloc(&x1, nb));
        float ms[7];
        for (int r = 0; r < 9; r++) {
            CUDA_CHECK(cudaEventRecord(e0));
            CUDA_CHECK(cudaMemcpyAsync(x1, x0, nb, cudaMemcpyDeviceToDevice));
            CUDA_CHECK(cudaEventRecord(e1));
            CUDA_CHECK(cudaEventSynchronize(e1));
            if (r >= 2) CUDA_CHECK(cudaEventElapsedTime(&ms[r - 2], e0, e1));
        }
        bw = 2.0 * (double)nb / (1e-3 * median(ms, 7));
        CUDA_CHECK(cudaFree(x0));
        CUDA_CHECK(cudaFree(x1));
        printf("copy bandwidth %.0f GB/s (floors below: bytes moved / that)\n", bw / 1e9);
    }
    printf("%-26s %9s %9s %9s %9s %9s %9s %8s %9s %9s %9s %8s %9s %9s %9s\n", "shape", "apply",
           "gemm", "stats", "separate", "fused", "kernel", "speedup", "sep floor", "fus floor",
           "sep ideal", "vs ideal", "y err", "sum err", "sq err");
    cublasHandle_t h;
    CUBLAS_CHECK(cublasCreate(&h));
    /* shared memory for two blocks an SM: the largest carveout, asked for (the
     * driver's default may leave room for one); the grid: the blocks that fit */
    const cudaFuncAttribute dyn = cudaFuncAttributeMaxDynamicSharedMemorySize;
    const cudaFuncAttribute cav = cudaFuncAttributePreferredSharedMemoryCarveout;
    CUDA_CHECK(cudaFuncSetAttribute(conv1x1_bn_kernel<128>, dyn, smem_bytes<128>()));
    CUDA_CHECK(cudaFuncSetAttribute(conv1x1_bn_kernel<64>, dyn, smem_bytes<64>()));
    CUDA_CHECK(cudaFuncSetAttribute(conv1x1_bn_kernel<128>, cav, cudaSharedmemCarveoutMaxShared));
    CUDA_CHECK(cudaFuncSetAttribute(conv1x1_bn_kernel<64>, cav, cudaSharedmemCarveoutMaxShared));
    int fit = 0;
    if (bn64)
        CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, conv1x1_bn_kernel<64>,
                                                                 THREADS, smem_bytes<64>()));
    else
        CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, conv1x1_bn_kernel<128>,
                                                                 THREADS, smem_bytes<128>()));
    printf("fused kernel: %d blocks an SM fit (%d bytes of shared memory a block)\n", fit,
           bn64 ? smem_bytes<64>() : smem_bytes<128>());
    const unsigned grid = (unsigned)(fit > 0 ? fit : 1) * (unsigned)prop.multiProcessorCount;
    for (const Shape &sh : shapes) {
        const size_t M = (size_t)N * sh.hw;
        const int C = sh.C, K = sh.K;
        if (M % BM || C % CKC || K % 64 || K > 2048) {
            printf("%-26s rows %zu, C %d, K %d: outside the kernel's shapes, skipped\n",
                   sh.name, M, C, K);
            continue;
        }
        const size_t na = M * C, nw = (size_t)K * C, ny = M * K, G = M / BM;
        uint16_t *ha = (uint16_t *)malloc(na * 2), *hw = (uint16_t *)malloc(nw * 2);
        float *hs = (float *)malloc(C * 4), *hb = (float *)malloc(C * 4);
        for (size_t i = 0; i < na; i++) ha[i] = to_bf16(urand(-2.0f, 2.0f));
        for (size_t i = 0; i < nw; i++) hw[i] = to_bf16(urand(-0.1f, 0.1f));
        for (int i = 0; i < C; i++) {
            hs[i] = urand(0.5f, 1.5f);
            hb[i] = urand(-0.5f, 0.5f);
        }
        __nv_bfloat16 *a, *a2, *W, *y0, *y1;
        float *s, *b, *p0, *p1, *o0, *o1, *mid;
        CUDA_CHECK(cudaMalloc(&a, na * 2));
        CUDA_CHECK(cudaMalloc(&a2, na * 2));
        CUDA_CHECK(cudaMalloc(&W, nw * 2));
        CUDA_CHECK(cudaMalloc(&y0, ny * 2));
        CUDA_CHECK(cudaMalloc(&y1, ny * 2));
        CUDA_CHECK(cudaMalloc(&s, C * 4));
        CUDA_CHECK(cudaMalloc(&b, C * 4));
        CUDA_CHECK(cudaMalloc(&p0, G * 2 * K * 4));
        CUDA_CHECK(cudaMalloc(&p1, G * 2 * K * 4));
        CUDA_CHECK(cudaMalloc(&o0, 2 * K * 4));
        CUDA_CHECK(cudaMalloc(&o1, 2 * K * 4));
        CUDA_CHECK(cudaMalloc(&mid, 64 * 2 * K * 4));
        CUDA_CHECK(cudaMemcpy(a, ha, na * 2, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(W, hw, nw * 2, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(s, hs, C * 4, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(b, hb, C * 4, cudaMemcpyHostToDevice));
        const float one = 1.0f, zero = 0.0f;
        const __nv_bfloat16 *gin = plain ? a : a2;
        auto apply = [&]() {
            if (!plain) apply_kernel<<<(unsigned)(prop.multiProcessorCount * 8), 256>>>(
                a2, a, s, b, na, C);
        };
        auto gemm = [&]() {
            CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, K, (int)M, C, &one, W,
                                      CUDA_R_16BF, C, gin, CUDA_R_16BF, C, &zero, y0,
                                      CUDA_R_16BF, K, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        };
        auto stats = [&]() {
            stats_kernel<<<(unsigned)G, 256>>>(p0, y0, K);
            finish(o0, mid, p0, (int)G, K);
        };
        auto kernel = [&]() {
            if (K % 128 == 0 && !bn64)
                conv1x1_bn_kernel<128><<<grid, THREADS, smem_bytes<128>()>>>(y1, p1, a, s, b, W,
                                                                          (int)M, C, K, plain);
            else
                conv1x1_bn_kernel<64><<<grid, THREADS, smem_bytes<64>()>>>(y1, p1, a, s, b, W,
                                                                        (int)M, C, K, plain);
        };
        auto fused = [&]() {
            kernel();
            finish(o1, mid, p1, (int)G, K);
        };
        float t[6];
        for (int piece = 0; piece < 6; piece++) {
            float ms[20];
            for (int r = 0; r < 23; r++) {
                CUDA_CHECK(cudaEventRecord(e0));
                if (piece == 0) apply();
                if (piece == 1) gemm();
                if (piece == 2) stats();
                if (piece == 3) { apply(); gemm(); stats(); }
                if (piece == 4) fused();
                if (piece == 5) kernel();
                CUDA_CHECK(cudaEventRecord(e1));
                CUDA_CHECK(cudaEventSynchronize(e1));
                if (r >= 3) CUDA_CHECK(cudaEventElapsedTime(&ms[r - 3], e0, e1));
            }
            CUDA_CHECK(cudaGetLastError());
            t[piece] = 1e3f * median(ms, 20);
        }
        /* checks: y and the sums, fused against separate */
        uint16_t *gy0 = (uint16_t *)malloc(ny * 2), *gy1 = (uint16_t *)malloc(ny * 2);
        float go0[2 * 2048], go1[2 * 2048];
        CUDA_CHECK(cudaMemcpy(gy0, y0, ny * 2, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(gy1, y1, ny * 2, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(go0, o0, 2 * K * 4, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(go1, o1, 2 * K * 4, cudaMemcpyDeviceToHost));
        double d = 0, n2 = 0, dh[2] = {0, 0}, nh[2] = {0, 0};
        for (size_t i = 0; i < ny; i++) {
            const double u = from_bf16(gy0[i]), v = from_bf16(gy1[i]);
            d += (u - v) * (u - v);
            n2 += u * u;
        }
        for (int i = 0; i < 2 * K; i++) { /* the sums, then the sums of squares */
            dh[i / K] += ((double)go0[i] - go1[i]) * ((double)go0[i] - go1[i]);
            nh[i / K] += (double)go0[i] * go0[i];
        }
        /* bytes: the separate way reads a (and writes, reads a2), W, writes y, reads y */
        const double io = 2.0 * (double)(na + nw + ny);
        const double sep = io + 2.0 * (double)ny + (plain ? 0.0 : 4.0 * (double)na);
        /* the separate way with cuBLAS's GEMM and both passes at the copy bandwidth */
        const double passes = 2.0 * (double)ny + (plain ? 0.0 : 4.0 * (double)na);
        const double ideal = t[1] + 1e6 * passes / bw;
        printf("%-26s %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %7.2fx %9.1f %9.1f %9.1f %7.2fx %9.2e "
               "%9.2e %9.2e\n",
               sh.name, plain ? 0.0 : t[0], t[1], t[2], t[3], t[4], t[5], t[3] / t[4],
               1e6 * sep / bw, 1e6 * io / bw, ideal, ideal / t[4], sqrt(d / (n2 + 1e-30)),
               sqrt(dh[0] / (nh[0] + 1e-30)), sqrt(dh[1] / (nh[1] + 1e-30)));
        free(gy0);
        free(gy1);
        free(ha);
        free(hw);
        free(hs);
        free(hb);
        void *all[] = {a, a2, W, y0, y1, s, b, p0, p1, o0, o1, mid};
        for (void *p : all) CUDA_CHECK(cudaFree(p));
    }
    CUBLAS_CHECK(cublasDestroy(h));
    printf("y err: relative norm of fused y against cuBLAS's (bit-identical inputs, another "
           "summation order: 1-ulp flips, ~1e-5 to 1e-4; ~1e-3 would mean the prologue rounds "
           "differently); sum err, sq err: the same for the sums and the sums of squares. "
           "Floors leave out the partials (~6%% of y's bytes) and L2 hits (stage 4)\n");
    return 0;
}
