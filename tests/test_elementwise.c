/* test_elementwise.c — CPU references of ops/elementwise.h and ops/reduce.h
 * against float64 math.
 *
 * Forward: each output against the same formula evaluated in double.
 * Backward: each gradient against (1) the analytic derivative in double and
 * (2) central finite differences of L = sum(dy * f(x)) computed in double
 * (dy fixed and random). For elementwise ops dL/dx_i only involves term i, so
 * the difference is taken per element; for bias and reduce the whole L (or
 * the affected row) is re-evaluated. `accum` = 1 is checked by preloading a
 * random gradient and expecting it plus the new one.
 *
 * Shape letters: n elements; R rows, C columns (last dim).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/elementwise.h"
#include "ops/normal_f32.h"
#include "ops/reduce.h"
#include "check.h"

/* finite-difference step (in double) and tolerances against it */
#define FD_H 1e-4
#define FD_ATOL 1e-5
#define FD_RTOL 1e-4

static float *rnd(size_t n, float lo, float hi)
{
    float *p = malloc((n ? n : 1) * sizeof(float));
    check_fill(p, n, lo, hi);
    return p;
}
/* an output buffer poisoned with NaN: an element the op forgot to write fails */
static float *fbuf(size_t n)
{
    size_t m = n ? n : 1;
    float *p = malloc(m * sizeof(float));
    for (size_t i = 0; i < m; i++) p[i] = NAN;
    return p;
}
static double *dbuf(size_t n) { return malloc((n ? n : 1) * sizeof(double)); }
static float *copy(const float *src, size_t n)
{
    float *p = fbuf(n);
    memcpy(p, src, n * sizeof(float));
    return p;
}
/* f32 -> f64 so an f32 gradient can be compared with check_close_f64 */
static double *widen(const float *src, size_t n)
{
    double *p = dbuf(n);
    for (size_t i = 0; i < n; i++) p[i] = src[i];
    return p;
}

/* ---- double-precision forwards ---- */
static double relu_d(double x) { return x > 0 ? x : 0; }
static double gelu_d(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }
static double tanh_d(double x) { return tanh(x); }
static double gelu_grad_d(double x)
{
    double Phi = 0.5 * (1.0 + erf(x / sqrt(2.0)));
    double phi = exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
    return Phi + x * phi;
}

/* per-element central difference of L = sum_i dy_i f(x_i) */
static void fd_elementwise(double *g, double (*f)(double), const float *dy, const float *x,
                           size_t n)
{
    for (size_t i = 0; i < n; i++)
        g[i] = dy[i] * (f((double)x[i] + FD_H) - f((double)x[i] - FD_H)) / (2 * FD_H);
}

/* ---- add and scale ---- */

static void test_add(size_t n)
{
    char name[64];
    float *a = rnd(n, -2, 2), *b = rnd(n, -2, 2), *y = fbuf(n), *ref = fbuf(n);
    add_forward_cpu(y, a, b, n);
    for (size_t i = 0; i < n; i++) ref[i] = (float)((double)a[i] + b[i]);
    snprintf(name, sizeof name, "add.fwd.n%zu", n);
    check_close(name, y, ref, n, 0, 1e-7);

    /* backward of y = a + b: da = dy (scale 1); FD of L = sum dy (a + b) in a */
    float *dy = rnd(n, -1, 1), *da = fbuf(n);
    double *fd = dbuf(n);
    scale_forward_cpu(da, dy, 1.0f, n, 0);
    for (size_t i = 0; i < n; i++)
        fd[i] = dy[i] * (((double)a[i] + FD_H + b[i]) - ((double)a[i] - FD_H + b[i])) / (2 * FD_H);
    double *g = widen(da, n);
    snprintf(name, sizeof name, "add.bwd.fd.n%zu", n);
    check_close_f64(name, g, fd, n, FD_ATOL, FD_RTOL);
    free(a); free(b); free(y); free(ref); free(dy); free(da); free(fd); free(g);
}

static void test_scale(size_t n, int accum)
{
    char name[64];
    const float alpha = 0.37f;
    float *x = rnd(n, -2, 2), *y0 = rnd(n, -1, 1), *y = copy(y0, n), *ref = fbuf(n);
    scale_forward_cpu(y, x, alpha, n, accum);
    for (size_t i = 0; i < n; i++)
        ref[i] = (float)((accum ? (double)y0[i] : 0.0) + (double)alpha * x[i]);
    snprintf(name, sizeof name, "scale.fwd.accum%d.n%zu", accum, n);
    check_close(name, y, ref, n, 1e-6, 1e-6);

    /* backward of y = alpha x: dx (+)= alpha dy, which is scale itself */
    float *dy = rnd(n, -1, 1), *dx = copy(y0, n);
    double *fd = dbuf(n);
    scale_forward_cpu(dx, dy, alpha, n, accum);
    for (size_t i = 0; i < n; i++)
        fd[i] = (accum ? (double)y0[i] : 0.0) +
                dy[i] * ((double)alpha * (x[i] + FD_H) - (double)alpha * (x[i] - FD_H)) / (2 * FD_H);
    double *g = widen(dx, n);
    snprintf(name, sizeof name, "scale.bwd.fd.accum%d.n%zu", accum, n);
    check_close_f64(name, g, fd, n, FD_ATOL, FD_RTOL);
    free(x); free(y0); free(y); free(ref); free(dy); free(dx); free(fd); free(g);
}

/* ---- mul ---- */

static void test_mul(size_t n)
{
    char name[80];
    float *a = rnd(n, -2, 2), *b = rnd(n, -2, 2), *y = fbuf(n), *ref = fbuf(n);
    mul_forward_cpu(y, a, b, n);
    for (size_t i = 0; i < n; i++) ref[i] = (float)((double)a[i] * b[i]);
    snprintf(name, sizeof name, "mul.fwd.n%zu", n);
    check_close(name, y, ref, n, 0, 1e-7);

    float *dy = rnd(n, -1, 1), *ga0 = rnd(n, -1, 1), *gb0 = rnd(n, -1, 1);
    float *ra = fbuf(n), *rb = fbuf(n);
    double *fda = dbuf(n), *fdb = dbuf(n);
    for (int acc_a = 0; acc_a <= 1; acc_a++)
        for (int acc_b = 0; acc_b <= 1; acc_b++)
            for (int which = 0; which < 3; which++) { /* 0 both, 1 da only, 2 db only */
                float *da = which == 2 ? NULL : copy(ga0, n);
                float *db = which == 1 ? NULL : copy(gb0, n);
                mul_backward_cpu(da, db, dy, a, b, n, acc_a, acc_b);
                for (size_t i = 0; i < n; i++) {
                    double pa = acc_a ? ga0[i] : 0.0, pb = acc_b ? gb0[i] : 0.0;
                    ra[i] = (float)(pa + (double)dy[i] * b[i]);
                    rb[i] = (float)(pb + (double)dy[i] * a[i]);
                    fda[i] = pa + dy[i] * (((double)a[i] + FD_H) * b[i] -
                                           ((double)a[i] - FD_H) * b[i]) / (2 * FD_H);
                    fdb[i] = pb + dy[i] * ((double)a[i] * ((double)b[i] + FD_H) -
                                           (double)a[i] * ((double)b[i] - FD_H)) / (2 * FD_H);
                }
                const char *tag = which == 0 ? "both" : which == 1 ? "da_only" : "db_only";
                if (da) {
                    double *g = widen(da, n);
                    snprintf(name, sizeof name, "mul.bwd.da.%s.acc%d%d.n%zu", tag, acc_a, acc_b, n);
                    check_close(name, da, ra, n, 1e-6, 1e-6);
                    snprintf(name, sizeof name, "mul.bwd.da.fd.%s.acc%d%d.n%zu", tag, acc_a, acc_b, n);
                    check_close_f64(name, g, fda, n, FD_ATOL, FD_RTOL);
                    free(g);
                }
                if (db) {
                    double *g = widen(db, n);
                    snprintf(name, sizeof name, "mul.bwd.db.%s.acc%d%d.n%zu", tag, acc_a, acc_b, n);
                    check_close(name, db, rb, n, 1e-6, 1e-6);
                    snprintf(name, sizeof name, "mul.bwd.db.fd.%s.acc%d%d.n%zu", tag, acc_a, acc_b, n);
                    check_close_f64(name, g, fdb, n, FD_ATOL, FD_RTOL);
                    free(g);
                }
                free(da);
                free(db);
            }
    free(a); free(b); free(y); free(ref); free(dy); free(ga0); free(gb0);
    free(ra); free(rb); free(fda); free(fdb);
}

/* ---- bias-add ---- */

/* L = sum_{r,c} dy[r,c] (x[r,c] + b[c]) in double, with b[j] moved by delta */
static double bias_loss(const float *dy, const float *x, const float *b, size_t R, size_t C,
                        size_t j, double delta)
{
    double L = 0;
    for (size_t r = 0; r < R; r++)
        for (size_t c = 0; c < C; c++)
            L += dy[r * C + c] * ((double)x[r * C + c] + b[c] + (c == j ? delta : 0.0));
    return L;
}

static void test_bias(size_t R, size_t C, int accum)
{
    char name[80];
    size_t n = R * C;
    float *x = rnd(n, -2, 2), *b = rnd(C, -1, 1), *y = fbuf(n), *ref = fbuf(n);
    bias_add_forward_cpu(y, x, b, R, C);
    for (size_t r = 0; r < R; r++)
        for (size_t c = 0; c < C; c++) ref[r * C + c] = (float)((double)x[r * C + c] + b[c]);
    snprintf(name, sizeof name, "bias_add.fwd.%zux%zu", R, C);
    check_close(name, y, ref, n, 0, 1e-7);

    float *dy = rnd(n, -1, 1), *db0 = rnd(C, -1, 1), *db = copy(db0, C), *rdb = fbuf(C);
    double *fd = dbuf(C);
    bias_backward_cpu(db, dy, R, C, accum);
    for (size_t c = 0; c < C; c++) {
        double s = accum ? db0[c] : 0.0;
        for (size_t r = 0; r < R; r++) s += dy[r * C + c];
        rdb[c] = (float)s;
        fd[c] = (accum ? db0[c] : 0.0) + (bias_loss(dy, x, b, R, C, c, FD_H) -
                                          bias_loss(dy, x, b, R, C, c, -FD_H)) / (2 * FD_H);
    }
    double *g = widen(db, C);
    snprintf(name, sizeof name, "bias.bwd.accum%d.%zux%zu", accum, R, C);
    check_close(name, db, rdb, C, 1e-6, 1e-6);
    snprintf(name, sizeof name, "bias.bwd.fd.accum%d.%zux%zu", accum, R, C);
    check_close_f64(name, g, fd, C, FD_ATOL, FD_RTOL);
    free(x); free(b); free(y); free(ref); free(dy); free(db0); free(db); free(rdb);
    free(fd); free(g);
}

/* ---- activations ---- */

static void test_act(ActKind k, size_t n, int accum)
{
    static const char *names[] = {"relu", "gelu", "tanh"};
    double (*f)(double) = k == ACT_RELU ? relu_d : k == ACT_GELU ? gelu_d : tanh_d;
    char name[80];
    float *x = rnd(n, -4, 4), *y = fbuf(n), *ref = fbuf(n);
    if (k == ACT_RELU) /* keep clear of the kink so FD never straddles it */
        for (size_t i = 0; i < n; i++)
            if (fabsf(x[i]) < 1e-3f) x[i] = 0.5f;
    act_forward_cpu(k, y, x, n);
    for (size_t i = 0; i < n; i++) ref[i] = (float)f(x[i]);
    snprintf(name, sizeof name, "%s.fwd.n%zu", names[k], n);
    check_close(name, y, ref, n, 1e-7, 1e-6);

    float *dy = rnd(n, -1, 1), *dx0 = rnd(n, -1, 1), *dx = copy(dx0, n), *rdx = fbuf(n);
    double *fd = dbuf(n);
    /* tanh reads y, the others x; pass only the one that is read */
    act_backward_cpu(k, dx, dy, k == ACT_TANH ? NULL : x, k == ACT_TANH ? y : NULL, n, accum);
    fd_elementwise(fd, f, dy, x, n);
    for (size_t i = 0; i < n; i++) {
        double xi = x[i];
        double d = k == ACT_RELU ? (xi > 0 ? 1.0 : 0.0)
                 : k == ACT_GELU ? gelu_grad_d(xi)
                                 : 1.0 - tanh(xi) * tanh(xi);
        double base = accum ? dx0[i] : 0.0;
        rdx[i] = (float)(base + dy[i] * d);
        fd[i] += base;
    }
    double *g = widen(dx, n);
    snprintf(name, sizeof name, "%s.bwd.accum%d.n%zu", names[k], accum, n);
    check_close(name, dx, rdx, n, 1e-6, 1e-5);
    snprintf(name, sizeof name, "%s.bwd.fd.accum%d.n%zu", names[k], accum, n);
    check_close_f64(name, g, fd, n, FD_ATOL, FD_RTOL);
    free(x); free(y); free(ref); free(dy); free(dx0); free(dx); free(rdx); free(fd); free(g);
}

/* ---- reduce sum / mean ---- */

static double row_sum_d(const float *row, size_t C, size_t j, double delta)
{
    double s = 0;
    for (size_t c = 0; c < C; c++) s += (double)row[c] + (c == j ? delta : 0.0);
    return s;
}

static void test_reduce(size_t R, size_t C, int mean, int accum)
{
    const char *op = mean ? "mean" : "sum";
    char name[80];
    size_t n = R * C;
    float scale = mean ? 1.0f / (float)C : 1.0f;
    float *x = rnd(n, -1, 1), *y = fbuf(R), *ref = fbuf(R);
    reduce_sum_forward_cpu(y, x, scale, R, C);
    for (size_t r = 0; r < R; r++) ref[r] = (float)(row_sum_d(x + r * C, C, C, 0) / (mean ? (double)C : 1.0));
    snprintf(name, sizeof name, "reduce.%s.fwd.%zux%zu", op, R, C);
    check_close(name, y, ref, R, 1e-6, 1e-6);

    float *dy = rnd(R, -1, 1), *dx0 = rnd(n, -1, 1), *dx = copy(dx0, n), *rdx = fbuf(n);
    reduce_sum_backward_cpu(dx, dy, scale, R, C, accum);
    for (size_t i = 0; i < n; i++)
        rdx[i] = (float)((accum ? dx0[i] : 0.0) + (double)dy[i / C] / (mean ? (double)C : 1.0));
    snprintf(name, sizeof name, "reduce.%s.bwd.accum%d.%zux%zu", op, accum, R, C);
    check_close(name, dx, rdx, n, 1e-6, 1e-6);

    /* FD of L = sum_r dy[r] y[r]; moving x[r,c] changes row r only */
    if (n * C <= 20000000) {
        double *fd = dbuf(n), *g = widen(dx, n);
        double sc = mean ? 1.0 / (double)C : 1.0;
        for (size_t r = 0; r < R; r++)
            for (size_t c = 0; c < C; c++) {
                double up = row_sum_d(x + r * C, C, c, FD_H), dn = row_sum_d(x + r * C, C, c, -FD_H);
                fd[r * C + c] = (accum ? dx0[r * C + c] : 0.0) + dy[r] * sc * (up - dn) / (2 * FD_H);
            }
        snprintf(name, sizeof name, "reduce.%s.bwd.fd.accum%d.%zux%zu", op, accum, R, C);
        check_close_f64(name, g, fd, n, FD_ATOL, FD_RTOL);
        free(fd);
        free(g);
    }
    free(x); free(y); free(ref); free(dy); free(dx0); free(dx); free(rdx);
}

/* ops/normal_f32.h, the GPU GELU's Phi and phi (here with libm's expf in
 * place of the device's __expf), against double erfc / exp: relative error
 * of both within 2e-5 for |x| <= 8 and of Phi within 1e-4 down to 1e-30 (the
 * left tail, where 1 + erf would have lost every digit); GELU's derivative
 * Phi + x phi within 1e-6 absolute (it crosses zero near x = -0.75). */
static void test_normal_f32(void)
{
    double wc = 0, wp = 0, wt = 0, wd = 0;
    for (double x = -13.0; x <= 8.0; x += 1e-4) {
        const float xf = (float)x;
        float pdf;
        const float c = normal_f32_cdf(xf, &pdf);
        const double C = 0.5 * erfc(-(double)xf * M_SQRT1_2);
        const double P = exp(-0.5 * (double)xf * xf) / sqrt(2.0 * M_PI);
        if (C < 1e-30) continue;
        const double ec = fabs(c - C) / C;
        if (xf >= -8.0f) {
            wc = fmax(wc, ec);
            wp = fmax(wp, fabs(pdf - P) / P);
            wd = fmax(wd, fabs((double)c + (double)xf * pdf - (C + xf * P)));
        } else {
            wt = fmax(wt, ec);
        }
    }
    check_true("normal_f32.cdf |x|<=8", wc <= 2e-5, "worst relative error %.3g", wc);
    check_true("normal_f32.pdf |x|<=8", wp <= 2e-5, "worst relative error %.3g", wp);
    check_true("normal_f32.cdf left tail", wt <= 1e-4, "worst relative error %.3g", wt);
    check_true("normal_f32.gelu' |x|<=8", wd <= 1e-6, "worst absolute error %.3g", wd);
}

/* f32 to bf16 bits, round to nearest even (finite inputs) */
static uint16_t bf16_bits(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

/* Every finite bf16 input at least 2^-126 in magnitude (GELU of a subnormal
 * rounds where the ulp is denormal): GELU x Phi(x) from normal_f32.h rounded
 * to bf16 equals the exact value (double erfc) rounded to f32 then to bf16,
 * the bits a bf16 GELU layer writes (ops/normal_f32.h's claim for its fit;
 * here with libm's exp2f in place of the device's ex2). */
static void test_normal_f32_bf16(void)
{
    long n = 0, bad = 0;
    float worst_x = 0.0f;
    for (uint32_t b = 0; b < 65536; b++) {
        const uint32_t u = b << 16;
        float x;
        memcpy(&x, &u, sizeof x);
        if (!isfinite(x) || fabsf(x) < 0x1p-126f) continue;
        n++;
        const double exact = (double)x * 0.5 * erfc(-(double)x * M_SQRT1_2);
        if (bf16_bits(normal_f32_gelu(x)) != bf16_bits((float)exact)) {
            bad++;
            worst_x = x;
        }
    }
    check_true("normal_f32.gelu rounded to bf16 = the exact GELU's bf16, every input", bad == 0,
               "%ld of %ld bf16 inputs differ (one: x = %g)", bad, n, (double)worst_x);
}

int main(void)
{
    check_seed(20240601);
    test_normal_f32();
    test_normal_f32_bf16();
    static const size_t sizes[] = {1, 7, 1000, 70001};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        test_add(n);
        test_scale(n, 0);
        test_scale(n, 1);
        test_mul(n);
        for (int k = ACT_RELU; k <= ACT_TANH; k++) {
            test_act((ActKind)k, n, 0);
            test_act((ActKind)k, n, 1);
        }
    }

    static const size_t shapes[][2] = {{1, 1}, {1, 7}, {3, 5}, {7, 33}, {64, 100}, {200, 3},
                                       {1, 1000}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int accum = 0; accum <= 1; accum++) test_bias(shapes[s][0], shapes[s][1], accum);

    static const size_t rshapes[][2] = {{1, 1}, {1, 7}, {3, 5}, {4, 1000}, {64, 77},
                                        {1000, 3}, {1, 100000}};
    for (size_t s = 0; s < sizeof rshapes / sizeof rshapes[0]; s++)
        for (int mean = 0; mean <= 1; mean++)
            for (int accum = 0; accum <= 1; accum++)
                test_reduce(rshapes[s][0], rshapes[s][1], mean, accum);

    /* n = 0 is a no-op (nothing is read or written) */
    add_forward_cpu(NULL, NULL, NULL, 0);
    act_backward_cpu(ACT_GELU, NULL, NULL, NULL, NULL, 0, 1);
    bias_backward_cpu(NULL, NULL, 0, 0, 0);
    check_true("empty.noop", 1, NULL);
    return check_summary();
}
