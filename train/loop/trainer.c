/* trainer.c — the pieces of one optimizer step (see trainer.h; the
 * sequence they make: step.h). */
#include "trainer.h"

#include <stdint.h>
#include "engine/autograd.h"
#include "engine/kernels.h"
#include "engine/mem.h"
#include "engine/params.h"
#include "engine/settings.h"
#include "ops/linear_fp8.h"
#include "train/parallel/dist.h"
#include "overlap.h"

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

Tensor *trainer_micro_body(Trainer *t, int last)
{
    Ctx *c = t->ctx;
    /* the f32 values were rewritten (a load): the FP8 weights' kept codes are
     * cast again too (ops/fp8_recipe.h) */
    if (t->model->params.lowp_stale) fp8_codes_invalidate(t->model->fp8);
    params_lowp_refresh(&t->model->params);   /* no-op unless the f32 values were rewritten */
    /* CTRAIN_GRAD_FRESH: every parameter's first contribution writes its
     * gradient, so the update need not zero the buffer; with one GPU, one
     * micro-batch a step and the update after backward only (a later
     * micro-batch adds, a bucket's all-reduce or update may start before
     * the unreached gradients are zeroed) */
    ParamSet *ps = &t->model->params;
    t->grad_fresh = t->accum == 1 && !t->dist && !t->overlap && setting_switch(SET_GRAD_FRESH);
    if (t->grad_fresh) params_grad_fresh(ps);
    else if (t->grads_stale) params_zero_grad(ps);
    t->grads_stale = 0;
    GradScaler *sc = &t->scaler;
    Tensor *loss = model_loss(c, t->model, t->feed->in, t->label_smoothing, NULL);
    /* [overlap] the last micro-batch's backward updates each bucket once it
     * is final (after its all-reduce with several GPUs) */
    if (last && t->overlap) {
        if (!t->ov)   /* an eager step comes first: no capture */
            t->ov = overlap_open(c, &t->model->params, &t->opt, t->dist);
        update_begin(t);
    }
    dist_backward_begin(t->dist, last);   /* [dist] the last micro-batch all-reduces */
    overlap_backward_begin(t->ov, last);
    if (sc->enabled) ad_backward_dev(c, loss, scaler_scale(sc), 1.0f / (float)t->accum);
    else ad_backward(c, loss, 1.0f / (float)t->accum);
    if (t->grad_fresh) params_grad_settle(ps);   /* the parameters no op reached: zero */
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
    if (m->fp8) {   /* the next step's FP8 scales (after backward), the same on every rank */
        for (int g = 0; g < 2; g++)
            dist_max_f32(t->dist, fp8_amax_of(m->fp8, (float *)m->fp8->block[g]->data, g),
                         (size_t)m->fp8->n[g]);
        fp8_recipe_step(t->ctx, m->fp8);
    }
    if (t->overlap_step) {   /* done during backward (no scaler, no clip: overlap_mode) */
        t->overlap_step = 0;
        return;
    }
    scaler_unscale(sc, m->params.grad, m->params.total);
    if (t->clip > 0) scaler_clip(sc, m->params.grad, m->params.total, t->clip);
    if (lr_on_device) optimizer_step_lr(&t->opt, &m->params, scaler_found_inf(sc));
    else optimizer_step(&t->opt, &m->params, t->lr, scaler_found_inf(sc));
    scaler_update(sc);
    if (t->grad_fresh) t->grads_stale = 1;   /* the next backward writes them */
    else params_zero_grad(&m->params);
}

void trainer_feed_next(Trainer *t)
{
    long per_epoch = t->steps_per_epoch * t->accum;   /* micro-batches per epoch */
    t->feed->next(t->feed, t->ctx, (uint64_t)(t->micro / per_epoch),
                  (uint32_t)(t->micro % per_epoch));
}

void trainer_loss_accumulate(Trainer *t, const Tensor *loss)
{
#ifdef CTRAIN_CUDA
    if (t->ctx->device == DEV_CUDA) {
        scale_forward_cuda(t->loss_acc->data, loss->data, 1.0f, DT_F32, 1, 1, t->ctx->stream);
        return;
    }
#endif
    *(float *)t->loss_acc->data += *(const float *)loss->data;
}
