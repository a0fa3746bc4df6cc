/* run.c — the run builder (run.h gives the order and why). */
#include "run.h"

#include <stdio.h>
#include <string.h>
#include "engine/error.h"
#include "engine/log.h"
#include "ops/linear_fp8.h"
#include "train/io/checkpoint.h"
#include "train/io/jsonlog.h"
#include "train/io/safetensors.h"
#include "train/parallel/dist.h"
#include "model_build.h"

/* --load FILE: weights from a ctrain or PyTorch file; a training checkpoint's
 * __ctrain.* entries (optimizer state, position) are not weights: skip them. */
static void load_weights(ParamSet *ps, const char *path, const char *model)
{
    ckpt_load_params_or_die(ps, path, model, ckpt_is_training(path) ? CKPT_ALLOW_EXTRA : 0);
}

/* Fine-tuning: a BERT classifier loading a file without the classifier
 * (a pre-trained MLM) takes the encoder, ignores the MLM head
 * (cls.predictions.*) and keeps its new bert.pooler.* and classifier.* at
 * their init. A file with classifier.weight (a fine-tuned model) loads
 * strictly, as everywhere else. */
/* Rows (classes) of parameter `name` in ps; -1 when it has none. */
static int64_t param_rows(const ParamSet *ps, const char *name)
{
    for (int i = 0; i < ps->n; i++)
        if (!strcmp(ps->p[i].name, name)) return ps->p[i].shape[0];
    return -1;
}

static void load_start_weights(ParamSet *ps, const TrainOptions *o, const char *path,
                               const char *model)
{
    int cls = model_kind_is_bert(o->model) && train_options_head(o) == HEAD_CLS;
    /* the classification head: ResNet's fc, BERT's classifier */
    const char *head[2] = {NULL, NULL};
    if (model_kind_is_resnet(o->model)) { head[0] = "fc.weight"; head[1] = "fc.bias"; }
    if (cls) { head[0] = "classifier.weight"; head[1] = "classifier.bias"; }
    StFile f;
    char err[256];
    int pretrained = 0;
    int64_t file_rows = -1;
    if (head[0] && st_open(path, &f, err, sizeof err) == ST_OK) {
        const StEntry *e = st_find(&f, head[0]);
        pretrained = cls && !e;
        if (e && e->ndim == 2) file_rows = e->shape[0];
        st_close(&f);
    }
    const int64_t rows = head[0] ? param_rows(ps, head[0]) : -1;
    if (file_rows > 0 && rows > 0 && file_rows != rows) {
        /* another class count: everything but the head, which starts anew */
        LOG_W("%s has a %s head of %lld classes, this model %lld: loading all but %s and %s, "
              "which start from their initialization (fine-tuning on the new classes)", path,
              head[0], (long long)file_rows, (long long)rows, head[0], head[1]);
        int code = ckpt_load_params_except(ps, path, model, head, 2, err, sizeof err);
        if (code) ct_fatal_hint(ckpt_hint(code, 0), "%s", err);
        return;
    }
    if (!pretrained) { load_weights(ps, path, model); return; }
    LOG_I("%s has no classifier: loading its encoder for fine-tuning (new pooler and "
          "classifier)", path);
    ckpt_load_params_or_die(ps, path, model, CKPT_ALLOW_EXTRA | CKPT_ALLOW_MISSING);
}

/* Steps per epoch, the run's total and the epochs it spans. */
static void plan_steps(Run *r)
{
    const TrainOptions *o = &r->o;
    long bpe = r->fd.batches_per_epoch;
    r->steps_per_epoch = train_steps_per_epoch(bpe, o->accum);
    if (r->steps_per_epoch < 1)
        ct_fatal_hint("lower --accum or --batch", "an epoch has %ld batches, fewer than --accum %d",
                      bpe, o->accum);
    if (!o->steps && r->steps_per_epoch > TRAIN_MAX_STEPS / o->epochs)
        ct_fatal_hint("pass fewer --epochs, or --steps N", "--epochs %d of %ld steps each make "
                      "more than %ld steps, the most a run may have", o->epochs,
                      r->steps_per_epoch, TRAIN_MAX_STEPS);
    r->total_steps = o->steps ? o->steps : r->steps_per_epoch * o->epochs;
    r->epochs = (r->total_steps + r->steps_per_epoch - 1) / r->steps_per_epoch;   /* long: --steps 10^12 */
}

void run_open(Run *r, const TrainOptions *opts, const RunSpec *spec)
{
    memset(r, 0, sizeof *r);
    r->o = *opts;
    r->goal = spec->goal;
    TrainOptions *o = &r->o;
    int train = spec->goal == RUN_TRAIN;
    if (train && spec->dist) {     /* NULL alone; a rank: its GPU, and rank 0 writes the files */
        r->dist = dist_setup(&o->dist, o->device, o->save_every, o->save_path[0] != 0);
        if (r->dist) o->device_id = dist_device_id(r->dist);
        if (!dist_is_main(r->dist)) {
            o->log_path[0] = o->save_path[0] = 0;
            o->save_every = 0;
        }
    }
    /* a resumed run appends: the steps before the resume stay in the log */
    if (train && o->log_path[0] && !(r->log = fopen(o->log_path, o->resume_path[0] ? "a" : "w")))
        ct_fatal_hint("check that the folder exists and is writable", "cannot open log file %s",
                      o->log_path);
    Ctx *c = &r->c;
    ctx_init(c, o->device, o->device_id, o->seed);
    precision_apply(c, o->precision);
    if (o->precision == PREC_FP8 && !model_kind_is_bert(o->model))
        ct_fatal_hint("use --precision bf16 for this model, or a BERT model",
                      "--precision fp8: %s has no FP8 Linear layers (BERT's encoder has)",
                      model_kind_name(o->model));
    if (o->precision == PREC_FP8 && c->device == DEV_CUDA && o->seq % 16)
        ct_fatal_hint("pass --seq 128 (or another multiple of 16), or --precision bf16",
                      "--precision fp8: --seq %d: the FP8 GEMMs take rows in multiples of 16 "
                      "(batch x sequence, the last evaluation batch too)", o->seq);
    if (o->precision == PREC_FP8 && !fp8_supported(c))
        ct_fatal_hint("use --precision bf16 on this card (FP8 tensor cores: Ada sm_89, Hopper "
                      "sm_90 and later)", "--precision fp8: %s has no FP8 tensor cores",
                      ctx_device_name(c));
    if (c->device == DEV_CPU && c->autocast != DT_F32)
        LOG_W("--precision %s on the CPU backend: computed in f32 and rounded, as a reference "
              "(slow; the GPU is where reduced precision pays)", precision_name(o->precision));
    dist_start(r->dist, c);        /* the feed then takes this rank's share */

    FeedSpec fs = train_options_feed_spec(o);
    if (!train) fs.batch = 1;      /* the training side of the feed is not used */
    if (spec->open_feed) spec->open_feed(&r->fd, c, o);
    else feed_open(&r->fd, c, &fs);
    o->vocab_size = r->fd.vocab_size;
    if (!train && !r->fd.has_eval)
        ct_fatal_hint("pass an ImageFolder root with a val/ folder, or --data fashion-mnist",
                      "--data %s has no held-out split to evaluate", o->data);
    model_build(&r->m, c, o, r->fd.classes);
    if (!train) {
        load_weights(&r->m.params, o->load_path, r->m.name);
        return;
    }
    if (o->load_path[0]) load_start_weights(&r->m.params, o, o->load_path, r->m.name);

    plan_steps(r);
    Trainer *tr = &r->tr;
    trainer_init(tr, c, &r->fd, &r->m, o, r->total_steps);
    if (o->resume_path[0]) {
        trainer_resume(tr, o, o->resume_path);
        LOG_I("resumed %s at step %ld (micro-batch %ld)", o->resume_path, tr->step, tr->micro);
        if (tr->step >= r->total_steps)
            LOG_W("%s is at step %ld, the run has %ld steps: nothing left to train",
                  o->resume_path, tr->step, r->total_steps);
    }
    trainer_dist_attach(tr, r->dist);   /* rank 0's weights to all; gradient buckets */
}

void run_close(Run *r)
{
    dist_finish(r->dist);          /* barrier, then NCCL teardown */
    json_log_close(r->log, r->o.log_path);   /* a failed close is fatal too */
    r->log = NULL;
    if (r->goal == RUN_TRAIN) trainer_free(&r->tr);
    model_free(&r->m);
    feed_close(&r->fd, &r->c);
    ctx_free(&r->c);
}
