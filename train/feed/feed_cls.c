/* feed_cls.c — BERT fine-tuning feed over the fortunes topic-classification
 * set (data/text_cls.h): --data fortunes-cls[:DIR] with --vocab vocab.txt.
 *
 * Topics: the --classes N largest (default FEEDCLS_TOPICS); labels number
 * them in name order. Held-out split: data/text_cls's deterministic 10%
 * (TEXTCLS_HELD_OUT; `ctrain vocab|shard --exclude-held-out` leave those
 * entries out of a pre-training corpus).
 * Training batches draw the training split in a fresh permutation each
 * epoch (shuffle_perm(seed, epoch): the same run gives the same batches;
 * data parallel: this rank's share, shuffle_shard);
 * the last partial batch of an epoch is dropped. Evaluation walks the
 * held-out split in order, the last batch partial (views of the full-size
 * eval tensors, like feed_image.c's flat feed).
 *
 * Inputs: ids i32 [B, T], token types i32 [B, T] (all 0), additive mask
 * f32 [B, T] (0 on [CLS] text [SEP], -10000 on padding), labels i32 [B].
 * Shape letters: B batch, T tokens (--seq).
 */
#include "feed_cls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data/shuffle.h"
#include "data/text_cls.h"
#include "data/wordpiece.h"
#include "engine/error.h"
#include "feed_stage.h"

#define FEEDCLS_TOPICS 4

/* A staged set: the four input tensors in order, then the 0/1 attention
 * mask the additive one is made from (host only, not copied). */
enum { CLS_IDS, CLS_TT, CLS_MASK, CLS_LABELS, CLS_ATTN, CLS_BUFS };

typedef struct Cls {
    TextCls ds;
    Wordpiece wp;
    uint32_t *perm, *idx;
    uint64_t perm_epoch, seed;
    FeedStage st;
    int T;
    uint32_t eval_pos;
    Tensor *ex[4];             /* eval batch tensors (full size; views for the tail) */
} Cls;

/* Stage the examples idx [b] (rows laid out for b rows) in a free set and
 * queue their copies into dst. */
static void cls_stage(Cls *C, Ctx *c, Tensor *const *dst, const uint32_t *idx, int b)
{
    int k = feed_stage_next(&C->st);
    void *const *h = C->st.buf[k];
    int32_t *attn = (int32_t *)h[CLS_ATTN];
    float *mask_add = (float *)h[CLS_MASK];
    const size_t n = (size_t)b * C->T;
    textcls_batch((int32_t *)h[CLS_IDS], (int32_t *)h[CLS_TT], attn, (int32_t *)h[CLS_LABELS],
                  &C->ds, idx, b, C->T, C->wp.cls_id, C->wp.sep_id, C->wp.pad_id);
    for (size_t i = 0; i < n; i++) mask_add[i] = attn[i] ? 0.0f : -10000.0f;
    const size_t bytes[4] = {[CLS_IDS] = n * sizeof(int32_t), [CLS_TT] = n * sizeof(int32_t),
                             [CLS_MASK] = n * sizeof(float), [CLS_LABELS] = (size_t)b * sizeof(int32_t)};
    feed_stage_send(&C->st, c, k, dst, bytes, 4);
}

static void cls_next(Feed *f, Ctx *c, uint64_t epoch, uint32_t b)
{
    Cls *C = (Cls *)f->impl;
    if (C->perm_epoch != epoch + 1) {
        shuffle_perm(C->perm, C->ds.n_train, C->seed, epoch);
        shuffle_shard(C->perm, C->ds.n_train, (uint32_t)c->dp_rank, (uint32_t)feed_world(c));
        C->perm_epoch = epoch + 1;
    }
    for (int i = 0; i < f->batch; i++) C->idx[i] = C->ds.train[C->perm[(size_t)b * f->batch + i]];
    cls_stage(C, c, f->in, C->idx, f->batch);
}

static void cls_eval_start(Feed *f, Ctx *c) { (void)c; ((Cls *)f->impl)->eval_pos = 0; }

static int cls_eval_next(Feed *f, Ctx *c, Tensor **in, int *n)
{
    Cls *C = (Cls *)f->impl;
    uint32_t left = C->ds.n_test - C->eval_pos;
    if (!left) return 0;
    int E = (int)C->ex[3]->shape[0], T = C->T;
    int b = left < (uint32_t)E ? (int)left : E;
    for (int i = 0; i < b; i++) C->idx[i] = C->ds.test[C->eval_pos + (uint32_t)i];
    C->eval_pos += (uint32_t)b;
    cls_stage(C, c, C->ex, C->idx, b);
    in[0] = tensor_view(c, C->ex[0]->data, DT_I32, 2, (int64_t[]){b, T});
    in[1] = tensor_view(c, C->ex[1]->data, DT_I32, 2, (int64_t[]){b, T});
    in[2] = tensor_view(c, C->ex[2]->data, DT_F32, 2, (int64_t[]){b, T});
    in[3] = tensor_view(c, C->ex[3]->data, DT_I32, 1, (int64_t[]){b});
    *n = b;
    return 1;
}

static void cls_free(Feed *f, Ctx *c)
{
    Cls *C = (Cls *)f->impl;
    ctx_sync(c);
    feed_stage_free(&C->st, c);
    for (int i = 0; i < 4; i++) tensor_release(C->ex[i]);
    free(C->perm);
    free(C->idx);
    textcls_free(&C->ds);
    wordpiece_free(&C->wp);
    free(C);
}

void feed_cls_open(Feed *f, Ctx *c, const FeedSpec *s)
{
    const char *dir = s->data[12] == ':' ? s->data + 13 : NULL;
    char err[512];
    if (!s->vocab || !s->vocab[0])
        ct_fatal_hint("pass --vocab vocab.txt (the vocabulary of the pre-trained model; make one "
                      "with: ctrain vocab --corpus DIR --size N --out vocab.txt)",
                      "--data %s needs the vocabulary", s->data);
    Cls *C = (Cls *)calloc(1, sizeof *C);
    if (!C) ct_fatal("out of host memory");
    int st = wordpiece_load(&C->wp, s->vocab, WP_UNCASED, err, sizeof err);
    if (st != 0) ct_fatal_hint(wordpiece_hint(st), "%s", err);
    static const char *const specials[3] = {"[PAD]", "[CLS]", "[SEP]"};
    char missing[64];
    int nmiss = wordpiece_missing(missing, sizeof missing, &C->wp, specials, 3);
    if (nmiss)
        ct_fatal_hint(wordpiece_hint(WP_ERR_FORMAT), "--vocab %s lacks %s: fine-tuning a BERT "
                      "classifier needs [PAD], [CLS] and [SEP]", s->vocab, missing);
    int topics = s->classes ? s->classes : FEEDCLS_TOPICS;
    st = textcls_load_fortunes(&C->ds, dir, NULL, topics, TEXTCLS_HELD_OUT, err, sizeof err);
    if (st != 0) ct_fatal_hint(textcls_hint(st, dir), "%s", err);
    st = textcls_tokenize(&C->ds, &C->wp, err, sizeof err);
    if (st != 0) ct_fatal_hint(textcls_hint(st, dir), "%s", err);
    int B = s->batch, E = s->eval_batch, T = s->seq;
    if ((uint32_t)B > C->ds.n_train)
        ct_fatal_hint("pass a smaller --batch", "--batch %d is larger than the %u training examples",
                      B, C->ds.n_train);
    C->T = T;
    C->seed = s->seed;
    size_t maxb = (size_t)(B > E ? B : E), n = maxb * T;
    const size_t bytes[CLS_BUFS] = {[CLS_IDS] = n * sizeof(int32_t), [CLS_TT] = n * sizeof(int32_t),
                                    [CLS_MASK] = n * sizeof(float),
                                    [CLS_LABELS] = maxb * sizeof(int32_t),
                                    [CLS_ATTN] = n * sizeof(int32_t)};
    feed_stage_init(&C->st, c, CLS_BUFS, bytes);
    C->perm = (uint32_t *)malloc((C->ds.n_train ? C->ds.n_train : 1) * sizeof(uint32_t));
    C->idx = (uint32_t *)malloc(maxb * sizeof(uint32_t));
    if (!C->perm || !C->idx) ct_fatal("out of host memory");
    f->impl = C;
    f->n_in = 4;
    f->in[0] = tensor_new(c, DT_I32, 2, (int64_t[]){B, T});
    f->in[1] = tensor_new(c, DT_I32, 2, (int64_t[]){B, T});
    f->in[2] = tensor_new(c, DT_F32, 2, (int64_t[]){B, T});
    f->in[3] = tensor_new(c, DT_I32, 1, (int64_t[]){B});
    C->ex[0] = tensor_new(c, DT_I32, 2, (int64_t[]){E, T});
    C->ex[1] = tensor_new(c, DT_I32, 2, (int64_t[]){E, T});
    C->ex[2] = tensor_new(c, DT_F32, 2, (int64_t[]){E, T});
    C->ex[3] = tensor_new(c, DT_I32, 1, (int64_t[]){E});
    f->batches_per_epoch = (long)(shuffle_shard_count(C->ds.n_train, (uint32_t)feed_world(c)) /
                                  (uint32_t)B);
    if (f->batches_per_epoch < 1)
        ct_fatal_hint("pass a smaller --batch or use fewer GPUs",
                      "%d ranks x --batch %d is more than the %u training examples",
                      feed_world(c), B, C->ds.n_train);
    f->classes = (int)C->ds.n_topics;
    f->vocab_size = (int)C->wp.V;
    f->has_eval = C->ds.n_test > 0;
    f->eval_rows = (long)C->ds.n_test;
    f->class_names = (const char *const *)C->ds.topics;
    f->next = cls_next;
    f->eval_start = cls_eval_start;
    f->eval_next = cls_eval_next;
    f->free = cls_free;
    char names[64] = "";
    for (uint32_t i = 0; i < C->ds.n_topics; i++) {
        size_t l = strlen(names);
        snprintf(names + l, sizeof names - l, "%s%s", i ? "," : "", C->ds.topics[i]);
    }
    snprintf(f->desc, sizeof f->desc, "fortunes-cls %u topics (%s), %u train, %u test, %d tokens/seq",
             C->ds.n_topics, names, C->ds.n_train, C->ds.n_test, T);
}
