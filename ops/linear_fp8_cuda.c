/* linear_fp8_cuda.c — the FP8 Linear on the GPU (the math: linear_fp8.h):
 * the casts of ops/fp8.cu and cuBLASLt's FP8 GEMM (ops/fp8_gemm.h), whose
 * operands both have K contiguous. So each product reads:
 *   forward  y [R, Out]  = xq [R, In]   . wq [Out, In]^T    K = In
 *   dgrad    dx [R, In]  = gq [R, Out]  . wqT [In, Out]^T   K = Out
 *   wgrad    dw [Out, In] = gqT [Out, R] . xqT [In, R]^T    K = R  (f32, beta = accumulate)
 * The forward writes x's codes both ways in one pass (xq for its GEMM, xqT
 * kept for the weight gradient) and w's both ways (wqT kept for dgrad); the
 * backward casts dy both ways. The bias is added by a separate pass (the FP8
 * GEMM's bias epilogue is not used yet). Every dimension must be a multiple
 * of 16 (fp8_gemm.h).
 */
#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>

#include "engine/autograd.h"
#include "engine/error.h"
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

static void gemm(Ctx *c, void *D, DType dt, const Tensor *A, Fp8Format af, const float *a_inv,
                 const Tensor *B, Fp8Format bf, const float *b_inv, int M, int N, int K, float beta)
{
    fp8_gemm_cache_attach(c);   /* ctx_free clears the plans before the handle goes */
    if (fp8_gemm_cuda(c->lt, c->workspace, c->workspace_bytes, c->stream, D, dt,
                      (const uint8_t *)A->data, af, a_inv, (const uint8_t *)B->data, bf, b_inv, M, N,
                      K, beta) != 0)
        ct_fatal("--precision fp8: cuBLASLt has no FP8 GEMM for %d x %d x %d", M, N, K);
}

void linear_fp8_forward_cuda(Ctx *c, Fp8Recipe *r, int layer, Tensor **y, Tensor *x, Tensor *w,
                             Tensor *bias, Tensor **saved, int R, int In, int Out)
{
    check_dims(R, In, Out);
    float *h = (float *)r->block[0]->data;
    float *scale = fp8_scale_of(r, h, 0), *scale_inv = scale + r->n[0];
    const int sx = 2 * layer, sw = 2 * layer + 1;
    Tensor *xq = saved[0], *wq = saved[1];
    Tensor *xqT = tensor_new(c, DT_U8, 2, (int64_t[]){In, R});
    Tensor *wqT = tensor_new(c, DT_U8, 2, (int64_t[]){In, Out});
    fp8_cast_transpose_cuda((uint8_t *)xqT->data, (uint8_t *)xq->data, fp8_amax_slot(c, r, 0, sx),
                            x->data, x->dtype, (size_t)R, (size_t)In, &scale[sx], FP8_E4M3,
                            c->stream);
    fp8_cast_transpose_cuda((uint8_t *)wqT->data, (uint8_t *)wq->data, fp8_amax_slot(c, r, 0, sw),
                            w->data, DT_F32, (size_t)Out, (size_t)In, &scale[sw], FP8_E4M3,
                            c->stream);
    gemm(c, (*y)->data, (*y)->dtype, xq, FP8_E4M3, &scale_inv[sx], wq, FP8_E4M3, &scale_inv[sw], R, Out,
         In, 0.0f);
    if (bias) {
        int g = ad_set_grad(c, 0);
        Tensor *yb = op_bias_add(c, *y, bias);
        ad_set_grad(c, g);
        tensor_release(*y);
        *y = yb;
    }
    /* backward reads the transposes only: the row-major codes go now */
    tensor_release(xq);
    tensor_release(wq);
    saved[0] = xqT;
    saved[1] = wqT;
}

void linear_fp8_backward_cuda(Ctx *c, Node *n, Fp8Recipe *r, int layer, int R, int In, int Out)
{
    Tensor *dy = n->out->grad, *xqT = n->saved[0], *wqT = n->saved[1];
    float *h0 = (float *)r->block[0]->data, *h1 = (float *)r->block[1]->data;
    const float *sinv0 = fp8_scale_of(r, h0, 0) + r->n[0];
    float *amax1 = fp8_amax_of(r, h1, 1), *scale1 = fp8_scale_of(r, h1, 1);
    const float *sinv1 = scale1 + r->n[1];
    Tensor *gq = tensor_new(c, DT_U8, 2, (int64_t[]){R, Out});
    Tensor *gqT = tensor_new(c, DT_U8, 2, (int64_t[]){Out, R});
    fp8_cast_transpose_cuda((uint8_t *)gqT->data, (uint8_t *)gq->data, &amax1[layer], dy->data,
                            dy->dtype, (size_t)R, (size_t)Out, &scale1[layer], FP8_E5M2, c->stream);
    int acc;
    Tensor *dx = ad_grad_dst(c, n->in[0], &acc);
    if (dx) {
        CT_ASSERT(dx->dtype == DT_BF16 || dx->dtype == DT_F32, "linear_fp8: dx of type %s",
                  dtype_name(dx->dtype));
        gemm(c, dx->data, dx->dtype, gq, FP8_E5M2, &sinv1[layer], wqT, FP8_E4M3,
             &sinv0[2 * layer + 1], R, In, Out, acc ? 1.0f : 0.0f);
    }
    Tensor *dw = ad_grad_dst(c, n->in[1], &acc);
    if (dw)
        gemm(c, dw->data, DT_F32, gqT, FP8_E5M2, &sinv1[layer], xqT, FP8_E4M3, &sinv0[2 * layer],
             Out, In, R, acc ? 1.0f : 0.0f);
    Tensor *db = n->n_in > 2 ? ad_grad_dst(c, n->in[2], &acc) : NULL;
    if (db)
        bias_backward_cuda((float *)db->data, dy->data, dy->dtype, (size_t)R, (size_t)Out, acc,
                           c->stream);
    tensor_release(gq);
    tensor_release(gqT);
}
#endif
