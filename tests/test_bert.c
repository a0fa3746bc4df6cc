/* test_bert.c — BERT on the CPU backend:
 *   - Hugging Face's parameter names and count (bert-tiny MLM: 42 tensors;
 *     bert-base would be 202, as BertForMaskedLM's named_parameters);
 *   - recompute per encoder layer with dropout on gives bit-identical
 *     gradients: the re-run draws the same dropout masks (Philox offsets);
 *   - gradient accumulation: 2 micro-batches of 4 equal one batch of 8 when
 *     each micro-batch holds the same number of labelled tokens (the MLM loss
 *     is a mean over labelled tokens, so this is the condition under which
 *     "mean of means" is the mean);
 *   - bert-tiny pre-trained by masked LM on the fortunes corpus (Debian
 *     package fortunes) for 200 steps: the loss falls below 0.9 ln(vocab) (uniform guessing): in
 *     200 CPU steps it learns the token statistics (~6.0 nats for a 1000-piece
 *     vocabulary); context comes with longer runs (the GPU pre-training).
 */
#include <string.h>
#include "check.h"
#include "../data/mlm.h"
#include "../data/text_shards.h"
#include "../data/vocab_build.h"
#include "../data/wordpiece.h"
#include "../engine/autograd.h"
#include "../models/bert.h"
#include "../ops/ops.h"
#include "../train/adamw.h"

enum { V = 512, T = 16 };

static void make_batch(Ctx *c, int B, int first, Tensor **in, int labels_per_seq)
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
    in[3] = tensor_from_host(c, lab, DT_I32, 1, (int64_t[]){(int64_t)B * T});
    free(ids); free(tt); free(lab); free(mask);
}

static void release4(Tensor **in) { for (int i = 0; i < 4; i++) tensor_release(in[i]); }

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
        Tensor *in[4];
        make_batch(c, 4, 0, in, 2);
        c->rng_offset = 1000;          /* same dropout stream for both runs */
        grads_of(c, &m, in, 1.0f);
        n = m.params.total;
        g[k] = malloc(n * sizeof(float));
        memcpy(g[k], m.params.grad, n * sizeof(float));
        release4(in);
        model_free(&m);
    }
    check_true("bert.recompute_with_dropout.same_grads", memcmp(g[0], g[1], n * sizeof(float)) == 0,
               "gradients differ: the re-run drew different dropout masks");
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
    Tensor *in[4];
    make_batch(c, 8, 0, in, 2);
    grads_of(c, &m, in, 1.0f);
    memcpy(big, m.params.grad, n * sizeof(float));
    release4(in);
    params_zero_grad(&m.params);
    for (int k = 0; k < 2; k++) {
        make_batch(c, 4, 4 * k, in, 2);
        grads_of(c, &m, in, 0.5f);
        release4(in);
    }
    check_close("bert.accum_2x4_equals_8", m.params.grad, big, n, 1e-7, 1e-5);
    free(big);
    model_free(&m);
}

static void test_mlm_fortunes(Ctx *c)
{
    const char *corpus = "/usr/share/games/fortunes";
    char dir[] = "/tmp/ctrain_bert_XXXXXX", vocab[128], shard[128], err[512];
    if (!mkdtemp(dir)) { check_true("mlm.tmpdir", 0, "mkdtemp failed"); return; }
    snprintf(vocab, sizeof vocab, "%s/vocab.txt", dir);
    snprintf(shard, sizeof shard, "%s/fortunes.tok", dir);
    if (vocab_build(corpus, 1000, 1, vocab, err, sizeof err) != 0) {
        check_true("mlm.fortunes_present", 0, "%s (apt-get install fortunes)", err);
        return;
    }
    Wordpiece wp;
    TextShard ts;
    MlmBatcher mb;
    check_true("mlm.vocab_load", wordpiece_load(&wp, vocab, 1, err, sizeof err) == 0, "%s", err);
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
        Tensor *in[4];
        in[0] = tensor_from_host(c, bt.input_ids, DT_I32, 2, (int64_t[]){B, S});
        in[1] = tensor_from_host(c, bt.token_type_ids, DT_I32, 2, (int64_t[]){B, S});
        in[2] = tensor_from_host(c, madd, DT_F32, 2, (int64_t[]){B, S});
        in[3] = tensor_from_host(c, bt.labels, DT_I32, 1, (int64_t[]){B * S});
        Tensor *loss = model_loss(c, &m, in, 0.0f, NULL);
        float lv = *(float *)loss->data;
        if (step < 10) first += lv / 10;
        if (step >= STEPS - 40) last += lv / 40;
        ad_backward(c, loss, 1.0f);
        float lr = step < 20 ? 5e-3f * (step + 1) / 20 : 5e-3f;
        adamw_step(&opt, &m.params, lr, NULL, NULL, DT_F32);
        params_zero_grad(&m.params);
        tensor_release(loss);
        release4(in);
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

int main(void)
{
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    test_names(&c);
    test_recompute_dropout(&c);
    test_accumulation(&c);
    test_mlm_fortunes(&c);
    ctx_free(&c);
    return check_summary();
}
