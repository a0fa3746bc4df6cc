/* model.h — what the trainer sees of a model: its parameters and a forward
 * function from an input batch to logits. Each model file (mlp.c, later
 * resnet.c, bert.c) fills one of these. */
#ifndef CTRAIN_MODELS_MODEL_H
#define CTRAIN_MODELS_MODEL_H

#include "../engine/ctx.h"
#include "../engine/params.h"
#include "../engine/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct Model Model;
struct Model {
    char name[32];
    ParamSet params;
    void *impl;
    int in_features;     /* flat input size the forward expects (MLP) */
    int classes;
    int training;        /* 1: batch statistics and dropout; 0: eval mode */
    /* x [B, ...] -> logits [B, classes]; records nodes when grad is on */
    Tensor *(*forward)(Ctx *c, Model *m, Tensor *x);
    void (*free_impl)(Model *m);
};

void model_free(Model *m);

#ifdef __cplusplus
}
#endif
#endif
