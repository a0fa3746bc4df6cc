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

/* The plan of one engine (global index) with the given knob settings for
 * g, as a search found it earlier (a kept choice, ops/plan_store.h): 1 with
 * out->plan set, or 0 when cuDNN refuses it now or the engine carries a
 * note the rule forbids or needs more workspace than the rule allows. No
 * run, no timing (out->ms is 0). */
int cg_plan_for_engine(Ctx *c, CgDesc g, const CgRule *rule, int64_t engine,
                       const int64_t (*knobs)[2], int nknobs, CgPlan *out);

/* One run of p on c->stream with the shared workspace (ctx_workspace). */
void cg_execute(Ctx *c, const CgPlan *p, const int64_t *uids, void *const *ptrs, int n);

/* Frees the plan and what it keeps. */
void cg_plan_free(CgPlan *p);
void cg_destroy(CgDesc d);   /* NULL is fine */

#ifdef __cplusplus
}
#endif
#endif
#endif
