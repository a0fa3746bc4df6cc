/* sgd.c — the SGD optimizer's host side: state allocation, one step, and
 * the overlapped update's ranges (sgd_step_range), both through one range
 * function. */
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

/* Elements [begin, end) with weight decay wd, the learning rate from
 * o->lr_dev, refreshing ps->lowp when AMP keeps one; stream: a
 * cudaStream_t (ignored on the CPU). */
static void sgd_range(Sgd *o, ParamSet *ps, size_t begin, size_t end, float wd, const int *skip,
                      void *stream)
{
    float *p = ps->data + begin, *g = ps->grad + begin;
    if (ps->ctx->device == DEV_CPU) {
        (void)stream;
        if (skip && *skip) return;   /* CPU "device" memory is host memory */
        sgd_step_cpu(p, o->m + begin, g, end - begin, *o->lr_dev, o->momentum, wd, o->nesterov);
        return;
    }
#ifdef CTRAIN_CUDA
    sgd_step_cuda(p, o->m + begin,
                  ps->lowp ? (char *)ps->lowp + begin * dtype_size(ps->lowp_dt) : NULL,
                  ps->lowp ? ps->lowp_dt : DT_F32, g, end - begin, o->lr_dev, o->momentum, wd,
                  o->nesterov, skip, (cudaStream_t)stream);
#endif
}

void sgd_step_lr(Sgd *o, ParamSet *ps, const int *skip)
{
#ifdef CTRAIN_CUDA
    void *stream = (void *)ps->ctx->stream;
#else
    void *stream = NULL;
#endif
    /* group ranges: [0, n_decay) with weight decay, [n_decay, total) without */
    sgd_range(o, ps, 0, ps->n_decay, o->weight_decay, skip, stream);
    sgd_range(o, ps, ps->n_decay, ps->total, 0.0f, skip, stream);
}

void sgd_step_range(Sgd *o, ParamSet *ps, size_t begin, size_t end, void *stream)
{
    sgd_range(o, ps, begin, end, end <= ps->n_decay ? o->weight_decay : 0.0f, NULL, stream);
}

void sgd_free(Sgd *o, ParamSet *ps)
{
    mem_free(ps->ctx, o->m, ps->total * sizeof(float));
    if (o->lr_dev) mem_free(ps->ctx, o->lr_dev, sizeof(float));
    memset(o, 0, sizeof *o);
}
