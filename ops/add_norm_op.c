/* add_norm_op.c — tensor op add_norm, the end of a BERT sub-layer:
 *
 *   y = LayerNorm(x + dropout(z; p))        x the residual, z the sub-layer's output
 *   backward, with ds = LayerNorm's input gradient:
 *     dx += ds,   dz = keep ? ds s : 0 (s = drop_scale(p)),   dgamma, dbeta as LayerNorm's
 *
 * Composed: dropout, add and layernorm as three recorded ops (the CPU, and
 * CUDA calls of fewer than 16,384 rows by default). Fused (CTRAIN_ADD_NORM=
 * fused, or auto from 16,384 rows: the default; CUDA rows that suit
 * LayerNorm's vector kernels, x and z of one type): one kernel each way
 * (ops/layernorm.h add_norm_*_cuda), saving s = x + dropout(z) for the
 * backward as the composed layernorm saves its input: one node instead of
 * three, x and z read once and s written once in the forward, and in the
 * backward dy and s read once, dx and dz written once, with no tensor for
 * dropout's output or ds. Per element a step at ~4.3 TB/s: 24 bytes
 * composed (dropout 5, add 6, LayerNorm 4 forward; 6 and 4 backward, f16 /
 * bf16, with the mask regenerated), 16 fused. The dropout draws its Philox
 * offsets exactly as op_dropout would (none when p is 0), so the two ways
 * train the same run, and with LayerNorm's vector kernels
 * (CTRAIN_LN_KERNELS=vec) give the same bits (tests/gpu_add_norm.c).
 * Training with p > 0 (CTRAIN_ADD_NORM_BITS, on by default), the fused
 * forward also keeps the mask as bits (one byte a 16-byte vector: R D / 8
 * bytes in f16 / bf16, 1/16 of s) and the backward reads them instead of
 * drawing the mask again (+1% a BERT-large step on an H100, measured when a
 * draw was Philox4x32-10 for four elements, about a quarter of that kernel's
 * instructions; ops/dropout_mask.h now draws sixteen a call).
 * Under FP8, when z is an FP8 Linear's output that nothing else reads, the
 * backward may write z's gradient as that Linear's E5M2 codes instead
 * (dz_codes below; ops/linear_fp8.h, "The gradient's codes").
 */
#include "layernorm.h"

#include "engine/autograd.h"
#include "engine/kernels.h"
#include "engine/settings.h"
#include "dropout.h"
#include "fp8.h"
#include "fp8_recipe.h"
#include "ops.h"
#include "op_util.h"

/* The three ops; offset < 0 (have_offset 0): dropout takes its own. */
static Tensor *add_norm_composed(Ctx *c, Tensor *x, Tensor *z, Tensor *gamma, Tensor *beta,
                                 float p, float eps, int have_offset, uint64_t offset)
{
    Tensor *d = have_offset ? op_dropout_at(c, z, p, c->seed, offset) : op_dropout(c, z, p);
    Tensor *s = op_add(c, x, d);
    tensor_release(d);
    Tensor *y = op_layernorm(c, s, gamma, beta, eps);
    tensor_release(s);
    return y;
}

static long dz_codes_runs;   /* backwards that handed codes over (a test's count) */
static long codes_runs;      /* forwards that made y's codes (a test's count) */

long add_norm_dz_codes_runs(void) { return dz_codes_runs; }
long add_norm_codes_runs(void) { return codes_runs; }

#ifdef CTRAIN_CUDA
/* CTRAIN_ADD_NORM, read once: composed (0), fused (1) or auto (2: fused for
 * calls of at least LAYERNORM_VEC_MIN_ROWS rows, where the vector kernels
 * pay; BERT-large bf16 on an H100: +2.9% at 32,768 rows a call, -18% at
 * 4,096, docs/kernels.md). Does a call of R rows run fused? */
static int add_norm_fused_wanted(size_t R)
{
    static int mode = -1;
    if (mode < 0) mode = setting_choice(SET_ADD_NORM);
    return mode == 1 || (mode == 2 && R >= LAYERNORM_VEC_MIN_ROWS);
}

/* z's gradient handed to the FP8 Linear that made z as its E5M2 codes
 * (Tensor.grad_cast, set by that Linear's forward; CTRAIN_FP8_DZ_CODES):
 * the codes as z's gradient (U8, z's shape) and dz's column partials beside
 * it (grad_aux), dz never stored. Only where nothing else adds to z's
 * gradient: none there yet, and no node left on the tape but z's maker and
 * this one holds z (its refs). 1 when done (dx, dgamma, dbeta too), 0 when
 * the caller runs the plain backward (nothing written). */
static int dz_codes(Ctx *c, Node *n, Tensor *dx, int acc_x, float *pdg, int acc_g, float *pdb,
                    int acc_b)
{
    Tensor *z = n->in[1], *dy = n->out->grad, *s = n->saved[0];
    const size_t R = tensor_rows(s), D = tensor_cols(s), row = D * dtype_size(s->dtype);
    if (!z || !z->requires_grad || z->is_param || z->grad || !z->grad_cast.scale ||
        z->grad_cast.fmt != FP8_E5M2 || z->refs != 2 || z->dtype != s->dtype ||
        n->n_saved < 5 || !pdg || !pdb || R % 16 || D % 16)
        return 0;
    /* the kernel's straight-line form only (32 vectors of 16 bytes times 1, 2 or 4 a row):
     * refused here before anything is allocated */
    if (row != 512 && row != 1024 && row != 2048) return 0;
    Tensor *q = tensor_new(c, DT_U8, z->ndim, z->shape);
    int64_t np = (int64_t)add_norm_codes_partials(R, D);
    Tensor *part = tensor_new(c, DT_F32, 1, &np);
    const float p = n->f[1];
    if (!add_norm_backward_codes_cuda(
            dx ? dx->data : NULL, (uint8_t *)q->data, z->grad_cast.amax, z->grad_cast.scale,
            (float *)part->data, pdg, pdb, dy->data, s->data, (const float *)n->saved[2]->data,
            (const float *)n->saved[3]->data, (const float *)n->saved[1]->data, s->dtype, p,
            (uint64_t)n->i[0], (uint64_t)n->i[1], c->rng_base, n->saved[4]->data, R, D, acc_x,
            acc_g, acc_b, c->stream)) {
        tensor_release(q);
        tensor_release(part);
        return 0;
    }
    z->grad = q;
    z->grad_aux = part;
    dz_codes_runs++;
    return 1;
}

/* forward: s = x + dropout(z), y = LayerNorm(s)
 *   so ds = LayerNorm's dx,  dx += ds,  dz += keep ? ds * scale : 0 */
static void add_norm_backward(Ctx *c, Node *n)
{
    Tensor *dy = n->out->grad, *s = n->saved[0], *gamma = n->saved[1];
    Tensor *mean = n->saved[2], *invstd = n->saved[3];
    const void *bits = n->n_saved > 4 ? n->saved[4]->data : NULL;
    const size_t R = tensor_rows(s), D = tensor_cols(s);
    const float p = n->f[1];
    const uint64_t seed = (uint64_t)n->i[0], offset = (uint64_t)n->i[1];
    int acc_x = 0, acc_z = 0, acc_g = 0, acc_b = 0;
    Tensor *dx = ad_grad_dst(c, n->in[0], &acc_x);
    Tensor *dg = ad_grad_dst(c, n->in[2], &acc_g), *db = ad_grad_dst(c, n->in[3], &acc_b);
    CT_ASSERT((!dg || dg->dtype == DT_F32) && (!db || db->dtype == DT_F32),
              "add_norm: gamma/beta gradients must be f32 (they are f32 parameters)");
    float *pdg = dg ? (float *)dg->data : NULL, *pdb = db ? (float *)db->data : NULL;
    if (dz_codes(c, n, dx, acc_x, pdg, acc_g, pdb, acc_b)) return;
    Tensor *dz = ad_grad_dst(c, n->in[1], &acc_z);
    if (add_norm_backward_cuda(dx ? dx->data : NULL, dz ? dz->data : NULL, pdg, pdb, dy->data,
                               s->data, (const float *)mean->data, (const float *)invstd->data,
                               (const float *)gamma->data, s->dtype, p, seed, offset,
                               c->rng_base, bits, R, D, acc_x, acc_z, acc_g, acc_b, c->stream))
        return;
    /* gradients the vector kernels cannot take (a misaligned view): the
     * three backwards one after the other */
    Tensor *ds = tensor_new_like(c, s, s->dtype);
    layernorm_backward_cuda(ds->data, pdg, pdb, dy->data, s->data, (const float *)mean->data,
                            (const float *)invstd->data, (const float *)gamma->data, s->dtype, R,
                            D, 0, acc_g, acc_b, c->stream);
    if (dx) cast_cuda(dx->data, dx->dtype, ds->data, ds->dtype, ds->numel, acc_x, c->stream);
    if (dz)
        dropout_backward_cuda(dz->data, ds->data, dz->dtype, p, seed, offset, c->rng_base,
                              dz->numel, acc_z, c->stream);
    tensor_release(ds);
}
#endif

#ifdef CTRAIN_CUDA
/* The forward, with y's E4M3 codes for recipe r's x slot of `layer` made in
 * the same kernel and marked on y (Tensor.fwd_codes) when r is not NULL and
 * the kernel takes the shape; else the plain kernel. 0: the rows suit
 * neither (nothing done). */
static int forward_cuda(Ctx *c, Tensor *y, Tensor *s, Tensor *mean, Tensor *invstd, Tensor *x,
                        Tensor *z, Tensor *gamma, Tensor *beta, float p, float eps,
                        uint64_t offset, Tensor *bits, Fp8Recipe *r, int layer)
{
    const size_t R = tensor_rows(x), D = tensor_cols(x);
    if (r && add_norm_forward_codes_fits(x->dtype, R, D)) {   /* no buffers for rows it refuses */
        Tensor *q = tensor_new(c, DT_U8, 2, (int64_t[]){(int64_t)R, (int64_t)D});
        Tensor *qt = tensor_new(c, DT_U8, 2, (int64_t[]){(int64_t)D, (int64_t)R});
        float *h = (float *)r->block[0]->data;
        if (add_norm_forward_codes_cuda(
                y->data, s->data, (float *)mean->data, (float *)invstd->data, x->data, z->data,
                (const float *)gamma->data, (const float *)beta->data, x->dtype, eps, p, c->seed,
                offset, c->rng_base, bits ? bits->data : NULL, (uint8_t *)q->data,
                (uint8_t *)qt->data, fp8_amax_slot(c, r, 0, 2 * layer),
                &fp8_scale_of(r, h, 0)[2 * layer], R, D, c->stream)) {
            y->fwd_codes.q = q;
            y->fwd_codes.qt = qt;
            y->fwd_codes.owner = r;
            y->fwd_codes.slot = layer;
            codes_runs++;
            return 1;
        }
        tensor_release(q);
        tensor_release(qt);
    }
    return add_norm_forward_cuda(y->data, s->data, (float *)mean->data, (float *)invstd->data,
                                 x->data, z->data, (const float *)gamma->data,
                                 (const float *)beta->data, x->dtype, eps, p, c->seed, offset,
                                 c->rng_base, bits ? bits->data : NULL, R, D, c->stream);
}
#endif

static Tensor *add_norm(Ctx *c, Tensor *x, Tensor *z, Tensor *gamma, Tensor *beta, float p,
                        float eps, Fp8Recipe *r, int layer)
{
    char dx[96], dz[96];
    op_check_float("add_norm", x);
    op_check_float("add_norm", z);
    op_check_device("add_norm", c, x);
    op_check_device("add_norm", c, z);
    int same = x->ndim == z->ndim;
    for (int i = 0; same && i < x->ndim; i++) same = x->shape[i] == z->shape[i];
    if (!same)
        ct_fatal("add_norm: the residual %s and the sub-layer's output %s differ in shape",
                 tensor_desc(dx, sizeof dx, x), tensor_desc(dz, sizeof dz, z));
    if (!(p >= 0.0f && p < 1.0f))
        ct_fatal_hint("pass a dropout probability such as 0.1 (BERT)",
                      "add_norm: p = %g is outside [0, 1)", (double)p);
#ifdef CTRAIN_CUDA
    if (c->device == DEV_CUDA && add_norm_fused_wanted(tensor_rows(x)) && x->dtype == z->dtype &&
        gamma->dtype == DT_F32 && beta->dtype == DT_F32 && gamma->ndim == 1 &&
        (size_t)gamma->shape[0] == tensor_cols(x) && beta->ndim == 1 &&
        (size_t)beta->shape[0] == tensor_cols(x) && eps > 0.0f) {
        const size_t R = tensor_rows(x), D = tensor_cols(x);
        const uint64_t offset = p > 0.0f ? ctx_rng_take(c, drop_blocks(z->numel))
                                         : c->rng_offset;
        int64_t rows = (int64_t)R, nbits = (int64_t)(R * D / (16 / dtype_size(x->dtype)));
        Tensor *in[4] = {x, z, gamma, beta};
        const int grad = ad_needs_grad(c, in, 4);
        Tensor *y = tensor_new_like(c, x, x->dtype), *s = tensor_new_like(c, x, x->dtype);
        Tensor *mean = tensor_new(c, DT_F32, 1, &rows), *invstd = tensor_new(c, DT_F32, 1, &rows);
        static int keep_bits = -1;   /* CTRAIN_ADD_NORM_BITS, read once */
        if (keep_bits < 0) keep_bits = setting_switch(SET_ADD_NORM_BITS);
        Tensor *bits = grad && p > 0.0f && keep_bits ? tensor_new(c, DT_U8, 1, &nbits) : NULL;
        if (!forward_cuda(c, y, s, mean, invstd, x, z, gamma, beta, p, eps, offset, bits, r,
                          layer)) {
            tensor_release(y); tensor_release(s); tensor_release(mean); tensor_release(invstd);
            if (bits) tensor_release(bits);
            return add_norm_composed(c, x, z, gamma, beta, p, eps, 1, offset);
        }
        if (grad) {
            Node *n = ad_record(c, "add_norm", add_norm_backward, y, in, 4);
            n->f[0] = eps;
            n->f[1] = p;
            n->i[0] = (int64_t)c->seed;
            n->i[1] = (int64_t)offset;
            ad_save(n, s);
            ad_save(n, gamma);
            ad_save(n, mean);
            ad_save(n, invstd);
            if (bits) ad_save(n, bits);
        }
        tensor_release(s);
        tensor_release(mean);
        tensor_release(invstd);
        if (bits) tensor_release(bits);
        return y;
    }
#else
    (void)r;
    (void)layer;
#endif
    return add_norm_composed(c, x, z, gamma, beta, p, eps, 0, 0);
}

Tensor *op_add_norm(Ctx *c, Tensor *x, Tensor *z, Tensor *gamma, Tensor *beta, float p,
                    float eps)
{
    return add_norm(c, x, z, gamma, beta, p, eps, NULL, 0);
}

Tensor *op_add_norm_fp8_codes(Ctx *c, Tensor *x, Tensor *z, Tensor *gamma, Tensor *beta,
                              float p, float eps, Fp8Recipe *r, int layer)
{
    CT_ASSERT(r && layer >= 0 && layer < r->layers, "add_norm: recipe layer %d of %d", layer,
              r ? r->layers : 0);
    return add_norm(c, x, z, gamma, beta, p, eps, r, layer);
}
