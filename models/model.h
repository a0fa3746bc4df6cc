/* model.h — what the trainer sees of a model: its parameters and a forward
 * function from an input batch to logits. Each model file (mlp.c, resnet.c,
 * bert.c) fills one of these.
 *
 * The model kind: the names --model accepts, parsed once (model_kind_parse)
 * into a ModelKind that the feeds, the builder and the bench switch on; the
 * family predicates say which file builds it. */
#ifndef CTRAIN_MODELS_MODEL_H
#define CTRAIN_MODELS_MODEL_H

#include "engine/ctx.h"
#include "engine/params.h"
#include "engine/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MODEL_MLP = 0,
    MODEL_RESNET18, MODEL_RESNET34, MODEL_RESNET50, MODEL_RESNET101, MODEL_RESNET152,
    MODEL_BERT_TINY, MODEL_BERT_MINI, MODEL_BERT_SMALL, MODEL_BERT_MEDIUM, MODEL_BERT_BASE,
    MODEL_BERT_LARGE,
    MODEL_KIND_COUNT
} ModelKind;

/* "mlp", "resnet18" ... "resnet152", "bert-tiny" ... "bert-large" (exactly)
 * -> ModelKind; -1 for any other name. */
int model_kind_parse(const char *name);
/* The name model_kind_parse reads ("?" out of range). */
const char *model_kind_name(ModelKind k);
/* "mlp, resnet18, ..., bert-large": every name, for a hint. */
const char *model_kind_list(void);
int model_kind_is_resnet(ModelKind k);
int model_kind_is_bert(ModelKind k);
/* 18, 34, 50, 101 or 152 for a ResNet; 0 for the others. */
int model_kind_resnet_depth(ModelKind k);

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
    /* The training loss (f32 [1]) from the batch's input tensors:
     * classifiers: {x, labels}; BERT classifier: {ids, token_types,
     * mask_add, labels}; BERT MLM: {ids, token_types, mask_add, rows,
     * labels} (models/bert.h). Labels come last.
     * NULL means model_classifier_loss. Also returns the logits in *logits
     * when logits is non-NULL (the caller releases them). */
    Tensor *(*loss)(Ctx *c, Model *m, Tensor *const *in, float label_smoothing, Tensor **logits);
    int n_inputs;        /* how many tensors loss() takes */
    struct Fp8Recipe *fp8;   /* --precision fp8: the FP8 Linear layers' scales
                              * (ops/linear_fp8.h); NULL otherwise. The trainer
                              * calls fp8_recipe_step after each optimizer step */
    void (*free_impl)(Model *m);
};

void model_free(Model *m);
/* Cross-entropy of forward(in[0]) against in[1] (i32 labels). */
Tensor *model_classifier_loss(Ctx *c, Model *m, Tensor *const *in, float label_smoothing,
                              Tensor **logits);
/* m->loss, or the classifier loss when the model has none. */
Tensor *model_loss(Ctx *c, Model *m, Tensor *const *in, float label_smoothing, Tensor **logits);

#ifdef __cplusplus
}
#endif
#endif
