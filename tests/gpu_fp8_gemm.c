/* gpu_fp8_gemm.c — the transposed FP8 cast (ops/fp8.cu) and the FP8 GEMM
 * through cuBLASLt (ops/fp8_gemm.c) against their CPU references.
 *
 * Cast-transpose, bit for bit: f32, f16 and bf16 inputs of shapes 1x1,
 * 17x33, 33x17, 70x130, 80x96, 256x768, 1000x64 and 16448x1024 (tiles cut at both
 * edges; 80x96, 256x768 and 16448x1024 through the 16-byte kernel, ops/fp8.cu),
 * E4M3 and E5M2, values log-uniform over 2^-24 .. 2^24 of both signs plus
 * two NaNs and +-0 (every input type), -0 and a subnormal in a vector without
 * NaN, and in two shapes +-inf: qt[c][r] and q[r][c] equal
 * fp8_from_f32(x[r][c] * scale) (fp8_cast_cpu), the amax equals max |x|;
 * a second call without q over a poisoned qt, its amax preloaded above
 * max |x|, writes the same qt and leaves the larger amax.
 *
 * Cast-transpose with GELU's backward on the way in (dh = T(dg GELU'(h)),
 * op_ffn_fp8's gradient cast): codes both ways, amax and column sums bit
 * for bit against act_backward_cuda's dh then the plain cast (both
 * kernels' shapes, f32 / f16 / bf16, with and without db).
 *
 * FP8 GEMM, D = sa sb A B^T + beta D: E4M3 x E4M3 (forward), E5M2 x E4M3
 * and E4M3 x E5M2 (the gradient GEMMs), D bf16 and f32, beta 0 (D poisoned
 * with NaN: it must not be read) and 1 (accumulation), scales 0.5, 3, 1/448
 * and 2, through fresh scale addresses at every call (the cached plan must
 * take each call's pointers), on 16^3, 128x256x64, 48x80x96, BERT-large's
 * FFN shapes (forward 256x4096x1024, dgrad 256x1024x4096, wgrad
 * 4096x1024x256 into f32 with beta 1), BERT-base's 512x768x3072, and
 * operands 16 bytes off their allocation's alignment (another plan).
 * The reference is fp8_gemm_ref (sums in double).
 *
 * With a bias (the Linear forward's epilogue: bf16 D, beta 0): a bf16
 * vector of magnitude about the product's, added to each row; the
 * reference adds it in double before D's rounding, as the epilogue does.
 * BERT's forward shapes must take the epilogue (fp8_gemm_cuda returns 0);
 * the small shapes and a bias 2 bytes off its allocation may be refused (1:
 * the caller's cue to add the bias apart), which the case then reports.
 * Tolerance as without: a bias adds one term, exact in f32, to each sum.
 *
 * Tolerances. The FP8 products are exact in f32 (at most 4 + 4 significant
 * bits), so the differences are in how the GPU adds them. Hopper's FP8
 * tensor cores keep about 14 significant bits while they add (DeepSeek-V3
 * report, section 3.3.2); with fast accumulation off cuBLASLt moves the
 * partial sums into f32 every few MMA steps. With
 *   S = sa sb sum_k |a_k b_k|   and   u = 2^-7 for bf16 (one ulp of 8
 *   significant bits: nearest rounding needs half), 2^-23 for f32 (the
 *   reference's own rounding and one more),
 * two kinds of values:
 *   - exact: A = i 2^-2, B = j 2 with integers |i|, |j| <= 4. Each product
 *     is a whole number of halves of magnitude <= 8, so a partial sum of n
 *     products is a whole number of halves below 16 n: exact with 14
 *     significant bits for n < 1024 (random signs keep it ~sqrt(n) times
 *     smaller still), and exact in f32. What is left is f32 rounding outside
 *     the tensor cores: the scaling by sa sb, the f32 adds of the promoted
 *     partial sums (at most K/32, each <= 2^-24 of a sum bounded by S),
 *     beta D0, and the output type:
 *       |got - ref| <= (K/32 + 4) 2^-24 S + 2^-21 |beta D0| + u |ref|
 *     A wrong layout, scale, beta or type is orders of magnitude outside;
 *   - cast: codes fp8(v fmt_max), v uniform in [-1, 1): full mantissas,
 *     subnormals now and then. Inside one MMA step of k = 32 each addend
 *     may lose up to 2^-13 of the step's largest magnitude to alignment
 *     (32 2^-13 = 2^-8 of S), and the accumulator's own truncation over the
 *     steps between promotions as much again: 2^-7 S + the terms above.
 *     Each such case prints the largest |got - ref| / S it saw, the tensor
 *     cores' real precision, for docs/kernels.md.
 * With fast accumulation (the forward's option, CTRAIN_FP8_FAST_ACCUM) the
 * partial sums are never promoted: the truncation runs over all K / 32
 * steps, 2^-8 S + (K / 32) 2^-13 S for cast values (at least the 2^-7 S
 * above); exact values stay exact. Checked on the forward shapes with K
 * 1024, 3072 and 4096, one with the bias.
 * With a bf16 D and beta 1 the kernel rounds the product to bf16 before
 * adding beta D0 (seen on the first run: an exact case 1.5 ulp off, exact
 * zeros where the product cancels D0), as a bf16 GEMM and a bf16 add
 * would: 2^-8 S more for those cases.
 * A CPU model of that accumulator (14 or 13 bits, truncating, promoted
 * every 1, 4, 16 or no steps) stays within 0.5 of these tolerances on the
 * exact cases (0.97 with u half a bf16 ulp) and 0.1 on the cast cases; a
 * transposed operand misses them by ~10^4 (exact) and ~25 (cast).
 *
 * The refusals (E5M2 x E5M2; a size not a multiple of 16; a scale pointer
 * not 16-byte aligned) are ct_fatal:
 * checked in forked children before this process touches CUDA. The GEMMs
 * need compute capability 8.9 or newer; on an older GPU they are skipped
 * with a message and the cast checks still run.
 *
 * The cast-transpose with column sums (the FP8 Linear's bias gradient in
 * dy's cast): the codes and amax as the plain cast's, db within the f32
 * rounding of its summation order of sums in double (fresh, and added to a
 * previous db), and bit-identical on a second run: f32, f16, bf16 inputs,
 * shapes 1x1 to 4096x1024.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/elementwise.h"
#include "ops/fp8.h"
#include "ops/fp8_gemm.h"
#include "check.h"
#include "gpu_util.h"

/* ---- the transposed cast ---- */

static void test_cast_transpose(DType xt, Fp8Format f, int rows, int cols, int with_inf)
{
    const size_t n = (size_t)rows * cols;
    float *x = falloc(n);
    check_seed(1000u * (uint64_t)rows + (uint64_t)cols + 7u * (uint64_t)xt + (uint64_t)f);
    for (size_t i = 0; i < n; i++)
        x[i] = copysignf(exp2f(check_uniform(-24.0f, 24.0f)), check_uniform(-1.0f, 1.0f));
    if (n >= 4) {   /* every input type: the 16-byte kernel's NaN path is per vector */
        x[1] = NAN; x[2] = 0.0f; x[3] = -0.0f;
        x[n / 2 + 1] = -NAN;   /* another tile and pass (and, at 1x1 .. 17x33, x[1] again) */
        if (with_inf) x[n - 1] = -INFINITY;
    }
    if (n >= 64) {   /* and in a vector without NaN (its fast path): -0, an f32 subnormal */
        x[n / 4] = -0.0f;
        x[n / 4 + 1] = 0x1p-130f;
        if (with_inf) x[n / 4 + 2] = INFINITY;
    }
    quantize(x, n, xt);
    const float scale = 0.75f;
    uint8_t *qref = malloc(n), *q = malloc(n), *qt = malloc(n);
    float amax_ref = 0.0f;
    fp8_cast_cpu(qref, &amax_ref, x, n, scale, f);

    void *dx = gpu_upload(x, n, xt);
    void *dscale = gpu_upload(&scale, 1, DT_F32);
    uint8_t *dq, *dqt;
    float *damax;
    CUDA_CHECK(cudaMalloc((void **)&dq, n));
    CUDA_CHECK(cudaMalloc((void **)&dqt, n));
    CUDA_CHECK(cudaMalloc((void **)&damax, sizeof(float)));
    /* 0xFF is a NaN code in both formats, never a cast's result */
    CUDA_CHECK(cudaMemset(dq, 0xFF, n));
    CUDA_CHECK(cudaMemset(dqt, 0xFF, n));
    sync_all();
    fp8_amax_zero_cuda(damax, 1, 0);
    fp8_cast_transpose_cuda(dqt, dq, damax, dx, xt, rows, cols, dscale, f, 0);
    float amax = -1.0f;
    sync_all();
    CUDA_CHECK(cudaMemcpy(q, dq, n, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(qt, dqt, n, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(&amax, damax, sizeof amax, cudaMemcpyDeviceToHost));

    char name[128];
    int bad_q = 0, bad_qt = 0, first = -1;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            const size_t i = (size_t)r * cols + c;
            bad_q += q[i] != qref[i];
            if (qt[(size_t)c * rows + r] != qref[i]) {
                if (bad_qt++ == 0) first = (int)i;
            }
        }
    snprintf(name, sizeof name, "fp8.cast_transpose.%s.%s.%dx%d.qt", dtype_name(xt), fp8_name(f),
             rows, cols);
    check_true(name, bad_qt == 0, "%d of %zu codes differ; first x[%d][%d] = %.9g -> 0x%02X, CPU "
               "0x%02X", bad_qt, n, first >= 0 ? first / cols : 0, first >= 0 ? first % cols : 0,
               first >= 0 ? (double)x[first] : 0.0,
               first >= 0 ? qt[(size_t)(first % cols) * rows + first / cols] : 0,
               first >= 0 ? qref[first] : 0);
    snprintf(name, sizeof name, "fp8.cast_transpose.%s.%s.%dx%d.q", dtype_name(xt), fp8_name(f),
             rows, cols);
    check_true(name, bad_q == 0, "%d of %zu untransposed codes differ", bad_q, n);
    snprintf(name, sizeof name, "fp8.cast_transpose.%s.%s.%dx%d.amax", dtype_name(xt),
             fp8_name(f), rows, cols);
    check_true(name, memcmp(&amax, &amax_ref, sizeof amax) == 0, "device %.9g, CPU %.9g",
               (double)amax, (double)amax_ref);

    /* again without q, into a poisoned qt, the amax already above max |x| */
    const float big = 0x1p100f, amax_want = fmaxf(big, amax_ref);
    CUDA_CHECK(cudaMemset(dqt, 0xFF, n));
    CUDA_CHECK(cudaMemcpy(damax, &big, sizeof big, cudaMemcpyHostToDevice));
    sync_all();
    fp8_cast_transpose_cuda(dqt, NULL, damax, dx, xt, rows, cols, dscale, f, 0);
    sync_all();
    uint8_t *qt2 = malloc(n);
    CUDA_CHECK(cudaMemcpy(qt2, dqt, n, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(&amax, damax, sizeof amax, cudaMemcpyDeviceToHost));
    snprintf(name, sizeof name, "fp8.cast_transpose.%s.%s.%dx%d.no_q_keeps_amax", dtype_name(xt),
             fp8_name(f), rows, cols);
    check_true(name, memcmp(qt2, qt, n) == 0 && memcmp(&amax, &amax_want, sizeof amax) == 0,
               "qt %s, amax %.9g (expected %.9g)", memcmp(qt2, qt, n) ? "differs" : "same",
               (double)amax, (double)amax_want);

    dfree(dx); dfree(dscale); dfree(dq); dfree(dqt); dfree(damax);
    free(x); free(qref); free(q); free(qt); free(qt2);
}

/* The cast-transpose that also sums columns (the FP8 Linear's bias
 * gradient from dy): the codes as the plain cast's, db against sums in
 * double, accumulating into a previous db when accum, and the same bits
 * from a second run (the order is fixed by the shape). */
static void test_cast_transpose_colsum(DType xt, Fp8Format f, int rows, int cols, int accum)
{
    const size_t n = (size_t)rows * cols;
    float *x = falloc(n), *d0 = falloc((size_t)cols);
    check_seed(3000u * (uint64_t)rows + (uint64_t)cols + 7u * (uint64_t)xt + (uint64_t)accum);
    for (size_t i = 0; i < n; i++) x[i] = check_uniform(-4.0f, 4.0f);
    quantize(x, n, xt);
    for (int c = 0; c < cols; c++) d0[c] = accum ? check_uniform(-100.0f, 100.0f) : NAN;
    const float scale = 30.0f;
    uint8_t *qref = malloc(n), *q = malloc(n), *qt = malloc(n);
    float amax_ref = 0.0f;
    fp8_cast_cpu(qref, &amax_ref, x, n, scale, f);
    double *ref = calloc((size_t)cols, sizeof(double)), *abs_sum = calloc((size_t)cols, sizeof(double));
    for (size_t r = 0; r < (size_t)rows; r++)
        for (size_t c = 0; c < (size_t)cols; c++) {
            ref[c] += x[r * cols + c];
            abs_sum[c] += fabs((double)x[r * cols + c]);
        }
    if (accum)
        for (int c = 0; c < cols; c++) ref[c] += d0[c];

    void *dx = gpu_upload(x, n, xt);
    void *dscale = gpu_upload(&scale, 1, DT_F32);
    float *ddb = gpu_upload(d0, (size_t)cols, DT_F32), *dpart, *damax;
    uint8_t *dq, *dqt;
    const size_t nparts = fp8_colsum_scratch_floats((size_t)rows, (size_t)cols);
    CUDA_CHECK(cudaMalloc((void **)&dq, n));
    CUDA_CHECK(cudaMalloc((void **)&dqt, n));
    CUDA_CHECK(cudaMalloc((void **)&dpart, nparts * sizeof(float)));
    CUDA_CHECK(cudaMalloc((void **)&damax, sizeof(float)));
    CUDA_CHECK(cudaMemset(dpart, 0xFF, nparts * sizeof(float)));   /* NaN: written before read */
    float *db[2] = {falloc((size_t)cols), falloc((size_t)cols)};
    float amax = -1.0f;
    for (int run = 0; run < 2; run++) {
        CUDA_CHECK(cudaMemcpy(ddb, d0, (size_t)cols * sizeof(float), cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemset(dq, 0xFF, n));
        CUDA_CHECK(cudaMemset(dqt, 0xFF, n));
        sync_all();
        fp8_amax_zero_cuda(damax, 1, 0);
        fp8_cast_transpose_colsum_cuda(dqt, dq, damax, ddb, accum, dpart, dx, xt, (size_t)rows,
                                       (size_t)cols, dscale, f, 0);
        sync_all();
        CUDA_CHECK(cudaMemcpy(db[run], ddb, (size_t)cols * sizeof(float), cudaMemcpyDeviceToHost));
    }
    CUDA_CHECK(cudaMemcpy(q, dq, n, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(qt, dqt, n, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(&amax, damax, sizeof amax, cudaMemcpyDeviceToHost));

    int bad = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            const size_t i = (size_t)r * cols + c;
            bad += q[i] != qref[i] || qt[(size_t)c * rows + r] != qref[i];
        }
    char name[128];
    snprintf(name, sizeof name, "fp8.cast_transpose_colsum.%s.%s.%dx%d%s.codes", dtype_name(xt),
             fp8_name(f), rows, cols, accum ? ".accum" : "");
    check_true(name, bad == 0 && memcmp(&amax, &amax_ref, sizeof amax) == 0,
               "%d codes differ; amax %.9g, CPU %.9g", bad, (double)amax, (double)amax_ref);
    /* f32 sums: 16 rows a lane in order, 4 lanes, then ceil(ntiles / 16) tile rows a slice
     * in order (ntiles = ceil(rows / 64)), then 16 slices; each add rounds by at most 2^-24
     * of a partial sum bounded by sum |x|: under (40 + rows / 64) 2^-24 sum |x|, and the
     * accumulate's add 2^-24 |ref| */
    int worst = 0;
    double worst_ratio = 0.0;
    for (int c = 0; c < cols; c++) {
        const double tol = (40.0 + rows / 64.0) * 0x1p-24 * abs_sum[c] + 0x1p-24 * fabs(ref[c]) +
                           1e-30;
        const double err = fabs((double)db[0][c] - ref[c]);
        const double ratio = isnan(err) ? INFINITY : err / tol;
        if (ratio > worst_ratio) { worst_ratio = ratio; worst = c; }
    }
    snprintf(name, sizeof name, "fp8.cast_transpose_colsum.%s.%s.%dx%d%s.db", dtype_name(xt),
             fp8_name(f), rows, cols, accum ? ".accum" : "");
    check_true(name, worst_ratio <= 1.0, "column %d: got %.9g, sum in double %.9g (%.3g of the "
               "tolerance)", worst, (double)db[0][worst], ref[worst], worst_ratio);
    snprintf(name, sizeof name, "fp8.cast_transpose_colsum.%s.%s.%dx%d%s.deterministic",
             dtype_name(xt), fp8_name(f), rows, cols, accum ? ".accum" : "");
    check_true(name, memcmp(db[0], db[1], (size_t)cols * sizeof(float)) == 0,
               "a second run gave other bits");

    dfree(dx); dfree(dscale); dfree(ddb); dfree(dpart); dfree(dq); dfree(dqt); dfree(damax);
    free(x); free(d0); free(qref); free(q); free(qt); free(ref); free(abs_sum);
    free(db[0]); free(db[1]);
}

/* The cast with GELU's backward on the way in (fp8_cast_transpose_dgelu_colsum_cuda, the
 * FFN's first Linear's gradient cast in op_ffn_fp8) against GELU's own backward kernel
 * (act_backward_cuda, writing dh) then the plain cast of dh: codes both ways, amax and the
 * column sums the same bits (the same GELU derivative, roundings and tile order), with and
 * without db; the 16-byte kernel's shapes and the first kernel's (rows not a multiple of
 * 16, odd widths). */
static void test_cast_transpose_dgelu(DType xt, int rows, int cols, int with_db)
{
    const size_t n = (size_t)rows * cols;
    float *g = falloc(n), *h = falloc(n);
    check_seed(5000u * (uint64_t)rows + (uint64_t)cols + 11u * (uint64_t)xt);
    for (size_t i = 0; i < n; i++) {
        g[i] = check_uniform(-2.0f, 2.0f);
        h[i] = check_uniform(-5.0f, 5.0f);
    }
    const float scale = 3000.0f;   /* E5M2, as a gradient's cast */
    void *dg = gpu_upload(g, n, xt), *dh_in = gpu_upload(h, n, xt), *dscale = gpu_upload(&scale, 1, DT_F32);
    void *ddh = gpu_alloc_poison(n, xt);
    const size_t nparts = fp8_colsum_scratch_floats((size_t)rows, (size_t)cols);
    uint8_t *dq[2], *dqt[2];
    float *ddb[2], *damax[2], *dpart;
    CUDA_CHECK(cudaMalloc((void **)&dpart, nparts * sizeof(float)));
    for (int k = 0; k < 2; k++) {
        CUDA_CHECK(cudaMalloc((void **)&dq[k], n));
        CUDA_CHECK(cudaMalloc((void **)&dqt[k], n));
        CUDA_CHECK(cudaMalloc((void **)&ddb[k], (size_t)cols * sizeof(float)));
        CUDA_CHECK(cudaMalloc((void **)&damax[k], sizeof(float)));
        CUDA_CHECK(cudaMemset(dq[k], 0xFF, n));
        CUDA_CHECK(cudaMemset(dqt[k], 0xFF, n));
        CUDA_CHECK(cudaMemset(ddb[k], 0, (size_t)cols * sizeof(float)));
        fp8_amax_zero_cuda(damax[k], 1, 0);
    }
    /* [0]: GELU's backward, then the cast of dh; [1]: the one pass */
    act_backward_cuda(ACT_GELU, ddh, dg, dh_in, NULL, xt, n, 0, 0);
    if (with_db)
        fp8_cast_transpose_colsum_cuda(dqt[0], dq[0], damax[0], ddb[0], 1, dpart, ddh, xt,
                                       (size_t)rows, (size_t)cols, dscale, FP8_E5M2, 0);
    else
        fp8_cast_transpose_cuda(dqt[0], dq[0], damax[0], ddh, xt, (size_t)rows, (size_t)cols,
                                dscale, FP8_E5M2, 0);
    fp8_cast_transpose_dgelu_colsum_cuda(dqt[1], dq[1], damax[1], with_db ? ddb[1] : NULL, 1,
                                         dpart, dg, dh_in, xt, (size_t)rows, (size_t)cols, dscale,
                                         FP8_E5M2, 0);
    sync_all();
    uint8_t *q[2], *qt[2];
    float db[2][2048], amax[2];
    int same = 1;
    for (int k = 0; k < 2; k++) {
        q[k] = malloc(n);
        qt[k] = malloc(n);
        CUDA_CHECK(cudaMemcpy(q[k], dq[k], n, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(qt[k], dqt[k], n, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(db[k], ddb[k], (size_t)cols * sizeof(float), cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(&amax[k], damax[k], sizeof(float), cudaMemcpyDeviceToHost));
    }
    same = !memcmp(q[0], q[1], n) && !memcmp(qt[0], qt[1], n) && amax[0] == amax[1] &&
           amax[0] > 0.0f && (!with_db || !memcmp(db[0], db[1], (size_t)cols * sizeof(float)));
    char name[128];
    snprintf(name, sizeof name, "fp8.cast_transpose_dgelu.%s.%dx%d%s", dtype_name(xt), rows, cols,
             with_db ? ".db" : "");
    check_true(name, same, "codes %d, transposed %d, amax %.9g vs %.9g, db %d differ from GELU's "
               "backward then the cast", memcmp(q[0], q[1], n) != 0, memcmp(qt[0], qt[1], n) != 0,
               (double)amax[0], (double)amax[1],
               with_db && memcmp(db[0], db[1], (size_t)cols * sizeof(float)) != 0);
    for (int k = 0; k < 2; k++) {
        dfree(dq[k]); dfree(dqt[k]); dfree(ddb[k]); dfree(damax[k]);
        free(q[k]); free(qt[k]);
    }
    dfree(dg); dfree(dh_in); dfree(dscale); dfree(ddh); dfree(dpart);
    free(g); free(h);
}

/* ---- the GEMM ---- */

typedef enum { VALUES_EXACT, VALUES_CAST } Values;

typedef struct {
    int M, N, K;
    Fp8Format af, bf;
    DType dt;
    float beta, sa, sb;   /* sa, sb: the operands' scale_inv */
    Values values;
    int offset;           /* bytes added to every operand's address (16: a sliced buffer) */
    int bias;             /* 0 none; 1 a bias the epilogue must take; 2 one it may refuse */
    int bias_offset;      /* bytes added to the bias vector's address */
    int fast;             /* cuBLASLt's fast accumulation (the forward's, CTRAIN_FP8_FAST_ACCUM) */
} GemmCase;

typedef struct {
    cublasLtHandle_t lt;
    void *workspace;
    size_t workspace_bytes;
    float *scales;        /* SCALE_SLOTS device scales 16 bytes apart, two new ones per case */
    int next_slot;
} Lt;

enum { SCALE_SLOTS = 64 };

/* Exact: integers -4 .. 4 times 2^e; cast: uniform over the format's range. */
static void fill_codes(uint8_t *q, size_t n, Fp8Format f, Values v, int e)
{
    for (size_t i = 0; i < n; i++) {
        const float u = v == VALUES_EXACT ? ldexpf(floorf(check_uniform(-4.0f, 5.0f)), e)
                                          : check_uniform(-1.0f, 1.0f) * fp8_max(f);
        q[i] = fp8_from_f32(u, f);
    }
}

/* The codes with their sign bits cleared: |value| (no NaN codes here). */
static uint8_t *abs_codes(const uint8_t *q, size_t n)
{
    uint8_t *a = malloc(n);
    for (size_t i = 0; i < n; i++) a[i] = q[i] & 0x7Fu;
    return a;
}

/* A device copy of n bytes at `offset` bytes into a fresh allocation. */
static void *upload_at(const void *h, size_t n, int offset, void **base)
{
    CUDA_CHECK(cudaMalloc(base, n + (size_t)offset));
    CUDA_CHECK(cudaMemcpy((char *)*base + offset, h, n, cudaMemcpyHostToDevice));
    return (char *)*base + offset;
}

static void run_gemm(Lt *lt, GemmCase g)
{
    const size_t na = (size_t)g.M * g.K, nb = (size_t)g.N * g.K, nd = (size_t)g.M * g.N;
    check_seed(31u * (uint64_t)g.M + 17u * (uint64_t)g.N + (uint64_t)g.K + 5u * g.af + 3u * g.bf);
    uint8_t *A = malloc(na), *B = malloc(nb);
    fill_codes(A, na, g.af, g.values, -2);
    fill_codes(B, nb, g.bf, g.values, 1);
    uint8_t *absA = abs_codes(A, na), *absB = abs_codes(B, nb);
    float *S = hbuf(nd), *ref = hbuf(nd), *d0 = hbuf(nd), *got = falloc(nd);
    fp8_gemm_ref(S, absA, g.af, fabsf(g.sa), absB, g.bf, fabsf(g.sb), g.M, g.N, g.K, 0.0f);
    if (g.beta != 0.0f) {
        /* a previous D about as large as the product */
        for (size_t i = 0; i < nd; i++)
            d0[i] = check_uniform(-1.0f, 1.0f) * (S[i] / sqrtf((float)g.K) + 1.0f);
        quantize(d0, nd, g.dt);
        memcpy(ref, d0, nd * sizeof(float));
    }
    fp8_gemm_ref(ref, A, g.af, g.sa, B, g.bf, g.sb, g.M, g.N, g.K, g.beta);
    float *bias = NULL;
    void *base_bias = NULL;
    const void *dbias = NULL;
    if (g.bias) {
        /* bf16 values about as large as a typical product, then added as the
         * epilogue adds them: in f32 before D's one rounding */
        bias = hbuf((size_t)g.N);
        double mean_s = 0.0;
        for (size_t i = 0; i < nd; i++) mean_s += S[i] / (double)nd;
        for (int n = 0; n < g.N; n++)
            bias[n] = check_uniform(-1.0f, 1.0f) * (float)(mean_s / sqrt((double)g.K) + 1.0);
        quantize(bias, (size_t)g.N, DT_BF16);
        for (size_t i = 0; i < nd; i++) ref[i] = (float)((double)ref[i] + bias[i % g.N]);
        uint16_t *hb = malloc((size_t)g.N * 2);
        dtype_convert(hb, DT_BF16, bias, DT_F32, (size_t)g.N);
        dbias = upload_at(hb, (size_t)g.N * 2, g.bias_offset, &base_bias);
        free(hb);
    }

    void *baseA, *baseB, *baseD;
    const uint8_t *dA = upload_at(A, na, g.offset, &baseA);
    const uint8_t *dB = upload_at(B, nb, g.offset, &baseB);
    const size_t dbytes = nd * dtype_size(g.dt);
    CUDA_CHECK(cudaMalloc(&baseD, dbytes + (size_t)g.offset));
    CUDA_CHECK(cudaMemset(baseD, 0xFF, dbytes + (size_t)g.offset));   /* NaN in bf16 and f32 */
    void *dD = (char *)baseD + g.offset;
    if (g.beta != 0.0f) {
        void *tmp = malloc(dbytes);
        dtype_convert(tmp, g.dt, d0, DT_F32, nd);
        CUDA_CHECK(cudaMemcpy(dD, tmp, dbytes, cudaMemcpyHostToDevice));
        free(tmp);
    }
    /* 16 bytes apart: cuBLASLt takes no other scale address (fp8_gemm.h) */
    float *dsa = lt->scales + 4 * lt->next_slot, *dsb = dsa + 4;
    lt->next_slot = (lt->next_slot + 2) % SCALE_SLOTS;
    CUDA_CHECK(cudaMemcpy(dsa, &g.sa, sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dsb, &g.sb, sizeof(float), cudaMemcpyHostToDevice));
    sync_all();
    const int rc = fp8_gemm_cuda(lt->lt, lt->workspace, lt->workspace_bytes, 0, dD, g.dt, dA,
                                 g.af, dsa, dB, g.bf, dsb, dbias, g.fast, g.M, g.N, g.K, g.beta);
    gpu_download(got, dD, nd, g.dt);

    /* fast accumulation: no promotion to f32, so the accumulator's truncation
     * runs over all K / 32 MMA steps (2^-13 S each) on top of the in-step
     * alignment loss (2^-8 S); the exact values stay exact in it */
    const double cast_acc = g.fast ? fmax(0x1p-7, 0x1p-8 + g.K / 32.0 * 0x1p-13) : 0x1p-7;
    const double acc = g.values == VALUES_EXACT ? (g.K / 32.0 + 4.0) * 0x1p-24 : cast_acc;
    const double u = g.dt == DT_BF16 ? 0x1p-7 : 0x1p-23;
    /* with a bf16 D and beta != 0 the kernel rounds the product to bf16
     * before it adds beta D0 (seen on the H200: results of exact sums a
     * rounding of the product away, an exact 0 where the product cancels
     * D0 to within its half ulp): what a bf16 GEMM then a bf16 add would
     * give. That first rounding is at most 2^-8 |product| <= 2^-8 S */
    const double pre = g.dt == DT_BF16 && g.beta != 0.0f ? 0x1p-8 : 0.0;
    size_t worst = 0;
    double worst_ratio = 0.0, worst_rel_s = 0.0;
    for (size_t i = 0; i < nd; i++) {
        const double err = fabs((double)got[i] - ref[i]);
        const double tol = (acc + pre) * S[i] + 0x1p-21 * fabs((double)g.beta * d0[i]) +
                           u * fabs(ref[i]);
        const double ratio = isnan(err) ? INFINITY : err == 0.0 ? 0.0 : err / tol;
        if (ratio > worst_ratio) { worst_ratio = ratio; worst = i; }
        if (S[i] > 0) worst_rel_s = fmax(worst_rel_s, err / S[i]);
    }
    char name[160];
    snprintf(name, sizeof name, "fp8_gemm.%s.%dx%dx%d.%sx%s.%s.beta%g%s%s%s%s",
             g.values == VALUES_EXACT ? "exact" : "cast", g.M, g.N, g.K, fp8_name(g.af),
             fp8_name(g.bf), dtype_name(g.dt), (double)g.beta, g.offset ? ".offset" : "",
             g.bias ? ".bias" : "", g.bias_offset ? "+2" : "", g.fast ? ".fast" : "");
    if (rc == 1 && g.bias == 2) {
        /* refused: D untouched (still the poison), the caller would add the bias */
        int untouched = 1;
        for (size_t i = 0; i < nd && untouched; i++) untouched = isnan(got[i]);
        check_true(name, untouched, "the epilogue was refused but D was written");
        printf("  %-48s the bias epilogue refused here (the separate add would run)\n", name);
    } else if (rc != 0) {
        check_true(name, 0, "fp8_gemm_cuda returned %d (no cuBLASLt algorithm)", rc);
    } else {
        check_true(name, worst_ratio <= 1.0, "worst at [%zu][%zu]: got %.9g ref %.9g (|diff| "
                   "%.3g = %.3g of the tolerance; S %.3g)", worst / g.N, worst % g.N,
                   (double)got[worst], (double)ref[worst], fabs((double)got[worst] - ref[worst]),
                   worst_ratio, (double)S[worst]);
        if (g.values == VALUES_CAST)
            printf("  %-48s worst |got - ref| / S = %.3g (2^%.1f), %.3f of the tolerance\n",
                   name, worst_rel_s, log2(worst_rel_s), worst_ratio);
    }
    dfree(baseA); dfree(baseB); dfree(baseD);
    if (base_bias) dfree(base_bias);
    free(bias);
    free(A); free(B); free(absA); free(absB); free(S); free(ref); free(d0); free(got);
}

/* The refusals, each in a child before this process touches CUDA. */
typedef struct {
    const char *name, *says, *also;   /* the check, and two phrases its message must hold */
    Fp8Format af, bf;
    int M, N, K;
    int scale_off;   /* > 0: well-formed (never dereferenced) addresses, a scale this many
                        bytes off 16 */
} Refusal;

static void child_gemm(void *arg)
{
    const Refusal *r = arg;
    if (r->scale_off) {   /* refused before any of these addresses is used */
        char *fake = (char *)(uintptr_t)0x100000;
        fp8_gemm_cuda((cublasLtHandle_t)fake, NULL, 0, NULL, fake, DT_BF16, (uint8_t *)fake,
                      r->af, (float *)(fake + 0x1000 + r->scale_off), (uint8_t *)fake, r->bf,
                      (float *)(fake + 0x2000), NULL, 0, r->M, r->N, r->K, 0.0f);
        return;
    }
    fp8_gemm_cuda(NULL, NULL, 0, NULL, NULL, DT_BF16, NULL, r->af, NULL, NULL, r->bf, NULL, NULL,
                  0, r->M, r->N, r->K, 0.0f);
}

static void test_refusals(void)
{
    static const Refusal refusals[] = {
        {"fp8_gemm.refuses_e5m2_x_e5m2", "A e5m2 x B e5m2", "no e5m2 x e5m2", FP8_E5M2,
         FP8_E5M2, 16, 16, 16, 0},
        {"fp8_gemm.refuses_sizes_off_16", "M=16 N=24 K=32", "multiples of 16", FP8_E4M3,
         FP8_E4M3, 16, 24, 32, 0},
        {"fp8_gemm.refuses_scale_off_16", "16-byte aligned", "scale pointers", FP8_E4M3,
         FP8_E4M3, 16, 16, 16, 4},
    };
    for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++) {
        const Refusal *r = &refusals[i];
        char msg[2048];
        const int st = check_run_child(child_gemm, (void *)r, msg, sizeof msg);
        check_true(r->name, st == 1 && strstr(msg, r->says) && strstr(msg, r->also),
                   "status %d, message: %s", st, msg);
    }
}

static void test_gemms(void)
{
    Lt lt = {0};
    CUBLAS_CHECK(cublasLtCreate(&lt.lt));
    lt.workspace_bytes = (size_t)32 << 20;
    CUDA_CHECK(cudaMalloc(&lt.workspace, lt.workspace_bytes));
    CUDA_CHECK(cudaMalloc((void **)&lt.scales, 4 * SCALE_SLOTS * sizeof(float)));

    static const int small[][3] = {{16, 16, 16}, {128, 256, 64}, {48, 80, 96}};   /* M, N, K */
    static const Fp8Format pairs[][2] = {
        {FP8_E4M3, FP8_E4M3}, {FP8_E5M2, FP8_E4M3}, {FP8_E4M3, FP8_E5M2}};
    static const float scales[][2] = {{0.5f, 3.0f}, {1.0f / 448.0f, 3.0f}, {2.0f, 1.0f / 448.0f}};
    static const DType outs[2] = {DT_BF16, DT_F32};
    int i = 0;
    for (int s = 0; s < 3; s++)
        for (int p = 0; p < 3; p++)
            for (int o = 0; o < 2; o++)
                for (int beta = 0; beta < 2; beta++)
                    for (int v = 0; v < 2; v++, i++)
                        run_gemm(&lt, (GemmCase){small[s][0], small[s][1], small[s][2],
                                                 pairs[p][0], pairs[p][1], outs[o], (float)beta,
                                                 scales[i % 3][0], scales[i % 3][1], (Values)v,
                                                 0, 0, 0, 0});
    /* the bias epilogue: the forward's E4M3 x E4M3 into bf16, small shapes (may be refused) */
    for (int s = 0; s < 3; s++)
        run_gemm(&lt, (GemmCase){small[s][0], small[s][1], small[s][2], FP8_E4M3, FP8_E4M3,
                                 DT_BF16, 0.0f, 0.5f, 3.0f, VALUES_CAST, 0, 2, 0, 0});

    /* BERT's FFN (x [R, In] w [Out, In]^T forward, dy [R, Out] (w^T)^T dgrad, dy^T x^T
     * wgrad into f32), then operands 16 bytes off the allocation's 256 (plans of their own);
     * each with both kinds of values */
    static const GemmCase big[] = {
        {256, 4096, 1024, FP8_E4M3, FP8_E4M3, DT_BF16, 0.0f, 1.0f / 448.0f, 0.5f, 0, 0, 0, 0, 0},
        {256, 1024, 4096, FP8_E5M2, FP8_E4M3, DT_BF16, 0.0f, 3.0f, 1.0f / 448.0f, 0, 0, 0, 0, 0},
        {4096, 1024, 256, FP8_E5M2, FP8_E4M3, DT_F32, 1.0f, 0.5f, 3.0f, 0, 0, 0, 0, 0},
        {512, 768, 3072, FP8_E4M3, FP8_E4M3, DT_BF16, 0.0f, 2.0f, 0.5f, 0, 0, 0, 0, 0},
        {1024, 1024, 512, FP8_E4M3, FP8_E5M2, DT_F32, 1.0f, 2.0f, 1.0f / 448.0f, 0, 0, 0, 0, 0},
        {128, 256, 64, FP8_E4M3, FP8_E4M3, DT_BF16, 1.0f, 0.5f, 3.0f, 0, 16, 0, 0, 0},
        {128, 256, 64, FP8_E5M2, FP8_E4M3, DT_F32, 0.0f, 3.0f, 0.5f, 0, 16, 0, 0, 0},
        /* the Linear forward's epilogue on BERT's shapes (must be taken), then a bias 2
         * bytes off its allocation (may be refused) */
        {256, 4096, 1024, FP8_E4M3, FP8_E4M3, DT_BF16, 0.0f, 1.0f / 448.0f, 0.5f, 0, 0, 1, 0, 0},
        {512, 768, 3072, FP8_E4M3, FP8_E4M3, DT_BF16, 0.0f, 2.0f, 0.5f, 0, 0, 1, 0, 0},
        {256, 1024, 1024, FP8_E4M3, FP8_E4M3, DT_BF16, 0.0f, 0.5f, 3.0f, 0, 0, 1, 0, 0},
        {256, 1024, 1024, FP8_E4M3, FP8_E4M3, DT_BF16, 0.0f, 0.5f, 3.0f, 0, 0, 2, 2, 0},
        /* the forward GEMMs with fast accumulation (K 1024, 3072, 4096), one with the bias */
        {256, 4096, 1024, FP8_E4M3, FP8_E4M3, DT_BF16, 0.0f, 1.0f / 448.0f, 0.5f, 0, 0, 0, 0, 1},
        {512, 768, 3072, FP8_E4M3, FP8_E4M3, DT_BF16, 0.0f, 2.0f, 0.5f, 0, 0, 0, 0, 1},
        {256, 1024, 4096, FP8_E4M3, FP8_E4M3, DT_BF16, 0.0f, 0.5f, 3.0f, 0, 0, 0, 0, 1},
        {256, 1024, 4096, FP8_E4M3, FP8_E4M3, DT_BF16, 0.0f, 0.5f, 3.0f, 0, 0, 1, 0, 1},
    };
    for (size_t c = 0; c < sizeof big / sizeof big[0]; c++)
        for (int v = 0; v < 2; v++) {
            GemmCase g = big[c];
            g.values = (Values)v;
            run_gemm(&lt, g);
        }

    fp8_gemm_cache_clear();
    dfree(lt.scales);
    dfree(lt.workspace);
    CUBLAS_CHECK(cublasLtDestroy(lt.lt));
}

int main(void)
{
    test_refusals();
    gpu_require();
    /* 80x96, 256x768, 16448x1024 (and 4096x1024 below) take the 16-byte kernel, 80x96 with
     * tiles cut at both edges, 16448x1024 with 257 row tiles for its grid's 256 (a block
     * takes a second); the others the first kernel; +-inf in 17x33 and 256x768 */
    static const int shapes[][2] = {{1, 1},   {17, 33},   {33, 17},   {70, 130},
                                    {80, 96}, {256, 768}, {1000, 64}, {16448, 1024}};
    for (int t = 0; t < 3; t++)
        for (int f = 0; f < 2; f++)
            for (int s = 0; s < 8; s++)
                test_cast_transpose(gpu_float_types[t], (Fp8Format)f, shapes[s][0], shapes[s][1],
                                    s == 1 || s == 5);
    /* the column sums: dy's types (bf16 from autocast, f32 without), E5M2 as the backward's
     * cast, then BERT-like [R, Out]; fresh and accumulating */
    static const int colsum_shapes[][2] = {{1, 1}, {17, 33}, {70, 130}, {80, 96}, {1000, 64},
                                           {4096, 1024}};
    for (int t = 0; t < 3; t++)
        for (int s = 0; s < 6; s++)
            for (int accum = 0; accum < 2; accum++)
                test_cast_transpose_colsum(gpu_float_types[t], FP8_E5M2, colsum_shapes[s][0],
                                           colsum_shapes[s][1], accum);

    /* GELU's backward in the cast: 16-byte kernel shapes, then the first kernel's */
    static const int dgelu_shapes[][2] = {{80, 96}, {256, 768}, {4096, 1024}, {17, 33}, {70, 130}};
    for (int t = 0; t < 3; t++)
        for (int s = 0; s < 5; s++)
            for (int with_db = 0; with_db < 2; with_db++)
                test_cast_transpose_dgelu(gpu_float_types[t], dgelu_shapes[s][0],
                                          dgelu_shapes[s][1], with_db);

    int dev = 0, major = 0, minor = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    if (major * 10 + minor >= 89)
        test_gemms();
    else
        printf("fp8_gemm: device %d is sm_%d%d; FP8 GEMMs need sm_89 or newer: GEMM checks "
               "skipped\n", dev, major, minor);
    return check_summary();
}
