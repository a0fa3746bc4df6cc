/* step.c — the optimizer step (see step.h for the sequence it queues). */
#include "step.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine/autograd.h"
#include "engine/error.h"
#include "engine/log.h"
#include "engine/mem.h"
#include "engine/params.h"
#include "train/io/checkpoint.h"
#include "train/parallel/dist.h"
#include "overlap.h"
#include "train/bench/timeline.h"
#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>
#endif

void trainer_init(Trainer *t, Ctx *c, Feed *fd, Model *m, const TrainOptions *o, long total_steps)
{
    memset(t, 0, sizeof *t);
    t->ctx = c;
    t->feed = fd;
    t->model = m;
    t->accum = o->accum;
    t->clip = o->clip;
    t->label_smoothing = o->label_smoothing;
    t->steps_per_epoch = train_steps_per_epoch(fd->batches_per_epoch, o->accum);
    CT_ASSERT(t->steps_per_epoch >= 1, "the feed has %ld batches per epoch, fewer than accum %d",
              fd->batches_per_epoch, o->accum);
    optimizer_init(&t->opt, &m->params, &o->optim);
    if (c->autocast != DT_F32) params_lowp_enable(&m->params, c->autocast);   /* GPU only */
    scaler_init_for(&t->scaler, c, c->autocast);
    Schedule s = {o->schedule, o->lr, o->final_lr, o->warmup, total_steps, 1.0f, 0.1f, {0}, 0};
    if (o->schedule == SCHED_STEP) {   /* decay x0.1 at 1/3 and 2/3 of the run */
        s.milestones[0] = total_steps / 3;
        s.milestones[1] = 2 * total_steps / 3;
        s.n_milestones = 2;
    }
    t->sched = s;
    t->graph.state = o->graph ? GRAPH_WARMUP : GRAPH_OFF;
    t->graph.warmup_steps = o->graph_warmup;
    t->grad_reduce = o->dist.grad_reduce;
    t->overlap = trainer_overlap_mode(t);
}

/* The overlapped update's once-per-step part, on the compute stream before
 * backward: the learning rate (a capture has fetched it on the device
 * already) and the optimizer's step count. */
static void update_begin(Trainer *t)
{
    Ctx *c = t->ctx;
    int capturing = 0;
#ifdef CTRAIN_CUDA
    capturing = c->capturing;
#endif
    if (!capturing) mem_set_f32(c, optimizer_lr_dev(&t->opt), t->lr);
    optimizer_split_begin(&t->opt, &t->model->params);
    t->overlap_step = 1;
}

void trainer_update_range(Trainer *t, size_t begin, size_t end, void *stream)
{
    ParamSet *ps = &t->model->params;
    optimizer_split_range(&t->opt, ps, begin, end, stream);
    if (t->ctx->device == DEV_CPU) {
        memset(ps->grad + begin, 0, (end - begin) * sizeof(float));
        return;
    }
#ifdef CTRAIN_CUDA
    CUDA_CHECK(cudaMemsetAsync(ps->grad + begin, 0, (end - begin) * sizeof(float),
                               (cudaStream_t)stream));
#endif
}

Tensor *trainer_micro_body(Trainer *t, int last)
{
    Ctx *c = t->ctx;
    params_lowp_refresh(&t->model->params);   /* no-op unless the f32 values were rewritten */
    GradScaler *sc = &t->scaler;
    Tensor *loss = model_loss(c, t->model, t->feed->in, t->label_smoothing, NULL);
    /* [overlap] the last micro-batch's backward updates each bucket once it
     * is final (after its all-reduce with several GPUs) */
    if (last && t->overlap) {
        if (!t->ov) t->ov = overlap_open(t);   /* an eager step comes first: no capture */
        update_begin(t);
    }
    dist_backward_begin(t->dist, last);   /* [dist] the last micro-batch all-reduces */
    overlap_backward_begin(t->ov, last);
    if (sc->enabled) ad_backward_dev(c, loss, scaler_scale(sc), 1.0f / (float)t->accum);
    else ad_backward(c, loss, 1.0f / (float)t->accum);
    /* [dist] the remaining buckets, and the compute stream waits for the
     * all-reduces: before unscale, so an inf on any rank reaches all. Here,
     * not in the update, so a captured micro-batch joins its streams. */
    if (last) {
        dist_grads_ready(t->dist);
        overlap_grads_ready(t->ov);
    }
    return loss;
}

void trainer_update_body(Trainer *t, int lr_on_device)
{
    Model *m = t->model;
    GradScaler *sc = &t->scaler;
    if (t->overlap_step) {   /* done during backward (no scaler, no clip: trainer_overlap_mode) */
        t->overlap_step = 0;
        return;
    }
    scaler_unscale(sc, m->params.grad, m->params.total);
    if (t->clip > 0) scaler_clip(sc, m->params.grad, m->params.total, t->clip);
    if (lr_on_device) optimizer_step_lr(&t->opt, &m->params, scaler_found_inf(sc));
    else optimizer_step(&t->opt, &m->params, t->lr, scaler_found_inf(sc));
    scaler_update(sc);
    params_zero_grad(&m->params);
}

void trainer_feed_next(Trainer *t)
{
    long per_epoch = t->steps_per_epoch * t->accum;   /* micro-batches per epoch */
    t->feed->next(t->feed, t->ctx, (uint64_t)(t->micro / per_epoch),
                  (uint32_t)(t->micro % per_epoch));
}

void trainer_step(Trainer *t)
{
    if (t->ctx->device == DEV_CUDA) timeline_on_step(t->step);   /* CTRAIN_TIMELINE's window */
    tensor_release(t->last_loss);   /* the previous step's: it was read or skipped by now */
    t->last_loss = NULL;
    if (t->graph.state == GRAPH_WARMUP && t->step - t->graph_start >= t->graph.warmup_steps)
        trainer_graph_capture(t);
    t->lr = sched_lr(&t->sched, t->step);
    if (t->graph.state == GRAPH_ON) {
        trainer_graph_step(t);
        return;
    }
    for (int k = 0; k < t->accum; k++, t->micro++) {
        trainer_feed_next(t);
        Tensor *loss = trainer_micro_body(t, k == t->accum - 1);
        tensor_release(t->last_loss);
        t->last_loss = loss;
    }
    trainer_update_body(t, 0);
    t->step++;
}

float trainer_loss_value(Trainer *t)
{
    if (t->graph.state == GRAPH_ON) return trainer_graph_loss(t);
    if (!t->last_loss) return NAN;
    float v;
    tensor_to_f32(&v, t->last_loss);   /* waits for the step */
    return v;
}

long trainer_epoch(const Trainer *t)
{
    return t->micro ? (t->micro - 1) / (t->steps_per_epoch * t->accum) + 1 : 1;
}

void trainer_free(Trainer *t)
{
    trainer_graph_free(t);
    overlap_close(t->ov);
    t->ov = NULL;
    tensor_release(t->last_loss);
    t->last_loss = NULL;
    scaler_free(&t->scaler);
    optimizer_free(&t->opt, &t->model->params);
}

/* ---- training checkpoints ---- */

/* The extra tensors of a training checkpoint, pointing into host staging. */
typedef struct TrainState {
    CkptTensor t[8];
    int n, nblocks;
    char names[OPTIM_MAX_BLOCKS][32];
    float *blocks;                      /* nblocks * P host floats */
    int64_t opt_step, step, micro, rng, counts[2];
    float scale;
} TrainState;

static CkptTensor one_tensor(const char *name, DType dt, int64_t n, void *data)
{
    CkptTensor c;
    memset(&c, 0, sizeof c);
    c.name = name;
    c.dtype = dt;
    c.ndim = 1;
    c.shape[0] = n;
    c.data = data;
    return c;
}

static void train_state_init(TrainState *s, Trainer *t)
{
    memset(s, 0, sizeof *s);
    size_t P = t->model->params.total;
    float *dev[OPTIM_MAX_BLOCKS];
    s->nblocks = optimizer_state(&t->opt, dev);
    s->blocks = (float *)malloc((size_t)s->nblocks * P * sizeof(float) + 1);
    if (!s->blocks) ct_fatal("out of host memory staging the optimizer state (%zu floats)", P);
    for (int i = 0; i < s->nblocks; i++) {
        snprintf(s->names[i], sizeof s->names[i], "__ctrain.optimizer.%d", i);
        s->t[s->n++] = one_tensor(s->names[i], DT_F32, (int64_t)P, s->blocks + (size_t)i * P);
    }
    if (t->opt.kind != OPT_SGD)
        s->t[s->n++] = one_tensor("__ctrain.optimizer.step", DT_I64, 1, &s->opt_step);
    s->t[s->n++] = one_tensor("__ctrain.scaler", DT_F32, 1, &s->scale);
    s->t[s->n++] = one_tensor("__ctrain.scaler.counts", DT_I64, 2, s->counts);
    s->t[s->n++] = one_tensor("__ctrain.step", DT_I64, 1, &s->step);
    s->t[s->n++] = one_tensor("__ctrain.micro", DT_I64, 1, &s->micro);
    s->t[s->n++] = one_tensor("__ctrain.rng_offset", DT_I64, 1, &s->rng);
}

void trainer_save(Trainer *t, const TrainOptions *o, const char *path)
{
    ParamSet *ps = &t->model->params;
    TrainState s;
    train_state_init(&s, t);
    float *dev[OPTIM_MAX_BLOCKS];
    optimizer_state(&t->opt, dev);
    for (int i = 0; i < s.nblocks; i++)   /* stream-ordered: after the queued steps */
        mem_to_host(t->ctx, s.blocks + (size_t)i * ps->total, dev[i], ps->total * sizeof(float));
    s.opt_step = optimizer_steps(&t->opt, ps);
    ScalerState ss;
    scaler_read(&t->scaler, &ss, NULL);
    s.scale = ss.scale;
    s.counts[0] = ss.growth_tracker;
    s.counts[1] = ss.skipped;
    s.step = t->step;
    s.micro = t->micro;
    s.rng = (int64_t)t->ctx->rng_offset;

    char batch[24], accum[24], seed[24], steps[24], err[512];
    snprintf(batch, sizeof batch, "%d", o->batch);
    snprintf(accum, sizeof accum, "%d", o->accum);
    snprintf(seed, sizeof seed, "%" PRIu64, o->seed);
    snprintf(steps, sizeof steps, "%ld", t->step);
    const char *meta[] = {"ctrain_checkpoint", "training", "model", model_kind_name(o->model),
                          "optimizer", optim_name(o->optim.kind), "precision", precision_name(o->precision),
                          "batch", batch, "accum", accum, "seed", seed, "steps", steps};
    int code = ckpt_save(path, ps, s.t, s.n, meta, 8, err, sizeof err);
    free(s.blocks);
    if (code) ct_fatal_hint(ckpt_hint(code, 1), "%s", err);
}

int ckpt_is_training(const char *path)
{
    StFile f;
    char err[256];
    if (st_open(path, &f, err, sizeof err) != ST_OK) return 0;
    const char *k = st_meta(&f, "ctrain_checkpoint");
    int yes = k && !strcmp(k, "training");
    st_close(&f);
    return yes;
}

/* The file's metadata value for key must equal ours (flag: the option's name). */
static void resume_check(const StFile *f, const char *path, const char *key, const char *flag,
                         const char *ours)
{
    const char *saved = st_meta(f, key);
    if (!saved) ct_fatal_hint("resume from a file written by ctrain train --save-every",
                              "%s: training checkpoint without '%s' metadata", path, key);
    if (strcmp(saved, ours)) {
        char hint[256];
        snprintf(hint, sizeof hint, "pass %s %s as when it was saved, or drop --resume to start "
                 "a new run", flag, saved);
        ct_fatal_hint(hint, "cannot resume %s: it was saved with %s %s, this run has %s %s",
                      path, flag, saved, flag, ours);
    }
}

void trainer_resume(Trainer *t, const TrainOptions *o, const char *path)
{
    ParamSet *ps = &t->model->params;
    char err[512];
    StFile f;
    int code = st_open(path, &f, err, sizeof err);
    if (code) ct_fatal_hint(ckpt_hint(code, 0), "%s", err);
    const char *kind = st_meta(&f, "ctrain_checkpoint");
    if (!kind || strcmp(kind, "training")) {
        st_close(&f);
        ct_fatal_hint("--resume takes a file written with --save FILE --save-every N; to start "
                      "from weights only, pass --load FILE",
                      "%s holds weights only, not a training state", path);
    }
    char batch[24], accum[24], seed[24];
    snprintf(batch, sizeof batch, "%d", o->batch);
    snprintf(accum, sizeof accum, "%d", o->accum);
    snprintf(seed, sizeof seed, "%" PRIu64, o->seed);
    resume_check(&f, path, "model", "--model", model_kind_name(o->model));
    resume_check(&f, path, "optimizer", "--optim", optim_name(o->optim.kind));
    resume_check(&f, path, "batch", "--batch", batch);
    resume_check(&f, path, "accum", "--accum", accum);
    resume_check(&f, path, "seed", "--seed", seed);
    const char *prec = st_meta(&f, "precision");
    if (prec && strcmp(prec, precision_name(o->precision)))
        LOG_W("%s was saved with --precision %s, this run has %s: the loss will not repeat "
              "bit for bit", path, prec, precision_name(o->precision));
    st_close(&f);

    TrainState s;
    train_state_init(&s, t);
    code = ckpt_load(path, ps, t->model->name, s.t, s.n, 0, NULL, err, sizeof err);
    if (code) {
        free(s.blocks);
        ct_fatal_hint(ckpt_hint(code, 0), "%s", err);
    }
    if (s.step < 0 || s.micro < 0 || s.micro != s.step * t->accum)
        ct_fatal_hint("the file is damaged; resume from an earlier checkpoint",
                      "%s: inconsistent position (step %" PRId64 ", micro-batch %" PRId64 ")",
                      path, s.step, s.micro);
    float *dev[OPTIM_MAX_BLOCKS];
    optimizer_state(&t->opt, dev);
    for (int i = 0; i < s.nblocks; i++)
        mem_to_device(t->ctx, dev[i], s.blocks + (size_t)i * ps->total, ps->total * sizeof(float));
    free(s.blocks);
    if (t->opt.kind != OPT_SGD) optimizer_set_steps(&t->opt, ps, s.opt_step);
    scaler_write(&t->scaler, s.scale, (int)s.counts[0], s.counts[1]);
    t->step = (long)s.step;
    t->micro = (long)s.micro;
    t->graph_start = t->step;   /* --graph warms up again from here */
    t->ctx->rng_offset = (uint64_t)s.rng;
}
