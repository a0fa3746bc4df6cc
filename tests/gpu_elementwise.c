/* gpu_elementwise.c — the CUDA launchers of ops/elementwise.h and ops/reduce.h
 * against their CPU references, for f32, f16 and bf16 storage.
 *
 * Each check: random inputs rounded to the storage dtype (quantize), so the
 * CPU reference computes on exactly what the GPU reads; outputs poisoned with
 * NaN (gpu_alloc_poison) so a missed element fails, except for accum = 1,
 * where the output is preloaded with a known random value and the sum is
 * checked. Tolerances: tol_atol(dt) + tol_rtol(dt) * |ref| (the output
 * rounding of dt plus f32 reordering); cast and fill must match exactly.
 * Sizes include odd ones (1, 7, 1000003) so both the vector body and the
 * scalar tail run, and offset pointers so the unaligned path runs. Reductions
 * are also run twice and must agree bit for bit (no atomics).
 *
 * Shape letters: n elements; R rows, C columns (last dim).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "check.h"
#include "gpu_util.h"

static const size_t SIZES[] = {1, 7, 1000003};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])

/* The output buffer of a check: poisoned for accum 0, else holding y0. */
static void *out_buf(const float *y0, size_t n, DType dt, int accum)
{
    return accum ? gpu_upload(y0, n, dt) : gpu_alloc_poison(n, dt);
}

/* Download d (n elements of dt) and compare with ref. */
static void expect(const char *name, const void *d, const float *ref, size_t n, DType dt)
{
    float *got = hbuf(n);
    gpu_download(got, d, n, dt);
    check_close(name, got, ref, n, tol_atol(dt), tol_rtol(dt));
    free(got);
}

/* ---- add, scale, mul ---- */

static void test_add(DType dt, size_t n, int unaligned)
{
    char name[80];
    size_t off = unaligned ? 1 : 0; /* one element in: breaks 16-byte alignment */
    float *a = hrand(n + off, -2, 2, dt), *b = hrand(n + off, -2, 2, dt), *ref = hbuf(n);
    add_forward_cpu(ref, a + off, b + off, n);
    void *da = gpu_upload(a, n + off, dt), *db = gpu_upload(b, n + off, dt);
    void *dy = gpu_alloc_poison(n + off, dt);
    size_t esz = dtype_size(dt);
    add_forward_cuda((char *)dy + off * esz, (char *)da + off * esz, (char *)db + off * esz,
                     dt, n, 0);
    float *got = hbuf(n + off);
    gpu_download(got, dy, n + off, dt);
    snprintf(name, sizeof name, "add.fwd.%s.n%zu%s", dtype_name(dt), n, unaligned ? ".unaligned" : "");
    check_close(name, got + off, ref, n, tol_atol(dt), tol_rtol(dt));
    free(a); free(b); free(ref); free(got);
    dfree(da); dfree(db); dfree(dy);
}

static void test_scale(DType dt, size_t n, int accum)
{
    char name[80];
    const float alpha = -0.61f;
    float *x = hrand(n, -2, 2, dt), *y0 = hrand(n, -1, 1, dt), *ref = hcopy(y0, n);
    scale_forward_cpu(ref, x, alpha, n, accum);
    void *dx = gpu_upload(x, n, dt), *dy = out_buf(y0, n, dt, accum);
    scale_forward_cuda(dy, dx, alpha, dt, n, accum, 0);
    snprintf(name, sizeof name, "scale.accum%d.%s.n%zu", accum, dtype_name(dt), n);
    expect(name, dy, ref, n, dt);
    free(x); free(y0); free(ref);
    dfree(dx); dfree(dy);
}

static void test_mul(DType dt, size_t n)
{
    char name[80];
    float *a = hrand(n, -2, 2, dt), *b = hrand(n, -2, 2, dt), *g = hrand(n, -1, 1, dt);
    float *ga0 = hrand(n, -1, 1, dt), *gb0 = hrand(n, -1, 1, dt), *ref = hbuf(n);
    void *da = gpu_upload(a, n, dt), *db = gpu_upload(b, n, dt), *dg = gpu_upload(g, n, dt);

    mul_forward_cpu(ref, a, b, n);
    void *dy = gpu_alloc_poison(n, dt);
    mul_forward_cuda(dy, da, db, dt, n, 0);
    snprintf(name, sizeof name, "mul.fwd.%s.n%zu", dtype_name(dt), n);
    expect(name, dy, ref, n, dt);
    dfree(dy);

    /* backward: (accum_a, accum_b, which) with which 0 both, 1 da only, 2 db only */
    static const int cases[][3] = {{0, 0, 0}, {1, 1, 0}, {0, 1, 0}, {1, 0, 1}, {0, 0, 2}, {0, 1, 2}};
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        int acc_a = cases[t][0], acc_b = cases[t][1], which = cases[t][2];
        float *ra = hcopy(ga0, n), *rb = hcopy(gb0, n);
        mul_backward_cpu(which == 2 ? NULL : ra, which == 1 ? NULL : rb, g, a, b, n, acc_a, acc_b);
        void *dga = which == 2 ? NULL : out_buf(ga0, n, dt, acc_a);
        void *dgb = which == 1 ? NULL : out_buf(gb0, n, dt, acc_b);
        mul_backward_cuda(dga, dgb, dg, da, db, dt, n, acc_a, acc_b, 0);
        if (dga) {
            snprintf(name, sizeof name, "mul.bwd.da.acc%d%d.w%d.%s.n%zu", acc_a, acc_b, which,
                     dtype_name(dt), n);
            expect(name, dga, ra, n, dt);
            dfree(dga);
        }
        if (dgb) {
            snprintf(name, sizeof name, "mul.bwd.db.acc%d%d.w%d.%s.n%zu", acc_a, acc_b, which,
                     dtype_name(dt), n);
            expect(name, dgb, rb, n, dt);
            dfree(dgb);
        }
        free(ra); free(rb);
    }
    free(a); free(b); free(g); free(ga0); free(gb0); free(ref);
    dfree(da); dfree(db); dfree(dg);
}

/* ---- activations ---- */

static void test_act(DType dt, ActKind k, size_t n, int accum)
{
    static const char *names[] = {"relu", "gelu", "tanh"};
    char name[80];
    float *x = hrand(n, -4, 4, dt), *ref = hbuf(n);
    void *dx = gpu_upload(x, n, dt);

    act_forward_cpu(k, ref, x, n);
    void *dy = gpu_alloc_poison(n, dt);
    act_forward_cuda(k, dy, dx, dt, n, 0);
    snprintf(name, sizeof name, "%s.fwd.%s.n%zu", names[k], dtype_name(dt), n);
    expect(name, dy, ref, n, dt);
    dfree(dy);

    /* tanh's backward reads y; any y in (-1, 1) will do */
    float *y = hrand(n, -1, 1, dt), *g = hrand(n, -1, 1, dt), *gx0 = hrand(n, -1, 1, dt);
    float *rdx = hcopy(gx0, n);
    const float *hx = k == ACT_TANH ? NULL : x, *hy = k == ACT_TANH ? y : NULL;
    act_backward_cpu(k, rdx, g, hx, hy, n, accum);
    void *dyv = gpu_upload(y, n, dt), *dg = gpu_upload(g, n, dt);
    void *dgx = out_buf(gx0, n, dt, accum);
    act_backward_cuda(k, dgx, dg, k == ACT_TANH ? NULL : dx, k == ACT_TANH ? dyv : NULL, dt, n,
                      accum, 0);
    snprintf(name, sizeof name, "%s.bwd.accum%d.%s.n%zu", names[k], accum, dtype_name(dt), n);
    expect(name, dgx, rdx, n, dt);
    free(x); free(ref); free(y); free(g); free(gx0); free(rdx);
    dfree(dx); dfree(dyv); dfree(dg); dfree(dgx);
}

/* ---- cast and fill (exact: one f32 -> dt rounding, as dtype.c does it) ---- */

static void test_cast(DType ty, DType tx, size_t n, int accum)
{
    char name[80];
    float *x = hrand(n, -8, 8, tx), *y0 = hrand(n, -8, 8, ty), *ref = hbuf(n);
    for (size_t i = 0; i < n; i++) ref[i] = accum ? y0[i] + x[i] : x[i];
    quantize(ref, n, ty);
    void *dx = gpu_upload(x, n, tx), *dy = out_buf(y0, n, ty, accum);
    cast_cuda(dy, ty, dx, tx, n, accum, 0);
    float *got = hbuf(n);
    gpu_download(got, dy, n, ty);
    snprintf(name, sizeof name, "cast.%s_to_%s.accum%d.n%zu", dtype_name(tx), dtype_name(ty),
             accum, n);
    check_close(name, got, ref, n, 0, 0);
    free(x); free(y0); free(ref); free(got);
    dfree(dx); dfree(dy);
}

static void test_fill(DType dt, size_t n)
{
    char name[80];
    const float value = 0.3f;
    float *ref = hbuf(n), *got = hbuf(n);
    for (size_t i = 0; i < n; i++) ref[i] = value;
    quantize(ref, n, dt);
    void *dy = gpu_alloc_poison(n, dt);
    fill_cuda(dy, dt, value, n, 0);
    gpu_download(got, dy, n, dt);
    snprintf(name, sizeof name, "fill.%s.n%zu", dtype_name(dt), n);
    check_close(name, got, ref, n, 0, 0);
    free(ref); free(got);
    dfree(dy);
}

/* ---- bias-add and its backward ---- */

static void test_bias(DType dt, size_t R, size_t C)
{
    char name[80];
    size_t n = R * C;
    float *x = hrand(n, -2, 2, dt), *b = hrand(C, -1, 1, dt), *ref = hbuf(n);
    bias_add_forward_cpu(ref, x, b, R, C);
    void *dx = gpu_upload(x, n, dt), *db = gpu_upload(b, C, dt), *dy = gpu_alloc_poison(n, dt);
    bias_add_forward_cuda(dy, dx, db, dt, R, C, 0);
    snprintf(name, sizeof name, "bias_add.fwd.%s.%zux%zu", dtype_name(dt), R, C);
    expect(name, dy, ref, n, dt);
    dfree(dy);

    /* dy is dt, db is f32 */
    float *g = hrand(n, -1, 1, dt), *db0 = hrand(C, -1, 1, DT_F32);
    void *dg = gpu_upload(g, n, dt);
    for (int accum = 0; accum <= 1; accum++) {
        float *rdb = hcopy(db0, C);
        bias_backward_cpu(rdb, g, R, C, accum);
        float *ddb = out_buf(db0, C, DT_F32, accum), *ddb2 = out_buf(db0, C, DT_F32, accum);
        bias_backward_cuda(ddb, dg, dt, R, C, accum, 0);
        bias_backward_cuda(ddb2, dg, dt, R, C, accum, 0);
        float *got = hbuf(C), *got2 = hbuf(C);
        gpu_download(got, ddb, C, DT_F32);
        gpu_download(got2, ddb2, C, DT_F32);
        snprintf(name, sizeof name, "bias.bwd.accum%d.%s.%zux%zu", accum, dtype_name(dt), R, C);
        check_close(name, got, rdb, C, tol_atol(dt), tol_rtol(dt));
        snprintf(name, sizeof name, "bias.bwd.deterministic.accum%d.%s.%zux%zu", accum,
                 dtype_name(dt), R, C);
        check_true(name, memcmp(got, got2, C * sizeof(float)) == 0, "two runs differ");
        free(rdb); free(got); free(got2);
        dfree(ddb); dfree(ddb2);
    }
    free(x); free(b); free(ref); free(g); free(db0);
    dfree(dx); dfree(db); dfree(dg);
}

/* bias-add on pointers one element past an aligned address (scalar path) */
static void test_bias_unaligned(DType dt, size_t R, size_t C)
{
    char name[80];
    size_t n = R * C, esz = dtype_size(dt);
    float *x = hrand(n + 1, -2, 2, dt), *b = hrand(C, -1, 1, dt), *ref = hbuf(n), *got = hbuf(n + 1);
    bias_add_forward_cpu(ref, x + 1, b, R, C);
    void *dx = gpu_upload(x, n + 1, dt), *db = gpu_upload(b, C, dt), *dy = gpu_alloc_poison(n + 1, dt);
    bias_add_forward_cuda((char *)dy + esz, (char *)dx + esz, db, dt, R, C, 0);
    gpu_download(got, dy, n + 1, dt);
    snprintf(name, sizeof name, "bias_add.fwd.unaligned.%s.%zux%zu", dtype_name(dt), R, C);
    check_close(name, got + 1, ref, n, tol_atol(dt), tol_rtol(dt));
    free(x); free(b); free(ref); free(got);
    dfree(dx); dfree(db); dfree(dy);
}

/* ---- reduce sum / mean ---- */

static void test_reduce(DType dt, size_t R, size_t C, int mean)
{
    const char *op = mean ? "mean" : "sum";
    char name[96];
    size_t n = R * C;
    float scale = mean ? 1.0f / (float)C : 1.0f;
    float *x = hrand(n, -1, 1, dt), *ref = hbuf(R);
    reduce_sum_forward_cpu(ref, x, scale, R, C);
    void *dx = gpu_upload(x, n, dt);
    float *dy = gpu_alloc_poison(R, DT_F32), *dy2 = gpu_alloc_poison(R, DT_F32);
    reduce_sum_forward_cuda(dy, dx, dt, scale, R, C, 0);
    reduce_sum_forward_cuda(dy2, dx, dt, scale, R, C, 0);
    float *got = hbuf(R), *got2 = hbuf(R);
    gpu_download(got, dy, R, DT_F32);
    gpu_download(got2, dy2, R, DT_F32);
    snprintf(name, sizeof name, "reduce.%s.fwd.%s.%zux%zu", op, dtype_name(dt), R, C);
    /* a sum of C terms carries rounding that grows like sqrt(C) in absolute
     * terms, independent of how much the terms cancel: scale atol with it */
    check_close(name, got, ref, R, tol_atol(dt) * (1.0 + scale * sqrt((double)C)), tol_rtol(dt));
    snprintf(name, sizeof name, "reduce.%s.fwd.deterministic.%s.%zux%zu", op, dtype_name(dt), R, C);
    check_true(name, memcmp(got, got2, R * sizeof(float)) == 0, "two runs differ");
    free(x); free(ref); free(got); free(got2);
    dfree(dx); dfree(dy); dfree(dy2);

    /* backward: dy is f32, dx is dt */
    float *g = hrand(R, -1, 1, DT_F32), *gx0 = hrand(n, -1, 1, dt);
    void *dg = gpu_upload(g, R, DT_F32);
    for (int accum = 0; accum <= 1; accum++) {
        float *rdx = hcopy(gx0, n);
        reduce_sum_backward_cpu(rdx, g, scale, R, C, accum);
        void *dgx = out_buf(gx0, n, dt, accum);
        reduce_sum_backward_cuda(dgx, dt, dg, scale, R, C, accum, 0);
        snprintf(name, sizeof name, "reduce.%s.bwd.accum%d.%s.%zux%zu", op, accum, dtype_name(dt), R, C);
        expect(name, dgx, rdx, n, dt);
        free(rdx);
        dfree(dgx);
    }
    free(g); free(gx0);
    dfree(dg);
}

/* n = 0 (or R = 0) launches nothing and touches no pointer */
static void test_empty(DType dt)
{
    char name[64];
    add_forward_cuda(NULL, NULL, NULL, dt, 0, 0);
    act_backward_cuda(ACT_GELU, NULL, NULL, NULL, NULL, dt, 0, 1, 0);
    cast_cuda(NULL, dt, NULL, DT_F32, 0, 0, 0);
    fill_cuda(NULL, dt, 1.0f, 0, 0);
    bias_add_forward_cuda(NULL, NULL, NULL, dt, 0, 5, 0);
    reduce_sum_backward_cuda(NULL, dt, NULL, 1.0f, 0, 5, 0, 0);
    reduce_sum_forward_cuda(NULL, NULL, dt, 1.0f, 0, 5, 0);
    cudaError_t e = cudaDeviceSynchronize();
    snprintf(name, sizeof name, "empty.noop.%s", dtype_name(dt));
    check_true(name, e == cudaSuccess, "%s", cudaGetErrorString(e));
}

int main(void)
{
    gpu_require();
    check_seed(777);
    static const size_t shapes[][2] = {{1, 1}, {3, 5}, {64, 768}, {1, 100000}, {4097, 3},
                                       {5000, 1500}, {8192, 129}, {4096, 1024}};
    static const size_t rshapes[][2] = {{1, 1}, {3, 5}, {64, 768}, {1, 100000}, {4097, 3},
                                        {5000, 1500}, {300, 70000}, {1, 10000000}};
    for (int t = 0; t < 3; t++) {
        DType dt = gpu_float_types[t];
        for (size_t s = 0; s < NSIZES; s++) {
            size_t n = SIZES[s];
            test_add(dt, n, 0);
            test_scale(dt, n, 0);
            test_scale(dt, n, 1);
            test_mul(dt, n);
            for (int k = ACT_RELU; k <= ACT_TANH; k++) {
                test_act(dt, (ActKind)k, n, 0);
                test_act(dt, (ActKind)k, n, 1);
            }
            test_fill(dt, n);
        }
        test_add(dt, 1000, 1);
        test_add(dt, 9, 1);
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            test_bias(dt, shapes[s][0], shapes[s][1]);
        test_bias_unaligned(dt, 33, 17);
        for (size_t s = 0; s < sizeof rshapes / sizeof rshapes[0]; s++)
            for (int mean = 0; mean <= 1; mean++)
                test_reduce(dt, rshapes[s][0], rshapes[s][1], mean);
        test_empty(dt);
    }
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            for (size_t s = 0; s < NSIZES; s++) {
                test_cast(gpu_float_types[i], gpu_float_types[j], SIZES[s], 0);
                test_cast(gpu_float_types[i], gpu_float_types[j], SIZES[s], 1);
            }
    return check_summary();
}
