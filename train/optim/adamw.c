/* adamw.c — the AdamW optimizer's host side: state allocation, the step's
 * begin (count and bias corrections) and its per-range updates (kernels and
 * math in ops/adam.h). A whole step and the overlapped update's ranges
 * (adamw_step_range) go through the same range function. */
#include "adamw.h"

#include <string.h>
#include "adam_state.h"
#include "engine/error.h"
#include "engine/mem.h"

void adamw_init(AdamW *o, ParamSet *ps, double beta1, double beta2, double eps,
                double weight_decay)
{
    memset(o, 0, sizeof *o);
    adam_state_check("AdamW", beta1, beta2, eps, weight_decay);
    o->beta1 = beta1;
    o->beta2 = beta2;
    o->eps = eps;
    o->weight_decay = weight_decay;
    adam_state_alloc(ps, &o->m, &o->v, &o->st, &o->lr_dev);
}

void adamw_step_begin(AdamW *o, ParamSet *ps, const int *skip)
{
    if (ps->ctx->device == DEV_CPU) {
        adam_begin_cpu(o->st, o->beta1, o->beta2, 1, skip);
        return;
    }
#ifdef CTRAIN_CUDA
    adam_begin_cuda(o->st, o->beta1, o->beta2, 1, skip, ps->ctx->stream);
#endif
}

/* Elements [begin, end) with weight decay wd. p_lowp: NULL or the working
 * copy of all ps->total weights; stream: a cudaStream_t (ignored on the CPU). */
static void adamw_range(AdamW *o, ParamSet *ps, size_t begin, size_t end, double wd,
                        const float *lr_dev, const int *skip, void *p_lowp, DType lowp_t,
                        void *stream)
{
    float *p = ps->data + begin, *g = ps->grad + begin;
    if (ps->ctx->device == DEV_CPU) {
        adamw_step_cpu(p, o->m + begin, o->v + begin, g, end - begin, *lr_dev, o->st, o->beta1,
                       o->beta2, o->eps, wd, skip);
        return;
    }
#ifdef CTRAIN_CUDA
    adamw_step_cuda(p, o->m + begin, o->v + begin,
                    p_lowp ? (char *)p_lowp + begin * dtype_size(lowp_t) : NULL, lowp_t, g,
                    end - begin, lr_dev, o->st, o->beta1, o->beta2, o->eps, wd, skip,
                    (cudaStream_t)stream);
#else
    (void)p_lowp; (void)lowp_t; (void)stream;
#endif
}

void adamw_step_lr(AdamW *o, ParamSet *ps, const float *lr_dev, const int *skip, void *p_lowp,
                   DType lowp_t)
{
    Ctx *c = ps->ctx;
    CT_ASSERT(c->device != DEV_CPU || !p_lowp, "adamw_step: the low-precision copy is a CUDA feature");
#ifdef CTRAIN_CUDA
    void *stream = (void *)c->stream;
#else
    void *stream = NULL;
#endif
    adamw_step_begin(o, ps, skip);
    /* group ranges: [0, n_decay) with weight decay, [n_decay, total) without */
    adamw_range(o, ps, 0, ps->n_decay, o->weight_decay, lr_dev, skip, p_lowp, lowp_t, stream);
    adamw_range(o, ps, ps->n_decay, ps->total, 0.0, lr_dev, skip, p_lowp, lowp_t, stream);
}

void adamw_step(AdamW *o, ParamSet *ps, float lr, const int *skip, void *p_lowp, DType lowp_t)
{
    mem_set_f32(ps->ctx, o->lr_dev, lr);
    adamw_step_lr(o, ps, o->lr_dev, skip, p_lowp, lowp_t);
}

void adamw_step_range(AdamW *o, ParamSet *ps, size_t begin, size_t end, void *stream)
{
    adamw_range(o, ps, begin, end, end <= ps->n_decay ? o->weight_decay : 0.0, o->lr_dev, NULL,
                ps->lowp, ps->lowp ? ps->lowp_dt : DT_F32, stream);
}

int64_t adamw_steps(const AdamW *o, ParamSet *ps) { return adam_state_steps(ps, o->st); }

void adamw_set_steps(AdamW *o, ParamSet *ps, int64_t step)
{
    adam_state_set_steps(ps, o->st, step, o->beta1, o->beta2, 1);
}

void adamw_free(AdamW *o, ParamSet *ps)
{
    adam_state_free(ps, o->m, o->v, o->st, o->lr_dev);
    memset(o, 0, sizeof *o);
}
