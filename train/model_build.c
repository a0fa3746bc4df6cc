/* model_build.c — name -> model, with the options that shape it. */
#include "model_build.h"

#include <string.h>
#include "../engine/error.h"
#include "../models/mlp.h"
#include "../models/resnet.h"

#define KNOWN_MODELS "mlp, resnet18, resnet34, resnet50, resnet101, resnet152"

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
    if (!strcmp(o->model, "mlp")) {
        double f = 0, in = 784;
        for (int i = 0; i < o->n_hidden; i++) { f += 2.0 * in * o->hidden[i]; in = o->hidden[i]; }
        return 3.0 * (f + 2.0 * in * (classes ? classes : 10));
    }
    return 0;
}
