/* op_util.h — shape, dtype and device checks shared by the tensor ops.
 * A failed check names the op and both tensors, so a model bug points at
 * its line of model code rather than at a kernel. */
#ifndef CTRAIN_OPS_OP_UTIL_H
#define CTRAIN_OPS_OP_UTIL_H

#include "engine/error.h"
#include "engine/tensor.h"

static inline void op_check_float(const char *op, const Tensor *t)
{
    char d[96];
    if (!dtype_is_float(t->dtype))
        ct_fatal("%s: input %s must be f32, f16 or bf16", op, tensor_desc(d, sizeof d, t));
    if (!t->data)
        ct_fatal("%s: input %s has been freed (used after release)", op, tensor_desc(d, sizeof d, t));
}

static inline void op_check_device(const char *op, const Ctx *c, const Tensor *t)
{
    char d[96];
    if (t->device != c->device)
        ct_fatal("%s: tensor %s is not on the context's device (%s)", op,
                 tensor_desc(d, sizeof d, t), ctx_device_name(c));
}

static inline void op_check_same(const char *op, const Tensor *a, const Tensor *b)
{
    char da[96], db[96];
    if (!tensor_same_shape(a, b) || a->dtype != b->dtype)
        ct_fatal("%s: operands differ: %s vs %s (shapes and dtypes must match)", op,
                 tensor_desc(da, sizeof da, a), tensor_desc(db, sizeof db, b));
}

#endif
