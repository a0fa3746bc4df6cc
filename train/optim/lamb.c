/* lamb.c — the LAMB optimizer's host side: state, the segment and chunk
 * tables built from the registry, and one step (kernels in ops/adam.h). */
#include "lamb.h"

#include <stdlib.h>
#include <string.h>
#include "adam_state.h"
#include "engine/error.h"
#include "engine/mem.h"

void lamb_init(Lamb *o, ParamSet *ps, double beta1, double beta2, double eps,
               double weight_decay, int bias_correction, int nvlamb)
{
    memset(o, 0, sizeof *o);
    adam_state_check("LAMB", beta1, beta2, eps, weight_decay);
    o->beta1 = beta1;
    o->beta2 = beta2;
    o->eps = eps;
    o->weight_decay = weight_decay;
    o->bias_correction = bias_correction;
    o->nvlamb = nvlamb;
    Ctx *c = ps->ctx;

    /* one segment per tensor, in layout order; apex: ratio when nvlamb or decay != 0 */
    o->nseg = ps->n;
    OptSeg *seg = (OptSeg *)calloc(ps->n ? (size_t)ps->n : 1, sizeof(OptSeg));
    if (!seg) ct_fatal("out of host memory building the LAMB segment table");
    for (int i = 0; i < ps->n; i++) {
        const ParamInfo *pi = &ps->p[i];
        seg[i].offset = (int64_t)pi->offset;
        seg[i].numel = (int64_t)pi->numel;
        seg[i].wd = pi->decay ? (float)weight_decay : 0.0f;
        seg[i].adaptive = nvlamb || seg[i].wd != 0.0f;
    }
    o->nchunk = lamb_chunks_build(NULL, seg, o->nseg, LAMB_CHUNK);
    OptChunk *chunk = (OptChunk *)malloc((o->nchunk ? (size_t)o->nchunk : 1) * sizeof(OptChunk));
    if (!chunk) ct_fatal("out of host memory building the LAMB chunk table");
    lamb_chunks_build(chunk, seg, o->nseg, LAMB_CHUNK);

    adam_state_alloc(ps, &o->m, &o->v, &o->st, &o->lr_dev);
    o->seg = (OptSeg *)mem_alloc(c, (size_t)o->nseg * sizeof(OptSeg));
    o->chunk = (OptChunk *)mem_alloc(c, (size_t)o->nchunk * sizeof(OptChunk));
    o->partial = (double *)mem_alloc(c, 2 * (size_t)o->nchunk * sizeof(double));
    o->ratio = (float *)mem_alloc(c, (size_t)o->nseg * sizeof(float));
    mem_zero(c, o->ratio, (size_t)o->nseg * sizeof(float));
    mem_to_device(c, o->seg, seg, (size_t)o->nseg * sizeof(OptSeg));
    mem_to_device(c, o->chunk, chunk, (size_t)o->nchunk * sizeof(OptChunk));
    free(seg);
    free(chunk);
}

void lamb_step_lr(Lamb *o, ParamSet *ps, const float *lr_dev, const int *skip, void *p_lowp,
                  DType lowp_t)
{
    Ctx *c = ps->ctx;
    if (c->device == DEV_CPU) {
        CT_ASSERT(!p_lowp, "lamb_step: the low-precision copy is a CUDA feature");
        (void)lowp_t;
        adam_begin_cpu(o->st, o->beta1, o->beta2, o->bias_correction, skip);
        lamb_step_cpu(ps->data, o->m, o->v, o->ratio, ps->grad, o->seg, o->nseg, *lr_dev, o->st,
                      o->beta1, o->beta2, o->eps, skip);
        return;
    }
#ifdef CTRAIN_CUDA
    adam_begin_cuda(o->st, o->beta1, o->beta2, o->bias_correction, skip, c->stream);
    lamb_step_cuda(ps->data, o->m, o->v, p_lowp, lowp_t, o->ratio, o->partial, ps->grad, o->seg,
                   o->nseg, o->chunk, o->nchunk, lr_dev, o->st, o->beta1, o->beta2, o->eps,
                   skip, c->stream);
#endif
}

void lamb_step(Lamb *o, ParamSet *ps, float lr, const int *skip, void *p_lowp, DType lowp_t)
{
    mem_set_f32(ps->ctx, o->lr_dev, lr);
    lamb_step_lr(o, ps, o->lr_dev, skip, p_lowp, lowp_t);
}

int64_t lamb_steps(const Lamb *o, ParamSet *ps) { return adam_state_steps(ps, o->st); }

void lamb_set_steps(Lamb *o, ParamSet *ps, int64_t step)
{
    adam_state_set_steps(ps, o->st, step, o->beta1, o->beta2, o->bias_correction);
}

void lamb_read_ratios(const Lamb *o, ParamSet *ps, float *ratio)
{
    mem_to_host(ps->ctx, ratio, o->ratio, (size_t)o->nseg * sizeof(float));
}

void lamb_free(Lamb *o, ParamSet *ps)
{
    Ctx *c = ps->ctx;
    adam_state_free(ps, o->m, o->v, o->st, o->lr_dev);
    mem_free(c, o->seg, (size_t)o->nseg * sizeof(OptSeg));
    mem_free(c, o->chunk, (size_t)o->nchunk * sizeof(OptChunk));
    mem_free(c, o->partial, 2 * (size_t)o->nchunk * sizeof(double));
    mem_free(c, o->ratio, (size_t)o->nseg * sizeof(float));
    memset(o, 0, sizeof *o);
}
