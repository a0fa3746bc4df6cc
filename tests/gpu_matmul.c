/* gpu_matmul.c — matmul_cuda (cuBLASLt) against matmul_cpu.
 *
 *   C[b] = alpha * op(A[b]) @ op(B[b]) + beta * C[b]
 *
 * Shape letters: M rows of C, N columns, K the reduced length, batch b.
 * For each type setting — f32 strict, f32 with TF32, f16 and bf16 inputs,
 * each with C in the input type and in f32 — random inputs in [-1, 1) are
 * rounded to the input type (quantize), so the CPU reference multiplies
 * exactly the values the GPU reads. C is poisoned with NaN when beta is 0
 * (it must not be read) and preloaded with random values otherwise.
 * Covered: the four transposes, odd and large shapes, strided batches with
 * broadcast (stride 0) and padded strides, operands at unaligned addresses
 * (a different cached plan), a repeated shape (the plan cache hit), and
 * bit-identical results when the same call runs twice.
 *
 * Tolerances, for |a| <= amax, |b| <= bmax and K terms per dot product:
 *   - f32 accumulation on both sides differs only in summation order:
 *     atol 1e-5 * sqrt(K) * |alpha| * amax * bmax (random-walk growth, ~10x
 *     above the expected error; a TF32 kernel would miss it by 20x);
 *   - TF32 rounds both inputs to 10 mantissa bits (relative error up to
 *     2^-10 each, independent per product): 3e-3 * sqrt(K) * ... ;
 *   - plus the output type's own rounding: tol_atol(tc) + tol_rtol(tc)*|ref|.
 * Each setting prints its worst error as a fraction of the tolerance.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ops/matmul.h"
#include "check.h"
#include "gpu_util.h"

typedef struct {
    const char *name;
    DType tab, tc;
    int tf32;
} Setting;

static const Setting settings[] = {
    {"f32", DT_F32, DT_F32, 0},       {"f32+tf32", DT_F32, DT_F32, 1},
    {"f16", DT_F16, DT_F16, 0},       {"f16->f32", DT_F16, DT_F32, 0},
    {"bf16", DT_BF16, DT_BF16, 0},    {"bf16->f32", DT_BF16, DT_F32, 0},
};

/* The device context the op is given: handle, workspace, plan cache, stream. */
typedef struct {
    cublasLtHandle_t lt;
    MatmulPlanCache *cache;
    void *workspace;
    size_t workspace_bytes;
    cudaStream_t stream;
} Ctx;

static double worst_ratio;   /* worst |got - ref| / tol of the current setting */

static double max_abs(const float *p, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)p[i]));
    return m;
}

typedef struct {
    int M, N, K, transA, transB;
    float alpha, beta;
    int batch;
    long long sA, sB, sC;
    int offset;   /* elements to shift every device pointer by (misalignment) */
} Case;

static void run_case(const Ctx *ctx, const Setting *st, Case c)
{
    size_t nA = (size_t)(c.batch - 1) * c.sA + (size_t)c.M * c.K;
    size_t nB = (size_t)(c.batch - 1) * c.sB + (size_t)c.K * c.N;
    size_t nC = (size_t)(c.batch - 1) * c.sC + (size_t)c.M * c.N;
    size_t off = (size_t)c.offset;
    float *A = malloc(sizeof(float) * (nA + off)), *B = malloc(sizeof(float) * (nB + off));
    float *C0 = malloc(sizeof(float) * (nC + off)), *got = malloc(sizeof(float) * (nC + off));
    float *ref = malloc(sizeof(float) * nC);
    check_fill(A, nA + off, -1.0f, 1.0f);
    check_fill(B, nB + off, -1.0f, 1.0f);
    check_fill(C0, nC + off, -1.0f, 1.0f);
    quantize(A, nA + off, st->tab);
    quantize(B, nB + off, st->tab);
    quantize(C0, nC + off, st->tc);

    char *dA = gpu_upload(A, nA + off, st->tab), *dB = gpu_upload(B, nB + off, st->tab);
    char *dC = c.beta == 0.0f ? gpu_alloc_poison(nC + off, st->tc)
                              : gpu_upload(C0, nC + off, st->tc);
    size_t eab = dtype_size(st->tab), ec = dtype_size(st->tc);

    matmul_cuda(ctx->lt, ctx->cache, ctx->workspace, ctx->workspace_bytes, ctx->stream,
                dC + off * ec, st->tc, dA + off * eab, dB + off * eab, st->tab, c.M, c.N, c.K,
                c.transA, c.transB, c.alpha, c.beta, c.batch, c.sA, c.sB, c.sC, st->tf32);
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    gpu_download(got, dC, nC + off, st->tc);

    memcpy(ref, C0 + off, sizeof(float) * nC);
    matmul_cpu(ref, A + off, B + off, c.M, c.N, c.K, c.transA, c.transB, c.alpha, c.beta,
               c.batch, c.sA, c.sB, c.sC);

    double amax = max_abs(A + off, nA), bmax = max_abs(B + off, nB);
    double acc = (st->tf32 ? 3e-3 : 1e-5) * sqrt((double)c.K) * fabs(c.alpha) * amax * bmax;
    double atol = acc + tol_atol(st->tc), rtol = tol_rtol(st->tc);

    char name[200];
    snprintf(name, sizeof name,
             "matmul_cuda %s %dx%dx%d t%d%d alpha %g beta %g batch %d s(%lld,%lld,%lld)%s",
             st->name, c.M, c.N, c.K, c.transA, c.transB, c.alpha, c.beta, c.batch, c.sA, c.sB,
             c.sC, c.offset ? " offset" : "");
    int ok = 1;
    for (int b = 0; b < c.batch && ok; b++) {
        const float *g = got + off + b * c.sC, *r = ref + b * c.sC;
        ok = check_close(name, g, r, (size_t)c.M * c.N, atol, rtol);
        for (size_t i = 0; i < (size_t)c.M * c.N; i++)
            worst_ratio = fmax(worst_ratio, fabs((double)g[i] - r[i]) / (atol + rtol * fabs(r[i])));
    }
    CUDA_CHECK(cudaFree(dA));
    CUDA_CHECK(cudaFree(dB));
    CUDA_CHECK(cudaFree(dC));
    free(A); free(B); free(C0); free(got); free(ref);
}

/* The same call twice on the same inputs (the second from the plan cache)
 * must give the same bits: one algorithm, no atomics in its reduction. */
static void check_repeatable(const Ctx *ctx, const Setting *st, int M, int N, int K)
{
    size_t nA = (size_t)M * K, nB = (size_t)K * N, nC = (size_t)M * N;
    float *A = malloc(sizeof(float) * nA), *B = malloc(sizeof(float) * nB);
    check_fill(A, nA, -1.0f, 1.0f);
    check_fill(B, nB, -1.0f, 1.0f);
    void *dA = gpu_upload(A, nA, st->tab), *dB = gpu_upload(B, nB, st->tab);
    void *dC[2];
    size_t bytes = nC * dtype_size(st->tc);
    unsigned char *h[2];
    for (int r = 0; r < 2; r++) {
        dC[r] = gpu_alloc_poison(nC, st->tc);
        matmul_cuda(ctx->lt, ctx->cache, ctx->workspace, ctx->workspace_bytes, ctx->stream,
                    dC[r], st->tc, dA, dB, st->tab, M, N, K, 0, 1, 1.0f, 0.0f, 1, 0, 0, 0,
                    st->tf32);
        h[r] = malloc(bytes);
        CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
        CUDA_CHECK(cudaMemcpy(h[r], dC[r], bytes, cudaMemcpyDeviceToHost));
    }
    char name[120];
    snprintf(name, sizeof name, "matmul_cuda %s %dx%dx%d repeat is bit-identical", st->name, M, N,
             K);
    check_true(name, memcmp(h[0], h[1], bytes) == 0, "two runs of the same call differ");
    for (int r = 0; r < 2; r++) {
        CUDA_CHECK(cudaFree(dC[r]));
        free(h[r]);
    }
    CUDA_CHECK(cudaFree(dA));
    CUDA_CHECK(cudaFree(dB));
    free(A); free(B);
}

int main(void)
{
    gpu_require();
    check_seed(20240612);

    Ctx ctx = {0};
    CUBLAS_CHECK(cublasLtCreate(&ctx.lt));
    ctx.workspace_bytes = (size_t)32 << 20;
    CUDA_CHECK(cudaMalloc(&ctx.workspace, ctx.workspace_bytes));
    ctx.cache = matmul_plan_cache_new();
    ctx.stream = 0;

    static const int shapes[][3] = {   /* M, N, K */
        {1, 1, 1}, {3, 5, 7}, {17, 33, 65}, {64, 768, 768}, {512, 1000, 2048},
    };
    int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
    int nsettings = (int)(sizeof settings / sizeof settings[0]);

    for (int si = 0; si < nsettings; si++) {
        const Setting *st = &settings[si];
        worst_ratio = 0.0;

        /* Every transpose on every shape; beta 0 over a NaN-poisoned C. */
        for (int s = 0; s < nshapes; s++)
            for (int t = 0; t < 4; t++)
                run_case(&ctx, st, (Case){shapes[s][0], shapes[s][1], shapes[s][2], t >> 1, t & 1,
                                          1.0f, 0.0f, 1, 0, 0, 0, 0});

        /* The same shapes again: served from the plan cache. */
        run_case(&ctx, st, (Case){64, 768, 768, 0, 1, 1.0f, 0.0f, 1, 0, 0, 0, 0});
        run_case(&ctx, st, (Case){512, 1000, 2048, 1, 0, 1.0f, 0.0f, 1, 0, 0, 0, 0});

        /* alpha and beta over a preloaded C. */
        run_case(&ctx, st, (Case){64, 768, 768, 0, 1, 0.5f, 0.75f, 1, 0, 0, 0, 0});
        run_case(&ctx, st, (Case){3, 5, 7, 1, 0, -1.0f, 1.0f, 1, 0, 0, 0, 0});
        run_case(&ctx, st, (Case){17, 33, 65, 1, 1, 2.0f, -0.5f, 1, 0, 0, 0, 0});

        /* Strided batches: packed, broadcast A or B, padded strides. */
        for (int t = 0; t < 4; t++)
            run_case(&ctx, st, (Case){128, 64, 128, t >> 1, t & 1, 1.0f, 0.0f, 12,
                                      128 * 128, 128 * 64, 128 * 64, 0});
        run_case(&ctx, st, (Case){128, 64, 128, 0, 1, 1.0f, 0.0f, 12, 0, 128 * 64, 128 * 64, 0});
        run_case(&ctx, st, (Case){128, 64, 128, 1, 0, 1.0f, 0.5f, 12, 128 * 128, 0, 128 * 64, 0});
        run_case(&ctx, st, (Case){13, 19, 23, 0, 0, 1.0f, 0.5f, 5, 13 * 23 + 5, 23 * 19 + 3,
                                  13 * 19 + 11, 0});

        /* Operands one element off their allocation's alignment. */
        run_case(&ctx, st, (Case){17, 33, 65, 0, 1, 1.0f, 0.0f, 1, 0, 0, 0, 1});
        run_case(&ctx, st, (Case){64, 768, 768, 1, 0, 1.0f, 0.5f, 3, 0, 768 * 768, 64 * 768, 1});

        check_repeatable(&ctx, st, 512, 1000, 2048);
        check_repeatable(&ctx, st, 64, 768, 768);
        printf("  %-10s worst error %.3f of tolerance\n", st->name, worst_ratio);
    }

    matmul_plan_cache_free(ctx.cache);
    CUDA_CHECK(cudaFree(ctx.workspace));
    CUBLAS_CHECK(cublasLtDestroy(ctx.lt));
    return check_summary();
}
