/* linear_fp8_cuda.c — the FP8 Linear on the GPU (the math: linear_fp8.h):
 * the casts of ops/fp8.cu and cuBLASLt's FP8 GEMM (ops/fp8_gemm.h), whose
 * operands both have K contiguous. So each product reads:
 *   forward  y [R, Out]  = xq [R, In]   . wq [Out, In]^T    K = In
 *   dgrad    dx [R, In]  = gq [R, Out]  . wqT [In, Out]^T   K = Out
 *   wgrad    dw [Out, In] = gqT [Out, R] . xqT [In, R]^T    K = R  (f32, beta = accumulate)
 * The forward writes x's codes both ways in one pass (xq for its GEMM, xqT
 * kept for the weight gradient; skipped when the op hands over a shared
 * input's codes: BERT's q, k, v) and w's both ways (wqT kept for dgrad:
 * skipped where the optimizer keeps them current, ops/fp8_recipe.h's
 * Fp8WeightCodes, and the update's amax then is the optimizer's); the
 * backward casts dy both ways, and sums dy's columns for the bias gradient
 * in that same read (fp8_cast_transpose_colsum_cuda: no separate pass over
 * dy). Every dimension must be a multiple of 16 (fp8_gemm.h).
 *
 * With gelu (op_linear_fp8_gelu), x is GELU's input h: the forward casts
 * GELU(h) on the way in (fp8_cast_transpose_gelu_cuda) and keeps h; the
 * backward's dgrad GEMM writes dg = dy w to a temporary of h's type and
 * GELU's backward kernel turns it into dh. The same kernels, roundings and
 * order as op_gelu then the Linear, without GELU's output ever written.
 *
 * The feed-forward block (op_ffn_fp8: x -> Linear -> GELU -> Linear as one
 * node) runs the first Linear's forward, then the second's with gelu; its
 * backward takes dg = dy w2 straight into the first Linear's gradient cast
 * with GELU's backward applied on the way in
 * (fp8_cast_transpose_dgelu_colsum_cuda), so dh, [R, 4 D] in BERT, is
 * neither written nor read back.
 *
 * The bias, as op_linear's (ops/matmul_op.c): with a bf16 y and
 * CTRAIN_LINEAR_EPILOGUE on (the default), added in the forward GEMM's
 * epilogue in f32 before y's one rounding, reading the bias's bf16 working
 * copy (autocast_cast_weight); without an epilogue algorithm for the shape,
 * or with an f32 y, a separate pass adds it to the rounded product. The
 * epilogue saves that pass's read and write of y, 4 bytes an element of
 * bf16 y: for BERT-large's six Linears at seq 128 and batch 256 about 1.2
 * GB a layer, ~10 ms of a step the FP8 target puts near 100 ms
 * (docs/kernels.md).
 */
#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>

#include "engine/autograd.h"
#include "engine/error.h"
#include "engine/settings.h"
#include "autocast.h"
#include "elementwise.h"
#include "fp8.h"
#include "fp8_gemm.h"
#include "fp8_recipe.h"
#include "linear_fp8_cuda.h"
#include "ops.h"

static void check_dims(int R, int In, int Out)
{
    if (R % 16 || In % 16 || Out % 16)
        ct_fatal_hint("use a batch x sequence, hidden size and layer widths that are multiples of "
                      "16, or --precision bf16", "--precision fp8: a Linear of %d rows, %d -> %d "
                      "features; the FP8 GEMM takes multiples of 16 only", R, In, Out);
}

/* D = A B^T (+ beta D) scaled back, with cuBLASLt's fast accumulation when
 * fast; with a bias (a bf16 tensor), that added in the epilogue: returns 1
 * when it was, 0 when D holds the product alone (no algorithm takes the
 * epilogue here; the caller adds the bias). */
static int gemm(Ctx *c, void *D, DType dt, const Tensor *A, Fp8Format af, const float *a_inv,
                const Tensor *B, Fp8Format bf, const float *b_inv, const Tensor *bias, int fast,
                int M, int N, int K, float beta)
{
    fp8_gemm_cache_attach(c);   /* ctx_free clears the plans before the handle goes */
    const uint8_t *a = (const uint8_t *)A->data, *b = (const uint8_t *)B->data;
    if (bias && fp8_gemm_cuda(c->lt, c->workspace, c->workspace_bytes, c->stream, D, dt, a, af,
                              a_inv, b, bf, b_inv, bias->data, fast, M, N, K, beta) == 0)
        return 1;
    if (fp8_gemm_cuda(c->lt, c->workspace, c->workspace_bytes, c->stream, D, dt, a, af, a_inv, b,
                      bf, b_inv, NULL, fast, M, N, K, beta) != 0)
        ct_fatal("--precision fp8: cuBLASLt has no FP8 GEMM for %d x %d x %d", M, N, K);
    return 0;
}

/* CTRAIN_LINEAR_EPILOGUE, read once (op_linear's switch: one setting for
 * both Linears). */
static int epilogue_wanted(void)
{
    static int wanted = -1;
    if (wanted < 0) wanted = setting_switch(SET_LINEAR_EPILOGUE);
    return wanted;
}

/* CTRAIN_FP8_FAST_ACCUM, read once: 1 (the default) runs the forward GEMM
 * with fast accumulation, as Transformer Engine does (docs/kernels.md). */
static int fast_accum_wanted(void)
{
    static int wanted = -1;
    if (wanted < 0) wanted = setting_switch(SET_FP8_FAST_ACCUM);
    return wanted;
}

void linear_fp8_forward_cuda(Ctx *c, Fp8Recipe *r, int layer, Tensor **y, Tensor *x, Tensor *w,
                             Tensor *bias, Tensor *xq, Tensor *xqT, int xlayer, int cast_x,
                             Tensor **wqT_out, int R, int In, int Out, int gelu)
{
    check_dims(R, In, Out);
    float *h = (float *)r->block[0]->data;
    float *scale = fp8_scale_of(r, h, 0);
    const int sx = 2 * xlayer, sw = 2 * layer + 1;
    /* w's codes: kept between steps where the optimizer writes them (then no
     * cast while they are current), else made here */
    Fp8WeightCodes *kept = fp8_codes_bind(c, r, layer, w);
    Tensor *wq = kept ? kept->q : tensor_new(c, DT_U8, 2, (int64_t[]){Out, In});
    Tensor *wqT = kept ? kept->qt : tensor_new(c, DT_U8, 2, (int64_t[]){In, Out});
    if (kept) {
        tensor_retain(wq);
        tensor_retain(wqT);
    }
    /* x's codes both ways, unless a shared input's are given; with gelu, x
     * is GELU's input h and the codes are those of GELU(h) */
    if (cast_x)
        (gelu ? fp8_cast_transpose_gelu_cuda : fp8_cast_transpose_cuda)(
            (uint8_t *)xqT->data, (uint8_t *)xq->data, fp8_amax_slot(c, r, 0, sx), x->data,
            x->dtype, (size_t)R, (size_t)In, &scale[sx], FP8_E4M3, c->stream);
    if (!kept || !kept->fused || !r->codes_ready)
        fp8_cast_transpose_cuda((uint8_t *)wqT->data, (uint8_t *)wq->data,
                                fp8_amax_slot(c, r, 0, sw), w->data, DT_F32, (size_t)Out,
                                (size_t)In, &scale[sw], FP8_E4M3, c->stream);
    Tensor *bl = bias && (*y)->dtype == DT_BF16 && epilogue_wanted()
                     ? autocast_cast_weight(c, bias, DT_BF16)
                     : NULL;
    int fused = gemm(c, (*y)->data, (*y)->dtype, xq, FP8_E4M3, fp8_sinv_of(r, h, 0, sx), wq,
                     FP8_E4M3, fp8_sinv_of(r, h, 0, sw), bl, fast_accum_wanted(), R, Out, In,
                     0.0f);
    tensor_release(bl);   /* stream-ordered free: after the GEMM has read it */
    if (bias && !fused) {
        int g = ad_set_grad(c, 0);
        Tensor *yb = op_bias_add(c, *y, bias);
        ad_set_grad(c, g);
        tensor_release(*y);
        *y = yb;
    }
    tensor_release(wq);   /* backward reads the transpose only */
    *wqT_out = wqT;
}

/* dy's codes both ways for recipe layer `layer`'s gradient slot (E5M2, its
 * amax raised), and db (+)= sum_r dy from the same read when db is not
 * NULL. With h, dy is dg and the codes are those of GELU's backward
 * dh = T(dg GELU'(h)), never written (op_ffn_fp8). The caller releases
 * *gq and *gqT. */
static void grad_codes(Ctx *c, Fp8Recipe *r, int layer, const Tensor *dy, const Tensor *h,
                       Tensor *db, int acc_b, int R, int Out, Tensor **gq, Tensor **gqT)
{
    float *h1 = (float *)r->block[1]->data;
    float *amax1 = fp8_amax_of(r, h1, 1), *scale1 = fp8_scale_of(r, h1, 1);
    *gq = tensor_new(c, DT_U8, 2, (int64_t[]){R, Out});
    *gqT = tensor_new(c, DT_U8, 2, (int64_t[]){Out, R});
    uint8_t *q = (uint8_t *)(*gq)->data, *qT = (uint8_t *)(*gqT)->data;
    Tensor *part = db ? tensor_new(c, DT_F32, 1,
                                   (int64_t[]){(int64_t)fp8_colsum_scratch_floats(R, Out)})
                      : NULL;
    if (h)
        fp8_cast_transpose_dgelu_colsum_cuda(qT, q, &amax1[layer], db ? (float *)db->data : NULL,
                                             acc_b, part ? (float *)part->data : NULL, dy->data,
                                             h->data,
                                             dy->dtype, (size_t)R, (size_t)Out, &scale1[layer],
                                             FP8_E5M2, c->stream);
    else if (db)
        fp8_cast_transpose_colsum_cuda(qT, q, &amax1[layer], (float *)db->data, acc_b,
                                       (float *)part->data, dy->data, dy->dtype, (size_t)R,
                                       (size_t)Out, &scale1[layer], FP8_E5M2, c->stream);
    else
        fp8_cast_transpose_cuda(qT, q, &amax1[layer], dy->data, dy->dtype, (size_t)R,
                                (size_t)Out, &scale1[layer], FP8_E5M2, c->stream);
    tensor_release(part);   /* stream-ordered free: after the sums have read it */
}

void linear_fp8_mark_grad_cast(Ctx *c, Tensor *y, Fp8Recipe *r, int layer)
{
    if (!c->grad_enabled || !setting_switch(SET_FP8_DZ_CODES)) return;
    float *h1 = (float *)r->block[1]->data;
    y->grad_cast.scale = &fp8_scale_of(r, h1, 1)[layer];
    y->grad_cast.amax = &fp8_amax_of(r, h1, 1)[layer];
    y->grad_cast.fmt = FP8_E5M2;
}

/* dy's codes handed over by the op that made the output's gradient (the
 * add_norm backward, under the mark above): the codes as the gradient,
 * the column partials in grad_aux. Their transpose made here, and db (+)=
 * the partials' sums when db is wanted. 0 when dy came as values. */
static int handed_codes(Ctx *c, Tensor *out, Tensor *db, int acc_b, int R, int Out, Tensor **gq,
                        Tensor **gqT)
{
    Tensor *g = out->grad;
    if (!g || g->dtype != DT_U8) return 0;
    CT_ASSERT(out->grad_aux && g->numel == (size_t)R * (size_t)Out,
              "linear_fp8: handed codes of %zu elements for [%d, %d], partials %s", g->numel, R,
              Out, out->grad_aux ? "given" : "missing");
    *gq = g;
    tensor_retain(g);
    *gqT = tensor_new(c, DT_U8, 2, (int64_t[]){Out, R});
    fp8_transpose_codes_cuda((uint8_t *)(*gqT)->data, (const uint8_t *)g->data, (size_t)R,
                             (size_t)Out, c->stream);
    if (db)
        fp8_colsum_finish_cuda((float *)db->data, acc_b, (const float *)out->grad_aux->data,
                               out->grad_aux->numel / (size_t)Out, (size_t)Out, c->stream);
    return 1;
}

void linear_fp8_backward_cuda(Ctx *c, Node *n, Fp8Recipe *r, int layer, int xlayer, int R,
                              int In, int Out, int gelu)
{
    Tensor *dy = n->out->grad, *xqT = n->saved[0], *wqT = n->saved[1];
    float *h0 = (float *)r->block[0]->data, *h1 = (float *)r->block[1]->data;
    const float *g_inv = fp8_sinv_of(r, h1, 1, layer);
    const float *w_inv = fp8_sinv_of(r, h0, 0, 2 * layer + 1);
    int acc = 0;
    /* dy's cast both ways; with a bias, db from the same read of dy */
    Tensor *db = n->n_in > 2 ? ad_grad_dst(c, n->in[2], &acc) : NULL;
    Tensor *gq, *gqT;
    if (!handed_codes(c, n->out, db, acc, R, Out, &gq, &gqT))
        grad_codes(c, r, layer, dy, NULL, db, acc, R, Out, &gq, &gqT);
    Tensor *dx = ad_grad_dst(c, n->in[0], &acc);
    if (dx) {
        CT_ASSERT(dx->dtype == DT_BF16 || dx->dtype == DT_F32, "linear_fp8: dx of type %s",
                  dtype_name(dx->dtype));
        if (gelu) {
            /* dg = dy w into a fresh buffer of h's type (what op_gelu's output
             * gradient would be), then dh (+)= dg GELU'(h), op_gelu's backward */
            Tensor *h = n->saved[2];
            Tensor *dg = tensor_new(c, h->dtype, 2, (int64_t[]){R, In});
            gemm(c, dg->data, dg->dtype, gq, FP8_E5M2, g_inv, wqT, FP8_E4M3, w_inv, NULL, 0, R,
                 In, Out, 0.0f);
            act_backward_cuda(ACT_GELU, dx->data, dg->data, h->data, NULL, dx->dtype,
                              (size_t)R * (size_t)In, acc, c->stream);
            tensor_release(dg);
        } else {
            gemm(c, dx->data, dx->dtype, gq, FP8_E5M2, g_inv, wqT, FP8_E4M3, w_inv, NULL, 0, R,
                 In, Out, acc ? 1.0f : 0.0f);
        }
    }
    Tensor *dw = ad_grad_dst(c, n->in[1], &acc);
    if (dw)
        gemm(c, dw->data, DT_F32, gqT, FP8_E5M2, g_inv, xqT, FP8_E4M3,
             fp8_sinv_of(r, h0, 0, 2 * xlayer), NULL, 0, Out, In, R, acc ? 1.0f : 0.0f);
    tensor_release(gq);
    tensor_release(gqT);
}

void ffn_fp8_backward_cuda(Ctx *c, Node *n, Fp8Recipe *r, int l1, int l2, int R, int D, int Hd,
                           int Out)
{
    Tensor *dy = n->out->grad, *xqT1 = n->saved[0], *wqT1 = n->saved[1], *h = n->saved[2];
    Tensor *gT2 = n->saved[3], *wqT2 = n->saved[4];   /* GELU(h)'s codes, w2's */
    float *h0 = (float *)r->block[0]->data, *h1 = (float *)r->block[1]->data;
    int acc = 0;
    /* the output Linear: dy's codes (and db2), then dw2 = dy^T GELU(h) */
    Tensor *db2 = ad_grad_dst(c, n->in[4], &acc);
    Tensor *gq2, *gqT2;
    if (!handed_codes(c, n->out, db2, acc, R, Out, &gq2, &gqT2))
        grad_codes(c, r, l2, dy, NULL, db2, acc, R, Out, &gq2, &gqT2);
    tensor_drop_grad(n->out);   /* dy: its codes are all that is read from here */
    const float *g2_inv = fp8_sinv_of(r, h1, 1, l2);
    Tensor *dw2 = ad_grad_dst(c, n->in[3], &acc);
    if (dw2)
        gemm(c, dw2->data, DT_F32, gqT2, FP8_E5M2, g2_inv, gT2, FP8_E4M3,
             fp8_sinv_of(r, h0, 0, 2 * l2), NULL, 0, Out, Hd, R, acc ? 1.0f : 0.0f);
    int acc_x = 0, acc_w1 = 0, acc_b1 = 0;
    Tensor *dx = ad_grad_dst(c, n->in[0], &acc_x), *dw1 = ad_grad_dst(c, n->in[1], &acc_w1);
    Tensor *db1 = ad_grad_dst(c, n->in[2], &acc_b1);
    if (!dx && !dw1 && !db1) {
        tensor_release(gq2);
        tensor_release(gqT2);
        return;
    }
    /* dg = dy w2 (GELU's output gradient, h's type), then the intermediate
     * Linear's codes of dh = T(dg GELU'(h)) and db1 in one pass: dh is never
     * written */
    Tensor *dg = tensor_new(c, h->dtype, 2, (int64_t[]){R, Hd});
    gemm(c, dg->data, dg->dtype, gq2, FP8_E5M2, g2_inv, wqT2, FP8_E4M3,
         fp8_sinv_of(r, h0, 0, 2 * l2 + 1), NULL, 0, R, Hd, Out, 0.0f);
    tensor_release(gq2);
    tensor_release(gqT2);
    Tensor *gq1, *gqT1;
    grad_codes(c, r, l1, dg, h, db1, acc_b1, R, Hd, &gq1, &gqT1);
    tensor_release(dg);
    tensor_release(n->saved[2]);   /* h, read for the last time (as the two ops' walk lets it go) */
    n->saved[2] = NULL;
    const float *g1_inv = fp8_sinv_of(r, h1, 1, l1);
    if (dx) {
        CT_ASSERT(dx->dtype == DT_BF16 || dx->dtype == DT_F32, "ffn_fp8: dx of type %s",
                  dtype_name(dx->dtype));
        gemm(c, dx->data, dx->dtype, gq1, FP8_E5M2, g1_inv, wqT1, FP8_E4M3,
             fp8_sinv_of(r, h0, 0, 2 * l1 + 1), NULL, 0, R, D, Hd, acc_x ? 1.0f : 0.0f);
    }
    if (dw1)
        gemm(c, dw1->data, DT_F32, gqT1, FP8_E5M2, g1_inv, xqT1, FP8_E4M3,
             fp8_sinv_of(r, h0, 0, 2 * l1), NULL, 0, Hd, D, R, acc_w1 ? 1.0f : 0.0f);
    tensor_release(gq1);
    tensor_release(gqT1);
}
#endif
