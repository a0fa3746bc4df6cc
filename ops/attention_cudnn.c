/* attention_cudnn.c — attention on cuDNN's fused flash-attention engines:
 * the graph builders (shared with scripts/cudnn_sdpa_probe.c) and the op
 * layer's plans and calls (the contract, the math forward and backward side
 * by side, and the form rules are in attention_cudnn.h).
 *
 * The graphs, op by op as cudnn-frontend's composite SDPA nodes give them to
 * cuDNN 9's runtime fused-attention engines (virtual tensors f32 unless said):
 *   forward   S = Q K^T * scale [+ bias]; softmax as row max, sub, exp, row
 *             sum, log, add (stats = max + log sum exp, stored f32) and div:
 *             P in the data type, or f32 then P * mask(Bernoulli 1-p) * 1/(1-p)
 *             in the data type; O = P V
 *   backward  Dk = rowsum(dO * O) * (1-p) stored f32 (a buffer); P = exp(S -
 *             stats) recomputed, [* mask * 1/(1-p)], reshaped to P^T in the
 *             data type; dV = P^T dO; dS = (dO V^T [* mask] - Dk) * P
 *             [* 1/(1-p)] * scale; dK = (dS^T in the data type) Q; dQ = dS K
 *             (K a reshape of K^T) written by the matmul (the deterministic
 *             form), or through an f32 accumulator and an identity.
 *
 * The op layer's plans: one entry per (shape, type, layout, mask or not, p,
 * direction) in a cache registered with the context (as the batch-norm
 * forms of batchnorm_cudnn.c), each allocated on its own so that the
 * by-value scalars the variant packs point at stay put. An entry holds the
 * first form cuDNN planned (in order: the f32 bias, then the bias in the
 * data type; cuDNN 9's form, then 8.9's reordering; for the backward dQ
 * direct, then the accumulator), or the refusal, logged once. Calls after
 * the first are a lookup, the seed / offset kernel, a variant pack and one
 * execution on c->stream: capturable.
 */
#include "attention_cudnn.h"

#ifdef CTRAIN_CUDA
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dropout_mask.h"
#include "engine/error.h"
#include "engine/kernels.h"
#include "engine/log.h"
#include "engine/mem.h"

/* ---- the graph builders ---- */

/* d kept (an operation also goes into the graph), or the refusal noted. */
static CgDesc add(SdpaGraph *g, CgDesc d, const char *what, int is_op)
{
    if (!d) {
        if (!g->refused) g->refused = what;
        return NULL;
    }
    CT_ASSERT(g->nkeep < SDPA_NKEEP && g->nops < SDPA_NOPS, "attention_cudnn: a graph too large");
    g->keep[g->nkeep++] = d;
    if (is_op) g->ops[g->nops++] = d;
    return d;
}

enum { L_QKV, L_QKV_T, L_SS, L_SS_T, L_ROW, L_BHSD, L_BIAS, L_IN, L_IN_T };

/* dims and strides in cuDNN's [b, h, s, d] order: L_QKV q, k, v, out and
 * their gradients as the shape lays them out ([B, T, H, Dh] or [B, H, T,
 * Dh]); L_QKV_T its transpose [B, H, Dh, T] (K^T, V^T); L_SS the scores [B,
 * H, T, T]; L_SS_T their transpose; L_ROW [B, H, T, 1]; L_BHSD a packed [B,
 * H, T, Dh]; L_BIAS the key mask [B, 1, T, T], the [B, T] rows seen with
 * stride 0 along the queries: as [B, 1, 1, T] (broadcast) cuDNN 9.14's
 * forward is right but its backward is not (~100% off, no refusal; H100,
 * the probe and tests/gpu_attention_cudnn), and cudnn-frontend documents
 * the bias as (1 or b, 1 or h, s_q, s_kv). L_IN, L_IN_T: L_QKV, L_QKV_T for
 * q, k, v and their gradients, whose token stride is the shape's ld when
 * it has one (a [B, T, 3, H, Dh] projection read in place). */
static void layout(const SdpaShape *s, int l, int64_t *d, int64_t *st)
{
    const int64_t B = s->B, H = s->H, T = s->T, D = s->D;
    const int64_t hs = s->bthd ? D : T * D, ts = s->bthd ? H * D : D;   /* head, token strides */
    const int64_t is = s->bthd && s->ld ? s->ld : ts;                  /* the inputs' */
    const int64_t ib = s->bthd && s->ld ? T * s->ld : T * H * D;       /* their batch stride */
    const int64_t dims[9][4] = {{B, H, T, D}, {B, H, D, T}, {B, H, T, T}, {B, H, T, T},
                                {B, H, T, 1}, {B, H, T, D}, {B, 1, T, T}, {B, H, T, D},
                                {B, H, D, T}};
    const int64_t str[9][4] = {{T * H * D, hs, ts, 1},   {T * H * D, hs, 1, ts},
                               {H * T * T, T * T, T, 1}, {H * T * T, T * T, 1, T},
                               {H * T, T, 1, 1},         {H * T * D, T * D, D, 1},
                               {T, T, 0, 1},             {ib, hs, is, 1},
                               {ib, hs, 1, is}};
    memcpy(d, dims[l], sizeof dims[l]);
    memcpy(st, str[l], sizeof str[l]);
}

/* A tensor of layout l and type t: the variant pack's under uid, or
 * virtual (a fresh uid) when uid is 0. */
static CgDesc ten(SdpaGraph *g, const SdpaShape *s, int l, int64_t uid, cudnnDataType_t t,
                  int flags)
{
    int64_t d[4], st[4];
    layout(s, l, d, st);
    const int real = uid != 0;
    if (!real) {
        flags |= CG_VIRTUAL;
        uid = SDPA_U_VIRT + g->next_virtual++;
    }
    CgDesc x = add(g, cg_tensor_ex_try(uid, t, 4, d, st, 16, flags), "a tensor", 0);
    if (x && real) {
        CT_ASSERT(g->nio < SDPA_NIO, "attention_cudnn: too many tensors");
        g->uids[g->nio++] = uid;
    }
    return x;
}

/* A virtual f32 tensor of layout l. */
static CgDesc vf(SdpaGraph *g, const SdpaShape *s, int l)
{
    return ten(g, s, l, 0, CUDNN_DATA_FLOAT, 0);
}

/* A [1, 1, 1, 1] tensor: by value (a host pointer in the pack) or in device memory. */
static CgDesc scalar(SdpaGraph *g, int64_t uid, cudnnDataType_t t, int by_value)
{
    CgDesc x = add(g, cg_scalar_try(uid, t, by_value), "a scalar tensor", 0);
    if (x) {
        CT_ASSERT(g->nio < SDPA_NIO, "attention_cudnn: too many tensors");
        g->uids[g->nio++] = uid;
    }
    return x;
}

/* y = op(x[, x2]) in f32 math; returns y. */
static CgDesc pw(SdpaGraph *g, int mode, CgDesc x, CgDesc x2, CgDesc y, const char *what)
{
    CgDesc d = NULL;
    add(g, cg_pointwise_op3(mode, CUDNN_DATA_FLOAT, -1, x, x2, NULL, y, &d), what, 1);
    if (d) add(g, d, "a pointwise descriptor", 0);
    return y;
}

static CgDesc mm(SdpaGraph *g, CgDesc a, CgDesc x, CgDesc y, const char *what)
{
    CgDesc d = NULL;
    add(g, cg_matmul_op(a, x, y, &d), what, 1);
    if (d) add(g, d, "a matmul descriptor", 0);
    return y;
}

static CgDesc red(SdpaGraph *g, int mode, CgDesc x, CgDesc y, const char *what)
{
    CgDesc d = NULL;
    add(g, cg_reduction_op_mode(mode, x, y, 0, &d), what, 1);
    if (d) add(g, d, "a reduction descriptor", 0);
    return y;
}

static CgDesc reshape(SdpaGraph *g, CgDesc x, CgDesc y, const char *what)
{
    add(g, cg_reshape_op(x, y), what, 1);
    return y;
}

/* The dropout mask: Bernoulli(1 - p) draws from the seed and offset. */
static CgDesc rng_mask(SdpaGraph *g, const SdpaShape *s)
{
    CgDesc seed = scalar(g, SDPA_U_SEED, CUDNN_DATA_INT64, 0);
    CgDesc off = scalar(g, SDPA_U_OFFSET, CUDNN_DATA_INT64, 0);
    CgDesc r = g->form.rng_dump ? ten(g, s, L_SS, SDPA_U_RNG_DUMP, CUDNN_DATA_FLOAT, 0)
                                : vf(g, s, L_SS);
    CgDesc d = NULL;
    add(g, cg_rng_op(1.0 - (double)g->form.p, seed, off, r, &d), "RNG operation (dropout mask)",
        1);
    if (d) add(g, d, "an RNG descriptor", 0);
    return r;
}

/* S = Q K^T * scale [+ bias], f32. */
static CgDesc scores(SdpaGraph *g, const SdpaShape *s, CgDesc q, CgDesc kt, CgDesc scale)
{
    CgDesc x = mm(g, q, kt, vf(g, s, L_SS), "matmul Q K^T");
    x = pw(g, CUDNN_POINTWISE_MUL, x, scale, vf(g, s, L_SS), "pointwise mul (scale)");
    if (g->form.mask) {
        const cudnnDataType_t bt = g->form.mask == SDPA_MASK_DT ? s->ct : CUDNN_DATA_FLOAT;
        CgDesc bias = ten(g, s, L_BIAS, SDPA_U_BIAS, bt, 0);
        x = pw(g, CUDNN_POINTWISE_ADD, x, bias, vf(g, s, L_SS), "pointwise add (bias: key mask)");
    }
    return x;
}

/* The dropout mask: drawn by cuDNN (rng_mask), or the drop_in form's input. */
static CgDesc drop_mask(SdpaGraph *g, const SdpaShape *s)
{
    return g->form.drop_in ? ten(g, s, L_SS, SDPA_U_DMASK, s->ct, 0) : rng_mask(g, s);
}

static void build_fwd(SdpaGraph *g, const SdpaShape *s)
{
    const cudnnDataType_t F = CUDNN_DATA_FLOAT, t = s->ct;
    const int reorder = g->form.legacy ? CG_REORDER_F16x16 : 0, drop = g->form.p > 0.0f;
    CgDesc q = ten(g, s, L_IN, SDPA_U_Q, t, 0), kt = ten(g, s, L_IN_T, SDPA_U_K, t, 0);
    CgDesc v = ten(g, s, L_IN, SDPA_U_V, t, 0);
    CgDesc x = scores(g, s, q, kt, scalar(g, SDPA_U_SCALE, F, 1));
    CgDesc m = red(g, CUDNN_REDUCE_TENSOR_MAX, x, vf(g, s, L_ROW), "reduction (row max)");
    CgDesc e = pw(g, CUDNN_POINTWISE_SUB, x, m, vf(g, s, L_SS), "pointwise sub (max)");
    e = pw(g, CUDNN_POINTWISE_EXP, e, NULL, vf(g, s, L_SS), "pointwise exp");
    CgDesc z = red(g, CUDNN_REDUCE_TENSOR_ADD, e, vf(g, s, L_ROW), "reduction (row sum)");
    CgDesc lz = pw(g, CUDNN_POINTWISE_LOG, z, NULL, vf(g, s, L_ROW), "pointwise log");
    pw(g, CUDNN_POINTWISE_ADD, m, lz, ten(g, s, L_ROW, SDPA_U_STATS, F, 0),
       "pointwise add (stats)");
    CgDesc pr = pw(g, CUDNN_POINTWISE_DIV, e, z, ten(g, s, L_SS, 0, drop ? F : t, reorder),
                   "pointwise div (softmax)");
    if (drop) {
        CgDesc r = drop_mask(g, s);
        pr = pw(g, CUDNN_POINTWISE_MUL, pr, r, ten(g, s, L_SS, 0, F, reorder),
                "pointwise mul (dropout mask)");
        pr = pw(g, CUDNN_POINTWISE_MUL, pr, scalar(g, SDPA_U_DSCALE, F, 1),
                ten(g, s, L_SS, 0, t, 0), "pointwise mul (dropout scale)");
    }
    mm(g, pr, v, ten(g, s, L_QKV, SDPA_U_O, t, 0), "matmul P V");
}

static void build_bwd(SdpaGraph *g, const SdpaShape *s)
{
    const cudnnDataType_t F = CUDNN_DATA_FLOAT, t = s->ct;
    const int reorder = g->form.legacy ? CG_REORDER_F16x16 : 0, drop = g->form.p > 0.0f;
    CgDesc q = ten(g, s, L_IN, SDPA_U_Q, t, 0), kt = ten(g, s, L_IN_T, SDPA_U_K, t, 0);
    CgDesc vt = ten(g, s, L_IN_T, SDPA_U_V, t, 0), o = ten(g, s, L_QKV, SDPA_U_O, t, 0);
    CgDesc d_o = ten(g, s, L_QKV, SDPA_U_DO, t, 0);
    CgDesc stats = ten(g, s, L_ROW, SDPA_U_STATS, F, 0);
    CgDesc scale = scalar(g, SDPA_U_SCALE, F, 1);
    CgDesc dscale = drop ? scalar(g, SDPA_U_DSCALE, F, 1) : NULL;
    CgDesc r = drop ? drop_mask(g, s) : NULL;
    /* Dk = rowsum(dO * O) * (1 - p): the softmax backward's row term */
    CgDesc x = pw(g, CUDNN_POINTWISE_MUL, d_o, o, vf(g, s, L_QKV), "pointwise mul (dO O)");
    x = red(g, CUDNN_REDUCE_TENSOR_ADD, x, vf(g, s, L_ROW), "reduction (rowsum dO O)");
    CgDesc dsum = pw(g, CUDNN_POINTWISE_MUL, x, scalar(g, SDPA_U_KEEP, F, 1),
                     ten(g, s, L_ROW, SDPA_U_SUM, F, 0), "pointwise mul (1 - p)");
    /* P recomputed from the stats; dV = P_d^T dO */
    CgDesc e = pw(g, CUDNN_POINTWISE_SUB, scores(g, s, q, kt, scale), stats, vf(g, s, L_SS),
                  "pointwise sub (stats)");
    e = pw(g, CUDNN_POINTWISE_EXP, e, NULL, vf(g, s, L_SS), "pointwise exp");
    CgDesc pd = e;
    if (drop) {
        pd = pw(g, CUDNN_POINTWISE_MUL, e, r, ten(g, s, L_SS, 0, F, reorder),
                "pointwise mul (dropout mask)");
        pd = pw(g, CUDNN_POINTWISE_MUL, pd, dscale, vf(g, s, L_SS),
                "pointwise mul (dropout scale)");
    }
    pd = reshape(g, pd, ten(g, s, L_SS_T, 0, t, 0), "reshape (P^T)");
    mm(g, pd, d_o, ten(g, s, L_IN, SDPA_U_DV, t, 0), "matmul P^T dO");
    /* dS = (dO V^T [* mask] - Dk) * P [* 1/(1-p)] * scale */
    CgDesc ds = mm(g, d_o, vt, vf(g, s, L_SS), "matmul dO V^T");
    if (drop) ds = pw(g, CUDNN_POINTWISE_MUL, ds, r, vf(g, s, L_SS), "pointwise mul (dP mask)");
    ds = pw(g, CUDNN_POINTWISE_SUB, ds, dsum, vf(g, s, L_SS), "pointwise sub (Dk)");
    ds = pw(g, CUDNN_POINTWISE_MUL, ds, e, vf(g, s, L_SS), "pointwise mul (P)");
    if (drop)
        ds = pw(g, CUDNN_POINTWISE_MUL, ds, dscale, vf(g, s, L_SS), "pointwise mul (dS dropout)");
    ds = pw(g, CUDNN_POINTWISE_MUL, ds, scale, vf(g, s, L_SS), "pointwise mul (dS scale)");
    CgDesc dst = reshape(g, ds, ten(g, s, L_SS_T, 0, t, 0), "reshape (dS^T)");
    mm(g, dst, q, ten(g, s, L_IN, SDPA_U_DK, t, 0), "matmul dS^T Q");
    CgDesc k = reshape(g, kt, ten(g, s, L_IN, 0, t, 0), "reshape (K^T to K)");
    CgDesc dq = ten(g, s, L_IN, SDPA_U_DQ, t, 0);
    if (g->form.accum) {
        CgDesc acc = ten(g, s, L_BHSD, SDPA_U_DQACC, F, reorder);
        pw(g, CUDNN_POINTWISE_IDENTITY, mm(g, ds, k, acc, "matmul dS K (f32 accumulator)"), NULL,
           dq, "pointwise identity (dQ)");
    } else {
        mm(g, ds, k, dq, "matmul dS K");
    }
}

int sdpa_build(SdpaGraph *g, const SdpaShape *s, int bwd, const SdpaForm *f)
{
    memset(g, 0, sizeof *g);
    g->bwd = bwd;
    g->form = *f;
    g->scale = 1.0f / sqrtf((float)s->D);
    g->keep_p = 1.0f - f->p;
    g->dscale = f->p > 0.0f ? 1.0f / (1.0f - f->p) : 1.0f;
    if (f->drop_in && f->p > 0.0f) { /* ctrain's mask: the rate it draws (ops/dropout_mask.h) */
        g->keep_p = (float)(256u - drop_threshold(f->p)) / 256.0f;
        g->dscale = drop_scale(f->p);
    }
    if (bwd) build_bwd(g, s);
    else build_fwd(g, s);
    return g->refused == NULL;
}

cudnnStatus_t sdpa_finalize(SdpaGraph *g, cudnnHandle_t h)
{
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    g->graph = cg_graph(h, g->ops, g->nops, &st);
    return st;
}

int sdpa_plan(Ctx *c, SdpaGraph *g, int max_candidates, size_t ws_limit, int allow_nondet,
              CgCandidate *cand, int max_cand, int *ncand)
{
    CgRule rule = {0};
    rule.runtime_compile = 1;
    rule.max_candidates = max_candidates;
    rule.ws_limit = ws_limit;
    /* ctrain's rule: a deterministic backward */
    rule.forbid_notes = allow_nondet ? 0 : CG_NOTE(CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC);
    return cg_first_plan(c, g->graph, &rule, &g->plan, cand, max_cand, ncand);
}

void sdpa_free(SdpaGraph *g)
{
    cg_plan_free(&g->plan);
    cg_destroy(g->graph);
    for (int i = g->nkeep - 1; i >= 0; i--) cg_destroy(g->keep[i]);
    memset(g, 0, sizeof *g);
}

void sdpa_pointers(SdpaGraph *g, const SdpaBufs *b, void **ptrs)
{
    for (int i = 0; i < g->nio; i++) {
        const void *p = NULL;
        switch (g->uids[i]) {
        case SDPA_U_Q: p = b->q; break;
        case SDPA_U_K: p = b->k; break;
        case SDPA_U_V: p = b->v; break;
        case SDPA_U_O: p = b->o; break;
        case SDPA_U_STATS: p = b->stats; break;
        case SDPA_U_BIAS: p = b->bias; break;
        case SDPA_U_SEED: p = b->seed; break;
        case SDPA_U_OFFSET: p = b->offset; break;
        case SDPA_U_SCALE: p = &g->scale; break;
        case SDPA_U_DSCALE: p = &g->dscale; break;
        case SDPA_U_KEEP: p = &g->keep_p; break;
        case SDPA_U_DO: p = b->dout; break;
        case SDPA_U_DQ: p = b->dq; break;
        case SDPA_U_DK: p = b->dk; break;
        case SDPA_U_DV: p = b->dv; break;
        case SDPA_U_SUM: p = b->sum; break;
        case SDPA_U_DQACC: p = b->dqacc; break;
        case SDPA_U_DMASK: p = b->dmask; break;
        case SDPA_U_RNG_DUMP: p = b->rng_dump; break;
        default: CT_ASSERT(0, "attention_cudnn: uid %lld has no buffer", (long long)g->uids[i]);
        }
        CT_ASSERT(p != NULL, "attention_cudnn: no buffer for uid %lld", (long long)g->uids[i]);
        ptrs[i] = (void *)p;
    }
}

/* ---- the op layer's plans ---- */

#define AC_CANDIDATES 4                    /* plan attempts a form (each may compile: seconds) */
#define AC_WS_LIMIT ((size_t)1 << 30)      /* the most workspace a plan may ask */

typedef struct {
    SdpaShape s;
    DType dt;
    int has_mask, bwd;
    float p;
    int usable;        /* 1: g holds the plan of the first form cuDNN took; 0: declined */
    SdpaGraph g;       /* in the entry's own allocation: the pack's scalars stay put */
} AcEntry;

typedef struct {
    AcEntry **e;
    int n, cap;
    long fwd_runs, bwd_runs;
} AcCache;

static void ac_release(Ctx *c, void *obj)
{
    (void)c;
    AcCache *ac = (AcCache *)obj;
    for (int i = 0; i < ac->n; i++) {
        sdpa_free(&ac->e[i]->g);
        free(ac->e[i]);
    }
    free(ac->e);
    free(ac);
}

static const CtxCacheKind ac_kind = {"cuDNN attention plans", ac_release};

static AcCache *ac_for(Ctx *c)
{
    AcCache *ac = (AcCache *)ctx_cache_get(c, &ac_kind);
    if (!ac) {
        ac = calloc(1, sizeof *ac);
        CT_ASSERT(ac != NULL, "attention_cudnn: out of host memory for its plans");
        ctx_cache_set(c, &ac_kind, ac);
    }
    return ac;
}

void attention_cudnn_runs(Ctx *c, long *fwd, long *bwd)
{
    AcCache *ac = ac_for(c);
    *fwd = ac->fwd_runs;
    *bwd = ac->bwd_runs;
}

static SdpaShape ac_shape(DType dt, size_t B, size_t H, size_t T, size_t Dh, int bthd, size_t ld)
{
    SdpaShape s = {(int64_t)B, (int64_t)H, (int64_t)T, (int64_t)Dh,
                   dt == DT_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF, bthd != 0,
                   bthd && ld != H * Dh ? (int64_t)ld : 0};
    return s;
}

static const char *ac_mask_name(int mask)
{
    return mask == SDPA_MASK_NONE ? "no mask" : mask == SDPA_MASK_F32 ? "bias f32"
                                                                      : "bias in the data type";
}

/* The first form of e's direction that cuDNN plans, into e->g; 0 with
 * why (the preferred form's refusal) when none. */
static int ac_build(Ctx *c, AcEntry *e, char *why, size_t len)
{
    const int nm = e->has_mask ? 2 : 1, na = e->bwd ? 2 : 1;
    int tried = 0;
    for (int a = 0; a < na; a++)
        for (int m = 0; m < nm; m++)
            for (int l = 0; l < 2; l++) {
                SdpaForm f = {e->p, e->has_mask ? SDPA_MASK_F32 + m : SDPA_MASK_NONE, l, a, 0,
                              0};
                char r[160];
                cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
                CgCandidate k[16];
                int nk = 0, forbidden = 0;
                if (!sdpa_build(&e->g, &e->s, e->bwd, &f)) {
                    snprintf(r, sizeof r, "took no %s", e->g.refused);
                } else if ((st = sdpa_finalize(&e->g, c->cudnn)) != CUDNN_STATUS_SUCCESS) {
                    snprintf(r, sizeof r, "graph declined: %s", cudnnGetErrorString(st));
                } else if (sdpa_plan(c, &e->g, AC_CANDIDATES, AC_WS_LIMIT, 0, k, 16, &nk)) {
                    LOG_D("attention: cuDNN %s graph in form (%s, %s%s): engine %lld, workspace "
                          "%zu bytes", e->bwd ? "backward" : "forward", ac_mask_name(f.mask),
                          l ? "cuDNN 8.9's reordering" : "cuDNN 9's form",
                          !e->bwd ? "" : a ? ", dQ via f32 accumulator" : ", dQ direct",
                          (long long)e->g.plan.engine, e->g.plan.ws_bytes);
                    return 1;
                } else {
                    for (int i = 0; i < nk; i++) forbidden |= k[i].skipped == CG_SKIP_NOTE;
                    snprintf(r, sizeof r, "%s", forbidden ? "only non-deterministic engines "
                                                            "take it" : "no engine planned it");
                }
                if (!tried++) snprintf(why, len, "%s, %s: %s", ac_mask_name(f.mask),
                                       e->bwd ? "dQ direct" : "cuDNN 9's form", r);
                sdpa_free(&e->g);
            }
    if (tried > 1) {
        const size_t at = strlen(why);
        snprintf(why + at, len - at, "; %d other forms refused too", tried - 1);
    }
    return 0;
}

static AcEntry *ac_find(AcCache *ac, const SdpaShape *s, DType dt, int has_mask, float p,
                        int bwd)
{
    for (int i = 0; i < ac->n; i++) {
        AcEntry *e = ac->e[i];
        if (e->dt == dt && e->s.B == s->B && e->s.H == s->H && e->s.T == s->T &&
            e->s.D == s->D && e->s.bthd == s->bthd && e->s.ld == s->ld &&
            e->has_mask == has_mask && e->p == p &&
            e->bwd == bwd)
            return e;
    }
    return NULL;
}

/* The entry of this key: found, or built and kept (the refusal too, logged
 * once); NULL inside a capture for a key not seen before (nothing built). */
static AcEntry *ac_get(Ctx *c, const SdpaShape *s, DType dt, int has_mask, float p, int bwd)
{
    AcCache *ac = ac_for(c);
    AcEntry *e = ac_find(ac, s, dt, has_mask, p, bwd);
    if (e || c->capturing) return e;
    if (ac->n == ac->cap) {
        const int cap = ac->cap ? 2 * ac->cap : 16;
        AcEntry **grown = realloc(ac->e, sizeof *grown * (size_t)cap);
        CT_ASSERT(grown != NULL, "attention_cudnn: out of host memory for %d plans", cap);
        ac->e = grown;
        ac->cap = cap;
    }
    e = calloc(1, sizeof *e);
    CT_ASSERT(e != NULL, "attention_cudnn: out of host memory for a plan");
    e->s = *s;
    e->dt = dt;
    e->has_mask = has_mask;
    e->p = p;
    e->bwd = bwd;
    char why[320] = "";
    e->usable = ac_build(c, e, why, sizeof why);
    if (!e->usable)
        LOG_I("attention: cuDNN declines the %s of %s [B %lld, H %lld, T %lld, Dh %lld]%s, "
              "p %g (%s); the default kernels run it", bwd ? "backward" : "forward",
              dtype_name(dt), (long long)s->B, (long long)s->H, (long long)s->T,
              (long long)s->D, has_mask ? " with the key mask" : "", (double)p, why);
    ac->e[ac->n++] = e;
    return e;
}

int attention_cudnn_ready(Ctx *c, DType dt, size_t B, size_t H, size_t T, size_t Dh, int bthd,
                          size_t ld, int has_mask, float p)
{
    if ((dt != DT_F16 && dt != DT_BF16) || !(p >= 0.0f && p < 1.0f)) return 0;
    const SdpaShape s = ac_shape(dt, B, H, T, Dh, bthd, ld);
    has_mask = has_mask != 0;
    AcEntry *f = ac_get(c, &s, dt, has_mask, p, 0);
    if (!f || !f->usable) return 0;
    AcEntry *b = ac_get(c, &s, dt, has_mask, p, 1);
    return b && b->usable;
}

/* The usable entry of a call that attention_cudnn_ready answered 1 for. */
static AcEntry *ac_entry(Ctx *c, DType dt, size_t B, size_t H, size_t T, size_t Dh, int bthd,
                         size_t ld, int has_mask, float p, int bwd)
{
    const SdpaShape s = ac_shape(dt, B, H, T, Dh, bthd, ld);
    AcEntry *e = ac_find(ac_for(c), &s, dt, has_mask != 0, p, bwd);
    CT_ASSERT(e && e->usable, "attention_cudnn: no %s plan for this call "
              "(attention_cudnn_ready first)", bwd ? "backward" : "forward");
    return e;
}

/* One call's temporaries from the pool: the seed and offset (p > 0,
 * written now on the stream), the mask in the data type (when the entry's
 * form takes it so), freed after the execution is queued. */
typedef struct {
    int64_t *rng;
    void *bias;
    size_t bias_bytes;
} AcTemps;

static void ac_temps(Ctx *c, const AcEntry *e, const float *mask, uint64_t seed,
                     uint64_t offset, SdpaBufs *b, AcTemps *t)
{
    memset(t, 0, sizeof *t);
    if (e->p > 0.0f) {
        t->rng = (int64_t *)mem_alloc(c, 2 * sizeof(int64_t));
        attention_cudnn_rng_cuda(t->rng, seed, offset, c->rng_base, c->stream);
        b->seed = t->rng;
        b->offset = t->rng + 1;
    }
    b->bias = mask;
    if (mask && e->g.form.mask == SDPA_MASK_DT) {
        const size_t n = (size_t)e->s.B * (size_t)e->s.T;
        t->bias_bytes = n * dtype_size(e->dt);
        t->bias = mem_alloc(c, t->bias_bytes);
        cast_cuda(t->bias, e->dt, mask, DT_F32, n, 0, c->stream);
        b->bias = t->bias;
    }
}

static void ac_temps_free(Ctx *c, AcTemps *t)
{
    if (t->rng) mem_free(c, t->rng, 2 * sizeof(int64_t));
    if (t->bias) mem_free(c, t->bias, t->bias_bytes);
}

/* One execution of e's plan on b (a variant pack for this call, the
 * context's workspace); cuDNN's status. */
static cudnnStatus_t ac_run(Ctx *c, AcEntry *e, const SdpaBufs *b)
{
    void *ptrs[SDPA_NIO];
    sdpa_pointers(&e->g, b, ptrs);
    return cg_execute_try(c, &e->g.plan, e->g.uids, ptrs, e->g.nio);
}

int attention_cudnn_forward(Ctx *c, void *out, float *stats, const void *q, const void *k,
                            const void *v, const float *mask, DType dt, float p, uint64_t seed,
                            uint64_t offset, size_t B, size_t H, size_t T, size_t Dh, int bthd,
                            size_t ld)
{
    AcEntry *e = ac_entry(c, dt, B, H, T, Dh, bthd, ld, mask != NULL, p, 0);
    SdpaBufs b = {.q = q, .k = k, .v = v, .o = out, .stats = stats};
    AcTemps t;
    ac_temps(c, e, mask, seed, offset, &b, &t);
    const cudnnStatus_t st = ac_run(c, e, &b);
    ac_temps_free(c, &t);
    if (st != CUDNN_STATUS_SUCCESS) {
        e->usable = 0;   /* from here on the default kernels */
        LOG_I("attention: cuDNN refuses to run its forward of %s [B %zu, H %zu, T %zu, Dh %zu] "
              "(%s); the default kernels run it", dtype_name(dt), B, H, T, Dh,
              cudnnGetErrorString(st));
        return 0;
    }
    ac_for(c)->fwd_runs++;
    return 1;
}

void attention_cudnn_backward(Ctx *c, void *dq, void *dk, void *dv, const void *dout,
                              const void *q, const void *k, const void *v, const void *out,
                              const float *stats, const float *mask, DType dt, float p,
                              uint64_t seed, uint64_t offset, size_t B, size_t H, size_t T,
                              size_t Dh, int accum_q, int accum_k, int accum_v, int bthd,
                              size_t ld)
{
    AcEntry *e = ac_entry(c, dt, B, H, T, Dh, bthd, ld, mask != NULL, p, 1);
    const size_t n = B * H * T * Dh, bytes = n * dtype_size(dt), rows = B * H * T;
    void *dst[3] = {dq, dk, dv}, *tmp[3] = {NULL, NULL, NULL}, *res[3];
    const int acc[3] = {accum_q, accum_k, accum_v};
    for (int i = 0; e->s.ld && i < 3; i++)   /* strided: no temporary could stand in */
        CT_ASSERT(dst[i] && !acc[i] && (uintptr_t)dst[i] % 16 == 0,
                  "attention_cudnn_backward: strided dq, dk, dv must all be wanted, written "
                  "and 16-byte aligned");
    /* cuDNN writes all three, 16-byte aligned: a gradient that adds, is not
     * wanted or sits off that alignment gets a temporary */
    for (int i = 0; i < 3; i++) {
        if (!dst[i] || acc[i] || (uintptr_t)dst[i] % 16) tmp[i] = mem_alloc(c, bytes);
        res[i] = tmp[i] ? tmp[i] : dst[i];
    }
    void *dout_a = (uintptr_t)dout % 16 ? mem_alloc(c, bytes) : NULL;
    if (dout_a) cast_cuda(dout_a, dt, dout, dt, n, 0, c->stream);
    float *sum = (float *)mem_alloc(c, rows * sizeof(float));
    float *dqacc = e->g.form.accum ? (float *)mem_alloc(c, n * sizeof(float)) : NULL;
    if (dqacc) mem_zero(c, dqacc, n * sizeof(float));
    SdpaBufs b = {.q = q, .k = k, .v = v, .dout = dout_a ? dout_a : dout, .o = (void *)out,
                  .dq = res[0], .dk = res[1], .dv = res[2], .stats = (float *)stats,
                  .sum = sum, .dqacc = dqacc};
    AcTemps t;
    ac_temps(c, e, mask, seed, offset, &b, &t);
    const cudnnStatus_t st = ac_run(c, e, &b);
    if (st != CUDNN_STATUS_SUCCESS)
        ct_fatal_hint("set CTRAIN_ATTN=flash to train on the fused kernels",
                      "attention: cuDNN refuses to run the backward of %s [B %zu, H %zu, T %zu, "
                      "Dh %zu] whose plan it made (%s); its forward ran on cuDNN, whose mask and "
                      "statistics no other backward reads", dtype_name(dt), B, H, T, Dh,
                      cudnnGetErrorString(st));
    ac_temps_free(c, &t);
    for (int i = 0; i < 3; i++) {
        if (tmp[i] && dst[i]) cast_cuda(dst[i], dt, tmp[i], dt, n, acc[i], c->stream);
        if (tmp[i]) mem_free(c, tmp[i], bytes);
    }
    if (dout_a) mem_free(c, dout_a, bytes);
    mem_free(c, sum, rows * sizeof(float));
    if (dqacc) mem_free(c, dqacc, n * sizeof(float));
    ac_for(c)->bwd_runs++;
}

#else
typedef int ct_attention_cudnn_unused_; /* ISO C forbids an empty translation unit */
#endif
