/* feed_text.c — BERT's feeds: synthetic token batches generated once and
 * kept on the device, or masked-LM batches from a token shard, made on the
 * host (packing + 15% masking, data/mlm.h) and copied asynchronously from
 * pinned memory, double-buffered against the GPU.
 *
 * Both hand the model the same five tensors: ids, token types, additive
 * mask [B, T], then the masked rows and their labels [M], M = B S with S =
 * mlm_max_masked(T) slots a sequence (data/mlm.h: static, so a captured
 * step keeps its shapes; unused slots are padding labelled -100). Synthetic
 * sequences have no padding: their mask is NULL (no mask). */
#include "feed_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data/mlm.h"
#include "data/text_shards.h"
#include "data/wordpiece.h"
#include "engine/error.h"
#include "engine/log.h"
#include "feed_stage.h"

/* One staged set, in the layout of the five input tensors. */
typedef struct HostBatch {
    int32_t *ids, *tt, *rows, *labels;
    float *mask_add;
} HostBatch;
enum { TEXT_IDS, TEXT_TT, TEXT_MASK, TEXT_ROWS, TEXT_LABELS };   /* = the order of Feed.in */

typedef struct Text {
    TextShard shard;
    Wordpiece wp;
    MlmBatcher mb;
    MlmBatch batch;          /* the batcher's output (pageable) */
    FeedStage st;            /* pinned staging, a set = one HostBatch */
    int have_shard;
    int slots;               /* S: masked-row slots a sequence */
    uint64_t n_eval, eval_pos; /* held-out sequences (mlm_held_out_count) and the next one */
} Text;

static HostBatch text_host(Text *T, int k)
{
    void *const *b = T->st.buf[k];
    return (HostBatch){(int32_t *)b[TEXT_IDS], (int32_t *)b[TEXT_TT], (int32_t *)b[TEXT_ROWS],
                       (int32_t *)b[TEXT_LABELS], (float *)b[TEXT_MASK]};
}

/* 1 = real token -> additive 0; 0 = padding -> -10000 (HF's large negative);
 * the labels [B, T] become the masked rows and their labels [B S] */
static void fill_host(HostBatch *h, const MlmBatch *b, int slots)
{
    size_t n = (size_t)b->B * b->T;
    memcpy(h->ids, b->input_ids, n * sizeof(int32_t));
    memcpy(h->tt, b->token_type_ids, n * sizeof(int32_t));
    for (size_t i = 0; i < n; i++) h->mask_add[i] = b->attention_mask[i] ? 0.0f : -10000.0f;
    if (mlm_select_rows(h->rows, h->labels, b->labels, b->B, b->T, slots) < 0)
        ct_fatal("MLM batch: a sequence has more than %d masked positions (%d slots a "
                 "sequence of %d tokens)", mlm_labelled_max(b->labels, b->B, b->T), slots, b->T);
}

static void text_next(Feed *f, Ctx *c, uint64_t epoch, uint32_t b)
{
    Text *T = (Text *)f->impl;
    int k = feed_stage_next(&T->st);
    mlm_batch(&T->mb, &T->batch, epoch, b);
    HostBatch h = text_host(T, k);
    fill_host(&h, &T->batch, T->slots);
    feed_stage_send(&T->st, c, k, f->in, NULL, 5);
}

/* Evaluation on the held-out tail (data/mlm.h mlm_hold_out): whole batches
 * through the same staging into the training tensors (training is over, or
 * paused, when the evaluation runs), handed out as views. */
static void text_eval_start(Feed *f, Ctx *c)
{
    (void)c;
    ((Text *)f->impl)->eval_pos = 0;
}

static int text_eval_next(Feed *f, Ctx *c, Tensor **in, int *n)
{
    Text *T = (Text *)f->impl;
    if (T->eval_pos >= T->n_eval) return 0;
    const uint64_t left = T->n_eval - T->eval_pos;
    const int b = left < (uint64_t)T->batch.B ? (int)left : T->batch.B, S = T->batch.T;
    int k = feed_stage_next(&T->st);
    mlm_eval_batch(&T->mb, &T->batch, T->eval_pos, b);
    T->eval_pos += (uint64_t)b;
    MlmBatch part = T->batch;   /* the first b rows (row-major: a prefix) */
    part.B = b;
    HostBatch h = text_host(T, k);
    fill_host(&h, &part, T->slots);
    feed_stage_send(&T->st, c, k, f->in, NULL, 5);
    const int64_t M = (int64_t)b * T->slots;
    in[0] = tensor_view(c, f->in[0]->data, DT_I32, 2, (int64_t[]){b, S});
    in[1] = tensor_view(c, f->in[1]->data, DT_I32, 2, (int64_t[]){b, S});
    in[2] = tensor_view(c, f->in[2]->data, DT_F32, 2, (int64_t[]){b, S});
    in[3] = tensor_view(c, f->in[3]->data, DT_I32, 1, (int64_t[]){M});
    in[4] = tensor_view(c, f->in[4]->data, DT_I32, 1, (int64_t[]){M});
    *n = b;
    return 1;
}

static void synthetic_next(Feed *f, Ctx *c, uint64_t epoch, uint32_t b)
{
    (void)f; (void)c; (void)epoch; (void)b;
}

static void text_free(Feed *f, Ctx *c)
{
    Text *T = (Text *)f->impl;
    ctx_sync(c);
    feed_stage_free(&T->st, c);
    mlm_batch_free(&T->batch);
    if (T->have_shard) {
        mlm_free(&T->mb);
        shard_close(&T->shard);
        wordpiece_free(&T->wp);
    }
    free(T);
}

/* The shard at path was made with the vocab at vocab_path, as far as its
 * header can tell: the same size and, for a CTTOK2 shard, the same
 * vocabulary hash (data/text_shards.h); fatal otherwise. A CTTOK1 shard
 * records no hash: a warning, once. */
static void feed_text_check_vocab(const TextShard *sh, const char *path, const Wordpiece *wp,
                                  const char *vocab_path)
{
    static int warned_v1;
    char hint[1024];
    snprintf(hint, sizeof hint, "use the vocab.txt the shard was made with, or make the shard "
             "again with this one: ctrain shard --corpus DIR --vocab %s --out %s", vocab_path,
             path);
    if (sh->vocab_size != wp->V)
        ct_fatal_hint(hint, "shard %s was made with a %u-token vocabulary; --vocab %s has %u "
                      "tokens", path, sh->vocab_size, vocab_path, wp->V);
    if (!sh->has_hash) {
        if (!warned_v1++)
            LOG_W("shard %s is in the older CTTOK1 format, which records no vocabulary hash: "
                  "only its vocab size (%u) can be checked against --vocab %s; run ctrain "
                  "shard again to add the check", path, sh->vocab_size, vocab_path);
        return;
    }
    if (sh->vocab_hash != wp->hash)
        ct_fatal_hint(hint, "shard %s was made with another vocabulary than --vocab %s: both "
                      "have %u tokens, but not the same ones in the same order (vocab hash "
                      "%016llx in the shard, %016llx of %s)", path, vocab_path, wp->V,
                      (unsigned long long)sh->vocab_hash, (unsigned long long)wp->hash,
                      vocab_path);
}

void feed_text_open(Feed *f, Ctx *c, const FeedSpec *s)
{
    Text *T = (Text *)calloc(1, sizeof *T);
    int B = s->batch, S = s->seq;
    size_t n = (size_t)B * S;
    char err[512];
    T->slots = mlm_max_masked(S, MLM_MASK_PROB);
    size_t M = (size_t)B * T->slots;
    const size_t bytes[5] = {[TEXT_IDS] = n * sizeof(int32_t), [TEXT_TT] = n * sizeof(int32_t),
                             [TEXT_MASK] = n * sizeof(float), [TEXT_ROWS] = M * sizeof(int32_t),
                             [TEXT_LABELS] = M * sizeof(int32_t)};
    feed_stage_init(&T->st, c, 5, bytes);
    if (mlm_batch_alloc(&T->batch, B, S, 0) != 0) ct_fatal("out of host memory for a batch");
    f->impl = T;
    f->n_in = 5;
    f->in[0] = tensor_new(c, DT_I32, 2, (int64_t[]){B, S});
    f->in[1] = tensor_new(c, DT_I32, 2, (int64_t[]){B, S});
    f->in[2] = tensor_new(c, DT_F32, 2, (int64_t[]){B, S});
    f->in[3] = tensor_new(c, DT_I32, 1, (int64_t[]){(int64_t)M});
    f->in[4] = tensor_new(c, DT_I32, 1, (int64_t[]){(int64_t)M});
    f->free = text_free;
    f->has_eval = 0;

    if (!strcmp(s->data, "synthetic")) {
        /* random ids over the vocabulary, 15% of positions labelled: made
         * once, kept on the device */
        MlmConfig cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.T = S;
        cfg.B = B;
        cfg.seed = s->seed;
        cfg.mask_prob = MLM_MASK_PROB;
        cfg.mask_token_frac = 0.8f;
        cfg.random_token_frac = 0.1f;
        cfg.pad_id = 0; cfg.unk_id = 100; cfg.cls_id = 101; cfg.sep_id = 102; cfg.mask_id = 103;
        cfg.vocab_size = (uint32_t)(s->vocab_size ? s->vocab_size : 30522);
        /* rank r: rows r B .. r B + B - 1 of one world x B batch (train/feed/feed.h) */
        mlm_synthetic_rows(&T->batch, &cfg, 0, (uint32_t)c->dp_rank * (uint32_t)B);
        HostBatch h = text_host(T, 0);
        fill_host(&h, &T->batch, T->slots);
        feed_stage_copy(c, f->in, (const void *const *)T->st.buf[0], NULL, 5);
        ctx_sync(c);   /* made once: no event, the copies are done before the first step */
        /* every token real: no mask (a mask of zeros gives the same bits, adding 0 to each
         * score, at the cost of its loads; PyTorch's benchmark passes none either) */
        tensor_release(f->in[TEXT_MASK]);
        f->in[TEXT_MASK] = NULL;
        f->next = synthetic_next;
        f->batches_per_epoch = 1000000000L;
        f->classes = (int)cfg.vocab_size;
        f->vocab_size = (int)cfg.vocab_size;
        snprintf(f->desc, sizeof f->desc, "synthetic tokens on the device (vocab %u, %d tokens)",
                 cfg.vocab_size, S);
        return;
    }
    if (strncmp(s->data, "mlm:", 4) != 0)
        ct_fatal_hint("pass --data synthetic, or --data mlm:SHARD with --vocab vocab.txt (make a "
                      "shard with: ctrain shard --corpus DIR --vocab vocab.txt --out FILE)",
                      "--data %s: BERT trains on masked-LM shards, synthetic tokens or fortunes-cls", s->data);
    if (!s->vocab || !s->vocab[0])
        ct_fatal_hint("pass --vocab vocab.txt (the one the shard was made with)",
                      "--data %s needs the vocabulary", s->data);
    const char *path = s->data + 4;
    int st = wordpiece_load(&T->wp, s->vocab, WP_UNCASED, err, sizeof err);
    if (st != 0) ct_fatal_hint(wordpiece_hint(st), "%s", err);
    st = shard_open(&T->shard, path, err, sizeof err);
    if (st != 0) ct_fatal_hint(shard_hint(st), "%s", err);
    feed_text_check_vocab(&T->shard, path, &T->wp, s->vocab);
    MlmConfig cfg = mlm_config_default(&T->wp, S, B, s->seed);
    st = mlm_init(&T->mb, &T->shard, &cfg, &T->wp, err, sizeof err);
    if (st != 0) ct_fatal_hint(mlm_hint(st), "%s", err);
    T->have_shard = 1;
    T->n_eval = mlm_held_out_count(T->mb.n_seq);
    if (T->n_eval) {
        mlm_hold_out(&T->mb, T->n_eval);
        f->has_eval = 1;
        f->eval_rows = (long)T->n_eval;
        f->eval_start = text_eval_start;
        f->eval_next = text_eval_next;
    }
    mlm_set_shard(&T->mb, (uint32_t)c->dp_rank, (uint32_t)feed_world(c));
    f->next = text_next;
    f->batches_per_epoch = (long)mlm_batches_per_epoch(&T->mb);
    f->classes = (int)T->wp.V;
    f->vocab_size = (int)T->wp.V;
    snprintf(f->desc, sizeof f->desc, "masked LM on %s (%llu tokens, %u docs, vocab %u, %d "
             "tokens/seq; %llu sequences, the last %llu held out)", path,
             (unsigned long long)T->shard.n_tokens, T->shard.n_docs, T->wp.V, S,
             (unsigned long long)T->mb.n_seq, (unsigned long long)T->n_eval);
}
