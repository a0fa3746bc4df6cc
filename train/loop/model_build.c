/* model_build.c — name -> model, with the options that shape it. */
#include "model_build.h"

#include <stdio.h>
#include <string.h>
#include "data/mlm.h"
#include "engine/error.h"
#include "models/bert.h"
#include "models/mlp.h"
#include "models/resnet.h"
#include "train/feed/feed.h"

#define KNOWN_MODELS "mlp, resnet18, resnet34, resnet50, resnet101, resnet152, bert-tiny, " \
    "bert-mini, bert-small, bert-medium, bert-base, bert-large"

void model_build(Model *m, Ctx *c, const TrainOptions *o, int classes)
{
    if (!strcmp(o->model, "mlp")) {
        mlp_create(m, c, 784, o->hidden, o->n_hidden, classes ? classes : 10, o->seed);
        m->training = 1;
        return;
    }
    int depth = resnet_depth_from_name(o->model);
    if (depth) {
        ResNetConfig cfg;
        resnet_config_default(&cfg, depth);
        if (classes) cfg.classes = classes;
        cfg.zero_init_residual = o->zero_init_residual;
        cfg.no_wd_bn_bias = o->no_wd_bn_bias;
        cfg.recompute = o->recompute;
        resnet_create(m, c, &cfg, o->seed);
        return;
    }
    BertConfig bc;
    int cls = o->head == HEAD_CLS || (o->head == HEAD_AUTO && feed_is_cls(o->data));
    /* MLM: the feed's classes are the vocabulary; classifier: topics, and
     * the vocabulary comes separately (o->vocab_size, from the feed) */
    if (!strncmp(o->model, "bert-", 5) &&
        bert_config_named(&bc, o->model, cls ? o->vocab_size : classes) == 0) {
        if (cls && !feed_is_cls(o->data))
            ct_fatal_hint("pass --data fortunes-cls --vocab vocab.txt, or drop --head cls",
                          "--head cls fine-tunes on a labelled set; --data %s has no labels per "
                          "sequence", o->data);
        if (!cls && feed_is_cls(o->data))
            ct_fatal_hint("drop --head mlm (fortunes-cls trains the classifier head)",
                          "--data %s is a classification set: it needs --head cls", o->data);
        if (cls) {
            bc.head = BERT_CLASSIFIER;
            bc.classes = classes ? classes : 2;
        }
        bc.recompute = o->recompute;
        if (o->dropout >= 0) bc.hidden_dropout = bc.attn_dropout = o->dropout;
        bert_create(m, c, &bc, o->seed);
        snprintf(m->name, sizeof m->name, "%s", o->model);
        return;
    }
    ct_fatal_hint("known models: " KNOWN_MODELS, "--model: unknown model '%s'", o->model);
}

double model_train_flops_per_sample(const TrainOptions *o, int classes)
{
    int depth = resnet_depth_from_name(o->model);
    if (depth) {
        ResNetConfig cfg;
        resnet_config_default(&cfg, depth);
        if (classes) cfg.classes = classes;
        return 3.0 * resnet_flops_per_image(&cfg, o->image_size ? o->image_size : 224);
    }
    BertConfig bc;
    int cls = o->head == HEAD_CLS || (o->head == HEAD_AUTO && feed_is_cls(o->data));
    if (!strncmp(o->model, "bert-", 5) &&
        bert_config_named(&bc, o->model, cls ? o->vocab_size : classes) == 0) {
        if (cls) {
            bc.head = BERT_CLASSIFIER;
            bc.classes = classes ? classes : 2;
        }
        /* the MLM head runs on the masked-row slots (data/mlm.h), the
         * classifier on the [CLS] row */
        return bert_train_flops_per_seq(&bc, o->seq, cls ? 1.0 : mlm_max_masked(o->seq, MLM_MASK_PROB));
    }
    if (!strcmp(o->model, "mlp")) {
        double f = 0, in = 784;
        for (int i = 0; i < o->n_hidden; i++) { f += 2.0 * in * o->hidden[i]; in = o->hidden[i]; }
        return 3.0 * (f + 2.0 * in * (classes ? classes : 10));
    }
    return 0;
}
