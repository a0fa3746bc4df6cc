/* cpu_f32.h — f32 views of CPU tensors of any float dtype, for the op layer.
 *
 * The CPU references compute in f32. For an f32 tensor the view is the
 * tensor's own data; for f16/bf16 it is a converted copy, and f32_done()
 * rounds results back (round to nearest even, as the GPU stores them).
 */
#ifndef CTRAIN_OPS_CPU_F32_H
#define CTRAIN_OPS_CPU_F32_H

#include <stdlib.h>
#include "engine/error.h"
#include "engine/tensor.h"

typedef struct F32View {
    float *p;
    Tensor *t;
    int converted;
} F32View;

/* Read view (load = 1) or write view (load = 0: contents undefined; set
 * load = 1 for an output that accumulates). */
static inline F32View f32_view(Tensor *t, int load)
{
    F32View v = {NULL, t, 0};
    if (!t) return v;
    if (t->dtype == DT_F32) { v.p = (float *)t->data; return v; }
    CT_ASSERT(dtype_is_float(t->dtype), "op on a %s tensor needs a float type",
              dtype_name(t->dtype));
    v.p = (float *)malloc((t->numel ? t->numel : 1) * sizeof(float));
    if (!v.p) ct_fatal("out of host memory converting a tensor to f32");
    v.converted = 1;
    if (load) dtype_convert(v.p, DT_F32, t->data, t->dtype, t->numel);
    return v;
}

/* Finish a view; store = 1 writes the f32 values back into the tensor. */
static inline void f32_done(F32View *v, int store)
{
    if (!v->converted) return;
    if (store) dtype_convert(v->t->data, v->t->dtype, v->p, DT_F32, v->t->numel);
    free(v->p);
    v->converted = 0;
}

#endif
