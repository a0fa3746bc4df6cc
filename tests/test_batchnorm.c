/* test_batchnorm.c — batch norm (+ residual add, + ReLU) on the CPU backend,
 * through the tensor op and autograd, against float64 math:
 *   - forward in training and eval mode against the formula in double; the
 *     running statistics against their exact update (momentum, unbiased
 *     variance M / (M - 1)) and num_batches_tracked counting batches;
 *   - gradients of L = sum(w * y) for x, gamma, beta and z against central
 *     finite differences of the same L evaluated in double, for bn alone,
 *     bn + ReLU, bn + z + ReLU, bn + z, in training and eval mode; inputs
 *     are nudged so no pre-activation sits near the ReLU kink;
 *   - a second backward adds into the gradients; a fresh dgamma next to an
 *     accumulating dbeta;
 *   - f16 / bf16 activations equal the f32 math on the rounded inputs;
 *   - affine = False (no gamma / beta) and no running statistics;
 *   - M = 1 in training is refused with PyTorch's message (forked child);
 *   - the mask recomputed from x (relu mode 2, the conv + BN unit's) gives
 *     the saved output's gradients bit for bit;
 *   - the CUDA reduction chunking covers every row exactly once.
 *
 * Shape letters: x [N, H, W, C], M = N*H*W rows, C channels.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/autograd.h"
#include "engine/mem.h"
#include "ops/batchnorm.h"
#include "ops/ops.h"
#include "check.h"

#define EPS 1e-5f
#define MOM 0.1f
#define FD_H 1e-5
/* kept between a pre-activation and the ReLU kink */
#define KINK_MARGIN 0.02

/* ---- double reference ---- */

/* y = act(gamma (x - mean) / sqrt(var + eps) + beta + z) in double, with batch
 * statistics (training) or rm / rv; returns sum(w * y). mean_out / var_out
 * (biased) and y may be NULL. gamma, beta, z may be NULL. */
static double bn_ref(double *y, double *mean_out, double *var_out, const double *x,
                     const double *gamma, const double *beta, const double *z, const double *w,
                     const double *rm, const double *rv, int training, int relu, size_t M,
                     size_t C)
{
    double L = 0.0;
    for (size_t c = 0; c < C; c++) {
        double mu = 0.0, var = 0.0;
        if (training) {
            for (size_t m = 0; m < M; m++) mu += x[m * C + c];
            mu /= (double)M;
            for (size_t m = 0; m < M; m++) var += (x[m * C + c] - mu) * (x[m * C + c] - mu);
            var /= (double)M;
        } else {
            mu = rm[c];
            var = rv[c];
        }
        if (mean_out) mean_out[c] = mu;
        if (var_out) var_out[c] = var;
        double is = 1.0 / sqrt(var + (double)EPS);
        for (size_t m = 0; m < M; m++) {
            size_t i = m * C + c;
            double v = (gamma ? gamma[c] : 1.0) * (x[i] - mu) * is + (beta ? beta[c] : 0.0);
            if (z) v += z[i];
            if (relu && v < 0) v = 0;
            if (y) y[i] = v;
            if (w) L += w[i] * v;
        }
    }
    return L;
}

static double *to_d(const float *p, size_t n)
{
    double *d = malloc((n ? n : 1) * sizeof(double));
    for (size_t i = 0; i < n; i++) d[i] = p[i];
    return d;
}
static float *rnd(size_t n, float lo, float hi)
{
    float *p = malloc((n ? n : 1) * sizeof(float));
    check_fill(p, n, lo, hi);
    return p;
}

/* Central difference of L with respect to each element of p (n of them). */
static void fd_grad(double *g, double *p, size_t n, const double *x, const double *gamma,
                    const double *beta, const double *z, const double *w, const double *rm,
                    const double *rv, int training, int relu, size_t M, size_t C)
{
    for (size_t i = 0; i < n; i++) {
        double keep = p[i];
        p[i] = keep + FD_H;
        double lp = bn_ref(NULL, NULL, NULL, x, gamma, beta, z, w, rm, rv, training, relu, M, C);
        p[i] = keep - FD_H;
        double lm = bn_ref(NULL, NULL, NULL, x, gamma, beta, z, w, rm, rv, training, relu, M, C);
        p[i] = keep;
        g[i] = (lp - lm) / (2 * FD_H);
    }
}

static Tensor *vec_tensor(Ctx *c, const float *v, size_t C)
{
    return tensor_from_f32(c, v, DT_F32, 1, (int64_t[]){(int64_t)C});
}

/* Gradient of an f32 tensor as doubles (NULL -> zeros, reported as a failure
 * by the comparison since FD gradients are not all zero). */
static double *grad_d(Tensor *t, size_t n)
{
    double *d = calloc(n ? n : 1, sizeof(double));
    if (t && t->grad) {
        float *f = malloc(n * sizeof(float));
        tensor_to_f32(f, t->grad);
        for (size_t i = 0; i < n; i++) d[i] = f[i];
        free(f);
    }
    return d;
}

/* ---- forward and running statistics ---- */

static void test_forward(Ctx *c, int N, int H, int W, int C, int training, int relu, int has_z)
{
    char name[96], tag[64];
    size_t M = (size_t)N * H * W, n = M * C;
    snprintf(tag, sizeof tag, "%s%s%s.%dx%dx%dx%d", training ? "train" : "eval",
             relu ? ".relu" : "", has_z ? ".z" : "", N, H, W, C);
    size_t base = c->mem.current;
    /* a per-channel offset and scale, so the statistics are not trivial */
    float *x = rnd(n, -1, 1), *gm = rnd(C, 0.5f, 1.5f), *bt = rnd(C, -0.5f, 0.5f);
    float *z = has_z ? rnd(n, -1, 1) : NULL;
    float *rm0 = rnd(C, -0.5f, 0.5f), *rv0 = rnd(C, 0.5f, 2.0f);
    for (size_t m = 0; m < M; m++)
        for (int k = 0; k < C; k++) x[m * C + k] = x[m * C + k] * (1.0f + k) + 0.3f * k;
    int64_t shape[4] = {N, H, W, C}, nbt0 = 5;
    Tensor *tx = tensor_from_f32(c, x, DT_F32, 4, shape);
    Tensor *tz = has_z ? tensor_from_f32(c, z, DT_F32, 4, shape) : NULL;
    Tensor *tg = vec_tensor(c, gm, C), *tb = vec_tensor(c, bt, C);
    Tensor *trm = vec_tensor(c, rm0, C), *trv = vec_tensor(c, rv0, C);
    Tensor *tn = tensor_from_host(c, &nbt0, DT_I64, 1, (int64_t[]){1});
    Tensor *ty = op_batchnorm(c, tx, tg, tb, trm, trv, tn, training, MOM, EPS, tz, relu);

    double *xd = to_d(x, n), *gd = to_d(gm, C), *bd = to_d(bt, C), *zd = has_z ? to_d(z, n) : NULL;
    double *rmd = to_d(rm0, C), *rvd = to_d(rv0, C);
    double *yd = malloc(n * sizeof(double)), *mu = malloc(C * sizeof(double));
    double *var = malloc(C * sizeof(double));
    bn_ref(yd, mu, var, xd, gd, bd, zd, NULL, rmd, rvd, training, relu, M, C);
    float *got = malloc(n * sizeof(float));
    tensor_to_f32(got, ty);
    double *gotd = to_d(got, n);
    snprintf(name, sizeof name, "bn.fwd.%s", tag);
    check_close_f64(name, gotd, yd, n, 1e-5, 1e-5);

    /* running statistics: updated exactly when training, untouched in eval */
    float rm[4096], rv[4096];
    int64_t nbt;
    tensor_to_f32(rm, trm);
    tensor_to_f32(rv, trv);
    tensor_to_host(&nbt, tn);
    double erm[4096], erv[4096], grm[4096], grv[4096];
    for (int k = 0; k < C; k++) {
        erm[k] = training ? (1.0 - MOM) * rm0[k] + MOM * mu[k] : rm0[k];
        erv[k] = training ? (1.0 - MOM) * rv0[k] + MOM * var[k] * (double)M / (double)(M - 1)
                          : rv0[k];
        grm[k] = rm[k];
        grv[k] = rv[k];
    }
    snprintf(name, sizeof name, "bn.running_mean.%s", tag);
    check_close_f64(name, grm, erm, C, 1e-6, 1e-6);
    snprintf(name, sizeof name, "bn.running_var.%s", tag);
    check_close_f64(name, grv, erv, C, 1e-6, 1e-6);
    snprintf(name, sizeof name, "bn.num_batches_tracked.%s", tag);
    check_true(name, nbt == (training ? 6 : 5), "num_batches_tracked %lld, want %d",
               (long long)nbt, training ? 6 : 5);

    tensor_release(ty); tensor_release(tx); tensor_release(tz); tensor_release(tg);
    tensor_release(tb); tensor_release(trm); tensor_release(trv); tensor_release(tn);
    snprintf(name, sizeof name, "bn.fwd.no_leak.%s", tag);
    check_true(name, c->mem.current == base, "%zu bytes held, base %zu", c->mem.current, base);
    free(x); free(gm); free(bt); free(z); free(rm0); free(rv0); free(xd); free(gd); free(bd);
    free(zd); free(rmd); free(rvd); free(yd); free(mu); free(var); free(got); free(gotd);
}

/* ---- gradients against finite differences ---- */

/* Move inputs off the ReLU kink: z elements directly when there is a
 * residual, else x elements (which moves the statistics a little, so
 * repeat). Returns 1 when every |pre-activation| >= KINK_MARGIN. */
static int avoid_kink(float *x, float *z, const float *gm, const float *bt, const float *rm,
                      const float *rv, int training, size_t M, size_t C)
{
    size_t n = M * C;
    double *pre = malloc(n * sizeof(double)), *mu = malloc(C * sizeof(double));
    double *var = malloc(C * sizeof(double));
    int ok = 0;
    for (int it = 0; it < 100 && !ok; it++) {
        double *xd = to_d(x, n), *gd = to_d(gm, C), *bd = to_d(bt, C);
        double *zd = z ? to_d(z, n) : NULL, *rmd = to_d(rm, C), *rvd = to_d(rv, C);
        bn_ref(pre, mu, var, xd, gd, bd, zd, NULL, rmd, rvd, training, 0, M, C);
        ok = 1;
        for (size_t i = 0; i < n; i++) {
            if (fabs(pre[i]) >= KINK_MARGIN) continue;
            ok = 0;
            double dir = pre[i] >= 0 ? 1.0 : -1.0;
            size_t c = i % C;
            if (z) {
                z[i] += (float)(dir * 4 * KINK_MARGIN);
            } else {
                double slope = gm[c] / sqrt(var[c] + EPS);
                x[i] += (float)(dir * 4 * KINK_MARGIN / slope);
            }
        }
        free(xd); free(gd); free(bd); free(zd); free(rmd); free(rvd);
    }
    free(pre); free(mu); free(var);
    return ok;
}

static void test_backward(Ctx *c, int N, int H, int W, int C, int training, int relu,
                          int has_z, int affine)
{
    char name[96], tag[64];
    size_t M = (size_t)N * H * W, n = M * C;
    snprintf(tag, sizeof tag, "%s%s%s%s.%dx%dx%dx%d", training ? "train" : "eval",
             relu ? ".relu" : "", has_z ? ".z" : "", affine ? "" : ".noaffine", N, H, W, C);
    size_t base = c->mem.current;
    float *x = rnd(n, -2, 2), *gm = rnd(C, 0.5f, 1.5f), *bt = rnd(C, -0.5f, 0.5f);
    float *z = has_z ? rnd(n, -1, 1) : NULL, *w = rnd(n, -1, 1);
    float *rm = rnd(C, -0.5f, 0.5f), *rv = rnd(C, 0.5f, 2.0f);
    for (int k = 0; k < C; k += 2) gm[k] = -gm[k]; /* negative scales too */
    if (!affine)
        for (int k = 0; k < C; k++) { gm[k] = 1.0f; bt[k] = 0.0f; }
    if (relu) {
        snprintf(name, sizeof name, "bn.bwd.kink_avoided.%s", tag);
        check_true(name, avoid_kink(x, z, gm, bt, rm, rv, training, M, C),
                   "inputs still near the ReLU kink after 100 nudges");
    }
    int64_t shape[4] = {N, H, W, C};
    Tensor *tx = tensor_from_f32(c, x, DT_F32, 4, shape);
    Tensor *tz = has_z ? tensor_from_f32(c, z, DT_F32, 4, shape) : NULL;
    Tensor *tw = tensor_from_f32(c, w, DT_F32, 4, shape);
    Tensor *tg = affine ? vec_tensor(c, gm, C) : NULL, *tb = affine ? vec_tensor(c, bt, C) : NULL;
    Tensor *trm = vec_tensor(c, rm, C), *trv = vec_tensor(c, rv, C);
    tx->requires_grad = 1;
    if (tz) tz->requires_grad = 1;
    if (tg) tg->requires_grad = 1;
    if (tb) tb->requires_grad = 1;

    /* forward + backward twice without clearing the gradients: the second
     * backward adds (accum = 1) into what the first wrote (accum = 0). In
     * training the running stats move, but the batch statistics are used;
     * in eval they stay as the reference reads them. */
    for (int rep = 0; rep < 2; rep++) {
        Tensor *ty = op_batchnorm(c, tx, tg, tb, trm, trv, NULL, training, MOM, EPS, tz, relu);
        Tensor *tp = op_mul(c, ty, tw);
        Tensor *loss = op_sum(c, tp);
        ad_backward(c, loss, 1.0f);
        tensor_release(ty); tensor_release(tp); tensor_release(loss);
    }

    double *xd = to_d(x, n), *gd = to_d(gm, C), *bd = to_d(bt, C), *zd = has_z ? to_d(z, n) : NULL;
    double *wd = to_d(w, n), *rmd = to_d(rm, C), *rvd = to_d(rv, C);
    const double *gp = affine ? gd : NULL, *bp = affine ? bd : NULL;
    double *num = malloc(n * sizeof(double));
    double *ana;
    /* after two backward passes each gradient holds twice the gradient */
    struct { const char *what; Tensor *t; double *p; size_t cnt; } g[4] = {
        {"dx", tx, xd, n}, {"dgamma", tg, gd, C}, {"dbeta", tb, bd, C}, {"dz", tz, zd, n}};
    for (int k = 0; k < 4; k++) {
        if (!g[k].t) continue;
        fd_grad(num, g[k].p, g[k].cnt, xd, gp, bp, zd, wd, rmd, rvd, training, relu, M, C);
        for (size_t i = 0; i < g[k].cnt; i++) num[i] *= 2.0;
        ana = grad_d(g[k].t, g[k].cnt);
        snprintf(name, sizeof name, "bn.bwd.%s.twice.%s", g[k].what, tag);
        check_close_f64(name, ana, num, g[k].cnt, 2e-5, 2e-4);
        free(ana);
    }

    tensor_release(tx); tensor_release(tz); tensor_release(tw); tensor_release(tg);
    tensor_release(tb); tensor_release(trm); tensor_release(trv);
    snprintf(name, sizeof name, "bn.bwd.no_leak.%s", tag);
    check_true(name, c->mem.current == base, "%zu bytes held, base %zu", c->mem.current, base);
    free(x); free(gm); free(bt); free(z); free(w); free(rm); free(rv);
    free(xd); free(gd); free(bd); free(zd); free(wd); free(rmd); free(rvd); free(num);
}

/* dgamma fresh (no gradient yet) next to a dbeta that already holds one: the
 * op zeroes the fresh one and both accumulate. */
static void test_mixed_accum(Ctx *c)
{
    const int C = 3;
    const size_t M = 10, n = M * C;
    float *x = rnd(n, -2, 2), *gm = rnd(C, 0.5f, 1.5f), *bt = rnd(C, -0.5f, 0.5f);
    float *w = rnd(n, -1, 1), old[3] = {0.25f, -0.5f, 1.0f};
    int64_t shape[2] = {(int64_t)M, C};
    Tensor *tx = tensor_from_f32(c, x, DT_F32, 2, shape), *tw = tensor_from_f32(c, w, DT_F32, 2, shape);
    Tensor *tg = vec_tensor(c, gm, C), *tb = vec_tensor(c, bt, C);
    tg->requires_grad = 1;
    tb->requires_grad = 1;
    tb->grad = vec_tensor(c, old, C);
    Tensor *ty = op_batchnorm(c, tx, tg, tb, NULL, NULL, NULL, 1, MOM, EPS, NULL, 0);
    Tensor *tp = op_mul(c, ty, tw), *loss = op_sum(c, tp);
    ad_backward(c, loss, 1.0f);
    double *xd = to_d(x, n), *gd = to_d(gm, C), *bd = to_d(bt, C), *wd = to_d(w, n);
    double num[3], *ana;
    fd_grad(num, gd, C, xd, gd, bd, NULL, wd, NULL, NULL, 1, 0, M, C);
    ana = grad_d(tg, C);
    check_close_f64("bn.bwd.mixed_accum.dgamma_fresh", ana, num, C, 2e-5, 2e-4);
    free(ana);
    fd_grad(num, bd, C, xd, gd, bd, NULL, wd, NULL, NULL, 1, 0, M, C);
    for (int k = 0; k < C; k++) num[k] += old[k];
    ana = grad_d(tb, C);
    check_close_f64("bn.bwd.mixed_accum.dbeta_added", ana, num, C, 2e-5, 2e-4);
    free(ana);
    tensor_release(ty); tensor_release(tp); tensor_release(loss);
    tensor_release(tx); tensor_release(tw); tensor_release(tg); tensor_release(tb);
    free(x); free(gm); free(bt); free(w); free(xd); free(gd); free(bd); free(wd);
}

/* f16 / bf16 activations: the f32 formula on the rounded inputs, rounded. */
static void test_lowp(Ctx *c, DType dt)
{
    char name[64];
    const int C = 6;
    const size_t M = 40, n = M * C;
    float *x = rnd(n, -3, 3), *z = rnd(n, -1, 1), *gm = rnd(C, 0.5f, 1.5f);
    float *bt = rnd(C, -0.5f, 0.5f);
    int64_t shape[4] = {2, 4, 5, C};
    Tensor *tx = tensor_from_f32(c, x, dt, 4, shape), *tz = tensor_from_f32(c, z, dt, 4, shape);
    Tensor *tg = vec_tensor(c, gm, C), *tb = vec_tensor(c, bt, C);
    Tensor *ty = op_batchnorm(c, tx, tg, tb, NULL, NULL, NULL, 1, MOM, EPS, tz, 1);
    float *xq = malloc(n * sizeof(float)), *zq = malloc(n * sizeof(float));
    tensor_to_f32(xq, tx);
    tensor_to_f32(zq, tz);
    double *xd = to_d(xq, n), *zd = to_d(zq, n), *gd = to_d(gm, C), *bd = to_d(bt, C);
    double *yd = malloc(n * sizeof(double));
    bn_ref(yd, NULL, NULL, xd, gd, bd, zd, NULL, NULL, NULL, 1, 1, M, C);
    float *got = malloc(n * sizeof(float)), *ref = malloc(n * sizeof(float));
    tensor_to_f32(got, ty);
    for (size_t i = 0; i < n; i++) ref[i] = (float)yd[i];
    snprintf(name, sizeof name, "bn.fwd.%s", dtype_name(dt));
    double tol = dt == DT_F16 ? 1e-3 : 8e-3; /* one rounding of the output */
    check_close(name, got, ref, n, tol, tol);
    check_true("bn.fwd.lowp_dtype", ty->dtype == dt, "output %s", dtype_name(ty->dtype));
    tensor_release(ty); tensor_release(tx); tensor_release(tz); tensor_release(tg);
    tensor_release(tb);
    free(x); free(z); free(gm); free(bt); free(xq); free(zq); free(xd); free(zd); free(gd);
    free(bd); free(yd); free(got); free(ref);
}

/* M = 1 in training: refused, as PyTorch does. Eval with M = 1 is fine. */
static void child_m1(void *arg)
{
    (void)arg;
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    float v[4] = {1, 2, 3, 4}, g[4] = {1, 1, 1, 1}, b[4] = {0, 0, 0, 0};
    Tensor *x = tensor_from_f32(&c, v, DT_F32, 4, (int64_t[]){1, 1, 1, 4});
    Tensor *tg = vec_tensor(&c, g, 4), *tb = vec_tensor(&c, b, 4);
    Tensor *rm = vec_tensor(&c, b, 4), *rv = vec_tensor(&c, g, 4);
    op_batchnorm(&c, x, tg, tb, rm, rv, NULL, 1, MOM, EPS, NULL, 1);
}

static void test_m1(Ctx *c)
{
    char buf[2048];
    int st = check_run_child(child_m1, NULL, buf, sizeof buf);
    check_true("bn.m1_training_refused",
               st == 1 && strstr(buf, "expected more than 1 value per channel when training") &&
                   strstr(buf, "[1, 1, 1, 4]") && strstr(buf, "hint:"),
               "status %d, message: %s", st, buf);
    float v[4] = {1, 2, 3, 4}, g[4] = {1, 1, 1, 1}, b[4] = {0, 0, 0, 0}, y[4];
    Tensor *x = tensor_from_f32(c, v, DT_F32, 4, (int64_t[]){1, 1, 1, 4});
    Tensor *tg = vec_tensor(c, g, 4), *tb = vec_tensor(c, b, 4);
    Tensor *rm = vec_tensor(c, b, 4), *rv = vec_tensor(c, g, 4);
    Tensor *ty = op_batchnorm(c, x, tg, tb, rm, rv, NULL, 0, MOM, EPS, NULL, 0);
    tensor_to_f32(y, ty);
    float ref[4];
    for (int k = 0; k < 4; k++) ref[k] = (float)(v[k] / sqrt(1.0 + EPS));
    check_close("bn.m1_eval_ok", y, ref, 4, 1e-6, 1e-6);
    tensor_release(ty); tensor_release(x); tensor_release(tg); tensor_release(tb);
    tensor_release(rm); tensor_release(rv);
}

/* relu mode 2 (the mask recomputed from x, gamma and beta) gives relu mode
 * 1's gradients (the mask read from the forward's y) bit for bit, training
 * and eval, with values sitting exactly on the kink (x = mean: y = relu(beta)
 * with beta 0 in one channel) */
static void test_relu_mode2(void)
{
    enum { M = 64, C = 5 };
    float *x = rnd(M * C, -1, 1), *dy = rnd(M * C, -1, 1), *gm = rnd(C, 0.5f, 1.5f);
    float *bt = rnd(C, -0.5f, 0.5f), *y = malloc(M * C * sizeof(float));
    bt[2] = 0.0f;
    for (int m = 0; m < M; m += 3) x[m * C + 2] = 0.0f;   /* some exactly at the mean */
    float mean[C], invstd[C];
    batchnorm_stats_cpu(mean, invstd, NULL, NULL, NULL, x, MOM, EPS, M, C);
    for (int m = 0; m < M; m += 3) x[m * C + 2] = mean[2];
    batchnorm_forward_cpu(y, x, NULL, mean, invstd, gm, bt, 1, M, C);
    for (int training = 0; training < 2; training++) {
        float dx[2][M * C], dg[2][C], db[2][C];
        for (int mode = 1; mode <= 2; mode++)
            batchnorm_backward_cpu(dx[mode - 1], NULL, dg[mode - 1], db[mode - 1], dy, x,
                                   mode == 1 ? y : NULL, mean, invstd, gm, bt, training, mode,
                                   M, C, 0, 0, 0);
        char name[64];
        snprintf(name, sizeof name, "bn.relu_mode2.%s", training ? "train" : "eval");
        check_true(name, memcmp(dx[0], dx[1], sizeof dx[0]) == 0 &&
                   memcmp(dg[0], dg[1], sizeof dg[0]) == 0 &&
                   memcmp(db[0], db[1], sizeof db[0]) == 0,
                   "the recomputed mask gives other gradients than the saved output's");
    }
    free(x); free(dy); free(gm); free(bt); free(y);
}

/* The CUDA reduction layout (host arithmetic): G chunks of rows_per_chunk
 * rows cover [0, M) with no empty chunk, and the scratch holds them. */
static void test_chunks(void)
{
    static const size_t Ms[] = {1, 2, 7, 255, 256, 1000, 25088, 802816, 1000003, 12845056};
    static const size_t Cs[] = {1, 3, 31, 32, 33, 64, 1024, 2048};
    int ok = 1;
    char why[256] = "";
    for (size_t a = 0; a < sizeof Ms / sizeof Ms[0]; a++)
        for (size_t b = 0; b < sizeof Cs / sizeof Cs[0]; b++) {
            size_t M = Ms[a], C = Cs[b], rpc;
            size_t G = batchnorm_chunks(M, C, &rpc);
            size_t cols = batchnorm_cols(C), lanes = batchnorm_lanes(C);
            int good = G >= 1 && G <= 65535 && G * rpc >= M && (G - 1) * rpc < M &&
                       cols * lanes <= BN_THREADS && cols >= 1 &&
                       batchnorm_scratch_bytes(M, C) == (2 * G * C + 2 * C) * sizeof(float);
            if (!good && ok)
                snprintf(why, sizeof why, "M %zu C %zu: G %zu rows %zu cols %zu lanes %zu", M, C,
                         G, rpc, cols, lanes);
            ok &= good;
        }
    check_true("bn.cuda_chunks_cover_rows", ok, "%s", why);
}

int main(void)
{
    check_seed(21);
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    test_forward(&c, 2, 3, 4, 5, 1, 0, 0);
    test_forward(&c, 3, 2, 2, 8, 1, 1, 1);
    test_forward(&c, 2, 3, 4, 5, 0, 0, 0);
    test_forward(&c, 1, 5, 7, 3, 0, 1, 1);
    test_forward(&c, 4, 8, 8, 64, 1, 1, 0);
    /* gradients: {training, eval} x {bn, bn+relu, bn+z+relu, bn+z} */
    for (int training = 1; training >= 0; training--) {
        test_backward(&c, 2, 3, 3, 4, training, 0, 0, 1);
        test_backward(&c, 2, 2, 3, 5, training, 1, 0, 1);
        test_backward(&c, 3, 2, 2, 3, training, 1, 1, 1);
        test_backward(&c, 2, 3, 2, 4, training, 0, 1, 1);
    }
    test_backward(&c, 2, 3, 3, 4, 1, 1, 1, 0);
    test_mixed_accum(&c);
    test_lowp(&c, DT_F16);
    test_lowp(&c, DT_BF16);
    test_m1(&c);
    test_relu_mode2();
    test_chunks();
    ctx_free(&c);
    return check_summary();
}
