/* eval.h — accuracy and loss over a feed's held-out split, in eval mode
 * (batch norm uses running statistics, no dropout, no autograd). */
#ifndef CTRAIN_TRAIN_EVAL_H
#define CTRAIN_TRAIN_EVAL_H

#include "../models/model.h"
#include "feed.h"

typedef struct EvalResult {
    double loss, top1, top5;
    double majority;   /* top-1 of always answering the split's most common label */
    long n;
} EvalResult;

EvalResult evaluate(Ctx *c, Model *m, Feed *f);

#endif
