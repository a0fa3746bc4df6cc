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
 * eval tensors, like feed.c's flat feed).
 *
 * Inputs: ids i32 [B, T], token types i32 [B, T] (all 0), additive mask
 * f32 [B, T] (0 on [CLS] text [SEP], -10000 on padding), labels i32 [B].
 * Shape letters: B batch, T tokens (--seq).
 */
#include "feed.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data/shuffle.h"
#include "data/text_cls.h"
#include "data/wordpiece.h"
#include "engine/error.h"
#include "engine/mem.h"

#define FEEDCLS_TOPICS 4

/* Pinned host copy of one batch, in the layout of the four input tensors. */
typedef struct ClsHost {
    int32_t *ids, *tt, *labels, *attn;
    float *mask_add;
} ClsHost;

typedef struct Cls {
    TextCls ds;
    Wordpiece wp;
    uint32_t *perm, *idx;
    uint64_t perm_epoch, seed;
    ClsHost host[2];
#ifdef CTRAIN_CUDA
    cudaEvent_t done[2];
#endif
    int k, cuda, T;
    uint32_t eval_pos;
    Tensor *ex[4];             /* eval batch tensors (full size; views for the tail) */
} Cls;

/* Host batch k of the examples idx [b], rows laid out for b rows. */
static void cls_fill(Cls *C, int k, const uint32_t *idx, int b)
{
    ClsHost *h = &C->host[k];
    int T = C->T;
    textcls_batch(h->ids, h->tt, h->attn, h->labels, &C->ds, idx, b, T, C->wp.cls_id,
                  C->wp.sep_id, C->wp.pad_id);
    for (size_t i = 0; i < (size_t)b * T; i++) h->mask_add[i] = h->attn[i] ? 0.0f : -10000.0f;
}

static void cls_upload(Cls *C, Ctx *c, int k, Tensor *const *dst, int b)
{
    const ClsHost *h = &C->host[k];
    size_t n = (size_t)b * C->T;
    mem_to_device_async(c, dst[0]->data, h->ids, n * sizeof(int32_t));
    mem_to_device_async(c, dst[1]->data, h->tt, n * sizeof(int32_t));
    mem_to_device_async(c, dst[2]->data, h->mask_add, n * sizeof(float));
    mem_to_device_async(c, dst[3]->data, h->labels, (size_t)b * sizeof(int32_t));
}

static void cls_wait(Cls *C, int k)
{
#ifdef CTRAIN_CUDA
    if (C->cuda) CUDA_CHECK(cudaEventSynchronize(C->done[k]));
#else
    (void)C; (void)k;
#endif
}

static void cls_mark(Cls *C, Ctx *c, int k)
{
#ifdef CTRAIN_CUDA
    if (C->cuda) CUDA_CHECK(cudaEventRecord(C->done[k], c->stream));
#else
    (void)C; (void)c; (void)k;
#endif
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
    int k = C->k ^= 1;
    cls_wait(C, k);
    cls_fill(C, k, C->idx, f->batch);
    cls_upload(C, c, k, f->in, f->batch);
    cls_mark(C, c, k);
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
    int k = C->k ^= 1;
    cls_wait(C, k);
    cls_fill(C, k, C->idx, b);
    cls_upload(C, c, k, C->ex, b);
    cls_mark(C, c, k);
    in[0] = tensor_view(c, C->ex[0]->data, DT_I32, 2, (int64_t[]){b, T});
    in[1] = tensor_view(c, C->ex[1]->data, DT_I32, 2, (int64_t[]){b, T});
    in[2] = tensor_view(c, C->ex[2]->data, DT_F32, 2, (int64_t[]){b, T});
    in[3] = tensor_view(c, C->ex[3]->data, DT_I32, 1, (int64_t[]){b});
    *n = b;
    return 1;
}

static double cls_rate(Feed *f) { (void)f; return NAN; }

static void cls_free(Feed *f, Ctx *c)
{
    Cls *C = (Cls *)f->impl;
    ctx_sync(c);
    for (int k = 0; k < 2; k++) {
        mem_host_pinned_free(c, C->host[k].ids);
        mem_host_pinned_free(c, C->host[k].tt);
        mem_host_pinned_free(c, C->host[k].labels);
        mem_host_pinned_free(c, C->host[k].attn);
        mem_host_pinned_free(c, C->host[k].mask_add);
#ifdef CTRAIN_CUDA
        if (C->cuda) CUDA_CHECK(cudaEventDestroy(C->done[k]));
#endif
    }
    for (int i = 0; i < 4; i++) tensor_release(C->ex[i]);
    free(C->perm);
    free(C->idx);
    textcls_free(&C->ds);
    wordpiece_free(&C->wp);
    free(C);
}

int feed_is_cls(const char *data)
{
    return !strcmp(data, "fortunes-cls") || !strncmp(data, "fortunes-cls:", 13);
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
    if (wordpiece_load(&C->wp, s->vocab, WP_UNCASED, err, sizeof err) != 0)
        ct_fatal_hint("check the --vocab path (one token per line)", "%s", err);
    if (C->wp.cls_id < 0 || C->wp.sep_id < 0 || C->wp.pad_id < 0)
        ct_fatal_hint("use a BERT vocabulary ([PAD], [CLS] and [SEP] among its tokens)",
                      "--vocab %s lacks [PAD], [CLS] or [SEP]", s->vocab);
    int topics = s->classes ? s->classes : FEEDCLS_TOPICS;
    if (textcls_load_fortunes(&C->ds, dir, NULL, topics, TEXTCLS_HELD_OUT, err, sizeof err) != 0)
        ct_fatal_hint("apt-get install fortunes, or pass --data fortunes-cls:DIR (a folder of "
                      "fortune files); --classes N picks the N largest topics", "%s", err);
    if (textcls_tokenize(&C->ds, &C->wp, err, sizeof err) != 0)
        ct_fatal_hint("check that --vocab is a WordPiece vocabulary", "%s", err);
    int B = s->batch, E = s->eval_batch, T = s->seq;
    if ((uint32_t)B > C->ds.n_train)
        ct_fatal_hint("pass a smaller --batch", "--batch %d is larger than the %u training examples",
                      B, C->ds.n_train);
    C->T = T;
    C->seed = s->seed;
    C->cuda = c->device == DEV_CUDA;
    size_t maxb = (size_t)(B > E ? B : E), n = maxb * T;
    for (int k = 0; k < 2; k++) {
        C->host[k].ids = (int32_t *)mem_host_pinned(c, n * sizeof(int32_t));
        C->host[k].tt = (int32_t *)mem_host_pinned(c, n * sizeof(int32_t));
        C->host[k].attn = (int32_t *)mem_host_pinned(c, n * sizeof(int32_t));
        C->host[k].mask_add = (float *)mem_host_pinned(c, n * sizeof(float));
        C->host[k].labels = (int32_t *)mem_host_pinned(c, maxb * sizeof(int32_t));
#ifdef CTRAIN_CUDA
        if (C->cuda) CUDA_CHECK(cudaEventCreateWithFlags(&C->done[k], cudaEventDisableTiming));
#endif
    }
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
    f->class_names = (const char *const *)C->ds.topics;
    f->next = cls_next;
    f->data_rate = cls_rate;
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
