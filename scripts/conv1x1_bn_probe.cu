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
 * the block's input) a2 = a. The fused kernel is the unit's own
 * (ops/conv1x1_bn.cu, conv1x1_bn_launch; its design there). Its first
 * form here (a's fragments loaded from global memory straight into
 * registers, one tile a block) ran at 2-3x its floor on an H100, and the
 * second's first cut at one block an SM
 * (results/h100-2026-12-06/conv1x1-probe/).
 *
 * Column nostats: the kernel without the statistics (no partials: as the
 * unit runs a block's last 1 x 1, whose batch norm is cuDNN's), against
 * gemm + apply.
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
 *   build/conv1x1_bn_probe [N] [--plain]
 *     N images (default 256)
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
#include "ops/conv1x1_bn.h"

namespace {

const int BM = 128; /* rows a statistics block (the kernel's tile) */

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
__device__ __forceinline__ uint32_t pro(uint32_t w, const float *s, const float *b, int c)
{
    __nv_bfloat162 v = *reinterpret_cast<__nv_bfloat162 *>(&w);
    const float2 f = __bfloat1622float2(v);
    return pack2(bn_relu(f.x, s[c], b[c]), bn_relu(f.y, s[c + 1], b[c + 1]));
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
        v.x = pro(v.x, s, b, c);
        v.y = pro(v.y, s, b, c + 2);
        v.z = pro(v.z, s, b, c + 4);
        v.w = pro(v.w, s, b, c + 6);
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
    bool plain = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--plain")) plain = true;
        else N = atoi(argv[i]);
    }
    if (N < 1) {
        fprintf(stderr, "usage: conv1x1_bn_probe [N] [--plain]\n");
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
    printf("conv1x1_bn_probe: %s, N %d, %s; times in us (median of 20)\n", prop.name, N,
           plain ? "no prologue (--plain)" : "BN apply + ReLU prologue");
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
           "gemm", "stats", "separate", "fused", "nostats", "speedup", "sep floor", "fus floor",
           "sep ideal", "vs ideal", "y err", "sum err", "sq err");
    cublasHandle_t h;
    CUBLAS_CHECK(cublasCreate(&h));
    for (const Shape &sh : shapes) {
        const size_t M = (size_t)N * sh.hw;
        const int C = sh.C, K = sh.K;
        if (M % BM || C % 64 || K % 64 || K > 2048) {
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
        CUDA_CHECK(cudaMalloc(&p0, conv1x1_bn_part_floats(M, K) * 4));
        CUDA_CHECK(cudaMalloc(&p1, conv1x1_bn_part_floats(M, K) * 4));
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
            conv1x1_bn_finish(o0, p0, M, K, nullptr); /* the unit's finish, both ways */
        };
        /* the unit's kernel (ops/conv1x1_bn.cu): alone, then with its finish */
        const float *ps = plain ? nullptr : s;
        auto kernel = [&]() { /* without the statistics (the unit's last 1 x 1) */
            conv1x1_bn_launch(y1, nullptr, nullptr, a, ps, b, W, DT_BF16, M, C, K, nullptr);
        };
        auto fused = [&]() {
            conv1x1_bn_launch(y1, o1, p1, a, ps, b, W, DT_BF16, M, C, K, nullptr);
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
