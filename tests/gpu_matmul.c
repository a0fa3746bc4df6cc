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
 * matmul_cuda_bias (bias in the epilogue, C = op(A) op(B) + bias[j] on
 * every row): the same shapes and transposes, a matrix with one row or
 * column (no epilogue: C must hold the plain product and the call say so),
 * a bias off its alignment (epilogue or not, C must match what the call
 * says), two biases in turn through one cached plan (the pointer is set per
 * call), and the epilogue actually taken on aligned shapes when C has
 * the inputs' type (what op_linear asks for).
 *
 * Tolerances, for |a| <= amax, |b| <= bmax and K terms per dot product:
 *   - f32 accumulation on both sides differs only in summation order:
 *     atol 1e-5 * sqrt(K) * |alpha| * amax * bmax (random-walk growth, ~10x
 *     above the expected error; a TF32 kernel would miss it by 20x);
 *   - TF32 rounds both inputs to 10 mantissa bits (relative error up to
 *     2^-10 each, independent per product): 3e-3 * sqrt(K) * ... ;
 *   - plus the output type's own rounding: tol_atol(tc) + tol_rtol(tc)*|ref|.
 *     With the epilogue the bias is added in f32 before that one rounding,
 *     so the same bound holds against the exact product plus bias.
 * Each setting prints its worst error as a fraction of the tolerance.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/matmul.h"
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

/* Fold n elements' errors into worst_ratio. */
static void note_worst(const float *got, const float *ref, size_t n, double atol, double rtol)
{
    for (size_t i = 0; i < n; i++) {
        double tol = atol + rtol * fabs(ref[i]);
        worst_ratio = fmax(worst_ratio, fabs((double)got[i] - ref[i]) / tol);
    }
}

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
                c.transA, c.transB, c.alpha, c.beta, c.batch, c.sA, c.sB, c.sC, st->tf32, NULL);
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
        note_worst(g, r, (size_t)c.M * c.N, atol, rtol);
    }
    CUDA_CHECK(cudaFree(dA));
    CUDA_CHECK(cudaFree(dB));
    CUDA_CHECK(cudaFree(dC));
    free(A); free(B); free(C0); free(got); free(ref);
}

/* got (from matmul_cuda_bias) against matmul_cpu, plus bias[j] on every
 * row when the call said it added it. */
static void check_bias_result(const char *name, const Setting *st, const float *got,
                              const float *A, const float *B, const float *bias, int applied,
                              int M, int N, int K, int transA, int transB)
{
    size_t nC = (size_t)M * N;
    float *ref = calloc(nC, sizeof(float));
    matmul_cpu(ref, A, B, M, N, K, transA, transB, 1.0f, 0.0f, 1, 0, 0, 0);
    for (size_t i = 0; applied && i < nC; i++) ref[i] += bias[i % N];
    double acc = (st->tf32 ? 3e-3 : 1e-5) * sqrt((double)K) * max_abs(A, (size_t)M * K) *
                 max_abs(B, (size_t)K * N);
    double atol = acc + tol_atol(st->tc), rtol = tol_rtol(st->tc);
    check_close(name, got, ref, nC, atol, rtol);
    note_worst(got, ref, nC, atol, rtol);
    free(ref);
}

/* Random A, B and nbias biases of N (C's type), uploaded; the device bias
 * buffers start bias_offset elements in (misalignment). */
typedef struct {
    float *A, *B, *bias[2];
    void *dA, *dB, *dbias[2];
} BiasData;

static BiasData bias_data(const Setting *st, int M, int N, int K, int nbias, int bias_offset)
{
    BiasData d = {0};
    size_t nA = (size_t)M * K, nB = (size_t)K * N, off = (size_t)bias_offset;
    d.A = malloc(sizeof(float) * nA);
    d.B = malloc(sizeof(float) * nB);
    check_fill(d.A, nA, -1.0f, 1.0f);
    check_fill(d.B, nB, -1.0f, 1.0f);
    quantize(d.A, nA, st->tab);
    quantize(d.B, nB, st->tab);
    d.dA = gpu_upload(d.A, nA, st->tab);
    d.dB = gpu_upload(d.B, nB, st->tab);
    for (int i = 0; i < nbias; i++) {
        float *h = malloc(sizeof(float) * (N + off));
        check_fill(h, N + off, -1.0f - 3.0f * i, 1.0f + 3.0f * i);
        quantize(h, N + off, st->tc);
        d.bias[i] = h + off;
        d.dbias[i] = (char *)gpu_upload(h, N + off, st->tc) + off * dtype_size(st->tc);
    }
    return d;
}

static void bias_data_free(BiasData *d, const Setting *st, int bias_offset)
{
    size_t off = (size_t)bias_offset;
    CUDA_CHECK(cudaFree(d->dA));
    CUDA_CHECK(cudaFree(d->dB));
    for (int i = 0; i < 2 && d->bias[i]; i++) {
        CUDA_CHECK(cudaFree((char *)d->dbias[i] - off * dtype_size(st->tc)));
        free(d->bias[i] - off);
    }
    free(d->A); free(d->B);
}

/* One matmul_cuda_bias call into a NaN-poisoned C; returns what it
 * returned (1 bias in C, 0 plain product) after checking C accordingly. */
static int run_bias_case(const Ctx *ctx, const Setting *st, int M, int N, int K, int transA,
                         int transB, int bias_offset)
{
    BiasData d = bias_data(st, M, N, K, 1, bias_offset);
    size_t nC = (size_t)M * N;
    void *dC = gpu_alloc_poison(nC, st->tc);
    float *got = malloc(sizeof(float) * nC);
    int applied = matmul_cuda_bias(ctx->lt, ctx->cache, ctx->workspace, ctx->workspace_bytes,
                                   ctx->stream, dC, st->tc, d.dA, d.dB, st->tab, d.dbias[0],
                                   st->tc, M, N, K, transA, transB, st->tf32);
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    gpu_download(got, dC, nC, st->tc);
    char name[200];
    snprintf(name, sizeof name, "matmul_cuda_bias %s %dx%dx%d t%d%d%s (%s)", st->name, M, N, K,
             transA, transB, bias_offset ? " bias offset" : "",
             applied ? "epilogue" : "plain product");
    check_bias_result(name, st, got, d.A, d.B, d.bias[0], applied, M, N, K, transA, transB);
    CUDA_CHECK(cudaFree(dC));
    free(got);
    bias_data_free(&d, st, bias_offset);
    return applied;
}

/* Two live biases (same alignment, so one cached plan) in turn: each call
 * must add its own, i.e. the pointer is set per call, not kept from the
 * call that built the plan. */
static void check_bias_per_call(const Ctx *ctx, const Setting *st, int M, int N, int K)
{
    BiasData d = bias_data(st, M, N, K, 2, 0);
    size_t nC = (size_t)M * N;
    float *got = malloc(sizeof(float) * nC);
    for (int r = 0; r < 4; r++) {
        void *dC = gpu_alloc_poison(nC, st->tc);
        int applied = matmul_cuda_bias(ctx->lt, ctx->cache, ctx->workspace,
                                       ctx->workspace_bytes, ctx->stream, dC, st->tc, d.dA,
                                       d.dB, st->tab, d.dbias[r & 1], st->tc, M, N, K, 0, 1,
                                       st->tf32);
        CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
        gpu_download(got, dC, nC, st->tc);
        char name[160];
        snprintf(name, sizeof name, "matmul_cuda_bias %s %dx%dx%d bias %d of 2, call %d",
                 st->name, M, N, K, (r & 1) + 1, r + 1);
        check_bias_result(name, st, got, d.A, d.B, d.bias[r & 1], applied, M, N, K, 0, 1);
        CUDA_CHECK(cudaFree(dC));
    }
    free(got);
    bias_data_free(&d, st, 0);
}

/* The bias epilogue over shapes, transposes and alignments (see the top). */
static void check_bias(const Ctx *ctx, const Setting *st)
{
    static const int shapes[][3] = {{3, 5, 7}, {17, 33, 65}, {64, 768, 768}, {512, 1000, 2048}};
    char name[160];
    for (int s = 0; s < 4; s++)
        for (int t = 0; t < 4; t++) {
            int applied = run_bias_case(ctx, st, shapes[s][0], shapes[s][1], shapes[s][2],
                                        t >> 1, t & 1, 0);
            /* odd shapes may lack an epilogue algorithm; so may mixed types,
             * which no Linear layer uses */
            if (s < 2 || st->tc != st->tab) continue;
            snprintf(name, sizeof name, "matmul_cuda_bias %s %dx%dx%d t%d%d takes the epilogue",
                     st->name, shapes[s][0], shapes[s][1], shapes[s][2], t >> 1, t & 1);
            check_true(name, applied, "aligned operands and sizes, yet no epilogue algorithm");
        }
    /* one row or one column: the plain product, and the call says so */
    int one[3][3] = {{1, 64, 32}, {40, 1, 32}, {40, 64, 1}};
    for (int i = 0; i < 3; i++) {
        int applied = run_bias_case(ctx, st, one[i][0], one[i][1], one[i][2], 0, 1, 0);
        snprintf(name, sizeof name, "matmul_cuda_bias %s %dx%dx%d leaves the bias to the caller",
                 st->name, one[i][0], one[i][1], one[i][2]);
        check_true(name, !applied, "a matrix of one row or column took the epilogue");
    }
    run_bias_case(ctx, st, 64, 768, 768, 0, 1, 1);
    run_bias_case(ctx, st, 17, 33, 65, 0, 1, 1);
    check_bias_per_call(ctx, st, 64, 768, 768);
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
                    st->tf32, NULL);
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
        check_bias(&ctx, st);
        /* the plain plan of a shape that now also has a bias plan */
        run_case(&ctx, st, (Case){64, 768, 768, 0, 1, 1.0f, 0.0f, 1, 0, 0, 0, 0});
        printf("  %-10s worst error %.3f of tolerance\n", st->name, worst_ratio);
    }

    matmul_plan_cache_free(ctx.cache);
    CUDA_CHECK(cudaFree(ctx.workspace));
    CUBLAS_CHECK(cublasLtDestroy(ctx.lt));
    return check_summary();
}
