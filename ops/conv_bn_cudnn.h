/* conv_bn_cudnn.h — the conv + batch-norm unit's convolutions (ops/conv_bn.h)
 * as cuDNN graph-API graphs that fuse their neighbours (ops/cudnn_graph.h):
 *
 *   conv + statistics        y = conv(x, w), and the sums of y per output
 *                            channel in the same kernel (the statistics pass
 *                            over y gone)
 *   BN + ReLU + conv         z = conv(relu(y s + b), w), optionally with z's
 *                            sums (the normalised activation never written)
 *   BN + ReLU + filter grad  dw = corr(relu(y s + b), dz) (the backward's
 *                            activation never made again)
 *   data grad + ReLU mask    g = conv^T(dz, w) where bn(y) > 0, and the
 *                            sums batch norm's backward needs, sum g and
 *                            sum g xhat, in its epilogue (the pass that
 *                            reads da and y for them gone)
 *
 * Shape letters: x or y [N, H, W, C] (the convolution's input), w [K, R, S,
 * C], the output [N, P, Q, K], M = N*P*Q.
 *
 *   s = gamma invstd,  b = beta - mean s          (batchnorm_scale_bias_cuda)
 *   sum_k = sum over M of out_k,  sq_k = sum of out_k^2  (the f32 result)
 *   mean_k = sum_k / M,  m2_k = sq_k - sum_k mean_k  (in double, >= 0)
 *
 * The graphs: the prologue is a pointwise multiply by s, add of b and ReLU
 * on virtual tensors before the convolution; the statistics are a
 * reduction of the result and a pointwise square with a second reduction;
 * the result is stored by an identity from a virtual f32 tensor. Each kind
 * has two or three graph forms (conv_bn_cudnn.c: the prologue's activation
 * f32 or the storage type; the statistics of the f32 result or of the
 * stored one; the shapes of cuDNN's pre-compiled batch-norm patterns, f16
 * only but for a plain convolution's GenStats), each searched, the fastest
 * kept. Only deterministic reductions and
 * engines are allowed (a step's values must not depend on the run; cuDNN
 * 9.11 and later know the reduction's attribute, earlier ones run the
 * separate way). The engines that take such graphs compile their kernel at
 * plan time: the search (the first call of a kind, shape and type: it
 * synchronizes and allocates, so it belongs to warm-up as the convolutions'
 * own search does) compiles at most CONV_BN_CANDIDATES that finalize (and
 * tries at most twice that), times them, then times the winner as the step
 * runs it (with its small kernels) against the separate way (the
 * normalised activation written, the plain convolution or filter gradient,
 * the moments pass) on the same buffers, interleaved; the fused plan is
 * kept when it is at least 3% faster. A shape where cuDNN takes no such
 * graph, or where it is not faster, runs the separate way; each search's
 * outcome is logged (LOG_I) with both times. The verdict is kept on disk
 * beside the convolutions' plans (ops/plan_store.h, family "convbn",
 * CTRAIN_PLAN_CACHE): a later run on the same card takes it, compiling only
 * the kept engine (a kept engine cuDNN refuses then is searched again), and
 * trains with the same kernels. A verdict reached while any form had
 * candidates dropped for the workspace limit or failed runs is not kept
 * (memory pressure may have caused it); candidates dropped for a forbidden
 * numerical note (non-determinism, reduced-precision reduction) do not
 * stop it, and the log says which notes.
 *
 * Numerics: the fused values differ from the separate ones in their last
 * bits (y s + b against (y - mean) gamma invstd + beta; the activation not
 * rounded to the storage type in form 0; in the f16 forms s and b
 * themselves f16, b = beta - mean s rounded by ~|mean s| 2^-11, so the
 * ReLU's mask may differ near its kink; the data gradient's form 2 masks
 * with ((y - mean) invstd) gamma + beta in f32; sums of the f32 result
 * against Welford moments of the stored one: m2's cancellation grows with
 * mean^2 / var, small for a convolution's output). tests/gpu_conv_bn.c
 * states the tolerances, per form.
 *
 * CTRAIN_CONV_BN=fused asks for these (ResNet then builds its blocks from
 * the unit); conv_bn_cudnn_use overrides it per context for tests. Built
 * with -DCTRAIN_CUDA only.
 */
#ifndef CTRAIN_OPS_CONV_BN_CUDNN_H
#define CTRAIN_OPS_CONV_BN_CUDNN_H

#include "engine/ctx.h"
#include "conv2d.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CONV_BN_CANDIDATES 3

/* The kinds of fused graph (the list above) */
typedef enum {
    CONV_BN_CONV_STATS = 0,       /* y = conv(x, w); sums of y */
    CONV_BN_BNRELU_FPROP,         /* z = conv(relu(y s + b), w) */
    CONV_BN_BNRELU_FPROP_STATS,   /* the same, and the sums of z */
    CONV_BN_BNRELU_WGRAD,         /* dw = corr(relu(y s + b), dz) */
    CONV_BN_DGRAD_RELU,           /* g = conv^T(dz, w) where bn(y) > 0; sums of g, g xhat */
    CONV_BN_KINDS
} ConvBnKind;
#define CONV_BN_MAX_WS ((size_t)512 << 20)   /* a fused plan's workspace at most */

/* 1 when CTRAIN_CONV_BN is "fused" (read once). */
int conv_bn_cudnn_wanted(void);

#ifdef CTRAIN_CUDA
/* Each returns 1 when a fused plan ran, 0 when this kind, shape and type
 * run the separate way (outputs then hold whatever the search left: the
 * caller runs the separate way). dt f16 or bf16 (f32: 0); the activations
 * and filters 16-byte aligned; s is the convolution's shape. */

/* y, and mean / m2 (f32 [K] each) of y. */
int conv_bn_cudnn_conv_stats(Ctx *c, void *y, float *mean, float *m2, const void *x,
                             const void *w, DType dt, const Conv2dShape *s);
/* z = conv(relu(bn(y)), w), bn from ms = (mean, invstd) f32 [2, C], gamma,
 * beta; and when mean is not NULL, mean / m2 of z. */
int conv_bn_cudnn_bnrelu_fprop(Ctx *c, void *z, float *mean, float *m2, const void *y,
                               const float *ms, const float *gamma, const float *beta,
                               const void *w, DType dt, const Conv2dShape *s);
/* dw (+)= corr(relu(bn(y)), dz) into dw of type tdw (accum: add). gamma and
 * beta as batchnorm_scale_bias_cuda takes them (NULL: 1 and 0). */
int conv_bn_cudnn_bnrelu_wgrad(Ctx *c, void *dw, DType tdw, int accum, const void *y,
                               const float *ms, const float *gamma, const float *beta,
                               const void *dz, DType dt, const Conv2dShape *s);

/* g = conv^T(dz, w) masked by the ReLU of bn(y) (bn from ms = (mean,
 * invstd), gamma, beta), stored in g (y's shape and type), with sg[c] =
 * sum g and sgx[c] = sum g xhat over the rows of y (f32 [C] each, 16-byte
 * aligned; ms too, and gamma and beta not NULL): what
 * batchnorm_backward_sums_cuda turns into batch norm's gradient sums. */
int conv_bn_cudnn_dgrad_relu(Ctx *c, void *g, float *sg, float *sgx, const void *dz,
                             const void *w, const void *y, const float *ms, const float *gamma,
                             const float *beta, DType dt, const Conv2dShape *s);

/* Overrides CTRAIN_CONV_BN's fused choice for c: 1 always the fused plan
 * where cuDNN takes the graph (even when not faster: tests), 0 never, -1
 * back to the setting. */
void conv_bn_cudnn_use(Ctx *c, int on);
/* Shapes of c served fused so far, and shapes that run the separate way
 * (cuDNN took no graph, or it was slower); fused_by_kind (NULL: not
 * wanted) gets the fused ones per ConvBnKind. */
void conv_bn_cudnn_counts(Ctx *c, int *fused, int *separate, int *fused_by_kind);
/* Tests: searches of c try graph form `form` alone (-1: every form, the
 * default; conv_bn_cudnn.c lists the forms), so each form can be checked
 * whatever wins; and the form the latest entry of `kind` runs fused (-1:
 * none, or it runs the separate way). */
void conv_bn_cudnn_only_form(Ctx *c, int form);
int conv_bn_cudnn_last_form(Ctx *c, ConvBnKind kind);
/* Entries of c a search decided, and entries a verdict kept on disk gave. */
void conv_bn_cudnn_origins(Ctx *c, int *searched, int *loaded);
/* Whether c asks for fused graphs (CTRAIN_CONV_BN=fused or the override)
 * and dt is a type they take: where 0, the functions above return 0 at
 * once. */
int conv_bn_cudnn_enabled(Ctx *c, DType dt);
#endif

#ifdef __cplusplus
}
#endif
#endif
