/* step.c — the optimizer step (see step.h for the sequence it queues):
 * a Trainer's start and end, and each step eager or replayed. */
#include "step.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine/error.h"
#include "engine/log.h"
#include "engine/mem.h"
#include "engine/params.h"
#include "engine/settings.h"
#include "ops/fp8_recipe.h"
#include "train/io/checkpoint.h"
#include "overlap.h"
#include "resume_check.h"
#include "step_graph.h"

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
    t->overlap = overlap_mode(c, &m->params, &t->opt, t->grad_reduce, t->clip, t->scaler.enabled);
    /* --precision fp8: the FP8 weights' codes from AdamW's kernel, where the
     * update runs after backward (the overlapped one would rewrite them
     * under the backward that reads them) */
    if (m->fp8 && c->device == DEV_CUDA && t->opt.kind == OPT_ADAMW && !t->overlap &&
        setting_switch(SET_FP8_WEIGHT_CODES)) {
        fp8_codes_enable(m->fp8);
        adamw_write_fp8_codes(&t->opt.adamw, m->fp8);
    }
    t->loss_acc = tensor_new(c, DT_F32, 1, (int64_t[]){1});
    mem_set_f32(c, (float *)t->loss_acc->data, 0.0f);
}

void trainer_step(Trainer *t)
{
    if (t->on_step) t->on_step(t->step);   /* e.g. CTRAIN_TIMELINE's window */
    tensor_release(t->last_loss);   /* the previous step's: it was read or skipped by now */
    t->last_loss = NULL;
    if (t->graph.state == GRAPH_WARMUP && t->step - t->graph_start >= t->graph.warmup_steps)
        trainer_graph_capture(t);
    t->lr = sched_lr(&t->sched, t->step);
    if (t->graph.state == GRAPH_ON) {
        trainer_graph_step(t);   /* each micro-batch graph adds its loss to loss_acc */
        t->loss_acc_n += t->accum;
        return;
    }
    for (int k = 0; k < t->accum; k++, t->micro++) {
        trainer_feed_next(t);
        Tensor *loss = trainer_micro_body(t, k == t->accum - 1);
        trainer_loss_accumulate(t, loss);
        t->loss_acc_n++;
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
    tensor_release(t->loss_acc);
    t->loss_acc = NULL;
    scaler_free(&t->scaler);
    optimizer_free(&t->opt, &t->model->params);
}

/* ---- data parallel: the callbacks train/parallel/dist.c makes (DistHooks) ---- */

/* This step's last backward queues the overlapped update bucket by bucket. */
static int hook_overlapped(void *user) { return ((Trainer *)user)->overlap_step; }

/* An averaged bucket is final on the communication stream: its update. */
static void hook_bucket_final(void *user, int b, size_t begin, size_t end, void *producer)
{
    overlap_bucket_final(((Trainer *)user)->ov, b, begin, end, producer);
}

static void hook_record_update(void *user, void *event)
{
    overlap_record(((Trainer *)user)->ov, event);
}

/* dist_finish: a captured step's all-reduces hold NCCL's persistent plans
 * until its graph is destroyed, and finalizing the communicator waits for
 * them: with the graph still alive that wait never ends (seen on 2 H200s). */
static void hook_release(void *user)
{
    Trainer *t = (Trainer *)user;
    trainer_graph_free(t);
    t->dist = NULL;
}

_Static_assert(DIST_MAX_STATE >= OPTIM_MAX_BLOCKS, "DistModel holds every optimizer state block");

void trainer_dist_attach(Trainer *t, Dist *d)
{
    if (!d) return;
    DistModel m = {&t->model->params, {NULL}, 0, t->overlap, t->feed->batch};
    m.n_state = optimizer_state(&t->opt, m.state);
    DistHooks h = {t, hook_overlapped, hook_bucket_final, hook_record_update, hook_release};
    t->dist = d;
    dist_attach(d, &m, &h);
}

float trainer_loss_interval(Trainer *t)
{
#ifdef CTRAIN_CUDA
    if (t->dist) dist_loss_average(t->dist, (float *)t->loss_acc->data);   /* the sums' mean */
#endif
    float sum;
    tensor_to_f32(&sum, t->loss_acc);   /* waits for the queued steps */
    const long n = t->loss_acc_n;
    mem_set_f32(t->ctx, (float *)t->loss_acc->data, 0.0f);
    t->loss_acc_n = 0;
    return n ? sum / (float)n : NAN;
}

/* ---- training checkpoints ---- */

/* The extra tensors of a training checkpoint, pointing into host staging. */
typedef struct TrainState {
    CkptTensor t[OPTIM_MAX_BLOCKS + 12];  /* the blocks, 8 scalars, 4 FP8 tensors */
    int n, nblocks;
    char names[OPTIM_MAX_BLOCKS][32];
    float *blocks;                      /* nblocks * P host floats */
    int64_t opt_step, step, micro, rng, counts[2], loss_n;
    float scale, loss_sum;
    float *fp8[2];                      /* --precision fp8: the recipe's two blocks */
    int64_t fp8_step;
    int32_t *fp8_overflow;
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

/* with_loss: the logging interval's partial loss sum and count (files
 * written before they were kept have neither: the resumed interval then
 * starts empty) */
static void train_state_init(TrainState *s, Trainer *t, int with_loss, int with_fp8)
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
    if (with_loss) {
        s->t[s->n++] = one_tensor("__ctrain.loss_sum", DT_F32, 1, &s->loss_sum);
        s->t[s->n++] = one_tensor("__ctrain.loss_count", DT_I64, 1, &s->loss_n);
    }
    const Fp8Recipe *r = t->model->fp8;
    if (with_fp8 && r) {   /* the scales and amax histories: a resumed fp8 run casts the same */
        static const char *const names[2] = {"__ctrain.fp8.forward", "__ctrain.fp8.backward"};
        for (int g = 0; g < 2; g++) {
            s->fp8[g] = (float *)malloc(r->block[g]->numel * sizeof(float));
            if (!s->fp8[g]) ct_fatal("out of host memory staging the FP8 scales");
            s->t[s->n++] = one_tensor(names[g], DT_F32, (int64_t)r->block[g]->numel, s->fp8[g]);
        }
        s->fp8_overflow = (int32_t *)malloc(r->overflow->numel * sizeof(int32_t));
        if (!s->fp8_overflow) ct_fatal("out of host memory staging the FP8 scales");
        s->t[s->n++] = one_tensor("__ctrain.fp8.overflow", DT_I32, (int64_t)r->overflow->numel,
                                  s->fp8_overflow);
        s->t[s->n++] = one_tensor("__ctrain.fp8.step", DT_I64, 1, &s->fp8_step);
    }
    CT_ASSERT(s->n <= (int)(sizeof s->t / sizeof s->t[0]), "train_state_init: %d tensors", s->n);
}

static void train_state_free(TrainState *s)
{
    free(s->blocks);
    free(s->fp8[0]);
    free(s->fp8[1]);
    free(s->fp8_overflow);
}

void trainer_save(Trainer *t, const TrainOptions *o, const char *path)
{
    ParamSet *ps = &t->model->params;
    TrainState s;
    train_state_init(&s, t, 1, 1);
    const Fp8Recipe *r = t->model->fp8;
    if (r) {
        for (int g = 0; g < 2; g++) tensor_to_host(s.fp8[g], r->block[g]);
        tensor_to_host(s.fp8_overflow, r->overflow);
        tensor_to_host(&s.fp8_step, r->step);
    }
    float *dev[OPTIM_MAX_BLOCKS];
    optimizer_state(&t->opt, dev);
    mem_to_host(t->ctx, &s.loss_sum, t->loss_acc->data, sizeof(float));
    s.loss_n = t->loss_acc_n;
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

    ResumeMeta meta;   /* what defines the run, for --resume to compare */
    resume_meta_fill(&meta, t, o);
    char err[512];
    int code = ckpt_save(path, ps, s.t, s.n, meta.kv, meta.n, err, sizeof err);
    train_state_free(&s);
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
    resume_check(&f, path, t, o);   /* model, optimizer, batch, ..., lr, steps, data */
    const int with_loss = st_find(&f, "__ctrain.loss_sum") != NULL;
    const int with_fp8 = st_find(&f, "__ctrain.fp8.step") != NULL;
    st_close(&f);
    if (t->model->fp8 && !with_fp8)
        LOG_W("%s holds no FP8 scales (saved without --precision fp8): they start over at 1",
              path);

    TrainState s;
    train_state_init(&s, t, with_loss, with_fp8);
    code = ckpt_load(path, ps, t->model->name, s.t, s.n, 0, NULL, err, sizeof err);
    if (code) {
        train_state_free(&s);
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
    const Fp8Recipe *r = t->model->fp8;
    if (r && with_fp8) {
        for (int g = 0; g < 2; g++)
            mem_to_device(t->ctx, r->block[g]->data, s.fp8[g], r->block[g]->numel * sizeof(float));
        mem_to_device(t->ctx, r->overflow->data, s.fp8_overflow, r->overflow->numel * sizeof(int32_t));
        mem_to_device(t->ctx, r->step->data, &s.fp8_step, sizeof(int64_t));
    }
    fp8_codes_invalidate(t->model->fp8);   /* new weights and scales: cast them again */
    train_state_free(&s);
    if (t->opt.kind != OPT_SGD) optimizer_set_steps(&t->opt, ps, s.opt_step);
    scaler_write(&t->scaler, s.scale, (int)s.counts[0], s.counts[1]);
    t->step = (long)s.step;
    t->micro = (long)s.micro;
    t->graph_start = t->step;   /* --graph warms up again from here */
    t->ctx->rng_offset = (uint64_t)s.rng;
    if (with_loss && s.loss_n >= 0) {
        mem_to_device(t->ctx, t->loss_acc->data, &s.loss_sum, sizeof(float));
        t->loss_acc_n = (long)s.loss_n;
    }
}
