/* conv2d.h — 2-D convolution, NHWC, groups = 1, no bias (ResNet's convs).
 *
 * Shape letters: N batch; H W input height and width; C input channels;
 * K output channels (filters); R S filter height and width; P Q output height
 * and width.
 *
 *   x [N, H, W, C]      w [K, R, S, C] (OHWI in memory)      y [N, P, Q, K]
 *   P = (H + 2 pad_h - dil_h (R - 1) - 1) / stride_h + 1     (Q likewise)
 *
 *   y[n,p,q,k] = sum_{r,s,c} x[n, p*stride_h - pad_h + r*dil_h,
 *                                 q*stride_w - pad_w + s*dil_w, c] * w[k,r,s,c]
 * (cross-correlation, as PyTorch's Conv2d; x is 0 outside [0,H) x [0,W)).
 *
 * The weight is OHWI in memory because the registry stores conv weights
 * with LAYOUT_OHWI (PyTorch's [K, C, R, S] is only the on-disk layout): then
 * one output pixel is a dot product of a contiguous R*S*C window row with a
 * contiguous weight row, both on the CPU (im2col + one matmul) and for
 * cuDNN's NHWC kernels.
 *
 * Kernel-level contract (the tensor op op_conv2d at the bottom dispatches here):
 *   - CPU reference in f32 (ops/conv2d.c): im2col + matmul_cpu.
 *   - CUDA through cuDNN (ops/conv2d_cudnn.c): storage type dt in {f32, f16,
 *     bf16} for x, w, y, dx, dy; f32 accumulation always; f32 uses TF32
 *     tensor cores only when c->allow_tf32.
 * `accum`: 0 writes the result, 1 adds it to what the output holds.
 */
#ifndef CTRAIN_OPS_CONV2D_H
#define CTRAIN_OPS_CONV2D_H

#include "engine/ctx.h"
#include "engine/dtype.h"
#include "engine/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct Conv2dShape {
    int N, H, W, C;          /* input */
    int K, R, S;             /* filters */
    int P, Q;                /* output (derived) */
    int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
} Conv2dShape;

/* The shape of one convolution, P and Q computed; fatal with a hint when a
 * size is not positive or the (dilated) filter does not fit the padded
 * input (P or Q would be < 1). */
Conv2dShape conv2d_shape(int N, int H, int W, int C, int K, int R, int S, int stride_h,
                         int stride_w, int pad_h, int pad_w, int dil_h, int dil_w);

/* ---- CPU reference (f32) ----
 * The batch is processed in chunks of whole images so the im2col buffer
 * stays at most CONV2D_CPU_COL_BYTES (or one image, when one image is
 * larger). 1x1 stride-1 unpadded convolutions need no im2col at all. */
#define CONV2D_CPU_COL_BYTES ((size_t)64 << 20)

/* forward: y[NPQ, K] = cols[NPQ, RSC] @ w[K, RSC]^T  (y is written) */
void conv2d_forward_cpu(float *y, const float *x, const float *w, const Conv2dShape *s);
/* backward data: dcols = dy @ w, dx (+)= col2im(dcols) */
void conv2d_backward_data_cpu(float *dx, const float *dy, const float *w,
                              const Conv2dShape *s, int accum);
/* backward filter: dw[K, RSC] (+)= dy[NPQ, K]^T @ cols[NPQ, RSC] */
void conv2d_backward_filter_cpu(float *dw, const float *dy, const float *x,
                                const Conv2dShape *s, int accum);

#ifdef CTRAIN_CUDA
/* ---- CUDA (cuDNN) ----
 * dt is the storage type of x, w, y, dx, dy. The algorithm of each
 * (direction, shape, dt, TF32 setting) is searched once, on the first call
 * (cuDNN times the candidates: that call synchronizes and allocates, so it
 * belongs to warm-up, never to CUDA graph capture); later calls are a table
 * lookup and one cuDNN call on c->stream, using the shared workspace.
 * A batch whose x or y would pass cuDNN's INT32_MAX elements per tensor
 * runs as several calls on chunks of whole images (each chunk size is a
 * plan), and a batch above 256 images is searched on its first 256. */
void conv2d_forward_cuda(Ctx *c, void *y, const void *x, const void *w, DType dt,
                         const Conv2dShape *s);
void conv2d_backward_data_cuda(Ctx *c, void *dx, const void *dy, const void *w, DType dt,
                               const Conv2dShape *s, int accum);
/* dw has type tdw: the f32 parameter gradient (any dt), or dt itself.
 * cuDNN computes the filter gradient in x's type; for tdw != dt it goes
 * through a temporary of type dt that is then added (cast) into dw. */
void conv2d_backward_filter_cuda(Ctx *c, void *dw, DType tdw, const void *dy, const void *x,
                                 DType dt, const Conv2dShape *s, int accum);

/* Channel padding, for C that cuDNN's NHWC kernels handle badly (the RGB
 * stem, C = 3): the input and filter are copied into buffers whose channel
 * count is rounded up to 16 bytes (8 for f16/bf16, 4 for f32) with zeros in
 * the extra channels, which changes no result. CONV2D_PAD_AUTO (default)
 * pads only when cuDNN offers no algorithm for the unpadded shape;
 * CONV2D_PAD_ALWAYS pads every C that is not such a multiple (tests use it
 * to run the padded path; it may also be faster for the stem). A context's
 * mode starts from CTRAIN_CONV_PAD (auto or always). */
typedef enum { CONV2D_PAD_AUTO = 0, CONV2D_PAD_ALWAYS = 1 } Conv2dPadMode;
void conv2d_cuda_set_pad_mode(Ctx *c, Conv2dPadMode mode);


/* Which of cuDNN's two APIs may serve a plan. The legacy API's search
 * (cudnnFind*AlgorithmEx) times its fixed list of algorithms; the graph
 * API's (ops/cudnn_graph.h) times the engines cuDNN's heuristics propose
 * for a one-convolution graph, under the same numerical rule (strict f32:
 * no TF32; deterministic backward unless CTRAIN_CONV_NONDETERMINISTIC).
 * CONV2D_ENGINES_FASTEST (default, CTRAIN_CONV_ENGINES=fastest) runs both
 * and keeps the graph engine when it is at least 3% faster; _LEGACY and
 * _GRAPH run one search only (with _GRAPH a shape the graph API has no
 * engine for is an error: it is for tests and comparisons, not a run's
 * default). The mode is part of a plan's key: set it before the shapes run. */
typedef enum {
    CONV2D_ENGINES_FASTEST = 0,
    CONV2D_ENGINES_LEGACY = 1,
    CONV2D_ENGINES_GRAPH = 2
} Conv2dEngines;
void conv2d_cuda_set_engines(Ctx *c, Conv2dEngines e);
/* Plans of c that run a graph-API engine. */
int conv2d_cuda_graph_plan_count(Ctx *c);

/* 1 x 1 convolutions (no padding, dilation 1, any stride) as cuBLASLt
 * GEMMs on the NHWC rows (ops/conv_gemm.h). CONV2D_GEMM_SEARCH times the
 * GEMM beside cuDNN's choice in each such plan's search and keeps it when
 * it is at least 3% faster; _F32 does so in strict f32 only (where cuDNN
 * has NCHW kernels only); _OFF never; _ALWAYS makes every such plan a GEMM
 * without a cuDNN search (tests, comparisons). A context starts from
 * CTRAIN_CONV_GEMM; the mode is part of a 1 x 1 plan's key. */
typedef enum {
    CONV2D_GEMM_OFF = 0,
    CONV2D_GEMM_F32 = 1,
    CONV2D_GEMM_SEARCH = 2,
    CONV2D_GEMM_ALWAYS = 3
} Conv2dGemm;
void conv2d_cuda_set_gemm(Ctx *c, Conv2dGemm mode);
/* Plans of c that run as a GEMM. */
int conv2d_cuda_gemm_plan_count(Ctx *c);

/* Test hook: the element limit of one cuDNN tensor (batch chunking) and
 * the images the algorithm search runs on; 0 restores the default
 * (INT32_MAX, 256). Lives with the plans: conv2d_cuda_release resets it. */
void conv2d_cuda_set_limits(Ctx *c, size_t max_elems, int search_max_n);

/* The workspace a search may try candidates with: CTRAIN_CONV_SEARCH_WS_MB,
 * at most half the free device memory and half of what CTRAIN_MEM_LIMIT
 * leaves, and never less than c's workspace. */
size_t conv2d_cuda_search_ws_bytes(Ctx *c);

/* The identity plan stores of this card are kept under (ops/plan_store.h):
 * card, architecture, SM count, driver, CUDA runtime, cuDNN. */
void conv2d_cuda_store_identity(char *buf, size_t n);

/* Number of cached plans of c (tests check that a repeated shape hits). */
int conv2d_cuda_plan_count(Ctx *c);
/* Of c's plans, how many a search found and how many were taken from the
 * choices kept on disk by an earlier run (CTRAIN_PLAN_CACHE,
 * ops/plan_store.h: a kept choice is checked against cuDNN and the
 * numerical rule before use, and searched again when refused). */
void conv2d_cuda_plan_origins(Ctx *c, int *searched, int *loaded);
/* Free c's plans (descriptors) now; ctx_free does it too (the plans are a
 * cache registered with the context). Safe when c has none. The context's
 * convolution settings (pad mode, engines, stem) go with the cache: the
 * next call starts again from the environment's. */
void conv2d_cuda_release(Ctx *c);
#endif

/* ---- tensor op (ops/conv2d_op.c) ----
 * x [N, H, W, C] (f32/f16/bf16), w [K, R, S, C] -> y [N, P, Q, K] in the
 * compute type. Under autocast an f32 x is cast (recorded) to c->autocast;
 * the weight is read in the compute type, and its gradient lands in w's own
 * gradient (f32 for parameters, accumulated). */
Tensor *op_conv2d(Ctx *c, Tensor *x, Tensor *w, int stride, int pad, int dil);

/* The operand checks of op_conv2d, named after op (fatal with a hint): x
 * and w float and on c's device, x 4-D NHWC, w [K, R, S, C] with x's C,
 * every dimension within int. */
void conv2d_check_operands(const char *op, const Ctx *c, const Tensor *x, const Tensor *w);

/* op_conv2d (dilation 1) whose forward is run by fwd(c, y, x, w, s, arg)
 * instead of conv2d_run_forward (x and w in the compute type, y new): for a
 * fused forward that also makes something else in the same pass
 * (ops/conv_bn_op.c: the batch statistics of y). The node and its backward
 * are op_conv2d's. */
typedef void (*Conv2dForwardFn)(Ctx *c, Tensor *y, Tensor *x, Tensor *w, const Conv2dShape *s,
                                void *arg);
Tensor *op_conv2d_with(Ctx *c, Tensor *x, Tensor *w, int stride, int pad, Conv2dForwardFn fwd,
                       void *arg);

/* The three directions on tensors, on c's device (the CPU reference or
 * cuDNN): what op_conv2d's node runs, and what ops/conv_bn_op.c's unit
 * runs. x, w, y, dx, dy of one float type (w the low-precision working
 * copy under AMP); dw f32 for a parameter or x's type; accum as above. */
void conv2d_run_forward(Ctx *c, Tensor *y, Tensor *x, Tensor *w, const Conv2dShape *s);
void conv2d_run_backward_data(Ctx *c, Tensor *dx, Tensor *dy, Tensor *w, const Conv2dShape *s,
                              int accum);
void conv2d_run_backward_filter(Ctx *c, Tensor *dw, Tensor *dy, Tensor *x, const Conv2dShape *s,
                                int accum);
Tensor *op_conv2d_ex(Ctx *c, Tensor *x, Tensor *w, int stride_h, int stride_w, int pad_h,
                     int pad_w, int dil_h, int dil_w);

#ifdef __cplusplus
}
#endif
#endif
