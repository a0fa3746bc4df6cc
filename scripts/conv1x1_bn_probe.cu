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
 * the block's input) a2 = a. The kernel: 8 warps a block, a warp 16 rows x
 * BN output channels (BN 64 or 128, the block's share of K), mma.sync
 * m16n8k16 bf16 with f32 accumulators, A's fragments loaded from global
 * memory a chunk of 64 input channels at a time (all four k-steps' loads
 * issued before the first mma), W's chunk [BN, 64] in shared memory.
 *
 * Checks: y against cuBLAS's (relative norm; the inputs are bit for bit the
 * same, the accumulation order differs), the sums against the separate
 * pass's. Times: CUDA events, median of 20 after 3 warm-ups, each piece;
 * beside them both ways' floors at the card's copy bandwidth (a 1 GiB device
 * copy, measured first). The separate passes here are kernels of this file
 * (16-byte apply, a column-pair statistics pass), not cuDNN's batch norm,
 * whose forward does the same two passes (docs/kernels.md: at 67-81% of the
 * bandwidth in ResNet's step).
 *
 *   build/conv1x1_bn_probe [N] [--plain] [--bn64]
 *     N images (default 256); --bn64: 64 output channels a block everywhere
 *     (else 128 where K allows: more products a loaded A word, more
 *     registers)
 *
 * Shapes: ResNet-50's 1 x 1 convolutions at N images (stage: rows, C -> K).
 * Written 2026-12-06 without a GPU: unrun.
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

namespace {

const int BM = 128;     /* rows a block: 8 warps x 16 */
const int CKC = 64;     /* input channels a chunk */
const int WP = CKC + 8; /* W chunk's row pitch (bf16) in shared memory: lanes on 32 banks */
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

__device__ __forceinline__ void mma(float *d, const uint32_t *a, uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* this lane's A words of chunk c0 (its four k-steps): rows g, g + 8, columns
 * 16 k + 2 t (+ 8) */
__device__ __forceinline__ void load_a(uint32_t w[4][4], const __nv_bfloat16 *ar0,
                                       const __nv_bfloat16 *ar1, int c0, int t)
{
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const int c = c0 + 16 * k + 2 * t;
        w[k][0] = *reinterpret_cast<const uint32_t *>(ar0 + c);
        w[k][1] = *reinterpret_cast<const uint32_t *>(ar1 + c);
        w[k][2] = *reinterpret_cast<const uint32_t *>(ar0 + c + 8);
        w[k][3] = *reinterpret_cast<const uint32_t *>(ar1 + c + 8);
    }
}

/* y [M, K] = bf16(pro(a) W^T), part [M / 128][2][K]: the block's sums of y
 * and y^2 per channel (its 128 rows, the warps in order). M % 128 == 0,
 * C % 64 == 0 and C <= CMAX, K % BN == 0. blockIdx.x: the BN-channel slice
 * (the slices of one row block run side by side, so a's tile is read from
 * DRAM about once), blockIdx.y: the row block. The next chunk's A words are
 * loaded while the current chunk's products run. */
const int CMAX = 2048;
template <int BN>
__global__ void __launch_bounds__(THREADS, 2) /* two blocks an SM: 16 warps to cover DRAM */
    conv1x1_bn_kernel(__nv_bfloat16 *y, float *part, const __nv_bfloat16 *a, const float *s,
                      const float *b, const __nv_bfloat16 *W, int C, int K, bool plain)
{
    constexpr int NT = BN / 8; /* n8 tiles a warp */
    static_assert(BN * CKC / 8 % THREADS == 0, "W's chunk: whole 16-byte loads a thread");
    __shared__ __align__(16) __nv_bfloat16 ws[BN * WP];
    __shared__ float ss[CMAX], sb[CMAX];
    __shared__ float red[8][2][BN];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int n0 = blockIdx.x * BN;
    const size_t r0 = (size_t)blockIdx.y * BM + (size_t)warp * 16;
    const __nv_bfloat16 *ar0 = a + (r0 + g) * (size_t)C, *ar1 = a + (r0 + g + 8) * (size_t)C;
    uint32_t w[4][4];
    load_a(w, ar0, ar1, 0, t); /* first: the A words, the block's longest wait */
    for (int i = threadIdx.x; i < C; i += THREADS) {
        ss[i] = plain ? 1.0f : s[i];
        sb[i] = plain ? 0.0f : b[i];
    }
    float acc[NT][4];
#pragma unroll
    for (int j = 0; j < NT; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
    for (int c0 = 0; c0 < C; c0 += CKC) {
        __syncthreads(); /* the chunk before is read */
#pragma unroll
        for (int q = 0; q < BN * CKC / 8 / THREADS; q++) {
            const int i = threadIdx.x + q * THREADS;
            const int row = i / (CKC / 8), col = 8 * (i % (CKC / 8));
            *reinterpret_cast<uint4 *>(&ws[row * WP + col]) =
                *reinterpret_cast<const uint4 *>(&W[(size_t)(n0 + row) * C + c0 + col]);
        }
        __syncthreads(); /* ws (and, the first time, ss, sb) */
        uint32_t wn[4][4];
        if (c0 + CKC < C) load_a(wn, ar0, ar1, c0 + CKC, t);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const int c = 16 * k + 2 * t; /* within the chunk */
            uint32_t af[4];
            af[0] = pro(w[k][0], ss, sb, c0 + c, plain);
            af[1] = pro(w[k][1], ss, sb, c0 + c, plain);
            af[2] = pro(w[k][2], ss, sb, c0 + c + 8, plain);
            af[3] = pro(w[k][3], ss, sb, c0 + c + 8, plain);
#pragma unroll
            for (int j = 0; j < NT; j++) {
                const __nv_bfloat16 *wr = &ws[(8 * j + g) * WP + c];
                mma(acc[j], af, *reinterpret_cast<const uint32_t *>(wr),
                    *reinterpret_cast<const uint32_t *>(wr + 8));
            }
        }
        if (c0 + CKC < C)
#pragma unroll
            for (int k = 0; k < 4; k++)
#pragma unroll
                for (int e = 0; e < 4; e++) w[k][e] = wn[k][e];
    }
    /* y's values as stored, their sums: rows g and g + 8, columns 2t, 2t + 1 of each tile */
#pragma unroll
    for (int j = 0; j < NT; j++) {
        const int col = n0 + 8 * j + 2 * t;
        const uint32_t lo = pack2(acc[j][0], acc[j][1]), hi = pack2(acc[j][2], acc[j][3]);
        *reinterpret_cast<uint32_t *>(y + (r0 + g) * (size_t)K + col) = lo;
        *reinterpret_cast<uint32_t *>(y + (r0 + g + 8) * (size_t)K + col) = hi;
        const float2 f0 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&lo));
        const float2 f1 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&hi));
        float s0 = f0.x + f1.x, s1 = f0.y + f1.y;
        float q0 = f0.x * f0.x + f1.x * f1.x, q1 = f0.y * f0.y + f1.y * f1.y;
        /* over g (lanes t, t + 4, ..., t + 28), a fixed butterfly */
#pragma unroll
        for (int o = 4; o < 32; o <<= 1) {
            s0 += __shfl_xor_sync(0xffffffffu, s0, o);
            s1 += __shfl_xor_sync(0xffffffffu, s1, o);
            q0 += __shfl_xor_sync(0xffffffffu, q0, o);
            q1 += __shfl_xor_sync(0xffffffffu, q1, o);
        }
        if (g == 0) {
            red[warp][0][8 * j + 2 * t] = s0;
            red[warp][0][8 * j + 2 * t + 1] = s1;
            red[warp][1][8 * j + 2 * t] = q0;
            red[warp][1][8 * j + 2 * t + 1] = q1;
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < 2 * BN; i += THREADS) {
        const int h = i / BN, k = i % BN;
        float v = red[0][h][k];
        for (int wv = 1; wv < 8; wv++) v += red[wv][h][k];
        part[((size_t)blockIdx.y * 2 + h) * K + n0 + k] = v;
    }
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

/* out [2][K] = the partials' sums, each channel by one block in a fixed tree */
__global__ void finish_kernel(float *out, const float *part, int G, int K)
{
    __shared__ float r[2][256];
    const int k = blockIdx.x;
    float s = 0.0f, q = 0.0f;
    for (int i = threadIdx.x; i < G; i += 256) {
        s += part[((size_t)i * 2) * K + k];
        q += part[((size_t)i * 2 + 1) * K + k];
    }
    r[0][threadIdx.x] = s;
    r[1][threadIdx.x] = q;
    __syncthreads();
    for (int w = 128; w > 0; w >>= 1) {
        if (threadIdx.x < w) {
            r[0][threadIdx.x] += r[0][threadIdx.x + w];
            r[1][threadIdx.x] += r[1][threadIdx.x + w];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        out[k] = r[0][0];
        out[K + k] = r[1][0];
    }
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
    printf("%-26s %9s %9s %9s %9s %9s %8s %9s %9s %9s %9s %9s\n", "shape", "apply", "gemm",
           "stats", "separate", "fused", "speedup", "sep floor", "fus floor", "y err",
           "sum err", "sq err");
    cublasHandle_t h;
    CUBLAS_CHECK(cublasCreate(&h));
    for (const Shape &sh : shapes) {
        const size_t M = (size_t)N * sh.hw;
        const int C = sh.C, K = sh.K;
        if (M % BM || C % CKC || C > CMAX || K % 64 || K > CMAX || M / BM > 65535) {
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
        float *s, *b, *p0, *p1, *o0, *o1;
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
            finish_kernel<<<K, 256>>>(o0, p0, (int)G, K);
        };
        auto fused = [&]() {
            if (K % 128 == 0 && !bn64)
                conv1x1_bn_kernel<128><<<dim3(K / 128, (unsigned)G), THREADS>>>(
                    y1, p1, a, s, b, W, C, K, plain);
            else
                conv1x1_bn_kernel<64><<<dim3(K / 64, (unsigned)G), THREADS>>>(
                    y1, p1, a, s, b, W, C, K, plain);
            finish_kernel<<<K, 256>>>(o1, p1, (int)G, K);
        };
        float t[5];
        for (int piece = 0; piece < 5; piece++) {
            float ms[20];
            for (int r = 0; r < 23; r++) {
                CUDA_CHECK(cudaEventRecord(e0));
                if (piece == 0) apply();
                if (piece == 1) gemm();
                if (piece == 2) stats();
                if (piece == 3) { apply(); gemm(); stats(); }
                if (piece == 4) fused();
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
        printf("%-26s %9.1f %9.1f %9.1f %9.1f %9.1f %7.2fx %9.1f %9.1f %9.2e %9.2e %9.2e\n",
               sh.name, plain ? 0.0 : t[0], t[1], t[2], t[3], t[4], t[3] / t[4],
               1e6 * sep / bw, 1e6 * io / bw, sqrt(d / (n2 + 1e-30)),
               sqrt(dh[0] / (nh[0] + 1e-30)), sqrt(dh[1] / (nh[1] + 1e-30)));
        free(gy0);
        free(gy1);
        free(ha);
        free(hw);
        free(hs);
        free(hb);
        void *all[] = {a, a2, W, y0, y1, s, b, p0, p1, o0, o1};
        for (void *p : all) CUDA_CHECK(cudaFree(p));
    }
    CUBLAS_CHECK(cublasDestroy(h));
    printf("y err: relative norm of fused y against cuBLAS's (bit-identical inputs, another "
           "summation order: 1-ulp flips, ~1e-5 to 1e-4; ~1e-3 would mean the prologue rounds "
           "differently); sum err, sq err: the same for the sums and the sums of squares. "
           "Floors leave out the partials (~6%% of y's bytes) and L2 hits (stage 4)\n");
    return 0;
}
