/* test_bert.c — BERT on the CPU backend:
 *   - Hugging Face's parameter names and count (bert-tiny MLM: 42 tensors;
 *     bert-base would be 202, as BertForMaskedLM's named_parameters);
 *   - recompute per encoder layer with dropout on gives bit-identical
 *     gradients: the re-run draws the same dropout masks (Philox offsets);
 *   - gradient accumulation: 2 micro-batches of 4 equal one batch of 8 when
 *     each micro-batch holds the same number of labelled tokens (the MLM loss
 *     is a mean over labelled tokens, so this is the condition under which
 *     "mean of means" is the mean);
 *   - the MLM head run on the masked rows only (gathered, padded to a static
 *     count) gives the loss and gradients of the head on every token (within
 *     1e-5 of the largest gradient of each tensor);
 *   - the synthetic feed hands no mask: the same bits as a mask of zeros;
 *   - bert-tiny pre-trained by masked LM on the fortunes corpus (Debian
 *     package fortunes) for 200 steps: the loss falls below 0.9 ln(vocab) (uniform guessing): in
 *     200 CPU steps it learns the token statistics (~6.0 nats for a 1000-piece
 *     vocabulary); context comes with longer runs (the GPU pre-training).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "data/mlm.h"
#include "data/text_shards.h"
#include "data/vocab_build.h"
#include "data/wordpiece.h"
#include "engine/autograd.h"
#include "models/bert.h"
#include "ops/ops.h"
#include "train/feed/feed.h"
#include "train/optim/adamw.h"

enum { V = 512, T = 16 };

/* The MLM inputs for labels lab [B, T]: the masked rows with `slots` slots a
 * sequence (data/mlm.h), or slots = T: every position, the head on all
 * tokens (the reference the masked-row head must equal). */
static void mlm_inputs(Ctx *c, Tensor **in, const int32_t *lab, int B, int S, int slots)
{
    int32_t *rows = malloc((size_t)B * slots * 4), *rl = malloc((size_t)B * slots * 4);
    if (slots == S) {
        for (int i = 0; i < B * S; i++) { rows[i] = i; rl[i] = lab[i]; }
    } else if (mlm_select_rows(rows, rl, lab, B, S, slots) < 0) {
        check_true("bert.select_rows", 0, "a sequence has more than %d labels", slots);
    }
    in[3] = tensor_from_host(c, rows, DT_I32, 1, (int64_t[]){(int64_t)B * slots});
    in[4] = tensor_from_host(c, rl, DT_I32, 1, (int64_t[]){(int64_t)B * slots});
    free(rows);
    free(rl);
}

/* slots 0: as many as the most labelled sequence needs, plus one (so that
 * every sequence has padding slots) */
static void make_batch_slots(Ctx *c, int B, int first, Tensor **in, int labels_per_seq, int slots)
{
    int32_t *ids = malloc((size_t)B * T * 4), *tt = malloc((size_t)B * T * 4);
    int32_t *lab = malloc((size_t)B * T * 4);
    float *mask = malloc((size_t)B * T * 4);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            size_t i = (size_t)b * T + t;
            ids[i] = (int32_t)((7 * (first + b) + 13 * t + 5) % V);
            tt[i] = t >= T / 2;
            mask[i] = (b % 2 && t >= T - 3) ? -10000.0f : 0.0f;   /* some padding */
            lab[i] = (t == 2 || t == 5 || (labels_per_seq > 2 && t == 9)) ? (int32_t)((ids[i] * 3 + 1) % V) : -100;
        }
    in[0] = tensor_from_host(c, ids, DT_I32, 2, (int64_t[]){B, T});
    in[1] = tensor_from_host(c, tt, DT_I32, 2, (int64_t[]){B, T});
    in[2] = tensor_from_host(c, mask, DT_F32, 2, (int64_t[]){B, T});
    mlm_inputs(c, in, lab, B, T, slots ? slots : mlm_labelled_max(lab, B, T) + 1);
    free(ids); free(tt); free(lab); free(mask);
}

static void make_batch(Ctx *c, int B, int first, Tensor **in, int labels_per_seq)
{
    make_batch_slots(c, B, first, in, labels_per_seq, 0);
}

static void release5(Tensor **in) { for (int i = 0; i < 5; i++) tensor_release(in[i]); }

static void tiny(BertConfig *cfg, int vocab, float dropout, int recompute_every)
{
    bert_config_named(cfg, "tiny", vocab);
    cfg->max_pos = 64;
    cfg->hidden_dropout = cfg->attn_dropout = dropout;
    cfg->recompute.every = recompute_every;
}

static void test_names(Ctx *c)
{
    BertConfig cfg;
    tiny(&cfg, V, 0.1f, 0);
    Model m;
    bert_create(&m, c, &cfg, 1);
    check_true("bert.param_count", m.params.n == 42, "%d parameters (HF bert-tiny MLM has 42)", m.params.n);
    check_true("bert.names", params_get(&m.params, "bert.embeddings.word_embeddings.weight") &&
               params_get(&m.params, "bert.encoder.layer.1.attention.self.query.weight") &&
               params_get(&m.params, "bert.encoder.layer.0.output.LayerNorm.bias") &&
               params_get(&m.params, "cls.predictions.transform.LayerNorm.weight") &&
               params_get(&m.params, "cls.predictions.bias"), "a Hugging Face name is missing");
    model_free(&m);
}

static void grads_of(Ctx *c, Model *m, Tensor **in, float scale)
{
    Tensor *loss = model_loss(c, m, in, 0.0f, NULL);
    ad_backward(c, loss, scale);
    tensor_release(loss);
}

static void test_recompute_dropout(Ctx *c)
{
    float *g[2];
    size_t n = 0;
    for (int k = 0; k < 2; k++) {
        BertConfig cfg;
        tiny(&cfg, V, 0.1f, k);
        Model m;
        bert_create(&m, c, &cfg, 3);
        Tensor *in[5];
        make_batch(c, 4, 0, in, 2);
        c->rng_offset = 1000;          /* same dropout stream for both runs */
        grads_of(c, &m, in, 1.0f);
        n = m.params.total;
        g[k] = malloc(n * sizeof(float));
        memcpy(g[k], m.params.grad, n * sizeof(float));
        release5(in);
        model_free(&m);
    }
    check_true("bert.recompute_with_dropout.same_grads", memcmp(g[0], g[1], n * sizeof(float)) == 0,
               "gradients differ: the re-run drew different dropout masks");
    free(g[0]); free(g[1]);
}

/* CTRAIN_QKV_PROJ=1: q, k, v as one joined projection read in place by the
 * attention. The same loss as three Linears, bit for bit (the forward's
 * values and order are the same), and the same gradients to rounding (the
 * data gradient sums the three in one dot product), with dropout and with
 * a recomputed layer (the joined views made again in the re-run). */
static void test_qkv_projection(Ctx *c, int recompute_every)
{
    float *g[2], loss[2];
    size_t n = 0;
    for (int k = 0; k < 2; k++) {
        setenv("CTRAIN_QKV_PROJ", k ? "1" : "0", 1);
        BertConfig cfg;
        tiny(&cfg, V, 0.1f, recompute_every);
        Model m;
        bert_create(&m, c, &cfg, 5);
        Tensor *in[5];
        make_batch(c, 4, 0, in, 2);
        c->rng_offset = 2000;
        Tensor *l = model_loss(c, &m, in, 0.0f, NULL);
        loss[k] = ((const float *)l->data)[0];
        ad_backward(c, l, 1.0f);
        tensor_release(l);
        n = m.params.total;
        g[k] = malloc(n * sizeof(float));
        memcpy(g[k], m.params.grad, n * sizeof(float));
        release5(in);
        model_free(&m);
    }
    unsetenv("CTRAIN_QKV_PROJ");
    /* the input gradient of the joined projection is one sum over 3 D where
     * three Linears add three sums: the same terms, another rounding order */
    double worst = 0.0, gmax = 0.0;
    for (size_t i = 0; i < n; i++) {
        worst = fmax(worst, fabs((double)g[0][i] - g[1][i]));
        gmax = fmax(gmax, fabs((double)g[0][i]));
    }
    char name[96];
    snprintf(name, sizeof name, "bert.qkv_projection%s.same_loss_close_grads",
             recompute_every ? ".recompute" : "");
    check_true(name, loss[0] == loss[1] && worst <= 1e-5 * gmax,
               "loss %.9g against %.9g; gradients differ by up to %.3g (largest %.3g)",
               (double)loss[0], (double)loss[1], worst, gmax);
    free(g[0]); free(g[1]);
}

static void test_accumulation(Ctx *c)
{
    BertConfig cfg;
    tiny(&cfg, V, 0.0f, 0);
    Model m;
    bert_create(&m, c, &cfg, 4);
    size_t n = m.params.total;
    float *big = malloc(n * sizeof(float));
    Tensor *in[5];
    make_batch(c, 8, 0, in, 2);
    grads_of(c, &m, in, 1.0f);
    memcpy(big, m.params.grad, n * sizeof(float));
    release5(in);
    params_zero_grad(&m.params);
    for (int k = 0; k < 2; k++) {
        make_batch(c, 4, 4 * k, in, 2);
        grads_of(c, &m, in, 0.5f);
        release5(in);
    }
    check_close("bert.accum_2x4_equals_8", m.params.grad, big, n, 1e-7, 1e-5);
    free(big);
    model_free(&m);
}

/* max over tensors of max |got - ref| / max |ref| (the parity test's measure) */
static double worst_rel(const ParamSet *ps, const float *got, const float *ref, const char **name)
{
    double worst = 0;
    for (int i = 0; i < ps->n; i++) {
        const ParamInfo *pi = &ps->p[i];
        double d = 0, r = 0;
        for (size_t k = 0; k < pi->numel; k++) {
            d = fmax(d, fabs((double)got[pi->offset + k] - ref[pi->offset + k]));
            r = fmax(r, fabs((double)ref[pi->offset + k]));
        }
        double e = r > 0 ? d / r : d;
        if (e > worst) { worst = e; *name = pi->name; }
    }
    return worst;
}

/* The MLM head on the masked rows only equals the head on every token: same
 * loss, same gradients (bert-tiny, real masking rate from the synthetic
 * masker, some padding, dropout on with the same stream). Three row lists:
 * every position in order (the full head: the reference), the feed's
 * mlm_max_masked slots, and T slots a sequence (all rows, labelled first). */
static void test_masked_rows_head(Ctx *c)
{
    enum { B = 4, S = 32 };
    MlmConfig mc;
    memset(&mc, 0, sizeof mc);
    mc.T = S;
    mc.B = B;
    mc.seed = 9;
    mc.mask_prob = MLM_MASK_PROB;
    mc.mask_token_frac = 0.8f;
    mc.random_token_frac = 0.1f;
    mc.pad_id = 0; mc.unk_id = 1; mc.cls_id = 2; mc.sep_id = 3; mc.mask_id = 4;
    mc.vocab_size = V;
    MlmBatch bt;
    mlm_batch_alloc(&bt, B, S, 0);
    mlm_synthetic_batch(&bt, &mc, 3);
    float madd[B * S];
    for (int i = 0; i < B * S; i++) madd[i] = (i / S) % 2 && i % S >= S - 5 ? -10000.0f : 0.0f;
    const int slots[3] = {S, mlm_max_masked(S, MLM_MASK_PROB), S};
    float *g[3], lv[3];
    size_t n = 0;
    long labelled = 0;
    for (int i = 0; i < B * S; i++) labelled += bt.labels[i] != -100;
    for (int k = 0; k < 3; k++) {
        BertConfig cfg;
        tiny(&cfg, V, 0.1f, 0);
        Model m;
        bert_create(&m, c, &cfg, 21);
        Tensor *in[5];
        in[0] = tensor_from_host(c, bt.input_ids, DT_I32, 2, (int64_t[]){B, S});
        in[1] = tensor_from_host(c, bt.token_type_ids, DT_I32, 2, (int64_t[]){B, S});
        in[2] = tensor_from_host(c, madd, DT_F32, 2, (int64_t[]){B, S});
        if (k == 0) mlm_inputs(c, in, bt.labels, B, S, S);   /* identity rows */
        else {
            int32_t *rows = malloc(sizeof(int32_t) * B * slots[k]), *rl = malloc(sizeof(int32_t) * B * slots[k]);
            long got = mlm_select_rows(rows, rl, bt.labels, B, S, slots[k]);
            check_true("bert.masked_rows.select", got == labelled, "%ld rows labelled, %ld selected",
                       labelled, got);
            in[3] = tensor_from_host(c, rows, DT_I32, 1, (int64_t[]){(int64_t)B * slots[k]});
            in[4] = tensor_from_host(c, rl, DT_I32, 1, (int64_t[]){(int64_t)B * slots[k]});
            free(rows);
            free(rl);
        }
        c->rng_offset = 500;
        Tensor *z = NULL, *loss = model_loss(c, &m, in, 0.0f, &z);
        check_true("bert.masked_rows.logits_shape", z->shape[0] == (int64_t)B * slots[k] &&
                   z->shape[1] == V, "logits [%lld, %lld]", (long long)z->shape[0], (long long)z->shape[1]);
        tensor_release(z);
        lv[k] = *(float *)loss->data;
        ad_backward(c, loss, 1.0f);
        tensor_release(loss);
        n = m.params.total;
        g[k] = malloc(n * sizeof(float));
        memcpy(g[k], m.params.grad, n * sizeof(float));
        if (k == 2) {
            const char *name = "";
            double w1 = worst_rel(&m.params, g[1], g[0], &name);
            printf("  MLM head on %d of %d rows (%ld labelled): loss %.7f vs all rows %.7f, worst "
                   "gradient rel. error %.2g (%s)\n", B * slots[1], B * S, labelled, (double)lv[1],
                   (double)lv[0], w1, w1 > 0 ? name : "bit-identical");
            check_true("bert.masked_rows.grads", w1 <= 1e-5, "worst %.3g at %s", w1, name);
            double w2 = worst_rel(&m.params, g[2], g[0], &name);
            check_true("bert.masked_rows.all_slots.grads", w2 <= 1e-5, "worst %.3g at %s", w2, name);
        }
        release5(in);
        model_free(&m);
    }
    check_close("bert.masked_rows.loss", lv + 1, lv, 1, 0, 1e-6);
    check_close("bert.masked_rows.all_slots.loss", lv + 2, lv, 1, 0, 1e-6);
    for (int k = 0; k < 3; k++) free(g[k]);
    mlm_batch_free(&bt);
}

static void test_mlm_fortunes(Ctx *c)
{
    const char *corpus = "/usr/share/games/fortunes";
    char dir[] = "/tmp/ctrain_bert_XXXXXX", vocab[128], shard[128], err[512];
    if (!mkdtemp(dir)) { check_true("mlm.tmpdir", 0, "mkdtemp failed"); return; }
    snprintf(vocab, sizeof vocab, "%s/vocab.txt", dir);
    snprintf(shard, sizeof shard, "%s/fortunes.tok", dir);
    if (vocab_build(corpus, 1000, WP_UNCASED, vocab, err, sizeof err) != 0) {
        check_true("mlm.fortunes_present", 0, "%s (apt-get install fortunes)", err);
        return;
    }
    Wordpiece wp;
    TextShard ts;
    MlmBatcher mb;
    check_true("mlm.vocab_load", wordpiece_load(&wp, vocab, WP_UNCASED, err, sizeof err) == 0, "%s", err);
    check_true("mlm.shard_write", shard_write(corpus, &wp, shard, SHARD_DOC_AUTO, NULL, err, sizeof err) == 0, "%s", err);
    check_true("mlm.shard_open", shard_open(&ts, shard, err, sizeof err) == 0, "%s", err);
    enum { B = 16, S = 32, STEPS = 200 };
    MlmConfig mc = mlm_config_default(&wp, S, B, 5);
    check_true("mlm.init", mlm_init(&mb, &ts, &mc, &wp, err, sizeof err) == 0, "%s", err);
    BertConfig cfg;
    tiny(&cfg, (int)wp.V, 0.0f, 0);
    Model m;
    bert_create(&m, c, &cfg, 6);
    AdamW opt;
    adamw_init(&opt, &m.params, 0.9, 0.999, 1e-6, 0.01);
    MlmBatch bt;
    mlm_batch_alloc(&bt, B, S, 0);
    float *madd = malloc(B * S * sizeof(float));
    double first = 0, last = 0;
    for (int step = 0; step < STEPS; step++) {
        mlm_batch(&mb, &bt, 0, (uint64_t)step);
        for (int i = 0; i < B * S; i++) madd[i] = bt.attention_mask[i] ? 0.0f : -10000.0f;
        Tensor *in[5];
        in[0] = tensor_from_host(c, bt.input_ids, DT_I32, 2, (int64_t[]){B, S});
        in[1] = tensor_from_host(c, bt.token_type_ids, DT_I32, 2, (int64_t[]){B, S});
        in[2] = tensor_from_host(c, madd, DT_F32, 2, (int64_t[]){B, S});
        mlm_inputs(c, in, bt.labels, B, S, mlm_max_masked(S, mc.mask_prob));
        Tensor *loss = model_loss(c, &m, in, 0.0f, NULL);
        float lv = *(float *)loss->data;
        if (step < 10) first += lv / 10;
        if (step >= STEPS - 40) last += lv / 40;
        ad_backward(c, loss, 1.0f);
        float lr = step < 20 ? 5e-3f * (step + 1) / 20 : 5e-3f;
        adamw_step(&opt, &m.params, lr, NULL, NULL, DT_F32);
        params_zero_grad(&m.params);
        tensor_release(loss);
        release5(in);
    }
    double lnv = log((double)wp.V);
    printf("  bert-tiny MLM on fortunes (vocab %u, ln V = %.2f): loss %.3f over the first 10 steps, "
           "%.3f over the last 40\n", wp.V, lnv, first, last);
    check_true("mlm.fortunes.loss_below_0.9_ln_vocab", last < 0.9 * lnv, "%.3f vs ln V %.3f", last, lnv);
    free(madd);
    mlm_batch_free(&bt);
    adamw_free(&opt, &m.params);
    model_free(&m);
    mlm_free(&mb);
    shard_close(&ts);
    wordpiece_free(&wp);
    unlink(vocab);
    unlink(shard);
    rmdir(dir);
}

/* The synthetic feed (every token real) hands the model no mask; the loss
 * and gradients are the same bits as with its mask of zeros (each score
 * plus 0), dropout on. */
static void test_synthetic_no_mask(Ctx *c)
{
    FeedSpec s = {"synthetic", "bert-tiny", 4, 4, 0, 1, 0, 5, T, NULL, V, NULL};
    Feed f;
    feed_open(&f, c, &s);
    check_true("bert.synthetic_feed.no_mask", f.n_in == 5 && f.in[2] == NULL,
               "the synthetic feed hands a mask (n_in %d)", f.n_in);
    const int64_t bt[2] = {4, T};
    Tensor *zeros = tensor_new(c, DT_F32, 2, bt);
    tensor_zero(zeros);
    float *g[2];
    float loss[2];
    size_t n = 0;
    for (int k = 0; k < 2; k++) {
        BertConfig cfg;
        tiny(&cfg, V, 0.1f, 0);
        Model m;
        bert_create(&m, c, &cfg, 3);
        Tensor *in[5] = {f.in[0], f.in[1], k ? zeros : NULL, f.in[3], f.in[4]};
        c->rng_offset = 2000;   /* the same dropout draws both times */
        Tensor *l = model_loss(c, &m, in, 0.0f, NULL);
        tensor_to_f32(&loss[k], l);
        ad_backward(c, l, 1.0f);
        tensor_release(l);
        n = m.params.total;
        g[k] = malloc(n * sizeof(float));
        memcpy(g[k], m.params.grad, n * sizeof(float));
        model_free(&m);
    }
    check_true("bert.synthetic_feed.same_bits_as_zero_mask",
               loss[0] == loss[1] && !memcmp(g[0], g[1], n * sizeof(float)),
               "loss %.9g without a mask, %.9g with zeros; gradients %s", (double)loss[0],
               (double)loss[1], memcmp(g[0], g[1], n * sizeof(float)) ? "differ" : "equal");
    free(g[0]); free(g[1]);
    tensor_release(zeros);
    feed_close(&f, c);
}

int main(void)
{
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    test_names(&c);
    test_recompute_dropout(&c);
    test_qkv_projection(&c, 0);
    test_qkv_projection(&c, 1);
    test_accumulation(&c);
    test_masked_rows_head(&c);
    test_synthetic_no_mask(&c);
    test_mlm_fortunes(&c);
    ctx_free(&c);
    return check_summary();
}
