/* matmul.c — CPU reference for the batched matrix product of matmul.h.
 *
 *   C[b] = alpha * op(A[b]) @ op(B[b]) + beta * C[b],   b = 0 .. batch-1
 *   C[b][i][j] = alpha * sum_k op(A)[i][k] * op(B)[k][j] + beta * C[b][i][j]
 *
 * Shape letters: M rows of C, N columns of C, K the shared (reduced) length.
 * Row-major storage: op(A)[i][k] = transA ? A[k*M + i] : A[i*K + k],
 *                    op(B)[k][j] = transB ? B[j*K + k] : B[k*N + j].
 *
 * How it is made fast (the GotoBLAS / BLIS loop nest, in plain C):
 *
 *   for each C tile of MC x NC            <- OpenMP: tiles of all batches in parallel
 *     for k0 in steps of KC
 *       pack op(A)[tile rows, k0:k0+KC]  into Ap: MR-row micro-panels   (L2)
 *       pack op(B)[k0:k0+KC, tile cols]  into Bp: NR-column micro-panels
 *       for each NR micro-panel of Bp    <- stays in L1 while ...
 *         for each MR micro-panel of Ap  <- ... these stream from L2
 *           micro-kernel: MR x NR block of C += Ap panel @ Bp panel
 *
 * Packing copies each operand into the exact order the micro-kernel reads
 * (one contiguous stream per operand, zero-padded to whole panels), which
 * also makes the four transpose cases one code path: only the packing
 * routines know about transA/transB. The micro-kernel keeps its MR x NR
 * accumulators in registers; its inner j loop has a fixed trip count, which
 * is what lets gcc -O2 turn it into SIMD multiply-adds (checked in the
 * generated assembly: 12 SSE accumulators, no spills, for MR=6 NR=8).
 *
 * alpha/beta: the first K block writes C = alpha*acc + beta*C (or just
 * alpha*acc when beta == 0, never reading C, so NaN in C cannot leak); later
 * K blocks add alpha*acc. Accumulation is f32, in K blocks of KC.
 *
 * Parallelism: one task per (batch, row tile, column tile), so a single big
 * product (batch 1) still feeds every core, and a batch of small ones does
 * too. Each task packs its own panels: re-packing costs O(MC*KC + KC*NC)
 * against O(MC*KC*NC) multiply-adds, a few percent, and keeps tasks
 * independent.
 */
#include "matmul.h"

#include <stdlib.h>
#include <string.h>

#include "engine/error.h"

/* Register block: MR x NR accumulators = 12 SSE registers of 4 floats, plus
 * two for the B row and one for the broadcast A value: 15 of the 16. */
#define MR 6
#define NR 8
/* Cache blocks: a KC x NR panel of B is 8 KiB (L1); the MC x KC block of A
 * is 96 KiB and the KC x NC block of B 256 KiB (L2). MC is a multiple of MR,
 * NC of NR. */
#define KC 256
#define MC 96
#define NC 256

/* Ap[p][k][r] = op(A)[i0 + p*MR + r][k0 + k], zero past the last row. */
static void pack_a(float *restrict Ap, const float *restrict A, int M, int K, int transA,
                   int i0, int mc, int k0, int kc)
{
    for (int p = 0; p < mc; p += MR) {
        float *dst = Ap + (size_t)p * kc;
        int rows = mc - p < MR ? mc - p : MR;
        for (int r = 0; r < MR; r++) {
            int i = i0 + p + r;
            if (r >= rows) {
                for (int k = 0; k < kc; k++) dst[k * MR + r] = 0.0f;
            } else if (transA) {   /* A is K x M: column i, strided by M */
                for (int k = 0; k < kc; k++) dst[k * MR + r] = A[(size_t)(k0 + k) * M + i];
            } else {               /* A is M x K: row i, contiguous */
                const float *src = A + (size_t)i * K + k0;
                for (int k = 0; k < kc; k++) dst[k * MR + r] = src[k];
            }
        }
    }
}

/* Bp[q][k][c] = op(B)[k0 + k][j0 + q*NR + c], zero past the last column. */
static void pack_b(float *restrict Bp, const float *restrict B, int N, int K, int transB,
                   int j0, int nc, int k0, int kc)
{
    for (int q = 0; q < nc; q += NR) {
        float *dst = Bp + (size_t)q * kc;
        int cols = nc - q < NR ? nc - q : NR;
        for (int k = 0; k < kc; k++) {
            float *d = dst + k * NR;
            if (transB) {          /* B is N x K: element (k, j) at B[j*K + k] */
                for (int c = 0; c < cols; c++) d[c] = B[(size_t)(j0 + q + c) * K + k0 + k];
            } else {               /* B is K x N: row k, contiguous */
                const float *src = B + (size_t)(k0 + k) * N + j0 + q;
                for (int c = 0; c < cols; c++) d[c] = src[c];
            }
            for (int c = cols; c < NR; c++) d[c] = 0.0f;
        }
    }
}

/* acc[MR][NR] = sum_k Ap[k][:] outer Bp[k][:] over kc steps. The unroll
 * pragma keeps the MR rows of accumulators in registers; the fixed-length j
 * loop vectorizes. */
static void micro_kernel(float acc[MR][NR], const float *restrict a, const float *restrict b,
                         int kc)
{
    float c[MR][NR] = {{0}};
    for (int k = 0; k < kc; k++) {
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++)
            for (int j = 0; j < NR; j++) c[i][j] += a[i] * b[j];
        a += MR;
        b += NR;
    }
    memcpy(acc, c, sizeof c);
}

/* Write an mr x nr block (edges may be partial) of accumulators into C. */
static void store_block(float *restrict C, int N, const float acc[MR][NR], int mr, int nr,
                        float alpha, float beta, int first_k_block)
{
    for (int i = 0; i < mr; i++) {
        float *c = C + (size_t)i * N;
        if (!first_k_block)
            for (int j = 0; j < nr; j++) c[j] += alpha * acc[i][j];
        else if (beta == 0.0f)   /* C is not read: it may hold NaN */
            for (int j = 0; j < nr; j++) c[j] = alpha * acc[i][j];
        else
            for (int j = 0; j < nr; j++) c[j] = alpha * acc[i][j] + beta * c[j];
    }
}

/* K == 0: the product is empty, C = beta * C. */
static void scale_c(float *C, int M, int N, float beta, int batch, long long sC)
{
    for (int b = 0; b < batch; b++) {
        float *c = C + b * sC;
        for (size_t i = 0; i < (size_t)M * N; i++) c[i] = beta == 0.0f ? 0.0f : beta * c[i];
    }
}

void matmul_cpu(float *C, const float *A, const float *B, int M, int N, int K,
                int transA, int transB, float alpha, float beta, int batch,
                long long sA, long long sB, long long sC)
{
    CT_ASSERT(M >= 0 && N >= 0 && K >= 0 && batch >= 0,
              "matmul_cpu: negative size M=%d N=%d K=%d batch=%d", M, N, K, batch);
    CT_ASSERT(sA >= 0 && sB >= 0 && sC >= 0,
              "matmul_cpu: negative batch stride sA=%lld sB=%lld sC=%lld", sA, sB, sC);
    CT_ASSERT(batch <= 1 || sC >= (long long)M * N,
              "matmul_cpu: batch %d of %dx%d outputs with stride sC=%lld would overlap",
              batch, M, N, sC);
    if (M == 0 || N == 0 || batch == 0) return;
    if (K == 0) {
        scale_c(C, M, N, beta, batch, sC);
        return;
    }

    int tiles_m = (M + MC - 1) / MC, tiles_n = (N + NC - 1) / NC;
    long long tasks = (long long)batch * tiles_m * tiles_n;
    /* Below ~1 MFLOP waking the thread team costs more than it saves. */
    double flops = 2.0 * M * N * (double)K * batch;

#pragma omp parallel if (flops > 1e6 && tasks > 1)
    {
        /* Per-thread packing buffers, rounded up to whole panels. */
        float *Ap = aligned_alloc(64, sizeof(float) * MC * KC);
        float *Bp = aligned_alloc(64, sizeof(float) * NC * KC);
        CT_ASSERT(Ap && Bp, "matmul_cpu: out of memory for packing buffers");

#pragma omp for schedule(dynamic)
        for (long long t = 0; t < tasks; t++) {
            int b = (int)(t / ((long long)tiles_m * tiles_n));
            int tile = (int)(t % ((long long)tiles_m * tiles_n));
            int i0 = (tile / tiles_n) * MC, j0 = (tile % tiles_n) * NC;
            int mc = M - i0 < MC ? M - i0 : MC;
            int nc = N - j0 < NC ? N - j0 : NC;
            const float *Ab = A + b * sA, *Bb = B + b * sB;
            float *Cb = C + b * sC;

            for (int k0 = 0; k0 < K; k0 += KC) {
                int kc = K - k0 < KC ? K - k0 : KC;
                pack_a(Ap, Ab, M, K, transA, i0, mc, k0, kc);
                pack_b(Bp, Bb, N, K, transB, j0, nc, k0, kc);
                for (int jr = 0; jr < nc; jr += NR) {
                    int nr = nc - jr < NR ? nc - jr : NR;
                    for (int ir = 0; ir < mc; ir += MR) {
                        int mr = mc - ir < MR ? mc - ir : MR;
                        float acc[MR][NR];
                        micro_kernel(acc, Ap + (size_t)ir * kc, Bp + (size_t)jr * kc, kc);
                        store_block(Cb + (size_t)(i0 + ir) * N + j0 + jr, N, acc, mr, nr,
                                    alpha, beta, k0 == 0);
                    }
                }
            }
        }
        free(Ap);
        free(Bp);
    }
}
