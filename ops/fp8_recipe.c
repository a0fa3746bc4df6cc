/* fp8_recipe.c — the FP8 Linear layers' delayed scaling (fp8_recipe.h): the
 * state's memory, its update after each optimizer step (CPU reference:
 * ops/fp8.c; CUDA: ops/fp8.cu's update and amax reset, and the step counter
 * of fp8_recipe.cu), reading it back, and whether a device has FP8 GEMMs.
 */
#include "fp8_recipe.h"

#include <stdint.h>
#include <stdlib.h>
#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>
#endif

#include "engine/error.h"
#include "fp8.h"

static const Fp8Format GROUP_FMT[2] = {FP8_E4M3, FP8_E5M2};

Fp8Recipe *fp8_recipe_new(Ctx *c, int layers, int history_len, int margin)
{
    CT_ASSERT(layers > 0 && history_len > 0, "fp8 recipe: %d layers, history %d", layers,
              history_len);
    Fp8Recipe *r = (Fp8Recipe *)calloc(1, sizeof *r);
    if (!r) ct_fatal("out of host memory");
    r->layers = layers;
    r->len = history_len;
    r->margin = margin;
    r->n[0] = 2 * layers;
    r->n[1] = layers;
    for (int g = 0; g < 2; g++) {
        const int n = r->n[g];
        const size_t words = fp8_block_words(n, history_len);
        float *h = (float *)calloc(words, sizeof(float));   /* history and amax 0 */
        if (!h) ct_fatal("out of host memory");
        float *scale = fp8_scale_of(r, h, g);
        for (int i = 0; i < n; i++) scale[i] = *fp8_sinv_of(r, h, g, i) = 1.0f;
        r->block[g] = tensor_from_host(c, h, DT_F32, 1, (int64_t[]){(int64_t)words});
        free(h);
    }
    r->overflow = tensor_new(c, DT_I32, 1, (int64_t[]){3 * (int64_t)layers});
    tensor_zero(r->overflow);
    r->step = tensor_new(c, DT_I64, 1, (int64_t[]){1});
    tensor_zero(r->step);
    r->discard = tensor_new(c, DT_F32, 1, (int64_t[]){1});
    tensor_zero(r->discard);
    return r;
}

void fp8_codes_enable(Fp8Recipe *r)
{
    if (r->codes) return;
    r->codes = (Fp8WeightCodes *)calloc((size_t)r->layers, sizeof *r->codes);
    if (!r->codes) ct_fatal("out of host memory");
    r->codes_ready = 0;
}

Fp8WeightCodes *fp8_codes_bind(Ctx *c, Fp8Recipe *r, int layer, const Tensor *w)
{
    if (!r->codes) return NULL;
    CT_ASSERT(layer >= 0 && layer < r->layers && w->ndim == 2, "fp8 codes: layer %d of %d",
              layer, r->layers);
    Fp8WeightCodes *k = &r->codes[layer];
    const int rows = (int)w->shape[0], cols = (int)w->shape[1];
    if (k->w == w->data && k->rows == rows && k->cols == cols) {
        if (c->grad_enabled) k->used = 1;
        return k;
    }
    /* bind only in a training forward, and never free codes a captured graph
     * may still read: an evaluation that gives this slot another weight (BERT's
     * q/k/v apart where training joins them), or a change while graphs live,
     * casts into buffers of its own */
    if (!c->grad_enabled) return NULL;
#ifdef CTRAIN_CUDA
    if (c->device == DEV_CUDA && (c->capturing || c->graphs_live)) return NULL;
#endif
    tensor_release(k->q);
    tensor_release(k->qt);
    k->q = tensor_new(c, DT_U8, 2, (int64_t[]){rows, cols});
    k->qt = tensor_new(c, DT_U8, 2, (int64_t[]){cols, rows});
    k->w = w->data;
    k->rows = rows;
    k->cols = cols;
    k->fused = 0;
    k->used = 1;
    r->codes_ready = 0;
    r->codes_version++;
    return k;
}

void fp8_codes_invalidate(Fp8Recipe *r)
{
    if (r) r->codes_ready = 0;
}

void fp8_recipe_free(Fp8Recipe *r)
{
    if (!r) return;
    for (int i = 0; r->codes && i < r->layers; i++) {
        tensor_release(r->codes[i].q);
        tensor_release(r->codes[i].qt);
    }
    free(r->codes);
    tensor_release(r->block[0]);
    tensor_release(r->block[1]);
    tensor_release(r->overflow);
    tensor_release(r->step);
    tensor_release(r->discard);
    free(r);
}

#ifdef CTRAIN_CUDA
static void step_cuda(Ctx *c, Fp8Recipe *r)
{
    static const Fp8Format fmt[2] = {FP8_E4M3, FP8_E5M2};
    for (int g = 0; g < 2; g++) {
        float *h = (float *)r->block[g]->data, *amax = fp8_amax_of(r, h, g);
        float *scale = fp8_scale_of(r, h, g);
        fp8_scale_update_cuda(h, r->len, (const long long *)r->step->data, amax, r->n[g], fmt[g],
                              r->margin, scale, fp8_sinv_of(r, h, g, 0), FP8_SINV_STRIDE,
                              (int *)r->overflow->data + g * r->n[0], c->stream);
        fp8_amax_zero_cuda(amax, r->n[g], c->stream);
    }
    fp8_step_advance_cuda((long long *)r->step->data, c->stream);
}
#endif

void fp8_recipe_step(Ctx *c, Fp8Recipe *r)
{
    if (c->device == DEV_CUDA) {
#ifdef CTRAIN_CUDA
        step_cuda(c, r);
#endif
        return;
    }
    long long *step = (long long *)r->step->data;
    int *overflow = (int *)r->overflow->data;
    for (int g = 0; g < 2; g++) {
        float *hist = (float *)r->block[g]->data, *amax = fp8_amax_of(r, hist, g);
        float *scale = fp8_scale_of(r, hist, g);
        for (int i = 0; i < r->n[g]; i++) {
            if (fp8_scale_update_cpu(hist + (size_t)i * r->len, r->len, (long)*step, amax[i],
                                     GROUP_FMT[g], r->margin, &scale[i],
                                     fp8_sinv_of(r, hist, g, i)))
                overflow[g * r->n[0] + i] = 1;
            amax[i] = 0.0f;
        }
    }
    ++*step;
}

void fp8_recipe_read(const Fp8Recipe *r, int group, int slot, Fp8TensorState *s)
{
    CT_ASSERT(group == 0 || group == 1, "fp8 recipe: group %d", group);
    CT_ASSERT(slot >= 0 && slot < r->n[group], "fp8 recipe: slot %d of %d", slot, r->n[group]);
    float v[3];
    int ov;
    float *base = (float *)r->block[group]->data;
    float *at[3] = {fp8_amax_of(r, base, group) + slot, fp8_scale_of(r, base, group) + slot,
                    fp8_sinv_of(r, base, group, slot)};
    for (int k = 0; k < 3; k++) {
        Tensor one = *r->block[group];
        one.data = at[k];
        one.numel = 1;
        one.ndim = 1;
        one.shape[0] = 1;
        tensor_to_host(&v[k], &one);
    }
    Tensor o = *r->overflow;
    o.data = (int *)r->overflow->data + group * r->n[0] + slot;
    o.numel = 1;
    o.ndim = 1;
    o.shape[0] = 1;
    tensor_to_host(&ov, &o);
    s->amax = v[0];
    s->scale = v[1];
    s->scale_inv = v[2];
    s->overflow = ov;
}

int fp8_recipe_overflows(const Fp8Recipe *r)
{
    const size_t n = r->overflow->numel;
    int32_t *h = (int32_t *)malloc(n * sizeof(int32_t));
    if (!h) ct_fatal("out of host memory");
    tensor_to_host(h, r->overflow);
    int k = 0;
    for (size_t i = 0; i < n; i++) k += h[i] != 0;
    free(h);
    return k;
}

int fp8_supported(const Ctx *c)
{
    if (c->device != DEV_CUDA) return 1;
#ifdef CTRAIN_CUDA
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, c->device_id) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, c->device_id) != cudaSuccess)
        return 0;
    return major * 10 + minor >= 89;
#else
    return 0;
#endif
}
