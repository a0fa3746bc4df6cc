/* test_linear_fp8.c — the FP8 Linear (ops/linear_fp8.h) on the CPU reference:
 *   - forward: y = deq(e4m3(x s_x)) deq(e4m3(w s_w))^T + bias, against a
 *     double-precision loop over the same FP8 values (built here from
 *     fp8_from_f32 / fp8_to_f32 element by element);
 *   - backward from dy = G (placed as y's gradient): dx, dw against
 *     the same loop over deq(e5m2(G s_g)), db = sum_r G (unrounded);
 *     accumulation into an existing gradient (a second micro-batch);
 *   - the recipe: amaxes recorded (the max over both micro-batches), scales
 *     after fp8_recipe_step = fmt_max / amax (margin 0) and 2^-margin of it,
 *     amaxes zeroed, the next step's casts using the new scale; a history
 *     longer than one step keeps the larger old amax; an inf in x is an
 *     overflow: flagged, recorded as 0, the scale kept;
 *   - saturation: with scale 1, |x| > 448 reads as 448;
 *   - under bf16 autocast y is bf16 and equals the f32 result rounded (for an
 *     x that bf16 holds exactly: autocast casts x to bf16 before the FP8 cast).
 *   - training: BERT-tiny on synthetic tokens, 30 AdamW steps (q, k, v as one
 *     FP8 Linear, the default, and as three, CTRAIN_QKV_PROJ_FP8=0), --precision
 *     fp8 against bf16 through the ctrain binary: the interval losses agree
 *     within 3% at every report (FP8's rounding moves the curve, the
 *     learning does not change); a training checkpoint keeps the scales and
 *     histories (3 steps, resume to 6: the losses of 6 straight, bit for
 *     bit); fp8 on a model without FP8 layers is refused with a hint.
 * Tolerance: the op's f32 GEMM against the double loop over identical FP8
 * operands differs only by f32 rounding of K-term sums: 1e-5 relative to
 * sum |a b| (here <= 1e-5 * K * max|a b|, K <= 96).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "cli_util.h"
#include "engine/autograd.h"
#include "ops/fp8.h"
#include "ops/linear_fp8.h"
#include "ops/ops.h"

static Tensor *mk(Ctx *c, const float *h, int ndim, const int64_t *shape, int grad)
{
    Tensor *t = tensor_from_f32(c, h, DT_F32, ndim, shape);
    t->requires_grad = grad;
    return t;
}

static float rnd(float lo, float hi)
{
    return lo + (hi - lo) * (float)rand() / (float)RAND_MAX;
}

/* What the FP8 GEMM reads for value v at scale s: deq(q(v s)). */
static double deq(float v, float s, Fp8Format f)
{
    return (double)fp8_to_f32(fp8_from_f32(v * s, f), f) / (double)s;
}

/* Largest |got - want| / (1e-5 * bound + 1e-30), <= 1 passes. */
static int close_to(const float *got, const double *want, const double *bound, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i]) <= 1e-5 * bound[i] + 1e-30)) {
            printf("    [%zu] got %.9g want %.9g (bound %.3g)\n", i, (double)got[i], want[i],
                   bound[i]);
            return 0;
        }
    return 1;
}

typedef struct Case {
    int R, In, Out;
    float *x, *w, *b, *g;
} Case;

static void case_new(Case *k, int R, int In, int Out, float xr, float gr)
{
    k->R = R; k->In = In; k->Out = Out;
    k->x = malloc(sizeof(float) * (size_t)R * In);
    k->w = malloc(sizeof(float) * (size_t)Out * In);
    k->b = malloc(sizeof(float) * (size_t)Out);
    k->g = malloc(sizeof(float) * (size_t)R * Out);
    for (int i = 0; i < R * In; i++) k->x[i] = rnd(-xr, xr);
    for (int i = 0; i < Out * In; i++) k->w[i] = rnd(-0.2f, 0.2f);
    for (int i = 0; i < Out; i++) k->b[i] = rnd(-1, 1);
    for (int i = 0; i < R * Out; i++) k->g[i] = rnd(-gr, gr);
}

static void case_free(Case *k) { free(k->x); free(k->w); free(k->b); free(k->g); }

/* One forward + backward of the op with dy = G placed as y's gradient; y
 * copied out; the gradients left in tx, tw, tb. */
static void run_op(Ctx *c, Fp8Recipe *r, int layer, const Case *k, Tensor *tx, Tensor *tw,
                   Tensor *tb, float *y_out)
{
    Tensor *y = op_linear_fp8(c, tx, tw, tb, r, layer);
    if (y_out) memcpy(y_out, y->data, sizeof(float) * (size_t)k->R * k->Out);
    y->grad = tensor_from_f32(c, k->g, DT_F32, 2, (int64_t[]){k->R, k->Out});
    ad_backward_from(c, y);
    tensor_release(y);
}

/* C [M, N] = sum_k deq(A)(m, k) deq(B)(k, n) in double, with bound the sum
 * of |products|; element (m, k) of A at A[m am + k ak], (k, n) of B at
 * B[k bk + n bn]. */
static void deq_gemm(double *C, double *bound, const float *A, float sa, Fp8Format fa, int am,
                     int ak, const float *B, float sb, Fp8Format fb, int bk, int bn, int M, int N,
                     int K)
{
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double s = 0, a = 0;
            for (int kk = 0; kk < K; kk++) {
                double p = deq(A[m * am + kk * ak], sa, fa) * deq(B[kk * bk + n * bn], sb, fb);
                s += p;
                a += fabs(p);
            }
            C[m * N + n] = s;
            bound[m * N + n] = a;
        }
}

/* The references at scales sx, sw, sg: y, dx, dw, db and the bounds. */
static void reference(const Case *k, float sx, float sw, float sg, double *y, double *yb, double *dx,
                      double *dxb, double *dw, double *dwb, double *db)
{
    const int R = k->R, In = k->In, Out = k->Out;
    const Fp8Format E4 = FP8_E4M3, E5 = FP8_E5M2;
    deq_gemm(y, yb, k->x, sx, E4, In, 1, k->w, sw, E4, 1, In, R, Out, In);       /* x w^T */
    for (int i = 0; i < R; i++)
        for (int o = 0; o < Out; o++) {
            y[i * Out + o] += k->b[o];
            yb[i * Out + o] += fabs((double)k->b[o]);
        }
    deq_gemm(dx, dxb, k->g, sg, E5, Out, 1, k->w, sw, E4, In, 1, R, In, Out);     /* dy w */
    deq_gemm(dw, dwb, k->g, sg, E5, 1, Out, k->x, sx, E4, In, 1, Out, In, R);     /* dy^T x */
    for (int o = 0; o < Out; o++) {
        double s = 0;
        for (int i = 0; i < R; i++) s += k->g[i * Out + o];
        db[o] = s;
    }
}

static float maxabs(const float *v, size_t n)
{
    float m = 0;
    for (size_t i = 0; i < n; i++) m = fmaxf(m, fabsf(v[i]));
    return m;
}

/* Forward, backward and two recipe steps on one shape. */
static void test_shape(Ctx *c, int R, int In, int Out)
{
    char name[128];
    Case k;
    case_new(&k, R, In, Out, 3.0f, 1e-3f);
    const size_t ny = (size_t)R * Out, nx = (size_t)R * In, nw = (size_t)Out * In;
    double *y = malloc(sizeof(double) * ny), *yb = malloc(sizeof(double) * ny);
    double *dx = malloc(sizeof(double) * nx), *dxb = malloc(sizeof(double) * nx);
    double *dw = malloc(sizeof(double) * nw), *dwb = malloc(sizeof(double) * nw);
    double *db = malloc(sizeof(double) * (size_t)Out);
    float *got = malloc(sizeof(float) * ny);
    Fp8Recipe *r = fp8_recipe_new(c, 3, 4, 0);
    const int layer = 1;   /* slots 2, 3 forward; 1 backward */

    /* step 0: scales 1 */
    Tensor *tx = mk(c, k.x, 2, (int64_t[]){R, In}, 1), *tw = mk(c, k.w, 2, (int64_t[]){Out, In}, 1);
    Tensor *tb = mk(c, k.b, 1, (int64_t[]){Out}, 1);
    run_op(c, r, layer, &k, tx, tw, tb, got);
    reference(&k, 1, 1, 1, y, yb, dx, dxb, dw, dwb, db);
    snprintf(name, sizeof name, "linear_fp8.y %dx%dx%d (scale 1)", R, In, Out);
    check_true(name, close_to(got, y, yb, ny), "y differs from the FP8 reference");
    snprintf(name, sizeof name, "linear_fp8.dx %dx%dx%d", R, In, Out);
    check_true(name, close_to((float *)tx->grad->data, dx, dxb, nx), "dx differs");
    snprintf(name, sizeof name, "linear_fp8.dw %dx%dx%d", R, In, Out);
    check_true(name, close_to((float *)tw->grad->data, dw, dwb, nw), "dw differs");
    double *dbb = malloc(sizeof(double) * (size_t)Out);
    for (int o = 0; o < Out; o++) dbb[o] = R;
    snprintf(name, sizeof name, "linear_fp8.db %dx%dx%d (dy unrounded)", R, In, Out);
    check_true(name, close_to((float *)tb->grad->data, db, dbb, (size_t)Out), "db differs");

    /* a second micro-batch of the same step adds into the gradients */
    float *dw1 = malloc(sizeof(float) * nw);
    memcpy(dw1, tw->grad->data, sizeof(float) * nw);
    run_op(c, r, layer, &k, tx, tw, tb, NULL);
    for (size_t i = 0; i < nw; i++) { dw[i] = 2.0 * dw1[i]; dwb[i] = 2 * fabs((double)dw1[i]) + 1e-6; }
    snprintf(name, sizeof name, "linear_fp8.dw accumulates %dx%dx%d", R, In, Out);
    check_true(name, close_to((float *)tw->grad->data, dw, dwb, nw), "the second micro-batch did not add");

    Fp8TensorState s;
    fp8_recipe_read(r, 0, 2 * layer, &s);
    const float ax = maxabs(k.x, nx), aw = maxabs(k.w, nw), ag = maxabs(k.g, ny);
    check_true("linear_fp8.amax_x", s.amax == ax && s.scale == 1.0f, "amax %g (want %g), scale %g",
               (double)s.amax, (double)ax, (double)s.scale);
    fp8_recipe_read(r, 1, layer, &s);
    check_true("linear_fp8.amax_dy", s.amax == ag, "amax %g want %g", (double)s.amax, (double)ag);
    fp8_recipe_read(r, 0, 0, &s);
    check_true("linear_fp8.other_slots_untouched", s.amax == 0.0f && s.scale == 1.0f,
               "slot 0: amax %g scale %g", (double)s.amax, (double)s.scale);

    /* the update: scale = max / amax; the next step casts with it */
    fp8_recipe_step(c, r);
    Fp8TensorState sx, sw, sg;
    fp8_recipe_read(r, 0, 2 * layer, &sx);
    fp8_recipe_read(r, 0, 2 * layer + 1, &sw);
    fp8_recipe_read(r, 1, layer, &sg);
    check_true("linear_fp8.scales_after_step", sx.scale == FP8_E4M3_MAX / ax &&
               sw.scale == FP8_E4M3_MAX / aw && sg.scale == FP8_E5M2_MAX / ag && sx.amax == 0.0f &&
               sg.amax == 0.0f && sx.scale_inv == 1.0f / sx.scale,
               "scales %g %g %g (want %g %g %g), amaxes %g %g", (double)sx.scale, (double)sw.scale,
               (double)sg.scale, (double)(FP8_E4M3_MAX / ax), (double)(FP8_E4M3_MAX / aw),
               (double)(FP8_E5M2_MAX / ag), (double)sx.amax, (double)sg.amax);
    tensor_zero(tx->grad);
    tensor_zero(tw->grad);
    tensor_zero(tb->grad);
    run_op(c, r, layer, &k, tx, tw, tb, got);
    reference(&k, sx.scale, sw.scale, sg.scale, y, yb, dx, dxb, dw, dwb, db);
    snprintf(name, sizeof name, "linear_fp8.y %dx%dx%d (delayed scales)", R, In, Out);
    check_true(name, close_to(got, y, yb, ny), "y differs at the updated scales");
    snprintf(name, sizeof name, "linear_fp8.dw %dx%dx%d (delayed scales)", R, In, Out);
    check_true(name, close_to((float *)tw->grad->data, dw, dwb, nw), "dw differs at the updated scales");

    /* a history of 4: step 2's smaller x keeps step 1's amax in the max */
    fp8_recipe_step(c, r);
    for (size_t i = 0; i < nx; i++) k.x[i] *= 0.25f;
    Tensor *tx2 = mk(c, k.x, 2, (int64_t[]){R, In}, 1);
    run_op(c, r, layer, &k, tx2, tw, tb, NULL);
    fp8_recipe_step(c, r);
    fp8_recipe_read(r, 0, 2 * layer, &s);
    check_true("linear_fp8.history_max", s.scale == FP8_E4M3_MAX / ax, "scale %g, want %g (the "
               "older, larger amax still in the history)", (double)s.scale, (double)(FP8_E4M3_MAX / ax));

    tensor_release(tx); tensor_release(tx2); tensor_release(tw); tensor_release(tb);
    fp8_recipe_free(r);
    free(y); free(yb); free(dx); free(dxb); free(dw); free(dwb); free(db); free(dbb); free(dw1);
    free(got);
    case_free(&k);
}

/* inf in x: an overflow, recorded as 0, the scale kept; |x| > 448 saturates */
static void test_overflow_and_saturation(Ctx *c)
{
    Fp8Recipe *r = fp8_recipe_new(c, 1, 2, 1);
    float x[16], w[16] = {0};
    for (int i = 0; i < 16; i++) x[i] = 1.0f;
    x[3] = INFINITY;
    w[0] = 1.0f;   /* y[., 0] = x[., 0] */
    Tensor *tx = mk(c, x, 2, (int64_t[]){1, 16}, 0), *tw = mk(c, w, 2, (int64_t[]){1, 16}, 0);
    Tensor *y = op_linear_fp8(c, tx, tw, NULL, r, 0);
    tensor_release(y);
    fp8_recipe_step(c, r);
    Fp8TensorState s;
    fp8_recipe_read(r, 0, 0, &s);
    check_true("linear_fp8.overflow_flagged", s.overflow == 1 && s.scale == 1.0f,
               "overflow %d scale %g (want 1, 1: the scale kept)", s.overflow, (double)s.scale);
    fp8_recipe_read(r, 0, 1, &s);
    check_true("linear_fp8.margin", s.scale == FP8_E4M3_MAX / 2.0f && s.overflow == 0,
               "w's scale %g (want 448 / 2^1 with margin 1), overflow %d", (double)s.scale, s.overflow);
    tensor_release(tx);
    tensor_release(tw);
    fp8_recipe_free(r);

    r = fp8_recipe_new(c, 1, 1, 0);
    x[0] = 1000.0f;
    tx = mk(c, x, 2, (int64_t[]){1, 16}, 0);
    tw = mk(c, w, 2, (int64_t[]){1, 16}, 0);
    y = op_linear_fp8(c, tx, tw, NULL, r, 0);
    check_true("linear_fp8.saturates", ((float *)y->data)[0] == 448.0f, "y %g, want 448 (1000 "
               "saturated to E4M3's largest finite)", (double)((float *)y->data)[0]);
    tensor_release(y);
    tensor_release(tx);
    tensor_release(tw);
    fp8_recipe_free(r);
}

/* under bf16 autocast: y is bf16, the f32 result rounded */
static void test_autocast(Ctx *c)
{
    Case k;
    case_new(&k, 8, 32, 16, 2.0f, 1e-2f);
    for (int i = 0; i < 8 * 32; i++) {   /* x exact in bf16: autocast's cast of x changes nothing */
        uint16_t h;
        dtype_convert(&h, DT_BF16, &k.x[i], DT_F32, 1);
        dtype_convert(&k.x[i], DT_F32, &h, DT_BF16, 1);
    }
    Fp8Recipe *r = fp8_recipe_new(c, 1, 1, 0);
    Tensor *tx = mk(c, k.x, 2, (int64_t[]){8, 32}, 0), *tw = mk(c, k.w, 2, (int64_t[]){16, 32}, 0);
    Tensor *tb = mk(c, k.b, 1, (int64_t[]){16}, 0);
    Tensor *y32 = op_linear_fp8(c, tx, tw, tb, r, 0);
    DType was = c->autocast;
    c->autocast = DT_BF16;
    Tensor *y16 = op_linear_fp8(c, tx, tw, tb, r, 0);
    c->autocast = was;
    float a[128], b[128];
    tensor_to_f32(a, y32);
    tensor_to_f32(b, y16);
    int same = y16->dtype == DT_BF16;
    for (int i = 0; i < 128 && same; i++) {
        uint16_t h;
        dtype_convert(&h, DT_BF16, &a[i], DT_F32, 1);
        float back;
        dtype_convert(&back, DT_F32, &h, DT_BF16, 1);
        same = back == b[i];
    }
    check_true("linear_fp8.bf16_autocast", same, "y under bf16 autocast is not the f32 y rounded");
    tensor_release(y32); tensor_release(y16); tensor_release(tx); tensor_release(tw); tensor_release(tb);
    fp8_recipe_free(r);
    case_free(&k);
}

/* op_linear_fp8_gelu on the CPU is op_gelu then op_linear_fp8 (the op's
 * CPU path is that composition; the GPU's fused kernel is compared with it
 * in tests/gpu_linear_fp8): the same y, gradients and recipe state, bit
 * for bit. */
static void test_gelu(Ctx *c)
{
    Case k;
    case_new(&k, 8, 32, 16, 3.0f, 1e-2f);
    float y[2][128], dh[2][256], dw[2][512], db[2][16], amax[2][3];
    for (int fused = 0; fused < 2; fused++) {
        Fp8Recipe *r = fp8_recipe_new(c, 1, 2, 0);
        Tensor *th = mk(c, k.x, 2, (int64_t[]){8, 32}, 1);
        Tensor *tw = mk(c, k.w, 2, (int64_t[]){16, 32}, 1), *tb = mk(c, k.b, 1, (int64_t[]){16}, 1);
        Tensor *t;
        if (fused) {
            t = op_linear_fp8_gelu(c, th, tw, tb, r, 0);
        } else {
            Tensor *g = op_gelu(c, th);
            t = op_linear_fp8(c, g, tw, tb, r, 0);
            tensor_release(g);
        }
        t->grad = mk(c, k.g, 2, (int64_t[]){8, 16}, 0);
        tensor_to_f32(y[fused], t);
        ad_backward_from(c, t);
        tensor_release(t);
        tensor_to_f32(dh[fused], th->grad);
        tensor_to_f32(dw[fused], tw->grad);
        tensor_to_f32(db[fused], tb->grad);
        Fp8TensorState st;
        for (int j = 0; j < 3; j++) {
            fp8_recipe_read(r, j / 2, j % 2, &st);
            amax[fused][j] = st.amax;
        }
        tensor_release(th); tensor_release(tw); tensor_release(tb);
        fp8_recipe_free(r);
    }
    check_true("linear_fp8_gelu.cpu_is_the_composition",
               !memcmp(y[0], y[1], sizeof y[0]) && !memcmp(dh[0], dh[1], sizeof dh[0]) &&
                   !memcmp(dw[0], dw[1], sizeof dw[0]) && !memcmp(db[0], db[1], sizeof db[0]) &&
                   !memcmp(amax[0], amax[1], sizeof amax[0]),
               "y, dh, dw, db or the amaxes differ from op_gelu + op_linear_fp8");
    case_free(&k);
}

/* Three Linear layers on one x (BERT's q, k, v) through op_linear_fp8_shared
 * against three op_linear_fp8 calls, over two recipe steps: the same y's,
 * dx, dw's, db's and x scale, bit for bit (the separate calls' three x
 * slots see the same amaxes, so cast with the same scales), and with
 * sharing the later layers' x slots are never recorded. */
static void test_shared(Ctx *c)
{
    enum { R = 8, IN = 32, OUT = 16 };
    Case k[3];
    for (int j = 0; j < 3; j++) case_new(&k[j], R, IN, OUT, 3.0f, 1e-2f);
    float y[2][2][3][R * OUT], dx[2][2][R * IN], dw[2][2][3][OUT * IN], db[2][2][3][OUT];
    float sx[2][2], amax_k[2][2];
    for (int mode = 0; mode < 2; mode++) {   /* 0 separate, 1 shared */
        Fp8Recipe *r = fp8_recipe_new(c, 3, 4, 0);
        Tensor *tx = mk(c, k[0].x, 2, (int64_t[]){R, IN}, 1), *tw[3], *tb[3];
        for (int j = 0; j < 3; j++) {
            tw[j] = mk(c, k[j].w, 2, (int64_t[]){OUT, IN}, 1);
            tb[j] = mk(c, k[j].b, 1, (int64_t[]){OUT}, 1);
        }
        for (int step = 0; step < 2; step++) {
            Fp8SharedX xs = {0};
            Tensor *t[3];
            for (int j = 0; j < 3; j++) {
                t[j] = mode ? op_linear_fp8_shared(c, tx, tw[j], tb[j], r, j, &xs)
                            : op_linear_fp8(c, tx, tw[j], tb[j], r, j);
                memcpy(y[mode][step][j], t[j]->data, sizeof y[mode][step][j]);
            }
            fp8_shared_x_release(&xs);
            Tensor *s01 = op_add(c, t[0], t[1]), *sum = op_add(c, s01, t[2]);
            sum->grad = mk(c, k[0].g, 2, (int64_t[]){R, OUT}, 0);
            ad_backward_from(c, sum);
            memcpy(dx[mode][step], tx->grad->data, sizeof dx[mode][step]);
            for (int j = 0; j < 3; j++) {
                memcpy(dw[mode][step][j], tw[j]->grad->data, sizeof dw[mode][step][j]);
                memcpy(db[mode][step][j], tb[j]->grad->data, sizeof db[mode][step][j]);
                tensor_release(t[j]);
            }
            tensor_release(s01);
            tensor_release(sum);
            Fp8TensorState st;
            fp8_recipe_read(r, 0, 0, &st);
            sx[mode][step] = st.scale;
            fp8_recipe_read(r, 0, 2, &st);   /* layer 1's x slot */
            amax_k[mode][step] = st.amax;
            fp8_recipe_step(c, r);
        }
        tensor_release(tx);
        for (int j = 0; j < 3; j++) {
            tensor_release(tw[j]);
            tensor_release(tb[j]);
        }
        fp8_recipe_free(r);
    }
    check_true("linear_fp8_shared.same_as_separate_casts",
               !memcmp(y[0], y[1], sizeof y[0]) && !memcmp(dx[0], dx[1], sizeof dx[0]) &&
                   !memcmp(dw[0], dw[1], sizeof dw[0]) && !memcmp(db[0], db[1], sizeof db[0]) &&
                   !memcmp(sx[0], sx[1], sizeof sx[0]) && sx[0][1] != 1.0f,
               "y, dx, dw, db or x's scale differ (x scale after step 1: %g separate, %g shared)",
               (double)sx[0][1], (double)sx[1][1]);
    check_true("linear_fp8_shared.later_x_slots_unrecorded",
               amax_k[0][0] > 0.0f && amax_k[1][0] == 0.0f && amax_k[1][1] == 0.0f,
               "layer 1's x amax: %g separate, %g / %g shared", (double)amax_k[0][0],
               (double)amax_k[1][0], (double)amax_k[1][1]);
    for (int j = 0; j < 3; j++) case_free(&k[j]);
}

/* The losses of the step records of a --log file, in order; their count. */
static int log_losses(const char *path, double *loss, int max)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    int n = 0;
    while (f && n < max && fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "\"event\":\"step\"") ? strstr(line, "\"loss\":") : NULL;
        if (p) loss[n++] = atof(p + 7);
    }
    if (f) fclose(f);
    return n;
}

static void test_training(void)
{
    char cmd[1024], out[4096], path[2][64];
    double loss[2][8];
    int n[2];
    const char *prec[2] = {"bf16", "fp8"};
    for (int k = 0; k < 2; k++) {
        snprintf(path[k], sizeof path[k], "/tmp/ctrain_fp8_%d_%s.jsonl", (int)getpid(), prec[k]);
        snprintf(cmd, sizeof cmd, "%s train --model bert-tiny --device cpu --data synthetic --seq 16 "
                 "--batch 8 --steps 30 --optim adamw --lr 1e-3 --log-every 10 --dropout 0 "
                 "--precision %s --log %s 2>&1", bin(), prec[k], path[k]);
        int st = run(cmd, out, sizeof out);
        n[k] = st == 0 ? log_losses(path[k], loss[k], 8) : 0;
        if (st) printf("%s\n", out);
        remove(path[k]);
    }
    int ok = n[0] == 3 && n[1] == 3;
    for (int i = 0; ok && i < 3; i++) ok = fabs(loss[1][i] - loss[0][i]) <= 0.03 * loss[0][i];
    check_true("linear_fp8.bert_tiny_trains_like_bf16", ok && loss[1][2] < 0.5 * loss[1][0],
               "fp8 losses %.4f %.4f %.4f, bf16 %.4f %.4f %.4f (%d, %d records)", loss[1][0],
               loss[1][1], loss[1][2], loss[0][0], loss[0][1], loss[0][2], n[1], n[0]);
    /* q, k, v as three FP8 Linears (CTRAIN_QKV_PROJ_FP8=0: a scale each; the default joins
     * them, one scale for Wqkv, one for dqkv): trains like bf16 too */
    {
        char pj[64];
        double lj[8] = {0};
        snprintf(pj, sizeof pj, "/tmp/ctrain_fp8_%d_qkv.jsonl", (int)getpid());
        snprintf(cmd, sizeof cmd, "CTRAIN_QKV_PROJ_FP8=0 %s train --model bert-tiny --device cpu "
                 "--data synthetic --seq 16 --batch 8 --steps 30 --optim adamw --lr 1e-3 "
                 "--log-every 10 --dropout 0 --precision fp8 --log %s 2>&1", bin(), pj);
        int st = run(cmd, out, sizeof out);
        int nj = st == 0 ? log_losses(pj, lj, 8) : 0;
        if (st) printf("%s\n", out);
        remove(pj);
        int okj = nj == 3 && n[0] == 3;
        for (int i = 0; okj && i < 3; i++) okj = fabs(lj[i] - loss[0][i]) <= 0.03 * loss[0][i];
        check_true("linear_fp8.bert_tiny_qkv_apart_trains_like_bf16", okj && lj[2] < 0.5 * lj[0],
                   "three-Linear fp8 losses %.4f %.4f %.4f, bf16 %.4f %.4f %.4f (%d records)", lj[0],
                   lj[1], lj[2], loss[0][0], loss[0][1], loss[0][2], nj);
    }
    /* a training checkpoint keeps the scales: 3 steps + resume to 6 = 6 straight, bit for bit */
    char ck[64], la[64], lb[64];
    const char *base = "train --model bert-tiny --device cpu --data synthetic --seq 16 --batch 8 "
                       "--optim adamw --lr 1e-3 --log-every 1 --precision fp8";
    snprintf(ck, sizeof ck, "/tmp/ctrain_fp8_%d.ckpt", (int)getpid());
    snprintf(la, sizeof la, "/tmp/ctrain_fp8_%d_a.jsonl", (int)getpid());
    snprintf(lb, sizeof lb, "/tmp/ctrain_fp8_%d_b.jsonl", (int)getpid());
    snprintf(cmd, sizeof cmd, "%s %s --steps 6 --log %s >/dev/null 2>&1 && %s %s --steps 3 "
             "--save-every 3 --save %s >/dev/null 2>&1 && %s %s --steps 6 --resume %s --log %s 2>&1",
             bin(), base, la, bin(), base, ck, bin(), base, ck, lb);
    int st = run(cmd, out, sizeof out);
    double a[8], b[8];
    int na = log_losses(la, a, 8), nb = log_losses(lb, b, 8);
    check_true("linear_fp8.resume_bit_exact", st == 0 && na == 6 && nb == 3 && a[3] == b[0] &&
               a[4] == b[1] && a[5] == b[2] && !strstr(out, "no FP8 scales"),
               "exit %d, %d and %d records: steps 4-6 %.9g %.9g %.9g straight, %.9g %.9g %.9g "
               "resumed: %s", st, na, nb, a[3], a[4], a[5], b[0], b[1], b[2], out);
    remove(ck);
    remove(la);
    remove(lb);

    /* --trace says the scales the next step casts with */
    snprintf(cmd, sizeof cmd, "%s %s --steps 2 --trace 2>&1", bin(), base);
    st = run(cmd, out, sizeof out);
    check_true("linear_fp8.trace_scales", st == 0 && strstr(out, "fp8 scales of the first FP8 layer: x ")
               && strstr(out, "tensors overflowed so far 0"), "exit %d: %s", st, out);

    snprintf(cmd, sizeof cmd, "%s train --model mlp --device cpu --steps 1 --precision fp8 2>&1",
             bin());
    st = run(cmd, out, sizeof out);
    check_true("linear_fp8.refused_without_fp8_layers", st == 1 && strstr(out, "no FP8 Linear layers")
               && strstr(out, "hint: use --precision bf16"), "exit %d: %s", st, out);
}

int main(void)
{
    srand(8);
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    test_shape(&c, 4, 16, 8);
    test_shape(&c, 33, 96, 40);
    test_overflow_and_saturation(&c);
    test_autocast(&c);
    test_gelu(&c);
    test_shared(&c);
    ctx_free(&c);
    test_training();
    return check_summary();
}
