/* test_matmul.c — matmul_cpu against a naive triple loop in double.
 *
 *   C[b] = alpha * op(A[b]) @ op(B[b]) + beta * C[b]
 *
 * Shape letters: M rows of C, N columns, K the reduced length, batch b.
 * Covers the four transpose combinations, odd shapes that leave partial
 * register and cache blocks (1x1x1 up to 130x70x257, K > one K block),
 * batched products with strides including broadcast (stride 0), and
 * alpha/beta: beta 0 over a NaN-filled C (C must not be read), beta 0.5 over
 * a random C. Inputs are uniform in [-1, 1).
 *
 * Tolerance: the f32 result accumulates K products of magnitude <= 1, so its
 * rounding error grows with K; atol = 1e-5 + 2e-7*K (|alpha| <= 1 here) and
 * rtol 1e-4 leave a wide margin over the observed ~1e-6 and still catch any
 * wrong index, which is off by O(1).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops/matmul.h"
#include "check.h"

/* The definition, read straight off the header, in double: R = alpha * op(A)
 * op(B) + beta * C, and beta 0 means C is not read. */
static void matmul_naive(double *R, const float *C, const float *A, const float *B, int M,
                         int N, int K, int transA, int transB, float alpha, float beta, int batch,
                         long long sA, long long sB, long long sC)
{
    for (int b = 0; b < batch; b++) {
        const float *Ab = A + b * sA, *Bb = B + b * sB;
        const float *Cb = C + b * sC;
        double *Rb = R + b * sC;
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double s = 0.0;
                for (int k = 0; k < K; k++) {
                    double a = transA ? Ab[(size_t)k * M + i] : Ab[(size_t)i * K + k];
                    double w = transB ? Bb[(size_t)j * K + k] : Bb[(size_t)k * N + j];
                    s += a * w;
                }
                double c = beta == 0.0f ? 0.0 : (double)beta * Cb[(size_t)i * N + j];
                Rb[(size_t)i * N + j] = (double)alpha * s + c;
            }
    }
}

/* One case: fresh random A, B (and C when beta != 0), NaN C when beta == 0. */
static void run_case(int M, int N, int K, int transA, int transB, float alpha, float beta,
                     int batch, long long sA, long long sB, long long sC)
{
    /* Buffer sizes: the last batch's matrix plus everything before it. */
    size_t nA = (size_t)(batch - 1) * sA + (size_t)M * K;
    size_t nB = (size_t)(batch - 1) * sB + (size_t)K * N;
    size_t nC = (size_t)(batch - 1) * sC + (size_t)M * N;
    float *A = malloc(sizeof(float) * nA), *B = malloc(sizeof(float) * nB);
    float *C = malloc(sizeof(float) * nC);
    double *R = malloc(sizeof(double) * nC), *got = malloc(sizeof(double) * nC);
    check_fill(A, nA, -1.0f, 1.0f);
    check_fill(B, nB, -1.0f, 1.0f);
    if (beta == 0.0f)
        for (size_t i = 0; i < nC; i++) C[i] = NAN;
    else
        check_fill(C, nC, -1.0f, 1.0f);

    matmul_naive(R, C, A, B, M, N, K, transA, transB, alpha, beta, batch, sA, sB, sC);
    matmul_cpu(C, A, B, M, N, K, transA, transB, alpha, beta, batch, sA, sB, sC);
    for (size_t i = 0; i < nC; i++) got[i] = C[i];

    char name[160];
    snprintf(name, sizeof name, "matmul %dx%dx%d t%d%d alpha %g beta %g batch %d s(%lld,%lld,%lld)",
             M, N, K, transA, transB, alpha, beta, batch, sA, sB, sC);
    /* Compare each batch's output matrix (gaps between them, sC > M*N, are
     * checked by check_gaps_untouched). */
    int ok = 1;
    for (int b = 0; b < batch && ok; b++)
        ok = check_close_f64(name, got + b * sC, R + b * sC, (size_t)M * N, 1e-5 + 2e-7 * K,
                             1e-4);
    free(A); free(B); free(C); free(R); free(got);
}

/* The gap between batch outputs must be left alone: write a sentinel there. */
static void check_gaps_untouched(void)
{
    int M = 5, N = 3, K = 4, batch = 3;
    long long sC = M * N + 7;
    size_t nC = (size_t)(batch - 1) * sC + M * N;
    float A[5 * 4], B[4 * 3], *C = malloc(sizeof(float) * nC);
    check_fill(A, 20, -1.0f, 1.0f);
    check_fill(B, 12, -1.0f, 1.0f);
    for (size_t i = 0; i < nC; i++) C[i] = 12345.0f;
    matmul_cpu(C, A, B, M, N, K, 0, 0, 1.0f, 0.0f, batch, 0, 0, sC);
    int ok = 1;
    for (int b = 0; b + 1 < batch; b++)
        for (long long i = M * N; i < sC; i++) ok &= C[b * sC + i] == 12345.0f;
    check_true("matmul gaps between batch outputs untouched", ok, "a gap element was written");
    free(C);
}

int main(void)
{
    check_seed(20240611);
    static const int shapes[][3] = {   /* M, N, K */
        {1, 1, 1}, {3, 5, 7}, {17, 33, 65}, {130, 70, 257}, {6, 8, 256}, {97, 257, 513},
        {1, 300, 40}, {300, 1, 40},
    };
    int nshapes = (int)(sizeof shapes / sizeof shapes[0]);

    /* Every transpose combination on every shape, plain alpha 1, beta 0. */
    for (int s = 0; s < nshapes; s++)
        for (int t = 0; t < 4; t++)
            run_case(shapes[s][0], shapes[s][1], shapes[s][2], t >> 1, t & 1, 1.0f, 0.0f, 1,
                     0, 0, 0);

    /* alpha/beta: beta 0 over NaN, beta 0.5 over random C, alpha scaling. */
    for (int t = 0; t < 4; t++) {
        run_case(17, 33, 65, t >> 1, t & 1, 0.75f, 0.0f, 1, 0, 0, 0);
        run_case(17, 33, 65, t >> 1, t & 1, 0.75f, 0.5f, 1, 0, 0, 0);
        run_case(130, 70, 257, t >> 1, t & 1, -1.0f, 0.5f, 1, 0, 0, 0);
        run_case(3, 5, 7, t >> 1, t & 1, 1.0f, 1.0f, 1, 0, 0, 0);
    }

    /* Batched: packed strides, padded strides, broadcast A or B (stride 0). */
    for (int t = 0; t < 4; t++) {
        int M = 13, N = 19, K = 23;
        long long a = (long long)M * K, b = (long long)K * N, c = (long long)M * N;
        run_case(M, N, K, t >> 1, t & 1, 1.0f, 0.0f, 4, a, b, c);
        run_case(M, N, K, t >> 1, t & 1, 0.5f, 0.5f, 3, a + 5, b + 3, c + 11);
        run_case(M, N, K, t >> 1, t & 1, 1.0f, 0.0f, 5, 0, b, c);   /* shared A */
        run_case(M, N, K, t >> 1, t & 1, 1.0f, 0.5f, 5, a, 0, c);   /* shared B */
    }
    run_case(128, 64, 128, 0, 1, 1.0f, 0.0f, 12, 128 * 128, 64 * 128, 128 * 64);
    run_case(130, 70, 257, 1, 0, 1.0f, 0.0f, 3, 0, 257 * 70, 130 * 70);
    check_gaps_untouched();

    /* K = 0: the product is empty, C = beta * C. */
    {
        float C[6] = {1, 2, 3, 4, 5, 6}, A[1] = {0}, B[1] = {0};
        float want[6] = {0.5f, 1, 1.5f, 2, 2.5f, 3};
        matmul_cpu(C, A, B, 2, 3, 0, 0, 0, 1.0f, 0.5f, 1, 0, 0, 0);
        check_close("matmul K=0 beta 0.5", C, want, 6, 0, 0);
    }
    return check_summary();
}
