/* model_build.c — model kind -> model, with the options that shape it. */
#include "model_build.h"

#include <stdio.h>
#include "data/mlm.h"
#include "engine/error.h"
#include "models/bert.h"
#include "models/mlp.h"
#include "models/resnet.h"
#include "train/feed/feed.h"

/* The ResNet configuration of the options (depth, classes, width, ...). */
static void resnet_config_of(ResNetConfig *cfg, const TrainOptions *o, int classes)
{
    resnet_config_default(cfg, model_kind_resnet_depth(o->model));
    if (classes) cfg->classes = classes;
    if (o->width) cfg->width = o->width;
    cfg->zero_init_residual = o->zero_init_residual;
    cfg->no_wd_bn_bias = o->no_wd_bn_bias;
    cfg->recompute = o->recompute;
}

/* The BERT configuration of the options and its head: MLM, where the
 * feed's classes are the vocabulary, or the classifier, where they are the
 * topics and the vocabulary comes separately (o->vocab_size, from the feed). */
static int bert_config_of(BertConfig *bc, const TrainOptions *o, int classes)
{
    int cls = train_options_head(o) == HEAD_CLS;
    bert_config_kind(bc, o->model, cls ? o->vocab_size : classes);
    if (cls) {
        bc->head = BERT_CLASSIFIER;
        bc->classes = classes ? classes : 2;
    }
    return cls;
}

void model_build(Model *m, Ctx *c, const TrainOptions *o, int classes)
{
    if (o->model == MODEL_MLP) {
        mlp_create(m, c, 784, o->hidden, o->n_hidden, classes ? classes : 10, o->seed);
        m->training = 1;
        return;
    }
    if (model_kind_is_resnet(o->model)) {
        ResNetConfig cfg;
        resnet_config_of(&cfg, o, classes);
        resnet_create(m, c, &cfg, o->seed);
        return;
    }
    CT_ASSERT(model_kind_is_bert(o->model), "model_build: model kind %d", (int)o->model);
    BertConfig bc;
    int cls = bert_config_of(&bc, o, classes);
    if (cls && !feed_is_cls(o->data))
        ct_fatal_hint("pass --data fortunes-cls --vocab vocab.txt, or drop --head cls",
                      "--head cls fine-tunes on a labelled set; --data %s has no labels per "
                      "sequence", o->data);
    if (!cls && feed_is_cls(o->data))
        ct_fatal_hint("drop --head mlm (fortunes-cls trains the classifier head)",
                      "--data %s is a classification set: it needs --head cls", o->data);
    bc.recompute = o->recompute;
    if (o->dropout >= 0) bc.hidden_dropout = bc.attn_dropout = o->dropout;
    bert_create(m, c, &bc, o->seed);
    snprintf(m->name, sizeof m->name, "%s", model_kind_name(o->model));
}

double model_train_flops_per_sample(const TrainOptions *o, int classes)
{
    if (model_kind_is_resnet(o->model)) {
        ResNetConfig cfg;
        resnet_config_of(&cfg, o, classes);
        return 3.0 * resnet_flops_per_image(&cfg, o->image_size ? o->image_size : 224);
    }
    if (model_kind_is_bert(o->model)) {
        BertConfig bc;
        int cls = bert_config_of(&bc, o, classes);
        /* the MLM head runs on the masked-row slots (data/mlm.h), the
         * classifier on the [CLS] row */
        return bert_train_flops_per_seq(&bc, o->seq, cls ? 1.0 : mlm_max_masked(o->seq, MLM_MASK_PROB));
    }
    if (o->model == MODEL_MLP) {
        double f = 0, in = 784;
        for (int i = 0; i < o->n_hidden; i++) { f += 2.0 * in * o->hidden[i]; in = o->hidden[i]; }
        return 3.0 * (f + 2.0 * in * (classes ? classes : 10));
    }
    return 0;
}
