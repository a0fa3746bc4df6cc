/* model_build.h — a model from its kind and the training options that shape it. */
#ifndef CTRAIN_TRAIN_MODEL_BUILD_H
#define CTRAIN_TRAIN_MODEL_BUILD_H

#include "models/model.h"
#include "run_options.h"

/* classes: from the data (0 lets the model choose its default). A BERT
 * takes its head from train_options_head and refuses a head the data
 * cannot train. */
void model_build(Model *m, Ctx *c, const TrainOptions *o, int classes);
/* Training FLOPs per sample (forward + backward = 3 x forward) for MFU and
 * the benchmark; 0 when unknown. */
double model_train_flops_per_sample(const TrainOptions *o, int classes);

#endif
