/* conv_gemm.c — a 1 x 1 convolution as one cuBLASLt GEMM (ops/conv_gemm.h):
 * which GEMM each direction is, and the strided copies around it.
 *
 * Row-major, as ops/matmul.h takes them (transB: B stored N x K):
 *   forward          y  [M, K] = xs [M, C] @ w [K, C]^T     matmul(y, xs, w, M, K, C, 0, 1)
 *   backward data    dx [M, C] = dy [M, K] @ w [K, C]       matmul(dx, dy, w, M, C, K, 0, 0)
 *   backward filter  dw [K, C] = dy [M, K]^T @ xs [M, C]    matmul(dw, dy, xs, K, C, M, 1, 0)
 * with beta = accum where the GEMM writes the caller's tensor in place.
 */
#include "conv_gemm.h"

#include "engine/error.h"
#include "engine/mem.h"
#include "matmul.h"

int conv_gemm_applies(const Conv2dShape *s)
{
    return s->R == 1 && s->S == 1 && s->pad_h == 0 && s->pad_w == 0 && s->dil_h == 1 &&
           s->dil_w == 1;
}

#ifdef CTRAIN_CUDA
static int strided(const Conv2dShape *s) { return s->stride_h != 1 || s->stride_w != 1; }

/* C (type tc: dt, or f32) (+)= op(A) op(B), A and B of type dt. */
static void gemm(Ctx *c, void *C, DType tc, const void *A, const void *B, DType dt, int M, int N,
                 int K, int transA, int transB, int accum)
{
    matmul_cuda(c->lt, matmul_plan_cache_get(c), c->workspace, c->workspace_bytes, c->stream, C,
                tc, A, B, dt, M, N, K, transA, transB, 1.0f, accum ? 1.0f : 0.0f, 1, 0, 0, 0,
                c->allow_tf32, NULL);
}

/* The output pixels' inputs as rows: x itself at stride 1, else a gathered
 * pool buffer (*bytes its size, for rows_release). */
static const void *input_rows(Ctx *c, const void *x, DType dt, const Conv2dShape *s,
                              size_t *bytes)
{
    *bytes = 0;
    if (!strided(s)) return x;
    *bytes = (size_t)s->N * s->P * s->Q * s->C * dtype_size(dt);
    void *xs = mem_alloc(c, *bytes);
    conv_gemm_gather_launch(xs, x, dtype_size(dt), s->N, s->H, s->W, s->C, s->P, s->Q,
                            s->stride_h, s->stride_w, c->stream);
    return xs;
}

static void rows_release(Ctx *c, const void *rows, const void *x, size_t bytes)
{
    if (rows != x) mem_free(c, (void *)rows, bytes);
}

static void check_conv(const char *fn, DType dt, const Conv2dShape *s)
{
    CT_ASSERT(conv_gemm_applies(s), "%s: a %dx%d filter with padding %dx%d and dilation %dx%d "
              "is not a 1 x 1 GEMM", fn, s->R, s->S, s->pad_h, s->pad_w, s->dil_h, s->dil_w);
    CT_ASSERT(dt == DT_F32 || dt == DT_F16 || dt == DT_BF16,
              "%s: dtype %s; expected f32, f16 or bf16", fn, dtype_name(dt));
}

void conv_gemm_forward_cuda(Ctx *c, void *y, const void *x, const void *w, DType dt,
                            const Conv2dShape *s)
{
    check_conv("conv_gemm_forward_cuda", dt, s);
    const int M = s->N * s->P * s->Q;
    if (M == 0) return;
    size_t bytes;
    const void *xs = input_rows(c, x, dt, s, &bytes);
    gemm(c, y, dt, xs, w, dt, M, s->K, s->C, 0, 1, 0);
    rows_release(c, xs, x, bytes);
}

void conv_gemm_backward_data_cuda(Ctx *c, void *dx, const void *dy, const void *w, DType dt,
                                  const Conv2dShape *s, int accum)
{
    check_conv("conv_gemm_backward_data_cuda", dt, s);
    const int M = s->N * s->P * s->Q;
    if (M == 0) return;
    if (!strided(s)) {
        gemm(c, dx, dt, dy, w, dt, M, s->C, s->K, 0, 0, accum);
        return;
    }
    /* dxs in dt when it is copied, in f32 when it is added (one rounding) */
    const DType tdxs = accum ? DT_F32 : dt;
    const size_t bytes = (size_t)M * s->C * dtype_size(tdxs);
    void *dxs = mem_alloc(c, bytes);
    gemm(c, dxs, tdxs, dy, w, dt, M, s->C, s->K, 0, 0, 0);
    conv_gemm_scatter_launch(dx, dxs, dt, s->N, s->H, s->W, s->C, s->P, s->Q, s->stride_h,
                             s->stride_w, accum, c->stream);
    mem_free(c, dxs, bytes);
}

void conv_gemm_backward_filter_cuda(Ctx *c, void *dw, const void *dy, const void *x, DType dt,
                                    const Conv2dShape *s, int accum)
{
    check_conv("conv_gemm_backward_filter_cuda", dt, s);
    const int M = s->N * s->P * s->Q;
    CT_ASSERT(M > 0, "conv_gemm_backward_filter_cuda: an empty batch (the caller writes dw)");
    size_t bytes;
    const void *xs = input_rows(c, x, dt, s, &bytes);
    gemm(c, dw, dt, dy, xs, dt, s->K, s->C, M, 1, 0, accum);
    rows_release(c, xs, x, bytes);
}
#endif
