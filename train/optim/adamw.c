/* adamw.c — the AdamW optimizer's host side: state allocation and one step
 * (kernels and math in ops/adam.h). */
#include "adamw.h"

#include <string.h>
#include "engine/error.h"
#include "engine/mem.h"

void adamw_init(AdamW *o, ParamSet *ps, double beta1, double beta2, double eps,
                double weight_decay)
{
    memset(o, 0, sizeof *o);
    if (!(beta1 >= 0.0 && beta1 < 1.0 && beta2 >= 0.0 && beta2 < 1.0))
        ct_fatal_hint("the usual values are --beta1 0.9 --beta2 0.999",
                      "AdamW betas must lie in [0, 1), got %g and %g", beta1, beta2);
    if (!(eps >= 0.0) || !(weight_decay >= 0.0))
        ct_fatal("AdamW eps and weight decay must be >= 0, got %g and %g", eps, weight_decay);
    o->beta1 = beta1;
    o->beta2 = beta2;
    o->eps = eps;
    o->weight_decay = weight_decay;
    Ctx *c = ps->ctx;
    o->m = (float *)mem_alloc(c, ps->total * sizeof(float));
    o->v = (float *)mem_alloc(c, ps->total * sizeof(float));
    o->st = (AdamStepState *)mem_alloc(c, sizeof(AdamStepState));
    o->lr_dev = (float *)mem_alloc(c, sizeof(float));
    mem_zero(c, o->m, ps->total * sizeof(float));
    mem_zero(c, o->v, ps->total * sizeof(float));
    mem_zero(c, o->st, sizeof(AdamStepState));
    mem_zero(c, o->lr_dev, sizeof(float));
}

void adamw_step_lr(AdamW *o, ParamSet *ps, const float *lr_dev, const int *skip, void *p_lowp,
                   DType lowp_t)
{
    Ctx *c = ps->ctx;
    /* group ranges: [0, n_decay) with weight decay, [n_decay, total) without */
    size_t off[2] = {0, ps->n_decay}, len[2] = {ps->n_decay, ps->total - ps->n_decay};
    double wd[2] = {o->weight_decay, 0.0};
    if (c->device == DEV_CPU) {
        CT_ASSERT(!p_lowp, "adamw_step: the low-precision copy is a CUDA feature");
        adam_begin_cpu(o->st, o->beta1, o->beta2, 1, skip);
        for (int g = 0; g < 2; g++)
            adamw_step_cpu(ps->data + off[g], o->m + off[g], o->v + off[g], ps->grad + off[g],
                           len[g], *lr_dev, o->st, o->beta1, o->beta2, o->eps, wd[g], skip);
        return;
    }
#ifdef CTRAIN_CUDA
    const size_t esz = p_lowp ? dtype_size(lowp_t) : 0;
    adam_begin_cuda(o->st, o->beta1, o->beta2, 1, skip, c->stream);
    for (int g = 0; g < 2; g++)
        adamw_step_cuda(ps->data + off[g], o->m + off[g], o->v + off[g],
                        p_lowp ? (char *)p_lowp + off[g] * esz : NULL, lowp_t,
                        ps->grad + off[g], len[g], lr_dev, o->st, o->beta1, o->beta2, o->eps,
                        wd[g], skip, c->stream);
#else
    (void)lowp_t;
#endif
}

void adamw_step(AdamW *o, ParamSet *ps, float lr, const int *skip, void *p_lowp, DType lowp_t)
{
    mem_set_f32(ps->ctx, o->lr_dev, lr);
    adamw_step_lr(o, ps, o->lr_dev, skip, p_lowp, lowp_t);
}

int64_t adamw_steps(const AdamW *o, ParamSet *ps)
{
    AdamStepState s;
    mem_to_host(ps->ctx, &s, o->st, sizeof s);
    return s.step;
}

void adamw_free(AdamW *o, ParamSet *ps)
{
    Ctx *c = ps->ctx;
    mem_free(c, o->m, ps->total * sizeof(float));
    mem_free(c, o->v, ps->total * sizeof(float));
    mem_free(c, o->st, sizeof(AdamStepState));
    mem_free(c, o->lr_dev, sizeof(float));
    memset(o, 0, sizeof *o);
}
