/* matmul_op.c — tensor ops matmul (2-D / batched 3-D) and linear, with
 * backward, autocast to f16/bf16 (the policy: ops/autocast.h), and TF32.
 *
 * For Y = op_a(A) op_b(B) (op = optional transpose):
 *   dA = dY op_b(B)^T      (A stored K x M when transposed: dA = op_b(B) dY^T)
 *   dB = op_a(A)^T dY      (B stored N x K when transposed: dB = dY^T op_a(A))
 * Each is one more matmul with the transposes chosen so nothing is copied;
 * beta = 1 adds into a gradient that already holds something (accumulation).
 *
 * Linear on CUDA can add its bias in the GEMM's epilogue (matmul_cuda_bias)
 * instead of a bias-add pass that reads and writes all of y again.
 * CTRAIN_LINEAR_EPILOGUE=0 turns that off, =1 on; unset: on
 * (the default in engine/settings.c; docs/kernels.md: measured faster on the H200).
 *
 * Linear + activation (op_linear_act, relu or gelu): y = act(x w^T + b) as
 * one node. Its forward is op_linear then op_act (the same kernels, the same
 * bits); its backward forms dh = dy act'(h) and, on CUDA with
 * CTRAIN_LINEAR_ACT_BGRAD=1, the bias gradient sum_r dh in the same pass
 * (act_backward_colsum_cuda), then the Linear's two GEMMs from dh.
 */
#include "ops.h"

#include <stdlib.h>
#include <string.h>

#include "engine/autograd.h"
#include "engine/kernels.h"
#include "engine/mem.h"
#include "engine/settings.h"
#include "autocast.h"
#include "cpu_f32.h"
#include "matmul.h"
#include "op_util.h"

/* C = op(A) op(B) + beta C for `batch` matrices, on the context's device. */
static void mm_run_ld(Ctx *c, Tensor *C, Tensor *A, Tensor *B, int M, int N, int K, int ta,
                      int tb, float beta, int batch, long long sA, long long sB, long long sC,
                      const MatmulLd *ld)
{
    if (c->device == DEV_CUDA) {
#ifdef CTRAIN_CUDA
        CT_ASSERT(A->dtype == B->dtype, "matmul operands must share a type (%s vs %s)",
                  dtype_name(A->dtype), dtype_name(B->dtype));
        matmul_cuda(c->lt, matmul_plan_cache_get(c), c->workspace, c->workspace_bytes,
                    c->stream, C->data, C->dtype, A->data, B->data, A->dtype, M, N, K, ta, tb,
                    1.0f, beta, batch, sA, sB, sC, c->allow_tf32, ld);
#endif
        return;
    }
    CT_ASSERT(!ld, "matmul: row strides are CUDA only (the CPU matmul takes packed matrices)");
    F32View va = f32_view(A, 1), vb = f32_view(B, 1), vc = f32_view(C, beta != 0.0f);
    matmul_cpu(vc.p, va.p, vb.p, M, N, K, ta, tb, 1.0f, beta, batch, sA, sB, sC);
    f32_done(&va, 0); f32_done(&vb, 0); f32_done(&vc, 1);
}

static void mm_run(Ctx *c, Tensor *C, Tensor *A, Tensor *B, int M, int N, int K, int ta,
                   int tb, float beta, int batch, long long sA, long long sB, long long sC)
{
    mm_run_ld(c, C, A, B, M, N, K, ta, tb, beta, batch, sA, sB, sC, NULL);
}

typedef struct MMShape {
    int M, N, K, batch;
    long long sA, sB, sC;
} MMShape;

static MMShape mm_shape(const char *op, Tensor *a, Tensor *b, int ta, int tb)
{
    char da[96], db[96];
    MMShape s;
    if (a->ndim < 2 || a->ndim > 3 || b->ndim < 2 || b->ndim > 3)
        ct_fatal("%s: operands must be 2-D or 3-D, got %s and %s", op,
                 tensor_desc(da, 96, a), tensor_desc(db, 96, b));
    int64_t ar = a->shape[a->ndim - 2], ac = a->shape[a->ndim - 1];
    int64_t br = b->shape[b->ndim - 2], bc = b->shape[b->ndim - 1];
    int64_t M = ta ? ac : ar, Ka = ta ? ar : ac, Kb = tb ? bc : br, N = tb ? br : bc;
    int64_t ba = a->ndim == 3 ? a->shape[0] : 1, bb = b->ndim == 3 ? b->shape[0] : 1;
    if (Ka != Kb || (a->ndim == 3 && b->ndim == 3 && ba != bb))
        ct_fatal("%s: shapes do not agree: %s%s times %s%s", op, tensor_desc(da, 96, a),
                 ta ? "^T" : "", tensor_desc(db, 96, b), tb ? "^T" : "");
    s.M = (int)M; s.N = (int)N; s.K = (int)Ka;
    s.batch = (int)(ba > bb ? ba : bb);
    s.sA = a->ndim == 3 ? (long long)(ar * ac) : 0;
    s.sB = b->ndim == 3 ? (long long)(br * bc) : 0;
    s.sC = (long long)M * N;
    return s;
}

/* The gradient of one operand; when that operand was broadcast over the
 * batch (stride 0), its gradient is the sum over the batch: one call per
 * batch entry, the first writing and the rest adding. */
static void mm_grad(Ctx *c, Tensor *dst, int accum, Tensor *X, Tensor *Y, int M, int N, int K,
                    int tx, int ty, int batch, long long sX, long long sY, int dst_broadcast)
{
    if (!dst_broadcast || batch == 1) {
        mm_run(c, dst, X, Y, M, N, K, tx, ty, accum ? 1.0f : 0.0f, batch, sX, sY,
               dst_broadcast ? 0 : (long long)M * N);
        return;
    }
    if (batch == 0 && !accum) {   /* an empty sum, written: zeros (dst may hold old values) */
        tensor_zero(dst);
        return;
    }
    size_t ex = dtype_size(X->dtype), ey = dtype_size(Y->dtype);
    for (int b = 0; b < batch; b++) {
        Tensor xv = *X, yv = *Y;
        xv.data = (char *)X->data + (size_t)(b * sX) * ex;
        yv.data = (char *)Y->data + (size_t)(b * sY) * ey;
        xv.numel = (size_t)M * K; /* only used by CPU views */
        yv.numel = (size_t)K * N;
        mm_run(c, dst, &xv, &yv, M, N, K, tx, ty, (accum || b > 0) ? 1.0f : 0.0f, 1, 0, 0, 0);
    }
}

/* forward: Y = op_a(A) op_b(B)   so   dA = dY op_b(B)^T,  dB = op_a(A)^T dY */
static void matmul_backward(Ctx *c, Node *n)
{
    Tensor *dy = n->out->grad, *a = n->saved[0], *b = n->saved[1];
    int ta = (int)n->i[0], tb = (int)n->i[1], M = (int)n->i[2], N = (int)n->i[3];
    int K = (int)n->i[4], batch = (int)n->i[5];
    long long sA = a->ndim == 3 ? (long long)M * K : 0, sB = b->ndim == 3 ? (long long)K * N : 0;
    long long sY = (long long)M * N;
    int acc;
    Tensor *da = ad_grad_dst(c, n->in[0], &acc);
    if (da) {
        if (!ta) mm_grad(c, da, acc, dy, b, M, K, N, 0, !tb, batch, sY, sB, sA == 0);
        else mm_grad(c, da, acc, b, dy, K, M, N, tb, 1, batch, sB, sY, sA == 0);
    }
    Tensor *db = ad_grad_dst(c, n->in[1], &acc);
    if (db) {
        if (!tb) mm_grad(c, db, acc, a, dy, K, N, M, !ta, 0, batch, sA, sY, sB == 0);
        else mm_grad(c, db, acc, dy, a, N, K, M, 1, ta, batch, sY, sA, sB == 0);
    }
}

Tensor *op_matmul(Ctx *c, Tensor *a0, Tensor *b0, int ta, int tb)
{
    op_check_float("matmul", a0);
    op_check_float("matmul", b0);
    op_check_device("matmul", c, a0);
    op_check_device("matmul", c, b0);
    Tensor *a = autocast_cast_input(c, a0), *b = autocast_cast_input(c, b0);
    if (a->dtype != b->dtype)
        ct_fatal("matmul: operand types differ (%s vs %s); cast one first",
                 dtype_name(a->dtype), dtype_name(b->dtype));
    MMShape s = mm_shape("matmul", a, b, ta, tb);
    int64_t shape[3] = {s.batch, s.M, s.N};
    int three = a->ndim == 3 || b->ndim == 3;
    Tensor *y = tensor_new(c, a->dtype, three ? 3 : 2, three ? shape : shape + 1);
    mm_run(c, y, a, b, s.M, s.N, s.K, ta, tb, 0.0f, s.batch, s.sA, s.sB, s.sC);
    Tensor *in[2] = {a, b};
    if (ad_needs_grad(c, in, 2)) {
        Node *n = ad_record(c, "matmul", matmul_backward, y, in, 2);
        int64_t v[6] = {ta, tb, s.M, s.N, s.K, s.batch};
        for (int i = 0; i < 6; i++) n->i[i] = v[i];
        ad_save(n, a);
        ad_save(n, b);
    }
    tensor_release(a);
    tensor_release(b);
    return y;
}

/* ---- linear ---- */

/* A developer switch, read once per process (the ops below ask per call):
 *   CTRAIN_LINEAR_EPILOGUE     1 adds Linear's bias in the GEMM (default on,
 *                              measured faster on the H200, docs/kernels.md)
 *   CTRAIN_LINEAR_BGRAD        1 takes the bias gradient from the weight
 *                              gradient's GEMM (cuBLASLt's BGRADB epilogue)
 *                              instead of a separate pass over dy (off:
 *                              measured slower)
 *   CTRAIN_LINEAR_ACT_BGRAD    1 sums op_linear_act's bias gradient in the
 *                              activation's backward pass (default on,
 *                              measured faster on the H100, docs/kernels.md) */
static int switch_once(SettingId id)
{
    static int value[SET_COUNT], read[SET_COUNT];
    if (!read[id]) {
        value[id] = setting_switch(id);
        read[id] = 1;
    }
    return value[id];
}

/* y = x wl^T, with the bias added in the GEMM's epilogue when that is on
 * and cuBLASLt has an algorithm for it. Returns 1 when y holds the bias, 0
 * when the caller must still add it. The epilogue takes a bias of y's type
 * (ops/matmul_cuda.c): under autocast that is the parameter's AMP working
 * copy when there is one (autocast_cast_weight returns it), else a cast of
 * Out elements, the same values the separate add would read. */
static int linear_gemm(Ctx *c, Tensor *y, Tensor *x, Tensor *wl, Tensor *bias, int R, int Out,
                       int In)
{
    if (bias && c->device == DEV_CUDA && switch_once(SET_LINEAR_EPILOGUE)) {
#ifdef CTRAIN_CUDA
        Tensor *bl = autocast_cast_weight(c, bias, y->dtype);
        int fused = matmul_cuda_bias(c->lt, matmul_plan_cache_get(c), c->workspace,
                                     c->workspace_bytes, c->stream, y->data, y->dtype, x->data,
                                     wl->data, x->dtype, bl->data, bl->dtype, R, Out, In, 0, 1,
                                     c->allow_tf32);
        tensor_release(bl);   /* stream-ordered free: after the GEMM has read it */
        return fused;
#endif
    }
    mm_run(c, y, x, wl, R, Out, In, 0, 1, 0.0f, 1, 0, 0, 0);
    return 0;
}

/* dw (+)= dy^T x and, when the GEMM can give it (CUDA, f32 dw, the
 * epilogue on, not TF32: the epilogue would sum dy after its rounding to
 * TF32, where the separate pass sums it in f32), db (+)= sum_r dy[r] in the
 * same GEMM. Returns 1 when db was done here. The epilogue writes its
 * vector: into db when db is fresh (acc_b 0), else into a temporary of Out
 * floats then added to db (a parameter's gradient always accumulates). */
static int linear_dw(Ctx *c, Tensor *dw, int acc, Tensor *db, int acc_b, Tensor *dy, Tensor *x,
                     int R, int In, int Out, const MatmulLd *ld)
{
#ifdef CTRAIN_CUDA
    if (db && c->device == DEV_CUDA && dw->dtype == DT_F32 && switch_once(SET_LINEAR_BGRAD) &&
        !(c->allow_tf32 && x->dtype == DT_F32)) {
        CT_ASSERT(dy->dtype == x->dtype, "linear: dy %s and x %s differ",
                  dtype_name(dy->dtype), dtype_name(x->dtype));
        const size_t bytes = (size_t)Out * sizeof(float);
        float *sum = acc_b ? (float *)mem_alloc(c, bytes) : (float *)db->data;
        int done = matmul_cuda_bgrad(c->lt, matmul_plan_cache_get(c), c->workspace,
                                     c->workspace_bytes, c->stream, dw->data, DT_F32, dy->data,
                                     x->data, x->dtype, sum, Out, In, R, 1, 0,
                                     acc ? 1.0f : 0.0f, c->allow_tf32, ld);
        if (done && acc_b) cast_cuda(db->data, DT_F32, sum, DT_F32, (size_t)Out, 1, c->stream);
        if (acc_b) mem_free(c, sum, bytes);
        return done;
    }
#else
    (void)db;
    (void)acc_b;
#endif
    mm_run_ld(c, dw, dy, x, Out, In, R, 1, 0, acc ? 1.0f : 0.0f, 1, 0, 0, 0, ld);
    return 0;
}

/* forward: y = x w^T + bias     (x [R, in], w [out, in])
 * so   dx = dy w,   dw += dy^T x   (f32, into the gradient buffer),
 *      dbias += sum_r dy[r]        (in dw's GEMM with CTRAIN_LINEAR_BGRAD=1)
 * (the same whether the forward added the bias in the epilogue or not) */
/* dx (+)= dy w, dw += dy^T x and, when db is not NULL, db (+)= sum_r dy (in
 * dw's GEMM under CTRAIN_LINEAR_BGRAD=1, else a separate pass): the
 * Linear's gradients from dy (saved: x, w in x's type). ldy: dy's row
 * stride on CUDA when its rows are padded past Out (op_linear_pad, which
 * saves w zero-padded to ldy rows), else 0. */
static void linear_grads(Ctx *c, Node *n, Tensor *dy, Tensor *db, int acc_b, int R, int In,
                         int Out, int ldy)
{
    Tensor *x = n->saved[0], *wl = n->saved[1];
    const MatmulLd pad = {ldy, 0, 0}, *ld = ldy ? &pad : NULL;   /* dy is A in both GEMMs */
    /* op_linear_pad saved its zero-padded weight: dx's GEMM reads dy's rows
     * whole (K = ldy, packed), the zero rows meeting the padding */
    const int Kdx = (int)wl->shape[0];
    int acc;
    Tensor *dx = ad_grad_dst(c, n->in[0], &acc);
    if (dx)
        mm_run_ld(c, dx, dy, wl, R, In, Kdx, 0, 0, acc ? 1.0f : 0.0f, 1, 0, 0, 0,
                  Kdx == Out ? ld : NULL);
    Tensor *dw = ad_grad_dst(c, n->in[1], &acc);
    if (dw && linear_dw(c, dw, acc, db, acc_b, dy, x, R, In, Out, ld)) db = NULL;
    if (!db) return;
    if (c->device == DEV_CUDA) {
#ifdef CTRAIN_CUDA
        if (ldy) {   /* the sums of all ldy columns, then the first Out into db */
            const size_t bytes = (size_t)ldy * sizeof(float);
            float *sum = (float *)mem_alloc(c, bytes);
            bias_backward_cuda(sum, dy->data, dy->dtype, (size_t)R, (size_t)ldy, 0, c->stream);
            cast_cuda(db->data, DT_F32, sum, DT_F32, (size_t)Out, acc_b, c->stream);
            mem_free(c, sum, bytes);
            return;
        }
        bias_backward_cuda((float *)db->data, dy->data, dy->dtype, (size_t)R, (size_t)Out, acc_b,
                           c->stream);
#endif
    } else {
        F32View vdy = f32_view(dy, 1);
        bias_backward_cpu((float *)db->data, vdy.p, (size_t)R, (size_t)Out, acc_b);
        f32_done(&vdy, 0);
    }
}

/* forward: y = x w^T + bias     (x [R, in], w [out, in])
 * so   dx = dy w,   dw += dy^T x   (f32, into the gradient buffer),
 *      dbias += sum_r dy[r]        (in dw's GEMM with CTRAIN_LINEAR_BGRAD=1)
 * (the same whether the forward added the bias in the epilogue or not) */
static void linear_backward(Ctx *c, Node *n)
{
    int acc_b = 0;
    Tensor *db = n->n_in > 2 ? ad_grad_dst(c, n->in[2], &acc_b) : NULL;
    if (db) CT_ASSERT(db->dtype == DT_F32, "linear: bias gradient must be f32");
    linear_grads(c, n, n->out->grad, db, acc_b, (int)n->i[0], (int)n->i[1], (int)n->i[2], 0);
}

/* y = x w^T + bias with the checks, autocast and the bias epilogue; *xo and
 * *wlo get x and w as the GEMM read them (the caller releases them). */
static Tensor *linear_forward(Ctx *c, Tensor *x0, Tensor *w0, Tensor *bias, Tensor **xo,
                              Tensor **wlo)
{
    char dx[96], dw[96];
    op_check_float("linear", x0);
    op_check_float("linear", w0);
    op_check_device("linear", c, x0);
    op_check_device("linear", c, w0);
    if (w0->ndim != 2 || w0->shape[1] != (int64_t)tensor_cols(x0))
        ct_fatal("linear: weight %s does not fit input %s (weight is [out, in])",
                 tensor_desc(dw, 96, w0), tensor_desc(dx, 96, x0));
    if (bias && (bias->ndim != 1 || bias->shape[0] != w0->shape[0]))
        ct_fatal("linear: bias %s does not match weight %s", tensor_desc(dx, 96, bias),
                 tensor_desc(dw, 96, w0));
    Tensor *x = autocast_cast_input(c, x0);
    /* the weight is read in x's type; its gradient lands in f32 in the buffer */
    Tensor *wl = autocast_cast_weight(c, w0, x->dtype);
    int R = (int)tensor_rows(x), In = (int)w0->shape[1], Out = (int)w0->shape[0];
    int64_t shape[CT_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    shape[x->ndim - 1] = Out;
    Tensor *y = tensor_new(c, x->dtype, x->ndim, shape);
    int fused = linear_gemm(c, y, x, wl, bias, R, Out, In);
    if (bias && !fused) {
        int g = ad_set_grad(c, 0);
        Tensor *yb = op_bias_add(c, y, bias);
        ad_set_grad(c, g);
        tensor_release(y);
        y = yb;
    }
    *xo = x;
    *wlo = wl;
    return y;
}

Tensor *op_linear(Ctx *c, Tensor *x0, Tensor *w0, Tensor *bias)
{
    Tensor *x, *wl;
    Tensor *y = linear_forward(c, x0, w0, bias, &x, &wl);
    Tensor *in[3] = {x, w0, bias};
    if (ad_needs_grad(c, in, bias ? 3 : 2)) {
        Node *n = ad_record(c, "linear", linear_backward, y, in, bias ? 3 : 2);
        n->i[0] = (int64_t)tensor_rows(x);
        n->i[1] = w0->shape[1];
        n->i[2] = w0->shape[0];
        ad_save(n, x);
        ad_save(n, wl);
    }
    tensor_release(x);
    tensor_release(wl);
    return y;
}

/* ---- linear with padded rows ---- */

/* The padding columns' value: every byte 0xF8, in any type (f16 -40,704,
 * bf16 and f32 about -4.0e34). Next to any real logit, softmax (f32 math)
 * gives such a column exactly 0. */
#define LINEAR_PAD_BYTE 0xF8

/* CPU: the first n columns of src's R rows (scols apart) into dst's rows
 * (dcols apart); dst's columns n .. dcols-1 are left for the caller. */
static void cols_copy_cpu(Tensor *dst, int dcols, Tensor *src, int scols, size_t R, int n)
{
    F32View vd = f32_view(dst, 0), vs = f32_view(src, 1);
    for (size_t r = 0; r < R; r++)
        memcpy(vd.p + r * (size_t)dcols, vs.p + r * (size_t)scols, (size_t)n * sizeof(float));
    f32_done(&vs, 0);
    f32_done(&vd, 1);
}

#ifdef CTRAIN_CUDA
/* CUDA: wl [Out, In] as a [cols, In] copy whose last cols - Out rows are 0,
 * and the bias (or none) as cols entries of type dt, the last cols - Out
 * the padding value; stream-ordered, capture-safe (a copy and memsets). */
static Tensor *pad_weight_cuda(Ctx *c, Tensor *wl, int cols)
{
    const size_t es = dtype_size(wl->dtype), Out = (size_t)wl->shape[0];
    const size_t In = (size_t)wl->shape[1];
    Tensor *wp = tensor_new(c, wl->dtype, 2, (int64_t[]){cols, (int64_t)In});
    CUDA_CHECK(cudaMemcpyAsync(wp->data, wl->data, Out * In * es, cudaMemcpyDeviceToDevice,
                               c->stream));
    CUDA_CHECK(cudaMemsetAsync((char *)wp->data + Out * In * es, 0, ((size_t)cols - Out) * In * es,
                               c->stream));
    return wp;
}

static Tensor *pad_bias_cuda(Ctx *c, Tensor *bias, DType dt, int Out, int cols)
{
    const size_t es = dtype_size(dt);
    Tensor *bp = tensor_new(c, dt, 1, (int64_t[]){cols});
    if (bias) cast_cuda(bp->data, dt, bias->data, bias->dtype, (size_t)Out, 0, c->stream);
    else CUDA_CHECK(cudaMemsetAsync(bp->data, 0, (size_t)Out * es, c->stream));
    CUDA_CHECK(cudaMemsetAsync((char *)bp->data + (size_t)Out * es, LINEAR_PAD_BYTE,
                               (size_t)(cols - Out) * es, c->stream));
    return bp;
}
#endif

/* forward: y = x wp^T + bp, wp = [w; 0], bp = [b, padding]   (y [R, cols])
 * so   dx = dy wp  (= dy[:, :Out] w while dy's padding columns are finite:
 *                   they meet wp's zero rows),
 *      dw += dy[:, :Out]^T x,  db += sum_r dy[r, :Out]   (the padding has no
 *                   parameter and so no gradient)
 * CUDA reads dy[:, :Out] in place (its row stride as the GEMM's leading
 * dimension); the CPU runs op_linear's backward on a packed copy of it. */
static void linear_pad_backward(Ctx *c, Node *n)
{
    int acc_b = 0;
    Tensor *db = n->n_in > 2 ? ad_grad_dst(c, n->in[2], &acc_b) : NULL;
    if (db) CT_ASSERT(db->dtype == DT_F32, "linear_pad: bias gradient must be f32");
    const int R = (int)n->i[0], In = (int)n->i[1], Out = (int)n->i[2], cols = (int)n->i[3];
    Tensor *dy = n->out->grad;
    if (c->device == DEV_CUDA || cols == Out) {
        linear_grads(c, n, dy, db, acc_b, R, In, Out, cols > Out ? cols : 0);
        return;
    }
    Tensor *dyp = tensor_new(c, dy->dtype, 2, (int64_t[]){R, Out});
    cols_copy_cpu(dyp, Out, dy, cols, (size_t)R, Out);
    linear_grads(c, n, dyp, db, acc_b, R, In, Out, 0);
    tensor_release(dyp);
}

Tensor *op_linear_pad(Ctx *c, Tensor *x0, Tensor *w0, Tensor *bias, int cols)
{
    char dw[96], db[96];
    op_check_float("linear_pad", x0);
    op_check_float("linear_pad", w0);
    op_check_device("linear_pad", c, x0);
    op_check_device("linear_pad", c, w0);
    if (w0->ndim != 2 || cols < w0->shape[0])
        ct_fatal("linear_pad: %d columns cannot hold the outputs of weight %s (weight is "
                 "[out, in])", cols, tensor_desc(dw, 96, w0));
    if (bias && (bias->ndim != 1 || bias->shape[0] != w0->shape[0]))
        ct_fatal("linear_pad: bias %s does not match weight %s", tensor_desc(db, 96, bias),
                 tensor_desc(dw, 96, w0));
    const int Out = (int)w0->shape[0], pad = cols > Out;
    Tensor *x, *wl, *y;
    if (c->device == DEV_CUDA && pad) {
#ifdef CTRAIN_CUDA
        /* one GEMM over all cols outputs: every dimension of the forward and
         * dx GEMMs a multiple of 8 where cols is (cuBLASLt's aligned kernels) */
        const DType dt = autocast_dtype(c, x0->dtype);
        Tensor *w = autocast_cast_weight(c, w0, dt);
        Tensor *wp = pad_weight_cuda(c, w, cols), *bp = pad_bias_cuda(c, bias, dt, Out, cols);
        tensor_release(w);
        y = linear_forward(c, x0, wp, bp, &x, &wl);   /* records x's autocast only */
        tensor_release(wp);
        tensor_release(bp);
#else
        ct_fatal("linear_pad: a CUDA context in a build without CUDA");
#endif
    } else {
        y = linear_forward(c, x0, w0, bias, &x, &wl);
        if (pad) {   /* the packed result into padded rows, with CUDA's padding bytes */
            int64_t shape[CT_MAX_DIMS];
            for (int i = 0; i < y->ndim; i++) shape[i] = y->shape[i];
            shape[y->ndim - 1] = cols;
            Tensor *yp = tensor_new(c, y->dtype, y->ndim, shape);
            const size_t R = tensor_rows(x), es = dtype_size(yp->dtype);
            cols_copy_cpu(yp, cols, y, Out, R, Out);
            /* in yp's own type (an f32 value rounded to f16 would be inf) */
            for (size_t r = 0; r < R; r++)
                memset((char *)yp->data + (r * (size_t)cols + (size_t)Out) * es, LINEAR_PAD_BYTE,
                       (size_t)(cols - Out) * es);
            tensor_release(y);
            y = yp;
        }
    }
    Tensor *in[3] = {x, w0, bias};
    if (ad_needs_grad(c, in, bias ? 3 : 2)) {
        Node *n = ad_record(c, "linear_pad", linear_pad_backward, y, in, bias ? 3 : 2);
        n->i[0] = (int64_t)tensor_rows(x);
        n->i[1] = w0->shape[1];
        n->i[2] = Out;
        n->i[3] = cols;
        ad_save(n, x);
        ad_save(n, wl);   /* CUDA: the zero-padded copy [cols, In] */
    }
    tensor_release(x);
    tensor_release(wl);
    return y;
}

/* ---- linear + activation ---- */

/* forward: h = x w^T + b,  y = act(h)    (saved: x, w in x's type, h)
 * so   dh = dy act'(h),  db (+)= sum_r dh[r],  dx (+)= dh w,  dw += dh^T x
 * db in the activation's pass under CTRAIN_LINEAR_ACT_BGRAD=1, else as
 * op_linear's backward makes it (a separate pass, or the weight gradient's
 * GEMM under CTRAIN_LINEAR_BGRAD=1): the composed ops' bits either way. dy
 * and h are let go as soon as dh exists, as the two ops' walk would. */
static void linear_act_backward(Ctx *c, Node *n)
{
    Tensor *dy = n->out->grad, *h = n->saved[2];
    const ActKind k = (ActKind)n->i[3];
    const int R = (int)n->i[0], In = (int)n->i[1], Out = (int)n->i[2];
    int acc_b = 0;
    Tensor *db = n->n_in > 2 ? ad_grad_dst(c, n->in[2], &acc_b) : NULL;
    if (db) CT_ASSERT(db->dtype == DT_F32, "linear_act: bias gradient must be f32");
    /* dh[i] reads h[i] alone (both kernels, and the CPU's loop), so dh is
     * written over h where this node holds h's only reference: no buffer the
     * size of the FFN's widest activation at the top layer's backward */
    Tensor *dh = tensor_take_storage(h);
    if (!dh) dh = tensor_new_like(c, h, h->dtype);
    if (c->device == DEV_CUDA) {
#ifdef CTRAIN_CUDA
        /* CTRAIN_LINEAR_BGRAD, where on, keeps db in the GEMM as op_linear would */
        if (db && switch_once(SET_LINEAR_ACT_BGRAD) && !switch_once(SET_LINEAR_BGRAD)) {
            act_backward_colsum_cuda(k, dh->data, (float *)db->data, acc_b, dy->data, h->data,
                                     h->dtype, (size_t)R, (size_t)Out, c->stream);
            db = NULL;
        } else {
            act_backward_cuda(k, dh->data, dy->data, h->data, NULL, h->dtype, h->numel, 0,
                              c->stream);
        }
#endif
    } else {
        F32View vdh = f32_view(dh, 0), vdy = f32_view(dy, 1), vh = f32_view(h, 1);
        act_backward_cpu(k, vdh.p, vdy.p, vh.p, NULL, dh->numel, 0);
        f32_done(&vdh, 1); f32_done(&vdy, 0); f32_done(&vh, 0);
    }
    tensor_release(n->out->grad);   /* dy and h: read for the last time */
    n->out->grad = NULL;
    tensor_release(n->saved[2]);
    n->saved[2] = NULL;
    linear_grads(c, n, dh, db, acc_b, R, In, Out, 0);   /* op_linear's backward, dh as dy */
    tensor_release(dh);
}

Tensor *op_linear_act(Ctx *c, Tensor *x0, Tensor *w0, Tensor *bias, ActKind k)
{
    CT_ASSERT(k == ACT_RELU || k == ACT_GELU, "linear_act: relu or gelu, got kind %d", (int)k);
    Tensor *x, *wl;
    Tensor *h = linear_forward(c, x0, w0, bias, &x, &wl);
    const int g = ad_set_grad(c, 0);   /* op_act's kernels, recorded below as one node */
    Tensor *y = op_act(c, h, k);
    ad_set_grad(c, g);
    Tensor *in[3] = {x, w0, bias};
    if (ad_needs_grad(c, in, bias ? 3 : 2)) {
        Node *n = ad_record(c, k == ACT_RELU ? "linear_relu" : "linear_gelu", linear_act_backward,
                            y, in, bias ? 3 : 2);
        n->i[0] = (int64_t)tensor_rows(x);
        n->i[1] = w0->shape[1];
        n->i[2] = w0->shape[0];
        n->i[3] = k;
        ad_save(n, x);
        ad_save(n, wl);
        ad_save(n, h);
    }
    tensor_release(x);
    tensor_release(wl);
    tensor_release(h);
    return y;
}
