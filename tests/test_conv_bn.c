/* test_conv_bn.c — the conv + batch-norm unit (ops/conv_bn.h) on the CPU
 * backend, held to the composition it stands for (op_batchnorm with ReLU,
 * then op_conv2d; each of those is tested against double math and finite
 * differences in test_batchnorm.c and test_conv2d.c):
 *   - z, the gradients of y, gamma, beta and w, the running statistics and
 *     the batch counter, in training (statistics handed in, or taken by the
 *     unit) and eval, f32 and bf16, strides 1 and 2, 1x1 and 3x3;
 *   - every gradient added into rather than written (a second backward, and
 *     a fresh dbeta beside an accumulating dgamma);
 *   - the statistics handed on equal op_bn_moments of z, and the moments
 *     equal double math;
 *   - under autocast an f32 input runs as the composition, bit for bit;
 *   - the forward keeps one activation of y's size less;
 *   - a forward re-run inside a recompute segment does not count the batch;
 *   - ResNet-50 and ResNet-18 (narrow) built from the unit: the loss, every
 *     gradient and the running statistics of a training step, and an eval
 *     forward, match the separate ops' (with and without recompute);
 *   - bad statistics and a missing gamma are refused by name.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "conv_bn_case.h"
#include "engine/mem.h"
#include "models/resnet.h"

/* The unit against the composition: values within tol (relative and
 * absolute), the batch counter exactly. */
static void compare(const char *tag, const CbShape *s, const CbOut *u, const CbOut *r,
                    double tol)
{
    char name[160];
    size_t C = (size_t)s->C, K = (size_t)s->K;
#define CMP(field, n)                                                          \
    do {                                                                       \
        snprintf(name, sizeof name, "conv_bn.%s.%s", tag, #field);             \
        check_close(name, u->field, r->field, n, tol, tol);                    \
    } while (0)
    CMP(z, u->nz);
    CMP(dy, u->ny);
    CMP(dw, u->nw);
    CMP(dgamma, C);
    CMP(dbeta, C);
    CMP(rm, C);
    CMP(rv, C);
#undef CMP
    snprintf(name, sizeof name, "conv_bn.%s.nbt", tag);
    check_true(name, u->nbt == r->nbt, "num_batches_tracked %lld, composition %lld",
               (long long)u->nbt, (long long)r->nbt);
    snprintf(name, sizeof name, "conv_bn.%s.stats_out", tag);
    if (r->stats_out && u->stats_out)
        check_close(name, u->stats_out, r->stats_out, 2 * K, tol, tol);
    else
        check_true(name, !u->stats_out && !r->stats_out, "statistics handed on: unit %s, "
                   "composition %s", u->stats_out ? "yes" : "no", r->stats_out ? "yes" : "no");
}

static void test_unit(Ctx *c)
{
    const CbShape shapes[] = {
        {2, 6, 5, 6, 5, 3, 1, 1},   /* 3x3, stride 1 */
        {2, 7, 6, 4, 8, 3, 2, 1},   /* 3x3, stride 2 (ResNet v1.5's 3x3/2) */
        {3, 4, 4, 8, 12, 1, 1, 0},  /* 1x1 */
    };
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const CbShape *s = &shapes[k];
        for (int dti = 0; dti < 2; dti++) {
            DType dt = dti ? DT_BF16 : DT_F32;
            /* f32: the unit's invstd is made from the f32 variance, the
             * composition's from the double one (one ulp apart); bf16: that
             * ulp may move a rounding of a */
            double tol = dti ? 3e-2 : 2e-5;
            for (int mode = 0; mode < 4; mode++) {
                /* 0: statistics handed in, 1: taken by the unit, 2: eval,
                 * 3: as 0 with every gradient added into (CB_ACCUM) */
                int training = mode != 2, given = mode == 0 || mode == 3;
                int flags = mode == 3 ? CB_ACCUM : 0;
                static const char *const modes[4] = {"train_given", "train_own", "eval",
                                                     "train_accum"};
                char tag[96];
                snprintf(tag, sizeof tag, "%s.%s.%dx%d_s%d", dtype_name(dt), modes[mode], s->R,
                         s->R, s->stride);
                CbOut u = cb_run(c, s, dt, 1, given, training, flags);
                CbOut r = cb_run(c, s, dt, 0, 0, training, flags);
                compare(tag, s, &u, &r, tol);
                if (mode == 0 && dti == 0) {
                    /* one activation of y's size (a) is not kept */
                    size_t a_bytes = u.ny * dtype_size(dt);
                    char name[128];
                    snprintf(name, sizeof name, "conv_bn.%s.keeps_less", tag);
                    check_true(name, u.held_after_forward + a_bytes <= r.held_after_forward,
                               "unit holds %zu bytes after its forward, composition %zu (a is "
                               "%zu)", u.held_after_forward, r.held_after_forward, a_bytes);
                }
                cb_free(&u);
                cb_free(&r);
            }
        }
    }
}

/* Under autocast an f32 input runs as the composition: the same bits */
static void test_autocast(Ctx *c)
{
    CbShape s = {2, 5, 5, 8, 8, 3, 1, 1};
    c->autocast = DT_BF16;
    CbOut u = cb_run(c, &s, DT_F32, 1, 1, 1, 0), r = cb_run(c, &s, DT_F32, 0, 0, 1, 0);
    c->autocast = DT_F32;
    int same = memcmp(u.z, r.z, u.nz * 4) == 0 && memcmp(u.dy, r.dy, u.ny * 4) == 0 &&
               memcmp(u.dw, r.dw, u.nw * 4) == 0 && memcmp(u.dgamma, r.dgamma, 8 * 4) == 0 &&
               memcmp(u.dbeta, r.dbeta, 8 * 4) == 0 && memcmp(u.rm, r.rm, 8 * 4) == 0 &&
               memcmp(u.rv, r.rv, 8 * 4) == 0 && u.nbt == r.nbt;
    check_true("conv_bn.autocast_f32_input.composition_bits", same,
               "the unit under autocast with an f32 input differs from op_batchnorm + op_conv2d");
    check_true("conv_bn.autocast_f32_input.no_stats_out", u.stats_out == NULL,
               "statistics handed on from the composed path");
    cb_free(&u);
    cb_free(&r);
}

/* op_bn_moments against double math */
static void test_moments(Ctx *c)
{
    enum { M = 37, C = 5 };
    float *x = cb_fill(11, M * C, -2.0f, 3.0f);
    for (int m = 0; m < M; m++) x[m * C + 2] += 100.0f;   /* a large mean */
    Tensor *t = tensor_from_f32(c, x, DT_F32, 2, (int64_t[]){M, C});
    Tensor *ms = op_bn_moments(c, t);
    float got[2 * C], ref[2 * C];
    tensor_to_f32(got, ms);
    for (int k = 0; k < C; k++) {
        double mu = 0, v = 0;
        for (int m = 0; m < M; m++) mu += x[m * C + k];
        mu /= M;
        for (int m = 0; m < M; m++) v += (x[m * C + k] - mu) * (x[m * C + k] - mu);
        ref[k] = (float)mu;
        ref[C + k] = (float)v;   /* the sum of squared deviations */
    }
    check_close("conv_bn.moments", got, ref, 2 * C, 1e-5, 1e-6);
    tensor_release(ms);
    tensor_release(t);
    free(x);
}

/* c->recomputing: the running statistics and the counter stay */
static void test_recomputing(Ctx *c)
{
    CbShape s = {2, 4, 4, 4, 4, 1, 1, 0};
    c->recomputing = 1;
    CbOut u = cb_run(c, &s, DT_F32, 1, 1, 1, 0);
    c->recomputing = 0;
    float rm[4], rv[4];
    for (int k = 0; k < 4; k++) {
        rm[k] = cb_uniform(5, (size_t)k, -0.2f, 0.2f);
        rv[k] = cb_uniform(6, (size_t)k, 0.5f, 1.5f);
    }
    check_true("conv_bn.recomputing.no_update",
               u.nbt == 3 && memcmp(u.rm, rm, sizeof rm) == 0 && memcmp(u.rv, rv, sizeof rv) == 0,
               "num_batches_tracked %lld (want 3) or running statistics changed",
               (long long)u.nbt);
    cb_free(&u);
}

/* ---- a whole ResNet, unit against separate ops ---- */

static void test_resnet(Ctx *c)
{
    const int depths[2] = {50, 18};
    for (int d = 0; d < 2; d++)
        for (int rc = 0; rc < 2; rc++) {
            char name[128], tag[64];
            snprintf(tag, sizeof tag, "resnet%d%s", depths[d], rc ? ".recompute" : "");
            CbNet r = cb_net_step(c, depths[d], 4, 64, 0, rc);
            CbNet u = cb_net_step(c, depths[d], 4, 64, 1, rc);
            snprintf(name, sizeof name, "conv_bn.%s.loss", tag);
            check_close(name, &u.loss, &r.loss, 1, 1e-5, 1e-5);
            /* a narrow, deep net at a small batch amplifies a last-bit
             * difference of one invstd (from the f32 m2 here, the double
             * one there) in its first layers' gradients: the whole
             * vector's relative distance is the measure (an element of the
             * stem's weight gradient moves by ~0.3% between the two) */
            snprintf(name, sizeof name, "conv_bn.%s.grads", tag);
            check_rel_norm(name, u.grad, r.grad, r.n, 1e-4);
            snprintf(name, sizeof name, "conv_bn.%s.running_stats", tag);
            check_close(name, u.bufs, r.bufs, r.nb, 1e-5, 1e-5);
            snprintf(name, sizeof name, "conv_bn.%s.eval_logits", tag);
            check_close(name, u.logits, r.logits, r.nl, 1e-5, 1e-4);
            cb_net_free(&r);
            cb_net_free(&u);
        }
}

/* ---- refusals ---- */

static void child_bad_stats(void *arg)
{
    (void)arg;
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    float v[32] = {0}, one[4] = {1, 1, 1, 1};
    for (int i = 0; i < 32; i++) v[i] = (float)i;
    Tensor *y = tensor_from_f32(&c, v, DT_F32, 4, (int64_t[]){2, 2, 2, 4});
    Tensor *w = tensor_from_f32(&c, v, DT_F32, 4, (int64_t[]){2, 1, 1, 4});
    Tensor *g = tensor_from_f32(&c, one, DT_F32, 1, (int64_t[]){4});
    Tensor *st = tensor_from_f32(&c, v, DT_F32, 2, (int64_t[]){2, 3});
    BnArgs bn = {g, g, NULL, NULL, NULL, 1, 0.1f, 1e-5f};
    op_bn_relu_conv(&c, y, st, &bn, w, 1, 0, NULL);
}

static void child_no_gamma(void *arg)
{
    (void)arg;
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    float v[32] = {0};
    Tensor *y = tensor_from_f32(&c, v, DT_F32, 4, (int64_t[]){2, 2, 2, 4});
    Tensor *w = tensor_from_f32(&c, v, DT_F32, 4, (int64_t[]){2, 1, 1, 4});
    BnArgs bn = {NULL, NULL, NULL, NULL, NULL, 1, 0.1f, 1e-5f};
    op_bn_relu_conv(&c, y, NULL, &bn, w, 1, 0, NULL);
}

static void test_refusals(void)
{
    char buf[2048];
    int st = check_run_child(child_bad_stats, NULL, buf, sizeof buf);
    check_true("conv_bn.refuses_bad_stats",
               st == 1 && strstr(buf, "statistics") && strstr(buf, "f32 [2, 4]"),
               "status %d, message: %s", st, buf);
    st = check_run_child(child_no_gamma, NULL, buf, sizeof buf);
    check_true("conv_bn.refuses_no_gamma",
               st == 1 && strstr(buf, "needs gamma and beta") && strstr(buf, "op_batchnorm"),
               "status %d, message: %s", st, buf);
}

int main(void)
{
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    test_moments(&c);
    test_unit(&c);
    test_autocast(&c);
    test_recomputing(&c);
    test_resnet(&c);
    test_refusals();
    ctx_free(&c);
    return check_summary();
}
