/* optimizer.h — one front for SGD, AdamW and LAMB, as the trainer uses them.
 * Every optimizer keeps fp32 state laid out like the parameter buffer and
 * takes the grad scaler's found_inf flag (or NULL) as its skip flag. */
#ifndef CTRAIN_TRAIN_OPTIMIZER_H
#define CTRAIN_TRAIN_OPTIMIZER_H

#include "../engine/params.h"
#include "adamw.h"
#include "lamb.h"
#include "options.h"
#include "sgd.h"

typedef struct Optimizer {
    OptimKind kind;
    Sgd sgd;
    AdamW adamw;
    Lamb lamb;
} Optimizer;

void optimizer_init(Optimizer *o, ParamSet *ps, const TrainOptions *opt);
void optimizer_step(Optimizer *o, ParamSet *ps, float lr, const int *skip);
void optimizer_free(Optimizer *o, ParamSet *ps);

#endif
