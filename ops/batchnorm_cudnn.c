/* batchnorm_cudnn.c — batch norm (+ add, + ReLU) through cuDNN's NHWC fused
 * batch-norm; the contract, cuDNN's constraints and the fall-back rules are
 * in batchnorm_cudnn.h, the math in batchnorm.h.
 *
 * Shape letters: x [N, H, W, C] NHWC, M = N*H*W rows, C channels.
 *
 * A plain C file (cuDNN is a C API). It uses cuDNN's legacy batch-norm API,
 * deprecated in cuDNN 9 but still shipped and the shortest C route to the
 * fused NHWC BN + add + ReLU kernels; with -Werror the deprecation warnings
 * would stop the build, so they are silenced for this file only (the pragma
 * below). The CTRAIN_BN switch is also read here and exists in CPU-only
 * builds too. At the end: the context's table of forms (a cache registered
 * with the context, engine/ctx.h) that the op layer draws from.
 */
#include "batchnorm_cudnn.h"

#include <stdlib.h>
#include <string.h>

#include "engine/error.h"
#include "engine/settings.h"

int batchnorm_cudnn_wanted(void)
{
    static int wanted = -1;
    if (wanted < 0) wanted = setting_choice(SET_BN) == 0;   /* "cudnn|own" */
    return wanted;
}

#ifdef CTRAIN_CUDA
/* Legacy descriptor API: deprecated in cuDNN 9, still shipped (see above). */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include "engine/log.h"
#include "engine/mem.h"
#include "elementwise.h"

#define BN_MODE CUDNN_BATCHNORM_SPATIAL_PERSISTENT

static cudnnDataType_t bn_cudnn_type(DType t)
{
    switch (t) {
    case DT_F32: return CUDNN_DATA_FLOAT;
    case DT_F16: return CUDNN_DATA_HALF;
    default: return CUDNN_DATA_BFLOAT16;
    }
}

static cudnnBatchNormOps_t bn_ops(const BnCudnn *p)
{
    return p->has_z ? CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION
           : p->relu ? CUDNN_BATCHNORM_OPS_BN_ACTIVATION
                     : CUDNN_BATCHNORM_OPS_BN;
}

#define XD(p) ((cudnnTensorDescriptor_t)(p)->xd)
#define PD(p) ((cudnnTensorDescriptor_t)(p)->pd)
#define AD(p) ((cudnnActivationDescriptor_t)(p)->ad)

/* A status that means "cuDNN does not take this configuration": the caller
 * falls back to our kernels. Everything else is a real failure. */
static int bn_declined(cudnnStatus_t st)
{
    int cat = (int)CUDNN_STATUS_CATEGORY(st);
    return cat == (int)CUDNN_STATUS_NOT_SUPPORTED || cat == (int)CUDNN_STATUS_BAD_PARAM;
}

/* Records why cuDNN declined (st) and returns 0; fatal for real failures. */
static int bn_refuse(BnCudnn *p, const char *call, cudnnStatus_t st)
{
    if (!bn_declined(st))
        ct_check_failed(__FILE__, __LINE__, call, "cuDNN", cudnnGetErrorString(st));
    snprintf(p->why, sizeof p->why, "%s: %s", call, cudnnGetErrorString(st));
    return 0;
}

static int bn_refuse_msg(BnCudnn *p, const char *msg)
{
    snprintf(p->why, sizeof p->why, "%s", msg);
    return 0;
}

void batchnorm_cudnn_init(BnCudnn *p, Ctx *c, DType dt, int N, int H, int W, int C, int has_z,
                          int relu)
{
    memset(p, 0, sizeof *p);
    p->dt = dt;
    p->N = N, p->H = H, p->W = W, p->C = C;
    p->has_z = has_z != 0;
    p->relu = relu != 0;
    p->pair = -1;
    CT_ASSERT(c->device == DEV_CUDA, "batchnorm_cudnn_init: needs a CUDA context");
    CT_ASSERT(dt == DT_F32 || dt == DT_F16 || dt == DT_BF16,
              "batchnorm_cudnn_init: dtype %s is not f32, f16 or bf16", dtype_name(dt));
    CT_ASSERT(N > 0 && H > 0 && W > 0 && C > 0,
              "batchnorm_cudnn_init: empty shape [%d, %d, %d, %d]", N, H, W, C);
    CT_ASSERT((long long)N * H * W * C < 0x7fffffffLL,
              "batchnorm_cudnn_init: [%d, %d, %d, %d] has more elements than cuDNN's int strides "
              "allow", N, H, W, C);
    if (p->has_z && !p->relu) {
        bn_refuse_msg(p, "a residual add without ReLU has no cuDNN form (BN_ADD_ACTIVATION "
                         "always activates)");
        return;
    }
    if (p->has_z && C % 4 != 0) {
        bn_refuse_msg(p, "BN_ADD_ACTIVATION needs C % 4 == 0 for cuDNN's NHWC kernel");
        return;
    }
    cudnnTensorDescriptor_t xd, pd;
    cudnnActivationDescriptor_t ad;
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&xd));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&pd));
    CUDNN_CHECK(cudnnCreateActivationDescriptor(&ad));
    p->xd = xd;
    p->pd = pd;
    p->ad = ad;
    /* cuDNN takes the dims in NCHW order; the format says they lie as NHWC */
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NHWC, bn_cudnn_type(dt), N, C, H, W));
    /* our ReLU maps NaN to 0 (!(v > 0)): no NaN propagation */
    CUDNN_CHECK(cudnnSetActivationDescriptor(ad, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN,
                                             0.0));
    cudnnStatus_t st = cudnnDeriveBNTensorDescriptor(pd, xd, BN_MODE);
    if (st != CUDNN_STATUS_SUCCESS) {
        bn_refuse(p, "cudnnDeriveBNTensorDescriptor", st);
        return;
    }
    cudnnBatchNormOps_t ops = bn_ops(p);
    cudnnActivationDescriptor_t act = ops == CUDNN_BATCHNORM_OPS_BN ? NULL : ad;
    cudnnTensorDescriptor_t zd = p->has_z ? xd : NULL;
    st = cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(c->cudnn, BN_MODE, ops, xd, zd,
                                                                  xd, pd, act, &p->fwd_ws_bytes);
    if (st != CUDNN_STATUS_SUCCESS) {
        bn_refuse(p, "cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize", st);
        return;
    }
    st = cudnnGetBatchNormalizationBackwardExWorkspaceSize(c->cudnn, BN_MODE, ops, xd, xd, xd, zd,
                                                           xd, pd, act, &p->bwd_ws_bytes);
    if (st != CUDNN_STATUS_SUCCESS) {
        bn_refuse(p, "cudnnGetBatchNormalizationBackwardExWorkspaceSize", st);
        return;
    }
    st = cudnnGetBatchNormalizationTrainingExReserveSpaceSize(c->cudnn, BN_MODE, ops, act, xd,
                                                              &p->reserve_bytes);
    if (st != CUDNN_STATUS_SUCCESS) {
        bn_refuse(p, "cudnnGetBatchNormalizationTrainingExReserveSpaceSize", st);
        return;
    }
    /* grow the shared workspace now (warm-up), so the calls never reallocate */
    ctx_workspace(c, p->fwd_ws_bytes > p->bwd_ws_bytes ? p->fwd_ws_bytes : p->bwd_ws_bytes);
    p->usable = 1;
}

void batchnorm_cudnn_free(BnCudnn *p)
{
    if (p->xd) CUDNN_CHECK(cudnnDestroyTensorDescriptor(XD(p)));
    if (p->pd) CUDNN_CHECK(cudnnDestroyTensorDescriptor(PD(p)));
    if (p->ad) CUDNN_CHECK(cudnnDestroyActivationDescriptor(AD(p)));
    memset(p, 0, sizeof *p);
}

/* The workspace a call passes: never NULL (a NULL workspace would turn the
 * Ex calls into the non-fused, non-NHWC-persistent versions). */
static void *bn_workspace(Ctx *c, size_t need, size_t *bytes)
{
    void *ws = ctx_workspace(c, need ? need : 1);
    *bytes = c->workspace_bytes;
    return ws;
}

int batchnorm_cudnn_forward_train(Ctx *c, BnCudnn *p, void *y, float *save_mean,
                                  float *save_invstd, float *running_mean, float *running_var,
                                  const void *x, const void *z, const float *gamma,
                                  const float *beta, float momentum, float eps, void *reserve)
{
    if (!p->usable) return 0;
    if (!gamma || !beta)
        return bn_refuse_msg(p, "affine = False: cuDNN needs bnScale and bnBias");
    CT_ASSERT(!z == !p->has_z, "batchnorm_cudnn_forward_train: z %s but the form %s a residual",
              z ? "given" : "missing", p->has_z ? "has" : "has no");
    CT_ASSERT(!running_mean == !running_var,
              "batchnorm_cudnn_forward_train: running_mean and running_var go together");
    CT_ASSERT(save_mean && save_invstd,
              "batchnorm_cudnn_forward_train: save_mean and save_invstd are needed");
    CT_ASSERT(reserve || p->reserve_bytes == 0,
              "batchnorm_cudnn_forward_train: a reserve of %zu bytes is needed",
              p->reserve_bytes);
    if (running_mean)
        CT_ASSERT((size_t)p->N * p->H * p->W >= 2,
                  "batchnorm_cudnn_forward_train: the unbiased variance needs M >= 2 rows");
    const float one = 1.0f, zero = 0.0f;
    size_t ws_bytes;
    void *ws = bn_workspace(c, p->fwd_ws_bytes, &ws_bytes);
    cudnnBatchNormOps_t ops = bn_ops(p);
    cudnnStatus_t st = cudnnBatchNormalizationForwardTrainingEx(
        c->cudnn, BN_MODE, ops, &one, &zero, XD(p), x, p->has_z ? XD(p) : NULL, z, XD(p), y,
        PD(p), gamma, beta, (double)momentum, running_mean, running_var, (double)eps, save_mean,
        save_invstd, ops == CUDNN_BATCHNORM_OPS_BN ? NULL : AD(p), ws, ws_bytes,
        p->reserve_bytes ? reserve : NULL, p->reserve_bytes);
    if (st != CUDNN_STATUS_SUCCESS)
        return bn_refuse(p, "cudnnBatchNormalizationForwardTrainingEx", st);
    p->fwd_runs++;
    return 1;
}

/* One cuDNN backward call with the given blend factors (beta 0 or 1). */
static cudnnStatus_t bn_backward_call(Ctx *c, BnCudnn *p, void *dx, void *dz, float *dgamma,
                                      float *dbeta, float beta_x, float beta_p, const void *dy,
                                      const void *x, const void *y, const float *gamma,
                                      const float *beta, const float *save_mean,
                                      const float *save_invstd, float eps, const void *reserve)
{
    const float one = 1.0f;
    size_t ws_bytes;
    void *ws = bn_workspace(c, p->bwd_ws_bytes, &ws_bytes);
    cudnnBatchNormOps_t ops = bn_ops(p);
    int act = ops != CUDNN_BATCHNORM_OPS_BN;
    return cudnnBatchNormalizationBackwardEx(
        c->cudnn, BN_MODE, ops, &one, &beta_x, &one, &beta_p, XD(p), x, act ? XD(p) : NULL,
        act ? y : NULL, XD(p), dy, p->has_z ? XD(p) : NULL, p->has_z ? dz : NULL, XD(p), dx,
        PD(p), gamma, beta, dgamma, dbeta, (double)eps, save_mean, save_invstd,
        act ? AD(p) : NULL, ws, ws_bytes, p->reserve_bytes ? (void *)reserve : NULL,
        p->reserve_bytes);
}

int batchnorm_cudnn_backward(Ctx *c, BnCudnn *p, void *dx, void *dz, float *dgamma,
                             float *dbeta, const void *dy, const void *x, const void *y,
                             const float *gamma, const float *beta, const float *save_mean,
                             const float *save_invstd, float eps, const void *reserve,
                             int accum_x, int accum_z, int accum_p)
{
    if (!p->usable) return 0;
    if (!gamma || !beta)
        return bn_refuse_msg(p, "affine = False: cuDNN needs bnScale and bnBias");
    CT_ASSERT(!dz || p->has_z, "batchnorm_cudnn_backward: dz given but the form has no residual");
    CT_ASSERT(!p->relu || y, "batchnorm_cudnn_backward: the ReLU form needs y");
    CT_ASSERT(reserve || p->reserve_bytes == 0,
              "batchnorm_cudnn_backward: the forward's reserve (%zu bytes) is needed",
              p->reserve_bytes);
    if (!dx) accum_x = 0;
    if (!dz) accum_z = 0;
    if (!dgamma && !dbeta) accum_p = 0;
    const size_t C = (size_t)p->C, n = (size_t)p->N * p->H * p->W * C;
    const size_t nbytes = n * dtype_size(p->dt), pbytes = 2 * C * sizeof(float);
    /* Accumulation through cuDNN's blend (beta = 1) unless this form has
     * refused it before; then cuDNN writes into temporaries (beta = 0) that
     * are added into the gradients afterwards (one extra pass each). */
    const int blend = !p->no_blend && (accum_x || accum_p);
    const int add_x = accum_x && !blend, add_p = accum_p && !blend;
    /* stand-ins for the outputs cuDNN always writes, and the add buffers */
    void *tdx = NULL, *tdz = NULL;
    float *tpar = NULL;
    if (!dx || add_x) tdx = mem_alloc(c, nbytes);
    if (p->has_z && (!dz || accum_z)) tdz = mem_alloc(c, nbytes);
    if (!dgamma || !dbeta || add_p) tpar = (float *)mem_alloc(c, pbytes);
    void *dx_t = tdx ? tdx : dx, *dz_t = tdz ? tdz : dz;
    float *dg_t = (!dgamma || add_p) ? tpar : dgamma, *db_t = (!dbeta || add_p) ? tpar + C : dbeta;
    /* if cuDNN blends dz with betaDataDiff = 1 too (undocumented), it must
     * find zeros there */
    if (p->has_z && blend && accum_x) mem_zero(c, dz_t, nbytes);
    cudnnStatus_t st = bn_backward_call(c, p, dx_t, dz_t, dg_t, db_t, blend && accum_x ? 1.0f : 0.0f,
                                        blend && accum_p ? 1.0f : 0.0f, dy, x, y, gamma, beta,
                                        save_mean, save_invstd, eps, reserve);
    if (st != CUDNN_STATUS_SUCCESS && bn_declined(st) && blend) {
        /* refused with beta = 1: once more without blending, and remember */
        p->no_blend = 1;
        if (tdx) mem_free(c, tdx, nbytes);
        if (tdz) mem_free(c, tdz, nbytes);
        if (tpar) mem_free(c, tpar, pbytes);
        return batchnorm_cudnn_backward(c, p, dx, dz, dgamma, dbeta, dy, x, y, gamma, beta,
                                        save_mean, save_invstd, eps, reserve, accum_x, accum_z,
                                        accum_p);
    }
    int ran = st == CUDNN_STATUS_SUCCESS;
    if (!ran) bn_refuse(p, "cudnnBatchNormalizationBackwardEx", st);
    if (ran) {
        p->bwd_runs++;
        /* the gradients that accumulate outside cuDNN: g += temporary */
        if (dz && accum_z) scale_forward_cuda(dz, tdz, 1.0f, p->dt, n, 1, c->stream);
        if (add_x) scale_forward_cuda(dx, tdx, 1.0f, p->dt, n, 1, c->stream);
        if (add_p && dgamma) scale_forward_cuda(dgamma, tpar, 1.0f, DT_F32, C, 1, c->stream);
        if (add_p && dbeta) scale_forward_cuda(dbeta, tpar + C, 1.0f, DT_F32, C, 1, c->stream);
    }
    if (tdx) mem_free(c, tdx, nbytes);
    if (tdz) mem_free(c, tdz, nbytes);
    if (tpar) mem_free(c, tpar, pbytes);
    /* declined: at most dz was zeroed (accum_x with a fresh dz), which the
     * fall-back overwrites anyway (it writes dz with accum_z = 0) */
    return ran;
}

int batchnorm_cudnn_forward_eval(Ctx *c, BnCudnn *p, void *y, const void *x, const float *gamma,
                                 const float *beta, const float *running_mean,
                                 const float *running_var, float eps)
{
    if (!p->xd) return 0; /* init refused before the descriptors existed */
    if (p->has_z || p->relu)
        return bn_refuse_msg(p, "eval: cuDNN's inference call has no fused add or ReLU");
    if (!gamma || !beta)
        return bn_refuse_msg(p, "affine = False: cuDNN needs bnScale and bnBias");
    CT_ASSERT(running_mean && running_var,
              "batchnorm_cudnn_forward_eval: eval needs the running statistics");
    const float one = 1.0f, zero = 0.0f;
    /* inference has no persistent variant: plain spatial mode, same [1,C,1,1]
     * parameter descriptor */
    cudnnStatus_t st = cudnnBatchNormalizationForwardInference(
        c->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, XD(p), x, XD(p), y, PD(p), gamma, beta,
        running_mean, running_var, (double)eps);
    if (st != CUDNN_STATUS_SUCCESS)
        return bn_refuse(p, "cudnnBatchNormalizationForwardInference", st);
    return 1;
}

/* ---- the context's forms ---- */

/* The context's forms: every form asked for so far (a ResNet has a few
 * dozen), each allocated on its own so the pointers handed out stay put;
 * use is the context's CTRAIN_BN override (-1: none). */
typedef struct BnCache {
    BnCudnn **forms;
    int n, cap;
    int use;
} BnCache;

static void bn_cache_release(Ctx *c, void *obj)
{
    (void)c;
    BnCache *bc = (BnCache *)obj;
    for (int i = 0; i < bc->n; i++) {
        batchnorm_cudnn_free(bc->forms[i]);
        free(bc->forms[i]);
    }
    free(bc->forms);
    free(bc);
}

static const CtxCacheKind bn_cache_kind = {"cuDNN batch-norm forms", bn_cache_release};

static BnCache *bn_cache(Ctx *c)
{
    BnCache *bc = (BnCache *)ctx_cache_get(c, &bn_cache_kind);
    if (!bc) {
        bc = calloc(1, sizeof *bc);
        CT_ASSERT(bc != NULL, "batchnorm_cudnn: out of host memory for the form cache");
        bc->use = -1;
        ctx_cache_set(c, &bn_cache_kind, bc);
    }
    return bc;
}

BnCudnn *batchnorm_cudnn_get(Ctx *c, DType dt, int N, int H, int W, int C, int has_z, int relu)
{
    BnCache *bc = bn_cache(c);
    has_z = has_z != 0;
    relu = relu != 0;
    for (int i = 0; i < bc->n; i++) {
        BnCudnn *p = bc->forms[i];
        if (p->dt == dt && p->N == N && p->H == H && p->W == W && p->C == C &&
            p->has_z == has_z && p->relu == relu)
            return p;
    }
    if (bc->n == bc->cap) {
        int cap = bc->cap ? 2 * bc->cap : 16;
        BnCudnn **grown = realloc(bc->forms, sizeof *grown * (size_t)cap);
        CT_ASSERT(grown != NULL, "batchnorm_cudnn: out of host memory for %d forms", cap);
        bc->forms = grown;
        bc->cap = cap;
    }
    BnCudnn *p = malloc(sizeof *p);
    CT_ASSERT(p != NULL, "batchnorm_cudnn: out of host memory for a form");
    batchnorm_cudnn_init(p, c, dt, N, H, W, C, has_z, relu);
    if (!p->usable)
        LOG_D("batchnorm: cuDNN declines %s [%d, %d, %d, %d]%s%s (%s); our kernels run it",
              dtype_name(dt), N, H, W, C, has_z ? " + z" : "", relu ? " + relu" : "", p->why);
    bc->forms[bc->n++] = p;
    return p;
}

void batchnorm_cudnn_release(Ctx *c)
{
    BnCache *bc = (BnCache *)ctx_cache_get(c, &bn_cache_kind);
    if (!bc) return;
    ctx_cache_set(c, &bn_cache_kind, NULL);
    bn_cache_release(c, bc);
}

int batchnorm_cudnn_enabled(Ctx *c)
{
    int use = bn_cache(c)->use;
    return use >= 0 ? use : batchnorm_cudnn_wanted();
}

void batchnorm_cudnn_use(Ctx *c, int on) { bn_cache(c)->use = on < 0 ? -1 : on != 0; }

void batchnorm_cudnn_runs(Ctx *c, long *fwd, long *bwd)
{
    BnCache *bc = bn_cache(c);
    *fwd = *bwd = 0;
    for (int i = 0; i < bc->n; i++) {
        *fwd += bc->forms[i]->fwd_runs;
        *bwd += bc->forms[i]->bwd_runs;
    }
}

#endif /* CTRAIN_CUDA */
