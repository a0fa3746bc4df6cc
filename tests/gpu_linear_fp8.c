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
 * The bias: with bf16 y the GPU adds it in the forward GEMM's epilogue
 * (CTRAIN_LINEAR_EPILOGUE=1, the default), in f32 before y's rounding as the
 * CPU does (its bf16 working copy: within 2^-9 |b| of the CPU's f32 bias,
 * inside the tolerance); with the switch 0 (or f32 y) a separate pass adds it to the
 * rounded product. The program forks before it touches CUDA: the child runs
 * every case with the switch 0 (its names end in [separate add]) and hands
 * its counts and each bf16 case's forward allocations to the parent, which
 * runs them with 1; for BERT's FFN-like shape the epilogue must be taken,
 * seen as one device allocation fewer in the forward (no second [R, Out]
 * tensor; the bias reads its bf16 working copy, as a parameter's under
 * autocast, so no cast is allocated either way).
 *
 * GELU folded into the cast (op_linear_fp8_gelu, BERT's FFN output layer):
 * on the GPU bit for bit against op_gelu then op_linear_fp8 (y, dh, dw, db,
 * the recipe), with fewer forward allocations (GELU's output is never
 * written), and against the CPU's composition within the tolerance below.
 *
 * q, k, v sharing one cast of x (op_linear_fp8_shared): on the GPU bit for
 * bit against three separate casts, with fewer forward allocations.
 *
 * The feed-forward block as one node (op_ffn_fp8, GELU's backward in the
 * first Linear's gradient cast): bit for bit against op_linear_fp8 then
 * op_linear_fp8_gelu (outputs, every gradient, both layers' recipe slots),
 * with fewer backward allocations (dh is never written).
 *
 * Tolerance (relative norm of the difference): both sides multiply the same
 * FP8 codes; the CPU sums them in f32 in one order, the tensor cores in
 * another (the gradient GEMMs promoting partial sums to f32 every few steps,
 * the forward's kept in the tensor cores' accumulator: CTRAIN_FP8_FAST_ACCUM,
 * on by default; 332 passed with it on an H100), and the separate add rounds
 * y once more. 2e-3 for f32 outputs, 1e-2 (two bf16 roundings) for bf16 ones.
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
    size_t allocs;         /* device allocations the forward made */
} Step;

/* " [separate add]" in the child's names (CTRAIN_LINEAR_EPILOGUE=0), "" in the parent's */
static const char *run_tag = "";

static void step_free(Step *r) { free(r->y); free(r->dx); free(r->dw); free(r->db); }

static float *to_host(Tensor *t)
{
    float *h = falloc(t->numel);
    tensor_to_f32(h, t);
    return h;
}

/* What a step runs: op_linear_fp8 on an f32 x; op_linear_fp8_gelu on an h of
 * the autocast type (one op on CUDA); op_gelu then op_linear_fp8 on that h. */
typedef enum { RUN_LINEAR, RUN_GELU_FUSED, RUN_GELU_COMPOSED } RunKind;

/* One forward + backward on c with recipe r (layer 0), under autocast dt;
 * dx in the result is the input's gradient (dh for the GELU kinds). */
static Step run_step(Ctx *c, Fp8Recipe *r, DType dt, RunKind kind, const Shape *sh,
                     const float *x, const float *w, const float *b, const float *g)
{
    int64_t ws[2] = {sh->out, sh->x[sh->ndim - 1]}, bs = sh->out, ys[3];
    for (int i = 0; i < sh->ndim; i++) ys[i] = sh->x[i];
    ys[sh->ndim - 1] = sh->out;
    Tensor *tx = tensor_from_f32(c, x, kind == RUN_LINEAR ? DT_F32 : dt, sh->ndim, sh->x);
    Tensor *tw = tensor_from_f32(c, w, DT_F32, 2, ws), *tb = tensor_from_f32(c, b, DT_F32, 1, &bs);
    tx->requires_grad = tw->requires_grad = tb->requires_grad = 1;
    if (dt != DT_F32 && c->device == DEV_CUDA)
        tb->lowp = tensor_from_f32(c, b, dt, 1, &bs);   /* the bias's AMP working copy */
    c->autocast = dt;
    Step s;
    s.allocs = c->mem.n_allocs;
    Tensor *y;
    if (kind == RUN_LINEAR) {
        y = op_linear_fp8(c, tx, tw, tb, r, 0);
    } else if (kind == RUN_GELU_FUSED) {
        y = op_linear_fp8_gelu(c, tx, tw, tb, r, 0);
    } else {
        Tensor *gl = op_gelu(c, tx);
        y = op_linear_fp8(c, gl, tw, tb, r, 0);
        tensor_release(gl);
    }
    s.allocs = c->mem.n_allocs - s.allocs;
    y->grad = tensor_from_f32(c, g, y->dtype, sh->ndim, ys);
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
    tensor_release(tb->lowp);
    tb->lowp = NULL;
    tensor_release(tx);
    tensor_release(tw);
    tensor_release(tb);
    return s;
}

/* A case's sizes and host inputs: x (or h) uniform in [-xr, xr] in type
 * xt, w, b, and dy = g in dt. */
typedef struct {
    size_t R, In, Out;
    float *x, *w, *b, *g;
} Inputs;

static Inputs inputs_new(const Shape *sh, DType dt, float xr, DType xt)
{
    Inputs in = {1, (size_t)sh->x[sh->ndim - 1], (size_t)sh->out, NULL, NULL, NULL, NULL};
    for (int i = 0; i < sh->ndim - 1; i++) in.R *= (size_t)sh->x[i];
    in.x = hrand(in.R * in.In, -xr, xr, xt);
    in.w = hrand(in.Out * in.In, -0.05f, 0.05f, DT_F32);
    in.b = hrand(in.Out, -1.0f, 1.0f, DT_F32);
    in.g = hrand(in.R * in.Out, -1e-3f, 1e-3f, dt);
    return in;
}

static void inputs_free(Inputs *in) { free(in->x); free(in->w); free(in->b); free(in->g); }

/* The GPU step d against the CPU step a: y, dx, dw, db by relative norm. */
static void compare_to_cpu(const char *op, const Step *d, const Step *a, const Inputs *in,
                           DType dt, int step)
{
    const double ty = dt == DT_F32 ? 2e-3 : 1e-2;
    const float *got[4] = {d->y, d->dx, d->dw, d->db}, *ref[4] = {a->y, a->dx, a->dw, a->db};
    const size_t n[4] = {in->R * in->Out, in->R * in->In, in->Out * in->In, in->Out};
    const double tol[4] = {ty, ty, 2e-3, 2e-3};
    static const char *field[4] = {"y", "dx", "dw", "db"};
    for (int k = 0; k < 4; k++) {
        char name[160];
        snprintf(name, sizeof name, "%s.%s %dx%zu->%zu %s step %d%s", op, field[k], (int)in->R,
                 in->In, in->Out, dtype_name(dt), step, run_tag);
        check_rel_norm(name, got[k], ref[k], n[k], tol[k]);
    }
}

static int same_bits(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof(float)) == 0;
}

/* GELU folded into the cast (op_linear_fp8_gelu) against op_gelu + the
 * Linear on the GPU, bit for bit (the same kernels, roundings and order),
 * and against the CPU's composition within the tolerance above; two steps
 * of the recipe each. */
static void test_gelu(Ctx *cpu, Ctx *gpu, const Shape *sh, DType dt)
{
    Inputs in = inputs_new(sh, dt, 4.0f, dt);
    const size_t R = in.R, In = in.In, Out = in.Out;
    Fp8Recipe *rc = fp8_recipe_new(cpu, 1, 4, 0), *rf = fp8_recipe_new(gpu, 1, 4, 0);
    Fp8Recipe *ru = fp8_recipe_new(gpu, 1, 4, 0);
    for (int step = 1; step <= 2; step++) {
        Step a = run_step(cpu, rc, dt, RUN_GELU_FUSED, sh, in.x, in.w, in.b, in.g);
        Step f = run_step(gpu, rf, dt, RUN_GELU_FUSED, sh, in.x, in.w, in.b, in.g);
        Step u = run_step(gpu, ru, dt, RUN_GELU_COMPOSED, sh, in.x, in.w, in.b, in.g);
        char name[160];
        int same = same_bits(f.y, u.y, R * Out) && same_bits(f.dx, u.dx, R * In) &&
                   same_bits(f.dw, u.dw, Out * In) && same_bits(f.db, u.db, Out);
        for (int k = 0; k < 3; k++)
            same = same && f.s[k].amax == u.s[k].amax && f.s[k].scale == u.s[k].scale;
        snprintf(name, sizeof name, "linear_fp8_gelu.fused_equals_gelu_then_linear %dx%zu->%zu "
                 "%s step %d%s", (int)R, In, Out, dtype_name(dt), step, run_tag);
        check_true(name, same, "y %s, dh %s, dw %s, db %s, amax g %g vs %g",
                   same_bits(f.y, u.y, R * Out) ? "same" : "differs",
                   same_bits(f.dx, u.dx, R * In) ? "same" : "differs",
                   same_bits(f.dw, u.dw, Out * In) ? "same" : "differs",
                   same_bits(f.db, u.db, Out) ? "same" : "differs", (double)f.s[0].amax,
                   (double)u.s[0].amax);
        snprintf(name, sizeof name, "linear_fp8_gelu.one_allocation_less %dx%zu->%zu %s step %d%s",
                 (int)R, In, Out, dtype_name(dt), step, run_tag);
        check_true(name, f.allocs < u.allocs, "forward allocations: fused %zu, composed %zu",
                   f.allocs, u.allocs);
        compare_to_cpu("linear_fp8_gelu", &f, &a, &in, dt, step);
        step_free(&a);
        step_free(&f);
        step_free(&u);
        fp8_recipe_step(cpu, rc);
        fp8_recipe_step(gpu, rf);
        fp8_recipe_step(gpu, ru);
    }
    fp8_recipe_free(rc);
    fp8_recipe_free(rf);
    fp8_recipe_free(ru);
    inputs_free(&in);
}

/* BERT's q, k, v: three Linear layers on one x through op_linear_fp8_shared
 * (one cast of x) against three op_linear_fp8 calls, on the GPU under
 * autocast dt over two recipe steps: bit for bit the same y's, dx, dw's and
 * db's, with fewer forward allocations (two casts of x fewer). */
static void test_shared(Ctx *gpu, const Shape *sh, DType dt)
{
    Inputs in[3];
    for (int j = 0; j < 3; j++) in[j] = inputs_new(sh, dt, 3.0f, DT_F32);
    const size_t R = in[0].R, In = in[0].In, Out = in[0].Out;
    int64_t ws[2] = {(int64_t)Out, (int64_t)In}, bs = (int64_t)Out, ys[3];
    for (int i = 0; i < sh->ndim; i++) ys[i] = sh->x[i];
    ys[sh->ndim - 1] = (int64_t)Out;
    float *got[2][2][3][4];   /* [mode][step][layer][y, dx, dw, db] */
    Fp8TensorState xq_state[2][2], xk_state[2][2];   /* [mode][step]: q's and k's x slots */
    size_t allocs[2] = {0, 0};
    for (int mode = 0; mode < 2; mode++) {   /* 0 separate, 1 shared */
        Fp8Recipe *r = fp8_recipe_new(gpu, 3, 4, 0);
        Tensor *tx = tensor_from_f32(gpu, in[0].x, DT_F32, sh->ndim, sh->x), *tw[3], *tb[3];
        tx->requires_grad = 1;
        for (int j = 0; j < 3; j++) {
            tw[j] = tensor_from_f32(gpu, in[j].w, DT_F32, 2, ws);
            tb[j] = tensor_from_f32(gpu, in[j].b, DT_F32, 1, &bs);
            tw[j]->requires_grad = tb[j]->requires_grad = 1;
        }
        for (int step = 0; step < 2; step++) {
            gpu->autocast = dt;
            /* x in the autocast type, as BERT's layer input is: the cast is
             * outside the ops, so both modes see one tensor */
            Tensor *x = op_cast(gpu, tx, dt);
            Fp8SharedX xs = {0};
            Tensor *t[3];
            size_t a0 = gpu->mem.n_allocs;
            for (int j = 0; j < 3; j++)
                t[j] = mode ? op_linear_fp8_shared(gpu, x, tw[j], tb[j], r, j, &xs)
                            : op_linear_fp8(gpu, x, tw[j], tb[j], r, j);
            if (step == 0) allocs[mode] = gpu->mem.n_allocs - a0;
            fp8_shared_x_release(&xs);
            tensor_release(x);
            Tensor *s01 = op_add(gpu, t[0], t[1]), *sum = op_add(gpu, s01, t[2]);
            sum->grad = tensor_from_f32(gpu, in[0].g, sum->dtype, sh->ndim, ys);
            ad_backward_from(gpu, sum);
            gpu->autocast = DT_F32;
            for (int j = 0; j < 3; j++) {
                got[mode][step][j][0] = to_host(t[j]);
                got[mode][step][j][1] = j == 0 ? to_host(tx->grad) : NULL;
                got[mode][step][j][2] = to_host(tw[j]->grad);
                got[mode][step][j][3] = to_host(tb[j]->grad);
                tensor_release(t[j]);
            }
            tensor_release(s01);
            tensor_release(sum);
            fp8_recipe_read(r, 0, 0, &xq_state[mode][step]);
            fp8_recipe_read(r, 0, 2, &xk_state[mode][step]);
            fp8_recipe_step(gpu, r);
        }
        tensor_release(tx);
        for (int j = 0; j < 3; j++) {
            tensor_release(tw[j]);
            tensor_release(tb[j]);
        }
        fp8_recipe_free(r);
    }
    const size_t n[4] = {R * Out, R * In, Out * In, Out};
    int same = 1;
    for (int step = 0; step < 2; step++)
        for (int j = 0; j < 3; j++)
            for (int f = 0; f < 4; f++) {
                if (got[0][step][j][f])
                    same = same && same_bits(got[0][step][j][f], got[1][step][j][f], n[f]);
                free(got[0][step][j][f]);
                free(got[1][step][j][f]);
            }
    char name[160];
    snprintf(name, sizeof name, "linear_fp8_shared.same_as_separate_casts %dx%zu->%zu %s%s",
             (int)R, In, Out, dtype_name(dt), run_tag);
    check_true(name, same, "y, dx, dw or db differ between one shared cast of x and three");
    int slots = 1;
    for (int step = 0; step < 2; step++)
        slots = slots && xq_state[0][step].amax == xq_state[1][step].amax &&
                xq_state[0][step].scale == xq_state[1][step].scale &&
                xk_state[0][step].amax > 0.0f && xk_state[1][step].amax == 0.0f;
    snprintf(name, sizeof name, "linear_fp8_shared.x_slots %dx%zu->%zu %s%s", (int)R, In, Out,
             dtype_name(dt), run_tag);
    check_true(name, slots, "q's x slot amax/scale %g/%g separate, %g/%g shared; k's x amax "
               "%g separate, %g shared (0 expected)", (double)xq_state[0][1].amax,
               (double)xq_state[0][1].scale, (double)xq_state[1][1].amax,
               (double)xq_state[1][1].scale, (double)xk_state[0][1].amax,
               (double)xk_state[1][1].amax);
    snprintf(name, sizeof name, "linear_fp8_shared.fewer_allocations %dx%zu->%zu %s%s", (int)R,
             In, Out, dtype_name(dt), run_tag);
    check_true(name, allocs[1] < allocs[0], "forward allocations: shared %zu, separate %zu",
               allocs[1], allocs[0]);
    for (int j = 0; j < 3; j++) inputs_free(&in[j]);
}

/* The feed-forward block as one node (op_ffn_fp8: x -> Linear -> GELU ->
 * Linear, GELU's backward applied in the first Linear's gradient cast)
 * against op_linear_fp8 then op_linear_fp8_gelu on the GPU, two recipe
 * steps: y, dx, dw1, db1, dw2, db2 and both layers' recipe slots the same
 * bits (the same kernels, roundings and summation orders), and fewer
 * allocations in the backward (dh is never written). x [R, D] in the
 * autocast type (BERT's layer input), Hd = the shape's out, back to D. */
static void test_ffn(Ctx *gpu, const Shape *sh, DType dt, int frozen_first)
{
    const int64_t D = sh->x[sh->ndim - 1], Hd = sh->out;
    size_t R = 1;
    for (int i = 0; i < sh->ndim - 1; i++) R *= (size_t)sh->x[i];
    float *x = hrand(R * D, -3.0f, 3.0f, dt), *w1 = hrand(Hd * D, -0.05f, 0.05f, DT_F32);
    float *b1 = hrand(Hd, -1.0f, 1.0f, DT_F32), *w2 = hrand(D * Hd, -0.05f, 0.05f, DT_F32);
    float *b2 = hrand(D, -1.0f, 1.0f, DT_F32), *g = hrand(R * D, -1e-3f, 1e-3f, dt);
    const int64_t w1s[2] = {Hd, D}, w2s[2] = {D, Hd};
    float *got[2][2][6];               /* [mode][step][y, dx, dw1, db1, dw2, db2] */
    Fp8TensorState st[2][2][6];        /* [mode][step][x1, w1, x2, w2, g1, g2 slots] */
    size_t bwd_allocs[2] = {0, 0};
    for (int mode = 0; mode < 2; mode++) {   /* 0 the two ops, 1 one node */
        Fp8Recipe *r = fp8_recipe_new(gpu, 2, 4, 0);
        Tensor *tx = tensor_from_f32(gpu, x, dt, sh->ndim, sh->x);
        Tensor *tw1 = tensor_from_f32(gpu, w1, DT_F32, 2, w1s), *tb1 = tensor_from_f32(gpu, b1, DT_F32, 1, &Hd);
        Tensor *tw2 = tensor_from_f32(gpu, w2, DT_F32, 2, w2s), *tb2 = tensor_from_f32(gpu, b2, DT_F32, 1, &D);
        /* frozen_first: x and the first Linear need no gradient (the node's backward
         * stops after dw2 and db2, as the two ops' walk would) */
        tx->requires_grad = tw1->requires_grad = tb1->requires_grad = !frozen_first;
        tw2->requires_grad = tb2->requires_grad = 1;
        if (dt != DT_F32) {   /* the biases' AMP working copies, as parameters have */
            tb1->lowp = tensor_from_f32(gpu, b1, dt, 1, &Hd);
            tb2->lowp = tensor_from_f32(gpu, b2, dt, 1, &D);
        }
        for (int step = 0; step < 2; step++) {
            gpu->autocast = dt;
            Tensor *y;
            if (mode) {
                y = op_ffn_fp8(gpu, tx, tw1, tb1, tw2, tb2, r, 0, 1);
            } else {
                Tensor *h = op_linear_fp8(gpu, tx, tw1, tb1, r, 0);
                y = op_linear_fp8_gelu(gpu, h, tw2, tb2, r, 1);
                tensor_release(h);
            }
            y->grad = tensor_from_f32(gpu, g, y->dtype, sh->ndim, sh->x);
            got[mode][step][0] = to_host(y);
            const size_t a0 = gpu->mem.n_allocs;
            ad_backward_from(gpu, y);
            if (step == 0) bwd_allocs[mode] = gpu->mem.n_allocs - a0;
            tensor_release(y);
            gpu->autocast = DT_F32;
            Tensor *gr[5] = {tx->grad, tw1->grad, tb1->grad, tw2->grad, tb2->grad};
            for (int k = 0; k < 5; k++) got[mode][step][k + 1] = gr[k] ? to_host(gr[k]) : NULL;
            for (int k = 0; k < 4; k++) fp8_recipe_read(r, 0, k, &st[mode][step][k]);
            for (int k = 0; k < 2; k++) fp8_recipe_read(r, 1, k, &st[mode][step][4 + k]);
            fp8_recipe_step(gpu, r);
        }
        tensor_release(tb1->lowp); tb1->lowp = NULL;
        tensor_release(tb2->lowp); tb2->lowp = NULL;
        tensor_release(tx); tensor_release(tw1); tensor_release(tb1);
        tensor_release(tw2); tensor_release(tb2);
        fp8_recipe_free(r);
    }
    const size_t n[6] = {R * D, R * D, (size_t)(Hd * D), (size_t)Hd, (size_t)(D * Hd), (size_t)D};
    int same = 1, slots = 1, live = 1;
    for (int step = 0; step < 2; step++) {
        for (int k = 0; k < 6; k++) {
            const int both = got[0][step][k] && got[1][step][k];
            same = same && (both ? same_bits(got[0][step][k], got[1][step][k], n[k])
                                 : !got[0][step][k] && !got[1][step][k]);
            free(got[0][step][k]);
            free(got[1][step][k]);
        }
        for (int k = 0; k < 6; k++) {
            slots = slots && st[0][step][k].amax == st[1][step][k].amax &&
                    st[0][step][k].scale == st[1][step][k].scale;
            /* the first Linear's gradient slot stays unrecorded when it is frozen */
            live = live && (st[1][step][k].amax > 0.0f || (frozen_first && k == 4));
        }
    }
    char name[160];
    const char *fz = frozen_first ? " (first Linear frozen)" : "";
    snprintf(name, sizeof name, "ffn_fp8.same_as_two_ops %zux%lld->%lld->%lld %s%s%s", R,
             (long long)D, (long long)Hd, (long long)D, dtype_name(dt), fz, run_tag);
    check_true(name, same, "y, dx, dw1, db1, dw2 or db2 differ from op_linear_fp8 + "
               "op_linear_fp8_gelu");
    snprintf(name, sizeof name, "ffn_fp8.recipe_slots %zux%lld->%lld %s%s%s", R, (long long)D,
             (long long)Hd, dtype_name(dt), fz, run_tag);
    check_true(name, slots && live, "a slot's amax or scale differs from the two ops' (or an "
               "amax stayed 0: %d)", !live);
    if (!frozen_first) {   /* frozen, neither makes dg nor dh */
        snprintf(name, sizeof name, "ffn_fp8.fewer_backward_allocations %zux%lld->%lld %s%s",
                 R, (long long)D, (long long)Hd, dtype_name(dt), run_tag);
        check_true(name, bwd_allocs[1] < bwd_allocs[0],
                   "backward allocations: one node %zu, two ops %zu", bwd_allocs[1],
                   bwd_allocs[0]);
    }
    free(x); free(w1); free(b1); free(w2); free(b2); free(g);
}

/* Runs every step of one shape and setting against the CPU; returns the
 * GPU's forward allocations of step 1. */
static size_t test_shape(Ctx *cpu, Ctx *gpu, const Shape *sh, DType dt)
{
    Inputs in = inputs_new(sh, dt, 3.0f, DT_F32);
    const size_t R = in.R, In = in.In, Out = in.Out;
    Fp8Recipe *rc = fp8_recipe_new(cpu, 1, 4, 0), *rg = fp8_recipe_new(gpu, 1, 4, 0);
    size_t allocs = 0;
    for (int step = 1; step <= 2; step++) {
        Step a = run_step(cpu, rc, dt, RUN_LINEAR, sh, in.x, in.w, in.b, in.g);
        Step d = run_step(gpu, rg, dt, RUN_LINEAR, sh, in.x, in.w, in.b, in.g);
        if (step == 1) allocs = d.allocs;
        char name[160];
        compare_to_cpu("linear_fp8", &d, &a, &in, dt, step);
        int same = 1;
        for (int k = 0; k < 3; k++)
            same = same && a.s[k].amax == d.s[k].amax && a.s[k].scale == d.s[k].scale;
        snprintf(name, sizeof name, "linear_fp8.recipe %dx%zu->%zu %s step %d%s", (int)R, In,
                 Out, dtype_name(dt), step, run_tag);
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
    inputs_free(&in);
    return allocs;
}

enum { NSHAPES = sizeof shapes / sizeof shapes[0] };

/* What a run hands over: its check counts, each bf16 case's forward
 * allocations, and whether the card took FP8 at all. */
typedef struct {
    int passed, failed, supported;
    size_t allocs[NSHAPES];
} RunOut;

static RunOut run_all(void)
{
    RunOut o = {0};
    Ctx cpu, gpu;
    ctx_init(&cpu, DEV_CPU, 0, 1);
    ctx_init(&gpu, DEV_CUDA, 0, 1);
    o.supported = fp8_supported(&gpu);
    if (!o.supported) {
        printf("  skipped: %s has no FP8 tensor cores (compute capability 8.9 or later)\n",
               ctx_device_name(&gpu));
    } else {
        check_seed(89);
        for (int i = 0; i < NSHAPES; i++) {
            test_shape(&cpu, &gpu, &shapes[i], DT_F32);
            o.allocs[i] = test_shape(&cpu, &gpu, &shapes[i], DT_BF16);
            test_gelu(&cpu, &gpu, &shapes[i], DT_F32);
            test_gelu(&cpu, &gpu, &shapes[i], DT_BF16);
            test_shared(&gpu, &shapes[i], DT_BF16);
            test_ffn(&gpu, &shapes[i], DT_BF16, 0);
            test_ffn(&gpu, &shapes[i], DT_F32, 0);
            test_ffn(&gpu, &shapes[i], DT_BF16, 1);
        }
    }
    ctx_free(&gpu);
    ctx_free(&cpu);
    o.passed = check_passed_;
    o.failed = check_failed_;
    return o;
}

/* The child's run (the separate bias add): its results into payload. */
static void child_all(void *arg, void *payload)
{
    (void)arg;
    run_tag = " [separate add]";
    RunOut o = run_all();
    memcpy(payload, &o, sizeof o);
}

int main(void)
{
    RunOut off = {0};
    const int got = gpu_child_run("CTRAIN_LINEAR_EPILOGUE", "0", child_all, NULL, &off,
                                  sizeof off);
    setenv("CTRAIN_LINEAR_EPILOGUE", "1", 1);
    gpu_require();
    check_true("linear_fp8: the CTRAIN_LINEAR_EPILOGUE=0 run finished", got, "it did not");
    RunOut on = run_all();
    if (on.supported && got) {
        /* BERT's FFN-like forward (the last shape) must take the epilogue */
        const size_t last = NSHAPES - 1;
        check_true("linear_fp8: the bias epilogue taken for 512x1024->4096 bf16",
                   on.allocs[last] + 1 == off.allocs[last],
                   "forward allocations: %zu with the epilogue on, %zu with it off",
                   on.allocs[last], off.allocs[last]);
        for (size_t i = 0; i < last; i++)
            printf("  linear_fp8: shape %zu bf16 forward, %zu allocations with the epilogue on, "
                   "%zu off (%s)\n", i, on.allocs[i], off.allocs[i],
                   on.allocs[i] + 1 == off.allocs[i] ? "taken" : "not taken");
    }
    return check_summary();
}
