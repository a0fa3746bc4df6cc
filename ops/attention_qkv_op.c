/* attention_qkv_op.c — attention read straight from one q/k/v projection
 * (op_attention_qkv; the math is ops/attention.h's).
 *
 * Shape letters: B batch, T tokens, H heads, Dh head width, D = H Dh.
 * qkv [B, T, 3 D] is x Wqkv^T + bqkv, the three Linears of self-attention as
 * one GEMM (Wqkv = [Wq; Wk; Wv], [3 D, D]): token t's row holds q, then k,
 * then v, each [H, Dh]. So q[b, t, h, e] = qkv[b, t, h Dh + e], k at + D, v
 * at + 2 D: [B, T, H, Dh] tensors with token stride 3 D. The backward
 * writes dq, dk, dv into dqkv at the same places, and the projection's
 * backward then needs one data-gradient GEMM with K = 3 D (dx = dqkv Wqkv)
 * where three Linears need three that add into dx:
 *   forward                               backward
 *   q, k, v = views of qkv (stride 3 D)    dq, dk, dv = attention backward
 *   out = attention(q, k, v, mask)         dqkv[.., 0:D | D:2D | 2D:3D] = dq | dk | dv
 *
 * Paths:
 *   - CUDA, CTRAIN_ATTN=sm90 or auto (the default) on an sm_90 device
 *     (ops/attention_sm90.h: head width 64, T a multiple of 64): ctrain's
 *     wgmma kernels, reading and writing in place the same way, with the CPU
 *     reference's dropout mask.
 *   - CUDA: cuDNN's fused attention reading q, k, v and writing dq, dk, dv
 *     in place with the 3 D token stride (ops/attention_cudnn.h, SdpaShape.ld),
 *     where op_attention_qkv_supported says it plans (CTRAIN_ATTN=cudnn or
 *     auto, f16 / bf16, 16-byte aligned); elsewhere on CUDA the caller keeps three
 *     projections (models/bert.c asks first). Its dropout mask is cuDNN's
 *     own (the same as op_attention_bthd's cuDNN path for the same seed and
 *     offset).
 *   - CPU: q, k, v gathered into [B, H, T, Dh] f32 copies and the CPU
 *     reference run on them: the same values and the same dropout draw as
 *     op_attention_bthd on q, k, v split from qkv, bit for bit.
 * Node (CUDA): saves qkv, out, the rows' statistics f32 [B, H, T] (cuDNN's stats or the
 * wgmma kernels' lse) and the mask;
 * (CPU): qkv and P [B, H, T, T] in qkv's type (as op_attention's CPU path).
 */
#include "attention.h"

#include <stdlib.h>
#include <string.h>

#include "engine/autograd.h"
#include "engine/kernels.h"
#include "engine/mem.h"
#include "engine/settings.h"
#include "attention_cudnn.h"
#include "attention_fused.h"
#include "attention_sm90.h"
#include "autocast.h"
#include "cpu_f32.h"
#include "op_util.h"
#include "ops.h"

typedef struct {
    size_t B, T, H, Dh;
} QkvDims;

/* i[0] seed, i[1] offset, i[2..5] B T H Dh, i[6] mask saved; f[0] = p */
static void qkv_node_set(Node *n, float p, uint64_t seed, uint64_t offset, QkvDims d, int mask)
{
    n->f[0] = p;
    n->i[0] = (int64_t)seed;
    n->i[1] = (int64_t)offset;
    n->i[2] = (int64_t)d.B; n->i[3] = (int64_t)d.T;
    n->i[4] = (int64_t)d.H; n->i[5] = (int64_t)d.Dh;
    n->i[6] = mask;
}

static QkvDims qkv_node_dims(const Node *n)
{
    QkvDims d = {(size_t)n->i[2], (size_t)n->i[3], (size_t)n->i[4], (size_t)n->i[5]};
    return d;
}

static QkvDims qkv_check(Ctx *c, Tensor *qkv, int heads, Tensor *mask, float p)
{
    char dq[96];
    op_check_float("attention_qkv", qkv);
    op_check_device("attention_qkv", c, qkv);
    if (qkv->ndim != 3 || heads <= 0 || qkv->shape[2] % (3 * (int64_t)heads) != 0 ||
        qkv->shape[2] == 0)
        ct_fatal_hint("pass the projection x Wqkv^T + bqkv, [B, T, 3 H Dh], and the head count",
                      "attention_qkv: qkv %s is not [B, T, 3 H Dh] for %d heads",
                      tensor_desc(dq, sizeof dq, qkv), heads);
    QkvDims d = {(size_t)qkv->shape[0], (size_t)qkv->shape[1], (size_t)heads,
                 (size_t)(qkv->shape[2] / (3 * heads))};
    attention_check_mask_p(c, "attention_qkv", "qkv", qkv, mask, d.B, d.T, p);
    return d;
}

#ifdef CTRAIN_CUDA
/* CTRAIN_ATTN=sm90 or auto and a call the wgmma kernels take
 * (ops/attention_sm90.h; the alignment op_attention_qkv_supported checks for
 * every path) */
static int qkv_sm90_wanted(Ctx *c, DType dt, int64_t B, int64_t T, int heads, int64_t Dh)
{
    return attention_path_sm90() &&
           attention_sm90_supports(c, dt, (size_t)B, (size_t)heads, (size_t)T, (size_t)Dh);
}
#endif

int op_attention_qkv_supported(Ctx *c, DType dt, int64_t B, int64_t T, int heads, int64_t Dh,
                               const Tensor *mask, float dropout_p)
{
    if (c->device != DEV_CUDA) return 1;
#ifdef CTRAIN_CUDA
    if (B <= 0 || T <= 0 || heads <= 0 || Dh <= 0) return 0;
    const size_t D = (size_t)heads * (size_t)Dh;
    const int aligned = (D * dtype_size(dt)) % 16 == 0 && (!mask || (uintptr_t)mask->data % 16 == 0);
    if (qkv_sm90_wanted(c, dt, B, T, heads, Dh) && aligned && dropout_p < 1.0f) return 1;
    return attention_path_cudnn() && (dt == DT_F16 || dt == DT_BF16) && aligned &&
           dropout_p < 1.0f &&
           attention_cudnn_ready(c, dt, (size_t)B, (size_t)heads, (size_t)T, (size_t)Dh, 1,
                                 3 * D, mask != NULL, dropout_p);
#else
    (void)dt; (void)B; (void)T; (void)heads; (void)Dh; (void)mask; (void)dropout_p;
    return 0;
#endif
}

/* ---- CPU: the reference on gathered copies ---- */

/* q, k, v [B, H, T, Dh] from qkv [B, T, 3, H, Dh] (f32) */
static void qkv_gather(const float *qkv, float *q, float *k, float *v, QkvDims d)
{
    const size_t D = d.H * d.Dh;
    float *dst[3] = {q, k, v};
    for (size_t b = 0; b < d.B; b++)
        for (size_t t = 0; t < d.T; t++)
            for (int w = 0; w < 3; w++)
                for (size_t h = 0; h < d.H; h++)
                    memcpy(dst[w] + ((b * d.H + h) * d.T + t) * d.Dh,
                           qkv + (b * d.T + t) * 3 * D + (size_t)w * D + h * d.Dh,
                           d.Dh * sizeof(float));
}

/* dqkv [B, T, 3, H, Dh] (+)= dq, dk, dv [B, H, T, Dh] */
static void qkv_scatter(float *dqkv, const float *dq, const float *dk, const float *dv,
                        QkvDims d, int accum)
{
    const size_t D = d.H * d.Dh;
    const float *src[3] = {dq, dk, dv};
    for (size_t b = 0; b < d.B; b++)
        for (size_t t = 0; t < d.T; t++)
            for (int w = 0; w < 3; w++)
                for (size_t h = 0; h < d.H; h++) {
                    float *o = dqkv + (b * d.T + t) * 3 * D + (size_t)w * D + h * d.Dh;
                    const float *s = src[w] + ((b * d.H + h) * d.T + t) * d.Dh;
                    for (size_t e = 0; e < d.Dh; e++) o[e] = accum ? o[e] + s[e] : s[e];
                }
}

/* [B, H, T, Dh] <-> [B, T, H, Dh] (to_bthd 1: the first into the second) */
static void bhtd_swap(float *dst, const float *src, QkvDims d, int to_bthd)
{
    for (size_t b = 0; b < d.B; b++)
        for (size_t h = 0; h < d.H; h++)
            for (size_t t = 0; t < d.T; t++) {
                const size_t bhtd = ((b * d.H + h) * d.T + t) * d.Dh;
                const size_t bthd = ((b * d.T + t) * d.H + h) * d.Dh;
                memcpy(dst + (to_bthd ? bthd : bhtd), src + (to_bthd ? bhtd : bthd),
                       d.Dh * sizeof(float));
            }
}

static float *qkv_alloc(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof(float));
    if (!p) ct_fatal("attention_qkv: out of host memory (%zu floats)", n);
    return p;
}

/* forward: out = attention(q, k, v) with q, k, v read from qkv
 *   so dq, dk, dv = the attention backward, written into dqkv at q, k, v's places */
static void attention_qkv_cpu_backward(Ctx *c, Node *n)
{
    Tensor *qkv = n->saved[0], *probs = n->saved[1];
    QkvDims d = qkv_node_dims(n);
    int acc = 0;
    Tensor *dqkv = ad_grad_dst(c, n->in[0], &acc);
    if (!dqkv) return;
    const size_t m = d.B * d.H * d.T * d.Dh;
    float *q = qkv_alloc(m), *k = qkv_alloc(m), *v = qkv_alloc(m), *dout = qkv_alloc(m);
    float *dq = qkv_alloc(m), *dk = qkv_alloc(m), *dv = qkv_alloc(m);
    F32View vx = f32_view(qkv, 1), vo = f32_view(n->out->grad, 1), vp = f32_view(probs, 1);
    qkv_gather(vx.p, q, k, v, d);
    bhtd_swap(dout, vo.p, d, 0);
    attention_backward_cpu(dq, dk, dv, dout, q, k, v, vp.p, n->f[0], (uint64_t)n->i[0],
                           (uint64_t)n->i[1], d.B, d.H, d.T, d.Dh, 0, 0, 0);
    F32View vg = f32_view(dqkv, acc);
    qkv_scatter(vg.p, dq, dk, dv, d, acc);
    f32_done(&vg, 1);
    f32_done(&vx, 0); f32_done(&vo, 0); f32_done(&vp, 0);
    free(q); free(k); free(v); free(dout); free(dq); free(dk); free(dv);
}

static Tensor *attention_qkv_cpu(Ctx *c, Tensor *qkv, Tensor *mask, float p, uint64_t seed,
                                 uint64_t offset, QkvDims d)
{
    const size_t m = d.B * d.H * d.T * d.Dh;
    int64_t oshape[4] = {(int64_t)d.B, (int64_t)d.T, (int64_t)d.H, (int64_t)d.Dh};
    int64_t pshape[4] = {(int64_t)d.B, (int64_t)d.H, (int64_t)d.T, (int64_t)d.T};
    Tensor *out = tensor_new(c, qkv->dtype, 4, oshape);
    Tensor *probs = tensor_new(c, qkv->dtype, 4, pshape);   /* as op_attention's */
    float *q = qkv_alloc(m), *k = qkv_alloc(m), *v = qkv_alloc(m), *o = qkv_alloc(m);
    F32View vx = f32_view(qkv, 1), vo = f32_view(out, 0), vp = f32_view(probs, 0);
    qkv_gather(vx.p, q, k, v, d);
    attention_forward_cpu(o, vp.p, q, k, v, mask ? (const float *)mask->data : NULL, p, seed,
                          offset, d.B, d.H, d.T, d.Dh);
    bhtd_swap(vo.p, o, d, 1);
    f32_done(&vo, 1);
    f32_done(&vp, 1);
    f32_done(&vx, 0);
    free(q); free(k); free(v); free(o);
    if (ad_needs_grad(c, &qkv, 1)) {
        Node *n = ad_record(c, "attention_qkv", attention_qkv_cpu_backward, out, &qkv, 1);
        qkv_node_set(n, p, seed, offset, d, 0);
        ad_save(n, qkv);
        ad_save(n, probs);
    }
    tensor_release(probs);
    return out;
}

#ifdef CTRAIN_CUDA
/* ---- CUDA: cuDNN's attention, or ctrain's wgmma kernels (i[7] 1 or 2), reading the
 * projection in place and writing dq, dk, dv in place; the node keeps qkv, out,
 * the rows' statistics f32 [B, H, T] (cuDNN's stats, the kernels' lse) and the
 * mask ---- */

/* With the wgmma kernels, dropout and CTRAIN_ATTN_SAVE_MASK=1 the stats
 * tensor is u8: lse f32 [B, H, T] at byte 0, the mask's bits (the backward's
 * order, attention_keep_words(B, H, T) words) at qkv_bits_at, 256-byte
 * aligned; the node's i[7] is then 2 (1: the kernels without saved bits). */
static size_t qkv_bits_at(QkvDims d)
{
    return (d.B * d.H * d.T * sizeof(float) + 255) / 256 * 256;
}

static void attention_qkv_cuda_backward(Ctx *c, Node *n)
{
    Tensor *qkv = n->saved[0], *out = n->saved[1], *stats = n->saved[2];
    Tensor *mask = n->i[6] ? n->saved[3] : NULL;
    QkvDims d = qkv_node_dims(n);
    int acc = 0;
    Tensor *dqkv = ad_grad_dst(c, n->in[0], &acc);
    if (!dqkv) return;
    const size_t D = d.H * d.Dh, es = dtype_size(qkv->dtype), bytes = d.B * d.T * 3 * D * es;
    /* dq, dk, dv go into dqkv, or a fresh buffer added to it */
    char *g = acc ? (char *)mem_alloc(c, bytes) : (char *)dqkv->data;
    const char *x = (const char *)qkv->data;
    const float *m = mask ? (const float *)mask->data : NULL;
    const uint64_t seed = (uint64_t)n->i[0], offset = (uint64_t)n->i[1];
    if (n->i[7])
        attention_sm90_backward(c, g, g + D * es, g + 2 * D * es, n->out->grad->data, x,
                                x + D * es, x + 2 * D * es, out->data,
                                (const float *)stats->data, m, qkv->dtype, n->f[0], seed, offset,
                                d.B, d.H, d.T, 3 * D, D,
                                n->i[7] == 2 ? (const uint64_t *)((const char *)stats->data +
                                                                  qkv_bits_at(d))
                                             : NULL);
    else
        attention_cudnn_backward(c, g, g + D * es, g + 2 * D * es, n->out->grad->data, x,
                                 x + D * es, x + 2 * D * es, out->data,
                                 (const float *)stats->data, m, qkv->dtype, n->f[0], seed,
                                 offset, d.B, d.H, d.T, d.Dh, 0, 0, 0, 1, 3 * D);
    if (acc) {
        cast_cuda(dqkv->data, qkv->dtype, g, qkv->dtype, d.B * d.T * 3 * D, 1, c->stream);
        mem_free(c, g, bytes);
    }
}

static Tensor *attention_qkv_cuda(Ctx *c, Tensor *qkv, Tensor *mask, float p, uint64_t seed,
                                  uint64_t offset, QkvDims d, int sm90)
{
    const size_t D = d.H * d.Dh, es = dtype_size(qkv->dtype);
    int64_t oshape[4] = {(int64_t)d.B, (int64_t)d.T, (int64_t)d.H, (int64_t)d.Dh};
    int64_t sshape[3] = {(int64_t)d.B, (int64_t)d.H, (int64_t)d.T};
    const int record = ad_needs_grad(c, &qkv, 1);
    const int save_bits = sm90 && record && p > 0.0f && attention_fused_save_mask();
    int64_t sbytes = (int64_t)(qkv_bits_at(d) + attention_keep_words(d.B, d.H, d.T) * 8);
    Tensor *out = tensor_new(c, qkv->dtype, 4, oshape);
    Tensor *stats = save_bits ? tensor_new(c, DT_U8, 1, &sbytes) : tensor_new(c, DT_F32, 3, sshape);
    const char *x = (const char *)qkv->data;
    const float *m = mask ? (const float *)mask->data : NULL;
    if (sm90)
        attention_sm90_forward(c, out->data, (float *)stats->data, NULL,
                               save_bits ? (uint64_t *)((char *)stats->data + qkv_bits_at(d))
                                         : NULL,
                               x, x + D * es, x + 2 * D * es, m, qkv->dtype, p, seed, offset,
                               d.B, d.H, d.T, 3 * D, D);
    else if (!attention_cudnn_forward(c, out->data, (float *)stats->data, x, x + D * es,
                                      x + 2 * D * es, m, qkv->dtype, p, seed, offset, d.B, d.H,
                                      d.T, d.Dh, 1, 3 * D))
        ct_fatal_hint("set CTRAIN_ATTN=flash (models then keep three projections)",
                      "attention_qkv: cuDNN refused to run the forward it planned for "
                      "[B %zu, T %zu, H %zu, Dh %zu]", d.B, d.T, d.H, d.Dh);
    if (record) {
        Node *n = ad_record(c, "attention_qkv", attention_qkv_cuda_backward, out, &qkv, 1);
        qkv_node_set(n, p, seed, offset, d, mask != NULL);
        n->i[7] = sm90 ? 1 + save_bits : 0;
        ad_save(n, qkv);
        ad_save(n, out);
        ad_save(n, stats);
        if (mask) ad_save(n, mask);
    }
    tensor_release(stats);
    return out;
}
#endif

Tensor *op_attention_qkv_at(Ctx *c, Tensor *qkv0, int heads, Tensor *mask, float dropout_p,
                            uint64_t seed, uint64_t offset)
{
    QkvDims d = qkv_check(c, qkv0, heads, mask, dropout_p);
    const DType dt = autocast_dtype(c, qkv0->dtype);
    if (c->device == DEV_CUDA &&
        (!op_attention_qkv_supported(c, dt, (int64_t)d.B, (int64_t)d.T, heads, (int64_t)d.Dh,
                                     mask, dropout_p) ||
         (dt == qkv0->dtype && (uintptr_t)qkv0->data % 16)))
        ct_fatal_hint("ask op_attention_qkv_supported first and keep three projections where "
                      "it answers 0",
                      "attention_qkv: no CUDA path for [B %zu, T %zu, H %zu, Dh %zu] here "
                      "(cuDNN's attention, CTRAIN_ATTN=cudnn, f16 / bf16, 16-byte aligned, is "
                      "the only one)", d.B, d.T, d.H, d.Dh);
    Tensor *qkv = autocast_cast_input(c, qkv0);
    Tensor *out = NULL;
#ifdef CTRAIN_CUDA
    if (c->device == DEV_CUDA)
        out = attention_qkv_cuda(c, qkv, mask, dropout_p, seed, offset, d,
                                 qkv_sm90_wanted(c, qkv->dtype, (int64_t)d.B, (int64_t)d.T,
                                                 heads, (int64_t)d.Dh));
#endif
    if (!out) out = attention_qkv_cpu(c, qkv, mask, dropout_p, seed, offset, d);
    tensor_release(qkv);
    return out;
}

Tensor *op_attention_qkv(Ctx *c, Tensor *qkv, int heads, Tensor *mask, float dropout_p)
{
    /* the same draw as op_attention_bthd's: B H T T mask elements */
    const uint64_t offset =
        qkv->ndim == 3 && heads > 0
            ? attention_rng_take(c, (uint64_t)qkv->shape[0], (uint64_t)heads,
                                 (uint64_t)qkv->shape[1], dropout_p)
            : c->rng_offset;
    return op_attention_qkv_at(c, qkv, heads, mask, dropout_p, c->seed, offset);
}
