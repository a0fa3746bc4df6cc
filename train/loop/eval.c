/* eval.c — one pass over the held-out split: mean loss, top-1, top-5, the
 * majority-class baseline and per-class counts (the rules in eval.h). */
#include "eval.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine/autograd.h"
#include "engine/error.h"
#include "ops/ops.h"
#include "progress.h"

#define EVAL_IGNORE (-100)   /* the loss's ignore index: such rows are not scored */

size_t eval_rank(const float *row, size_t K, int32_t y)
{
    float target = row[y];
    size_t rank = 0;
    for (size_t k = 0; k < K; k++) {
        if (isnan(row[k])) return K;
        rank += row[k] > target || (row[k] == target && k < (size_t)y);
    }
    return rank;
}

int eval_argmax(const float *row, size_t K)
{
    int best = 0;
    for (size_t k = 0; k < K; k++) {
        if (isnan(row[k])) return -1;
        if (row[k] > row[best]) best = (int)k;
    }
    return best;
}

static long *counts_new(size_t K)
{
    long *p = (long *)calloc(K ? K : 1, sizeof *p);
    if (!p) ct_fatal("out of host memory");
    return p;
}

EvalResult evaluate(Ctx *c, Model *m, Feed *f)
{
    EvalResult r;
    memset(&r, 0, sizeof r);
    int grad = ad_set_grad(c, 0), training = m->training;
    m->training = 0;
    double loss_sum = 0;
    long top1 = 0, top5 = 0;
    float *z = NULL;
    int32_t *y = NULL;
    size_t zcap = 0, ycap = 0, K = 0;
    f->eval_start(f, c);
    Tensor *in[FEED_MAX_IN];
    int n;
    /* a pass can take a minute: say how it goes (on a terminal every second,
     * into a file or pipe every 10 s), only after the first 2 s */
    Progress pg;
    progress_init(&pg);
    const double t0 = progress_now(), every = pg.tty ? 1.0 : 10.0;
    double shown = t0 + 2.0 - every;
    long rows_seen = 0;
    while (f->eval_next(f, c, in, &n)) {
        Tensor *logits = NULL;
        Tensor *loss = model_loss(c, m, in, 0.0f, &logits);
        Tensor *labels = in[f->n_in - 1];
        size_t rows = tensor_rows(logits);
        if (labels->numel != rows)
            ct_fatal("evaluate: %zu labels for %zu rows of logits", labels->numel, rows);
        if (!K) {
            K = tensor_cols(logits);
            r.classes = (int)K;
            r.class_n = counts_new(K);
            r.class_hit = counts_new(K);
            r.class_pred = counts_new(K);
        }
        CT_ASSERT(tensor_cols(logits) == K, "evaluate: the logits changed width between batches");
        if (rows * K > zcap) {
            zcap = rows * K;
            z = (float *)realloc(z, zcap * sizeof(float));
        }
        if (rows > ycap) {
            ycap = rows;
            y = (int32_t *)realloc(y, ycap * sizeof(int32_t));
        }
        if (!z || !y) ct_fatal("out of host memory");
        float lv;
        tensor_to_f32(&lv, loss);
        tensor_to_f32(z, logits);
        tensor_to_host(y, labels);
        long scored = 0;
        for (size_t i = 0; i < rows; i++) {
            if (y[i] == EVAL_IGNORE) continue;
            if (y[i] < 0 || (size_t)y[i] >= K)
                ct_fatal_hint("check the data's labels against the model's classes",
                              "evaluate: label %d of row %zu is outside [0, %zu)", y[i], i, K);
            const float *row = z + i * K;
            size_t rank = eval_rank(row, K, y[i]);
            int pred = eval_argmax(row, K);
            top1 += rank == 0;
            top5 += rank < 5;
            r.class_n[y[i]]++;
            r.class_hit[y[i]] += rank == 0;
            if (pred >= 0) r.class_pred[pred]++;
            scored++;
        }
        /* the loss is the mean over the batch's labelled rows: weight it by them */
        loss_sum += (double)lv * (double)scored;
        r.n += scored;
        rows_seen += (long)n;
        const double now = progress_now();
        if (now - shown >= every && c->dp_rank == 0) {
            char of[32] = "", eta[32] = "", eb[32];
            if (f->eval_rows > rows_seen) {
                snprintf(of, sizeof of, " of %ld", f->eval_rows);
                snprintf(eta, sizeof eta, ", ETA %s", progress_fmt_time(eb, sizeof eb,
                         (now - t0) / (double)rows_seen * (double)(f->eval_rows - rows_seen)));
            }
            progress_update(&pg, "evaluating: %ld%s examples in %.0f s (%.0f/s)%s, top-1 so far "
                            "%.2f%%", rows_seen, of, now - t0, (double)rows_seen / (now - t0), eta,
                            r.n ? 100.0 * (double)top1 / (double)r.n : 0.0);
            shown = now;
        }
        tensor_release(loss);
        tensor_release(logits);
        for (int i = 0; i < f->n_in; i++) tensor_release(in[i]);
    }
    progress_done(&pg);
    ctx_check_flags(c);   /* labels or token ids the device kernels flagged */
    long most = 0;
    for (size_t k = 0; k < K; k++) if (r.class_n[k] > most) most = r.class_n[k];
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

void eval_result_free(EvalResult *r)
{
    free(r->class_n);
    free(r->class_hit);
    free(r->class_pred);
    r->class_n = r->class_hit = r->class_pred = NULL;
}

void eval_print_classes(const EvalResult *r, const char *const *names)
{
    if (!r->classes || r->classes > 32 || !r->class_n) return;
    printf("per class (right/rows, answered):");
    for (int k = 0; k < r->classes; k++) {
        char idx[16];
        snprintf(idx, sizeof idx, "%d", k);
        long nk = r->class_n[k];
        printf("%s %s %ld/%ld %.1f%% (%ld)", k ? "," : "", names ? names[k] : idx, r->class_hit[k],
               nk, nk ? 100.0 * (double)r->class_hit[k] / (double)nk : 0.0, r->class_pred[k]);
    }
    printf("\n");
}
