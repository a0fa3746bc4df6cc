/* attention_op.c — tensor op scaled dot-product attention and its backward
 * (math in ops/attention.h).
 *
 * Shape letters: B batch, H heads, T tokens, Dh head width.
 *
 * Memory: the node keeps q, k, v (retained: usually alive anyway as the
 * projections' outputs) and P [B, H, T, T] in the compute type, i.e.
 * B H T^2 * 2 bytes under autocast (BERT-base, B 32, T 128: 12.6 MB a
 * layer; BERT-large, T 512: 268 MB a layer). The dropout mask is not
 * stored; the backward regenerates it from (seed, offset) in the node.
 * Transient: S in f32 and Pd during the forward, dPd/dS and Pd during the
 * backward (see ops/attention.cu).
 *
 * The math sits behind attn_forward_impl / attn_backward_impl. On CUDA the
 * flash-style kernels of ops/attention_fused.h run instead where they apply
 * (attention_kernel_choose below, the one place the kernel is chosen:
 * wherever the tensor-core kernels of ops/attention_fa_tc.cu run, f16 /
 * bf16): the node then saves q, k, v, out, the row log-sum-exp f32
 * [B, H, T] and the mask (the backward recomputes P from them), i.e.
 * B H T * 4 bytes in place of B H T^2 * 2. CTRAIN_ATTN=cublas keeps the
 * path above. With dropout and CTRAIN_ATTN_SAVE_MASK=1 the fused node also
 * keeps the forward's 1-bit dropout mask (B H T^2 / 8 bytes: 16 MiB a layer
 * at BERT-large, B 32, T 512) and the backward reads it instead of drawing
 * it again from (seed, offset); default on, =0 draws it again (docs/kernels.md).
 *
 * CTRAIN_ATTN=cudnn or auto (the default; auto sends attention read from one
 * q/k/v projection to the wgmma kernels on sm_90 first, ops/attention_qkv_op.c;
 * cudnn measured +3.4% at BERT-large seq 128 and +8.6% at seq 512 over the
 * fused kernels on an H100; =flash keeps the fused kernels): on
 * CUDA, f16 / bf16 compute type, q, k, v and the mask 16-byte aligned,
 * either layout, the op asks cuDNN's fused flash attention
 * (ops/attention_cudnn.h) first. The node then saves q, k, v, out, cuDNN's stats f32 [B, H, T]
 * (max + log-sum-exp of the scaled scores plus the mask, no shift) and the
 * mask; the backward recomputes P from them and draws the dropout mask again
 * from the node's (seed, offset) through cuDNN's own RNG (Philox, but not
 * ops/dropout_mask.h's bits: the masks differ from the other paths'). A
 * shape cuDNN declines in either direction (cached, logged once) runs on the
 * kernel attention_kernel_choose picks, as does a captured step's shape not
 * seen while eager.
 */
#include "attention.h"
#include "dropout_mask.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/autograd.h"
#include "engine/mem.h"
#include "engine/settings.h"
#include "attention_cudnn.h"
#include "attention_fused.h"
#include "autocast.h"
#include "cpu_f32.h"
#include "dropout.h"
#include "op_util.h"
#include "ops.h"
#include "permute.h"

typedef struct AttnDims {
    size_t B, H, T, Dh;
} AttnDims;

/* Both paths' nodes keep f[0] = p, i[0] seed, i[1] offset, i[2..5] B H T Dh. */
static void attn_node_set(Node *n, float p, uint64_t seed, uint64_t offset, AttnDims d)
{
    n->f[0] = p;
    n->i[0] = (int64_t)seed;
    n->i[1] = (int64_t)offset;
    n->i[2] = (int64_t)d.B; n->i[3] = (int64_t)d.H;
    n->i[4] = (int64_t)d.T; n->i[5] = (int64_t)d.Dh;
}

static AttnDims attn_node_dims(const Node *n)
{
    AttnDims d = {(size_t)n->i[2], (size_t)n->i[3], (size_t)n->i[4], (size_t)n->i[5]};
    return d;
}

/* out (and the saved state `probs`) from q, k, v on the context's device. */
static void attn_forward_impl(Ctx *c, Tensor *out, Tensor *probs, Tensor *q, Tensor *k,
                              Tensor *v, Tensor *mask, float p, uint64_t seed, uint64_t offset,
                              AttnDims d)
{
    const float *m = mask ? (const float *)mask->data : NULL;
    if (c->device == DEV_CUDA) {
#ifdef CTRAIN_CUDA
        attention_forward_cuda(c, out->data, probs->data, q->data, k->data, v->data, m,
                               q->dtype, p, seed, offset, d.B, d.H, d.T, d.Dh);
#endif
        return;
    }
    F32View vq = f32_view(q, 1), vk = f32_view(k, 1), vv = f32_view(v, 1);
    F32View vo = f32_view(out, 0), vp = f32_view(probs, 0);
    attention_forward_cpu(vo.p, vp.p, vq.p, vk.p, vv.p, m, p, seed, offset, d.B, d.H, d.T, d.Dh);
    f32_done(&vq, 0); f32_done(&vk, 0); f32_done(&vv, 0);
    f32_done(&vo, 1); f32_done(&vp, 1);
}

/* dq, dk, dv (any may be NULL) from dout and the saved q, k, v, probs. */
static void attn_backward_impl(Ctx *c, Tensor *dq, Tensor *dk, Tensor *dv, int acc_q,
                               int acc_k, int acc_v, Tensor *dout, Tensor *q, Tensor *k,
                               Tensor *v, Tensor *probs, float p, uint64_t seed,
                               uint64_t offset, AttnDims d)
{
    if (c->device == DEV_CUDA) {
#ifdef CTRAIN_CUDA
        attention_backward_cuda(c, dq ? dq->data : NULL, dk ? dk->data : NULL,
                                dv ? dv->data : NULL, dout->data, q->data, k->data, v->data,
                                probs->data, q->dtype, p, seed, offset, d.B, d.H, d.T, d.Dh,
                                acc_q, acc_k, acc_v);
#endif
        return;
    }
    F32View vdq = f32_view(dq, acc_q), vdk = f32_view(dk, acc_k), vdv = f32_view(dv, acc_v);
    F32View vdo = f32_view(dout, 1), vq = f32_view(q, 1), vk = f32_view(k, 1);
    F32View vv = f32_view(v, 1), vp = f32_view(probs, 1);
    attention_backward_cpu(vdq.p, vdk.p, vdv.p, vdo.p, vq.p, vk.p, vv.p, vp.p, p, seed, offset,
                           d.B, d.H, d.T, d.Dh, acc_q, acc_k, acc_v);
    f32_done(&vdq, 1); f32_done(&vdk, 1); f32_done(&vdv, 1);
    f32_done(&vdo, 0); f32_done(&vq, 0); f32_done(&vk, 0); f32_done(&vv, 0); f32_done(&vp, 0);
}

/* Both paths' gradient destinations: g = dq, dk, dv (NULL where none is
 * needed) and their accum flags; 0 when none is needed.
 * q, k, v may be one tensor (self-attention straight on its input): then
 * ad_grad_dst hands back one buffer, freshly made for the first (write)
 * and held for the others (add), but no path promises to write in q, k, v
 * order (the fused kernels write dk and dv, then dq). So a shared buffer
 * starts at zero and every output adds into it. */
static int attn_grad_dsts(Ctx *c, Node *n, Tensor *g[3], int acc[3])
{
    for (int i = 0; i < 3; i++) {
        acc[i] = 0;
        g[i] = ad_grad_dst(c, n->in[i], &acc[i]);
    }
    if (!g[0] && !g[1] && !g[2]) return 0;
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++) {
            if (!g[i] || g[i] != g[j]) continue;
            if (!acc[i]) tensor_zero(g[i]);   /* by its elements: a parameter's is a view */
            acc[i] = acc[j] = 1;
        }
    return 1;
}

/* forward: out = dropout(softmax(q k^T / sqrt(Dh) + mask)) v
 *   so dv = Pd^T dout,  dS = P (dP - rowsum(dPd Pd)),  dq = scale dS k,  dk = scale dS^T q */
static void attention_backward(Ctx *c, Node *n)
{
    Tensor *dout = n->out->grad;
    Tensor *q = n->saved[0], *k = n->saved[1], *v = n->saved[2], *probs = n->saved[3];
    AttnDims d = attn_node_dims(n);
    Tensor *g[3];
    int acc[3];
    if (!attn_grad_dsts(c, n, g, acc)) return;
    attn_backward_impl(c, g[0], g[1], g[2], acc[0], acc[1], acc[2], dout, q, k, v, probs, n->f[0],
                       (uint64_t)n->i[0], (uint64_t)n->i[1], d);
}

/* ---- the kernel choice: the one place it is made ----
 * Default on CUDA: the fused tensor-core kernels where they run (f16/bf16,
 * Dh 32/64/128, sm_80+: ops/attention_fa_tc.cu; on the H200 BERT-large bf16
 * seq 512 trains 17% faster with them and holds no T x T probabilities),
 * else cuBLASLt around the softmax kernel (f32, other head widths, older
 * devices). The fused kernels put the B H heads on the grid's y dimension
 * (at most 65535): more heads than that (BERT-large from batch 4096) take
 * the cuBLASLt path. [B, T, H, Dh] inputs are read in place when every one
 * is 16-byte aligned in the compute type; otherwise the op transposes them
 * into [B, H, T, Dh] and runs the kernel chosen here.
 * CTRAIN_ATTN=cublas, a developer's A/B switch, always takes the cuBLASLt
 * path. It stays because it is the other side of the measurement that made
 * the flash kernels the default (the 17% above: this path and the flash
 * kernels side by side, docs/kernels.md), which still has to be made on the devices
 * not measured yet (sm_80 / sm_86 / sm_89), and because tests/gpu_flash_attn
 * checks the op's flash path through autograd against it. (CTRAIN_ATTN=fused,
 * which also forced the FMA kernels onto f32, where their own note found
 * them slower than cuBLAS, was removed.) CTRAIN_ATTN=cudnn leaves this choice
 * as it is: the ops ask cuDNN first where attn_cudnn_wanted says so (below),
 * and this choice runs what cuDNN declines. Read on every call: cheap next
 * to the op, and the test flips it between calls. */
AttnKernel attention_kernel_choose(const Ctx *c, DType dt, size_t Dh, size_t BH, int bthd,
                                   int aligned)
{
    if (c->device != DEV_CUDA) return ATTN_KERNEL_CPU;
#ifdef CTRAIN_CUDA
    if (BH > 65535) return ATTN_KERNEL_CUBLAS;
    if (setting_choice(SET_ATTN) == 0) return ATTN_KERNEL_CUBLAS;   /* CTRAIN_ATTN=cublas */
    if (!attention_fa_tc_supports(c, dt, Dh)) return ATTN_KERNEL_CUBLAS;
    return bthd && aligned ? ATTN_KERNEL_FLASH_BTHD : ATTN_KERNEL_FLASH;
#else
    (void)dt; (void)Dh; (void)BH; (void)bthd; (void)aligned;
    return ATTN_KERNEL_CPU;   /* a CPU-only build has no other device */
#endif
}

/* CTRAIN_ATTN: cublas 0, cudnn 1, flash 2, sm90 3, auto 4 (engine/settings.c) */
int attention_path_sm90(void)
{
    const int a = setting_choice(SET_ATTN);
    return a == 3 || a == 4;
}

int attention_path_cudnn(void)
{
    const int a = setting_choice(SET_ATTN);
    return a == 1 || a == 4;
}

#ifdef CTRAIN_CUDA
/* CTRAIN_ATTN_SAVE_MASK, the flash path's other developer setting, read
 * here beside the kernel choice: -1 not read yet. It stays because it
 * measured a gain and is its own A/B: the default (1) keeps the forward's
 * dropout mask for the backward, +4.5% at BERT-large bf16 seq 512 for
 * 0.68 GiB more peak (docs/kernels.md, v2c); =0 draws it again, the reference
 * tests/gpu_flash_attn compares the saved mask against bit for bit. */
static int attn_save_mask = -1;

int attention_fused_save_mask(void)
{
    if (attn_save_mask < 0) attn_save_mask = setting_switch(SET_ATTN_SAVE_MASK);
    return attn_save_mask;
}

void attention_fused_save_mask_reread(void) { attn_save_mask = -1; }

/* forward (fused): out = dropout(softmax(q k^T / sqrt(Dh) + mask)) v, lse kept
 *   so P = exp(S - lse) per tile, dv = Pd^T dout, dS = P (dP - rowsum(dout out)),
 *      dq = scale dS k, dk = scale dS^T q   (ops/attention_fused.h) */
/* With the saved dropout mask, lse and the mask share one u8 buffer (a node
 * saves at most NODE_MAX_SAVED = 6 tensors: q, k, v, out, lse, mask):
 * lse f32 [B, H, T] at byte 0, the mask's attention_keep_words(B, H, T)
 * words at attn_keep_at (256-byte aligned). */
static size_t attn_keep_at(AttnDims d)
{
    return (d.B * d.H * d.T * sizeof(float) + 255) / 256 * 256;
}

static void attention_fused_backward(Ctx *c, Node *n)
{
    Tensor *dout = n->out->grad;
    Tensor *q = n->saved[0], *k = n->saved[1], *v = n->saved[2], *out = n->saved[3];
    Tensor *lse = n->saved[4], *mask = n->i[6] ? n->saved[5] : NULL;
    AttnDims d = attn_node_dims(n);
    const uint64_t *keep = n->i[7] & 1 ? (const uint64_t *)((const char *)lse->data + attn_keep_at(d))
                                   : NULL;
    Tensor *g[3];
    int acc[3];
    if (!attn_grad_dsts(c, n, g, acc)) return;
    attention_fused_backward_cuda(c, g[0] ? g[0]->data : NULL, g[1] ? g[1]->data : NULL,
                                  g[2] ? g[2]->data : NULL, dout->data, q->data, k->data, v->data,
                                  out->data, (const float *)lse->data,
                                  mask ? (const float *)mask->data : NULL, keep, q->dtype,
                                  n->f[0], (uint64_t)n->i[0], (uint64_t)n->i[1], d.B, d.H, d.T,
                                  d.Dh, acc[0], acc[1], acc[2], (int)(n->i[7] >> 1));
}

/* The fused forward and its node (saved: q, k, v, out, lse [+ the dropout
 * mask, CTRAIN_ATTN_SAVE_MASK=1] [, mask]). The dropout mask is saved only
 * when a node is recorded (not in no-grad forwards: eval, the first pass of
 * a recomputed segment, whose re-run draws the same bits from the same
 * offset) and p > 0. */
static Tensor *attn_fused_run(Ctx *c, Tensor *q, Tensor *k, Tensor *v, Tensor *mask, float p,
                              uint64_t seed, uint64_t offset, AttnDims d, int bthd)
{
    Tensor *in[3] = {q, k, v};
    const int record = ad_needs_grad(c, in, 3);
    const int save_keep = record && p > 0.0f && attention_fused_save_mask();
    int64_t lshape[3] = {(int64_t)d.B, (int64_t)d.H, (int64_t)d.T};
    int64_t lkbytes = (int64_t)(attn_keep_at(d) + attention_keep_words(d.B, d.H, d.T) * 8);
    Tensor *out = tensor_new_like(c, q, q->dtype);
    Tensor *lse = save_keep ? tensor_new(c, DT_U8, 1, &lkbytes) : tensor_new(c, DT_F32, 3, lshape);
    uint64_t *keep = save_keep ? (uint64_t *)((char *)lse->data + attn_keep_at(d)) : NULL;
    attention_fused_forward_cuda(c, out->data, (float *)lse->data, keep, q->data, k->data,
                                 v->data, mask ? (const float *)mask->data : NULL, q->dtype, p,
                                 seed, offset, d.B, d.H, d.T, d.Dh, bthd);
    if (record) {
        Node *n = ad_record(c, "attention", attention_fused_backward, out, in, 3);
        attn_node_set(n, p, seed, offset, d);
        n->i[6] = mask != NULL;
        n->i[7] = save_keep | bthd << 1;   /* bit 0: the mask saved; bit 1: [B, T, H, Dh] */
        ad_save(n, q);
        ad_save(n, k);
        ad_save(n, v);
        ad_save(n, out);
        ad_save(n, lse);
        if (mask) ad_save(n, mask);
    }
    tensor_release(lse);
    return out;
}
#endif

/* The checks both layouts share; returns B, H, T, Dh (bthd: q is [B, T, H, Dh]). */
static AttnDims attn_check(Ctx *c, Tensor *q0, Tensor *k0, Tensor *v0, Tensor *mask,
                           float dropout_p, int bthd)
{
    char dq[96];
    Tensor *in0[3] = {q0, k0, v0};
    for (int i = 0; i < 3; i++) {
        op_check_float("attention", in0[i]);
        op_check_device("attention", c, in0[i]);
    }
    if (q0->ndim != 4)
        ct_fatal_hint(bthd ? "reshape the heads out first: [B, T, H*Dh] -> [B, T, H, Dh]"
                           : "split the heads first: [B, T, H*Dh] -> [B, H, T, Dh]",
                      "attention: q %s must be %s", tensor_desc(dq, sizeof dq, q0),
                      bthd ? "[B, T, H, Dh]" : "[B, H, T, Dh]");
    op_check_same("attention", q0, k0);
    op_check_same("attention", q0, v0);
    AttnDims d = {(size_t)q0->shape[0], (size_t)q0->shape[bthd ? 2 : 1],
                  (size_t)q0->shape[bthd ? 1 : 2], (size_t)q0->shape[3]};
    if (d.Dh == 0) ct_fatal("attention: q %s has an empty head dim", tensor_desc(dq, sizeof dq, q0));
    attention_check_mask_p(c, "attention", "q", q0, mask, d.B, d.T, dropout_p);
    return d;
}

void attention_check_mask_p(Ctx *c, const char *op, const char *xname, const Tensor *x,
                            const Tensor *mask, size_t B, size_t T, float dropout_p)
{
    char dx[96], dm[96];
    if (mask) {
        op_check_device(op, c, mask);
        if (mask->dtype != DT_F32 || mask->ndim != 2 || (size_t)mask->shape[0] != B ||
            (size_t)mask->shape[1] != T)
            ct_fatal_hint("build it as 0 for real tokens and -10000 for padding",
                          "%s: mask %s must be f32 [B, T] = [%zu, %zu] for %s %s", op,
                          tensor_desc(dm, sizeof dm, mask), B, T, xname,
                          tensor_desc(dx, sizeof dx, x));
        if (!mask->data) ct_fatal("%s: the mask has been freed (used after release)", op);
    }
    if (!(dropout_p >= 0.0f && dropout_p <= 1.0f))
        ct_fatal_hint("pass an attention dropout probability such as 0.1 (BERT)",
                      "%s: dropout p = %g is outside [0, 1]", op, (double)dropout_p);
}

#ifdef CTRAIN_CUDA
/* The fused path from the op's inputs: autocast, run, drop the casts. */
static Tensor *attn_fused_take(Ctx *c, Tensor *q0, Tensor *k0, Tensor *v0, Tensor *mask, float p,
                               uint64_t seed, uint64_t offset, AttnDims d, int bthd)
{
    Tensor *q = autocast_cast_input(c, q0), *k = autocast_cast_input(c, k0);
    Tensor *v = autocast_cast_input(c, v0);
    Tensor *out = attn_fused_run(c, q, k, v, mask, p, seed, offset, d, bthd);
    tensor_release(q);
    tensor_release(k);
    tensor_release(v);
    return out;
}

/* ---- CTRAIN_ATTN=cudnn: cuDNN's fused flash attention (ops/attention_cudnn.h) ----
 * forward: out = dropout_r(softmax(q k^T / sqrt(Dh) + mask)) v, stats kept
 *   so P = exp(S - stats), dv = Pd^T dout, dS = P (dP - rowsum(dout out)),
 *      dq = scale dS k, dk = scale dS^T q   (r: cuDNN's mask, drawn again) */
static void attention_cudnn_node_backward(Ctx *c, Node *n)
{
    Tensor *dout = n->out->grad;
    Tensor *q = n->saved[0], *k = n->saved[1], *v = n->saved[2], *out = n->saved[3];
    Tensor *stats = n->saved[4], *mask = n->i[6] ? n->saved[5] : NULL;
    AttnDims d = attn_node_dims(n);
    Tensor *g[3];
    int acc[3];
    if (!attn_grad_dsts(c, n, g, acc)) return;
    attention_cudnn_backward(c, g[0] ? g[0]->data : NULL, g[1] ? g[1]->data : NULL,
                             g[2] ? g[2]->data : NULL, dout->data, q->data, k->data, v->data,
                             out->data, (const float *)stats->data,
                             mask ? (const float *)mask->data : NULL, q->dtype, n->f[0],
                             (uint64_t)n->i[0], (uint64_t)n->i[1], d.B, d.H, d.T, d.Dh, acc[0],
                             acc[1], acc[2], (int)n->i[7], 0);
}

/* CTRAIN_ATTN=cudnn and what cuDNN's path needs of the call: an f16 / bf16
 * compute type dt, q, k, v (aligned) and the mask 16-byte aligned. */
static int attn_cudnn_wanted(const Ctx *c, DType dt, int aligned, const Tensor *mask)
{
    return c->device == DEV_CUDA && attention_path_cudnn() &&
           (dt == DT_F16 || dt == DT_BF16) && aligned &&
           (!mask || (uintptr_t)mask->data % 16 == 0);
}

/* The cuDNN path from the op's inputs: autocast, run, record (saved: q, k,
 * v, out, stats [, mask]); NULL when cuDNN declines (nothing recorded or
 * held: the caller runs the kernel attention_kernel_choose picks). */
static Tensor *attn_cudnn_take(Ctx *c, Tensor *q0, Tensor *k0, Tensor *v0, Tensor *mask,
                               float p, uint64_t seed, uint64_t offset, AttnDims d, int bthd)
{
    if (!attention_cudnn_ready(c, autocast_dtype(c, q0->dtype), d.B, d.H, d.T, d.Dh, bthd, 0,
                               mask != NULL, p))
        return NULL;
    Tensor *q = autocast_cast_input(c, q0), *k = autocast_cast_input(c, k0);
    Tensor *v = autocast_cast_input(c, v0);
    Tensor *in[3] = {q, k, v};
    int64_t sshape[3] = {(int64_t)d.B, (int64_t)d.H, (int64_t)d.T};
    Tensor *out = tensor_new_like(c, q, q->dtype);
    Tensor *stats = tensor_new(c, DT_F32, 3, sshape);
    if (attention_cudnn_forward(c, out->data, (float *)stats->data, q->data, k->data, v->data,
                                mask ? (const float *)mask->data : NULL, q->dtype, p, seed,
                                offset, d.B, d.H, d.T, d.Dh, bthd, 0)) {
        if (ad_needs_grad(c, in, 3)) {
            Node *n = ad_record(c, "attention", attention_cudnn_node_backward, out, in, 3);
            attn_node_set(n, p, seed, offset, d);
            n->i[6] = mask != NULL;
            n->i[7] = bthd;
            ad_save(n, q);
            ad_save(n, k);
            ad_save(n, v);
            ad_save(n, out);
            ad_save(n, stats);
            if (mask) ad_save(n, mask);
        }
    } else {
        tensor_release(out);
        out = NULL;
    }
    tensor_release(stats);
    tensor_release(q);
    tensor_release(k);
    tensor_release(v);
    return out;
}
#endif

/* The strided kernels (and cuDNN, in either layout) need 16-byte aligned
 * data: x's own, unless autocast casts it into a fresh (aligned) tensor. */
static int attn_bthd_aligned(const Ctx *c, const Tensor *x)
{
    return autocast_dtype(c, x->dtype) != x->dtype || (uintptr_t)x->data % 16 == 0;
}

/* q, k, v [B, H, T, Dh] through kernel `kern` (any but ATTN_KERNEL_FLASH_BTHD):
 * autocast, run, record. */
static Tensor *attn_bhtd_run(Ctx *c, AttnKernel kern, Tensor *q0, Tensor *k0, Tensor *v0,
                             Tensor *mask, float dropout_p, uint64_t seed, uint64_t offset,
                             AttnDims d)
{
#ifdef CTRAIN_CUDA
    if (kern == ATTN_KERNEL_FLASH)
        return attn_fused_take(c, q0, k0, v0, mask, dropout_p, seed, offset, d, 0);
#endif
    CT_ASSERT(kern == ATTN_KERNEL_CPU || kern == ATTN_KERNEL_CUBLAS,
              "attention: kernel %d has no [B, H, T, Dh] path", (int)kern);
    /* the reference on the CPU, cuBLASLt around the softmax kernel on CUDA */
    Tensor *q = autocast_cast_input(c, q0), *k = autocast_cast_input(c, k0);
    Tensor *v = autocast_cast_input(c, v0);
    int64_t pshape[4] = {(int64_t)d.B, (int64_t)d.H, (int64_t)d.T, (int64_t)d.T};
    Tensor *out = tensor_new_like(c, q, q->dtype);
    Tensor *probs = tensor_new(c, q->dtype, 4, pshape);
    attn_forward_impl(c, out, probs, q, k, v, mask, dropout_p, seed, offset, d);
    Tensor *in[3] = {q, k, v};
    if (ad_needs_grad(c, in, 3)) {
        Node *n = ad_record(c, "attention", attention_backward, out, in, 3);
        attn_node_set(n, dropout_p, seed, offset, d);
        ad_save(n, q);
        ad_save(n, k);
        ad_save(n, v);
        ad_save(n, probs);
    }
    tensor_release(probs);
    tensor_release(q);
    tensor_release(k);
    tensor_release(v);
    return out;
}

Tensor *op_attention_at(Ctx *c, Tensor *q0, Tensor *k0, Tensor *v0, Tensor *mask,
                        float dropout_p, uint64_t seed, uint64_t offset)
{
    AttnDims d = attn_check(c, q0, k0, v0, mask, dropout_p, 0);
    const DType dt = autocast_dtype(c, q0->dtype);
#ifdef CTRAIN_CUDA
    const int aligned = attn_bthd_aligned(c, q0) && attn_bthd_aligned(c, k0) &&
                        attn_bthd_aligned(c, v0);
    if (attn_cudnn_wanted(c, dt, aligned, mask)) {
        Tensor *out = attn_cudnn_take(c, q0, k0, v0, mask, dropout_p, seed, offset, d, 0);
        if (out) return out;
    }
#endif
    AttnKernel kern = attention_kernel_choose(c, dt, d.Dh, d.B * d.H, 0, 0);
    return attn_bhtd_run(c, kern, q0, k0, v0, mask, dropout_p, seed, offset, d);
}

/* one mask element per probability: B H T T of them, sixteen a counter
 * (ops/dropout_mask.h) */
uint64_t attention_rng_take(Ctx *c, uint64_t B, uint64_t H, uint64_t T, float dropout_p)
{
    if (!(dropout_p > 0.0f)) return c->rng_offset;
    return ctx_rng_take(c, drop_blocks(B * H * T * T));
}

/* attention_rng_take for q [B, H, T, Dh] (t = 2) or [B, T, H, Dh] (t = 1) */
static uint64_t attn_rng_take(Ctx *c, const Tensor *q, float dropout_p, int t)
{
    if (q->ndim != 4) return c->rng_offset;
    return attention_rng_take(c, (uint64_t)q->shape[0], (uint64_t)q->shape[3 - t],
                              (uint64_t)q->shape[t], dropout_p);
}

Tensor *op_attention(Ctx *c, Tensor *q, Tensor *k, Tensor *v, Tensor *mask, float dropout_p)
{
    uint64_t offset = attn_rng_take(c, q, dropout_p, 2);
    return op_attention_at(c, q, k, v, mask, dropout_p, c->seed, offset);
}

Tensor *op_attention_bthd_at(Ctx *c, Tensor *q0, Tensor *k0, Tensor *v0, Tensor *mask,
                             float dropout_p, uint64_t seed, uint64_t offset)
{
    AttnDims d = attn_check(c, q0, k0, v0, mask, dropout_p, 1);
    const int aligned = attn_bthd_aligned(c, q0) && attn_bthd_aligned(c, k0) &&
                        attn_bthd_aligned(c, v0);
    const DType dt = autocast_dtype(c, q0->dtype);
#ifdef CTRAIN_CUDA
    if (attn_cudnn_wanted(c, dt, aligned, mask)) {
        Tensor *out = attn_cudnn_take(c, q0, k0, v0, mask, dropout_p, seed, offset, d, 1);
        if (out) return out;
    }
#endif
    AttnKernel kern = attention_kernel_choose(c, dt, d.Dh, d.B * d.H, 1, aligned);
#ifdef CTRAIN_CUDA
    if (kern == ATTN_KERNEL_FLASH_BTHD)
        return attn_fused_take(c, q0, k0, v0, mask, dropout_p, seed, offset, d, 1);
#endif
    /* elsewhere: into [B, H, T, Dh] and back (recorded ops: gradients flow) */
    Tensor *q = op_transpose12(c, q0), *k = op_transpose12(c, k0), *v = op_transpose12(c, v0);
    Tensor *o = attn_bhtd_run(c, kern, q, k, v, mask, dropout_p, seed, offset, d);
    tensor_release(q);
    tensor_release(k);
    tensor_release(v);
    Tensor *out = op_transpose12(c, o);
    tensor_release(o);
    return out;
}

Tensor *op_attention_bthd(Ctx *c, Tensor *q, Tensor *k, Tensor *v, Tensor *mask, float dropout_p)
{
    uint64_t offset = attn_rng_take(c, q, dropout_p, 1);
    return op_attention_bthd_at(c, q, k, v, mask, dropout_p, c->seed, offset);
}
