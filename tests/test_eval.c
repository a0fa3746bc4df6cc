/* test_eval.c — the held-out evaluation (train/loop/eval.h) against hand-computed
 * values:
 *   - a hand-made split of 8 rows, 3 classes, eval batches of 3 (so 3, 3 and
 *     a partial 2): top-1 4/7, top-5 7/7, majority 3/7, per-class counts and
 *     the mean cross-entropy computed here in double. One row ties the true
 *     class with a lower-index class (argmax answers the other: wrong), one
 *     is labelled with the ignore index (not scored, not in the mean);
 *   - eval_rank: a NaN logit ranks the row last (never "right");
 *   - a bert-tiny classifier on fortunes-cls (2 topics, the package's real
 *     held-out split): evaluate() with eval batches 1, 64 (a partial last
 *     batch) and 1000 (one batch) gives the same top-1 and loss, equal to a
 *     per-example recomputation here (argmax and -log softmax of each row in
 *     double), and a top-1 consistent with the loss: every wrong row costs at
 *     least ln 2.
 */
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "check.h"
#include "data/vocab_build.h"
#include "data/wordpiece.h"
#include "engine/autograd.h"
#include "models/bert.h"
#include "ops/ops.h"
#include "train/loop/eval.h"
#include "train/feed/feed.h"

/* ---- a feed of fixed logits, and a model that returns them ---------------- */

enum { K3 = 3, ROWS = 8, EB = 3 };

static const float hand_z[ROWS][K3] = {
    {2, 1, 0},      /* y 0: right */
    {0, 3, 1},      /* y 2: wrong (answers 1) */
    {1, 1, 0},      /* y 1: tie with class 0, argmax answers 0: wrong */
    {0.5f, 0, 2},   /* y 2: right */
    {-1, 4, 0},     /* y 1: right */
    {0, 0, 5},      /* y 0: wrong (answers 2) */
    {3, 0, 0},      /* y 0: right (partial last batch) */
    {9, 0, 0},      /* ignored */
};
static const int32_t hand_y[ROWS] = {0, 2, 1, 2, 1, 0, 0, -100};

typedef struct { int pos; } HandFeed;

static void hand_start(Feed *f, Ctx *c) { (void)c; ((HandFeed *)f->impl)->pos = 0; }

static int hand_next(Feed *f, Ctx *c, Tensor **in, int *n)
{
    HandFeed *h = (HandFeed *)f->impl;
    if (h->pos >= ROWS) return 0;
    int b = ROWS - h->pos < EB ? ROWS - h->pos : EB;
    in[0] = tensor_from_host(c, hand_z[h->pos], DT_F32, 2, (int64_t[]){b, K3});
    in[1] = tensor_from_host(c, hand_y + h->pos, DT_I32, 1, (int64_t[]){b});
    h->pos += b;
    *n = b;
    return 1;
}

static Tensor *identity_forward(Ctx *c, Model *m, Tensor *x)
{
    (void)c; (void)m;
    tensor_retain(x);
    return x;
}

static void test_hand_made(Ctx *c)
{
    HandFeed hf = {0};
    Feed f;
    memset(&f, 0, sizeof f);
    f.n_in = 2;
    f.impl = &hf;
    f.eval_start = hand_start;
    f.eval_next = hand_next;
    Model m;
    memset(&m, 0, sizeof m);
    m.forward = identity_forward;
    m.training = 1;
    EvalResult r = evaluate(c, &m, &f);

    double loss = 0;   /* mean over the 7 labelled rows of lse - z[y] */
    for (int i = 0; i < 7; i++) {
        double mx = hand_z[i][0], s = 0;
        for (int k = 1; k < K3; k++) mx = fmax(mx, hand_z[i][k]);
        for (int k = 0; k < K3; k++) s += exp(hand_z[i][k] - mx);
        loss += mx + log(s) - hand_z[i][hand_y[i]];
    }
    loss /= 7;
    check_true("eval.hand.rows", r.n == 7, "%ld rows scored, want 7 (one is ignored)", r.n);
    check_true("eval.hand.top1", fabs(r.top1 - 4.0 / 7) < 1e-12, "top-1 %.6f, want 4/7", r.top1);
    check_true("eval.hand.top5", fabs(r.top5 - 1.0) < 1e-12, "top-5 %.6f, want 1", r.top5);
    check_true("eval.hand.majority", fabs(r.majority - 3.0 / 7) < 1e-12, "majority %.6f, want 3/7",
               r.majority);
    check_true("eval.hand.loss", fabs(r.loss - loss) < 1e-6, "loss %.7f, want %.7f", r.loss, loss);
    check_true("eval.hand.restores_mode", m.training == 1 && c->grad_enabled,
               "evaluate left training %d, grad %d", m.training, c->grad_enabled);
    const long n_want[K3] = {3, 2, 2}, hit_want[K3] = {2, 1, 1}, pred_want[K3] = {3, 2, 2};
    int same = r.classes == K3;
    for (int k = 0; same && k < K3; k++)
        same = r.class_n[k] == n_want[k] && r.class_hit[k] == hit_want[k] &&
               r.class_pred[k] == pred_want[k];
    check_true("eval.hand.per_class", same, "per-class rows/right/answered differ from 3/2/2, "
               "2/1/1, 3/2/2");
    eval_result_free(&r);

    const float tie[3] = {1, 1, 0}, nan_row[3] = {NAN, 0, 0}, top[3] = {0, 7, 7};
    check_true("eval.rank.tie_goes_to_lower_index",
               eval_rank(tie, 3, 1) == 1 && eval_rank(tie, 3, 0) == 0 && eval_argmax(tie, 3) == 0,
               "ranks %zu %zu, argmax %d", eval_rank(tie, 3, 1), eval_rank(tie, 3, 0),
               eval_argmax(tie, 3));
    check_true("eval.rank.nan_is_wrong", eval_rank(nan_row, 3, 1) == 3 && eval_argmax(nan_row, 3) < 0,
               "a NaN row ranked %zu", eval_rank(nan_row, 3, 1));
    check_true("eval.rank.second", eval_rank(top, 3, 2) == 1 && eval_rank(top, 3, 0) == 2,
               "ranks %zu %zu", eval_rank(top, 3, 2), eval_rank(top, 3, 0));
}

/* ---- a real classifier on the real split ------------------------------------ */

typedef struct { double loss; long n, right; } PerRow;

/* Each held-out example alone (eval batch 1), scored here in double. */
static PerRow per_example(Ctx *c, Model *m, Feed *f)
{
    PerRow p = {0, 0, 0};
    int grad = ad_set_grad(c, 0);
    m->training = 0;
    f->eval_start(f, c);
    Tensor *in[FEED_MAX_IN];
    int n;
    while (f->eval_next(f, c, in, &n)) {
        Tensor *z = NULL, *loss = model_loss(c, m, in, 0.0f, &z);
        size_t K = tensor_cols(z);
        float row[64];
        int32_t y;
        tensor_to_f32(row, z);
        tensor_to_host(&y, in[f->n_in - 1]);
        double mx = row[0], s = 0;
        size_t best = 0;
        for (size_t k = 1; k < K; k++) {
            mx = fmax(mx, row[k]);
            if (row[k] > row[best]) best = k;
        }
        for (size_t k = 0; k < K; k++) s += exp(row[k] - mx);
        p.loss += mx + log(s) - row[y];
        p.right += best == (size_t)y;
        p.n++;
        tensor_release(z);
        tensor_release(loss);
        for (int i = 0; i < f->n_in; i++) tensor_release(in[i]);
    }
    m->training = 1;
    ad_set_grad(c, grad);
    p.loss /= (double)(p.n ? p.n : 1);
    return p;
}

static void test_bert_fortunes(Ctx *c)
{
    struct stat sb;
    if (stat("/usr/share/games/fortunes/people", &sb) != 0) {
        check_true("eval.fortunes_installed", 0, "apt-get install fortunes");
        return;
    }
    char dir[] = "/tmp/ctrain_eval_XXXXXX", vocab[128], err[512];
    if (!mkdtemp(dir)) { check_true("eval.tmpdir", 0, "mkdtemp failed"); return; }
    snprintf(vocab, sizeof vocab, "%s/vocab.txt", dir);
    if (!check_true("eval.vocab", vocab_build("/usr/share/games/fortunes", 1000, WP_UNCASED, vocab,
                                              err, sizeof err) == 0, "%s", err))
        return;
    const int ebs[3] = {1, 64, 1000};
    EvalResult r[3];
    PerRow ref = {0, 0, 0};
    for (int e = 0; e < 3; e++) {
        FeedSpec s = {"fortunes-cls", "bert-tiny", 8, ebs[e], 0, 1, NULL, 2, 7, 32, vocab, 0};
        Feed f;
        feed_open(&f, c, &s);
        BertConfig cfg;
        bert_config_named(&cfg, "tiny", f.vocab_size);
        cfg.max_pos = 64;
        cfg.head = BERT_CLASSIFIER;
        cfg.classes = f.classes;
        Model m;
        bert_create(&m, c, &cfg, 11);
        /* untrained logits differ by ~1e-3 between examples: scale the
         * classifier up so that rows are answered both ways, some confidently */
        Tensor *w = params_get(&m.params, "classifier.weight");
        for (size_t i = 0; i < w->numel; i++) ((float *)w->data)[i] *= 300.0f;
        r[e] = evaluate(c, &m, &f);
        if (e == 0) ref = per_example(c, &m, &f);
        model_free(&m);
        feed_close(&f, c);
    }
    printf("  bert-tiny, 2 topics, %ld held-out: top-1 %.4f loss %.6f (batches of 1), %.4f %.6f "
           "(64), %.4f %.6f (1000); per example %ld/%ld loss %.6f\n", r[0].n, r[0].top1,
           r[0].loss, r[1].top1, r[1].loss, r[2].top1, r[2].loss, ref.right, ref.n, ref.loss);
    check_true("eval.bert.rows", r[0].n == ref.n && r[1].n == ref.n && r[2].n == ref.n && ref.n > 100,
               "rows %ld %ld %ld, per example %ld", r[0].n, r[1].n, r[2].n, ref.n);
    for (int e = 0; e < 3; e++) {
        char name[64];
        snprintf(name, sizeof name, "eval.bert.batch%d.top1", ebs[e]);
        check_true(name, fabs(r[e].top1 - (double)ref.right / (double)ref.n) < 1e-12,
                   "top-1 %.6f, per example %ld/%ld", r[e].top1, ref.right, ref.n);
        snprintf(name, sizeof name, "eval.bert.batch%d.loss", ebs[e]);
        check_true(name, fabs(r[e].loss - ref.loss) < 1e-5 * (1 + ref.loss), "loss %.7f, per "
                   "example %.7f", r[e].loss, ref.loss);
        snprintf(name, sizeof name, "eval.bert.batch%d.loss_bounds_errors", ebs[e]);
        check_true(name, r[e].loss >= (1.0 - r[e].top1) * log(2.0) - 1e-6,
                   "loss %.4f below (1 - top-1 %.4f) ln 2: wrong rows cost at least ln 2",
                   r[e].loss, r[e].top1);
    }
    for (int e = 0; e < 3; e++) eval_result_free(&r[e]);
    unlink(vocab);
    rmdir(dir);
}

int main(void)
{
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    test_hand_made(&c);
    test_bert_fortunes(&c);
    ctx_free(&c);
    return check_summary();
}
