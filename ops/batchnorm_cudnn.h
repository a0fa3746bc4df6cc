/* batchnorm_cudnn.h — batch norm (+ residual add, + ReLU) through cuDNN's
 * fused NHWC batch-norm, the alternative to our own kernels (batchnorm.h,
 * which holds the math and the op contract both paths follow).
 *
 * Shape letters: x [N, H, W, C] (NHWC, C contiguous), M = N*H*W rows.
 *
 *   training forward:  cudnnBatchNormalizationForwardTrainingEx,
 *                      mode CUDNN_BATCHNORM_SPATIAL_PERSISTENT, bnOps
 *                        BN                 y = bn(x)
 *                        BN_ACTIVATION      y = relu(bn(x))
 *                        BN_ADD_ACTIVATION  y = relu(bn(x) + z)
 *   backward:          cudnnBatchNormalizationBackwardEx (same mode and ops):
 *                      dx (+)= ..., dz = g, dgamma (+)=, dbeta (+)=
 *   eval forward:      cudnnBatchNormalizationForwardInference (BN only)
 *
 * Semantics, checked against ours (tests/gpu_bn_compare.c):
 *   - statistics: the batch mean and the biased variance normalise; the
 *     running variance is updated with the UNBIASED estimate var M/(M-1),
 *     as PyTorch does (cuDNN is what PyTorch calls for it; MXNet issue
 *     #21111 measured cuDNN's moving variance to be the unbiased one). The
 *     update is running = (1 - f) running + f batch with f =
 *     exponentialAverageFactor = momentum (0.1).
 *   - saved mean / saved inverse variance are exactly our mean / invstd
 *     (invstd = 1 / sqrt(var + eps)), so either backward can consume either
 *     forward's statistics; only the reserve space is cuDNN's own.
 *   - num_batches_tracked is not touched: the caller counts the batch.
 *
 * The reserve space: the training forward with a fused activation writes
 * into it what its backward needs (the ReLU mask); its size is
 * BnCudnn.reserve_bytes (0 for plain BN). The CALLER owns it: a buffer of
 * that many bytes per forward call, kept until that forward's backward has
 * run (the op layer would save it on the node as a u8 tensor).
 *
 * cuDNN's constraints (cuDNN API reference, cudnnBatchNormalizationForward-
 * TrainingEx / BackwardEx, cudnnBatchNormMode_t), and what we do:
 *   - the fast "semi-persistent NHWC" kernel runs only when x, y, z, dy, dx,
 *     dz are fully packed NHWC of CUDNN_DATA_HALF, mode is
 *     SPATIAL_PERSISTENT, the workspace is not NULL (we always pass the
 *     context's workspace, grown to the queried size) and, with
 *     BN_ADD_ACTIVATION, C % 4 == 0 (since cuDNN 8.2; before, always). Other
 *     types run slower generic kernels — or are refused;
 *   - BN_ACTIVATION and BN_ADD_ACTIVATION exist only for the NHWC layout,
 *     for training forward and backward; inference has no fused form;
 *   - bf16 batch norm needs cuDNN >= 8.1 and sm_80+;
 *   - only 4-D and 5-D tensors; scale, bias, mean, variance are f32 [1,C,1,1]
 *     for f32/f16/bf16 data; bnScale and bnBias must not be NULL, and the
 *     backward needs bnBias whenever there is an activation;
 *   - the SPATIAL_PERSISTENT overflow caveat (scaled integer atomics) is
 *     documented for NCHW only, not for the NHWC path used here.
 * Declined here (the caller runs our kernels, see "fall back" below):
 * gamma or beta NULL (affine = False), a residual z without ReLU, z with
 * C % 4 != 0, eval forward with z or ReLU, and any configuration cuDNN
 * itself answers with a NOT_SUPPORTED or BAD_PARAM status (BnCudnn.why then
 * names cuDNN's status). Any other cuDNN failure is fatal.
 *
 * Fall back: every call returns 1 when cuDNN ran, 0 when it declined, and
 * then nothing was written (running statistics included): the caller runs
 * batchnorm_stats_cuda / batchnorm_forward_cuda / batchnorm_backward_cuda
 * instead. A cuDNN forward may be followed by our backward (its saved mean
 * and invstd are ours), not the reverse (cuDNN's fused backward needs the
 * reserve space only its forward fills).
 *
 * Accumulation. cuDNN's alpha/beta blend the outputs: dx with
 * alphaDataDiff = 1, betaDataDiff = accum_x; dgamma and dbeta (f32, the
 * gradient buffer) with alphaParamDiff = 1, betaParamDiff = accum_p. cuDNN
 * documents the data blend for dx only, so dz never relies on it: when dz
 * accumulates, cuDNN writes g into a temporary that is then added into dz
 * (one extra pass), and when dx accumulates the dz target is zeroed first
 * (correct whether or not cuDNN blends dz). Should cuDNN refuse beta = 1
 * for a form (its fast kernels may not blend), the call is repeated with
 * beta = 0 into temporaries that are added afterwards, and the form
 * remembers it (no_blend). Outputs that are not wanted (dx, dz, dgamma,
 * dbeta NULL) get temporaries: cuDNN writes all of them. With beta = 0,
 * cuDNN never reads the output (it may hold NaN). In ResNet's usual order
 * none of this costs anything: BN's x (a conv output) has one consumer and
 * the shortcut's gradient is first written by the last BN of the block.
 *
 * Descriptors live in a BnCudnn made once per (dtype, shape, form) by
 * batchnorm_cudnn_init (host-only calls, plus growing the shared workspace:
 * do it during warm-up, never inside CUDA graph capture); calls after that
 * only launch on c->stream, so they can be captured. cuDNN's legacy BN API
 * is deprecated in cuDNN 9 but shipped (docs/design.md, "Libraries"); the
 * deprecation warnings are silenced in batchnorm_cudnn.c only, and this
 * header stays free of cuDNN types so no other file sees them.
 *
 * The op layer (batchnorm_op.c) keeps its forms in the context (a cache
 * registered with it, engine/ctx.h): batchnorm_cudnn_get builds a form on
 * its first use (a warm-up step) and finds it by a table lookup afterwards;
 * ctx_free releases them. Running statistics: the op passes NULL running
 * mean and variance (both, as cuDNN allows and PyTorch does for
 * track_running_stats = False) while a recompute segment re-runs its
 * forward, so the batch is counted once.
 *
 * Environment: CTRAIN_BN=cudnn (the default) asks the op layer for this
 * path in the training forward and its backward, CTRAIN_BN=own for our
 * kernels everywhere; batchnorm_cudnn_wanted() reads it. A context can
 * override it (batchnorm_cudnn_use), which is how the tests run both paths
 * in one process.
 */
#ifndef CTRAIN_OPS_BATCHNORM_CUDNN_H
#define CTRAIN_OPS_BATCHNORM_CUDNN_H

#include <stddef.h>
#include "engine/ctx.h"
#include "engine/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when CTRAIN_BN is unset or "cudnn", 0 when it is "own"; any other
 * value is fatal (with a hint). Read once per process. Also in CPU-only
 * builds, where the op layer simply ignores it. */
int batchnorm_cudnn_wanted(void);

#ifdef CTRAIN_CUDA

/* One (dtype, shape, form) of cuDNN's batch norm: descriptors and sizes. */
typedef struct BnCudnn {
    DType dt;               /* storage type of x, z, y, dy, dx, dz */
    int N, H, W, C;
    int has_z, relu;        /* the form: z needs relu (BN_ADD_ACTIVATION) */
    int usable;             /* 0: cuDNN does not take this form (see why) */
    char why[160];          /* reason of the last refusal, "" when none */
    size_t fwd_ws_bytes;    /* workspace of the training forward */
    size_t bwd_ws_bytes;    /* workspace of the backward */
    size_t reserve_bytes;   /* reserve space a training forward fills (may be 0) */
    int no_blend;           /* cuDNN refused beta = 1 here: accumulate by an add */
    int pair;               /* CTRAIN_BN_PAIR: -1 unchecked, 1 our forward's mask equals
                               cuDNN's (ops/batchnorm_op.c), 0 it does not */
    long pair_runs;         /* our forwards run before this form's cuDNN backward */
    long fwd_runs, bwd_runs; /* training forwards / backwards cuDNN ran */
    void *xd, *pd, *ad;     /* cuDNN tensor (x/y/z/dx/dy/dz), per-channel
                               [1,C,1,1] f32, activation descriptors */
} BnCudnn;

/* Builds the descriptors and asks cuDNN for the workspace and reserve
 * sizes, growing c's shared workspace to the larger one. Never fatal for an
 * unsupported form: p->usable = 0 and p->why says why. */
void batchnorm_cudnn_init(BnCudnn *p, Ctx *c, DType dt, int N, int H, int W, int C, int has_z,
                          int relu);
void batchnorm_cudnn_free(BnCudnn *p);

/* Training forward: y = act(gamma (x - mean) invstd + beta (+ z)); writes
 * save_mean and save_invstd (f32 [C]); updates running_mean and
 * running_var (both or neither, f32 [C]) with factor momentum. reserve:
 * p->reserve_bytes bytes (NULL when 0), to keep for the backward.
 * z: given exactly when p->has_z. Returns 1 when cuDNN ran, 0 when declined. */
int batchnorm_cudnn_forward_train(Ctx *c, BnCudnn *p, void *y, float *save_mean,
                                  float *save_invstd, float *running_mean, float *running_var,
                                  const void *x, const void *z, const float *gamma,
                                  const float *beta, float momentum, float eps, void *reserve);

/* Training backward of that forward (same p, eps, saved statistics and
 * reserve; y is its output, read with relu). dx, dz, dgamma, dbeta may be
 * NULL (not wanted); dz only with p->has_z. accum_*: 0 writes, 1 adds.
 * Returns 1 when cuDNN ran, 0 when declined (nothing written). */
int batchnorm_cudnn_backward(Ctx *c, BnCudnn *p, void *dx, void *dz, float *dgamma,
                             float *dbeta, const void *dy, const void *x, const void *y,
                             const float *gamma, const float *beta, const float *save_mean,
                             const float *save_invstd, float eps, const void *reserve,
                             int accum_x, int accum_z, int accum_p);

/* Eval forward: y = gamma (x - running_mean) / sqrt(running_var + eps) +
 * beta. Only for plain BN (p->has_z == 0 and p->relu == 0): cuDNN's
 * inference call has no fused add or activation, and our forward kernel
 * fuses them in one pass, so for those forms this declines (returns 0). The
 * eval backward is always ours (batchnorm_backward_cuda, training = 0). */
int batchnorm_cudnn_forward_eval(Ctx *c, BnCudnn *p, void *y, const void *x, const float *gamma,
                                 const float *beta, const float *running_mean,
                                 const float *running_var, float eps);

/* ---- the context's forms, for the op layer ---- */

/* The form for (dt, N, H, W, C, has_z, relu): made by batchnorm_cudnn_init
 * on first use (host calls; may grow the workspace: warm-up, not capture),
 * then a table lookup. A form cuDNN declines is kept too (usable = 0, why
 * logged once at debug level), so it is not asked again. The pointer stays
 * valid until batchnorm_cudnn_release. */
BnCudnn *batchnorm_cudnn_get(Ctx *c, DType dt, int N, int H, int W, int C, int has_z, int relu);
/* Frees every form of c now (ctx_free releases them too). */
void batchnorm_cudnn_release(Ctx *c);
/* Whether the op layer tries cuDNN on c: the context's choice when set by
 * batchnorm_cudnn_use, else batchnorm_cudnn_wanted(). */
int batchnorm_cudnn_enabled(Ctx *c);
/* Overrides CTRAIN_BN for c: 1 cuDNN, 0 our kernels, -1 back to CTRAIN_BN. */
void batchnorm_cudnn_use(Ctx *c, int on);
/* Training forwards and backwards cuDNN has run on c so far, over all forms
 * (what the tests read to know which path ran). */
void batchnorm_cudnn_runs(Ctx *c, long *fwd, long *bwd);

#endif /* CTRAIN_CUDA */

#ifdef __cplusplus
}
#endif
#endif
