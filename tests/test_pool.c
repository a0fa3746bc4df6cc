/* test_pool.c — max pool 2-D and global average pool on the CPU backend,
 * through the tensor ops and autograd, against float64 math:
 *   - max pool forward against the definition (padding is -inf), the saved
 *     winner indices against the first maximum in window order; shapes with
 *     overlapping windows (k3 s2 p1, as ResNet's stem: 112x112 -> 56x56,
 *     and odd sizes), k3 s1 p1, k2 s2 p0, k1;
 *   - ties (a constant image): every window picks its first position, and
 *     the gradient lands there; NaN wins its window;
 *   - gradients of L = sum(w * y) against central finite differences in
 *     double (max pool is piecewise linear: exact away from ties), twice
 *     without clearing (accum);
 *   - global average pool forward against double, backward against finite
 *     differences; f16 / bf16 storage;
 *   - bad pooling arguments are refused with a message (forked child).
 *
 * Shape letters: x [N, H, W, C], max pool output [N, P, Q, C], kernel k,
 * stride s, padding pad.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/autograd.h"
#include "engine/mem.h"
#include "ops/ops.h"
#include "ops/pool.h"
#include "check.h"

#define FD_H 1e-6

static float *rnd(size_t n, float lo, float hi)
{
    float *p = malloc((n ? n : 1) * sizeof(float));
    check_fill(p, n, lo, hi);
    return p;
}

/* ---- double references ---- */

/* max pool by the definition; idx = i k + j, the first maximum's place in its
 * window (strict >, window rows then columns); returns sum(w * y) when w is
 * given. */
static double maxpool_ref(double *y, int32_t *idx, const double *x, const double *w, int k,
                          int s, int pad, int N, int H, int W, int C)
{
    int P = (H + 2 * pad - k) / s + 1, Q = (W + 2 * pad - k) / s + 1;
    double L = 0;
    for (int n = 0; n < N; n++)
        for (int p = 0; p < P; p++)
            for (int q = 0; q < Q; q++)
                for (int c = 0; c < C; c++) {
                    double best = -INFINITY;
                    int32_t bi = -1;
                    for (int i = 0; i < k; i++)
                        for (int j = 0; j < k; j++) {
                            int h = p * s - pad + i, ww = q * s - pad + j;
                            if (h < 0 || h >= H || ww < 0 || ww >= W) continue; /* -inf */
                            double v = x[(((size_t)n * H + h) * W + ww) * C + c];
                            if (bi < 0 || v > best || isnan(v)) { best = v; bi = i * k + j; }
                        }
                    size_t o = (((size_t)n * P + p) * Q + q) * C + c;
                    if (y) y[o] = best;
                    if (idx) idx[o] = bi;
                    if (w) L += w[o] * best;
                }
    return L;
}

/* the kernels' code at o: u8 for k <= 16, else i32 (ops/pool.h) */
static int code_at(const void *code, size_t o, int k)
{
    return maxpool_code_bytes(k) == 1 ? ((const uint8_t *)code)[o] : ((const int32_t *)code)[o];
}

static double avgpool_ref(double *y, const double *x, const double *w, int N, int HW, int C)
{
    double L = 0;
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            double s = 0;
            for (int r = 0; r < HW; r++) s += x[((size_t)n * HW + r) * C + c];
            s /= HW;
            if (y) y[(size_t)n * C + c] = s;
            if (w) L += w[(size_t)n * C + c] * s;
        }
    return L;
}

static double *to_d(const float *p, size_t n)
{
    double *d = malloc((n ? n : 1) * sizeof(double));
    for (size_t i = 0; i < n; i++) d[i] = p[i];
    return d;
}

/* Forward + L = sum(w * y) + backward, `reps` times without clearing grads. */
static Tensor *pool_step(Ctx *c, Tensor *x, Tensor *w, int maxpool, int k, int s, int pad,
                         int reps, int keep_y)
{
    Tensor *keep = NULL;
    for (int r = 0; r < reps; r++) {
        Tensor *y = maxpool ? op_maxpool2d(c, x, k, s, pad) : op_avgpool_global(c, x);
        Tensor *p = op_mul(c, y, w), *loss = op_sum(c, p);
        ad_backward(c, loss, 1.0f);
        tensor_release(p); tensor_release(loss);
        if (keep_y && !keep) keep = y;
        else tensor_release(y);
    }
    return keep;
}

/* ---- max pool ---- */

static void test_maxpool(Ctx *c, int N, int H, int W, int C, int k, int s, int pad)
{
    char name[96], tag[64];
    snprintf(tag, sizeof tag, "%dx%dx%dx%d.k%ds%dp%d", N, H, W, C, k, s, pad);
    int P = pool_out_size(H, k, s, pad), Q = pool_out_size(W, k, s, pad);
    size_t n = (size_t)N * H * W * C, no = (size_t)N * P * Q * C, base = c->mem.current;
    float *x = rnd(n, -2, 2), *w = rnd(no, -1, 1);
    if (k == 16 && H >= 16 && W >= 16 && pad == 0)   /* code 255 at output (0, 0) */
        for (int ch = 0; ch < C; ch++) x[((size_t)15 * W + 15) * C + ch] = 3.0f;
    Tensor *tx = tensor_from_f32(c, x, DT_F32, 4, (int64_t[]){N, H, W, C});
    Tensor *tw = tensor_from_f32(c, w, DT_F32, 4, (int64_t[]){N, P, Q, C});
    tx->requires_grad = 1;
    Tensor *ty = pool_step(c, tx, tw, 1, k, s, pad, 2, 1);
    snprintf(name, sizeof name, "maxpool.shape.%s", tag);
    check_true(name, ty->shape[0] == N && ty->shape[1] == P && ty->shape[2] == Q &&
                         ty->shape[3] == C, "output [%lld, %lld, %lld, %lld]",
               (long long)ty->shape[0], (long long)ty->shape[1], (long long)ty->shape[2],
               (long long)ty->shape[3]);

    double *xd = to_d(x, n), *wd = to_d(w, no), *yd = malloc(no * sizeof(double));
    int32_t *ri = malloc(no * sizeof(int32_t)), *gi = malloc(no * sizeof(int32_t));
    maxpool_ref(yd, ri, xd, NULL, k, s, pad, N, H, W, C);
    float *got = malloc(no * sizeof(float));
    tensor_to_f32(got, ty);
    double *gotd = to_d(got, no);
    snprintf(name, sizeof name, "maxpool.fwd.%s", tag);
    check_close_f64(name, gotd, yd, no, 0, 0);
    /* the kernel-level indices agree with the first maximum */
    float *yk = malloc(no * sizeof(float));
    maxpool2d_forward_cpu(yk, gi, x, k, s, pad, N, H, W, C);
    snprintf(name, sizeof name, "maxpool.code.%s", tag);
    size_t bad = 0;
    for (size_t o = 0; o < no; o++) bad += code_at(gi, o, k) != ri[o];
    check_true(name, bad == 0, "%zu of %zu codes differ from the first maximum's place", bad,
               no);

    /* gradient (accumulated twice) against finite differences */
    /* every element of small inputs; an evenly spread sample of large ones
     * (each difference re-runs the whole pool) */
    double *num = malloc(n * sizeof(double)), *ana = malloc(n * sizeof(double));
    float *gx = malloc(n * sizeof(float));
    tensor_to_f32(gx, tx->grad);
    size_t step = n > 4000 ? n / 400 : 1, m = 0;
    for (size_t i = 0; i < n; i += step, m++) {
        double keep = xd[i];
        xd[i] = keep + FD_H;
        double lp = maxpool_ref(NULL, NULL, xd, wd, k, s, pad, N, H, W, C);
        xd[i] = keep - FD_H;
        double lm = maxpool_ref(NULL, NULL, xd, wd, k, s, pad, N, H, W, C);
        xd[i] = keep;
        num[m] = 2.0 * (lp - lm) / (2 * FD_H);
        ana[m] = gx[i];
    }
    snprintf(name, sizeof name, "maxpool.bwd.dx.twice.%s", tag);
    check_close_f64(name, ana, num, m, 1e-6, 1e-6);
    /* the full gradient against the kernel-level reference (gather) */
    float *gref = malloc(n * sizeof(float));
    float *dyk = malloc(no * sizeof(float));
    for (size_t o = 0; o < no; o++) dyk[o] = w[o];
    maxpool2d_backward_cpu(gref, dyk, gi, k, s, pad, N, H, W, C, 0);
    maxpool2d_backward_cpu(gref, dyk, gi, k, s, pad, N, H, W, C, 1);
    snprintf(name, sizeof name, "maxpool.bwd.dx.kernel_accum.%s", tag);
    check_close(name, gx, gref, n, 0, 0);
    free(gref); free(dyk);

    tensor_release(ty); tensor_release(tx); tensor_release(tw);
    snprintf(name, sizeof name, "maxpool.no_leak.%s", tag);
    check_true(name, c->mem.current == base, "%zu bytes held, base %zu", c->mem.current, base);
    free(x); free(w); free(xd); free(wd); free(yd); free(ri); free(gi); free(got); free(gotd);
    free(yk); free(num); free(ana); free(gx);
}

/* A constant image: every value ties. Each window takes its first (top-left
 * valid) position, and the gradient goes there only. */
static void test_maxpool_ties(Ctx *c)
{
    const int N = 1, H = 5, W = 6, C = 2, k = 3, s = 2, pad = 1;
    int P = pool_out_size(H, k, s, pad), Q = pool_out_size(W, k, s, pad);
    size_t n = (size_t)N * H * W * C, no = (size_t)N * P * Q * C;
    float *x = malloc(n * sizeof(float)), *w = rnd(no, -1, 1);
    for (size_t i = 0; i < n; i++) x[i] = 0.75f;
    int32_t *idx = malloc(no * sizeof(int32_t));
    float *y = malloc(no * sizeof(float));
    maxpool2d_forward_cpu(y, idx, x, k, s, pad, N, H, W, C);
    int ok = 1;
    double *ref = calloc(n, sizeof(double));
    for (int p = 0; p < P; p++)
        for (int q = 0; q < Q; q++)
            for (int ch = 0; ch < C; ch++) {
                int h = p * s - pad < 0 ? 0 : p * s - pad, ww = q * s - pad < 0 ? 0 : q * s - pad;
                size_t o = ((size_t)p * Q + q) * C + ch;
                if (code_at(idx, o, k) != (h - (p * s - pad)) * k + ww - (q * s - pad) ||
                    y[o] != 0.75f)
                    ok = 0;
                ref[((size_t)h * W + ww) * C + ch] += w[o];
            }
    check_true("maxpool.ties.first_in_window", ok, "a tie did not pick the window's first position");
    Tensor *tx = tensor_from_f32(c, x, DT_F32, 4, (int64_t[]){N, H, W, C});
    Tensor *tw = tensor_from_f32(c, w, DT_F32, 4, (int64_t[]){N, P, Q, C});
    tx->requires_grad = 1;
    pool_step(c, tx, tw, 1, k, s, pad, 1, 0);
    float *gx = malloc(n * sizeof(float));
    tensor_to_f32(gx, tx->grad);
    double *gd = to_d(gx, n);
    check_close_f64("maxpool.ties.grad_to_first", gd, ref, n, 1e-6, 1e-6);
    tensor_release(tx); tensor_release(tw);

    /* NaN wins its window (PyTorch propagates it) */
    x[((size_t)2 * W + 3) * C + 1] = NAN;
    maxpool2d_forward_cpu(y, idx, x, k, s, pad, N, H, W, C);
    int nan_ok = 1;
    for (int p = 0; p < P; p++)
        for (int q = 0; q < Q; q++) {
            int in_h = 2 >= p * s - pad && 2 < p * s - pad + k;
            int in_w = 3 >= q * s - pad && 3 < q * s - pad + k;
            size_t o = ((size_t)p * Q + q) * C + 1;
            if ((in_h && in_w) != (isnan(y[o]) != 0)) nan_ok = 0;
            if (in_h && in_w && code_at(idx, o, k) != (2 - (p * s - pad)) * k + 3 - (q * s - pad))
                nan_ok = 0;
            if (isnan(y[o - 1])) nan_ok = 0; /* channel 0 untouched */
        }
    check_true("maxpool.nan_wins", nan_ok, "NaN did not propagate to exactly its windows");
    free(x); free(w); free(idx); free(y); free(ref); free(gx); free(gd);
}

/* f16 / bf16: max pool copies values exactly (the max of the rounded inputs). */
static void test_maxpool_lowp(Ctx *c, DType dt)
{
    char name[64];
    const int N = 2, H = 9, W = 7, C = 3;
    size_t n = (size_t)N * H * W * C;
    float *x = rnd(n, -3, 3);
    Tensor *tx = tensor_from_f32(c, x, dt, 4, (int64_t[]){N, H, W, C});
    float *xq = malloc(n * sizeof(float));
    tensor_to_f32(xq, tx);
    Tensor *ty = op_maxpool2d(c, tx, 3, 2, 1);
    size_t no = ty->numel;
    float *got = malloc(no * sizeof(float)), *ref = malloc(no * sizeof(float));
    tensor_to_f32(got, ty);
    maxpool2d_forward_cpu(ref, NULL, xq, 3, 2, 1, N, H, W, C);
    snprintf(name, sizeof name, "maxpool.fwd.%s.exact", dtype_name(dt));
    check_close(name, got, ref, no, 0, 0);
    tensor_release(tx); tensor_release(ty);
    free(x); free(xq); free(got); free(ref);
}

/* ---- global average pool ---- */

static void test_avgpool(Ctx *c, DType dt, int N, int H, int W, int C)
{
    char name[96], tag[64];
    snprintf(tag, sizeof tag, "%s.%dx%dx%dx%d", dtype_name(dt), N, H, W, C);
    int HW = H * W;
    size_t n = (size_t)N * HW * C, no = (size_t)N * C, base = c->mem.current;
    float *x = rnd(n, -2, 2), *w = rnd(no, -1, 1);
    Tensor *tx = tensor_from_f32(c, x, dt, 4, (int64_t[]){N, H, W, C});
    Tensor *tw = tensor_from_f32(c, w, dt, 2, (int64_t[]){N, C});
    tx->requires_grad = 1;
    Tensor *ty = pool_step(c, tx, tw, 0, 0, 0, 0, 2, 1);
    float *xq = malloc(n * sizeof(float)), *wq = malloc(no * sizeof(float));
    tensor_to_f32(xq, tx);
    tensor_to_f32(wq, tw);
    double *xd = to_d(xq, n), *wd = to_d(wq, no), *yd = malloc(no * sizeof(double));
    avgpool_ref(yd, xd, NULL, N, HW, C);
    float *got = malloc(no * sizeof(float));
    tensor_to_f32(got, ty);
    double *gotd = to_d(got, no);
    double tol = dt == DT_F32 ? 1e-6 : dt == DT_F16 ? 1e-3 : 8e-3; /* one output rounding */
    snprintf(name, sizeof name, "avgpool.fwd.%s", tag);
    check_close_f64(name, gotd, yd, no, tol, tol);
    snprintf(name, sizeof name, "avgpool.shape.%s", tag);
    check_true(name, ty->ndim == 2 && ty->shape[0] == N && ty->shape[1] == C && ty->dtype == dt,
               "output ndim %d", ty->ndim);
    /* gradient (twice) against finite differences: L is linear in x */
    double *num = malloc(n * sizeof(double)), *ana = malloc(n * sizeof(double));
    float *gx = malloc(n * sizeof(float));
    tensor_to_f32(gx, tx->grad);
    for (size_t i = 0; i < n; i++) {
        double keep = xd[i];
        xd[i] = keep + FD_H;
        double lp = avgpool_ref(NULL, xd, wd, N, HW, C);
        xd[i] = keep - FD_H;
        double lm = avgpool_ref(NULL, xd, wd, N, HW, C);
        xd[i] = keep;
        num[i] = 2.0 * (lp - lm) / (2 * FD_H);
        ana[i] = gx[i];
    }
    snprintf(name, sizeof name, "avgpool.bwd.dx.twice.%s", tag);
    check_close_f64(name, ana, num, n, dt == DT_F32 ? 1e-6 : tol / HW, dt == DT_F32 ? 1e-5 : tol);
    tensor_release(ty); tensor_release(tx); tensor_release(tw);
    snprintf(name, sizeof name, "avgpool.no_leak.%s", tag);
    check_true(name, c->mem.current == base, "%zu bytes held, base %zu", c->mem.current, base);
    free(x); free(w); free(xq); free(wq); free(xd); free(wd); free(yd); free(got); free(gotd);
    free(num); free(ana); free(gx);
}

/* ---- refusals ---- */

static void child_bad_pad(void *arg)
{
    (void)arg;
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    float v[16] = {0};
    Tensor *x = tensor_from_f32(&c, v, DT_F32, 4, (int64_t[]){1, 4, 4, 1});
    op_maxpool2d(&c, x, 3, 2, 2);
}

static void child_not_4d(void *arg)
{
    (void)arg;
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    float v[16] = {0};
    Tensor *x = tensor_from_f32(&c, v, DT_F32, 2, (int64_t[]){4, 4});
    op_avgpool_global(&c, x);
}

static void test_refusals(void)
{
    char buf[2048];
    int st = check_run_child(child_bad_pad, NULL, buf, sizeof buf);
    check_true("maxpool.bad_pad_refused", st == 1 && strstr(buf, "padding 2 is more than half"),
               "status %d, message: %s", st, buf);
    st = check_run_child(child_not_4d, NULL, buf, sizeof buf);
    check_true("avgpool.not_nhwc_refused", st == 1 && strstr(buf, "[N, H, W, C]"),
               "status %d, message: %s", st, buf);
}

int main(void)
{
    check_seed(99);
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    check_true("pool_out_size.resnet_stem", pool_out_size(112, 3, 2, 1) == 56,
               "112 -> %d", pool_out_size(112, 3, 2, 1));
    test_maxpool(&c, 2, 9, 9, 3, 3, 2, 1);
    test_maxpool(&c, 1, 13, 10, 5, 3, 2, 1);
    test_maxpool(&c, 2, 7, 6, 4, 2, 2, 0);
    test_maxpool(&c, 1, 6, 5, 3, 3, 1, 1);
    test_maxpool(&c, 1, 5, 5, 2, 1, 1, 0);
    test_maxpool(&c, 1, 8, 8, 2, 3, 3, 1);
    test_maxpool(&c, 1, 112, 112, 2, 3, 2, 1);
    test_maxpool(&c, 1, 19, 18, 2, 17, 2, 8);    /* k > 16: i32 codes */
    test_maxpool(&c, 2, 17, 16, 3, 16, 1, 0);    /* k 16: u8 codes up to 255 */
    test_maxpool_ties(&c);
    test_maxpool_lowp(&c, DT_F16);
    test_maxpool_lowp(&c, DT_BF16);
    test_avgpool(&c, DT_F32, 2, 3, 4, 5);
    test_avgpool(&c, DT_F32, 3, 7, 7, 16);
    test_avgpool(&c, DT_F32, 2, 1, 1, 8);
    test_avgpool(&c, DT_F16, 2, 5, 5, 6);
    test_avgpool(&c, DT_BF16, 2, 5, 5, 6);
    test_refusals();
    ctx_free(&c);
    return check_summary();
}
