/* cudnn_graph.h — a small C layer over cuDNN's graph (backend) API: tensors
 * and operation graphs built from C, engine configurations proposed by
 * cuDNN's heuristics, each candidate finalized as an execution plan and
 * timed on the real buffers, the fastest kept and run.
 *
 * The legacy API (cudnnConvolutionForward and its Find) offers a fixed list
 * of about eight algorithms per direction. The graph API describes the work
 * as a graph of operations on tensors named by unique ids (uids) and lets
 * cuDNN propose engines for it: the same kernels the legacy algorithms map
 * to, plus engines the legacy list does not reach, and — for graphs of
 * several operations — fused kernels (a convolution with its epilogue, the
 * statistics of its output). A plan is one engine with its knob settings
 * for one graph; running it takes a "variant pack": the device pointer of
 * every non-virtual tensor by uid, and the workspace.
 *
 *   graph = cg_graph(handle, ops)            operations -> finalized graph
 *   cg_search(c, graph, rule, uids, ptrs)    heuristics (mode A, then the
 *                                            fallback list; optionally every
 *                                            other engine) -> candidates that
 *                                            pass `rule` -> plans -> timed ->
 *                                            the fastest
 *   cg_execute(c, plan, uids, ptrs)          one run on c->stream (capturable)
 *   cg_first_plan(c, graph, rule, ...)       the heuristics' first candidate that
 *                                            finalizes, untimed, with each
 *                                            candidate's notes and status (graphs
 *                                            whose engines compile at plan time)
 *
 * Numerical rule: an engine carries notes (tensor cores, down-converted
 * inputs, reduced-precision reduction, non-deterministic, FFT, Winograd);
 * a search drops engines with a forbidden note — strict f32 forbids tensor
 * cores (TF32), a deterministic backward forbids non-determinism — and
 * engines that compile kernels at run time unless asked for (seconds per
 * candidate).
 *
 * A plain C file over cuDNN's C API, built with -DCTRAIN_CUDA only.
 */
#ifndef CTRAIN_OPS_CUDNN_GRAPH_H
#define CTRAIN_OPS_CUDNN_GRAPH_H

#ifdef CTRAIN_CUDA
#include <stddef.h>
#include <stdint.h>

#include <cudnn.h>

#include "engine/ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef cudnnBackendDescriptor_t CgDesc;

/* A tensor: dims and strides in cuDNN's order (N, C, spatial...), the
 * pointer alignment in bytes its buffers will have, virtual when it lives
 * only inside a fused kernel. Fatal on a cuDNN error (a bug, not a shape
 * cuDNN declines: that shows at the graph or plan). */
CgDesc cg_tensor(int64_t uid, cudnnDataType_t t, int nd, const int64_t *dims,
                 const int64_t *strides, int64_t align, int is_virtual);

/* A convolution (cross-correlation, f32 accumulation) over nsp spatial
 * dimensions: padding, stride and dilation per dimension. */
CgDesc cg_conv_desc(int nsp, const int64_t *pad, const int64_t *stride, const int64_t *dil);
/* The same with the padding before (pre) and after (post) each spatial
 * dimension apart: a correlation whose output starts at the input's first
 * row but reads one row past its last (pre 0, post 1), as the phases of a
 * strided convolution's data gradient do (scripts/cudnn_dgrad_probe.c). */
CgDesc cg_conv_desc_pads(int nsp, const int64_t *pre, const int64_t *post, const int64_t *stride,
                         const int64_t *dil);

/* One convolution operation of a direction:
 *   CG_FPROP  y  = alpha conv(x, w)     + beta y
 *   CG_DGRAD  dx = alpha conv^T(dy, w)  + beta dx     (a = dx, c = dy)
 *   CG_WGRAD  dw = alpha corr(x, dy)    + beta dw     (b = dw, c = dy)
 * a, b, c are the x, w, y tensors of that direction. */
enum { CG_FPROP = 0, CG_DGRAD = 1, CG_WGRAD = 2 };
CgDesc cg_conv_op(int dir, CgDesc conv, CgDesc a, CgDesc b, CgDesc c, float alpha, float beta);
/* The same, NULL instead of fatal when cuDNN refuses it (or an operand is
 * NULL): for graphs that probe what a card supports. */
CgDesc cg_conv_op_try(int dir, CgDesc conv, CgDesc a, CgDesc b, CgDesc c, float alpha,
                      float beta);

/* Operations that a convolution's fused graphs are built from (the
 * runtime-fusion engines take pointwise operations before a convolution,
 * on its input, and pointwise operations and reductions after it). Each
 * returns NULL when cuDNN refuses the operation itself (its tensors' types
 * or shapes): a probe of what a card supports, not a bug. Math in f32.
 *   cg_pointwise_op   y = op(x) or y = op(x, b): CUDNN_POINTWISE_ADD, _SUB,
 *                     _MUL, _RELU_FWD, _IDENTITY (b NULL for the unary ones); the
 *                     pointwise descriptor it needs comes back in *pw (the
 *                     caller keeps it as long as the operation)
 *   cg_relu_bwd_op    dx = dy where x > 0, else 0 (x the forward's input)
 *   cg_genstats_op    sum[c] = sum of x over N, H, W; sqsum[c] of x^2
 *   cg_reduction_op   y = the sum of x over the dimensions where y has 1;
 *                     deterministic 1 asks for a deterministic reduction
 *                     (skipped where cuDNN knows no such attribute, before
 *                     9.11), 2 requires it (refused there); its descriptor
 *                     in *red */
CgDesc cg_pointwise_op(int mode, CgDesc x, CgDesc b, CgDesc y, CgDesc *pw);
CgDesc cg_relu_bwd_op(CgDesc dy, CgDesc x, CgDesc dx, CgDesc *pw);
/* cg_pointwise_op with b scaled by alpha2 first: y = op(x, alpha2 b) (ADD
 * with alpha2 = -1 subtracts, as cuDNN's batch-norm fusion patterns write
 * x - mean) */
CgDesc cg_pointwise_op2(int mode, CgDesc x, CgDesc b, float alpha2, CgDesc y, CgDesc *pw);
/* Batch norm's backward weights (cuDNN's DBN weight operation): from the
 * input x, its mean and invstd, the scale gamma and the gradient dy,
 *   dscale = sum dy xhat,  dbias = sum dy  (per channel, f32)
 * and the coefficients of dx = eq_dy dy + eq_x x + eq_bias. */
CgDesc cg_bn_bwd_weights_op(CgDesc x, CgDesc mean, CgDesc invstd, CgDesc scale, CgDesc dy,
                            CgDesc dscale, CgDesc dbias, CgDesc eq_dy, CgDesc eq_x,
                            CgDesc eq_bias);
CgDesc cg_genstats_op(CgDesc x, CgDesc sum, CgDesc sqsum);
CgDesc cg_reduction_op(CgDesc x, CgDesc y, int deterministic, CgDesc *red);
/* The same as cg_tensor, NULL instead of fatal when cuDNN refuses it. */
CgDesc cg_tensor_try(int64_t uid, cudnnDataType_t t, int nd, const int64_t *dims,
                     const int64_t *strides, int64_t align, int is_virtual);

/* ---- the operations of attention graphs ----
 * Fused attention (cuDNN's runtime fusion engines for scaled dot-product
 * attention) is matched from a graph of matmuls, pointwise operations,
 * reductions, a random-number operation and reshapes. Like the ones above,
 * each returns NULL when cuDNN refuses it.
 *
 * cg_tensor_ex_try   cg_tensor_try with flags: CG_VIRTUAL (lives only inside a
 *                    fused kernel), CG_BY_VALUE (a scalar the variant pack
 *                    passes as a HOST pointer: attention's scale, dropout's
 *                    scales), CG_REORDER_F16x16 (cuDNN's F16x16 reordering,
 *                    which cuDNN 8.9's attention samples set on the softmax
 *                    output and its dropout; left unset otherwise) */
enum { CG_VIRTUAL = 1, CG_BY_VALUE = 2, CG_REORDER_F16x16 = 4 };
CgDesc cg_tensor_ex_try(int64_t uid, cudnnDataType_t t, int nd, const int64_t *dims,
                        const int64_t *strides, int64_t align, int flags);
/* A [1, 1, 1, 1] tensor of type t: in device memory (a dropout seed or
 * offset), or by value (by_value 1: a host pointer in the variant pack). */
CgDesc cg_scalar_try(int64_t uid, cudnnDataType_t t, int by_value);
/* Any pointwise mode, math in prec (CUDNN_DATA_FLOAT; CUDNN_DATA_BOOLEAN for
 * the comparisons' masks, CUDNN_DATA_INT32 for indices): y = op(x),
 * op(x, b), or for CUDNN_POINTWISE_BINARY_SELECT y = t ? x : b. axis >= 0
 * is CUDNN_POINTWISE_GEN_INDEX's axis (y = each element's index along it of
 * x's shape); -1 sets none. b, t NULL where the mode takes fewer inputs
 * (cg_pointwise_op2: f32 math, an alpha2, no axis, no t). */
CgDesc cg_pointwise_op3(int mode, cudnnDataType_t prec, int64_t axis, CgDesc x, CgDesc b,
                        CgDesc t, CgDesc y, CgDesc *pw);
/* C = A B over the last two dimensions, batched over the leading ones
 * (broadcast where A or B has 1), f32 accumulation; its descriptor in *mm. */
CgDesc cg_matmul_op(CgDesc a, CgDesc b, CgDesc c, CgDesc *mm);
/* cg_reduction_op with the operator: CUDNN_REDUCE_TENSOR_ADD (what
 * cg_reduction_op does), _MAX, ... over the dimensions where y has 1. */
CgDesc cg_reduction_op_mode(int mode, CgDesc x, CgDesc y, int deterministic, CgDesc *red);
/* y = Bernoulli draws (1 with probability keep, else 0), from Philox with
 * the seed and offset tensors (int64 [1, 1, 1, 1] in device memory): a
 * dropout mask keeps with keep = 1 - p. Its descriptor in *rng. */
CgDesc cg_rng_op(double keep, CgDesc seed, CgDesc offset, CgDesc y, CgDesc *rng);
/* y = x's elements seen through y's dims and strides (a transpose is a
 * reshape whose last two dims and strides swap); y may change the type. */
CgDesc cg_reshape_op(CgDesc x, CgDesc y);

/* A finalized operation graph of ops[0..n-1], or NULL when cuDNN declines
 * it (the status in *st when st is not NULL). */
CgDesc cg_graph(cudnnHandle_t h, const CgDesc *ops, int n, cudnnStatus_t *st);

/* Bits of (1u << cudnnBackendNumericalNote_t) that a search refuses. */
#define CG_NOTE(n) (1u << (n))

typedef struct {
    uint32_t forbid_notes;   /* CG_NOTE(...) | ... */
    int runtime_compile;     /* engines that compile at run time allowed (at most
                              * 2 max_candidates of them tried) */
    int all_engines;         /* also every engine the heuristics did not propose */
    int max_candidates;      /* plans timed at most (0: 32) */
    size_t ws_limit;         /* the largest workspace a candidate may need */
} CgRule;

#define CG_KEEP 12
#define CG_MAX_KNOBS CUDNN_KNOB_TYPE_COUNTS   /* at most one choice per knob type */

typedef struct {
    CgDesc plan;            /* NULL: none */
    CgDesc keep[CG_KEEP];   /* the graph and its parts, alive as long as the plan */
    int nkeep;
    size_t ws_bytes;
    int64_t engine;         /* cuDNN's global engine index */
    int nknobs;             /* the engine's knob settings: (cudnnBackendKnobType_t, value);
                             * -1: they could not be read whole (the plan runs, but
                             * cannot be rebuilt from them) */
    int64_t knobs[CG_MAX_KNOBS][2];
    float ms;               /* measured time of one run */
    int tried;              /* candidates timed in the search */
    int over_ws;            /* candidates dropped for needing more than the rule's workspace */
    int run_failed;         /* candidates whose timed runs failed */
    int dropped_notes;      /* candidates dropped for a note the rule forbids */
    uint32_t notes_seen;    /* those notes, CG_NOTE bits */
} CgPlan;

/* The fastest plan for graph g under rule, timed on the variant pack
 * (uids[i] -> ptrs[i], i < n) on c->stream: one untimed run and three timed
 * ones per candidate. It synchronizes and allocates (warm-up, never
 * capture). Returns 0 and best->plan NULL when no candidate passes. */
int cg_search(Ctx *c, CgDesc g, const CgRule *rule, const int64_t *uids, void *const *ptrs,
              int n, CgPlan *best);

/* One configuration the heuristics proposed, as cg_first_plan saw it. */
typedef struct {
    int64_t engine;          /* cuDNN's global engine index (-1: unreadable) */
    uint32_t notes;          /* numerical notes, CG_NOTE bits */
    uint32_t behavior;       /* behaviour notes, CG_NOTE(CUDNN_BEHAVIOR_NOTE_...) bits */
    int fallback;            /* proposed by the fallback list, not by mode A */
    int skipped;             /* CG_SKIP_*: why no plan was tried */
    cudnnStatus_t status;    /* the plan's finalize when tried: SUCCESS or cuDNN's refusal */
    size_t ws_bytes;         /* the plan's workspace when it finalized */
} CgCandidate;
enum { CG_TRIED = 0, CG_SKIP_NOTE, CG_SKIP_COMPILE, CG_SKIP_WS, CG_SKIP_REPEAT, CG_SKIP_CAP };

/* The first plan for g that cuDNN finalizes, in the heuristics' order (mode
 * A, then the fallback list), skipping what rule forbids (notes, run-time
 * compiled engines unless allowed, at most rule->max_candidates (0: 8)
 * finalize attempts, workspace over rule->ws_limit). No run, no timing:
 * for graphs whose engines compile at plan time (seconds each). Each config
 * looked at goes into cand[0..*ncand-1] (at most max_cand of them). 1 with
 * out->plan set, else 0. */
int cg_first_plan(Ctx *c, CgDesc g, const CgRule *rule, CgPlan *out, CgCandidate *cand,
                  int max_cand, int *ncand);

/* A variant pack for a plan: uids[i] -> ptrs[i] (device pointers; host
 * pointers for by-value tensors) and the workspace; NULL with the status in
 * *st (when st is not NULL) when cuDNN refuses it. Run with
 * cudnnBackendExecute(handle, plan, pack). */
CgDesc cg_variant_pack_try(const int64_t *uids, void *const *ptrs, int n, void *workspace,
                           cudnnStatus_t *st);

/* The plan of one engine (global index) with the given knob settings for
 * g, as a search found it earlier (a kept choice, ops/plan_store.h): 1 with
 * out->plan set, or 0 when cuDNN refuses it now or the engine carries a
 * note the rule forbids or needs more workspace than the rule allows. No
 * run, no timing (out->ms is 0). */
int cg_plan_for_engine(Ctx *c, CgDesc g, const CgRule *rule, int64_t engine,
                       const int64_t (*knobs)[2], int nknobs, CgPlan *out);

/* An engine's knobs for graph g: type (cudnnBackendKnobType_t), the range of
 * its values and their stride, as cuDNN reports them. */
typedef struct {
    int64_t type, min, max, stride;
} CgKnobInfo;
/* Engine `engine`'s knobs for g into out[0..max-1]: their count, or -1 when
 * cuDNN does not give them (a probe's view of what a search could vary). */
int cg_engine_knobs(CgDesc g, int64_t engine, CgKnobInfo *out, int max);

/* One run of p on c->stream. cg_execute, the convolutions' (conv2d, the
 * fused conv + batch-norm graphs): a workspace as a convolution's
 * (ctx_workspace_call: past the shared one's size, a block for the call
 * under CTRAIN_CONV_WS=per_call); fatal on a cuDNN error. cg_execute_try,
 * attention's: the shared workspace (ctx_workspace; attention has not been
 * measured with blocks of its own), and cuDNN's status returned (a refusal
 * to run, for a caller with another path). */
void cg_execute(Ctx *c, const CgPlan *p, const int64_t *uids, void *const *ptrs, int n);
cudnnStatus_t cg_execute_try(Ctx *c, const CgPlan *p, const int64_t *uids, void *const *ptrs,
                             int n);

/* Frees the plan and what it keeps. */
void cg_plan_free(CgPlan *p);
void cg_destroy(CgDesc d);   /* NULL is fine */

#ifdef __cplusplus
}
#endif
#endif
#endif
