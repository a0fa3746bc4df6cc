/* sgd.c — the SGD optimizer's host side: state allocation and one step. */
#include "sgd.h"

#include <string.h>
#include "engine/error.h"
#include "engine/mem.h"
#include "ops/optim.h"

void sgd_init(Sgd *o, ParamSet *ps, float momentum, float weight_decay, int nesterov)
{
    memset(o, 0, sizeof *o);
    o->momentum = momentum;
    o->weight_decay = weight_decay;
    o->nesterov = nesterov;
    if (nesterov && momentum <= 0.0f)
        ct_fatal_hint("pass --momentum 0.9 (for example) with --nesterov",
                      "Nesterov momentum requires a momentum > 0");
    o->m = (float *)mem_alloc(ps->ctx, ps->total * sizeof(float));
    mem_zero(ps->ctx, o->m, ps->total * sizeof(float));
    o->lr_dev = (float *)mem_alloc(ps->ctx, sizeof(float));   /* host memory on the CPU */
}

void sgd_step(Sgd *o, ParamSet *ps, float lr, const int *skip)
{
    mem_set_f32(ps->ctx, o->lr_dev, lr);
    sgd_step_lr(o, ps, skip);
}

void sgd_step_lr(Sgd *o, ParamSet *ps, const int *skip)
{
    Ctx *c = ps->ctx;
    const float lr = c->device == DEV_CPU ? *o->lr_dev : 0.0f;
    /* group ranges: [0, n_decay) with weight decay, [n_decay, total) without */
    size_t off[2] = {0, ps->n_decay}, len[2] = {ps->n_decay, ps->total - ps->n_decay};
    float wd[2] = {o->weight_decay, 0.0f};
    if (c->device == DEV_CPU) {
        if (skip && *skip) return;   /* CPU "device" memory is host memory */
        for (int g = 0; g < 2; g++)
            sgd_step_cpu(ps->data + off[g], o->m + off[g], ps->grad + off[g], len[g], lr,
                         o->momentum, wd[g], o->nesterov);
        return;
    }
#ifdef CTRAIN_CUDA
    (void)lr;
    for (int g = 0; g < 2; g++)
        sgd_step_cuda(ps->data + off[g], o->m + off[g],
                      ps->lowp ? (char *)ps->lowp + off[g] * dtype_size(ps->lowp_dt) : NULL,
                      ps->lowp ? ps->lowp_dt : DT_F32, ps->grad + off[g], len[g],
                      o->lr_dev, o->momentum, wd[g], o->nesterov, skip, c->stream);
#endif
}

void sgd_free(Sgd *o, ParamSet *ps)
{
    mem_free(ps->ctx, o->m, ps->total * sizeof(float));
    if (o->lr_dev) mem_free(ps->ctx, o->lr_dev, sizeof(float));
    memset(o, 0, sizeof *o);
}
