/* test_conv2d.c — the CPU convolution of ops/conv2d.h and the tensor op.
 *
 * Shape letters: N batch, H W input size, C input channels, K filters,
 * R S filter size, P Q output size. x [N,H,W,C], w [K,R,S,C], y [N,P,Q,K].
 *
 *   - forward against a direct convolution in double (the definition in
 *     conv2d.h, looped literally);
 *   - backward data and backward filter (accum 0 over a NaN-filled output,
 *     accum 1 over random values) against central finite differences in
 *     double of L(x, w) = sum g * conv(x, w), on the shapes ResNet uses
 *     (1x1, 3x3 stride 1 and 2, the 7x7 stride-2 stem), dilation, non-square
 *     images and parameters, a 1x1 stride-2 downsample, windows hanging
 *     over the padding;
 *   - a batch large enough to need several im2col chunks, against direct
 *     double forward and adjoint loops;
 *   - the tensor op through autograd (op_conv2d -> op_mul -> op_sum) with an
 *     OHWI registry weight: gradients match finite differences, parameter
 *     gradients accumulate, memory returns after backward, bf16 autocast
 *     stays close to f32;
 *   - an empty output and a weight of the wrong channel count are refused
 *     with a clear message (in a child process).
 *
 * Tolerances: the f32 references accumulate at most a few hundred products
 * of values in [-1, 1) here (~1e-6 error); atol 2e-5 + rtol 1e-4 catches any
 * wrong index (an O(1) error). L is linear in x and in w, so central
 * differences in double are exact up to double rounding (~1e-12).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/autograd.h"
#include "engine/params.h"
#include "ops/conv2d.h"
#include "ops/ops.h"
#include "check.h"

/* ---- the definition, in double ---- */

static size_t nx_of(const Conv2dShape *s) { return (size_t)s->N * s->H * s->W * s->C; }
static size_t nw_of(const Conv2dShape *s) { return (size_t)s->K * s->R * s->S * s->C; }
static size_t ny_of(const Conv2dShape *s) { return (size_t)s->N * s->P * s->Q * s->K; }

/* Calls f(n, p, q, k, xi, wi) for every product x[xi] * w[wi] of y[n,p,q,k]. */
#define CONV_FOR_EACH_PRODUCT(s, BODY)                                                        \
    for (int n = 0; n < (s)->N; n++)                                                          \
        for (int p = 0; p < (s)->P; p++)                                                      \
            for (int q = 0; q < (s)->Q; q++)                                                  \
                for (int k = 0; k < (s)->K; k++) {                                            \
                    size_t yi = (((size_t)n * (s)->P + p) * (s)->Q + q) * (s)->K + k;         \
                    for (int r = 0; r < (s)->R; r++) {                                        \
                        int h = p * (s)->stride_h - (s)->pad_h + r * (s)->dil_h;              \
                        if (h < 0 || h >= (s)->H) continue;                                   \
                        for (int t = 0; t < (s)->S; t++) {                                    \
                            int w_ = q * (s)->stride_w - (s)->pad_w + t * (s)->dil_w;         \
                            if (w_ < 0 || w_ >= (s)->W) continue;                             \
                            for (int c = 0; c < (s)->C; c++) {                                \
                                size_t xi = (((size_t)n * (s)->H + h) * (s)->W + w_) * (s)->C + c; \
                                size_t wi = (((size_t)k * (s)->R + r) * (s)->S + t) * (s)->C + c; \
                                BODY;                                                         \
                            }                                                                 \
                        }                                                                     \
                    }                                                                         \
                }

static void ref_forward(double *y, const double *x, const double *w, const Conv2dShape *s)
{
    memset(y, 0, ny_of(s) * sizeof(double));
    CONV_FOR_EACH_PRODUCT(s, y[yi] += x[xi] * w[wi]);
}

/* The adjoint, looped directly: dx[xi] += dy[yi] w[wi], dw[wi] += dy[yi] x[xi]. */
static void ref_backward(double *dx, double *dw, const double *dy, const double *x,
                         const double *w, const Conv2dShape *s)
{
    memset(dx, 0, nx_of(s) * sizeof(double));
    memset(dw, 0, nw_of(s) * sizeof(double));
    CONV_FOR_EACH_PRODUCT(s, { dx[xi] += dy[yi] * w[wi]; dw[wi] += dy[yi] * x[xi]; });
}

/* L = sum g * conv(x, w) */
static double ref_loss(const double *x, const double *w, const double *g, const Conv2dShape *s)
{
    double L = 0;
    CONV_FOR_EACH_PRODUCT(s, L += g[yi] * x[xi] * w[wi]);
    return L;
}

/* dL/dv for every element of v (x or w) by central differences. */
static void fd_grad(double *out, double *v, size_t n, const double *x, const double *w,
                    const double *g, const Conv2dShape *s)
{
    const double eps = 1e-3;
    for (size_t i = 0; i < n; i++) {
        double keep = v[i];
        v[i] = keep + eps; double lp = ref_loss(x, w, g, s);
        v[i] = keep - eps; double lm = ref_loss(x, w, g, s);
        v[i] = keep;
        out[i] = (lp - lm) / (2 * eps);
    }
}

static float *frand(size_t n)
{
    float *p = malloc(n * sizeof(float));
    check_fill(p, n, -1.0f, 1.0f);
    return p;
}
static double *to_f64(const float *p, size_t n)
{
    double *d = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) d[i] = p[i];
    return d;
}
static double *f64_of(const float *p, size_t n, double *d)
{
    for (size_t i = 0; i < n; i++) d[i] = p[i];
    return d;
}

/* ---- kernel-level cases ---- */

static void run_case(const char *tag, Conv2dShape s)
{
    char name[128];
    size_t nx = nx_of(&s), nw = nw_of(&s), ny = ny_of(&s);
    float *x = frand(nx), *w = frand(nw), *g = frand(ny);
    float *dx0 = frand(nx), *dw0 = frand(nw);
    double *xd = to_f64(x, nx), *wd = to_f64(w, nw), *gd = to_f64(g, ny);
    size_t nmax = nx > ny ? nx : ny;
    if (nw > nmax) nmax = nw;
    double *yref = malloc(ny * sizeof(double)), *got = malloc(nmax * sizeof(double));
    double *fdx = malloc(nx * sizeof(double)), *fdw = malloc(nw * sizeof(double));
    double *want = malloc((nx > nw ? nx : nw) * sizeof(double));
    float *y = malloc(ny * sizeof(float)), *dx = malloc(nx * sizeof(float));
    float *dw = malloc(nw * sizeof(float));

    ref_forward(yref, xd, wd, &s);
    for (size_t i = 0; i < ny; i++) y[i] = NAN;
    conv2d_forward_cpu(y, x, w, &s);
    snprintf(name, sizeof name, "conv2d.fwd.%s", tag);
    check_close_f64(name, f64_of(y, ny, got), yref, ny, 2e-5, 1e-4);

    fd_grad(fdx, xd, nx, xd, wd, gd, &s);
    fd_grad(fdw, wd, nw, xd, wd, gd, &s);
    for (int accum = 0; accum < 2; accum++) {
        for (size_t i = 0; i < nx; i++) dx[i] = accum ? dx0[i] : NAN;
        conv2d_backward_data_cpu(dx, g, w, &s, accum);
        for (size_t i = 0; i < nx; i++) want[i] = fdx[i] + (accum ? dx0[i] : 0.0);
        snprintf(name, sizeof name, "conv2d.dx.accum%d.%s", accum, tag);
        check_close_f64(name, f64_of(dx, nx, got), want, nx, 2e-5, 1e-4);

        for (size_t i = 0; i < nw; i++) dw[i] = accum ? dw0[i] : NAN;
        conv2d_backward_filter_cpu(dw, g, x, &s, accum);
        for (size_t i = 0; i < nw; i++) want[i] = fdw[i] + (accum ? dw0[i] : 0.0);
        snprintf(name, sizeof name, "conv2d.dw.accum%d.%s", accum, tag);
        check_close_f64(name, f64_of(dw, nw, got), want, nw, 2e-5, 1e-4);
    }
    free(x); free(w); free(g); free(dx0); free(dw0); free(xd); free(wd); free(gd);
    free(yref); free(got); free(fdx); free(fdw); free(want); free(y); free(dx); free(dw);
}

/* 7 images of 400x400x3 with a 3x3 filter: 17 MB of im2col per image, so
 * the 64 MiB budget takes 3 images per chunk (3 + 3 + 1). */
static void test_chunks(void)
{
    Conv2dShape s = conv2d_shape(7, 400, 400, 3, 2, 3, 3, 1, 1, 1, 1, 1, 1);
    size_t nx = nx_of(&s), nw = nw_of(&s), ny = ny_of(&s);
    float *x = frand(nx), *w = frand(nw), *g = frand(ny), *dw0 = frand(nw);
    double *xd = to_f64(x, nx), *wd = to_f64(w, nw), *gd = to_f64(g, ny);
    double *ry = malloc(ny * sizeof(double)), *rdx = malloc(nx * sizeof(double));
    double *rdw = malloc(nw * sizeof(double));
    float *y = malloc(ny * sizeof(float)), *dx = malloc(nx * sizeof(float));
    float *dw = malloc(nw * sizeof(float)), *fy = calloc(ny, sizeof(float));
    float *fdx = calloc(nx, sizeof(float)), *fdw = calloc(nw, sizeof(float));
    ref_forward(ry, xd, wd, &s);
    ref_backward(rdx, rdw, gd, xd, wd, &s);
    for (size_t i = 0; i < ny; i++) fy[i] = (float)ry[i];
    for (size_t i = 0; i < nx; i++) fdx[i] = (float)rdx[i];
    for (size_t i = 0; i < nw; i++) fdw[i] = (float)(rdw[i] + dw0[i]);

    conv2d_forward_cpu(y, x, w, &s);
    check_close("conv2d.chunked.fwd", y, fy, ny, 2e-5, 1e-4);
    for (size_t i = 0; i < nx; i++) dx[i] = NAN;
    conv2d_backward_data_cpu(dx, g, w, &s, 0);
    check_close("conv2d.chunked.dx", dx, fdx, nx, 2e-5, 1e-4);
    /* dw sums 1.1M products per element: compare by norm (a lost chunk is
     * off by >= 1/7) and elementwise with a tolerance for f32 summation */
    for (size_t i = 0; i < nw; i++) dw[i] = NAN;
    conv2d_backward_filter_cpu(dw, g, x, &s, 0);
    for (size_t i = 0; i < nw; i++) dw[i] += dw0[i];
    check_rel_norm("conv2d.chunked.dw.accum0", dw, fdw, nw, 1e-5);
    memcpy(dw, dw0, nw * sizeof(float));
    conv2d_backward_filter_cpu(dw, g, x, &s, 1);
    check_rel_norm("conv2d.chunked.dw.accum1", dw, fdw, nw, 1e-5);
    check_close("conv2d.chunked.dw.accum1.elements", dw, fdw, nw, 1e-2, 1e-4);
    free(x); free(w); free(g); free(dw0); free(xd); free(wd); free(gd); free(ry); free(rdx);
    free(rdw); free(y); free(dx); free(dw); free(fy); free(fdx); free(fdw);
}

/* ---- the tensor op through autograd ---- */

typedef struct {
    int sh, sw, ph, pw, dh, dw;
} ConvParams;

/* loss = sum(conv(x, w) * g) through the tape; returns the loss */
static float op_loss(Ctx *c, Tensor *x, Tensor *w, Tensor *g, ConvParams cp, int backward,
                     DType *ydt)
{
    Tensor *y = op_conv2d_ex(c, x, w, cp.sh, cp.sw, cp.ph, cp.pw, cp.dh, cp.dw);
    if (ydt) *ydt = y->dtype;
    Tensor *gl = g;
    if (g->dtype != y->dtype) {
        int gm = ad_set_grad(c, 0);
        gl = op_cast(c, g, y->dtype);
        ad_set_grad(c, gm);
    }
    Tensor *yg = op_mul(c, y, gl);
    Tensor *loss = op_sum(c, yg);
    float v;
    tensor_to_f32(&v, loss);
    tensor_release(y);
    tensor_release(yg);
    if (gl != g) tensor_release(gl);
    if (backward) ad_backward(c, loss, 1.0f);
    else ad_tape_clear(c);
    tensor_release(loss);
    return v;
}

static void test_op(void)
{
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 11);
    const int N = 2, H = 7, W = 6, C = 3, K = 4, R = 3, S = 3;
    ConvParams cp = {2, 1, 1, 1, 1, 1};
    ParamSet ps;
    params_init(&ps);
    params_add_layout(&ps, "conv1.weight", 4, (int64_t[]){K, C, R, S}, LAYOUT_OHWI, INIT_UNIFORM,
                      0.5f, 1);
    params_alloc(&ps, &c, 99);
    Tensor *w = params_get(&ps, "conv1.weight");
    check_true("op.weight_is_ohwi", w->ndim == 4 && w->shape[0] == K && w->shape[1] == R &&
               w->shape[2] == S && w->shape[3] == C,
               "registry weight shape [%lld, %lld, %lld, %lld]", (long long)w->shape[0],
               (long long)w->shape[1], (long long)w->shape[2], (long long)w->shape[3]);
    Conv2dShape s = conv2d_shape(N, H, W, C, K, R, S, cp.sh, cp.sw, cp.ph, cp.pw, cp.dh, cp.dw);
    size_t nx = nx_of(&s), nw = nw_of(&s), ny = ny_of(&s);
    float *xh = frand(nx), *gh = frand(ny);
    Tensor *x = tensor_from_f32(&c, xh, DT_F32, 4, (int64_t[]){N, H, W, C});
    x->requires_grad = 1;
    Tensor *g = tensor_from_f32(&c, gh, DT_F32, 4, (int64_t[]){N, s.P, s.Q, K});

    size_t base = c.mem.current;
    float L = op_loss(&c, x, w, g, cp, 1, NULL);
    double *xd = to_f64(xh, nx), *wd = to_f64((float *)w->data, nw), *gd = to_f64(gh, ny);
    double lref = ref_loss(xd, wd, gd, &s);
    check_close_f64("op.loss", (double[]){L}, &lref, 1, 1e-5, 1e-5);

    double *fdx = malloc(nx * sizeof(double)), *fdw = malloc(nw * sizeof(double));
    double *ax = calloc(nx, sizeof(double)), *aw = calloc(nw, sizeof(double));
    fd_grad(fdx, xd, nx, xd, wd, gd, &s);
    fd_grad(fdw, wd, nw, xd, wd, gd, &s);
    f64_of((float *)x->grad->data, nx, ax);
    f64_of((float *)w->grad->data, nw, aw);
    check_close_f64("op.dx_vs_fd", ax, fdx, nx, 2e-5, 1e-4);
    check_close_f64("op.dw_vs_fd", aw, fdw, nw, 2e-5, 1e-4);
    tensor_release(x->grad);
    x->grad = NULL;
    check_true("op.backward_frees_activations", c.mem.current == base,
               "%zu bytes held after backward (base %zu)", c.mem.current, base);

    /* a second backward without zeroing: the parameter gradient doubles */
    op_loss(&c, x, w, g, cp, 1, NULL);
    for (size_t i = 0; i < nw; i++) fdw[i] *= 2;
    check_close_f64("op.dw_accumulates", f64_of((float *)w->grad->data, nw, aw), fdw, nw, 4e-5,
                    1e-4);
    for (size_t i = 0; i < nw; i++) fdw[i] /= 2;
    tensor_release(x->grad);
    x->grad = NULL;

    /* weight frozen: only dx is computed (the input is then not saved) */
    params_zero_grad(&ps);
    w->requires_grad = 0;
    op_loss(&c, x, w, g, cp, 1, NULL);
    check_close_f64("op.frozen_weight.dx", f64_of((float *)x->grad->data, nx, ax), fdx, nx, 2e-5,
                    1e-4);
    float wmax = 0;
    for (size_t i = 0; i < nw; i++) wmax = fmaxf(wmax, fabsf(((float *)w->grad->data)[i]));
    check_true("op.frozen_weight.no_dw", wmax == 0.0f, "weight gradient written (%g)", wmax);
    w->requires_grad = 1;
    tensor_release(x->grad);
    x->grad = NULL;

    /* bf16 autocast: y in bf16, gradients in f32 close to the f32 ones */
    params_zero_grad(&ps);
    c.autocast = DT_BF16;
    DType ydt;
    op_loss(&c, x, w, g, cp, 1, &ydt);
    c.autocast = DT_F32;
    check_true("op.autocast.y_bf16", ydt == DT_BF16, "y is %s", dtype_name(ydt));
    check_true("op.autocast.dx_f32", x->grad->dtype == DT_F32, "dx is %s",
               dtype_name(x->grad->dtype));
    float *fx = calloc(nx, sizeof(float)), *fw = calloc(nw, sizeof(float));
    for (size_t i = 0; i < nx; i++) fx[i] = (float)fdx[i];
    for (size_t i = 0; i < nw; i++) fw[i] = (float)fdw[i];
    check_rel_norm("op.autocast.dx", (float *)x->grad->data, fx, nx, 2e-2);
    check_rel_norm("op.autocast.dw", (float *)w->grad->data, fw, nw, 2e-2);
    tensor_release(x->grad);
    x->grad = NULL;

    free(xh); free(gh); free(xd); free(wd); free(gd); free(fdx); free(fdw); free(ax); free(aw);
    free(fx); free(fw);
    tensor_release(x);
    tensor_release(g);
    params_free(&ps);
    ctx_free(&c);
}

/* ---- refusals ---- */

static void bad_shape(void) { conv2d_shape(1, 4, 4, 3, 8, 7, 7, 1, 1, 0, 0, 1, 1); }

static void bad_weight(void)
{
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    float v[72] = {1}; /* w needs 2*3*3*4 = 72 floats, x 48 */
    Tensor *x = tensor_from_f32(&c, v, DT_F32, 4, (int64_t[]){1, 4, 4, 3});
    Tensor *w = tensor_from_f32(&c, v, DT_F32, 4, (int64_t[]){2, 3, 3, 4});
    op_conv2d(&c, x, w, 1, 1, 1);
}

/* Run f in a child; it must exit with status 1 and print all of `want`. */
static void expect_refusal(const char *name, void (*f)(void), const char *want1,
                           const char *want2)
{
    int fds[2];
    if (pipe(fds) != 0) { check_true(name, 0, "pipe failed"); return; }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        f();
        _exit(0);
    }
    close(fds[1]);
    char buf[2048] = {0};
    size_t len = 0;
    ssize_t got;
    while (len < sizeof buf - 1 && (got = read(fds[0], buf + len, sizeof buf - 1 - len)) > 0)
        len += (size_t)got;
    close(fds[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    check_true(name, WIFEXITED(st) && WEXITSTATUS(st) == 1 && strstr(buf, want1) &&
               strstr(buf, want2), "status %d, message: %s", st, buf);
}

int main(void)
{
    check_seed(2024);
    /* conv2d_shape(N, H, W, C, K, R, S, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w) */
    run_case("1x1", conv2d_shape(2, 5, 6, 8, 7, 1, 1, 1, 1, 0, 0, 1, 1));
    run_case("3x3.pad1.s1", conv2d_shape(2, 7, 7, 3, 5, 3, 3, 1, 1, 1, 1, 1, 1));
    run_case("3x3.pad1.s2.nonsquare", conv2d_shape(2, 8, 7, 4, 6, 3, 3, 2, 2, 1, 1, 1, 1));
    run_case("7x7.pad3.s2.stem", conv2d_shape(2, 12, 12, 3, 4, 7, 7, 2, 2, 3, 3, 1, 1));
    run_case("3x3.dil2.pad2", conv2d_shape(2, 9, 10, 3, 4, 3, 3, 1, 1, 2, 2, 2, 2));
    run_case("3x2.s2x1.pad1x0.dil1x2", conv2d_shape(2, 9, 11, 3, 5, 3, 2, 2, 1, 1, 0, 1, 2));
    run_case("1x1.s2.downsample", conv2d_shape(2, 7, 8, 6, 5, 1, 1, 2, 2, 0, 0, 1, 1));
    run_case("2x2.pad1.s3", conv2d_shape(2, 6, 5, 2, 3, 2, 2, 3, 3, 1, 1, 1, 1));
    run_case("1x1.N1", conv2d_shape(1, 3, 1, 5, 2, 1, 1, 1, 1, 0, 0, 1, 1));
    test_chunks();
    test_op();
    expect_refusal("conv2d.refuses_empty_output", bad_shape, "does not fit", "hint:");
    expect_refusal("conv2d.refuses_channel_mismatch", bad_weight, "does not fit input",
                   "[2, 3, 3, 4]");
    return check_summary();
}
