/* conv_bn_cudnn.c — a convolution with the batch-norm statistics of its
 * output reduced in the same cuDNN graph (the math, the graph and the
 * search rule are in conv_bn_cudnn.h).
 *
 * One entry per (shape, type) of a context: the search's verdict (fused or
 * separate) and, when fused, the plan and the descriptors it was built
 * from (alive as long as the plan). Calls after the first are a lookup, a
 * memset of the two sums, one cuDNN execution and one [K] kernel
 * (batchnorm_moments_from_sums_cuda): all on c->stream, capturable.
 */
#include "conv_bn_cudnn.h"

#include <stdlib.h>
#include <string.h>

#include "engine/settings.h"

int conv_bn_cudnn_wanted(void)
{
    static int wanted = -1;
    if (wanted < 0) wanted = setting_choice(SET_CONV_BN) == 2;   /* "separate|unit|fused" */
    return wanted;
}

#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>

#include "engine/error.h"
#include "engine/log.h"
#include "engine/mem.h"
#include "batchnorm.h"
#include "cudnn_graph.h"

enum { U_X = 1, U_W, U_Y, U_SUM, U_SQ, U_ACC = 100, U_SQV };
#define CS_PARTS 20

typedef struct {
    Conv2dShape s;
    DType dt;
    int forced;              /* searched under conv_bn_cudnn_use(c, 1) */
    int fused;               /* 1: plan below; 0: the separate way */
    CgPlan plan;
    CgDesc parts[CS_PARTS];  /* tensors, operations and their descriptors, the graph */
    int nparts;
} CsEntry;

typedef struct {
    CsEntry *e;
    int n, cap;
    int use;                 /* -1: CTRAIN_CONV_BN; 0 never; 1 always where cuDNN takes it */
} CsCache;

static void entry_free(CsEntry *e)
{
    if (e->plan.plan) cg_plan_free(&e->plan);
    for (int i = e->nparts - 1; i >= 0; i--) cg_destroy(e->parts[i]);
    e->nparts = 0;
}

static void cs_release(Ctx *c, void *obj)
{
    (void)c;
    CsCache *cc = (CsCache *)obj;
    for (int i = 0; i < cc->n; i++) entry_free(&cc->e[i]);
    free(cc->e);
    free(cc);
}

static const CtxCacheKind cs_kind = {"cuDNN conv + statistics graphs", cs_release};

static CsCache *cs_for(Ctx *c)
{
    CsCache *cc = (CsCache *)ctx_cache_get(c, &cs_kind);
    if (!cc) {
        cc = calloc(1, sizeof *cc);
        CT_ASSERT(cc != NULL, "conv_bn_cudnn: out of host memory for its plans");
        cc->use = -1;
        ctx_cache_set(c, &cs_kind, cc);
    }
    return cc;
}

void conv_bn_cudnn_use(Ctx *c, int on) { cs_for(c)->use = on; }

void conv_bn_cudnn_counts(Ctx *c, int *fused, int *separate)
{
    CsCache *cc = cs_for(c);
    int f = 0;
    for (int i = 0; i < cc->n; i++) f += cc->e[i].fused;
    if (fused) *fused = f;
    if (separate) *separate = cc->n - f;
}

/* ---- the graph ---- */

static CgDesc part(CsEntry *e, CgDesc d)
{
    if (d) {
        CT_ASSERT(e->nparts < CS_PARTS, "conv_bn_cudnn: more than %d graph parts", CS_PARTS);
        e->parts[e->nparts++] = d;
    }
    return d;
}

/* An NHWC tensor in cuDNN's (N, C, H, W) order. */
static CgDesc nhwc(CsEntry *e, int64_t uid, cudnnDataType_t t, int n, int ch, int h, int w,
                   int virt)
{
    const int64_t d[4] = {n, ch, h, w}, st[4] = {(int64_t)h * w * ch, 1, (int64_t)w * ch, ch};
    return part(e, cg_tensor_try(uid, t, 4, d, st, 16, virt));
}

/* The graph, of two forms (cuDNN documents no rule that decides between
 * them; the first it takes is used):
 *   GRAPH_ACC  fprop -> acc (virtual f32); y = identity(acc);
 *              sum = reduce(acc); sq = reduce(acc * acc)
 *   GRAPH_Y    fprop -> y (stored); sum = reduce(y); sq = reduce(y * y): the
 *              statistics of the rounded y, as the separate way takes them
 * NULL when cuDNN refuses a part (*what names it) or the graph (*st). */
enum { GRAPH_ACC = 0, GRAPH_Y = 1, GRAPH_FORMS = 2 };

static CgDesc graph_build(Ctx *c, CsEntry *e, int form, const char **what, cudnnStatus_t *st)
{
    const Conv2dShape *s = &e->s;
    const cudnnDataType_t t = e->dt == DT_F16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
    *what = "a tensor";
    CgDesc x = nhwc(e, U_X, t, s->N, s->C, s->H, s->W, 0);
    const int64_t wd[4] = {s->K, s->C, s->R, s->S},
                  ws[4] = {(int64_t)s->R * s->S * s->C, 1, (int64_t)s->S * s->C, s->C};
    CgDesc w = part(e, cg_tensor_try(U_W, t, 4, wd, ws, 16, 0));
    CgDesc y = nhwc(e, U_Y, t, s->N, s->K, s->P, s->Q, 0);
    CgDesc acc = form == GRAPH_ACC ? nhwc(e, U_ACC, CUDNN_DATA_FLOAT, s->N, s->K, s->P, s->Q, 1)
                                   : y;
    CgDesc sqv = nhwc(e, U_SQV, CUDNN_DATA_FLOAT, s->N, s->K, s->P, s->Q, 1);
    const int64_t cd[4] = {1, s->K, 1, 1}, cs[4] = {s->K, 1, s->K, s->K};
    CgDesc sum = part(e, cg_tensor_try(U_SUM, CUDNN_DATA_FLOAT, 4, cd, cs, 16, 0));
    CgDesc sq = part(e, cg_tensor_try(U_SQ, CUDNN_DATA_FLOAT, 4, cd, cs, 16, 0));
    if (!x || !w || !acc || !y || !sqv || !sum || !sq) return NULL;
    const int64_t pad[2] = {s->pad_h, s->pad_w}, str[2] = {s->stride_h, s->stride_w},
                  dil[2] = {s->dil_h, s->dil_w};
    CgDesc conv = part(e, cg_conv_desc(2, pad, str, dil));
    CgDesc ops[5], pw = NULL, red = NULL;
    int n = 0;
    *what = "the convolution";
    if (!(ops[n++] = part(e, cg_conv_op_try(CG_FPROP, conv, x, w, acc, 1.0f, 0.0f)))) return NULL;
    if (form == GRAPH_ACC) {
        *what = "the identity that stores y";
        ops[n] = part(e, cg_pointwise_op(CUDNN_POINTWISE_IDENTITY, acc, NULL, y, &pw));
        part(e, pw);
        if (!ops[n++]) return NULL;
    }
    *what = "a deterministic reduction (cuDNN 9.11 or later)";
    ops[n] = part(e, cg_reduction_op(acc, sum, 2, &red));
    part(e, red);
    if (!ops[n++]) return NULL;
    *what = "the square";
    ops[n] = part(e, cg_pointwise_op(CUDNN_POINTWISE_MUL, acc, acc, sqv, &pw));
    part(e, pw);
    if (!ops[n++]) return NULL;
    *what = "a deterministic reduction (cuDNN 9.11 or later)";
    ops[n] = part(e, cg_reduction_op(sqv, sq, 2, &red));
    part(e, red);
    if (!ops[n++]) return NULL;
    *what = "the graph";
    return part(e, cg_graph(c->cudnn, ops, n, st));
}

/* ---- running it ---- */

static const int64_t cs_uids[5] = {U_X, U_W, U_Y, U_SUM, U_SQ};

/* The sums' buffer: sum at 0, sq at sq_off(K) floats (256-byte aligned
 * whatever K is: the graph declares 16-byte alignment). */
static size_t sq_off(int K) { return ((size_t)K + 63) / 64 * 64; }
static size_t sums_bytes(int K) { return 2 * sq_off(K) * sizeof(float); }

/* One fused run: the sums zeroed (whether the reductions overwrite or add,
 * they start from zero), the plan, then (mean, m2) from the sums. */
static void fused_run(Ctx *c, const CsEntry *e, void *y, float *mean, float *m2, const void *x,
                      const void *w, float *sums)
{
    const Conv2dShape *s = &e->s;
    CUDA_CHECK(cudaMemsetAsync(sums, 0, sums_bytes(s->K), c->stream));
    void *ptrs[5] = {(void *)x, (void *)w, y, sums, sums + sq_off(s->K)};
    cg_execute(c, &e->plan, cs_uids, ptrs, 5);
    size_t M = (size_t)s->N * s->P * s->Q;
    batchnorm_moments_from_sums_cuda(mean, m2, sums, sums + sq_off(s->K), M, (size_t)s->K,
                                     c->stream);
}

/* The separate way: the plain convolution (its own plan) and the moments. */
static void separate_run(Ctx *c, void *y, float *mean, float *m2, const void *x, const void *w,
                         DType dt, const Conv2dShape *s, void *scratch, size_t sb)
{
    conv2d_forward_cuda(c, y, x, w, dt, s);
    size_t M = (size_t)s->N * s->P * s->Q;
    batchnorm_moments_cuda(mean, m2, y, dt, M, (size_t)s->K, scratch, sb, c->stream);
}

/* Both ways timed as the step runs them (the fused one with its memset and
 * finishing kernel), interleaved: one untimed run of each (the separate
 * convolution's own search), then two rounds of three runs each way; the
 * smaller round of each. */
static void time_both(Ctx *c, const CsEntry *e, void *y, float *mean, float *m2, const void *x,
                      const void *w, float *fused_ms, float *sep_ms)
{
    const Conv2dShape *s = &e->s;
    size_t M = (size_t)s->N * s->P * s->Q, sb = batchnorm_scratch_bytes(M, (size_t)s->K);
    void *scratch = mem_alloc(c, sb);
    float *sums = mem_alloc(c, sums_bytes(s->K));
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    separate_run(c, y, mean, m2, x, w, e->dt, s, scratch, sb);
    fused_run(c, e, y, mean, m2, x, w, sums);
    *fused_ms = *sep_ms = -1.0f;
    for (int round = 0; round < 2; round++)
        for (int way = 0; way < 2; way++) {
            CUDA_CHECK(cudaEventRecord(e0, c->stream));
            for (int i = 0; i < 3; i++) {
                if (way)
                    fused_run(c, e, y, mean, m2, x, w, sums);
                else
                    separate_run(c, y, mean, m2, x, w, e->dt, s, scratch, sb);
            }
            CUDA_CHECK(cudaEventRecord(e1, c->stream));
            CUDA_CHECK(cudaEventSynchronize(e1));
            float ms = 0.0f;
            CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
            float *best = way ? fused_ms : sep_ms;
            if (*best < 0.0f || ms / 3.0f < *best) *best = ms / 3.0f;
        }
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    mem_free(c, sums, sums_bytes(s->K));
    mem_free(c, scratch, sb);
}

/* The first call of a shape and type: build (each form until one is
 * taken), search, time against the separate way, decide. */
static CsEntry *search(Ctx *c, CsCache *cc, void *y, float *mean, float *m2, const void *x,
                       const void *w, DType dt, const Conv2dShape *s, int forced)
{
    if (cc->n == cc->cap) {
        int cap = cc->cap ? 2 * cc->cap : 16;
        CsEntry *ne = realloc(cc->e, (size_t)cap * sizeof *ne);
        CT_ASSERT(ne != NULL, "conv_bn_cudnn: out of host memory for its plans");
        cc->e = ne;
        cc->cap = cap;
    }
    CsEntry *e = &cc->e[cc->n++];
    memset(e, 0, sizeof *e);
    e->s = *s;
    e->dt = dt;
    e->forced = forced;
    char shape[160];
    snprintf(shape, sizeof shape, "%s conv %dx%d/%d %d->%d at %dx%dx%d", dtype_name(dt), s->R,
             s->S, s->stride_h, s->C, s->K, s->N, s->H, s->W);
    CgRule rule = {0};
    rule.forbid_notes = CG_NOTE(CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION) |
                        CG_NOTE(CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC);
    rule.runtime_compile = 1;
    rule.max_candidates = CONV_STATS_CANDIDATES;
    rule.ws_limit = conv2d_cuda_search_ws_bytes(c);
    if (rule.ws_limit > CONV_STATS_MAX_WS) rule.ws_limit = CONV_STATS_MAX_WS;
    float *sums = mem_alloc(c, sums_bytes(s->K));
    void *ptrs[5] = {(void *)x, (void *)w, y, sums, sums + sq_off(s->K)};
    int ok = 0;
    for (int form = 0; form < GRAPH_FORMS && !ok; form++) {
        const char *what = "";
        cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
        CgDesc g = graph_build(c, e, form, &what, &st);
        if (g) ok = cg_search(c, g, &rule, cs_uids, ptrs, 5, &e->plan);
        if (!ok)
            LOG_I("conv + statistics, %s: form %d: %s (%s)", shape, form,
                  !g ? "cuDNN refuses" : "no engine ran it",
                  !g ? (st != CUDNN_STATUS_SUCCESS ? ct_cudnn_status_string(st) : what)
                     : "the candidates failed or none passed the rule");
        if (!ok) entry_free(e);
    }
    mem_free(c, sums, sums_bytes(s->K));
    if (!ok) {
        LOG_I("conv + statistics, %s: the convolution and a statistics pass run it", shape);
        return e;
    }
    float fused_ms, sep_ms;
    time_both(c, e, y, mean, m2, x, w, &fused_ms, &sep_ms);
    e->fused = forced || fused_ms < 0.97f * sep_ms;
    LOG_I("conv + statistics, %s: fused %.3f ms (engine %lld of %d candidates) against %.3f ms "
          "separate: %s", shape, (double)fused_ms, (long long)e->plan.engine, e->plan.tried,
          (double)sep_ms, e->fused ? "fused" : "separate");
    if (!e->fused) entry_free(e);
    return e;
}

int conv_bn_cudnn_conv_stats(Ctx *c, void *y, float *mean, float *m2, const void *x,
                             const void *w, DType dt, const Conv2dShape *s)
{
    CsCache *cc = cs_for(c);
    int use = cc->use >= 0 ? cc->use : conv_bn_cudnn_wanted();
    if (!use || (dt != DT_F16 && dt != DT_BF16)) return 0;
    if (((uintptr_t)x | (uintptr_t)w | (uintptr_t)y) & 15u) return 0;
    if ((size_t)s->N * s->H * s->W * s->C > 0x7fffffffu ||
        (size_t)s->N * s->P * s->Q * s->K > 0x7fffffffu)
        return 0;
    int forced = cc->use == 1;
    CsEntry *e = NULL;
    for (int i = 0; i < cc->n && !e; i++)
        if (cc->e[i].dt == dt && cc->e[i].forced == forced &&
            memcmp(&cc->e[i].s, s, sizeof *s) == 0)
            e = &cc->e[i];
    if (!e) e = search(c, cc, y, mean, m2, x, w, dt, s, forced);
    if (!e->fused) return 0;
    float *sums = mem_alloc(c, sums_bytes(s->K));
    fused_run(c, e, y, mean, m2, x, w, sums);
    mem_free(c, sums, sums_bytes(s->K));
    return 1;
}
#endif
