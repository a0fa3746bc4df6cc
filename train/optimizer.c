/* optimizer.c — dispatch to SGD, AdamW or LAMB. AdamW and LAMB use BERT's
 * usual betas (0.9, 0.999) and eps 1e-6; weight decay as --wd. */
#include "optimizer.h"

#include <string.h>

void optimizer_init(Optimizer *o, ParamSet *ps, const TrainOptions *opt)
{
    memset(o, 0, sizeof *o);
    o->kind = opt->optim;
    switch (o->kind) {
    case OPT_SGD: sgd_init(&o->sgd, ps, opt->momentum, opt->weight_decay, opt->nesterov); break;
    case OPT_ADAMW: adamw_init(&o->adamw, ps, 0.9, 0.999, 1e-6, opt->weight_decay); break;
    case OPT_LAMB: lamb_init(&o->lamb, ps, 0.9, 0.999, 1e-6, opt->weight_decay, 1, 0); break;
    }
}

void optimizer_step(Optimizer *o, ParamSet *ps, float lr, const int *skip)
{
    switch (o->kind) {
    case OPT_SGD: sgd_step(&o->sgd, ps, lr, skip); break;
    case OPT_ADAMW: adamw_step(&o->adamw, ps, lr, skip, NULL, DT_F32); break;
    case OPT_LAMB: lamb_step(&o->lamb, ps, lr, skip, NULL, DT_F32); break;
    }
}

void optimizer_free(Optimizer *o, ParamSet *ps)
{
    switch (o->kind) {
    case OPT_SGD: sgd_free(&o->sgd, ps); break;
    case OPT_ADAMW: adamw_free(&o->adamw, ps); break;
    case OPT_LAMB: lamb_free(&o->lamb, ps); break;
    }
}
