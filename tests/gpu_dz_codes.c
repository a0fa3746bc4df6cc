/* gpu_dz_codes.c — the add_norm backward handing the FP8 Linear before it
 * its output gradient's E5M2 codes (CTRAIN_FP8_DZ_CODES; ops/layernorm.h
 * add_norm_backward_codes_cuda, ops/linear_fp8_cuda.h
 * linear_fp8_mark_grad_cast) instead of the bf16 values the Linear casts.
 *
 *   z = Linear_fp8(a; w, b)   (op_linear_fp8, or op_ffn_fp8's second Linear)
 *   y = LayerNorm(x + dropout(z; p))   (op_add_norm, fused)
 *   backward from dy = G
 *
 * Two steps (the recipe stepped between, so the second casts at delayed
 * scales), the switch off then on, the same inputs and dropout draws:
 *   - the hand-off taken once a step with the switch on (its count), never
 *     with it off;
 *   - a's (or the FFN input's), w's, x's, gamma's and beta's gradients and
 *     every recipe slot (dz's amax above all) bit for bit: the codes are
 *     the separate cast's;
 *   - b's gradient within 1e-6 relative norm: the column sums are the same
 *     values added in the kernel's order, not the cast's.
 * Shapes: D 256 (one vector a lane) and 1,024 (BERT-large's), bf16, R 512.
 * Refusals, each checked against the switch off (the same bits) with the
 * count unchanged: z with a second consumer (its gradient gets another
 * contribution), p = 0 (no keep bits: not the kernel's straight-line form),
 * D 768 (BERT-base: not 32 vectors times 1, 2 or 4).
 * Needs FP8 tensor cores (sm_89 or later): skipped below.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gpu_util.h"
#include "engine/autograd.h"
#include "ops/layernorm.h"
#include "ops/linear_fp8.h"
#include "ops/ops.h"

enum { NGRAD = 6, NSLOT = 6, STEPS = 2 };
enum { CASE_LINEAR, CASE_FFN, CASE_SECOND_USE };

typedef struct {
    float *g[STEPS][NGRAD];          /* a, w, b, x, gamma, beta (ffn: its input, w2, b2) */
    Fp8TensorState s[STEPS][NSLOT];  /* forward slots 0..3, gradient slots 0..1 */
    long runs;
} Out;

static float *to_host(Tensor *t)
{
    if (!t) return NULL;
    float *h = falloc(t->numel);
    tensor_to_f32(h, t);
    return h;
}

/* One case's forward and backward, STEPS times, with the switch `on`. */
static Out run(Ctx *c, int kind, int R, int In, int D, float p, int on)
{
    setenv("CTRAIN_FP8_DZ_CODES", on ? "1" : "0", 1);
    check_seed(20261206);
    float *ha = hrand((size_t)R * In, -2.0f, 2.0f, DT_BF16);
    float *hw = hrand((size_t)D * In, -0.05f, 0.05f, DT_F32), *hb = hrand(D, -1.0f, 1.0f, DT_F32);
    float *hw0 = hrand((size_t)In * In, -0.05f, 0.05f, DT_F32);
    float *hb0 = hrand(In, -1.0f, 1.0f, DT_F32);
    float *hx = hrand((size_t)R * D, -1.0f, 1.0f, DT_BF16);
    float *hgm = hrand(D, 0.5f, 1.5f, DT_F32), *hbt = hrand(D, -0.5f, 0.5f, DT_F32);
    float *hg = hrand((size_t)R * D, -1.0f, 1.0f, DT_BF16);
    float *hg2 = hrand((size_t)R * D, -1.0f, 1.0f, DT_BF16);
    const int64_t as[2] = {R, In}, ws[2] = {D, In}, w0s[2] = {In, In}, xs[2] = {R, D};
    const int64_t dd = D, di = In;
    Tensor *a = tensor_from_f32(c, ha, DT_BF16, 2, as);
    Tensor *w = tensor_from_f32(c, hw, DT_F32, 2, ws), *b = tensor_from_f32(c, hb, DT_F32, 1, &dd);
    Tensor *w0 = tensor_from_f32(c, hw0, DT_F32, 2, w0s);
    Tensor *b0 = tensor_from_f32(c, hb0, DT_F32, 1, &di);
    Tensor *x = tensor_from_f32(c, hx, DT_BF16, 2, xs);
    Tensor *gm = tensor_from_f32(c, hgm, DT_F32, 1, &dd);
    Tensor *bt = tensor_from_f32(c, hbt, DT_F32, 1, &dd);
    a->requires_grad = w->requires_grad = b->requires_grad = x->requires_grad = 1;
    w0->requires_grad = b0->requires_grad = gm->requires_grad = bt->requires_grad = 1;
    b->lowp = tensor_from_f32(c, hb, DT_BF16, 1, &dd);   /* the biases' AMP working copies */
    b0->lowp = tensor_from_f32(c, hb0, DT_BF16, 1, &di);
    Fp8Recipe *r = fp8_recipe_new(c, 2, 4, 0);
    Out o;
    memset(&o, 0, sizeof o);
    const long runs0 = add_norm_dz_codes_runs();
    for (int step = 0; step < STEPS; step++) {
        c->rng_offset = 0;   /* the same dropout draws both ways */
        c->autocast = DT_BF16;
        Tensor *z = kind == CASE_FFN ? op_ffn_fp8(c, a, w0, b0, w, b, r, 0, 1)
                                     : op_linear_fp8(c, a, w, b, r, 1);
        Tensor *y = op_add_norm(c, x, z, gm, bt, p, 1e-12f);
        Tensor *top = y;
        if (kind == CASE_SECOND_USE) {   /* z read again: its gradient has two parts */
            Tensor *g2 = tensor_from_f32(c, hg2, DT_BF16, 2, xs);
            Tensor *zz = op_mul(c, z, g2);
            top = op_add(c, y, zz);
            tensor_release(zz);
            tensor_release(g2);
            tensor_release(y);
        }
        tensor_release(z);
        top->grad = tensor_from_f32(c, hg, top->dtype, 2, xs);
        ad_backward_from(c, top);
        tensor_release(top);
        c->autocast = DT_F32;
        Tensor *gr[NGRAD] = {a->grad, w->grad, b->grad, x->grad, gm->grad, bt->grad};
        for (int k = 0; k < NGRAD; k++) {
            o.g[step][k] = to_host(gr[k]);
            if (gr[k]) tensor_zero(gr[k]);   /* each step's gradients alone */
        }
        for (int k = 0; k < 4; k++) fp8_recipe_read(r, 0, k, &o.s[step][k]);
        for (int k = 0; k < 2; k++) fp8_recipe_read(r, 1, k, &o.s[step][4 + k]);
        fp8_recipe_step(c, r);
    }
    o.runs = add_norm_dz_codes_runs() - runs0;
    fp8_recipe_free(r);
    tensor_release(b->lowp); b->lowp = NULL;
    tensor_release(b0->lowp); b0->lowp = NULL;
    Tensor *all[8] = {a, w, b, w0, b0, x, gm, bt};
    for (int k = 0; k < 8; k++) tensor_release(all[k]);
    free(ha); free(hw); free(hb); free(hw0); free(hb0); free(hx); free(hgm); free(hbt);
    free(hg); free(hg2);
    unsetenv("CTRAIN_FP8_DZ_CODES");
    return o;
}

static void out_free(Out *o)
{
    for (int s = 0; s < STEPS; s++)
        for (int k = 0; k < NGRAD; k++) free(o->g[s][k]);
}

static double rel_norm(const float *a, const float *b, size_t n)
{
    double d = 0.0, s = 0.0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)b[i] * b[i];
    }
    return sqrt(d / (s > 0.0 ? s : 1.0));
}

/* The switch off and on for one case: taken (want_runs a step) or refused. */
static void check_case(Ctx *c, const char *name, int kind, int R, int In, int D, float p,
                       int taken)
{
    Out off = run(c, kind, R, In, D, p, 0), on = run(c, kind, R, In, D, p, 1);
    const size_t n[NGRAD] = {(size_t)R * In, (size_t)D * In, (size_t)D, (size_t)R * D,
                             (size_t)D, (size_t)D};
    int same = 1, slots = 1, have = 1;
    double db = 0.0;
    for (int s = 0; s < STEPS; s++) {
        for (int k = 0; k < NGRAD; k++) {
            have = have && off.g[s][k] && on.g[s][k];
            if (!off.g[s][k] || !on.g[s][k]) continue;
            if (k == 2 && taken) db = fmax(db, rel_norm(on.g[s][k], off.g[s][k], n[k]));
            else same = same && !memcmp(on.g[s][k], off.g[s][k], n[k] * sizeof(float));
        }
        for (int k = 0; k < NSLOT; k++)
            slots = slots && on.s[s][k].amax == off.s[s][k].amax &&
                    on.s[s][k].scale == off.s[s][k].scale;
    }
    char t[200];
    snprintf(t, sizeof t, "dz_codes.%s: the hand-off %s", name, taken ? "taken" : "refused");
    check_true(t, off.runs == 0 && on.runs == (taken ? STEPS : 0), "off %ld, on %ld of %d steps",
               off.runs, on.runs, STEPS);
    snprintf(t, sizeof t, "dz_codes.%s: gradients bit for bit%s", name,
             taken ? " (the bias's aside)" : "");
    check_true(t, have && same, "a gradient differs or is missing (%d)", !have);
    snprintf(t, sizeof t, "dz_codes.%s: recipe slots (dz's amax) the same", name);
    check_true(t, slots, "an amax or scale differs");
    if (taken) {
        snprintf(t, sizeof t, "dz_codes.%s: the bias gradient within 1e-6", name);
        check_true(t, db <= 1e-6, "relative norm %.3g", db);
    }
    out_free(&off);
    out_free(&on);
}

int main(void)
{
    gpu_require();
    setenv("CTRAIN_ADD_NORM", "fused", 1);   /* the fused op at test sizes too */
    Ctx c;
    ctx_init(&c, DEV_CUDA, 0, 1);
    if (!fp8_supported(&c)) {
        printf("SKIP dz_codes: the device has no FP8 GEMMs (sm_89 or later)\n");
        ctx_free(&c);
        return check_summary();
    }
    check_case(&c, "linear D 1024", CASE_LINEAR, 512, 256, 1024, 0.1f, 1);
    check_case(&c, "linear D 256", CASE_LINEAR, 512, 128, 256, 0.1f, 1);
    check_case(&c, "ffn D 1024", CASE_FFN, 512, 1024, 1024, 0.1f, 1);
    check_case(&c, "z used twice", CASE_SECOND_USE, 512, 256, 1024, 0.1f, 0);
    check_case(&c, "p 0", CASE_LINEAR, 512, 256, 1024, 0.0f, 0);
    check_case(&c, "D 768", CASE_LINEAR, 512, 256, 768, 0.1f, 0);
    ctx_free(&c);
    return check_summary();
}
