/* gpu_linear_fp8.c — the FP8 Linear (ops/linear_fp8.h) on CUDA against the
 * same op on the CPU context, over two steps of its delayed scaling:
 *
 *   y = x w^T + b, then backward from dy = G placed as y's gradient:
 *   dx = G w, dw = G^T x, db = sum_r G   (each GEMM on FP8 codes)
 *
 * Step 1 casts with scale 1; fp8_recipe_step on both contexts; step 2 casts
 * with the delayed scales (448 / amax for x and w, 57344 / amax for dy).
 * Checked per step: y, dx, dw, db, and the recipe's amax / scale of x, w and
 * dy (equal: the casts are bit-identical, tests/gpu_fp8.c, and the update
 * the same arithmetic). Settings: f32 x without autocast, and bf16 autocast
 * (x cast to bf16 first, y and dx bf16). Shapes: 2-D x [64, 128] -> 256,
 * 3-D x [4, 32, 128] -> 384, BERT-large's FFN-like [512, 1024] -> 4096.
 *
 * Tolerance (relative norm of the difference): both sides multiply the same
 * FP8 codes; the CPU sums them in f32 in one order, the tensor cores in
 * another, promoting partial sums to f32 every few steps (fast accumulation
 * off), and CUDA rounds x w^T to y's type before adding the bias where the
 * CPU adds it in f32 first. 2e-3 for f32 outputs, 1e-2 (two bf16
 * roundings) for bf16 ones.
 * Needs compute capability 8.9 or later (FP8 tensor cores): skipped below.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gpu_util.h"
#include "engine/autograd.h"
#include "ops/linear_fp8.h"
#include "ops/ops.h"

typedef struct {
    int ndim;
    int64_t x[3];
    int out;
} Shape;

static const Shape shapes[] = {
    {2, {64, 128}, 256},
    {3, {4, 32, 128}, 384},
    {2, {512, 1024}, 4096},
};

typedef struct {
    float *y, *dx, *dw, *db;
    Fp8TensorState s[3];   /* x, w, dy after the step's backward */
} Step;

static void step_free(Step *r) { free(r->y); free(r->dx); free(r->dw); free(r->db); }

static float *to_host(Tensor *t)
{
    float *h = falloc(t->numel);
    tensor_to_f32(h, t);
    return h;
}

/* One forward + backward on c with recipe r (layer 0), under autocast dt. */
static Step run_step(Ctx *c, Fp8Recipe *r, DType dt, const Shape *sh, const float *x,
                     const float *w, const float *b, const float *g)
{
    int64_t ws[2] = {sh->out, sh->x[sh->ndim - 1]}, bs = sh->out, ys[3];
    for (int i = 0; i < sh->ndim; i++) ys[i] = sh->x[i];
    ys[sh->ndim - 1] = sh->out;
    Tensor *tx = tensor_from_f32(c, x, DT_F32, sh->ndim, sh->x);
    Tensor *tw = tensor_from_f32(c, w, DT_F32, 2, ws), *tb = tensor_from_f32(c, b, DT_F32, 1, &bs);
    tx->requires_grad = tw->requires_grad = tb->requires_grad = 1;
    c->autocast = dt;
    Tensor *y = op_linear_fp8(c, tx, tw, tb, r, 0);
    y->grad = tensor_from_f32(c, g, y->dtype, sh->ndim, ys);
    Step s;
    s.y = to_host(y);
    ad_backward_from(c, y);
    tensor_release(y);
    c->autocast = DT_F32;
    s.dx = to_host(tx->grad);
    s.dw = to_host(tw->grad);
    s.db = to_host(tb->grad);
    fp8_recipe_read(r, 0, 0, &s.s[0]);
    fp8_recipe_read(r, 0, 1, &s.s[1]);
    fp8_recipe_read(r, 1, 0, &s.s[2]);
    tensor_release(tx);
    tensor_release(tw);
    tensor_release(tb);
    return s;
}

static void test_shape(Ctx *cpu, Ctx *gpu, const Shape *sh, DType dt)
{
    size_t R = 1;
    for (int i = 0; i < sh->ndim - 1; i++) R *= (size_t)sh->x[i];
    const size_t In = (size_t)sh->x[sh->ndim - 1], Out = (size_t)sh->out;
    float *x = hrand(R * In, -3.0f, 3.0f, DT_F32), *w = hrand(Out * In, -0.05f, 0.05f, DT_F32);
    float *b = hrand(Out, -1.0f, 1.0f, DT_F32), *g = hrand(R * Out, -1e-3f, 1e-3f, dt);
    Fp8Recipe *rc = fp8_recipe_new(cpu, 1, 4, 0), *rg = fp8_recipe_new(gpu, 1, 4, 0);
    const double ty = dt == DT_F32 ? 2e-3 : 1e-2;
    for (int step = 1; step <= 2; step++) {
        Step a = run_step(cpu, rc, dt, sh, x, w, b, g), d = run_step(gpu, rg, dt, sh, x, w, b, g);
        char name[160];
#define CMP(field, n, tol)                                                                   \
        snprintf(name, sizeof name, "linear_fp8.%s %dx%zu->%zu %s step %d", #field, (int)R, In, \
                 Out, dtype_name(dt), step);                                                 \
        check_rel_norm(name, d.field, a.field, n, tol)
        CMP(y, R * Out, ty);
        CMP(dx, R * In, ty);
        CMP(dw, Out * In, 2e-3);
        CMP(db, Out, 2e-3);
#undef CMP
        int same = 1;
        for (int k = 0; k < 3; k++)
            same = same && a.s[k].amax == d.s[k].amax && a.s[k].scale == d.s[k].scale;
        snprintf(name, sizeof name, "linear_fp8.recipe %dx%zu->%zu %s step %d", (int)R, In, Out,
                 dtype_name(dt), step);
        check_true(name, same, "amax / scale x %g/%g w %g/%g dy %g/%g on the GPU, %g/%g %g/%g "
                   "%g/%g on the CPU", (double)d.s[0].amax, (double)d.s[0].scale,
                   (double)d.s[1].amax, (double)d.s[1].scale, (double)d.s[2].amax,
                   (double)d.s[2].scale, (double)a.s[0].amax, (double)a.s[0].scale,
                   (double)a.s[1].amax, (double)a.s[1].scale, (double)a.s[2].amax,
                   (double)a.s[2].scale);
        step_free(&a);
        step_free(&d);
        fp8_recipe_step(cpu, rc);
        fp8_recipe_step(gpu, rg);
    }
    fp8_recipe_free(rc);
    fp8_recipe_free(rg);
    free(x); free(w); free(b); free(g);
}

int main(void)
{
    gpu_require();
    Ctx cpu, gpu;
    ctx_init(&cpu, DEV_CPU, 0, 1);
    ctx_init(&gpu, DEV_CUDA, 0, 1);
    if (!fp8_supported(&gpu)) {
        printf("  skipped: %s has no FP8 tensor cores (compute capability 8.9 or later)\n",
               ctx_device_name(&gpu));
        ctx_free(&gpu);
        ctx_free(&cpu);
        return check_summary();
    }
    check_seed(89);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        test_shape(&cpu, &gpu, &shapes[i], DT_F32);
        test_shape(&cpu, &gpu, &shapes[i], DT_BF16);
    }
    ctx_free(&gpu);
    ctx_free(&cpu);
    return check_summary();
}
