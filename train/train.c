/* train.c — `ctrain train`: the training loop for image classification.
 *
 * One step:  host batch -> pinned buffer -> async copy into the static input
 * tensors -> forward (ops record the tape) -> f32 loss -> backward (tape in
 * reverse, gradients += into the one buffer) -> optimizer -> zero grads.
 * The host only waits for the device when it reports (every --log-every
 * steps), so batch preparation overlaps the previous step's GPU work; two
 * pinned buffers alternate and an event per buffer says when it is free.
 */
#include "train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../data/fashion_mnist.h"
#include "../data/shuffle.h"
#include "../engine/autograd.h"
#include "../engine/error.h"
#include "../engine/log.h"
#include "../engine/mem.h"
#include "../models/mlp.h"
#include "../ops/ops.h"
#include "jsonlog.h"
#include "options.h"
#include "progress.h"
#include "sgd.h"

/* Pinned host batch buffers, double-buffered against the async copies. */
typedef struct Stager {
    float *x[2];
    int32_t *y[2];
#ifdef CTRAIN_CUDA
    cudaEvent_t done[2];
#endif
    int k;
} Stager;

static void stager_init(Stager *s, Ctx *c, int B, int feat)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < 2; i++) {
        s->x[i] = (float *)mem_host_pinned(c, (size_t)B * feat * sizeof(float));
        s->y[i] = (int32_t *)mem_host_pinned(c, (size_t)B * sizeof(int32_t));
#ifdef CTRAIN_CUDA
        if (c->device == DEV_CUDA)
            CUDA_CHECK(cudaEventCreateWithFlags(&s->done[i], cudaEventDisableTiming));
#endif
    }
}

/* The next free buffer pair: waits only if its previous copy has not run. */
static int stager_acquire(Stager *s, Ctx *c)
{
    s->k ^= 1;
#ifdef CTRAIN_CUDA
    if (c->device == DEV_CUDA) CUDA_CHECK(cudaEventSynchronize(s->done[s->k]));
#else
    (void)c;
#endif
    return s->k;
}

static void stager_upload(Stager *s, Ctx *c, Tensor *x, Tensor *y)
{
    mem_to_device_async(c, x->data, s->x[s->k], x->numel * sizeof(float));
    mem_to_device_async(c, y->data, s->y[s->k], y->numel * sizeof(int32_t));
#ifdef CTRAIN_CUDA
    if (c->device == DEV_CUDA) CUDA_CHECK(cudaEventRecord(s->done[s->k], c->stream));
#endif
}

static void stager_free(Stager *s, Ctx *c)
{
    ctx_sync(c);
    for (int i = 0; i < 2; i++) {
        mem_host_pinned_free(c, s->x[i]);
        mem_host_pinned_free(c, s->y[i]);
#ifdef CTRAIN_CUDA
        if (c->device == DEV_CUDA) CUDA_CHECK(cudaEventDestroy(s->done[i]));
#endif
    }
}

typedef struct EvalResult {
    double loss, acc;
    long n;
} EvalResult;

/* Accuracy and mean loss over a whole split, in no-grad mode. */
static EvalResult evaluate(Ctx *c, Model *m, const FashionMnist *ds, int split, int B)
{
    EvalResult r = {0, 0, 0};
    const FmnistSplit *sp = &ds->split[split];
    int grad = ad_set_grad(c, 0);
    float *xh = (float *)malloc((size_t)B * FMNIST_PIXELS * sizeof(float));
    int32_t *yh = (int32_t *)malloc((size_t)B * sizeof(int32_t));
    uint32_t *idx = (uint32_t *)malloc((size_t)B * sizeof(uint32_t));
    float *logits = (float *)malloc((size_t)B * m->classes * sizeof(float));
    double loss_sum = 0;
    long correct = 0;
    for (uint32_t start = 0; start < sp->n; start += (uint32_t)B) {
        int b = (int)((sp->n - start) < (uint32_t)B ? sp->n - start : (uint32_t)B);
        for (int i = 0; i < b; i++) idx[i] = start + (uint32_t)i;
        fmnist_batch_f32(xh, yh, ds, split, idx, b, FMNIST_MEAN, FMNIST_STD);
        Tensor *x = tensor_from_host(c, xh, DT_F32, 2, (int64_t[]){b, FMNIST_PIXELS});
        Tensor *y = tensor_from_host(c, yh, DT_I32, 1, (int64_t[]){b});
        Tensor *z = m->forward(c, m, x);
        Tensor *loss = op_cross_entropy(c, z, y, -1, 0.0f);
        float lv;
        tensor_to_f32(&lv, loss);
        tensor_to_f32(logits, z);
        loss_sum += (double)lv * b;
        for (int i = 0; i < b; i++) {
            int best = 0;
            for (int k = 1; k < m->classes; k++)
                if (logits[i * m->classes + k] > logits[i * m->classes + best]) best = k;
            correct += best == yh[i];
        }
        tensor_release(loss);
        tensor_release(z);
        tensor_release(x);
        tensor_release(y);
    }
    free(xh); free(yh); free(idx); free(logits);
    ad_set_grad(c, grad);
    r.n = (long)sp->n;
    r.loss = loss_sum / (double)(sp->n ? sp->n : 1);
    r.acc = (double)correct / (double)(sp->n ? sp->n : 1);
    return r;
}

static const char *data_dir(const char *spec)
{
    if (!strcmp(spec, "fashion-mnist")) return NULL;
    if (!strncmp(spec, "fashion-mnist:", 14) && spec[14]) return spec + 14;
    ct_fatal_hint("pass --data fashion-mnist, or --data fashion-mnist:DIR for a copy in DIR",
                  "--data: unknown data set '%s'", spec);
}

int cmd_train(int argc, char **argv)
{
    TrainOptions o;
    train_options_default(&o);
    if (ctx_cuda_available()) o.device = DEV_CUDA;
    train_options_parse(&o, argc, argv, "train");

    FashionMnist ds;
    fmnist_load_or_die(&ds, data_dir(o.data));
    const FmnistSplit *tr = &ds.split[FMNIST_TRAIN];
    if ((uint32_t)o.batch > tr->n)
        ct_fatal_hint("pass a smaller --batch", "--batch %d is larger than the %u training images",
                      o.batch, tr->n);

    FILE *logf = NULL;
    if (o.log_path[0]) {
        logf = fopen(o.log_path, "w");
        if (!logf) ct_fatal_hint("check the folder exists and is writable",
                                 "cannot open log file %s for writing", o.log_path);
    }

    Ctx c;
    ctx_init(&c, o.device, o.device_id, o.seed);
    c.allow_tf32 = !strcmp(o.precision, "tf32");
    Model m;
    mlp_create(&m, &c, FMNIST_PIXELS, o.hidden, o.n_hidden, FMNIST_CLASSES, o.seed);
    Sgd opt;
    sgd_init(&opt, &m.params, o.momentum, o.weight_decay, o.nesterov);

    long steps_per_epoch = (long)(tr->n / (uint32_t)o.batch);   /* last partial batch dropped */
    long total_steps = o.steps ? o.steps : steps_per_epoch * o.epochs;
    int epochs = (int)((total_steps + steps_per_epoch - 1) / steps_per_epoch);
    LOG_I("train %s on %s: %zu parameters, %u images, batch %d, %ld steps (%d epoch%s), device %s",
          m.name, o.data, m.params.total, tr->n, o.batch, total_steps, epochs,
          epochs == 1 ? "" : "s", ctx_device_name(&c));
    if (logf) {
        JsonLine j;
        json_begin(&j, "config");
        json_str(&j, "model", m.name);
        json_str(&j, "data", o.data);
        json_str(&j, "device", ctx_device_name(&c));
        json_str(&j, "precision", o.precision);
        json_int(&j, "batch", o.batch);
        json_int(&j, "steps", total_steps);
        json_int(&j, "params", (int64_t)m.params.total);
        json_num(&j, "lr", o.lr);
        json_num(&j, "momentum", o.momentum);
        json_num(&j, "weight_decay", o.weight_decay);
        json_int(&j, "seed", (int64_t)o.seed);
        json_end(&j, logf);
    }

    Tensor *x = tensor_new(&c, DT_F32, 2, (int64_t[]){o.batch, FMNIST_PIXELS});
    Tensor *y = tensor_new(&c, DT_I32, 1, (int64_t[]){o.batch});
    Stager st;
    stager_init(&st, &c, o.batch, FMNIST_PIXELS);
    uint32_t *perm = (uint32_t *)malloc(tr->n * sizeof(uint32_t));
    Progress pg;
    progress_init(&pg);

    double t0 = progress_now(), t_last = t0;
    long step = 0, last_step = 0;
    double loss_v = NAN;
    for (int epoch = 0; epoch < epochs && step < total_steps; epoch++) {
        shuffle_perm(perm, tr->n, o.seed, (uint64_t)epoch);
        for (long s = 0; s < steps_per_epoch && step < total_steps; s++) {
            int k = stager_acquire(&st, &c);
            fmnist_batch_f32(st.x[k], st.y[k], &ds, FMNIST_TRAIN, perm + s * o.batch, o.batch,
                             FMNIST_MEAN, FMNIST_STD);
            stager_upload(&st, &c, x, y);

            Tensor *logits = m.forward(&c, &m, x);
            Tensor *loss = op_cross_entropy(&c, logits, y, -1, o.label_smoothing);
            tensor_release(logits);
            ad_backward(&c, loss, 1.0f);
            sgd_step(&opt, &m.params, o.lr);
            params_zero_grad(&m.params);
            step++;

            if (step % o.log_every == 0 || step == total_steps) {
                float lv;
                tensor_to_f32(&lv, loss);    /* waits for the step: timing is honest */
                ctx_check_flags(&c);
                loss_v = lv;
                if (!isfinite(loss_v))
                    ct_fatal_hint("lower --lr", "the loss became %g at step %ld", loss_v, step);
                double now = progress_now();
                double sps = (double)(step - last_step) * o.batch / (now - t_last);
                double eta = (now - t0) / (double)step * (double)(total_steps - step);
                char eb[32], mb[32];
                progress_update(&pg, "epoch %d/%d  step %ld/%ld  loss %.4f  lr %.4g  %.0f samples/s  ETA %s  mem %s",
                                epoch + 1, epochs, step, total_steps, loss_v, (double)o.lr, sps,
                                progress_fmt_time(eb, sizeof eb, eta),
                                mem_fmt(mb, sizeof mb, c.mem.current));
                if (logf) {
                    JsonLine j;
                    json_begin(&j, "step");
                    json_int(&j, "step", step);
                    json_int(&j, "epoch", epoch + 1);
                    json_num(&j, "loss", loss_v);
                    json_num(&j, "lr", o.lr);
                    json_num(&j, "samples_per_s", sps);
                    json_int(&j, "mem_bytes", (int64_t)c.mem.current);
                    json_int(&j, "peak_mem_bytes", (int64_t)c.mem.peak);
                    json_num(&j, "time_s", now - t0);
                    json_end(&j, logf);
                }
                t_last = now;
                last_step = step;
            }
            tensor_release(loss);
        }
    }
    progress_done(&pg);
    double train_s = progress_now() - t0;

    EvalResult ev = evaluate(&c, &m, &ds, FMNIST_TEST, 1000);
    printf("test accuracy %.2f%%  test loss %.4f  (%ld images; trained %ld steps in %.1f s, %.0f samples/s)\n",
           100.0 * ev.acc, ev.loss, ev.n, step, train_s, (double)step * o.batch / train_s);
    if (logf) {
        JsonLine j;
        json_begin(&j, "eval");
        json_str(&j, "split", "test");
        json_int(&j, "step", step);
        json_num(&j, "test_acc", ev.acc);
        json_num(&j, "test_loss", ev.loss);
        json_int(&j, "test_n", ev.n);
        json_num(&j, "train_time_s", train_s);
        json_int(&j, "peak_mem_bytes", (int64_t)c.mem.peak);
        json_end(&j, logf);
        fclose(logf);
    }

    free(perm);
    stager_free(&st, &c);
    tensor_release(x);
    tensor_release(y);
    sgd_free(&opt, &m.params);
    model_free(&m);
    ctx_free(&c);
    fmnist_free(&ds);
    return 0;
}
