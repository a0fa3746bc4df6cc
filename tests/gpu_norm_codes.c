/* gpu_norm_codes.c — add_norm making its output's FP8 codes for the Linear
 * that reads it (op_add_norm_fp8_codes; ops/linear_fp8.h, "Codes made by the
 * producer"; CTRAIN_FP8_NORM_CODES):
 *
 *   y = LayerNorm(x + dropout(z)),  t = y w^T + b (FP8),  backward from dt = G
 *
 *   1. The op, two recipe steps (scale 1, then the delayed scale), bf16 rows
 *      of 256, 512 and 1,024 (the kernel's straight-line widths):
 *      with the codes made by add_norm, y, t and every gradient (x, z,
 *      gamma, beta, w, b) and the x slot's amax and scale are the bits of
 *      op_add_norm then the Linear's own cast; the codes themselves are
 *      fp8_cast_transpose_cuda's of y at that scale, byte for byte (both
 *      ways, and the amax); add_norm made them and the Linear took them
 *      (the counters). Without autograd the codes are made at the same
 *      scale and the slot's amax is left alone. Rows the kernel does not
 *      take (not a multiple of 32; a width of 768) run the plain op: the
 *      same bits, no codes.
 *   2. BERT-mini under --precision fp8 trains to the same losses, weights and
 *      FP8 scales bit for bit with CTRAIN_FP8_NORM_CODES 1 as with 0: eager,
 *      with accumulation 2 and recompute, in a CUDA graph with an
 *      evaluation between replays, and with every second layer recomputed
 *      (a producer without autograd feeding a consumer with it); the codes
 *      were made and taken (every one, where nothing is recomputed). Codes
 *      made for one recipe's layer are not taken by another recipe's or
 *      another layer's Linear.
 * CTRAIN_ADD_NORM=fused throughout (the test's rows are below the auto
 * threshold). Needs FP8 tensor cores (sm_89 or later): skipped below.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gpu_util.h"
#include "engine/mem.h"
#include "ops/fp8.h"
#include "ops/fp8_recipe.h"
#include "ops/layernorm.h"
#include "ops/linear_fp8.h"
#include "ops/ops.h"
#include "train_run.h"

/* ---- 1. the op ---- */

typedef struct {
    float *y, *t, *g[6];   /* y, t; dx, dz, dgamma, dbeta, dw, db */
    Fp8TensorState xs;     /* the Linear's x slot after the step */
    int codes_same;        /* mode 1: add_norm's codes = the cast of y (-1: none made) */
} Out;

static float *host_of(Tensor *t)
{
    float *h = falloc(t->numel);
    tensor_to_f32(h, t);
    return h;
}

static void out_free(Out *o)
{
    free(o->y);
    free(o->t);
    for (int k = 0; k < 6; k++) free(o->g[k]);
}

/* add_norm's codes on y against fp8_cast_transpose_cuda of y at the same
 * scale: q, qt and the amax, byte for byte. */
static int codes_match(Ctx *c, Tensor *y, Fp8Recipe *r)
{
    const size_t R = tensor_rows(y), D = tensor_cols(y);
    Tensor *q = tensor_new(c, DT_U8, 1, (int64_t[]){(int64_t)(R * D)});
    Tensor *qt = tensor_new(c, DT_U8, 1, (int64_t[]){(int64_t)(R * D)});
    Tensor *am = tensor_new(c, DT_F32, 1, (int64_t[]){1});
    tensor_zero(am);
    const float *scale = fp8_scale_of(r, (float *)r->block[0]->data, 0);
    fp8_cast_transpose_cuda((uint8_t *)qt->data, (uint8_t *)q->data, (float *)am->data, y->data,
                            y->dtype, R, D, &scale[0], FP8_E4M3, c->stream);
    uint8_t *a = malloc(R * D), *b = malloc(R * D), *a2 = malloc(R * D), *b2 = malloc(R * D);
    tensor_to_host(a, q);
    tensor_to_host(b, y->fwd_codes.q);
    tensor_to_host(a2, qt);
    tensor_to_host(b2, y->fwd_codes.qt);
    float amax;
    tensor_to_host(&amax, am);
    Fp8TensorState s;
    fp8_recipe_read(r, 0, 0, &s);
    const int same = !memcmp(a, b, R * D) && !memcmp(a2, b2, R * D) &&
                     (!c->grad_enabled || amax == s.amax);
    free(a); free(b); free(a2); free(b2);
    tensor_release(q); tensor_release(qt); tensor_release(am);
    return same;
}

/* One step of mode (0: op_add_norm, 1: op_add_norm_fp8_codes) on recipe r
 * (its layer 0 is the Linear), grad on or off. */
static Out run_step(Ctx *c, Fp8Recipe *r, int mode, int grad, DType dt, int64_t R, int64_t D,
                    int64_t Out_, const float *hx, const float *hz, const float *hgm,
                    const float *hbt, const float *hw, const float *hb, const float *hG)
{
    Out o;
    memset(&o, 0, sizeof o);
    Tensor *x = tensor_from_f32(c, hx, dt, 2, (int64_t[]){R, D});
    Tensor *z = tensor_from_f32(c, hz, dt, 2, (int64_t[]){R, D});
    Tensor *gm = tensor_from_f32(c, hgm, DT_F32, 1, &D);
    Tensor *bt = tensor_from_f32(c, hbt, DT_F32, 1, &D);
    Tensor *w = tensor_from_f32(c, hw, DT_F32, 2, (int64_t[]){Out_, D});
    Tensor *b = tensor_from_f32(c, hb, DT_F32, 1, &Out_);
    Tensor *ps[6] = {x, z, gm, bt, w, b};
    for (int k = 0; k < 6; k++) ps[k]->requires_grad = 1;
    b->lowp = tensor_from_f32(c, hb, dt, 1, &Out_);   /* the bias's AMP working copy */
    c->autocast = dt;
    const int g0 = ad_set_grad(c, grad);
    c->rng_offset = 0;   /* both modes draw the same dropout mask */
    const long made0 = add_norm_codes_runs(), taken0 = linear_fp8_fwd_codes_taken();
    Tensor *y = mode ? op_add_norm_fp8_codes(c, x, z, gm, bt, 0.1f, 1e-12f, r, 0)
                     : op_add_norm(c, x, z, gm, bt, 0.1f, 1e-12f);
    o.codes_same = -1;
    if (mode && y->fwd_codes.q) o.codes_same = codes_match(c, y, r);
    Tensor *t = op_linear_fp8(c, y, w, b, r, 0);
    const long made = add_norm_codes_runs() - made0, taken = linear_fp8_fwd_codes_taken() - taken0;
    if (mode && o.codes_same >= 0 && (made != 1 || taken != 1 || y->fwd_codes.q))
        o.codes_same = 0;   /* made once, taken once, and gone from y */
    o.y = host_of(y);
    o.t = host_of(t);
    if (grad) {
        t->grad = tensor_from_f32(c, hG, t->dtype, 2, (int64_t[]){R, Out_});
        ad_backward_from(c, t);
        for (int k = 0; k < 6; k++) o.g[k] = host_of(ps[k]->grad);
    }
    ad_set_grad(c, g0);
    c->autocast = DT_F32;
    fp8_recipe_read(r, 0, 0, &o.xs);
    tensor_release(y);
    tensor_release(t);
    tensor_release(b->lowp);
    b->lowp = NULL;
    for (int k = 0; k < 6; k++) tensor_release(ps[k]);
    return o;
}

static int bits_equal(const float *a, const float *b, size_t n)
{
    return (!a && !b) || (a && b && !memcmp(a, b, n * sizeof(float)));
}

/* expect_codes: the kernel takes these rows */
static void test_op(Ctx *c, DType dt, int64_t R, int64_t D, int expect_codes)
{
    const int64_t O = 2 * D;
    const size_t n = (size_t)(R * D);
    float *hx = hrand(n, -2.0f, 2.0f, dt), *hz = hrand(n, -1.0f, 1.0f, dt);
    float *hgm = hrand((size_t)D, 0.5f, 1.5f, DT_F32), *hbt = hrand((size_t)D, -0.5f, 0.5f, DT_F32);
    float *hw = hrand((size_t)(O * D), -0.05f, 0.05f, DT_F32);
    float *hb = hrand((size_t)O, -1.0f, 1.0f, DT_F32);
    float *hG = hrand((size_t)(R * O), -1e-3f, 1e-3f, dt);
    for (int grad = 1; grad >= 0; grad--) {
        Fp8Recipe *r[2] = {fp8_recipe_new(c, 1, 4, 0), fp8_recipe_new(c, 1, 4, 0)};
        for (int step = 1; step <= 2; step++) {
            Out a = run_step(c, r[0], 0, grad, dt, R, D, O, hx, hz, hgm, hbt, hw, hb, hG);
            Out b = run_step(c, r[1], 1, grad, dt, R, D, O, hx, hz, hgm, hbt, hw, hb, hG);
            int same = bits_equal(a.y, b.y, n) && bits_equal(a.t, b.t, (size_t)(R * O));
            const size_t ng[6] = {n, n, (size_t)D, (size_t)D, (size_t)(O * D), (size_t)O};
            for (int k = 0; k < 6; k++) same = same && bits_equal(a.g[k], b.g[k], ng[k]);
            char name[200];
            snprintf(name, sizeof name, "norm_codes.same_bits %s %lldx%lld%s step %d",
                     dtype_name(dt), (long long)R, (long long)D, grad ? "" : " (no autograd)",
                     step);
            check_true(name, same, "y, t or a gradient differs from add_norm then the cast");
            snprintf(name, sizeof name, "norm_codes.x_slot %s %lldx%lld%s step %d", dtype_name(dt),
                     (long long)R, (long long)D, grad ? "" : " (no autograd)", step);
            check_true(name, a.xs.amax == b.xs.amax && a.xs.scale == b.xs.scale &&
                       (grad || b.xs.amax == 0.0f),
                       "amax / scale %g / %g with the cast, %g / %g with add_norm's codes",
                       (double)a.xs.amax, (double)a.xs.scale, (double)b.xs.amax,
                       (double)b.xs.scale);
            snprintf(name, sizeof name, "norm_codes.%s %s %lldx%lld%s step %d",
                     expect_codes ? "codes_are_the_cast" : "plain_op", dtype_name(dt),
                     (long long)R, (long long)D, grad ? "" : " (no autograd)", step);
            check_true(name, expect_codes ? b.codes_same == 1 : b.codes_same == -1,
                       "codes %s (1: made, equal to the cast's and taken; 0: made, not; -1: none)",
                       b.codes_same == 1 ? "1" : b.codes_same == 0 ? "0" : "-1");
            out_free(&a);
            out_free(&b);
            fp8_recipe_step(c, r[0]);
            fp8_recipe_step(c, r[1]);
        }
        fp8_recipe_free(r[0]);
        fp8_recipe_free(r[1]);
    }
    free(hx); free(hz); free(hgm); free(hbt); free(hw); free(hb); free(hG);
}

/* Codes made for recipe r's layer 0 are not taken by a Linear of another
 * recipe or of another layer: those cast y themselves, with y's own bits. */
static void test_not_taken(Ctx *c)
{
    const int64_t R = 64, D = 256, O = 128;
    float *hx = hrand((size_t)(R * D), -2.0f, 2.0f, DT_BF16);
    float *hz = hrand((size_t)(R * D), -1.0f, 1.0f, DT_BF16);
    float *hg = hrand((size_t)D, 0.5f, 1.5f, DT_F32), *hb = hrand((size_t)D, -0.5f, 0.5f, DT_F32);
    float *hw = hrand((size_t)(O * D), -0.05f, 0.05f, DT_F32);
    Tensor *x = tensor_from_f32(c, hx, DT_BF16, 2, (int64_t[]){R, D});
    Tensor *z = tensor_from_f32(c, hz, DT_BF16, 2, (int64_t[]){R, D});
    Tensor *g = tensor_from_f32(c, hg, DT_F32, 1, &D), *b = tensor_from_f32(c, hb, DT_F32, 1, &D);
    Tensor *w = tensor_from_f32(c, hw, DT_F32, 2, (int64_t[]){O, D});
    Fp8Recipe *r = fp8_recipe_new(c, 2, 4, 0), *other = fp8_recipe_new(c, 1, 4, 0);
    c->autocast = DT_BF16;
    const int g0 = ad_set_grad(c, 0);
    Tensor *y = op_add_norm_fp8_codes(c, x, z, g, b, 0.1f, 1e-12f, r, 0);
    const long t0 = linear_fp8_fwd_codes_taken();
    Tensor *t1 = op_linear_fp8(c, y, w, NULL, other, 0);   /* another recipe */
    Tensor *t2 = op_linear_fp8(c, y, w, NULL, r, 1);       /* another layer of r */
    const long taken = linear_fp8_fwd_codes_taken() - t0;
    check_true("norm_codes.not_taken_by_another_recipe_or_layer",
               y->fwd_codes.q != NULL && taken == 0,
               "codes %s on y, %ld taken", y->fwd_codes.q ? "still" : "no longer", taken);
    ad_set_grad(c, g0);
    c->autocast = DT_F32;
    Tensor *ts[7] = {x, z, g, b, w, y, t1};
    for (int k = 0; k < 7; k++) tensor_release(ts[k]);
    tensor_release(t2);
    fp8_recipe_free(r);
    fp8_recipe_free(other);
    free(hx); free(hz); free(hg); free(hb); free(hw);
}

/* ---- 2. BERT-mini training ---- */

enum { STEPS = 10 };

typedef struct {
    float loss[STEPS];
    float *w, *fp8[2];
    size_t nw, nf[2];
    long made, taken;
} Trained;

static void train(Ctx *c, const char *args, int codes, int eval_at, Trained *o)
{
    setenv("CTRAIN_FP8_NORM_CODES", codes ? "1" : "0", 1);
    const long m0 = add_norm_codes_runs(), t0 = linear_fp8_fwd_codes_taken();
    Run r;
    run_open(&r, c, args, DEV_CUDA);
    for (int s = 0; s < STEPS; s++) {
        trainer_step(&r.tr);
        o->loss[s] = trainer_loss_value(&r.tr);
        if (s + 1 == eval_at) eval_forward(c, &r, (int)r.o.batch - 4);
    }
    ParamSet *ps = &r.m.params;
    o->nw = ps->total;
    o->w = falloc(ps->total);
    mem_to_host(ps->ctx, o->w, ps->data, ps->total * sizeof(float));
    for (int g = 0; g < 2; g++) {
        o->nf[g] = r.m.fp8->block[g]->numel;
        o->fp8[g] = falloc(o->nf[g]);
        tensor_to_host(o->fp8[g], r.m.fp8->block[g]);
    }
    run_close(&r, c);
    o->made = add_norm_codes_runs() - m0;
    o->taken = linear_fp8_fwd_codes_taken() - t0;
    unsetenv("CTRAIN_FP8_NORM_CODES");
}

/* all_taken: every code made was taken (no recompute re-runs a producer) */
static void train_same(Ctx *c, const char *name, const char *args, int eval_at, int all_taken)
{
    Trained a, b;
    train(c, args, 0, eval_at, &a);
    train(c, args, 1, eval_at, &b);
    check_losses_same(name, a.loss, b.loss, STEPS, "the cast", "add_norm's codes");
    char n[200];
    snprintf(n, sizeof n, "%s: final weights bit for bit", name);
    check_true(n, a.nw == b.nw && bits_equal(a.w, b.w, a.nw), "they differ");
    int same = 1;
    for (int g = 0; g < 2; g++)
        same = same && a.nf[g] == b.nf[g] && bits_equal(a.fp8[g], b.fp8[g], a.nf[g]);
    snprintf(n, sizeof n, "%s: FP8 amaxes, histories and scales bit for bit", name);
    check_true(n, same, "they differ");
    snprintf(n, sizeof n, "%s: add_norm made codes (%ld) and the Linears took them (%ld)", name,
             b.made, b.taken);
    check_true(n, b.made > 0 && b.taken > 0 && (!all_taken || b.taken == b.made) &&
               a.made == 0 && a.taken == 0,
               "with the switch on %ld made, %ld taken; off %ld, %ld", b.made, b.taken, a.made,
               a.taken);
    free(a.w); free(b.w);
    for (int g = 0; g < 2; g++) { free(a.fp8[g]); free(b.fp8[g]); }
}

int main(void)
{
    setenv("CTRAIN_ADD_NORM", "fused", 1);
    gpu_require();
    Ctx c;
    ctx_init(&c, DEV_CUDA, 0, 42);
    if (!fp8_supported(&c)) {
        printf("SKIP: the device has no FP8 GEMMs (sm_89 or later)\n");
    } else {
        check_seed(71);
        test_op(&c, DT_BF16, 128, 1024, 1);
        test_op(&c, DT_BF16, 192, 512, 1);
        test_op(&c, DT_BF16, 96, 256, 1);
        test_op(&c, DT_BF16, 80, 1024, 0);    /* rows not a multiple of 32 */
        test_op(&c, DT_BF16, 128, 768, 0);    /* 96 vectors a row: not the straight-line form */
        test_not_taken(&c);
        const char *base = "--model bert-mini --data synthetic --batch 8 --seq 32 --steps 10 "
                           "--optim adamw --lr 1e-3 --warmup 3 --precision fp8";
        char a[400];
        train_same(&c, "bert-mini fp8 eager", base, 0, 1);
        snprintf(a, sizeof a, "%s --accum 2 --recompute all", base);
        train_same(&c, "bert-mini fp8 accum 2 recompute all", a, 0, 0);
        /* layers recomputed and not side by side: a producer without autograd feeds a
         * consumer with it (the amax is recorded when the producer runs again) */
        snprintf(a, sizeof a, "%s --recompute every:2", base);
        train_same(&c, "bert-mini fp8 recompute every:2", a, 0, 0);
        snprintf(a, sizeof a, "%s --graph --graph-warmup 2", base);
        train_same(&c, "bert-mini fp8 graph, an evaluation between replays", a, 6, 1);
    }
    ctx_free(&c);
    return check_summary();
}
