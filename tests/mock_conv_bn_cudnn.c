/* mock_conv_bn_cudnn.c — ops/conv_bn_cudnn.c (the conv + batch-norm unit's
 * cuDNN fused graphs) run without a GPU: the file is included whole, and
 * everything it calls is stood in for here — the graph layer
 * (ops/cudnn_graph.h), the CUDA runtime, the batch-norm and convolution
 * launchers, the context's caches, the settings, the plan store — by mocks
 * that check what the code asks of them:
 *   - every graph's wiring: unique uids, each virtual tensor made once and
 *     read, a stored tensor made at most once, operand shapes that fit
 *     (convolution directions, per-channel vectors, broadcasts);
 *   - every variant pack (search and execution) against its graph: exactly
 *     the stored tensors, once each, 16-byte aligned, inside a live buffer
 *     of the right type, no two overlapping;
 *   - every kernel's buffers in bounds, scratch large enough;
 *   - descriptors destroyed exactly once, device buffers all freed;
 *   - the search's decisions: the fastest form taken, only_form obeyed,
 *     refusals, forms without engines and workspace drops handled, forced
 *     and timed verdicts, kept verdicts taken back by a second context
 *     without a search (and searched again when refused then).
 * Over 6 cuDNN behaviours x 3 shapes x f16 / bf16 x forced or timed x every
 * form alone or all, each in two contexts, plus a context that outgrows the
 * entry cache and a misaligned statistics pointer. What cuDNN really takes
 * and the values it computes are for tests/gpu_conv_bn.c on a GPU.
 * Built in CUDA builds only (it needs cuDNN's headers, not its library);
 * it runs on the CPU with make test. */
#include "ops/conv_bn_cudnn.c"

#include <stdarg.h>
#include <stdio.h>

#include "tests/check.h"

static int verbose = 0;
static int failures = 0;
#define FAIL(...)                                                                                  \
    do {                                                                                           \
        failures++;                                                                                \
        fprintf(stderr, "FAIL %s:%d: ", __func__, __LINE__);                                       \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
    } while (0)

/* ---------- buffers ---------- */
typedef struct {
    char *p;
    size_t n;
    int live;
    int dt;
    const char *what;
} Buf; /* dt -1: untyped */
static Buf bufs[100000];
static int nbufs;
static size_t live_bytes;
static void *balloc(size_t n, const char *what, int dt)
{
    size_t alloc = (n + 255) / 256 * 256;
    if (!alloc) alloc = 256;
    char *p = aligned_alloc(256, alloc);
    memset(p, 0x7f, alloc);
    bufs[nbufs++] = (Buf){p, n, 1, dt, what};
    live_bytes += n;
    return p;
}
static void bfree(void *p, size_t n)
{
    for (int i = nbufs - 1; i >= 0; i--)
        if (bufs[i].p == p && bufs[i].live) {
            if (bufs[i].n != n)
                FAIL("free of %s with %zu bytes, allocated %zu", bufs[i].what, n, bufs[i].n);
            bufs[i].live = 0;
            live_bytes -= bufs[i].n;
            free(p);
            return;
        }
    FAIL("free of %p (%zu bytes): not a live buffer", p, n);
}
static Buf *find_buf(const void *p, size_t bytes)
{
    for (int i = nbufs - 1; i >= 0; i--)
        if (bufs[i].live && (const char *)p >= bufs[i].p &&
            (const char *)p + bytes <= bufs[i].p + bufs[i].n)
            return &bufs[i];
    return NULL;
}
static void need(const void *p, size_t bytes, const char *what)
{
    if (!p) {
        FAIL("%s: NULL", what);
        return;
    }
    if (!find_buf(p, bytes)) FAIL("%s: %p + %zu bytes outside any live buffer", what, p, bytes);
}
static size_t dts(DType t)
{
    return t == DT_F32 ? 4 : 2;
}

void *mem_alloc(Ctx *c, size_t bytes)
{
    (void)c;
    return balloc(bytes, "mem_alloc", -1);
}
void mem_free(Ctx *c, void *p, size_t bytes)
{
    (void)c;
    bfree(p, bytes);
}

/* ---------- descriptors ---------- */
enum {
    D_TENSOR = 1,
    D_CONVDESC,
    D_CONVOP,
    D_PW,
    D_PWOP,
    D_RED,
    D_REDOP,
    D_GENSTATS,
    D_BNW,
    D_GRAPH,
    D_PLAN
};
typedef struct Desc {
    int kind, alive, id;
    int64_t uid;
    cudnnDataType_t type;
    int virt;
    int64_t dims[4], strides[4];
    struct Desc *in[6];
    int nin;
    struct Desc *out[6];
    int nout;
    int mode, dir;
    struct Desc *ops[32];
    int nops;
    struct Desc *graph;
} Desc;
static int created, destroyed, next_id;
static struct Desc *alld[200000];
static int nalld;
static Desc *dnew(int kind)
{
    Desc *d = calloc(1, sizeof *d);
    d->kind = kind;
    d->alive = 1;
    d->id = ++next_id;
    created++;
    alld[nalld++] = d;
    return d;
}
void cg_destroy(CgDesc dd)
{
    Desc *d = (Desc *)dd;
    if (!d) return;
    if (!d->alive) {
        FAIL("double destroy of descriptor %d (kind %d)", d->id, d->kind);
        return;
    }
    d->alive = 0;
    destroyed++;
}
static int64_t chans(const Desc *t)
{
    return t->dims[1];
}
static int is_chan(const Desc *t, int64_t C)
{
    return t->dims[0] == 1 && t->dims[1] == C && t->dims[2] == 1 && t->dims[3] == 1;
}
static int same_dims(const Desc *a, const Desc *b)
{
    return memcmp(a->dims, b->dims, sizeof a->dims) == 0;
}

CgDesc cg_tensor_try(int64_t uid, cudnnDataType_t t, int nd, const int64_t *dims,
                     const int64_t *strides, int64_t align, int is_virtual)
{
    if (nd != 4) FAIL("nd %d", nd);
    if (align != 16) FAIL("align %lld", (long long)align);
    Desc *d = dnew(D_TENSOR);
    d->uid = uid;
    d->type = t;
    d->virt = is_virtual;
    memcpy(d->dims, dims, 4 * sizeof *dims);
    memcpy(d->strides, strides, 4 * sizeof *strides);
    return d;
}
CgDesc cg_conv_desc(int nsp, const int64_t *pad, const int64_t *stride, const int64_t *dil)
{
    (void)nsp;
    (void)pad;
    (void)stride;
    (void)dil;
    return dnew(D_CONVDESC);
}
CgDesc cg_conv_op_try(int dir, CgDesc conv, CgDesc a_, CgDesc b_, CgDesc c_, float alpha,
                      float beta)
{
    Desc *a = a_, *b = b_, *c = c_;
    (void)alpha;
    (void)beta;
    if (!conv || !a || !b || !c) return NULL;
    if (a->dims[0] != c->dims[0] || a->dims[1] != b->dims[1] || c->dims[1] != b->dims[0])
        FAIL("conv dir %d: dims do not fit", dir);
    Desc *op = dnew(D_CONVOP);
    op->dir = dir;
    if (dir == CG_FPROP) {
        op->in[0] = a;
        op->in[1] = b;
        op->nin = 2;
        op->out[0] = c;
        op->nout = 1;
    }
    if (dir == CG_DGRAD) {
        op->in[0] = c;
        op->in[1] = b;
        op->nin = 2;
        op->out[0] = a;
        op->nout = 1;
    }
    if (dir == CG_WGRAD) {
        op->in[0] = a;
        op->in[1] = c;
        op->nin = 2;
        op->out[0] = b;
        op->nout = 1;
    }
    return op;
}
CgDesc cg_pointwise_op2(int mode, CgDesc x_, CgDesc b_, float alpha2, CgDesc y_, CgDesc *pw)
{
    Desc *x = x_, *b = b_, *y = y_;
    (void)alpha2;
    *pw = x && y ? dnew(D_PW) : NULL;
    if (!*pw || (b == NULL && (mode == CUDNN_POINTWISE_ADD || mode == CUDNN_POINTWISE_MUL ||
                               mode == CUDNN_POINTWISE_SUB)))
        return NULL;
    if (!same_dims(x, y)) FAIL("pointwise %d: x and y dims differ", mode);
    if (b && !same_dims(b, x) && !is_chan(b, chans(x)))
        FAIL("pointwise %d: b does not broadcast", mode);
    Desc *op = dnew(D_PWOP);
    op->mode = mode;
    op->in[op->nin++] = x;
    if (b) op->in[op->nin++] = b;
    op->out[op->nout++] = y;
    return op;
}
CgDesc cg_pointwise_op(int mode, CgDesc x, CgDesc b, CgDesc y, CgDesc *pw)
{
    return cg_pointwise_op2(mode, x, b, 1.0f, y, pw);
}
CgDesc cg_relu_bwd_op(CgDesc dy_, CgDesc x_, CgDesc dx_, CgDesc *pw)
{
    Desc *dy = dy_, *x = x_, *dx = dx_;
    *pw = dy && x && dx ? dnew(D_PW) : NULL;
    if (!*pw) return NULL;
    if (!same_dims(dy, x) || !same_dims(dy, dx)) FAIL("relu_bwd dims");
    Desc *op = dnew(D_PWOP);
    op->mode = CUDNN_POINTWISE_RELU_BWD;
    op->in[0] = dy;
    op->in[1] = x;
    op->nin = 2;
    op->out[0] = dx;
    op->nout = 1;
    return op;
}
CgDesc cg_bn_bwd_weights_op(CgDesc x_, CgDesc mean, CgDesc invstd, CgDesc scale, CgDesc dy_,
                            CgDesc dscale, CgDesc dbias, CgDesc eq_dy, CgDesc eq_x, CgDesc eq_bias)
{
    Desc *x = x_, *dy = dy_;
    if (!x || !mean || !invstd || !scale || !dy || !dscale || !dbias || !eq_dy || !eq_x || !eq_bias)
        return NULL;
    if (!same_dims(x, dy)) FAIL("bnw: x, dy dims");
    Desc *pc[8] = {mean, invstd, scale, dscale, dbias, eq_dy, eq_x, eq_bias};
    for (int i = 0; i < 8; i++)
        if (!is_chan(pc[i], chans(x))) FAIL("bnw: per-channel %d", i);
    Desc *op = dnew(D_BNW);
    op->in[0] = x;
    op->in[1] = mean;
    op->in[2] = invstd;
    op->in[3] = scale;
    op->in[4] = dy;
    op->nin = 5;
    op->out[0] = dscale;
    op->out[1] = dbias;
    op->out[2] = eq_dy;
    op->out[3] = eq_x;
    op->out[4] = eq_bias;
    op->nout = 5;
    return op;
}
CgDesc cg_genstats_op(CgDesc x_, CgDesc sum, CgDesc sq)
{
    Desc *x = x_;
    if (!x || !sum || !sq) return NULL;
    if (!is_chan(sum, chans(x)) || !is_chan(sq, chans(x))) FAIL("genstats per-channel");
    Desc *op = dnew(D_GENSTATS);
    op->in[0] = x;
    op->nin = 1;
    op->out[0] = sum;
    op->out[1] = sq;
    op->nout = 2;
    return op;
}
CgDesc cg_reduction_op(CgDesc x_, CgDesc y_, int deterministic, CgDesc *red)
{
    Desc *x = x_, *y = y_;
    *red = NULL;
    if (deterministic != 2) FAIL("reduction not required deterministic");
    if (!x || !y) return NULL;
    *red = dnew(D_RED);
    if (!is_chan(y, chans(x))) FAIL("reduction output");
    Desc *op = dnew(D_REDOP);
    op->in[0] = x;
    op->nin = 1;
    op->out[0] = y;
    op->nout = 1;
    return op;
}

/* ---------- graph checks ---------- */
static int g_refuse_graph = 0; /* bitmask of inferred forms whose graph is refused */
typedef struct {
    Desc *t[64];
    int n;
} TSet;
static void tadd(TSet *s, Desc *t)
{
    for (int i = 0; i < s->n; i++)
        if (s->t[i] == t) return;
    s->t[s->n++] = t;
}
static int infer_form(const Desc *g)
{
    int has_id = 0, has_gs = 0, has_bnw = 0, half_s = 0, act_f32 = 0, has_prologue_relu = 0;
    for (int i = 0; i < g->nops; i++) {
        Desc *op = g->ops[i];
        if (op->kind == D_GENSTATS) has_gs = 1;
        if (op->kind == D_BNW) has_bnw = 1;
        if (op->kind == D_PWOP && op->mode == CUDNN_POINTWISE_IDENTITY) has_id = 1;
        if (op->kind == D_PWOP && op->mode == CUDNN_POINTWISE_RELU_FWD) {
            has_prologue_relu = 1;
            act_f32 = op->out[0]->type == CUDNN_DATA_FLOAT;
        }
        for (int k = 0; k < op->nin; k++)
            if (op->in[k]->uid == U_S && op->in[k]->type == CUDNN_DATA_HALF) half_s = 1;
    }
    if (has_gs || has_bnw || half_s) return 2;
    if (has_id) return 0;
    if (has_prologue_relu) return act_f32 ? 0 : 1;
    return 1;
}
CgDesc cg_graph(cudnnHandle_t h, const CgDesc *ops, int n, cudnnStatus_t *st)
{
    (void)h;
    Desc *g = dnew(D_GRAPH);
    TSet all = {0};
    for (int i = 0; i < n; i++) {
        Desc *op = ops[i];
        if (!op || !op->alive) FAIL("graph op %d dead or NULL", i);
        g->ops[g->nops++] = op;
        for (int k = 0; k < op->nin; k++) tadd(&all, op->in[k]);
        for (int k = 0; k < op->nout; k++) tadd(&all, op->out[k]);
    }
    /* wiring: uids unique; a virtual tensor produced once and consumed; a
     * stored one produced at most once */
    for (int i = 0; i < all.n; i++) {
        Desc *t = all.t[i];
        if (!t->alive) FAIL("graph tensor uid %lld dead", (long long)t->uid);
        for (int j = i + 1; j < all.n; j++)
            if (all.t[j]->uid == t->uid) FAIL("uid %lld twice", (long long)t->uid);
        int prod = 0, cons = 0;
        for (int k = 0; k < n; k++) {
            Desc *op = ops[k];
            for (int q = 0; q < op->nin; q++) cons += op->in[q] == t;
            for (int q = 0; q < op->nout; q++) prod += op->out[q] == t;
        }
        if (t->virt && (prod != 1 || cons < 1))
            FAIL("virtual uid %lld: %d producers, %d consumers", (long long)t->uid, prod, cons);
        if (!t->virt && prod > 1) FAIL("stored uid %lld: %d producers", (long long)t->uid, prod);
    }
    int form = infer_form(g);
    if (g_refuse_graph & (1 << form)) {
        cg_destroy(g);
        if (st) *st = CUDNN_STATUS_NOT_SUPPORTED;
        return NULL;
    }
    if (st) *st = CUDNN_STATUS_SUCCESS;
    return g;
}

/* the variant pack against the graph's stored tensors */
static void check_pack(const Desc *g, const int64_t *uids, void *const *ptrs, int n,
                       const char *where)
{
    TSet stored = {0};
    for (int i = 0; i < g->nops; i++) {
        Desc *op = g->ops[i];
        for (int k = 0; k < op->nin; k++)
            if (!op->in[k]->virt) tadd(&stored, op->in[k]);
        for (int k = 0; k < op->nout; k++)
            if (!op->out[k]->virt) tadd(&stored, op->out[k]);
    }
    if (n > CS_PACK) FAIL("%s: pack of %d", where, n);
    if (n != stored.n) FAIL("%s: pack has %d tensors, graph %d stored", where, n, stored.n);
    const char *lo[64];
    size_t sz[64];
    for (int i = 0; i < n; i++) {
        Desc *t = NULL;
        for (int j = 0; j < stored.n; j++)
            if (stored.t[j]->uid == uids[i]) t = stored.t[j];
        for (int j = 0; j < i; j++)
            if (uids[j] == uids[i]) FAIL("%s: uid %lld twice in pack", where, (long long)uids[i]);
        if (!t) {
            FAIL("%s: pack uid %lld not in graph", where, (long long)uids[i]);
            continue;
        }
        size_t el = 1;
        for (int d = 0; d < 4; d++) el += (size_t)(t->dims[d] - 1) * (size_t)t->strides[d];
        size_t bytes = el * (t->type == CUDNN_DATA_FLOAT ? 4 : 2);
        if ((uintptr_t)ptrs[i] & 15) FAIL("%s: uid %lld misaligned", where, (long long)uids[i]);
        Buf *b = find_buf(ptrs[i], bytes);
        if (!b)
            FAIL("%s: uid %lld: %zu bytes at %p outside any live buffer", where, (long long)uids[i],
                 bytes, ptrs[i]);
        else if (b->dt >= 0) {
            int want = b->dt == DT_F32   ? CUDNN_DATA_FLOAT
                       : b->dt == DT_F16 ? CUDNN_DATA_HALF
                                         : CUDNN_DATA_BFLOAT16;
            if ((int)t->type != want)
                FAIL("%s: uid %lld type %d on a buffer '%s' of dtype %d", where, (long long)uids[i],
                     t->type, b->what, b->dt);
        }
        lo[i] = ptrs[i];
        sz[i] = bytes;
    }
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (lo[i] < lo[j] + sz[j] && lo[j] < lo[i] + sz[i])
                FAIL("%s: uids %lld and %lld overlap", where, (long long)uids[i],
                     (long long)uids[j]);
}

/* search policy */
static float g_form_ms[3] = {3.0f, 2.0f, 1.0f};
static int g_search_fail = 0;   /* bitmask of forms with no engine */
static int g_search_overws = 0; /* those: dropped for workspace */
static int g_searches;
int cg_search(Ctx *c, CgDesc g_, const CgRule *rule, const int64_t *uids, void *const *ptrs, int n,
              CgPlan *best)
{
    (void)c;
    (void)rule;
    Desc *g = g_;
    memset(best, 0, sizeof *best);
    check_pack(g, uids, ptrs, n, "cg_search");
    int form = infer_form(g);
    g_searches++;
    if (g_search_fail & (1 << form)) {
        if (g_search_overws & (1 << form)) best->over_ws = 2;
        best->tried = 0;
        return 0;
    }
    Desc *p = dnew(D_PLAN);
    p->graph = g;
    best->plan = p;
    best->engine = 10 + form;
    best->nknobs = 2;
    best->knobs[0][0] = 1;
    best->knobs[0][1] = form;
    best->knobs[1][0] = 3;
    best->knobs[1][1] = 7;
    best->ms = g_form_ms[form];
    best->tried = 1;
    return 1;
}
static int g_refuse_kept = 0;
int cg_plan_for_engine(Ctx *c, CgDesc g_, const CgRule *rule, int64_t engine,
                       const int64_t (*knobs)[2], int nknobs, CgPlan *out)
{
    (void)c;
    (void)rule;
    memset(out, 0, sizeof *out);
    if (g_refuse_kept) return 0;
    Desc *g = g_;
    int form = infer_form(g);
    if (engine != 10 + form)
        FAIL("kept engine %lld for a graph of form %d", (long long)engine, form);
    if (nknobs != 2 || knobs[0][1] != form) FAIL("kept knobs");
    Desc *p = dnew(D_PLAN);
    p->graph = g;
    out->plan = p;
    out->engine = engine;
    out->nknobs = nknobs;
    memcpy(out->knobs, knobs, (size_t)nknobs * sizeof out->knobs[0]);
    return 1;
}
static int g_execs;
static int g_exec_form;
void cg_execute(Ctx *c, const CgPlan *p, const int64_t *uids, void *const *ptrs, int n)
{
    (void)c;
    Desc *pl = p->plan;
    if (!pl || !pl->alive) {
        FAIL("execute: plan dead");
        return;
    }
    if (!pl->graph->alive) FAIL("execute: the plan's graph was destroyed");
    for (int i = 0; i < pl->graph->nops; i++) {
        Desc *op = pl->graph->ops[i];
        if (!op->alive) FAIL("execute: op destroyed");
        for (int k = 0; k < op->nin; k++)
            if (!op->in[k]->alive) FAIL("execute: tensor destroyed");
        for (int k = 0; k < op->nout; k++)
            if (!op->out[k]->alive) FAIL("execute: tensor destroyed");
    }
    check_pack(pl->graph, uids, ptrs, n, "cg_execute");
    g_exec_form = infer_form(pl->graph);
    g_execs++;
}
void cg_plan_free(CgPlan *p)
{
    cg_destroy(p->plan);
    for (int i = p->nkeep - 1; i >= 0; i--) cg_destroy(p->keep[i]);
    memset(p, 0, sizeof *p);
}

/* ---------- CUDA runtime ---------- */
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s)
{
    (void)v;
    (void)s;
    need(p, n, "memset");
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *d, const void *src, size_t n, enum cudaMemcpyKind k,
                            cudaStream_t s)
{
    (void)k;
    (void)s;
    need(d, n, "memcpy dst");
    need(src, n, "memcpy src");
    return cudaSuccess;
}
static int g_elapsed_calls;
static float g_sep_ms = 1.0f, g_fused_ms = 0.5f;
cudaError_t cudaEventCreate(cudaEvent_t *e)
{
    *e = (cudaEvent_t)balloc(1, "event", -1);
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    bfree(e, 1);
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    (void)e;
    (void)s;
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    (void)e;
    return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    (void)a;
    (void)b;
    *ms = 3.0f * (g_elapsed_calls++ % 2 ? g_fused_ms : g_sep_ms);
    return cudaSuccess;
}

/* ---------- kernels ---------- */
static int g_sep_conv_calls;
size_t batchnorm_scratch_bytes(size_t M, size_t C)
{
    size_t G = M < 64 ? M : 64;
    return (2 * G * C + 2 * C) * 4;
}
void batchnorm_forward_cuda(void *y, const void *x, const void *z, const float *mean,
                            const float *invstd, const float *gamma, const float *beta, DType dt,
                            int relu, size_t M, size_t C, cudaStream_t s)
{
    (void)z;
    (void)relu;
    (void)s;
    need(y, M * C * dts(dt), "bn_fwd y");
    need(x, M * C * dts(dt), "bn_fwd x");
    need(mean, C * 4, "bn_fwd mean");
    need(invstd, C * 4, "bn_fwd invstd");
    if (gamma) need(gamma, C * 4, "gamma");
    if (beta) need(beta, C * 4, "beta");
}
void batchnorm_backward_cuda(void *dx, void *dz, float *dgamma, float *dbeta, const void *dy,
                             const void *x, const void *y, const float *mean, const float *invstd,
                             const float *gamma, const float *beta, DType dt, int training,
                             int relu, size_t M, size_t C, int accum_x, int accum_z, int accum_p,
                             void *scratch, size_t sb, cudaStream_t s)
{
    (void)y;
    (void)training;
    (void)accum_x;
    (void)accum_z;
    (void)accum_p;
    (void)s;
    if (dx || dz) FAIL("separate dgrad asked for dx/dz");
    if (relu != 2) FAIL("relu mode %d", relu);
    need(dgamma, C * 4, "bn_bwd dgamma");
    need(dbeta, C * 4, "bn_bwd dbeta");
    need(dy, M * C * dts(dt), "bn_bwd dy");
    need(x, M * C * dts(dt), "bn_bwd x");
    need(mean, C * 4, "mean");
    need(invstd, C * 4, "invstd");
    if (gamma) need(gamma, C * 4, "gamma");
    if (beta) need(beta, C * 4, "beta");
    if (sb < batchnorm_scratch_bytes(M, C))
        FAIL("bn_bwd scratch %zu < %zu", sb, batchnorm_scratch_bytes(M, C));
    need(scratch, sb, "bn_bwd scratch");
}
void batchnorm_moments_cuda(float *mean, float *m2, const void *x, DType dt, size_t M, size_t C,
                            void *scratch, size_t sb, cudaStream_t s)
{
    (void)s;
    need(mean, C * 4, "moments mean");
    need(m2, C * 4, "moments m2");
    need(x, M * C * dts(dt), "moments x");
    if (sb < batchnorm_scratch_bytes(M, C)) FAIL("moments scratch");
    need(scratch, sb, "moments scratch");
}
void batchnorm_moments_from_sums_cuda(float *mean, float *m2, const float *sum, const float *sq,
                                      size_t M, size_t C, cudaStream_t s)
{
    (void)M;
    (void)s;
    need(mean, C * 4, "mfs mean");
    need(m2, C * 4, "mfs m2");
    need(sum, C * 4, "mfs sum");
    need(sq, C * 4, "mfs sq");
}
void batchnorm_scale_bias_cuda(float *scale, float *bias, const float *mean, const float *invstd,
                               const float *gamma, const float *beta, size_t C, cudaStream_t s)
{
    (void)s;
    need(scale, C * 4, "sb scale");
    need(bias, C * 4, "sb bias");
    need(mean, C * 4, "sb mean");
    need(invstd, C * 4, "sb invstd");
    if (gamma) need(gamma, C * 4, "sb gamma");
    if (beta) need(beta, C * 4, "sb beta");
    if (scale + C > bias && bias + C > scale) FAIL("scale and bias overlap");
}
void cast_cuda(void *y, DType ty, const void *x, DType tx, size_t n, int accum, cudaStream_t s)
{
    (void)accum;
    (void)s;
    need(y, n * dts(ty), "cast y");
    need(x, n * dts(tx), "cast x");
}
void conv2d_forward_cuda(Ctx *c, void *y, const void *x, const void *w, DType dt,
                         const Conv2dShape *s)
{
    (void)c;
    g_sep_conv_calls++;
    need(y, (size_t)s->N * s->P * s->Q * s->K * dts(dt), "conv y");
    need(x, (size_t)s->N * s->H * s->W * s->C * dts(dt), "conv x");
    need(w, (size_t)s->K * s->R * s->S * s->C * dts(dt), "conv w");
}
void conv2d_backward_data_cuda(Ctx *c, void *dx, const void *dy, const void *w, DType dt,
                               const Conv2dShape *s, int accum)
{
    (void)c;
    (void)accum;
    need(dx, (size_t)s->N * s->H * s->W * s->C * dts(dt), "dgrad dx");
    need(dy, (size_t)s->N * s->P * s->Q * s->K * dts(dt), "dgrad dy");
    need(w, (size_t)s->K * s->R * s->S * s->C * dts(dt), "dgrad w");
}
void conv2d_backward_filter_cuda(Ctx *c, void *dw, DType tdw, const void *dy, const void *x,
                                 DType dt, const Conv2dShape *s, int accum)
{
    (void)c;
    (void)accum;
    need(dw, (size_t)s->K * s->R * s->S * s->C * dts(tdw), "wgrad dw");
    need(dy, (size_t)s->N * s->P * s->Q * s->K * dts(dt), "wgrad dy");
    need(x, (size_t)s->N * s->H * s->W * s->C * dts(dt), "wgrad x");
}
size_t conv2d_cuda_search_ws_bytes(Ctx *c)
{
    (void)c;
    return (size_t)1 << 30;
}
void conv2d_cuda_store_identity(char *buf, size_t n)
{
    snprintf(buf, n, "mock");
}

/* ---------- engine ---------- */
static const CtxCacheKind *ck[8];
static void *co[8];
static Ctx *cc_[8];
static int nck;
void *ctx_cache_get(const Ctx *c, const CtxCacheKind *kind)
{
    for (int i = 0; i < nck; i++)
        if (ck[i] == kind && cc_[i] == c) return co[i];
    return NULL;
}
void ctx_cache_set(Ctx *c, const CtxCacheKind *kind, void *obj)
{
    for (int i = 0; i < nck; i++)
        if (ck[i] == kind && cc_[i] == c) {
            co[i] = obj;
            return;
        }
    ck[nck] = kind;
    co[nck] = obj;
    cc_[nck] = c;
    nck++;
}
static void ctx_drop(Ctx *c)
{
    for (int i = 0; i < nck; i++)
        if (cc_[i] == c && co[i]) {
            ck[i]->release(c, co[i]);
            co[i] = NULL;
        }
}
int setting_choice(SettingId id)
{
    (void)id;
    return 2;
}
size_t setting_size(SettingId id)
{
    (void)id;
    return (size_t)4096 << 20;
}
int setting_switch(SettingId id)
{
    (void)id;
    return 0;
}
const char *dtype_name(DType t)
{
    return t == DT_F32 ? "f32" : t == DT_F16 ? "f16" : "bf16";
}
size_t dtype_size(DType t)
{
    return dts(t);
}
void log_msg(LogLevel l, const char *fmt, ...)
{
    (void)l;
    if (!verbose) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}
void ct_fatal_hint(const char *hint, const char *fmt, ...)
{
    (void)hint;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nFATAL\n");
    abort();
}
void ct_check_failed(const char *file, int line, const char *call, const char *lib, const char *msg)
{
    fprintf(stderr, "%s:%d %s %s %s\n", file, line, call, lib, msg);
    abort();
}
const char *ct_cuda_status_string(int s)
{
    (void)s;
    return "cuda";
}
const char *ct_cudnn_status_string(int s)
{
    (void)s;
    return "cudnn-refused";
}

/* ---------- plan store (memory) ---------- */
static char skeys[1000][PLAN_STORE_KEY_MAX], svals[1000][PLAN_STORE_VALUE_MAX];
static int nstore;
struct PlanStore {
    int dummy;
};
static struct PlanStore the_store;
const char *plan_store_default_dir(char *buf, size_t n)
{
    (void)buf;
    (void)n;
    return NULL;
}
PlanStore *plan_store_open(const char *dir, const char *family, const char *identity)
{
    (void)dir;
    (void)family;
    (void)identity;
    return &the_store;
}
PlanStore *plan_store_open_default(const char *family, const char *identity, const char *what)
{
    (void)what;
    return plan_store_open(NULL, family, identity);
}
void plan_store_close(PlanStore *s)
{
    (void)s;
}
const char *plan_store_get(const PlanStore *s, const char *key)
{
    (void)s;
    for (int i = 0; i < nstore; i++)
        if (!strcmp(skeys[i], key)) return svals[i];
    return NULL;
}
int plan_store_put(PlanStore *s, const char *key, const char *value)
{
    (void)s;
    if (strlen(key) >= PLAN_STORE_KEY_MAX || strlen(value) >= PLAN_STORE_VALUE_MAX) return -1;
    for (int i = 0; i < nstore; i++)
        if (!strcmp(skeys[i], key)) {
            strcpy(svals[i], value);
            return 0;
        }
    strcpy(skeys[nstore], key);
    strcpy(svals[nstore], value);
    nstore++;
    return 0;
}
#include "ops/plan_pairs.c"

/* ---------- driver ---------- */

static void extra(void);
static void dump_leaks(void);
static int expected_form(int kind, DType dt, int only_form)
{
    int nf = n_forms(kind, dt);
    int best = -1;
    for (int f = 0; f < nf; f++) {
        if (only_form >= 0 && f != only_form) continue;
        if (g_refuse_graph & (1 << f)) continue;
        if (g_search_fail & (1 << f)) continue;
        if (best < 0 || g_form_ms[f] < g_form_ms[best]) best = f;
    }
    return best;
}

static void run_all(Ctx *c, DType dt, const Conv2dShape *s, int use, int only_form, const char *tag)
{
    size_t nx = (size_t)s->N * s->H * s->W * s->C, ny = (size_t)s->N * s->P * s->Q * s->K;
    size_t nw = (size_t)s->K * s->R * s->S * s->C, C = s->C, K = s->K;
    void *x = balloc(nx * dts(dt), "x", dt), *w = balloc(nw * dts(dt), "w", dt);
    void *y = balloc(ny * dts(dt), "y", dt), *dz = balloc(ny * dts(dt), "dz", dt);
    void *g = balloc(nx * dts(dt), "g", dt);
    float *mean = balloc(K * 4, "mean", DT_F32), *m2 = balloc(K * 4, "m2", DT_F32);
    float *ms = balloc(2 * C * 4, "ms", DT_F32), *gm = balloc(C * 4, "gamma", DT_F32),
          *bt = balloc(C * 4, "beta", DT_F32);
    float *sg = balloc(C * 4, "sg", DT_F32), *sgx = balloc(C * 4, "sgx", DT_F32);
    float *dw = balloc(nw * 4, "dw", DT_F32);
    conv_bn_cudnn_use(c, use);
    conv_bn_cudnn_only_form(c, only_form);
    for (int rep = 0; rep < 2; rep++) {
        int r[5];
        r[0] = conv_bn_cudnn_conv_stats(c, y, mean, m2, x, w, dt, s);
        r[1] = conv_bn_cudnn_bnrelu_fprop(c, y, NULL, NULL, x, ms, gm, bt, w, dt, s);
        r[2] = conv_bn_cudnn_bnrelu_fprop(c, y, mean, m2, x, ms, gm, bt, w, dt, s);
        r[3] = conv_bn_cudnn_bnrelu_wgrad(c, dw, DT_F32, 1, x, ms, gm, bt, dz, dt, s);
        r[4] = conv_bn_cudnn_dgrad_relu(c, g, sg, sgx, dz, w, x, ms, gm, bt, dt, s);
        for (int k = 0; k < 5; k++) {
            int ef = expected_form(k, dt, only_form);
            int lf = conv_bn_cudnn_last_form(c, (ConvBnKind)k);
            int want_fused = ef >= 0 && (use == 1 || g_fused_ms < 0.97f * g_sep_ms);
            if (r[k] != want_fused || (want_fused && lf != ef))
                FAIL(
                    "%s %s kind %d only_form %d use %d rep %d: ran %d (want %d), form %d (want %d)",
                    tag, dtype_name(dt), k, only_form, use, rep, r[k], want_fused, lf, ef);
        }
    }
    {
        static int maxp[5][3];
        CsCache *cc = cs_for(c);
        for (int i = 0; i < cc->n; i++) {
            CsEntry *e = &cc->e[i];
            if (!e->fused) continue;
            int nops = 0;
            for (int k = 0; k < e->nparts; k++) {
                Desc *d = e->parts[k];
                if (d->kind == D_GRAPH) nops = d->nops;
            }
            if (e->nparts > maxp[e->kind][e->form]) {
                maxp[e->kind][e->form] = e->nparts;
                if (verbose)
                    printf("  kind %d form %d %s: %d parts, %d ops\n", e->kind, e->form,
                           dtype_name(e->dt), e->nparts, nops);
                if (e->nparts > CS_PARTS - 4 || nops > CS_OPS)
                    FAIL("kind %d form %d: %d parts, %d ops (limits %d, %d)", e->kind, e->form,
                         e->nparts, nops, CS_PARTS, CS_OPS);
            }
        }
    }
    void *all[] = {x, w, y, dz, g, mean, m2, ms, gm, bt, sg, sgx, dw};
    size_t sz[] = {nx * dts(dt), nw * dts(dt), ny * dts(dt), ny * dts(dt), nx * dts(dt),
                   K * 4,        K * 4,        2 * C * 4,    C * 4,        C * 4,
                   C * 4,        C * 4,        nw * 4};
    for (int i = 0; i < 13; i++) bfree(all[i], sz[i]);
}

int main(int argc, char **argv)
{
    (void)argv;
    verbose = argc > 1;   /* any argument: the mocks' log and the graphs' sizes */
    Conv2dShape shapes[3] = {
        {2, 8, 8, 16, 32, 3, 3, 8, 8, 1, 1, 1, 1, 1, 1},
        {2, 9, 9, 64, 16, 3, 3, 5, 5, 2, 2, 1, 1, 1, 1}, /* K < C, strided */
        {2, 7, 7, 24, 40, 1, 1, 7, 7, 1, 1, 0, 0, 1, 1},
    };
    const DType dtv[2] = {DT_F16, DT_BF16};
    struct {
        float ms[3];
        int refuse, fail, overws;
        float sep, fused;
    } pol[] = {
        {{3, 2, 1}, 0, 0, 0, 1.0f, 0.5f}, {{1, 2, 3}, 0, 0, 0, 1.0f, 0.5f},
        {{2, 1, 3}, 0, 0, 0, 1.0f, 2.0f}, /* fused slower */
        {{3, 2, 1}, 1, 4, 0, 1.0f, 0.5f}, /* form 0 refused, form 2 no engine */
        {{3, 2, 1}, 0, 2, 2, 1.0f, 0.5f}, /* form 1 no engine for workspace */
        {{3, 2, 1}, 7, 0, 0, 1.0f, 0.5f}, /* everything refused */
    };
    for (size_t p = 0; p < sizeof pol / sizeof pol[0]; p++)
        for (int si = 0; si < 3; si++)
            for (int d = 0; d < 2; d++)
                for (int use = -1; use <= 1; use += 2)
                    for (int of = -1; of <= 2; of++) {
                        memcpy(g_form_ms, pol[p].ms, sizeof g_form_ms);
                        g_refuse_graph = pol[p].refuse;
                        g_search_fail = pol[p].fail;
                        g_search_overws = pol[p].overws;
                        g_sep_ms = pol[p].sep;
                        g_fused_ms = pol[p].fused;
                        nstore = 0;
                        int before = created - destroyed, fails_before = failures;
                        for (int ctxn = 0; ctxn < 2; ctxn++) { /* the second loads verdicts */
                            Ctx c;
                            memset(&c, 0, sizeof c);
                            char tag[64];
                            snprintf(tag, sizeof tag, "pol%zu shape%d ctx%d", p, si, ctxn);
                            run_all(&c, dtv[d], &shapes[si], use, of, tag);
                            int searched, loaded;
                            conv_bn_cudnn_origins(&c, &searched, &loaded);
                            if (ctxn == 1 && searched != 0 && !pol[p].overws)
                                FAIL("%s: second context searched %d (loaded %d)", tag, searched,
                                     loaded);
                            ctx_drop(&c);
                        }
                        int leaked = created - destroyed - before;
                        char name[128];
                        snprintf(name, sizeof name, "mock_conv_bn.pol%zu.shape%d.%s.use%d.form%d",
                                 p, si, dtype_name(dtv[d]), use, of);
                        check_true(name, failures == fails_before && leaked == 0,
                                   "%d failed mock checks (above), %d descriptors never destroyed",
                                   failures - fails_before, leaked);
                    }
    extra();
    dump_leaks();
    printf("  descriptors: %d created, %d destroyed; buffers live %zu bytes; mock failures %d\n",
           created, destroyed, live_bytes, failures);
    check_true("mock_conv_bn.descriptors_all_destroyed", created == destroyed,
               "%d descriptors never destroyed", created - destroyed);
    check_true("mock_conv_bn.buffers_all_freed", live_bytes == 0, "%zu bytes still held",
               live_bytes);
    check_true("mock_conv_bn.no_mock_failures", failures == 0, "%d (printed above)", failures);
    return check_summary();
}

static void dump_leaks(void)
{
    int byk[16] = {0};
    for (int i = 0; i < nalld; i++)
        if (alld[i]->alive) byk[alld[i]->kind]++;
    const char *nm[] = {"",
                        "tensor",
                        "convdesc",
                        "convop",
                        "pointwise desc",
                        "pointwise op",
                        "reduction desc",
                        "reduction op",
                        "genstats",
                        "bnw",
                        "graph",
                        "plan"};
    for (int k = 1; k < 12; k++)
        if (byk[k]) printf("  never destroyed: %d %s\n", byk[k], nm[k]);
}

static void extra(void)
{
    memcpy(g_form_ms, (float[]){3, 2, 1}, sizeof g_form_ms);
    g_refuse_graph = 0;
    g_search_fail = 0;
    g_search_overws = 0;
    g_sep_ms = 1;
    g_fused_ms = 0.5f;
    /* many shapes in one context: the cache grows past 16 while a search pre-warms */
    for (int d = 0; d < 2; d++) {
        nstore = 0;
        Ctx c;
        memset(&c, 0, sizeof c);
        DType dt = d ? DT_BF16 : DT_F16;
        for (int k = 0; k < 30; k++) {
            Conv2dShape s = {2, 8, 8, 16 + 8 * k, 32, 1, 1, 8, 8, 1, 1, 0, 0, 1, 1};
            size_t nx = (size_t)s.N * s.H * s.W * s.C, ny = (size_t)s.N * s.P * s.Q * s.K,
                   nw = (size_t)s.K * s.C;
            void *x = balloc(nx * 2, "x", dt), *w = balloc(nw * 2, "w", dt),
                 *y = balloc(ny * 2, "y", dt);
            float *mean = balloc(s.K * 4, "mean", DT_F32), *m2 = balloc(s.K * 4, "m2", DT_F32);
            float *ms = balloc(2 * s.C * 4, "ms", DT_F32), *gm = balloc(s.C * 4, "gamma", DT_F32),
                  *bt = balloc(s.C * 4, "beta", DT_F32);
            conv_bn_cudnn_use(&c, -1);
            int r = conv_bn_cudnn_bnrelu_fprop(&c, y, mean, m2, x, ms, gm, bt, w, dt, &s);
            if (!r) FAIL("many shapes: %d not fused", k);
            bfree(x, nx * 2);
            bfree(w, nw * 2);
            bfree(y, ny * 2);
            bfree(mean, s.K * 4);
            bfree(m2, s.K * 4);
            bfree(ms, 2 * s.C * 4);
            bfree(gm, s.C * 4);
            bfree(bt, s.C * 4);
        }
        CsCache *cc = cs_for(&c);
        char name[96];
        snprintf(name, sizeof name, "mock_conv_bn.many_shapes.%s", dtype_name(dt));
        check_true(name, cc->n == 60 && cc->cap >= 60,
                   "%d entries (want 60: 30 shapes, each "
                   "with the pre-warmed convolution + statistics), cap %d",
                   cc->n, cc->cap);
        ctx_drop(&c);
    }
    /* a kept verdict refused now: searched again */
    {
        nstore = 0;
        Conv2dShape s = {2, 8, 8, 16, 32, 3, 3, 8, 8, 1, 1, 1, 1, 1, 1};
        for (int ctxn = 0; ctxn < 2; ctxn++) {
            g_refuse_kept = ctxn == 1;
            Ctx c;
            memset(&c, 0, sizeof c);
            run_all(&c, DT_F16, &s, -1, -1, "refused kept");
            int se, lo;
            conv_bn_cudnn_origins(&c, &se, &lo);
            if (ctxn == 1)
                check_true("mock_conv_bn.kept_refused_searched_again", se > 0 && lo == 0,
                           "second context: %d searched, %d loaded", se, lo);
            ctx_drop(&c);
        }
        g_refuse_kept = 0;
    }
    /* dgrad: ms misaligned while ms + C is aligned (C = 6, ms at +8 bytes) */
    {
        nstore = 0;
        Conv2dShape s = {2, 4, 4, 6, 8, 1, 1, 4, 4, 1, 1, 0, 0, 1, 1};
        Ctx c;
        memset(&c, 0, sizeof c);
        size_t nx = 2 * 4 * 4 * 6, ny = 2 * 4 * 4 * 8, nw = 8 * 6;
        void *g = balloc(nx * 2, "g", DT_F16), *dz = balloc(ny * 2, "dz", DT_F16),
             *w = balloc(nw * 2, "w", DT_F16), *y = balloc(nx * 2, "y", DT_F16);
        char *msb = balloc(2 * 6 * 4 + 8, "msbuf", DT_F32);
        float *ms = (float *)(msb + 8), *gm = balloc(24, "gamma", DT_F32),
              *bt = balloc(24, "beta", DT_F32);
        float *sg = balloc(24, "sg", DT_F32), *sgx = balloc(24, "sgx", DT_F32);
        conv_bn_cudnn_use(&c, 1);
        int before = failures;
        int r = conv_bn_cudnn_dgrad_relu(&c, g, sg, sgx, dz, w, y, ms, gm, bt, DT_F16, &s);
        check_true("mock_conv_bn.dgrad_refuses_misaligned_statistics", r == 0 && failures == before,
                   "ran %d, %d mock failures", r, failures - before);
        ctx_drop(&c);
        bfree(g, nx * 2);
        bfree(dz, ny * 2);
        bfree(w, nw * 2);
        bfree(y, nx * 2);
        bfree(msb, 56);
        bfree(gm, 24);
        bfree(bt, 24);
        bfree(sg, 24);
        bfree(sgx, 24);
    }
}
