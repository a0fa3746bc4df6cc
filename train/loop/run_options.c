/* run_options.c — the run's defaults, and the decisions derived from them. */
#include "run_options.h"

#include <stdio.h>
#include <string.h>

void train_options_default(TrainOptions *o)
{
    memset(o, 0, sizeof *o);
    o->model = MODEL_MLP;
    snprintf(o->data, sizeof o->data, "fashion-mnist");
    o->epochs = 1;
    o->batch = 64;
    o->accum = 1;
    o->optim.kind = OPT_SGD;
    o->optim.momentum = 0.9f;
    o->lr = 0.05f;
    o->seed = 42;
    o->device = DEV_CPU;
    o->precision = PREC_FP32;
    o->log_every = 50;
    o->graph_warmup = 3;
    o->hidden[0] = 512;
    o->hidden[1] = 256;
    o->n_hidden = 2;
    o->workers = 4;
    o->seq = 128;
    o->schedule = SCHED_CONSTANT;
    o->eval_batch = 256;
    o->dropout = -1.0f;
    dist_options_default(&o->dist);
}

HeadKind train_options_head(const TrainOptions *o)
{
    if (o->head != HEAD_AUTO) return o->head;
    return feed_is_cls(o->data) ? HEAD_CLS : HEAD_MLM;
}

FeedSpec train_options_feed_spec(const TrainOptions *o)
{
    FeedSpec s = {o->data, model_kind_name(o->model), o->batch, o->eval_batch, o->image_size,
                  o->workers, NULL, o->classes, o->seed, o->seq, o->vocab, o->classes};
    return s;
}

long train_steps_per_epoch(long batches_per_epoch, int accum)
{
    return batches_per_epoch / accum;
}
