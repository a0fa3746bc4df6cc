/* conv2d_cudnn.c — the CUDA convolution of conv2d.h, through cuDNN.
 *
 * Shape letters: N batch, H W input size, C input channels, K filters,
 * R S filter size, P Q output size; Cp the channel count cuDNN sees (C, or
 * C rounded up, see "Channel padding").
 *
 *   forward:          y  = conv(x, w)             cudnnConvolutionForward
 *   backward data:    dx (+)= conv^T(dy, w)       cudnnConvolutionBackwardData
 *   backward filter:  dw (+)= corr(x, dy)         cudnnConvolutionBackwardFilter
 * ("+=" is cuDNN's beta = 1; alpha is always 1.)
 *
 * A plain C file (cuDNN is a C API), built with -DCTRAIN_CUDA; in a CPU-only
 * build it is empty. It uses cuDNN's legacy descriptor API, which cuDNN 9
 * marks deprecated but still ships and which is the shortest C route to
 * NHWC convolutions; with -Werror the deprecation warnings would stop the
 * build, so they are silenced for this file only (the pragma below). Each
 * plan is also searched on cuDNN's graph API (ops/cudnn_graph.h: a
 * one-convolution graph, the engines its heuristics and engine list offer,
 * timed on the same buffers under the same numerical rule); the graph
 * engine runs the plan when it is at least 3% faster (CTRAIN_CONV_ENGINES).
 * In strict f32 it wins most ResNet50 plans (785 -> 999 img/s, bs 256,
 * H200). A 1 x 1 plan is also timed as one cuBLASLt GEMM on the NHWC rows
 * (ops/conv_gemm.h, CTRAIN_CONV_GEMM; by default in strict f32 only), which
 * runs it when 3% faster still: ResNet-50 fp32 bs 256 on an H100, 932.9 ->
 * 1,403.9 img/s.
 * A graph plan bakes beta in, so accumulation is part of the key;
 * but a backward plan that writes (beta 0) takes the choice of its twin
 * that adds (beta 1), kept in the context or on disk, when there is one
 * (plan_from_twin): a gradient written on its first contribution
 * (CTRAIN_GRAD_FRESH) is then summed by the algorithm that summed it when
 * it was added onto zeros, to the same bits, and needs no search of its
 * own.
 *
 * Descriptors: x [N, Cp, H, W] and y [N, K, P, Q] with CUDNN_TENSOR_NHWC
 * (cuDNN takes the dims in NCHW order and the format says how they are laid
 * out), the filter [K, Cp, R, S] with CUDNN_TENSOR_NHWC = KRSC in memory,
 * i.e. our OHWI weight. Cross-correlation (PyTorch's convolution), compute
 * type f32 for every storage type. Math type: f16/bf16 allow tensor cores
 * (CUDNN_TENSOR_OP_MATH); f32 uses CUDNN_DEFAULT_MATH, which on Ampere and
 * later allows TF32, when c->allow_tf32, and CUDNN_FMA_MATH (strict f32,
 * no TF32) otherwise. After the search the descriptor takes the math type
 * the chosen algorithm was timed with (cuDNN needs algorithm and math type
 * together), except in strict f32, which stays FMA.
 *
 * Plans: one per (direction, shape, dtype, TF32, pad mode, alignment of the
 * pointers). The first call of a plan builds its descriptors and lets
 * cuDNN time every algorithm on the real buffers (cudnnFind*AlgorithmEx;
 * outputs that must not be overwritten, such as an accumulating gradient,
 * are replaced by a scratch buffer for the search) with a search workspace
 * of up to 4 GiB (CTRAIN_CONV_SEARCH_WS_MB; never more than half the free
 * memory), taken from the memory pool for the search only: strict f32
 * ResNet50 at batch 256 ran 228 img/s when 512 MiB kept cuDNN's fast f32
 * algorithms out, 785 with 4 GiB (H200). It
 * picks the fastest algorithm that succeeded; for the two backward passes
 * the fastest deterministic one (bit-identical gradients run to run), and
 * the fastest of any kind only when none is deterministic. Each call then
 * takes the workspace that algorithm needs (ctx_workspace_call: the shared
 * one, or past its size a block of its own for that call; CTRAIN_CONV_WS).
 * Later calls: a table lookup and one cuDNN call on c->stream, no host
 * sync, so they can be captured in a CUDA graph once warm-up has run every
 * shape.
 *
 * Large batches, two measures. (1) Chunks: a cuDNN tensor holds at most
 * INT32_MAX elements, and ResNet's stem output [N, 64, 112, 112] passes
 * that from N = 2675. When x (with Cp channels) or y would, the batch is
 * split into equal chunks of whole images (the last one shorter), each
 * under the limit: N = 4096 runs as 2 x 2048. NHWC is batch-major, so a
 * chunk is a contiguous slice (x + n0 H W C, y + n0 P Q K) and the calls
 * stay stream-ordered. Forward and backward data chunks are independent;
 * backward filter sums over the batch, so the first chunk writes dw (or
 * adds, with accum) and the later ones add. Each chunk size has its own
 * plan. (2) Search slice: timing every algorithm at full batch costs time
 * linear in N (73 s at N = 2048), so a plan with N > CONV_SEARCH_MAX_N is
 * searched with descriptors for the first CONV_SEARCH_MAX_N images of the
 * same buffers (same Cp); the full-N descriptors then take the chosen
 * algorithm and its math type, and cuDNN sizes its workspace at full N.
 * When cuDNN refuses the algorithm there, or it would need more workspace
 * than the search allowed, the plan is searched again at full N.
 *
 * Where the plans live: in the context, registered as a cache
 * (ctx_cache_set, engine/ctx.h) like the matmul plans; ctx_free() releases
 * them, and conv2d_cuda_release() frees them earlier (tests).
 *
 * Channel padding: cuDNN's NHWC kernels want channel rows of 16 bytes (C a
 * multiple of 8 in f16/bf16, 4 in f32). For other C — the RGB stem has
 * C = 3 — the plan is first searched as is; only when cuDNN has no
 * algorithm (or CONV2D_PAD_ALWAYS is set) are x and w copied into buffers
 * with Cp channels, the extra ones zero (cudaMemsetAsync +
 * cudaMemcpy2DAsync, both stream-ordered and capturable), which changes no
 * sum. Backward data then computes dx with Cp channels (preloaded with dx
 * when accumulating) and copies the first C back; backward filter likewise
 * for dw.
 *
 * Backward filter and types: cuDNN computes dw in x's type. For f16/bf16
 * activations and the f32 parameter gradient, dw goes to a temporary in
 * x's type (beta 0) that cast_cuda adds into the f32 gradient; when the
 * types agree cuDNN writes dw directly with beta = accum.
 */
#ifdef CTRAIN_CUDA
/* Legacy descriptor API: deprecated in cuDNN 9, still shipped, still the
 * shortest C path to NHWC convolution (see above). */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include "conv2d.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/error.h"
#include "engine/log.h"
#include "engine/mem.h"
#include "engine/settings.h"
#include "conv_gemm.h"
#include "conv_stem.h"
#include "cudnn_graph.h"
#include "elementwise.h"
#include "plan_store.h"

#define CONV_MAX_ALGOS 16
#define CONV_MAX_ELEMS ((size_t)INT32_MAX) /* cuDNN's limit for one tensor */
#define CONV_SEARCH_MAX_N 256               /* images the algorithm search runs on */

enum { DIR_FWD = 0, DIR_BWD_DATA = 1, DIR_BWD_FILTER = 2 };
static const char *dir_names[] = {"forward", "backward-data", "backward-filter"};

/* Everything a plan depends on. Built with memset first so padding bytes
 * are zero and keys compare with memcmp. */
typedef struct {
    Conv2dShape s;
    int dir, dt, tf32, pad_mode, engines, gemm_mode;
    int accum;             /* the graph API bakes beta into its plan */
    uint32_t align;        /* alignment all pointers of the call share (<= 256 bytes) */
} PlanKey;

typedef struct {
    PlanKey key;
    int Cp;                            /* channels cuDNN sees */
    cudnnTensorDescriptor_t xd, yd;    /* x or dx [N,H,W,Cp];  y or dy [N,P,Q,K] */
    cudnnFilterDescriptor_t wd;        /* w or dw [K,R,S,Cp] */
    cudnnConvolutionDescriptor_t cd;
    int algo;                          /* cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t */
    size_t ws_bytes;                   /* workspace the algorithm needs */
    CgPlan g;                          /* the graph API's plan when it won (g.plan) */
    int gemm;                          /* 1: runs as a cuBLASLt GEMM (ops/conv_gemm.h) */
    float ms;                          /* the search's time of cuDNN's choice */
} Plan;

/* One context's plans: a linear table (a ResNet has a few dozen). */
typedef struct {
    Conv2dPadMode pad_mode;
    Conv2dEngines engines;
    Conv2dGemm gemm_mode;
    size_t max_elems;     /* test hook (conv2d_cuda_set_limits); 0: CONV_MAX_ELEMS */
    int search_max_n;     /* test hook; 0: CONV_SEARCH_MAX_N */
    Plan *plans;
    int n, cap;
    PlanStore *store;     /* choices kept on disk, opened on the first plan */
    int searched, loaded; /* plans found by a search / taken from the store */
} ConvCache;

/* The operands of one call, in cuDNN's terms for its direction. */
typedef struct {
    int dir;
    const void *x;     /* fwd, bwd filter */
    const void *w;     /* fwd, bwd data */
    const void *dy;    /* bwd data, bwd filter */
    void *out;         /* fwd: y; bwd data: dx; bwd filter: dw (type dt, C channels) */
    int accum;         /* beta: 0 or 1 (forward: 0) */
} ConvArgs;

static cudnnDataType_t conv_cudnn_type(DType t)
{
    switch (t) {
    case DT_F32: return CUDNN_DATA_FLOAT;
    case DT_F16: return CUDNN_DATA_HALF;
    case DT_BF16: return CUDNN_DATA_BFLOAT16;
    default: ct_fatal("conv2d_cuda: dtype %s is not a convolution type (f32, f16, bf16)",
                      dtype_name(t));
    }
}

/* ---- the per-context table ---- */

static void plan_destroy(Plan *p)
{
    if (p->xd) CUDNN_CHECK(cudnnDestroyTensorDescriptor(p->xd));
    if (p->yd) CUDNN_CHECK(cudnnDestroyTensorDescriptor(p->yd));
    if (p->wd) CUDNN_CHECK(cudnnDestroyFilterDescriptor(p->wd));
    if (p->cd) CUDNN_CHECK(cudnnDestroyConvolutionDescriptor(p->cd));
    cg_plan_free(&p->g);
    p->xd = p->yd = NULL;
    p->wd = NULL;
    p->cd = NULL;
}

static void cache_clear(ConvCache *cc)
{
    for (int i = 0; i < cc->n; i++) plan_destroy(&cc->plans[i]);
    cc->n = 0;
}

static void cache_release(Ctx *c, void *obj)
{
    (void)c;
    ConvCache *cc = (ConvCache *)obj;
    cache_clear(cc);
    plan_store_close(cc->store);
    free(cc->plans);
    free(cc);
}

static const CtxCacheKind conv_cache_kind = {"cuDNN convolution plans", cache_release};

static ConvCache *cache_for(Ctx *c)
{
    ConvCache *cc = (ConvCache *)ctx_cache_get(c, &conv_cache_kind);
    if (!cc) {
        cc = calloc(1, sizeof(ConvCache));
        CT_ASSERT(cc != NULL, "conv2d_cuda: out of host memory for a plan cache");
        cc->engines = (Conv2dEngines)setting_choice(SET_CONV_ENGINES);
        cc->pad_mode = (Conv2dPadMode)setting_choice(SET_CONV_PAD);   /* auto 0, always 1 */
        cc->gemm_mode = (Conv2dGemm)setting_choice(SET_CONV_GEMM);    /* off, f32, search, always */
        ctx_cache_set(c, &conv_cache_kind, cc);
    }
    return cc;
}

void conv2d_cuda_set_pad_mode(Ctx *c, Conv2dPadMode mode) { cache_for(c)->pad_mode = mode; }

void conv2d_cuda_set_engines(Ctx *c, Conv2dEngines e) { cache_for(c)->engines = e; }

void conv2d_cuda_set_gemm(Ctx *c, Conv2dGemm mode) { cache_for(c)->gemm_mode = mode; }

void conv2d_cuda_set_limits(Ctx *c, size_t max_elems, int search_max_n)
{
    CT_ASSERT(search_max_n >= 0, "conv2d_cuda_set_limits: search_max_n %d < 0", search_max_n);
    ConvCache *cc = cache_for(c);
    cc->max_elems = max_elems;
    cc->search_max_n = search_max_n;
}

int conv2d_cuda_plan_count(Ctx *c) { return cache_for(c)->n; }

void conv2d_cuda_plan_origins(Ctx *c, int *searched, int *loaded)
{
    const ConvCache *cc = cache_for(c);
    *searched = cc->searched;
    *loaded = cc->loaded;
}

int conv2d_cuda_graph_plan_count(Ctx *c)
{
    const ConvCache *cc = cache_for(c);
    int n = 0;
    for (int i = 0; i < cc->n; i++) n += cc->plans[i].g.plan != NULL;
    return n;
}

int conv2d_cuda_gemm_plan_count(Ctx *c)
{
    const ConvCache *cc = cache_for(c);
    int n = 0;
    for (int i = 0; i < cc->n; i++) n += cc->plans[i].gemm;
    return n;
}

void conv2d_cuda_release(Ctx *c)
{
    ConvCache *cc = (ConvCache *)ctx_cache_get(c, &conv_cache_kind);
    if (!cc) return;
    ctx_cache_set(c, &conv_cache_kind, NULL);
    cache_release(c, cc);
}

/* ---- device buffers ---- */

/* The alignment a pointer has: its lowest set bit, capped at 256 bytes. */
static uint32_t ptr_align(const void *p)
{
    uint64_t bits = (uint64_t)(uintptr_t)p | 256u;
    return (uint32_t)(bits & (~bits + 1));
}

/* A pool buffer of `bytes` whose usable pointer has exactly alignment
 * `align` (<= 256): a search on it sees what the real call will see. */
typedef struct {
    void *base, *p;
    size_t bytes;
} Scratch;

static Scratch scratch_alloc(Ctx *c, size_t bytes, uint32_t align)
{
    Scratch s;
    s.bytes = bytes + 256;
    s.base = mem_alloc(c, s.bytes);
    s.p = (char *)s.base + (align < 256 ? align : 0);
    return s;
}

static void scratch_free(Ctx *c, Scratch *s)
{
    if (s->base) mem_free(c, s->base, s->bytes);
    s->base = s->p = NULL;
}

/* dst [rows, Cp] = src [rows, C] with zeros in columns C .. Cp-1. */
static void pad_channels(Ctx *c, void *dst, const void *src, size_t rows, int C, int Cp,
                         size_t es)
{
    CUDA_CHECK(cudaMemsetAsync(dst, 0, rows * (size_t)Cp * es, c->stream));
    CUDA_CHECK(cudaMemcpy2DAsync(dst, (size_t)Cp * es, src, (size_t)C * es, (size_t)C * es, rows,
                                 cudaMemcpyDeviceToDevice, c->stream));
}

/* dst [rows, C] = the first C columns of src [rows, Cp]. */
static void unpad_channels(Ctx *c, void *dst, const void *src, size_t rows, int C, int Cp,
                           size_t es)
{
    CUDA_CHECK(cudaMemcpy2DAsync(dst, (size_t)C * es, src, (size_t)Cp * es, (size_t)C * es, rows,
                                 cudaMemcpyDeviceToDevice, c->stream));
}

/* ---- plans ---- */

/* C rounded up to channel rows of 16 bytes, what cuDNN's NHWC kernels want. */
static int conv_padded_c(int C, DType dt)
{
    const int mult = (int)(16 / dtype_size(dt));
    return (C + mult - 1) / mult * mult;
}

static void plan_descriptors(Plan *p, int Cp)
{
    const Conv2dShape *s = &p->key.s;
    DType dt = (DType)p->key.dt;
    cudnnDataType_t t = conv_cudnn_type(dt);
    p->Cp = Cp;
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->xd));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->xd, CUDNN_TENSOR_NHWC, t, s->N, Cp, s->H, s->W));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->yd));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->yd, CUDNN_TENSOR_NHWC, t, s->N, s->K, s->P, s->Q));
    CUDNN_CHECK(cudnnCreateFilterDescriptor(&p->wd));
    CUDNN_CHECK(cudnnSetFilter4dDescriptor(p->wd, t, CUDNN_TENSOR_NHWC, s->K, Cp, s->R, s->S));
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p->cd));
    CUDNN_CHECK(cudnnSetConvolution2dDescriptor(p->cd, s->pad_h, s->pad_w, s->stride_h,
                                                s->stride_w, s->dil_h, s->dil_w,
                                                CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    cudnnMathType_t math = dt != DT_F32 ? CUDNN_TENSOR_OP_MATH
                           : p->key.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    CUDNN_CHECK(cudnnSetConvolutionMathType(p->cd, math));
    /* cuDNN's own output size must be ours */
    int n, k, h, w;
    CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(p->cd, p->xd, p->wd, &n, &k, &h, &w));
    CT_ASSERT(n == s->N && k == s->K && h == s->P && w == s->Q,
              "conv2d_cuda: cuDNN output [%d, %d, %d, %d] differs from [%d, %d, %d, %d] (N,P,Q,K)",
              n, h, w, k, s->N, s->P, s->Q, s->K);
}

/* The first successful result, deterministic ones first when asked. */
static int pick_result(const cudnnStatus_t *status, const cudnnDeterminism_t *det, int n,
                       int want_det)
{
    if (want_det)
        for (int i = 0; i < n; i++)
            if (status[i] == CUDNN_STATUS_SUCCESS && det[i] == CUDNN_DETERMINISTIC) return i;
    for (int i = 0; i < n; i++)
        if (status[i] == CUDNN_STATUS_SUCCESS) return i;
    return -1;
}

/* The workspace a search may use: CTRAIN_CONV_SEARCH_WS_MB (4096 MiB by
 * default, engine/settings.c; at most half the free memory, and half of
 * what CTRAIN_MEM_LIMIT leaves), or the shared workspace when that is
 * larger already. */
size_t conv2d_cuda_search_ws_bytes(Ctx *c)
{
    static size_t limit = 0;
    if (!limit) limit = setting_size(SET_CONV_SEARCH_WS_MB);
    size_t ws_bytes = limit, free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess && ws_bytes > free_b / 2)
        ws_bytes = free_b / 2;
    /* under CTRAIN_MEM_LIMIT the card is what the limit leaves, not what
     * the device has free */
    if (c->mem_limit) {
        size_t left = c->mem_limit > c->mem.current ? c->mem_limit - c->mem.current : 0;
        if (ws_bytes > left / 2) ws_bytes = left / 2;
    }
    return ws_bytes > c->workspace_bytes ? ws_bytes : c->workspace_bytes;
}

/* ---- the graph API's engines ---- */

enum { UID_X = 1, UID_W = 2, UID_Y = 3 }; /* x or dx, w or dw, y or dy */

/* The variant pack of one call: a, b, out in the direction's order (as for
 * plan_search) put under the uids of x, w, y. */
static void graph_ptrs(int dir, const void *a, const void *b, void *out, void *ptrs[3])
{
    if (dir == DIR_FWD) { ptrs[0] = (void *)a; ptrs[1] = (void *)b; ptrs[2] = out; }
    else if (dir == DIR_BWD_DATA) { ptrs[0] = out; ptrs[1] = (void *)a; ptrs[2] = (void *)b; }
    else { ptrs[0] = (void *)a; ptrs[1] = out; ptrs[2] = (void *)b; }
}

static const int64_t graph_uids[3] = {UID_X, UID_W, UID_Y};

/* Whether the backward passes must be deterministic: unless
 * CTRAIN_CONV_NONDETERMINISTIC=1 they take only bit-reproducible
 * algorithms (the forward takes the fastest either way). */
static int want_deterministic(int dir)
{
    static int any = -1;
    if (any < 0) any = setting_switch(SET_CONV_NONDETERMINISTIC);
    return dir != DIR_FWD && !any;
}

/* p's convolution as a one-operation graph: parts[0..4] the tensors, the
 * convolution and the operation, parts[5] the finalized graph (NULL when
 * cuDNN declines it, the status in *st). Tensors as cuDNN's NHWC
 * convention wants them: dims (N, C, H, W) with strides (HWC, 1, WC, C),
 * the filter (K, C, R, S) with strides (RSC, 1, SC, C), i.e. our OHWI
 * weight. */
static void graph_describe(Ctx *c, const Plan *p, CgDesc parts[6], cudnnStatus_t *st)
{
    const Conv2dShape *s = &p->key.s;
    const cudnnDataType_t t = conv_cudnn_type((DType)p->key.dt);
    const int64_t Cp = p->Cp, al = p->key.align < 16 ? p->key.align : 16;
    const int64_t xd[4] = {s->N, Cp, s->H, s->W}, xs[4] = {(int64_t)s->H * s->W * Cp, 1,
                                                          (int64_t)s->W * Cp, Cp};
    const int64_t yd[4] = {s->N, s->K, s->P, s->Q}, ys[4] = {(int64_t)s->P * s->Q * s->K, 1,
                                                            (int64_t)s->Q * s->K, s->K};
    const int64_t wd[4] = {s->K, Cp, s->R, s->S}, ws[4] = {(int64_t)s->R * s->S * Cp, 1,
                                                          (int64_t)s->S * Cp, Cp};
    const int64_t pad[2] = {s->pad_h, s->pad_w}, str[2] = {s->stride_h, s->stride_w},
                  dil[2] = {s->dil_h, s->dil_w};
    parts[0] = cg_tensor(UID_X, t, 4, xd, xs, al, 0);
    parts[1] = cg_tensor(UID_W, t, 4, wd, ws, al, 0);
    parts[2] = cg_tensor(UID_Y, t, 4, yd, ys, al, 0);
    parts[3] = cg_conv_desc(2, pad, str, dil);
    const int cdir = p->key.dir == DIR_FWD ? CG_FPROP : p->key.dir == DIR_BWD_DATA ? CG_DGRAD
                                                                                   : CG_WGRAD;
    parts[4] = cg_conv_op(cdir, parts[3], parts[0], parts[1], parts[2], 1.0f,
                          p->key.accum ? 1.0f : 0.0f);
    parts[5] = cg_graph(c->cudnn, &parts[4], 1, st);
}

/* The numerical rule of p's search: strict f32 takes no tensor-core
 * (TF32) engine, f32 none that converts its inputs down, f16 and bf16 none
 * that reduces in reduced precision, and a deterministic backward none
 * marked non-deterministic. */
static CgRule graph_rule(Ctx *c, const Plan *p)
{
    CgRule rule = {0};
    if (p->key.dt == DT_F32) {
        rule.forbid_notes = CG_NOTE(CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS);
        if (!p->key.tf32) rule.forbid_notes |= CG_NOTE(CUDNN_NUMERICAL_NOTE_TENSOR_CORE);
    } else {
        rule.forbid_notes = CG_NOTE(CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION);
    }
    if (want_deterministic(p->key.dir))
        rule.forbid_notes |= CG_NOTE(CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC);
    rule.ws_limit = conv2d_cuda_search_ws_bytes(c);
    rule.all_engines = 1;
    return rule;
}

/* The graph API's fastest engine for p (one convolution of p's direction,
 * beta = the key's accum) under graph_rule, timed on the buffers; g->plan
 * NULL when cuDNN proposes none that the rule allows. */
static void graph_search(Ctx *c, Plan *p, const void *a, const void *b, void *out, CgPlan *g)
{
    memset(g, 0, sizeof *g);
    CgDesc parts[6];
    cudnnStatus_t st;
    graph_describe(c, p, parts, &st);
    const CgRule rule = graph_rule(c, p);
    void *ptrs[3];
    graph_ptrs(p->key.dir, a, b, out, ptrs);
    if (parts[5] && cg_search(c, parts[5], &rule, graph_uids, ptrs, 3, g)) {
        for (int i = 0; i < 6; i++) g->keep[g->nkeep++] = parts[i];
        return;
    }
    if (!parts[5]) LOG_D("conv2d_cuda: the graph API declines the %s graph: %s",
                         dir_names[p->key.dir], ct_cudnn_status_string(st));
    for (int i = 5; i >= 0; i--) cg_destroy(parts[i]);
}

/* p's graph plan from a kept engine and knobs (no search): 1, or 0 when
 * cuDNN or the rule refuses it now. */
static int graph_load(Ctx *c, Plan *p, int64_t engine, const int64_t (*knobs)[2], int nknobs)
{
    CgDesc parts[6];
    cudnnStatus_t st;
    graph_describe(c, p, parts, &st);
    const CgRule rule = graph_rule(c, p);
    if (parts[5] && cg_plan_for_engine(c, parts[5], &rule, engine, knobs, nknobs, &p->g)) {
        for (int i = 0; i < 6; i++) p->g.keep[p->g.nkeep++] = parts[i];
        return 1;
    }
    for (int i = 5; i >= 0; i--) cg_destroy(parts[i]);
    return 0;
}

/* cuDNN's search for p's direction on the prepared buffers (a = x or w,
 * b = w or dy, out); on success sets the plan's algorithm, workspace, math
 * type and the chosen one's time (p->ms). Returns the status: a failed
 * search or "no algorithm" is not fatal here (the caller may retry with
 * padded channels). */
static cudnnStatus_t cudnn_search(Ctx *c, Plan *p, const void *a, const void *b, void *out)
{
    size_t ws_bytes = conv2d_cuda_search_ws_bytes(c);
    int own_ws = ws_bytes > c->workspace_bytes;
    void *ws = own_ws ? mem_alloc(c, ws_bytes) : c->workspace;

    cudnnStatus_t status[CONV_MAX_ALGOS], st = CUDNN_STATUS_NOT_SUPPORTED;
    cudnnDeterminism_t det[CONV_MAX_ALGOS];
    cudnnMathType_t math[CONV_MAX_ALGOS];
    size_t mem[CONV_MAX_ALGOS];
    float tm[CONV_MAX_ALGOS];
    int algo[CONV_MAX_ALGOS], n = 0;
    const int legacy = p->key.engines != CONV2D_ENGINES_GRAPH;
    if (legacy) switch (p->key.dir) {
    case DIR_FWD: {
        cudnnConvolutionFwdAlgoPerf_t r[CONV_MAX_ALGOS];
        st = cudnnFindConvolutionForwardAlgorithmEx(c->cudnn, p->xd, a, p->wd, b, p->cd, p->yd,
                                                    out, CONV_MAX_ALGOS, &n, r, ws, ws_bytes);
        for (int i = 0; i < n; i++) {
            status[i] = r[i].status; det[i] = r[i].determinism; math[i] = r[i].mathType;
            mem[i] = r[i].memory; algo[i] = (int)r[i].algo; tm[i] = r[i].time;
        }
        break;
    }
    case DIR_BWD_DATA: {
        cudnnConvolutionBwdDataAlgoPerf_t r[CONV_MAX_ALGOS];
        st = cudnnFindConvolutionBackwardDataAlgorithmEx(c->cudnn, p->wd, a, p->yd, b, p->cd,
                                                         p->xd, out, CONV_MAX_ALGOS, &n, r, ws,
                                                         ws_bytes);
        for (int i = 0; i < n; i++) {
            status[i] = r[i].status; det[i] = r[i].determinism; math[i] = r[i].mathType;
            mem[i] = r[i].memory; algo[i] = (int)r[i].algo; tm[i] = r[i].time;
        }
        break;
    }
    default: {
        cudnnConvolutionBwdFilterAlgoPerf_t r[CONV_MAX_ALGOS];
        st = cudnnFindConvolutionBackwardFilterAlgorithmEx(c->cudnn, p->xd, a, p->yd, b, p->cd,
                                                           p->wd, out, CONV_MAX_ALGOS, &n, r,
                                                           ws, ws_bytes);
        for (int i = 0; i < n; i++) {
            status[i] = r[i].status; det[i] = r[i].determinism; math[i] = r[i].mathType;
            mem[i] = r[i].memory; algo[i] = (int)r[i].algo; tm[i] = r[i].time;
        }
        break;
    }
    }
    if (own_ws) mem_free(c, ws, ws_bytes);
    const int want_det = want_deterministic(p->key.dir);
    int i = st == CUDNN_STATUS_SUCCESS ? pick_result(status, det, n, want_det) : -1;
    p->algo = i >= 0 ? algo[i] : -1;
    p->ws_bytes = i >= 0 ? mem[i] : 0;
    p->ms = i >= 0 ? tm[i] : INFINITY;
    if (i >= 0 && !(p->key.dt == DT_F32 && !p->key.tf32))
        CUDNN_CHECK(cudnnSetConvolutionMathType(p->cd, math[i]));
    /* the graph API's engines against the legacy algorithm: the faster
     * one (by 3%, else the legacy one) runs this plan */
    if (p->key.engines != CONV2D_ENGINES_LEGACY) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        graph_search(c, p, a, b, out, &p->g);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        const double search_s =
            (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        if (p->g.plan)
            LOG_D("conv2d_cuda: %s N%d %dx%dx%d -> K%d %dx%d s%d %s: legacy algo %d %.3f ms, "
                  "graph engine %lld %.3f ms (%d tried in %.2f s)",
                  dir_names[p->key.dir], p->key.s.N, p->key.s.H, p->key.s.W, p->key.s.C,
                  p->key.s.K, p->key.s.R, p->key.s.S, p->key.s.stride_h,
                  dtype_name((DType)p->key.dt), i >= 0 ? algo[i] : -1,
                  i >= 0 ? (double)tm[i] : -1.0, (long long)p->g.engine, (double)p->g.ms,
                  p->g.tried, search_s);
        if (p->g.plan && i >= 0 && p->key.engines == CONV2D_ENGINES_FASTEST &&
            !(p->g.ms < 0.97f * tm[i]))
            cg_plan_free(&p->g);
        if (p->g.plan) {
            p->ms = p->g.ms;
            return CUDNN_STATUS_SUCCESS;
        }
    }
    if (i < 0) return st == CUDNN_STATUS_SUCCESS ? CUDNN_STATUS_NOT_SUPPORTED : st;
    return CUDNN_STATUS_SUCCESS;
}

/* ---- the GEMM candidate of a 1 x 1 plan (ops/conv_gemm.h) ---- */

/* One run of p as a GEMM on a search's operands (a = x or w, b = w or dy,
 * in the direction's order, as for cudnn_search). */
static void gemm_run(Ctx *c, const Plan *p, const void *a, const void *b, void *out)
{
    const Conv2dShape *s = &p->key.s;
    const DType dt = (DType)p->key.dt;
    if (p->key.dir == DIR_FWD) conv_gemm_forward_cuda(c, out, a, b, dt, s);
    else if (p->key.dir == DIR_BWD_DATA)
        conv_gemm_backward_data_cuda(c, out, b, a, dt, s, p->key.accum);
    else conv_gemm_backward_filter_cuda(c, out, b, a, dt, s, p->key.accum);
}

/* Its time: one run first (cuBLASLt's heuristic, and its timed choice
 * where CTRAIN_GEMM_SEARCH asks, are made there), then the median of
 * three, each timed alone with CUDA events on c's stream. */
static float gemm_time(Ctx *c, const Plan *p, const void *a, const void *b, void *out)
{
    gemm_run(c, p, a, b, out);
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    float ms[3];
    for (int r = 0; r < 3; r++) {
        CUDA_CHECK(cudaEventRecord(e0, c->stream));
        gemm_run(c, p, a, b, out);
        CUDA_CHECK(cudaEventRecord(e1, c->stream));
        CUDA_CHECK(cudaEventSynchronize(e1));
        CUDA_CHECK(cudaEventElapsedTime(&ms[r], e0, e1));
    }
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    const float lo = fminf(ms[0], fminf(ms[1], ms[2])), hi = fmaxf(ms[0], fmaxf(ms[1], ms[2]));
    return ms[0] + ms[1] + ms[2] - lo - hi;
}

/* Whether p may run as a GEMM: a 1 x 1 shape with C channels (no padded
 * copies), the mode not off, and rows and pointers of 4-byte multiples
 * (every cuBLASLt kernel takes those; ResNet's are 128-byte ones). */
static int gemm_candidate(const Plan *p)
{
    const Conv2dShape *s = &p->key.s;
    const size_t es = dtype_size((DType)p->key.dt);
    return p->key.gemm_mode != CONV2D_GEMM_OFF && conv_gemm_applies(s) && p->Cp == s->C &&
           (s->C * es) % 4 == 0 && (s->K * es) % 4 == 0 && p->key.align >= 4;
}

/* The search of p: cuDNN's (cudnn_search), and for a 1 x 1 plan with
 * C channels (CTRAIN_CONV_GEMM=search) the GEMM timed beside it, taken when
 * it is at least 3% faster than cuDNN's choice or cuDNN has none. Under
 * CTRAIN_CONV_GEMM=always such a plan is a GEMM without a cuDNN search
 * (run once here, so cuBLASLt's choice is made outside any capture). */
static cudnnStatus_t plan_search(Ctx *c, Plan *p, const void *a, const void *b, void *out)
{
    const int cand = gemm_candidate(p);
    p->gemm = 0;
    if (cand && p->key.gemm_mode == CONV2D_GEMM_ALWAYS) {
        p->algo = -1;
        p->ws_bytes = 0;
        p->gemm = 1;
        gemm_run(c, p, a, b, out);
        return CUDNN_STATUS_SUCCESS;
    }
    const cudnnStatus_t st = cudnn_search(c, p, a, b, out);
    if (!cand) return st;
    const float ms = gemm_time(c, p, a, b, out);
    const int found = st == CUDNN_STATUS_SUCCESS;
    const Conv2dShape *s = &p->key.s;
    LOG_D("conv2d_cuda: %s N%d %dx%dx%d -> K%d 1x1 s%dx%d %s: cuDNN %.3f ms, GEMM %.3f ms",
          dir_names[p->key.dir], s->N, s->H, s->W, s->C, s->K, s->stride_h, s->stride_w,
          dtype_name((DType)p->key.dt), found ? (double)p->ms : -1.0, (double)ms);
    if (found && !(ms < 0.97f * p->ms)) return st;
    p->gemm = 1;
    p->algo = -1;
    p->ws_bytes = 0;
    cg_plan_free(&p->g);
    return CUDNN_STATUS_SUCCESS;
}

/* The workspace p's legacy algorithm needs with p's descriptors (cuDNN
 * refuses an algorithm that does not serve them here), within what a
 * search could have given it. */
static cudnnStatus_t legacy_ws(Ctx *c, Plan *p)
{
    cudnnStatus_t st;
    if (p->key.dir == DIR_FWD)
        st = cudnnGetConvolutionForwardWorkspaceSize(c->cudnn, p->xd, p->wd, p->cd, p->yd,
                                                     (cudnnConvolutionFwdAlgo_t)p->algo,
                                                     &p->ws_bytes);
    else if (p->key.dir == DIR_BWD_DATA)
        st = cudnnGetConvolutionBackwardDataWorkspaceSize(c->cudnn, p->wd, p->yd, p->cd, p->xd,
                                                          (cudnnConvolutionBwdDataAlgo_t)p->algo,
                                                          &p->ws_bytes);
    else
        st = cudnnGetConvolutionBackwardFilterWorkspaceSize(
            c->cudnn, p->xd, p->yd, p->cd, p->wd, (cudnnConvolutionBwdFilterAlgo_t)p->algo,
            &p->ws_bytes);
    if (st == CUDNN_STATUS_SUCCESS && p->ws_bytes > conv2d_cuda_search_ws_bytes(c))
        st = CUDNN_STATUS_NOT_SUPPORTED;
    return st;
}

/* p, with full-N descriptors, takes the algorithm and math type that q
 * chose on the search slice; cuDNN sizes the workspace at full N. Fails
 * when cuDNN refuses the algorithm at full N, or when it would need more
 * workspace than a full search could have given it. */
static cudnnStatus_t plan_adopt(Ctx *c, Plan *p, const Plan *q)
{
    if (q->gemm) { /* a GEMM serves any N */
        p->gemm = 1;
        p->algo = -1;
        p->ws_bytes = 0;
        return CUDNN_STATUS_SUCCESS;
    }
    if (q->algo < 0) return CUDNN_STATUS_NOT_SUPPORTED; /* q has only a graph plan */
    cudnnMathType_t math;
    CUDNN_CHECK(cudnnGetConvolutionMathType(q->cd, &math));
    CUDNN_CHECK(cudnnSetConvolutionMathType(p->cd, math));
    p->algo = q->algo;
    return legacy_ws(c, p);
}

/* Run p on the operands — or, with search, let cuDNN choose p's algorithm
 * on them (returning its status). Handles the padded-channel copies and
 * keeps an accumulating output intact during a search. */
static cudnnStatus_t conv_exec(Ctx *c, Plan *p, const ConvArgs *a, int search)
{
    const Conv2dShape *s = &p->key.s;
    if (p->gemm && !search) { /* C channels: no padded copies; beta is the key's */
        gemm_run(c, p, a->dir == DIR_BWD_DATA ? a->w : a->x, a->dir == DIR_FWD ? a->w : a->dy,
                 a->out);
        return CUDNN_STATUS_SUCCESS;
    }
    const size_t es = dtype_size((DType)p->key.dt);
    const int C = s->C, Cp = p->Cp, padded = Cp != C;
    const size_t x_rows = (size_t)s->N * s->H * s->W, w_rows = (size_t)s->K * s->R * s->S;
    Scratch px = {0}, pw = {0}, pout = {0};
    const void *x = a->x, *w = a->w;
    void *out = a->out;
    /* inputs with C channels: padded copies */
    if (padded && a->dir != DIR_BWD_DATA) {
        px = scratch_alloc(c, x_rows * Cp * es, 256);
        pad_channels(c, px.p, a->x, x_rows, C, Cp, es);
        x = px.p;
    }
    if (padded && a->dir != DIR_BWD_FILTER) {
        pw = scratch_alloc(c, w_rows * Cp * es, 256);
        pad_channels(c, pw.p, a->w, w_rows, C, Cp, es);
        w = pw.p;
    }
    /* outputs with C channels: a padded buffer, preloaded when accumulating */
    size_t out_rows = a->dir == DIR_BWD_DATA ? x_rows : w_rows;
    if (padded && a->dir != DIR_FWD) {
        pout = scratch_alloc(c, out_rows * Cp * es, 256);
        if (a->accum && !search) pad_channels(c, pout.p, a->out, out_rows, C, Cp, es);
        out = pout.p;
    } else if (search && a->accum) {
        /* the search writes its output: keep the gradient being added to */
        pout = scratch_alloc(c, out_rows * C * es, p->key.align);
        out = pout.p;
    }

    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    if (search) {
        if (a->dir == DIR_FWD) st = plan_search(c, p, x, w, out);
        else if (a->dir == DIR_BWD_DATA) st = plan_search(c, p, w, a->dy, out);
        else st = plan_search(c, p, x, a->dy, out);
    } else if (p->g.plan) {
        void *ptrs[3];
        if (a->dir == DIR_FWD) graph_ptrs(a->dir, x, w, out, ptrs);
        else if (a->dir == DIR_BWD_DATA) graph_ptrs(a->dir, w, a->dy, out, ptrs);
        else graph_ptrs(a->dir, x, a->dy, out, ptrs);
        cg_execute(c, &p->g, graph_uids, ptrs, 3);
        if (padded && a->dir != DIR_FWD) unpad_channels(c, a->out, out, out_rows, C, Cp, es);
    } else {
        size_t own, ws_bytes;
        void *ws = ctx_workspace_call(c, p->ws_bytes, &own, &ws_bytes);
        const float one = 1.0f, beta = a->accum ? 1.0f : 0.0f;
        if (a->dir == DIR_FWD)
            CUDNN_CHECK(cudnnConvolutionForward(c->cudnn, &one, p->xd, x, p->wd, w, p->cd,
                                                (cudnnConvolutionFwdAlgo_t)p->algo, ws, ws_bytes,
                                                &beta, p->yd, out));
        else if (a->dir == DIR_BWD_DATA)
            CUDNN_CHECK(cudnnConvolutionBackwardData(c->cudnn, &one, p->wd, w, p->yd, a->dy,
                                                     p->cd, (cudnnConvolutionBwdDataAlgo_t)p->algo,
                                                     ws, ws_bytes, &beta, p->xd, out));
        else
            CUDNN_CHECK(cudnnConvolutionBackwardFilter(c->cudnn, &one, p->xd, x, p->yd, a->dy,
                                                       p->cd,
                                                       (cudnnConvolutionBwdFilterAlgo_t)p->algo,
                                                       ws, ws_bytes, &beta, p->wd, out));
        ctx_workspace_done(c, ws, own);
        if (padded && a->dir != DIR_FWD) unpad_channels(c, a->out, out, out_rows, C, Cp, es);
    }
    scratch_free(c, &px);
    scratch_free(c, &pw);
    scratch_free(c, &pout);
    return st;
}

/* p's descriptors with Cp channels and its algorithm. A batch larger than
 * n_search is searched on its first n_search images (a prefix of the same
 * buffers) and the choice moved to the full-N descriptors; should that
 * fail, the search runs again at full N. On failure p holds no
 * descriptors. */
static cudnnStatus_t plan_build(Ctx *c, Plan *p, int Cp, const ConvArgs *a, int n_search)
{
    if (p->key.s.N > n_search) {
        Plan q = *p;
        q.key.s.N = n_search;
        plan_descriptors(&q, Cp);
        cudnnStatus_t st = conv_exec(c, &q, a, 1);
        if (st != CUDNN_STATUS_SUCCESS) { /* no algorithm for the slice: none for all N */
            plan_destroy(&q);
            return st;
        }
        plan_descriptors(p, Cp);
        st = plan_adopt(c, p, &q);
        plan_destroy(&q);
        if (st == CUDNN_STATUS_SUCCESS) return st;
        LOG_D("conv2d_cuda: the %s algorithm %d searched on %d images does not serve N = %d "
              "(%s); searching at full N",
              dir_names[p->key.dir], p->algo, n_search, p->key.s.N, ct_cudnn_status_string(st));
        plan_destroy(p);
    }
    plan_descriptors(p, Cp);
    cudnnStatus_t st = conv_exec(c, p, a, 1);
    if (st != CUDNN_STATUS_SUCCESS) plan_destroy(p);
    return st;
}

/* p appended to the context's table; returns its place there. */
static Plan *plan_append(ConvCache *cc, const Plan *p)
{
    if (cc->n == cc->cap) {
        int cap = cc->cap ? 2 * cc->cap : 16;
        Plan *grown = realloc(cc->plans, sizeof(Plan) * (size_t)cap);
        CT_ASSERT(grown != NULL, "conv2d_cuda: out of host memory for %d plans", cap);
        cc->plans = grown;
        cc->cap = cap;
    }
    cc->plans[cc->n] = *p;
    return &cc->plans[cc->n++];
}

/* ---- choices kept on disk (ops/plan_store.h) ---- */

/* The store of this context's card: its identity is what a choice depends
 * on besides the key (card, architecture, SM count, driver, CUDA runtime,
 * cuDNN). */
void conv2d_cuda_store_identity(char *buf, size_t n)
{
    char dev[300];
    ctx_device_identity(dev, sizeof dev);
    snprintf(buf, n, "%s, cuDNN %zu", dev, cudnnGetVersion());
}

static PlanStore *store_for(ConvCache *cc)
{
    if (cc->store) return cc->store;
    char id[400];
    conv2d_cuda_store_identity(id, sizeof id);
    cc->store = plan_store_open_default("conv", id, "convolution plans");
    return cc->store;
}

/* The version of the search's rules (the candidates it times, the 3% margin,
 * the numerical rule): raise it when they change, so choices made under
 * the old rules are searched again. */
#define CONV_SEARCH_RULES 2

/* A plan's key as the store's text: the whole PlanKey, and the search's
 * rules that are not in it (determinism, the search workspace limit, the
 * search slice, the rules' version). The workspace the search could use
 * also depends on the free memory at the time; a choice made under memory
 * pressure is kept like any other (delete the file to search again). */
static void key_text(const PlanKey *k, int n_search, char *buf, size_t n)
{
    const Conv2dShape *s = &k->s;
    snprintf(buf, n,
             "%s N%d H%d W%d C%d K%d R%d S%d P%d Q%d stride%d,%d pad%d,%d dil%d,%d %s tf32=%d "
             "padmode=%d engines=%d gemm=%d accum=%d align=%u det=%d wsmax=%zuM slice=%d rules=%d",
             dir_names[k->dir], s->N, s->H, s->W, s->C, s->K, s->R, s->S, s->P, s->Q,
             s->stride_h, s->stride_w, s->pad_h, s->pad_w, s->dil_h, s->dil_w,
             dtype_name((DType)k->dt), k->tf32, k->pad_mode, k->engines, k->gemm_mode, k->accum,
             k->align,
             want_deterministic(k->dir), setting_size(SET_CONV_SEARCH_WS_MB) >> 20, n_search,
             CONV_SEARCH_RULES);
}

/* A searched plan as the store's text: the channels cuDNN saw, the legacy
 * algorithm and math type (-1: none), the graph engine and its knobs (-1
 * and "-": none). 0, or -1 when the plan cannot be written down whole (its
 * knobs unread, or too long a line): then it is not kept. */
static int value_text(const Plan *p, char *buf, size_t n)
{
    cudnnMathType_t math = CUDNN_DEFAULT_MATH;
    CUDNN_CHECK(cudnnGetConvolutionMathType(p->cd, &math));
    if (p->g.plan && p->g.nknobs < 0) return -1;
    int w = snprintf(buf, n, "Cp=%d algo=%d math=%d engine=%lld gemm=%d knobs=", p->Cp,
                     p->algo, (int)math, p->g.plan ? (long long)p->g.engine : -1LL, p->gemm);
    if (w <= 0 || (size_t)w >= n) return -1;
    return plan_store_pairs_text((const int64_t(*)[2])p->g.knobs, p->g.plan ? p->g.nknobs : 0,
                                 buf + w, n - (size_t)w);
}

/* p (key set, nothing built) from a kept value: 1 when cuDNN takes every
 * part of it, else 0 with p holding nothing (the caller searches). A value
 * is checked, not trusted: the channel count must be one a search could
 * choose, the algorithm one cuDNN accepts for the descriptors, the engine
 * one the numerical rule allows. */
static int plan_load(Ctx *c, Plan *p, const char *value)
{
    int Cp = 0, algo = -2, math = -1, gemm = -1, used = 0;
    long long engine = -2;
    char knobs[PLAN_STORE_VALUE_MAX];
    if (sscanf(value, "Cp=%d algo=%d math=%d engine=%lld gemm=%d knobs=%511s%n", &Cp, &algo,
               &math, &engine, &gemm, knobs, &used) != 6 || value[used] != '\0')
        return 0;
    const Conv2dShape *s = &p->key.s;
    p->Cp = Cp;
    if (gemm == 1 && !(gemm_candidate(p) && algo == -1 && engine == -1)) return 0;
    if ((Cp != s->C && Cp != conv_padded_c(s->C, (DType)p->key.dt)) || algo < -1 ||
        algo >= CONV_MAX_ALGOS || engine < -1 || (algo < 0 && engine < 0 && gemm != 1) ||
        (gemm != 0 && gemm != 1) ||
        (math != CUDNN_DEFAULT_MATH && math != CUDNN_TENSOR_OP_MATH &&
         math != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION && math != CUDNN_FMA_MATH))
        return 0;
    int64_t kv[CG_MAX_KNOBS][2];
    int nk = plan_store_pairs_parse(knobs, kv, CG_MAX_KNOBS);
    if (nk < 0) return 0;
    plan_descriptors(p, Cp);
    p->algo = algo;
    p->gemm = gemm;
    if (algo >= 0) {
        /* strict f32 keeps FMA whatever the value says */
        if (!(p->key.dt == DT_F32 && !p->key.tf32) &&
            cudnnSetConvolutionMathType(p->cd, (cudnnMathType_t)math) != CUDNN_STATUS_SUCCESS)
            goto refused;
        if (legacy_ws(c, p) != CUDNN_STATUS_SUCCESS) goto refused;
    }
    if (engine >= 0 && !graph_load(c, p, engine, (const int64_t(*)[2])kv, nk)) goto refused;
    return 1;
refused:
    plan_destroy(p);
    p->algo = -1;
    p->ws_bytes = 0;
    p->gemm = 0;
    return 0;
}

/* A writing backward plan (beta 0; p's key set, nothing built) from the
 * choice of its adding twin (the same key with beta 1): the twin in the
 * context's table (kept 0), or its value kept on disk (kept 1). 1 when
 * cuDNN takes the choice with p's beta (the same legacy algorithm, or the
 * same graph engine and knobs built with beta 0), else 0 with p holding
 * nothing. An adding plan, or a forward one, has no twin to follow. */
static int plan_from_twin(Ctx *c, ConvCache *cc, Plan *p, int n_search, int kept)
{
    if (p->key.dir == DIR_FWD || p->key.accum) return 0;
    PlanKey tk = p->key;
    tk.accum = 1;
    char v[PLAN_STORE_VALUE_MAX];
    if (!kept) {
        for (int i = 0; i < cc->n; i++)
            if (memcmp(&cc->plans[i].key, &tk, sizeof tk) == 0)
                return value_text(&cc->plans[i], v, sizeof v) == 0 && plan_load(c, p, v);
        return 0;
    }
    char ktext[PLAN_STORE_KEY_MAX];
    key_text(&tk, n_search, ktext, sizeof ktext);
    const char *value = plan_store_get(store_for(cc), ktext);
    return value && plan_load(c, p, value);
}

/* The GEMM mode of a plan's key: the context's for a 1 x 1 shape (in
 * strict f32 only under CONV2D_GEMM_F32), off for any other, so that
 * changing the mode searches only the plans it concerns. */
static int gemm_mode_for(Conv2dGemm mode, const Conv2dShape *s, DType dt, int tf32)
{
    if (!conv_gemm_applies(s)) return CONV2D_GEMM_OFF;
    if (mode == CONV2D_GEMM_F32 && !(dt == DT_F32 && !tf32)) return CONV2D_GEMM_OFF;
    return (int)mode;
}

/* The plan for this call: cached in the context, the choice of its adding
 * twin there (plan_from_twin), kept on disk from an earlier run
 * (ops/plan_store.h), its twin's kept there, or searched now; a plan not
 * kept as it is is kept then. Its own kept value comes before a kept
 * twin's, so a later run takes the choice an earlier one made. */
static Plan *plan_get(Ctx *c, const Conv2dShape *s, DType dt, const ConvArgs *a)
{
    ConvCache *cc = cache_for(c);
    PlanKey key;
    memset(&key, 0, sizeof key);
    key.s = *s;
    key.dir = a->dir;
    key.dt = dt;
    key.tf32 = dt == DT_F32 && c->allow_tf32;
    key.pad_mode = cc->pad_mode;
    key.engines = cc->engines;
    key.gemm_mode = gemm_mode_for(cc->gemm_mode, s, dt, key.tf32);
    key.accum = a->accum;
    uint32_t al = ptr_align(a->out);
    const void *ins[3] = {a->x, a->w, a->dy};
    for (int i = 0; i < 3; i++)
        if (ins[i] && ptr_align(ins[i]) < al) al = ptr_align(ins[i]);
    key.align = al;
    for (int i = 0; i < cc->n; i++)
        if (memcmp(&cc->plans[i].key, &key, sizeof key) == 0) return &cc->plans[i];

    Plan p;
    memset(&p, 0, sizeof p);
    p.key = key;
    const int Cp = conv_padded_c(s->C, dt);
    const int n_search = cc->search_max_n ? cc->search_max_n : CONV_SEARCH_MAX_N;
    char ktext[PLAN_STORE_KEY_MAX], vtext[PLAN_STORE_VALUE_MAX];
    key_text(&key, n_search, ktext, sizeof ktext);
    PlanStore *store = store_for(cc);
    if (plan_from_twin(c, cc, &p, n_search, 0)) goto keep;
    const char *kept = plan_store_get(store, ktext);
    if (kept && plan_load(c, &p, kept)) {
        cc->loaded++;
        return plan_append(cc, &p);
    }
    if (kept) LOG_D("conv2d_cuda: the kept plan \"%s\" for \"%s\" is refused now; searching",
                    kept, ktext);
    if (plan_from_twin(c, cc, &p, n_search, 1)) {
        cc->loaded++;
        goto keep;
    }
    cudnnStatus_t st = CUDNN_STATUS_NOT_SUPPORTED;
    if (!(cc->pad_mode == CONV2D_PAD_ALWAYS && Cp != s->C))
        st = plan_build(c, &p, s->C, a, n_search);
    if (st != CUDNN_STATUS_SUCCESS && Cp != s->C) st = plan_build(c, &p, Cp, a, n_search);
    if (st != CUDNN_STATUS_SUCCESS)
        ct_fatal_hint("run with --precision fp32 to tell a type limit from a shape limit, and "
                      "report the shape",
                      "conv2d_cuda: cuDNN has no %s algorithm for input [%d, %d, %d, %d] filter "
                      "[%d, %d, %d, %d] stride %dx%d pad %dx%d dilation %dx%d in %s%s: %s",
                      dir_names[a->dir], s->N, s->H, s->W, s->C, s->K, s->R, s->S, s->C,
                      s->stride_h, s->stride_w, s->pad_h, s->pad_w, s->dil_h, s->dil_w,
                      dtype_name(dt), key.tf32 ? " (tf32)" : "", ct_cudnn_status_string(st));
    cc->searched++;
keep:
    if (value_text(&p, vtext, sizeof vtext) == 0) plan_store_put(store, ktext, vtext);
    return plan_append(cc, &p);
}

static void conv_check_dtype(const char *fn, DType dt)
{
    CT_ASSERT(dt == DT_F32 || dt == DT_F16 || dt == DT_BF16,
              "%s: dtype %s; expected f32, f16 or bf16", fn, dtype_name(dt));
}

/* ---- batch chunks ---- */

/* Images per cuDNN call: all N when x (with Cp channels) and y fit the
 * element limit; otherwise the fewest chunks that fit, evened out
 * (ceil(N / chunks) each, the last one the remainder). */
static int conv_chunk_n(Ctx *c, const Conv2dShape *s, DType dt)
{
    const ConvCache *cc = cache_for(c);
    const size_t limit = cc->max_elems ? cc->max_elems : CONV_MAX_ELEMS;
    const size_t x_img = (size_t)s->H * s->W * conv_padded_c(s->C, dt);
    const size_t y_img = (size_t)s->P * s->Q * s->K;
    const size_t img = x_img > y_img ? x_img : y_img, N = (size_t)s->N;
    if (N * img <= limit) return s->N;
    if (img > limit)
        ct_fatal_hint("use a smaller image or fewer channels",
                      "conv2d_cuda: one image of input [%d, %d, %d] / output [%d, %d, %d] has "
                      "%zu elements, more than cuDNN's limit of %zu for one tensor",
                      s->H, s->W, s->C, s->P, s->Q, s->K, img, limit);
    const size_t fit = limit / img, chunks = (N + fit - 1) / fit;
    return (int)((N + chunks - 1) / chunks);
}

/* Run a on images [n0, n0 + nb) of the batch (nb clipped at N): NHWC is
 * batch-major, so the slice of x, y, dx, dy is contiguous. dw is whole;
 * the caller sets a->accum per chunk. */
static void conv_slice(Ctx *c, const Conv2dShape *s, DType dt, const ConvArgs *a, int n0, int nb)
{
    const size_t es = dtype_size(dt);
    const size_t x_off = (size_t)n0 * s->H * s->W * s->C * es;
    const size_t y_off = (size_t)n0 * s->P * s->Q * s->K * es;
    Conv2dShape cs = *s;
    cs.N = s->N - n0 < nb ? s->N - n0 : nb;
    ConvArgs ca = *a;
    if (a->x) ca.x = (const char *)a->x + x_off;
    if (a->dy) ca.dy = (const char *)a->dy + y_off;
    if (a->dir == DIR_FWD) ca.out = (char *)a->out + y_off;
    if (a->dir == DIR_BWD_DATA) ca.out = (char *)a->out + x_off;
    conv_exec(c, plan_get(c, &cs, dt, &ca), &ca, 0);
}

/* ---- the three directions ---- */

void conv2d_forward_cuda(Ctx *c, void *y, const void *x, const void *w, DType dt,
                         const Conv2dShape *s)
{
    conv_check_dtype("conv2d_forward_cuda", dt);
    if (conv_stem_applies(c, s, dt)) {   /* ResNet's stem: ctrain's kernels when asked */
        conv_stem_forward_cuda(c, y, x, w, dt, s);
        return;
    }
    const ConvArgs a = {DIR_FWD, x, w, NULL, y, 0};
    const int nb = conv_chunk_n(c, s, dt);
    for (int n0 = 0; n0 < s->N; n0 += nb) conv_slice(c, s, dt, &a, n0, nb);
}

/* forward: y = conv(x, w)   so   dx (+)= conv^T(dy, w) */
void conv2d_backward_data_cuda(Ctx *c, void *dx, const void *dy, const void *w, DType dt,
                               const Conv2dShape *s, int accum)
{
    conv_check_dtype("conv2d_backward_data_cuda", dt);
    const ConvArgs a = {DIR_BWD_DATA, NULL, w, dy, dx, accum ? 1 : 0};
    const int nb = conv_chunk_n(c, s, dt);
    for (int n0 = 0; n0 < s->N; n0 += nb) conv_slice(c, s, dt, &a, n0, nb);
}

/* forward: y = conv(x, w)   so   dw (+)= sum over n,p,q of dy[n,p,q,k] x-window[n,p,q] */
void conv2d_backward_filter_cuda(Ctx *c, void *dw, DType tdw, const void *dy, const void *x,
                                 DType dt, const Conv2dShape *s, int accum)
{
    conv_check_dtype("conv2d_backward_filter_cuda", dt);
    conv_check_dtype("conv2d_backward_filter_cuda (dw)", tdw);
    if (tdw == DT_F32 && conv_stem_applies(c, s, dt)) {
        conv_stem_backward_filter_cuda(c, (float *)dw, dy, x, dt, s, accum);
        return;
    }
    /* cuDNN's dw has x's type: for another tdw it goes to a temporary in
     * x's type that is added (cast) into dw, chunk by chunk, so the sum
     * over the chunks is taken in dw's type */
    const size_t n = (size_t)s->K * s->R * s->S * s->C, bytes = n * dtype_size(dt);
    if (s->N == 0) {   /* an empty batch: dw written as zeros, or left as it is */
        if (!accum) mem_zero(c, dw, n * dtype_size(tdw));
        return;
    }
    void *tmp = tdw == dt ? NULL : mem_alloc(c, bytes);
    const int nb = conv_chunk_n(c, s, dt);
    for (int n0 = 0; n0 < s->N; n0 += nb) {
        const int acc = n0 > 0 || accum; /* later chunks add to the first */
        const ConvArgs a = {DIR_BWD_FILTER, x, NULL, dy, tmp ? tmp : dw, tmp ? 0 : acc};
        conv_slice(c, s, dt, &a, n0, nb);
        if (tmp) cast_cuda(dw, tdw, tmp, dt, n, acc, c->stream);
    }
    if (tmp) mem_free(c, tmp, bytes);
}
#else
typedef int ct_conv2d_cudnn_unused_; /* ISO C forbids an empty translation unit */
#endif
