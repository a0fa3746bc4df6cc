/* adam_state.c — AdamW's and LAMB's shared state and checks (adam_state.h). */
#include "adam_state.h"

#include "engine/error.h"
#include "engine/mem.h"

void adam_state_check(const char *who, double beta1, double beta2, double eps,
                      double weight_decay)
{
    if (!(beta1 >= 0.0 && beta1 < 1.0 && beta2 >= 0.0 && beta2 < 1.0))
        ct_fatal_hint("the usual values are --beta1 0.9 --beta2 0.999",
                      "%s betas must lie in [0, 1), got %g and %g", who, beta1, beta2);
    if (!(eps >= 0.0) || !(weight_decay >= 0.0))
        ct_fatal("%s eps and weight decay must be >= 0, got %g and %g", who, eps, weight_decay);
}

void adam_state_alloc(ParamSet *ps, float **m, float **v, AdamStepState **st, float **lr_dev)
{
    Ctx *c = ps->ctx;
    *m = (float *)mem_alloc(c, ps->total * sizeof(float));
    *v = (float *)mem_alloc(c, ps->total * sizeof(float));
    *st = (AdamStepState *)mem_alloc(c, sizeof(AdamStepState));
    *lr_dev = (float *)mem_alloc(c, sizeof(float));
    mem_zero(c, *m, ps->total * sizeof(float));
    mem_zero(c, *v, ps->total * sizeof(float));
    mem_zero(c, *st, sizeof(AdamStepState));
    mem_zero(c, *lr_dev, sizeof(float));
}

void adam_state_free(ParamSet *ps, float *m, float *v, AdamStepState *st, float *lr_dev)
{
    Ctx *c = ps->ctx;
    mem_free(c, m, ps->total * sizeof(float));
    mem_free(c, v, ps->total * sizeof(float));
    mem_free(c, st, sizeof(AdamStepState));
    mem_free(c, lr_dev, sizeof(float));
}

int64_t adam_state_steps(ParamSet *ps, const AdamStepState *st)
{
    AdamStepState s;
    mem_to_host(ps->ctx, &s, st, sizeof s);
    return s.step;
}

void adam_state_set_steps(ParamSet *ps, AdamStepState *st, int64_t step, double beta1,
                          double beta2, int bias_correction)
{
    AdamStepState s = adam_step_state(step, beta1, beta2, bias_correction);
    mem_to_device(ps->ctx, st, &s, sizeof s);
}
