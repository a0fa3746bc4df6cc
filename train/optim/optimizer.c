/* optimizer.c — dispatch to SGD, AdamW or LAMB. AdamW and LAMB use BERT's
 * usual betas (0.9, 0.999) and eps 1e-6; weight decay as --wd. */
#include "optimizer.h"

#include <string.h>
#include "engine/error.h"

static const char *const NAMES[] = {"sgd", "adamw", "lamb"};

int optim_parse(const char *s)
{
    for (int k = 0; k < 3; k++)
        if (!strcmp(s, NAMES[k])) return k;
    return -1;
}

const char *optim_name(OptimKind k) { return NAMES[k]; }

void optimizer_init(Optimizer *o, ParamSet *ps, const OptimConfig *cfg)
{
    memset(o, 0, sizeof *o);
    o->kind = cfg->kind;
    switch (o->kind) {
    case OPT_SGD: sgd_init(&o->sgd, ps, cfg->momentum, cfg->weight_decay, cfg->nesterov); break;
    case OPT_ADAMW: adamw_init(&o->adamw, ps, 0.9, 0.999, 1e-6, cfg->weight_decay); break;
    case OPT_LAMB: lamb_init(&o->lamb, ps, 0.9, 0.999, 1e-6, cfg->weight_decay, 1, 0); break;
    }
}

/* The optimizer kernels also write AMP's working copy when there is one
 * (engine/params.h: params_lowp_enable). */
void optimizer_step(Optimizer *o, ParamSet *ps, float lr, const int *skip)
{
    DType lt = ps->lowp ? ps->lowp_dt : DT_F32;
    switch (o->kind) {
    case OPT_SGD: sgd_step(&o->sgd, ps, lr, skip); break;
    case OPT_ADAMW: adamw_step(&o->adamw, ps, lr, skip, ps->lowp, lt); break;
    case OPT_LAMB: lamb_step(&o->lamb, ps, lr, skip, ps->lowp, lt); break;
    }
}

float *optimizer_lr_dev(Optimizer *o)
{
    switch (o->kind) {
    case OPT_SGD: return o->sgd.lr_dev;
    case OPT_ADAMW: return o->adamw.lr_dev;
    case OPT_LAMB: return o->lamb.lr_dev;
    }
    return NULL;
}

void optimizer_step_lr(Optimizer *o, ParamSet *ps, const int *skip)
{
    switch (o->kind) {
    case OPT_SGD: sgd_step_lr(&o->sgd, ps, skip); break;
    case OPT_ADAMW:
        adamw_step_lr(&o->adamw, ps, o->adamw.lr_dev, skip, ps->lowp,
                      ps->lowp ? ps->lowp_dt : DT_F32);
        break;
    case OPT_LAMB:
        lamb_step_lr(&o->lamb, ps, o->lamb.lr_dev, skip, ps->lowp,
                     ps->lowp ? ps->lowp_dt : DT_F32);
        break;
    }
}

int optimizer_can_split(const Optimizer *o) { return o->kind == OPT_SGD || o->kind == OPT_ADAMW; }

void optimizer_split_begin(Optimizer *o, ParamSet *ps)
{
    CT_ASSERT(optimizer_can_split(o), "optimizer_split_begin: %s has no split step",
              optim_name(o->kind));
    if (o->kind != OPT_ADAMW) return;   /* SGD keeps no per-step state */
    adamw_step_begin(&o->adamw, ps, NULL);
}

void optimizer_split_range(Optimizer *o, ParamSet *ps, size_t begin, size_t end, void *stream)
{
    CT_ASSERT(begin < end && end <= ps->total && (end <= ps->n_decay || begin >= ps->n_decay),
              "optimizer_split_range: [%zu, %zu) is empty, past %zu or across the weight-decay "
              "boundary %zu", begin, end, ps->total, ps->n_decay);
    if (o->kind == OPT_SGD) sgd_step_range(&o->sgd, ps, begin, end, stream);
    else adamw_step_range(&o->adamw, ps, begin, end, stream);
}

void optimizer_free(Optimizer *o, ParamSet *ps)
{
    switch (o->kind) {
    case OPT_SGD: sgd_free(&o->sgd, ps); break;
    case OPT_ADAMW: adamw_free(&o->adamw, ps); break;
    case OPT_LAMB: lamb_free(&o->lamb, ps); break;
    }
}

int optimizer_state(const Optimizer *o, float **blocks)
{
    switch (o->kind) {
    case OPT_SGD: blocks[0] = o->sgd.m; return 1;
    case OPT_ADAMW: blocks[0] = o->adamw.m; blocks[1] = o->adamw.v; return 2;
    case OPT_LAMB: blocks[0] = o->lamb.m; blocks[1] = o->lamb.v; return 2;
    }
    return 0;
}

int64_t optimizer_steps(const Optimizer *o, ParamSet *ps)
{
    switch (o->kind) {
    case OPT_ADAMW: return adamw_steps(&o->adamw, ps);
    case OPT_LAMB: return lamb_steps(&o->lamb, ps);
    default: return -1;
    }
}

void optimizer_set_steps(Optimizer *o, ParamSet *ps, int64_t step)
{
    switch (o->kind) {
    case OPT_ADAMW: adamw_set_steps(&o->adamw, ps, step); break;
    case OPT_LAMB: lamb_set_steps(&o->lamb, ps, step); break;
    default: break;   /* SGD keeps no step count */
    }
}
