/* tensor.h — the tensor: dtype, device, shape, and a pointer to its data.
 *
 * Contiguous, row-major, up to 6 dims; images are NHWC. A tensor either owns
 * its data (allocated from the context) or is a view into storage it does
 * not own (parameters and gradients are views into the one contiguous
 * parameter / gradient buffer, see params.h).
 *
 * Lifetimes use two counts, because autograd needs a tensor's identity
 * longer than its data:
 *   refs       keeps the struct alive (its grad slot, its shape);
 *   data_refs  keeps the data alive.
 * The creator holds one of each. tensor_release() drops one of each.
 * A node that only needs somewhere to send the gradient holds the struct
 * (tensor_hold); a node that reads the values in backward retains both
 * (tensor_retain). So an input that no backward reads is freed as soon as
 * model code lets go of it.
 */
#ifndef CTRAIN_TENSOR_H
#define CTRAIN_TENSOR_H

#include <stddef.h>
#include <stdint.h>
#include "ctx.h"
#include "dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CT_MAX_DIMS 6

typedef struct Tensor {
    DType dtype;
    Device device;
    int ndim;
    int64_t shape[CT_MAX_DIMS];
    size_t numel;
    void *data;
    size_t nbytes;          /* bytes owned (0 for views) */
    Ctx *ctx;               /* the context that allocated the data */
    struct Tensor *base;    /* a reshape view keeps its base's data alive */
    int refs, data_refs;
    /* autograd */
    int requires_grad;
    int is_param;           /* gradient is a view into the gradient buffer */
    int grad_fresh;         /* parameters: the view holds no gradient of this step yet, so
                             * the first contribution writes it (params_grad_fresh) */
    struct Tensor **parts;  /* a joined parameter (params_join): the parameters it spans */
    int nparts;
    struct Tensor *grad;    /* gradient: same shape; params: f32 view */
    /* a gradient handed over in another form: an FP8 Linear's forward marks its
     * output with how its backward would cast the gradient (grad_cast.scale set;
     * ops/linear_fp8.h, "The gradient's codes"), and the op that makes that
     * gradient may write its FP8 codes as grad (U8, this shape) with the column
     * partials in grad_aux, the values never stored */
    struct {
        const float *scale;  /* the cast's scale (device), NULL: no mark */
        float *amax;         /* the running amax the cast raises (device) */
        int fmt;             /* Fp8Format */
    } grad_cast;
    struct Tensor *grad_aux;
    /* and in the forward: an FP8 Linear's input codes made by the op that made
     * this tensor (ops/linear_fp8.h, "Codes made by the producer"), q [rows,
     * cols] and qt [cols, rows] (U8) at the scale of slot `slot` of recipe
     * `owner`; the Linear that reads this tensor in that slot takes them over,
     * else they go with the tensor's data */
    struct {
        struct Tensor *q, *qt;
        const void *owner;
        int slot;
    } fwd_codes;
    const char *name;       /* parameters: the registry name */
    /* parameters under AMP on the GPU: the low-precision working copy (a
     * view into ParamSet.lowp) that an unrecorded op_cast to its dtype
     * returns instead of casting; the optimizer keeps it equal to cast(data) */
    struct Tensor *lowp;
} Tensor;

/* New tensor with uninitialised data on c's device. */
Tensor *tensor_new(Ctx *c, DType dt, int ndim, const int64_t *shape);
/* New tensor with the shape of `like` (dtype dt). */
Tensor *tensor_new_like(Ctx *c, const Tensor *like, DType dt);
/* A view of data that the caller keeps alive (never freed by the tensor). */
Tensor *tensor_view(Ctx *c, void *data, DType dt, int ndim, const int64_t *shape);
/* The same data as x under another shape (same element count); holds x's
 * data until the view's data is released. */
Tensor *tensor_reshape_view(Tensor *x, int ndim, const int64_t *shape);
/* A new tensor that takes over x's storage (same dtype, shape and bytes):
 * the new one frees it; x keeps pointing at it, unowned, until its last
 * data reference goes. Only when x owns its storage (not a view) and its
 * data has one holder (data_refs == 1, the caller's); NULL otherwise. */
Tensor *tensor_take_storage(Tensor *x);
/* Copy f32 host values in, converting to dt. */
Tensor *tensor_from_f32(Ctx *c, const float *host, DType dt, int ndim, const int64_t *shape);
/* Copy raw host bytes in (dt's layout). */
Tensor *tensor_from_host(Ctx *c, const void *host, DType dt, int ndim, const int64_t *shape);
/* Copy out as f32 (synchronizes on CUDA). */
void tensor_to_f32(float *host, const Tensor *t);
void tensor_to_host(void *host, const Tensor *t);
void tensor_zero(Tensor *t);
/* Releases t's gradient (an activation's: a parameter's is a view of the
 * buffer) and what came with it (grad_aux); both NULL after. */
void tensor_drop_grad(Tensor *t);

void tensor_retain(Tensor *t);   /* +1 struct, +1 data */
void tensor_hold(Tensor *t);     /* +1 struct only */
void tensor_release(Tensor *t);  /* -1 struct, -1 data (NULL is fine) */
void tensor_unhold(Tensor *t);   /* -1 struct */

/* Rows and last-dim size when viewed as a matrix [numel / last, last]. */
size_t tensor_rows(const Tensor *t);
size_t tensor_cols(const Tensor *t);
int tensor_same_shape(const Tensor *a, const Tensor *b);
/* "[64, 784] f32 cuda" into buf, for messages. */
const char *tensor_desc(char *buf, size_t len, const Tensor *t);

#ifdef __cplusplus
}
#endif
#endif
