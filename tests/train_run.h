/* train_run.h — a whole training run in a test: options parsed from a
 * command line, the feed, the model and the Trainer, on a given device, as
 * `ctrain train` builds them. Include after check.h. */
#ifndef CTRAIN_TESTS_TRAIN_RUN_H
#define CTRAIN_TESTS_TRAIN_RUN_H

#include <math.h>
#include <stdio.h>
#include <string.h>
#include "engine/autograd.h"
#include "models/model.h"
#include "train/feed/feed.h"
#include "train/loop/model_build.h"
#include "train/cli/options.h"
#include "train/loop/step.h"

typedef struct Run {
    TrainOptions o;
    Feed fd;
    Model m;
    Trainer tr;
} Run;

/* args: `ctrain train` options, space-separated. The context's TF32 and
 * autocast follow --precision; its Philox position restarts at 0, so two
 * runs of a pair draw the same dropout masks. */
__attribute__((unused)) static void run_open(Run *r, Ctx *c, const char *args, Device dev)
{
    char buf[512], *argv[64];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", args);
    for (char *tok = strtok(buf, " "); tok && argc < 64; tok = strtok(NULL, " ")) argv[argc++] = tok;
    train_options_default(&r->o);
    r->o.device = dev;
    train_options_parse(&r->o, argc, argv, "train");
    precision_apply(c, r->o.precision);
    c->rng_offset = 0;
    FeedSpec fs = train_options_feed_spec(&r->o);
    feed_open(&r->fd, c, &fs);
    r->o.vocab_size = r->fd.vocab_size;
    model_build(&r->m, c, &r->o, r->fd.classes);
    trainer_init(&r->tr, c, &r->fd, &r->m, &r->o, r->o.steps);
}

/* Two runs' losses, a and b, bit for bit over steps: passes when every step
 * agrees, the last is finite and differs from the first (the runs trained);
 * la and lb name the two runs in the message. */
__attribute__((unused)) static void check_losses_same(const char *name, const float *a,
                                                      const float *b, int steps, const char *la,
                                                      const char *lb)
{
    char n[200];
    int first = -1;
    for (int s = 0; s < steps && first < 0; s++)
        if (memcmp(&a[s], &b[s], sizeof(float))) first = s;
    snprintf(n, sizeof n, "%s: %d losses bit for bit (%.5f -> %.5f)", name, steps, (double)a[0],
             (double)a[steps - 1]);
    check_true(n, first < 0 && isfinite(a[steps - 1]) && a[steps - 1] != a[0],
               "first difference at step %d: %s %.9g, %s %.9g", first + 1, la,
               first >= 0 ? (double)a[first] : 0.0, lb, first >= 0 ? (double)b[first] : 0.0);
}

__attribute__((unused)) static void run_close(Run *r, Ctx *c)
{
    trainer_free(&r->tr);
    model_free(&r->m);
    feed_close(&r->fd, c); /* its input tensors too, as `ctrain train` does */
}

/* What `--eval-every` does between two replays, on the training inputs: a
 * forward without autograd on a shorter batch (a held-out set's last one),
 * views of the first b rows (rows scale the 1-D inputs too: BERT's masked
 * rows and labels). */
__attribute__((unused)) static void eval_forward(Ctx *c, Run *r, int b)
{
    const int64_t B = r->o.batch;
    Tensor *in[FEED_MAX_IN];
    for (int i = 0; i < r->fd.n_in; i++) {
        Tensor *t = r->fd.in[i];
        if (!t) { in[i] = NULL; continue; }   /* an input the feed has not (synthetic BERT's mask) */
        int64_t shape[8];
        for (int d = 0; d < t->ndim; d++) shape[d] = t->shape[d];
        shape[0] = t->ndim == 1 ? t->shape[0] / B * b : b;
        in[i] = tensor_view(c, t->data, t->dtype, t->ndim, shape);
    }
    int grad = ad_set_grad(c, 0), training = r->m.training;
    r->m.training = 0;
    Tensor *logits = NULL;
    Tensor *loss = model_loss(c, &r->m, in, 0.0f, &logits);
    float lv;
    tensor_to_f32(&lv, loss);
    tensor_release(loss);
    tensor_release(logits);
    for (int i = 0; i < r->fd.n_in; i++) tensor_release(in[i]);
    r->m.training = training;
    ad_set_grad(c, grad);
    ctx_check_flags(c);
}

#endif
