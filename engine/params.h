/* params.h — the parameter registry and its three contiguous buffers.
 *
 * A model registers each parameter once (name, shape, init, weight decay or
 * not). params_alloc() then lays out ONE f32 block for the values, ONE for
 * the gradients (and optimizers allocate their state with the same layout):
 * zeroing all gradients is one memset, an optimizer step is one launch per
 * weight-decay group, an all-reduce is one call, and no pointer ever moves,
 * which CUDA graphs require.
 *
 * Layout: parameters with weight decay first, then those without, each group
 * one contiguous range, in registration order within a group. The names and
 * shapes are PyTorch's (state_dict order is registration order), so files
 * written from this registry load in PyTorch.
 */
#ifndef CTRAIN_PARAMS_H
#define CTRAIN_PARAMS_H

#include <stddef.h>
#include <stdint.h>
#include "ctx.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    INIT_ZERO = 0,   /* 0 */
    INIT_ONE,        /* 1 */
    INIT_UNIFORM,    /* U(-a, a) */
    INIT_NORMAL,     /* N(0, a^2) */
} InitKind;

/* How a parameter sits in memory relative to its PyTorch shape. Conv
 * weights are [O, I, kH, kW] in PyTorch and on disk, but NHWC convolutions
 * want [O, kH, kW, I] in memory; checkpoint code permutes on save and load. */
typedef enum {
    LAYOUT_SAME = 0,     /* memory layout = PyTorch layout */
    LAYOUT_OHWI,         /* PyTorch [O, I, H, W] stored as [O, H, W, I] */
} ParamLayout;

typedef struct ParamInfo {
    char name[96];
    int ndim;
    int64_t shape[CT_MAX_DIMS];   /* PyTorch's shape (t->shape is the memory shape) */
    ParamLayout layout;
    size_t numel;
    size_t offset;       /* elements from the start of each buffer */
    int decay;           /* weight decay applies */
    int lookup;          /* a large lookup table (word embeddings): data parallel may send its
                          * lookup gradient as rows and give it a bucket of its own */
    InitKind init;
    float init_a;
    Tensor *t;           /* view into the value buffer; t->grad views the gradient */
} ParamInfo;

/* A buffer: model state that is not trained (batch norm's running_mean,
 * running_var, num_batches_tracked). Saved in checkpoints, no gradient. */
typedef struct BufferInfo {
    char name[96];
    DType dtype;
    int ndim;
    int64_t shape[CT_MAX_DIMS];
    size_t numel;
    InitKind init;       /* INIT_ZERO or INIT_ONE */
    Tensor *t;
} BufferInfo;

typedef struct ParamSet {
    ParamInfo *p;
    int n, cap;
    BufferInfo *b;
    int nb, bcap;
    size_t total;        /* elements in all parameters */
    size_t n_decay;      /* elements in the weight-decay range [0, n_decay) */
    float *data;         /* device (or host) f32 values */
    float *grad;         /* device (or host) f32 gradients */
    int grad_external;   /* grad is the caller's memory (params_grad_move), not freed here */
    int values_external; /* data and lowp are the caller's (params_values_move) */
    Ctx *ctx;
    /* AMP (params_lowp_enable): the values again in f16 / bf16, same offsets */
    void *lowp;
    DType lowp_dt;
    int lowp_stale;      /* data changed outside the optimizer: refresh before use */
} ParamSet;

void params_init(ParamSet *ps);
/* Register a parameter; returns its index. Shapes are PyTorch's. */
int params_add(ParamSet *ps, const char *name, int ndim, const int64_t *shape,
               InitKind init, float init_a, int decay);
/* Same, with the in-memory layout (LAYOUT_OHWI for conv weights; the init
 * is drawn in PyTorch's index order, so values match whatever the layout). */
int params_add_layout(ParamSet *ps, const char *name, int ndim, const int64_t *shape,
                      ParamLayout layout, InitKind init, float init_a, int decay);
/* Register a buffer (zero- or one-initialised); returns its index. */
int params_add_buffer(ParamSet *ps, const char *name, DType dt, int ndim, const int64_t *shape,
                      InitKind init);
Tensor *params_get_buffer(const ParamSet *ps, const char *name);
/* Permute between PyTorch's layout and the memory layout, n elements of f32. */
void params_layout_to_torch(const ParamInfo *pi, float *dst, const float *src);
void params_layout_from_torch(const ParamInfo *pi, float *dst, const float *src);
/* Lay out and allocate the buffers on c's device, zero the gradients, and
 * fill values by each parameter's init from Philox(seed). */
void params_alloc(ParamSet *ps, Ctx *c, uint64_t seed);
void params_free(ParamSet *ps);

/* The low-precision working copy for AMP on the GPU: one f16 / bf16 buffer
 * laid out like the values, with a view per parameter in t->lowp. The
 * autocast ops read a weight through op_cast, which hands out this view
 * instead of casting, and the optimizer kernels write it together with the
 * f32 master value, so no separate cast pass runs in a step. Whoever writes
 * ps->data another way (loading a checkpoint, resuming) sets lowp_stale or
 * calls params_lowp_refresh. No-op on the CPU. */
void params_lowp_enable(ParamSet *ps, DType dt);
/* Recast the whole copy from the f32 values when stale (one kernel). */
void params_lowp_refresh(ParamSet *ps);
void params_zero_grad(ParamSet *ps);
/* Instead of zeroing (CTRAIN_GRAD_FRESH): mark every parameter's gradient
 * as holding nothing of this step, so that its first contribution writes
 * (ad_grad_dst hands out accum 0) and no memset of the whole buffer runs;
 * after backward, params_grad_settle zeroes the gradients of the
 * parameters no op reached (those still marked) and clears the marks. The
 * values are the same as zero-then-add (0 + g = g), but for the sign of a
 * zero and, on the GPU, the algorithm a written GEMM's own plan gets. */
void params_grad_fresh(ParamSet *ps);
void params_grad_settle(ParamSet *ps);
/* Moves the gradient buffer into `buf` (ps->total floats of device memory
 * the caller owns: train/parallel/dist_regbuf.c's NCCL-registered buffer): the
 * gradients are copied, ps->grad and every parameter's grad view point into
 * buf, and the previous buffer is freed if it was the ParamSet's own. buf
 * NULL: back into a buffer of its own (mem_alloc), after which the caller
 * may free its buffer. Not while a captured step holds the old address. */
void params_grad_move(ParamSet *ps, float *buf);
/* The same for the values: the f32 values into `data` (ps->total floats)
 * and, when AMP's working copy exists, the copy into `lowp` (ps->total
 * elements of lowp_dt), both the caller's device memory; every parameter's
 * view (and its lowp view) points into them. data NULL (then lowp NULL too):
 * back into buffers of their own. Not while a captured step holds the old
 * addresses. */
void params_values_move(ParamSet *ps, float *data, void *lowp);
Tensor *params_get(const ParamSet *ps, const char *name);

/* n registered parameters that lie back to back (registered one after the
 * other in one weight-decay group, the same shape past dim 0) as ONE
 * parameter tensor [their dim 0 summed, the rest]: BERT's Wq, Wk, Wv as Wqkv
 * [3 D, D], bq, bk, bv as bqkv [3 D]. A view in every buffer: its gradient
 * views the parts' gradients (an op adds into them, as into any
 * parameter's) and its AMP copy the parts' copies. NULL when they do not
 * lie so. Stale once a buffer moves (params_values_move, params_grad_move,
 * params_lowp_enable, which happen between steps, never between a forward
 * and its backward): params_join_current says whether j still views them.
 * Free with params_join_free (not while a recorded node holds j). */
Tensor *params_join(const ParamSet *ps, const int *idx, int n);
int params_join_current(const ParamSet *ps, const Tensor *j, int first);
void params_join_free(Tensor *j);
/* Copy all values to/from a host f32 array of ps->total elements, in layout order. */
void params_to_host(const ParamSet *ps, float *host);
void params_from_host(ParamSet *ps, const float *host);
void grads_to_host(const ParamSet *ps, float *host);

#ifdef __cplusplus
}
#endif
#endif
