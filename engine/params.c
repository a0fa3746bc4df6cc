/* params.c — registry, layout by weight-decay group, and deterministic init.
 *
 * Initial values come from Philox(seed) addressed by the parameter's offset,
 * so a model initialises identically on CPU and GPU and from run to run.
 * Normal draws use Box-Muller on two uniforms.
 */
#include "params.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "mem.h"
#include "philox.h"
#ifdef CTRAIN_CUDA
#include "kernels.h"
#endif

void params_init(ParamSet *ps) { memset(ps, 0, sizeof *ps); }

int params_add(ParamSet *ps, const char *name, int ndim, const int64_t *shape,
               InitKind init, float init_a, int decay)
{
    return params_add_layout(ps, name, ndim, shape, LAYOUT_SAME, init, init_a, decay);
}

int params_add_layout(ParamSet *ps, const char *name, int ndim, const int64_t *shape,
                      ParamLayout layout, InitKind init, float init_a, int decay)
{
    CT_ASSERT(layout == LAYOUT_SAME || ndim == 4, "parameter %s: OHWI layout needs 4 dims", name);
    CT_ASSERT(!ps->data, "parameter %s registered after params_alloc", name);
    CT_ASSERT(strlen(name) < sizeof ps->p[0].name, "parameter name too long: %s", name);
    for (int i = 0; i < ps->n; i++)
        CT_ASSERT(strcmp(ps->p[i].name, name) != 0, "parameter %s registered twice", name);
    if (ps->n == ps->cap) {
        ps->cap = ps->cap ? ps->cap * 2 : 64;
        ps->p = (ParamInfo *)realloc(ps->p, (size_t)ps->cap * sizeof *ps->p);
        if (!ps->p) ct_fatal("out of host memory for the parameter registry");
    }
    ParamInfo *pi = &ps->p[ps->n];
    memset(pi, 0, sizeof *pi);
    snprintf(pi->name, sizeof pi->name, "%s", name);
    pi->ndim = ndim;
    pi->numel = 1;
    for (int i = 0; i < ndim; i++) {
        pi->shape[i] = shape[i];
        pi->numel *= (size_t)shape[i];
    }
    pi->init = init;
    pi->init_a = init_a;
    pi->decay = decay;
    pi->layout = layout;
    return ps->n++;
}

int params_add_buffer(ParamSet *ps, const char *name, DType dt, int ndim, const int64_t *shape,
                      InitKind init)
{
    CT_ASSERT(!ps->data, "buffer %s registered after params_alloc", name);
    CT_ASSERT(init == INIT_ZERO || init == INIT_ONE, "buffer %s: init must be zero or one", name);
    CT_ASSERT(strlen(name) < sizeof ps->b[0].name, "buffer name too long: %s", name);
    if (ps->nb == ps->bcap) {
        ps->bcap = ps->bcap ? ps->bcap * 2 : 64;
        ps->b = (BufferInfo *)realloc(ps->b, (size_t)ps->bcap * sizeof *ps->b);
        if (!ps->b) ct_fatal("out of host memory for the buffer registry");
    }
    BufferInfo *bi = &ps->b[ps->nb];
    memset(bi, 0, sizeof *bi);
    snprintf(bi->name, sizeof bi->name, "%s", name);
    bi->dtype = dt;
    bi->ndim = ndim;
    bi->numel = 1;
    for (int i = 0; i < ndim; i++) {
        bi->shape[i] = shape[i];
        bi->numel *= (size_t)shape[i];
    }
    bi->init = init;
    return ps->nb++;
}

Tensor *params_get_buffer(const ParamSet *ps, const char *name)
{
    for (int i = 0; i < ps->nb; i++)
        if (strcmp(ps->b[i].name, name) == 0) return ps->b[i].t;
    return NULL;
}

/* [O, I, H, W] index -> [O, H, W, I] index */
void params_layout_from_torch(const ParamInfo *pi, float *dst, const float *src)
{
    if (pi->layout == LAYOUT_SAME) { memcpy(dst, src, pi->numel * sizeof(float)); return; }
    int64_t O = pi->shape[0], I = pi->shape[1], H = pi->shape[2], W = pi->shape[3];
    for (int64_t o = 0; o < O; o++)
        for (int64_t i = 0; i < I; i++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t w = 0; w < W; w++)
                    dst[((o * H + h) * W + w) * I + i] = src[((o * I + i) * H + h) * W + w];
}

void params_layout_to_torch(const ParamInfo *pi, float *dst, const float *src)
{
    if (pi->layout == LAYOUT_SAME) { memcpy(dst, src, pi->numel * sizeof(float)); return; }
    int64_t O = pi->shape[0], I = pi->shape[1], H = pi->shape[2], W = pi->shape[3];
    for (int64_t o = 0; o < O; o++)
        for (int64_t i = 0; i < I; i++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t w = 0; w < W; w++)
                    dst[((o * I + i) * H + h) * W + w] = src[((o * H + h) * W + w) * I + i];
}

static void init_values(float *v, const ParamInfo *pi, uint64_t seed)
{
    /* each value is a pure function of (seed, offset + i): any thread order
     * gives the same numbers */
    #pragma omp parallel for if (pi->numel > 65536)
    for (size_t i = 0; i < pi->numel; i++) {
        uint64_t idx = (pi->offset + i) * 2;   /* two uniforms per element */
        switch (pi->init) {
        case INIT_ZERO: v[i] = 0.0f; break;
        case INIT_ONE: v[i] = 1.0f; break;
        case INIT_UNIFORM:
            v[i] = pi->init_a * (2.0f * philox_uniform(seed, 0, idx) - 1.0f);
            break;
        case INIT_NORMAL: {
            double u1 = philox_uniform(seed, 0, idx) + (1.0 / 33554432.0); /* (0, 1] */
            double u2 = philox_uniform(seed, 0, idx + 1);
            v[i] = (float)(pi->init_a * sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
            break;
        }
        }
    }
}

void params_alloc(ParamSet *ps, Ctx *c, uint64_t seed)
{
    size_t off = 0;
    for (int pass = 1; pass >= 0; pass--)       /* decay group first */
        for (int i = 0; i < ps->n; i++)
            if (ps->p[i].decay == pass) {
                ps->p[i].offset = off;
                off += ps->p[i].numel;
                if (pass == 1) ps->n_decay = off;
            }
    ps->total = off;
    ps->ctx = c;
    ps->data = (float *)mem_alloc(c, ps->total * sizeof(float));
    ps->grad = (float *)mem_alloc(c, ps->total * sizeof(float));
    params_zero_grad(ps);

    float *host = (float *)malloc((ps->total ? ps->total : 1) * sizeof(float));
    if (!host) ct_fatal("out of host memory initialising %zu parameters", ps->total);
    float *tmp = NULL;
    for (int i = 0; i < ps->n; i++) {
        ParamInfo *pi = &ps->p[i];
        int64_t mshape[CT_MAX_DIMS];
        memcpy(mshape, pi->shape, sizeof mshape);
        if (pi->layout == LAYOUT_OHWI) {
            /* memory [O, H, W, I]; init drawn in PyTorch order, then permuted */
            mshape[1] = pi->shape[2]; mshape[2] = pi->shape[3]; mshape[3] = pi->shape[1];
            tmp = (float *)realloc(tmp, pi->numel * sizeof(float));
            if (!tmp) ct_fatal("out of host memory initialising %s", pi->name);
            init_values(tmp, pi, seed);
            params_layout_from_torch(pi, host + pi->offset, tmp);
        } else {
            init_values(host + pi->offset, pi, seed);
        }
        pi->t = tensor_view(c, ps->data + pi->offset, DT_F32, pi->ndim, mshape);
        pi->t->requires_grad = 1;
        pi->t->is_param = 1;
        pi->t->name = pi->name;
        pi->t->grad = tensor_view(c, ps->grad + pi->offset, DT_F32, pi->ndim, mshape);
    }
    free(tmp);
    mem_to_device(c, ps->data, host, ps->total * sizeof(float));
    free(host);
    for (int i = 0; i < ps->nb; i++) {
        BufferInfo *bi = &ps->b[i];
        bi->t = tensor_new(c, bi->dtype, bi->ndim, bi->shape);
        bi->t->name = bi->name;
        size_t bytes = bi->numel * dtype_size(bi->dtype);
        void *h = calloc(1, bytes ? bytes : 1);
        if (!h) ct_fatal("out of host memory initialising %s", bi->name);
        if (bi->init == INIT_ONE) {
            float one = 1.0f;
            for (size_t k = 0; k < bi->numel; k++)
                dtype_convert((char *)h + k * dtype_size(bi->dtype), bi->dtype, &one, DT_F32, 1);
        }
        mem_to_device(c, bi->t->data, h, bytes);
        free(h);
    }
}

Tensor *params_join(const ParamSet *ps, const int *idx, int n)
{
    if (n < 1 || !ps->data) return NULL;
    const ParamInfo *p0 = &ps->p[idx[0]];
    const Tensor *t0 = p0->t;
    int64_t shape[CT_MAX_DIMS];
    memcpy(shape, t0->shape, sizeof shape);
    shape[0] = 0;
    size_t off = p0->offset;
    for (int i = 0; i < n; i++) {
        const ParamInfo *pi = &ps->p[idx[i]];
        if (pi->offset != off || pi->decay != p0->decay || pi->t->ndim != t0->ndim) return NULL;
        for (int d = 1; d < t0->ndim; d++)
            if (pi->t->shape[d] != t0->shape[d]) return NULL;
        shape[0] += pi->t->shape[0];
        off += pi->numel;
    }
    Ctx *c = ps->ctx;
    Tensor *j = tensor_view(c, t0->data, DT_F32, t0->ndim, shape);
    j->requires_grad = t0->requires_grad;
    j->is_param = 1;
    j->name = t0->name;   /* the first part's: what a message names */
    j->grad = tensor_view(c, t0->grad->data, DT_F32, t0->ndim, shape);
    if (t0->lowp) j->lowp = tensor_view(c, t0->lowp->data, t0->lowp->dtype, t0->ndim, shape);
    j->parts = (Tensor **)malloc((size_t)n * sizeof *j->parts);
    if (!j->parts) ct_fatal("out of host memory joining %d parameters", n);
    for (int i = 0; i < n; i++) j->parts[i] = ps->p[idx[i]].t;
    j->nparts = n;
    return j;
}

int params_join_current(const ParamSet *ps, const Tensor *j, int first)
{
    const Tensor *t0 = ps->p[first].t;
    return j && j->data == t0->data && j->grad->data == t0->grad->data &&
           (t0->lowp ? j->lowp && j->lowp->data == t0->lowp->data : !j->lowp);
}

void params_join_free(Tensor *j)
{
    if (!j) return;
    tensor_release(j->lowp);   /* not the tensor's own (a parameter's copy is ParamSet's) */
    j->lowp = NULL;
    tensor_release(j);
}

void params_lowp_enable(ParamSet *ps, DType dt)
{
    Ctx *c = ps->ctx;
    if (!c || c->device != DEV_CUDA || ps->lowp || ps->total == 0) return;
    CT_ASSERT(dt == DT_F16 || dt == DT_BF16, "params_lowp_enable: %s is not f16 or bf16",
              dtype_name(dt));
    ps->lowp = mem_alloc(c, ps->total * dtype_size(dt));
    ps->lowp_dt = dt;
    ps->lowp_stale = 1;
    for (int i = 0; i < ps->n; i++) {
        Tensor *t = ps->p[i].t;
        t->lowp = tensor_view(c, (char *)ps->lowp + ps->p[i].offset * dtype_size(dt), dt, t->ndim,
                              t->shape);
    }
    params_lowp_refresh(ps);
}

void params_lowp_refresh(ParamSet *ps)
{
    if (!ps->lowp || !ps->lowp_stale) return;
#ifdef CTRAIN_CUDA
    cast_cuda(ps->lowp, ps->lowp_dt, ps->data, DT_F32, ps->total, 0, ps->ctx->stream);
#endif
    ps->lowp_stale = 0;
}

void params_free(ParamSet *ps)
{
    for (int i = 0; i < ps->n; i++) {
        tensor_release(ps->p[i].t->lowp);
        ps->p[i].t->lowp = NULL;
    }
    if (ps->lowp && !ps->values_external)
        mem_free(ps->ctx, ps->lowp, ps->total * dtype_size(ps->lowp_dt));
    for (int i = 0; i < ps->n; i++) tensor_release(ps->p[i].t);
    for (int i = 0; i < ps->nb; i++) tensor_release(ps->b[i].t);
    free(ps->b);
    if (ps->ctx) {
        if (!ps->values_external) mem_free(ps->ctx, ps->data, ps->total * sizeof(float));
        if (!ps->grad_external) mem_free(ps->ctx, ps->grad, ps->total * sizeof(float));
    }
    free(ps->p);
    memset(ps, 0, sizeof *ps);
}

void params_zero_grad(ParamSet *ps) { mem_zero(ps->ctx, ps->grad, ps->total * sizeof(float)); }

void params_grad_fresh(ParamSet *ps)
{
    for (int i = 0; i < ps->n; i++) ps->p[i].t->grad_fresh = 1;
}

void params_grad_settle(ParamSet *ps)
{
    for (int i = 0; i < ps->n; i++) {
        Tensor *t = ps->p[i].t;
        if (!t->grad_fresh) continue;
        tensor_zero(t->grad);
        t->grad_fresh = 0;
    }
}

void params_grad_move(ParamSet *ps, float *buf)
{
    Ctx *c = ps->ctx;
    size_t bytes = ps->total * sizeof(float);
    float *to = buf ? buf : (float *)mem_alloc(c, bytes);
    if (to == ps->grad) return;
    mem_copy(c, to, ps->grad, bytes);
    if (!ps->grad_external) mem_free(c, ps->grad, bytes);
    ps->grad = to;
    ps->grad_external = buf != NULL;
    for (int i = 0; i < ps->n; i++)
        if (ps->p[i].t) ps->p[i].t->grad->data = to + ps->p[i].offset;
}

void params_values_move(ParamSet *ps, float *data, void *lowp)
{
    Ctx *c = ps->ctx;
    CT_ASSERT(data ? (lowp != NULL) == (ps->lowp != NULL) : lowp == NULL,
              "params_values_move: give both buffers (one without AMP's copy) or neither");
    if (data && data == ps->data) return;
    if (!data && !ps->values_external) return;   /* in its own buffers already */
    size_t bytes = ps->total * sizeof(float), lbytes = ps->lowp ? ps->total * dtype_size(ps->lowp_dt) : 0;
    float *to = data ? data : (float *)mem_alloc(c, bytes);
    void *lto = !ps->lowp ? NULL : lowp ? lowp : mem_alloc(c, lbytes);
    mem_copy(c, to, ps->data, bytes);
    if (ps->lowp) mem_copy(c, lto, ps->lowp, lbytes);
    if (!ps->values_external) {
        mem_free(c, ps->data, bytes);
        if (ps->lowp) mem_free(c, ps->lowp, lbytes);
    }
    ps->data = to;
    ps->lowp = lto;
    ps->values_external = data != NULL;
    for (int i = 0; i < ps->n; i++) {
        Tensor *t = ps->p[i].t;
        t->data = to + ps->p[i].offset;
        if (t->lowp) t->lowp->data = (char *)lto + ps->p[i].offset * dtype_size(ps->lowp_dt);
    }
}

Tensor *params_get(const ParamSet *ps, const char *name)
{
    for (int i = 0; i < ps->n; i++)
        if (strcmp(ps->p[i].name, name) == 0) return ps->p[i].t;
    return NULL;
}

void params_to_host(const ParamSet *ps, float *host)
{
    mem_to_host(ps->ctx, host, ps->data, ps->total * sizeof(float));
}

void params_from_host(ParamSet *ps, const float *host)
{
    mem_to_device(ps->ctx, ps->data, host, ps->total * sizeof(float));
    ps->lowp_stale = 1;
}

void grads_to_host(const ParamSet *ps, float *host)
{
    mem_to_host(ps->ctx, host, ps->grad, ps->total * sizeof(float));
}
