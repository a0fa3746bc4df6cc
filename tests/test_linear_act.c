/* test_linear_act.c — op_linear_act (ops/ops.h: y = act(x w^T + b) as one
 * node) on the CPU against op_linear then op_act, through autograd:
 *
 *   h = x w^T + b,  y = act(h),  loss = sum(y * G)
 *   so  dh = G act'(h),  db = sum_r dh,  dx = dh w,  dw = dh^T x
 *
 * The CPU op is that composition (the same reference functions in the same
 * order), so y, dx, dw and db must be equal bit for bit: relu and gelu; 2-D
 * and 3-D x; no bias; two backward passes into the same parameter
 * gradients (a second micro-batch accumulates); under bf16 autocast (y in
 * bf16, the f32 gradients of the parameters). The CUDA path, whose
 * backward may sum db in the activation's pass, is compared with this in
 * tests/gpu_linear_act. The op's backward writes dh over h: its peak
 * memory is one h below the composition's.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine/autograd.h"
#include "engine/mem.h"
#include "ops/ops.h"

typedef struct {
    int ndim;
    int64_t xs[3];   /* x's shape; the last is In */
    int out;
    int bias;
    DType autocast;  /* DT_F32: off */
} Case;

static Tensor *mk(Ctx *c, const float *h, int ndim, const int64_t *shape, int grad)
{
    Tensor *t = tensor_from_f32(c, h, DT_F32, ndim, shape);
    t->requires_grad = grad;
    return t;
}

/* One run: the op (fused 1) or the two ops (0); two backward passes. The
 * results into y, dx, dw, db (host f32). */
static void run(Ctx *c, const Case *k, ActKind act, int fused, const float *x, const float *w,
                const float *b, const float *G, float *y, float *dx, float *dw, float *db)
{
    const int64_t in = k->xs[k->ndim - 1];
    int64_t ys[3];
    for (int i = 0; i < k->ndim; i++) ys[i] = k->xs[i];
    ys[k->ndim - 1] = k->out;
    Tensor *tx = mk(c, x, k->ndim, k->xs, 1), *tw = mk(c, w, 2, (int64_t[]){k->out, in}, 1);
    Tensor *tb = k->bias ? mk(c, b, 1, (int64_t[]){k->out}, 1) : NULL;
    const DType was = c->autocast;
    c->autocast = k->autocast == DT_F32 ? was : k->autocast;
    for (int pass = 0; pass < 2; pass++) {
        Tensor *t;
        if (fused) {
            t = op_linear_act(c, tx, tw, tb, act);
        } else {
            Tensor *h = op_linear(c, tx, tw, tb);
            t = op_act(c, h, act);
            tensor_release(h);
        }
        if (pass == 0) tensor_to_f32(y, t);
        t->grad = tensor_from_f32(c, G, t->dtype, k->ndim, ys);
        ad_backward_from(c, t);
        tensor_release(t);
    }
    c->autocast = was;
    tensor_to_f32(dx, tx->grad);
    tensor_to_f32(dw, tw->grad);
    if (tb) tensor_to_f32(db, tb->grad);
    tensor_release(tx); tensor_release(tw);
    if (tb) tensor_release(tb);
}

static void test_case(Ctx *c, const Case *k, ActKind act)
{
    const int64_t in = k->xs[k->ndim - 1];
    size_t rows = 1;
    for (int i = 0; i < k->ndim - 1; i++) rows *= (size_t)k->xs[i];
    const size_t nx = rows * in, nw = (size_t)k->out * in, ny = rows * k->out;
    float *x = malloc(nx * 4), *w = malloc(nw * 4), *b = malloc(k->out * 4), *G = malloc(ny * 4);
    check_fill(x, nx, -2.0f, 2.0f);
    check_fill(w, nw, -0.5f, 0.5f);
    check_fill(b, k->out, -1.0f, 1.0f);
    check_fill(G, ny, -1.0f, 1.0f);
    float *y[2], *dx[2], *dw[2], *db[2];
    for (int f = 0; f < 2; f++) {
        y[f] = calloc(ny, 4); dx[f] = calloc(nx, 4); dw[f] = calloc(nw, 4);
        db[f] = calloc(k->out, 4);
        run(c, k, act, f, x, w, b, G, y[f], dx[f], dw[f], db[f]);
    }
    char name[160];
    snprintf(name, sizeof name, "linear_act.%s.%s.%dd_%lldx%d%s", act == ACT_RELU ? "relu" : "gelu",
             k->autocast == DT_BF16 ? "bf16" : "f32", k->ndim, (long long)in, k->out,
             k->bias ? "" : "_nobias");
    int nz = 0;   /* the activation must not have zeroed everything (relu) */
    for (size_t i = 0; i < ny; i++) nz += y[0][i] != 0.0f;
    check_true(name,
               !memcmp(y[0], y[1], ny * 4) && !memcmp(dx[0], dx[1], nx * 4) &&
                   !memcmp(dw[0], dw[1], nw * 4) && !memcmp(db[0], db[1], k->out * 4) && nz > 0,
               "y %d dx %d dw %d db %d differ from op_linear + op_act (nonzero y: %d)",
               memcmp(y[0], y[1], ny * 4) != 0, memcmp(dx[0], dx[1], nx * 4) != 0,
               memcmp(dw[0], dw[1], nw * 4) != 0, memcmp(db[0], db[1], k->out * 4) != 0, nz);
    for (int f = 0; f < 2; f++) { free(y[f]); free(dx[f]); free(dw[f]); free(db[f]); }
    free(x); free(w); free(b); free(G);
}

/* The op's own arithmetic, once: h and y from the definition, and the bias
 * gradient of one pass = sum_r G act'(h) for relu (act' is 0 or 1, so db is
 * a sum of G's entries: in row order in double, then rounded, as the CPU
 * reference sums it). */
static void test_values(Ctx *c)
{
    enum { R = 5, IN = 3, OUT = 4 };
    float x[R * IN], w[OUT * IN], b[OUT], G[R * OUT];
    check_fill(x, R * IN, -1.0f, 1.0f);
    check_fill(w, OUT * IN, -1.0f, 1.0f);
    check_fill(b, OUT, -0.5f, 0.5f);
    check_fill(G, R * OUT, -1.0f, 1.0f);
    Tensor *tx = mk(c, x, 2, (int64_t[]){R, IN}, 1), *tw = mk(c, w, 2, (int64_t[]){OUT, IN}, 1);
    Tensor *tb = mk(c, b, 1, (int64_t[]){OUT}, 1);
    Tensor *t = op_linear_act(c, tx, tw, tb, ACT_RELU);
    float y[R * OUT], db[OUT];
    double want_db[OUT] = {0};
    tensor_to_f32(y, t);
    int bad = 0;
    for (int r = 0; r < R; r++)
        for (int o = 0; o < OUT; o++) {
            double h = b[o];
            for (int i = 0; i < IN; i++) h += (double)x[r * IN + i] * w[o * IN + i];
            const double want = h > 0 ? h : 0;
            if (fabs(y[r * OUT + o] - want) > 1e-5) bad++;
            if (y[r * OUT + o] > 0.0f) want_db[o] += G[r * OUT + o];
        }
    t->grad = tensor_from_f32(c, G, DT_F32, 2, (int64_t[]){R, OUT});
    ad_backward_from(c, t);
    tensor_to_f32(db, tb->grad);
    int bad_db = 0;
    for (int o = 0; o < OUT; o++) bad_db += db[o] != (float)want_db[o];
    check_true("linear_act.relu.values", bad == 0 && bad_db == 0,
               "%d of %d outputs off the definition, %d db entries not sum_r G [h > 0]", bad,
               R * OUT, bad_db);
    tensor_release(t); tensor_release(tx); tensor_release(tw); tensor_release(tb);
}

/* What the backward of one op_linear_act (fused 1) or op_linear + op_act
 * (0) holds at its highest over what the forward left held: gelu, f32, an
 * FFN's shape (Out = 4 In), where the activation's backward is the high
 * point (dy, h and dh at once in the composition). */
static size_t bwd_peak(Ctx *c, int fused)
{
    enum { R = 64, IN = 8, OUT = 32 };
    float x[R * IN], w[OUT * IN], G[R * OUT];
    check_fill(x, R * IN, -2.0f, 2.0f);
    check_fill(w, OUT * IN, -0.5f, 0.5f);
    check_fill(G, R * OUT, -1.0f, 1.0f);
    Tensor *tx = mk(c, x, 2, (int64_t[]){R, IN}, 1), *tw = mk(c, w, 2, (int64_t[]){OUT, IN}, 1);
    Tensor *t;
    if (fused) {
        t = op_linear_act(c, tx, tw, NULL, ACT_GELU);
    } else {
        Tensor *h = op_linear(c, tx, tw, NULL);
        t = op_act(c, h, ACT_GELU);
        tensor_release(h);
    }
    t->grad = tensor_from_f32(c, G, DT_F32, 2, (int64_t[]){R, OUT});
    const size_t held = c->mem.current;
    mem_reset_peak(c);
    ad_backward_from(c, t);
    const size_t peak = c->mem.peak - held;
    tensor_release(t); tensor_release(tx); tensor_release(tw);
    return peak;
}

/* The op's backward writes dh over h (h has no other holder): its peak is
 * one h lower than the composition's, whose activation backward holds dy,
 * h and a new dh. */
static void test_dh_over_h(Ctx *c)
{
    const size_t composed = bwd_peak(c, 0), fused = bwd_peak(c, 1);
    const size_t hbytes = 64 * 32 * sizeof(float);
    check_true("linear_act.dh_over_h: the backward's peak one h below the composition's",
               composed == fused + hbytes, "peak over the forward's: composed %zu, fused %zu "
               "bytes (h is %zu)", composed, fused, hbytes);
}

int main(void)
{
    check_seed(17);
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    const Case cases[] = {
        {2, {8, 32, 0}, 16, 1, DT_F32},
        {3, {2, 5, 24}, 40, 1, DT_F32},
        {2, {7, 9, 0}, 5, 0, DT_F32},
        {2, {8, 32, 0}, 16, 1, DT_BF16},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        test_case(&c, &cases[i], ACT_RELU);
        test_case(&c, &cases[i], ACT_GELU);
    }
    test_values(&c);
    test_dh_over_h(&c);
    ctx_free(&c);
    return check_summary();
}
