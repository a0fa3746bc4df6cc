/* step.c — the optimizer step (see step.h for the sequence it queues). */
#include "step.h"

#include <math.h>
#include <string.h>
#include "../engine/autograd.h"
#include "../engine/error.h"
#include "../engine/params.h"

void trainer_init(Trainer *t, Ctx *c, Feed *fd, Model *m, const TrainOptions *o, long total_steps)
{
    memset(t, 0, sizeof *t);
    t->ctx = c;
    t->feed = fd;
    t->model = m;
    t->accum = o->accum;
    t->clip = o->clip;
    t->label_smoothing = o->label_smoothing;
    t->steps_per_epoch = fd->batches_per_epoch / o->accum;
    CT_ASSERT(t->steps_per_epoch >= 1, "the feed has %ld batches per epoch, fewer than accum %d",
              fd->batches_per_epoch, o->accum);
    optimizer_init(&t->opt, &m->params, o);
    scaler_init_for(&t->scaler, c, c->autocast);
    Schedule s = {o->schedule, o->lr, o->final_lr, o->warmup, total_steps, 1.0f, 0.1f, {0}, 0};
    if (o->schedule == SCHED_STEP) {   /* decay x0.1 at 1/3 and 2/3 of the run */
        s.milestones[0] = total_steps / 3;
        s.milestones[1] = 2 * total_steps / 3;
        s.n_milestones = 2;
    }
    t->sched = s;
}

void trainer_step(Trainer *t)
{
    Ctx *c = t->ctx;
    Model *m = t->model;
    GradScaler *sc = &t->scaler;
    long per_epoch = t->steps_per_epoch * t->accum;   /* micro-batches per epoch */

    tensor_release(t->last_loss);   /* the previous step's: it was read or skipped by now */
    t->last_loss = NULL;
    t->lr = sched_lr(&t->sched, t->step);
    for (int k = 0; k < t->accum; k++, t->micro++) {
        t->feed->next(t->feed, c, (uint64_t)(t->micro / per_epoch), (uint32_t)(t->micro % per_epoch));
        Tensor *loss = model_loss(c, m, t->feed->in, t->label_smoothing, NULL);
        if (sc->enabled) ad_backward_dev(c, loss, scaler_scale(sc), 1.0f / (float)t->accum);
        else ad_backward(c, loss, 1.0f / (float)t->accum);
        tensor_release(t->last_loss);
        t->last_loss = loss;
    }
    scaler_unscale(sc, m->params.grad, m->params.total);
    if (t->clip > 0) scaler_clip(sc, m->params.grad, m->params.total, t->clip);
    optimizer_step(&t->opt, &m->params, t->lr, scaler_found_inf(sc));
    scaler_update(sc);
    params_zero_grad(&m->params);
    t->step++;
}

float trainer_loss_value(Trainer *t)
{
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
    tensor_release(t->last_loss);
    t->last_loss = NULL;
    scaler_free(&t->scaler);
    optimizer_free(&t->opt, &t->model->params);
}
