/* tensor.c — tensor creation, copies, and the two-count lifetime. */
#include "tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "mem.h"

static Tensor *tensor_alloc_struct(Ctx *c, DType dt, int ndim, const int64_t *shape)
{
    CT_ASSERT(ndim >= 0 && ndim <= CT_MAX_DIMS, "a tensor has 0 to %d dims, not %d",
              CT_MAX_DIMS, ndim);
    Tensor *t = (Tensor *)calloc(1, sizeof *t);
    if (!t) ct_fatal("out of host memory for a tensor");
    t->dtype = dt;
    t->device = c->device;
    t->ctx = c;
    t->ndim = ndim;
    t->numel = 1;
    for (int i = 0; i < ndim; i++) {
        CT_ASSERT(shape[i] >= 0, "negative dimension %lld", (long long)shape[i]);
        t->shape[i] = shape[i];
        t->numel *= (size_t)shape[i];
    }
    t->refs = 1;
    t->data_refs = 1;
    return t;
}

Tensor *tensor_new(Ctx *c, DType dt, int ndim, const int64_t *shape)
{
    Tensor *t = tensor_alloc_struct(c, dt, ndim, shape);
    t->nbytes = t->numel * dtype_size(dt);
    t->data = mem_alloc(c, t->nbytes);
    return t;
}

Tensor *tensor_new_like(Ctx *c, const Tensor *like, DType dt)
{
    return tensor_new(c, dt, like->ndim, like->shape);
}

Tensor *tensor_view(Ctx *c, void *data, DType dt, int ndim, const int64_t *shape)
{
    Tensor *t = tensor_alloc_struct(c, dt, ndim, shape);
    t->data = data;
    t->nbytes = 0;
    return t;
}

Tensor *tensor_reshape_view(Tensor *x, int ndim, const int64_t *shape)
{
    Tensor *t = tensor_alloc_struct(x->ctx, x->dtype, ndim, shape);
    char d[96];
    if (t->numel != x->numel)
        ct_fatal("reshape: %s has %zu elements, the new shape %zu", tensor_desc(d, sizeof d, x),
                 x->numel, t->numel);
    t->data = x->data;
    t->base = x;
    tensor_retain(x);
    return t;
}

Tensor *tensor_take_storage(Tensor *x)
{
    if (!x || x->data_refs != 1 || x->base || !x->nbytes || !x->data) return NULL;
    Tensor *t = tensor_alloc_struct(x->ctx, x->dtype, x->ndim, x->shape);
    t->data = x->data;
    t->nbytes = x->nbytes;
    x->nbytes = 0;   /* x still reads the same bytes until its last data reference goes */
    return t;
}

Tensor *tensor_from_host(Ctx *c, const void *host, DType dt, int ndim, const int64_t *shape)
{
    Tensor *t = tensor_new(c, dt, ndim, shape);
    mem_to_device(c, t->data, host, t->nbytes);
    return t;
}

Tensor *tensor_from_f32(Ctx *c, const float *host, DType dt, int ndim, const int64_t *shape)
{
    Tensor *t = tensor_new(c, dt, ndim, shape);
    if (dt == DT_F32) {
        mem_to_device(c, t->data, host, t->nbytes);
    } else {
        void *tmp = malloc(t->nbytes ? t->nbytes : 1);
        dtype_convert(tmp, dt, host, DT_F32, t->numel);
        mem_to_device(c, t->data, tmp, t->nbytes);
        free(tmp);
    }
    return t;
}

void tensor_to_host(void *host, const Tensor *t)
{
    mem_to_host(t->ctx, host, t->data, t->numel * dtype_size(t->dtype));
}

void tensor_to_f32(float *host, const Tensor *t)
{
    if (t->dtype == DT_F32) { tensor_to_host(host, t); return; }
    size_t bytes = t->numel * dtype_size(t->dtype);
    void *tmp = malloc(bytes ? bytes : 1);
    tensor_to_host(tmp, t);
    dtype_convert(host, DT_F32, tmp, t->dtype, t->numel);
    free(tmp);
}

void tensor_zero(Tensor *t) { mem_zero(t->ctx, t->data, t->numel * dtype_size(t->dtype)); }

void tensor_drop_grad(Tensor *t)
{
    tensor_release(t->grad);
    tensor_release(t->grad_aux);
    t->grad = NULL;
    t->grad_aux = NULL;
}

void tensor_retain(Tensor *t) { t->refs++; t->data_refs++; }
void tensor_hold(Tensor *t) { t->refs++; }

static void tensor_maybe_free(Tensor *t)
{
    if (t->data_refs == 0 && t->data) {
        if (t->nbytes) mem_free(t->ctx, t->data, t->nbytes);
        if (t->base) { tensor_release(t->base); t->base = NULL; }
        t->data = NULL;
        tensor_release(t->fwd_codes.q);
        tensor_release(t->fwd_codes.qt);
        t->fwd_codes.q = t->fwd_codes.qt = NULL;
    }
    if (t->refs == 0) {
        /* an activation's gradient belongs to it; a parameter's is a view */
        tensor_drop_grad(t);
        free(t->parts);   /* a joined parameter's list (params_join) */
        free(t);
    }
}

void tensor_release(Tensor *t)
{
    if (!t) return;
    CT_ASSERT(t->refs > 0 && t->data_refs > 0, "tensor released more often than held");
    t->refs--;
    t->data_refs--;
    tensor_maybe_free(t);
}

void tensor_unhold(Tensor *t)
{
    if (!t) return;
    CT_ASSERT(t->refs > 0, "tensor unheld more often than held");
    t->refs--;
    tensor_maybe_free(t);
}

size_t tensor_cols(const Tensor *t) { return t->ndim ? (size_t)t->shape[t->ndim - 1] : 1; }
size_t tensor_rows(const Tensor *t)
{
    size_t c = tensor_cols(t);
    return c ? t->numel / c : 0;
}

int tensor_same_shape(const Tensor *a, const Tensor *b)
{
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return 1;
}

const char *tensor_desc(char *buf, size_t len, const Tensor *t)
{
    size_t o = 0;
    o += (size_t)snprintf(buf + o, len - o, "[");
    for (int i = 0; i < t->ndim && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (o < len) snprintf(buf + o, len - o, "] %s %s", dtype_name(t->dtype),
                          t->device == DEV_CUDA ? "cuda" : "cpu");
    return buf;
}
