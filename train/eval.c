/* eval.c — one pass over the held-out split: mean loss, top-1 and top-5. */
#include "eval.h"

#include <stdlib.h>
#include "../engine/autograd.h"
#include "../engine/error.h"
#include "../ops/ops.h"

EvalResult evaluate(Ctx *c, Model *m, Feed *f)
{
    EvalResult r = {0, 0, 0, 0, 0};
    int grad = ad_set_grad(c, 0), training = m->training;
    m->training = 0;
    double loss_sum = 0;
    long top1 = 0, top5 = 0;
    float *z = NULL;
    int32_t *y = NULL;
    size_t zcap = 0, K = 0;
    long *count = NULL;   /* [K] labels seen of each class */
    f->eval_start(f, c);
    Tensor *in[4];
    int n;
    while (f->eval_next(f, c, in, &n)) {
        Tensor *logits = NULL;
        Tensor *loss = model_loss(c, m, in, 0.0f, &logits);
        K = tensor_cols(logits);
        if (!count) count = (long *)calloc(K, sizeof *count);
        if ((size_t)n * K > zcap) {
            zcap = (size_t)n * K;
            z = (float *)realloc(z, zcap * sizeof(float));
            y = (int32_t *)realloc(y, (size_t)n * sizeof(int32_t));
        }
        float lv;
        tensor_to_f32(&lv, loss);
        tensor_to_f32(z, logits);
        tensor_to_host(y, in[f->n_in - 1]);
        loss_sum += (double)lv * n;
        for (int i = 0; i < n; i++) {
            const float *row = z + (size_t)i * K;
            if (y[i] >= 0 && (size_t)y[i] < K) count[y[i]]++;
            float target = row[y[i]];
            int above = 0;   /* classes scoring higher than the true one */
            for (size_t k = 0; k < K; k++) above += row[k] > target;
            top1 += above == 0;
            top5 += above < 5;
        }
        r.n += n;
        tensor_release(loss);
        tensor_release(logits);
        for (int i = 0; i < f->n_in; i++) tensor_release(in[i]);
    }
    long most = 0;
    for (size_t k = 0; count && k < K; k++) if (count[k] > most) most = count[k];
    free(count);
    free(z);
    free(y);
    m->training = training;
    ad_set_grad(c, grad);
    if (r.n) {
        r.loss = loss_sum / (double)r.n;
        r.top1 = (double)top1 / (double)r.n;
        r.top5 = (double)top5 / (double)r.n;
        r.majority = (double)most / (double)r.n;
    }
    return r;
}
