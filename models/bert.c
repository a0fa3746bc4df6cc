/* bert.c — BERT encoder, MLM head and sequence-classification head:
 * registry with Hugging Face names, HF init, forward. Backward needs no code
 * here: every op records its own node; an encoder layer can be a recompute
 * segment. */
#include "bert.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine/error.h"
#include "engine/mem.h"
#include "engine/settings.h"
#include "ops/attention.h"
#include "ops/autocast.h"
#include "ops/dropout.h"
#include "ops/embedding.h"
#include "ops/gather.h"
#include "ops/layernorm.h"
#include "ops/linear_fp8.h"
#include "ops/ops.h"
#include "ops/permute.h"

typedef struct Linear { int w, b, fp8; } Linear;   /* fp8: its recipe slot, -1: none */
typedef struct LN { int g, b; } LN;

typedef struct BertLayer {
    Linear q, k, v, o, inter, out;
    LN ln_attn, ln_out;
    Tensor *qkv_w, *qkv_b;   /* Wq Wk Wv and bq bk bv joined (engine/params.h), once asked */
    int qkv_apart;           /* 1: they do not lie back to back (params_join said NULL) */
} BertLayer;

typedef struct Bert Bert;
typedef struct BertIndices {   /* position ids [B, T] and [CLS] rows [B] of one (B, T) */
    int64_t B, T;
    Tensor *positions, *cls_rows;
} BertIndices;

/* What one recomputed encoder layer needs besides its input. */
typedef struct LayerArg {
    Model *m;
    int l;
    Tensor *mask;       /* [B, T] additive, alive for the whole step */
} LayerArg;

struct Bert {
    BertConfig cfg;
    int word, pos, type;
    LN ln_emb;
    BertLayer *layers;
    Linear transform, pooler, classifier;   /* MLM transform / pooler + classifier */
    LN ln_transform;
    int pred_bias;
    LayerArg *args;                         /* one per layer (recompute) */
    BertIndices *indices;                   /* index tensors, one set a (B, T) seen */
    int n_indices;
    Tensor *positions, *cls_rows;           /* the set of the current forward's (B, T) */
};

/* Layers, width, heads and intermediate width of each size, in ModelKind's
 * order from MODEL_BERT_TINY (models/model.h). */
static const struct { int L, D, H, I; } bert_sizes[] = {
    {2, 128, 2, 512},   {4, 256, 4, 1024},   {4, 512, 8, 2048},
    {8, 512, 8, 2048},  {12, 768, 12, 3072}, {24, 1024, 16, 4096},
};

int bert_config_kind(BertConfig *cfg, ModelKind kind, int vocab)
{
    if (!model_kind_is_bert(kind)) return -1;
    int i = (int)kind - MODEL_BERT_TINY;
    memset(cfg, 0, sizeof *cfg);
    cfg->vocab = vocab > 0 ? vocab : 30522;
    cfg->layers = bert_sizes[i].L;
    cfg->hidden = bert_sizes[i].D;
    cfg->heads = bert_sizes[i].H;
    cfg->intermediate = bert_sizes[i].I;
    cfg->max_pos = 512;
    cfg->type_vocab = 2;
    cfg->ln_eps = 1e-12f;
    cfg->hidden_dropout = 0.1f;
    cfg->attn_dropout = 0.1f;
    cfg->head = BERT_MLM;
    cfg->classes = 2;
    return 0;
}

int bert_config_named(BertConfig *cfg, const char *name, int vocab)
{
    int k = model_kind_parse(name);
    if (k < 0) {   /* the size alone: "tiny" */
        char full[40];
        snprintf(full, sizeof full, "bert-%s", name);
        k = model_kind_parse(full);
    }
    return k < 0 ? -1 : bert_config_kind(cfg, (ModelKind)k, vocab);
}

/* ---- registry ---- */

static Linear add_linear(ParamSet *ps, const char *prefix, int out, int in)
{
    char n[160];
    Linear l;
    snprintf(n, sizeof n, "%s.weight", prefix);
    l.w = params_add(ps, n, 2, (int64_t[]){out, in}, INIT_NORMAL, 0.02f, 1);
    snprintf(n, sizeof n, "%s.bias", prefix);
    l.b = params_add(ps, n, 1, (int64_t[]){out}, INIT_ZERO, 0, 0);   /* no decay on biases */
    l.fp8 = -1;
    return l;
}

static LN add_ln(ParamSet *ps, const char *prefix, int d)
{
    char n[160];
    LN l;
    snprintf(n, sizeof n, "%s.weight", prefix);
    l.g = params_add(ps, n, 1, (int64_t[]){d}, INIT_ONE, 0, 0);      /* no decay on LayerNorm */
    snprintf(n, sizeof n, "%s.bias", prefix);
    l.b = params_add(ps, n, 1, (int64_t[]){d}, INIT_ZERO, 0, 0);
    return l;
}

#define P(i) (m->params.p[(i)].t)

/* FP8 amax history length: a scale follows the largest amax of the last 16
 * steps (Transformer Engine's recipe, ops/fp8.h), margin 0. */
#define BERT_FP8_HISTORY 16

/* --precision fp8: the encoder's six Linear layers a layer in FP8
 * (ops/linear_fp8.h); the embeddings, attention, layer norms, the heads and
 * the loss stay in bf16 / f32 (docs/how-it-works.md says why). */
static Tensor *linear(Ctx *c, Model *m, const Linear *l, Tensor *x)
{
    if (l->fp8 >= 0 && c->fp8 && m->fp8)
        return op_linear_fp8(c, x, P(l->w), P(l->b), m->fp8, l->fp8);
    return op_linear(c, x, P(l->w), P(l->b));
}

/* linear(x), where other Linear layers read the same x: under fp8 they share
 * one cast of it (ops/linear_fp8.h, Fp8SharedX). */
static Tensor *linear_x(Ctx *c, Model *m, const Linear *l, Tensor *x, Fp8SharedX *xs)
{
    if (l->fp8 >= 0 && c->fp8 && m->fp8)
        return op_linear_fp8_shared(c, x, P(l->w), P(l->b), m->fp8, l->fp8, xs);
    return op_linear(c, x, P(l->w), P(l->b));
}

/* out(GELU(inter(x))): under fp8 one FP8 op with GELU in the second Linear's
 * cast and GELU's backward in the first's gradient cast; else the intermediate Linear and GELU as one op (op_linear_act:
 * its backward can sum the bias gradient in GELU's pass) and the output
 * Linear. */
static Tensor *feed_forward(Ctx *c, Model *m, const BertLayer *L, Tensor *x)
{
    if (L->inter.fp8 >= 0 && L->out.fp8 >= 0 && c->fp8 && m->fp8)
        /* neither GELU's output nor its gradient is stored */
        return op_ffn_fp8(c, x, P(L->inter.w), P(L->inter.b), P(L->out.w), P(L->out.b), m->fp8,
                          L->inter.fp8, L->out.fp8);
    Tensor *g = op_linear_act(c, x, P(L->inter.w), P(L->inter.b), ACT_GELU);
    Tensor *y = op_linear(c, g, P(L->out.w), P(L->out.b));
    tensor_release(g);
    return y;
}

static Tensor *layernorm(Ctx *c, Model *m, const LN *l, Tensor *x, float eps)
{
    return op_layernorm(c, x, P(l->g), P(l->b), eps);
}

/* x [B, T, D] -> [B, T, H, Dh]: a view, the layout op_attention_bthd takes
 * (no transpose into [B, H, T, Dh]) */
static Tensor *split_heads(Ctx *c, Tensor *x, int H)
{
    int64_t B = x->shape[0], T = x->shape[1], D = x->shape[2];
    return op_reshape(c, x, 4, (int64_t[]){B, T, H, D / H});
}

/* [B, T, H, Dh] -> [B, T, D] */
static Tensor *merge_heads(Ctx *c, Tensor *x)
{
    int64_t B = x->shape[0], T = x->shape[1], H = x->shape[2], Dh = x->shape[3];
    return op_reshape(c, x, 3, (int64_t[]){B, T, H * Dh});
}

/* y = LayerNorm(x + dropout(z)) (ops/layernorm.h op_add_norm); consumes z.
 * next: the recipe slot of the FP8 Linear that reads y first (-1: none); under
 * fp8 with CTRAIN_FP8_NORM_CODES the forward makes y's codes for it
 * (op_add_norm_fp8_codes), so that Linear does not cast y. */
static Tensor *add_norm(Ctx *c, Model *m, const LN *ln, Tensor *x, Tensor *z, float p, float eps,
                        int next)
{
    Tensor *y = next >= 0 && c->fp8 && m->fp8 && setting_switch(SET_FP8_NORM_CODES)
                    ? op_add_norm_fp8_codes(c, x, z, P(ln->g), P(ln->b), p, eps, m->fp8, next)
                    : op_add_norm(c, x, z, P(ln->g), P(ln->b), p, eps);
    tensor_release(z);
    return y;
}

/* The self-attention from one projection (CTRAIN_QKV_PROJ, on by default): qkv = x Wqkv^T
 * + bqkv with the layer's three Linears joined, read in place by the
 * attention (ops/attention_qkv_op.c). Under fp8 with CTRAIN_QKV_PROJ_FP8 (on):
 * one FP8 Linear in q's recipe slots (one scale for Wqkv, one for dqkv; k's
 * and v's slots stay unused at scale 1). NULL where it does not apply (the
 * switch off; no cuDNN plan for the shape; parts not back to back), and the
 * caller keeps three projections. */
static Tensor *qkv_attention(Ctx *c, Model *m, BertLayer *L, Tensor *x, Tensor *mask, float p)
{
    const BertConfig *cfg = &((Bert *)m->impl)->cfg;
    const int fp8 = c->fp8 && m->fp8 && L->q.fp8 >= 0;
    if (L->qkv_apart || !setting_switch(fp8 ? SET_QKV_PROJ_FP8 : SET_QKV_PROJ) || x->ndim != 3)
        return NULL;
    const int64_t B = x->shape[0], T = x->shape[1], Dh = cfg->hidden / cfg->heads;
    if (!op_attention_qkv_supported(c, autocast_dtype(c, x->dtype), B, T, cfg->heads, Dh, mask,
                                    p))
        return NULL;
    ParamSet *ps = &m->params;
    if (!params_join_current(ps, L->qkv_w, L->q.w) || !params_join_current(ps, L->qkv_b, L->q.b)) {
        params_join_free(L->qkv_w);
        params_join_free(L->qkv_b);
        const int w[3] = {L->q.w, L->k.w, L->v.w}, bias[3] = {L->q.b, L->k.b, L->v.b};
        L->qkv_w = params_join(ps, w, 3);
        L->qkv_b = params_join(ps, bias, 3);
        L->qkv_apart = !L->qkv_w || !L->qkv_b;
    }
    if (L->qkv_apart) return NULL;
    Tensor *qkv = fp8 ? op_linear_fp8(c, x, L->qkv_w, L->qkv_b, m->fp8, L->q.fp8)
                      : op_linear(c, x, L->qkv_w, L->qkv_b);
    Tensor *ctxh = op_attention_qkv(c, qkv, cfg->heads, mask, p);
    tensor_release(qkv);
    return ctxh;
}

/* One encoder layer: a SegmentFn, so it can be recomputed. */
static Tensor *layer_forward(Ctx *c, void *argp, Tensor *x)
{
    LayerArg *a = (LayerArg *)argp;
    Model *m = a->m;
    Bert *b = (Bert *)m->impl;
    const BertConfig *cfg = &b->cfg;
    BertLayer *L = &b->layers[a->l];
    const float pa = m->training ? cfg->attn_dropout : 0.0f;
    Tensor *ctxh = qkv_attention(c, m, L, x, a->mask, pa);
    if (!ctxh) {
        Fp8SharedX xs = {0};   /* under fp8 q, k and v take one cast of x */
        Tensor *q0 = linear_x(c, m, &L->q, x, &xs), *k0 = linear_x(c, m, &L->k, x, &xs);
        Tensor *v0 = linear_x(c, m, &L->v, x, &xs);
        fp8_shared_x_release(&xs);
        Tensor *q = split_heads(c, q0, cfg->heads), *k = split_heads(c, k0, cfg->heads);
        Tensor *v = split_heads(c, v0, cfg->heads);
        tensor_release(q0); tensor_release(k0); tensor_release(v0);
        ctxh = op_attention_bthd(c, q, k, v, a->mask, pa);
        tensor_release(q); tensor_release(k); tensor_release(v);
    }
    Tensor *ctx = merge_heads(c, ctxh);
    tensor_release(ctxh);
    float p = m->training ? cfg->hidden_dropout : 0.0f;
    /* the FP8 Linears that read each add_norm's output first: the feed-forward
     * block's first, then the next layer's q (k and v share its codes) */
    const int ffn_in = L->inter.fp8 >= 0 && L->out.fp8 >= 0 ? L->inter.fp8 : -1;
    const int next_in = a->l + 1 < cfg->layers ? b->layers[a->l + 1].q.fp8 : -1;
    Tensor *attn = add_norm(c, m, &L->ln_attn, x, linear(c, m, &L->o, ctx), p, cfg->ln_eps,
                            ffn_in);
    tensor_release(ctx);
    Tensor *y = add_norm(c, m, &L->ln_out, attn, feed_forward(c, m, L, attn), p, cfg->ln_eps,
                         next_in);
    tensor_release(attn);
    return y;
}

/* Index tensors that depend only on (B, T): position ids and [CLS] rows.
 * Every set made is kept while the model lives: a step captured into a CUDA
 * graph reads its set's address at each replay, and an evaluation between
 * replays (--eval-every, its last batch shorter) must not free it. */
static void bert_cache_indices(Ctx *c, Bert *b, int64_t B, int64_t T)
{
    for (int i = 0; i < b->n_indices; i++)
        if (b->indices[i].B == B && b->indices[i].T == T) {
            b->positions = b->indices[i].positions;
            b->cls_rows = b->indices[i].cls_rows;
            return;
        }
    BertIndices *grown = realloc(b->indices, (size_t)(b->n_indices + 1) * sizeof *grown);
    if (!grown) ct_fatal("bert: out of host memory");
    b->indices = grown;
    int32_t *pos = malloc((size_t)(B * T) * sizeof(int32_t)), *cls = malloc((size_t)B * sizeof(int32_t));
    if (!pos || !cls) ct_fatal("bert: out of host memory");
    for (int64_t i = 0; i < B; i++) {
        cls[i] = (int32_t)(i * T);
        for (int64_t t = 0; t < T; t++) pos[i * T + t] = (int32_t)t;
    }
    BertIndices *e = &b->indices[b->n_indices++];
    e->B = B;
    e->T = T;
    e->positions = tensor_from_host(c, pos, DT_I32, 2, (int64_t[]){B, T});
    e->cls_rows = tensor_from_host(c, cls, DT_I32, 1, (int64_t[]){B});
    free(pos);
    free(cls);
    b->positions = e->positions;
    b->cls_rows = e->cls_rows;
}

/* ids, token types, additive mask -> final hidden states [B, T, D] */
static Tensor *bert_encode(Ctx *c, Model *m, Tensor *ids, Tensor *tt, Tensor *mask)
{
    Bert *b = (Bert *)m->impl;
    const BertConfig *cfg = &b->cfg;
    char d[96];
    if (ids->ndim != 2 || ids->dtype != DT_I32)
        ct_fatal("bert: input ids %s must be i32 [batch, tokens]", tensor_desc(d, sizeof d, ids));
    int64_t B = ids->shape[0], T = ids->shape[1];
    if (T > cfg->max_pos)
        ct_fatal_hint("pass a shorter --seq", "bert: %lld tokens exceed the %d positions",
                      (long long)T, cfg->max_pos);
    bert_cache_indices(c, b, B, T);
    Tensor *we = op_embedding(c, P(b->word), ids);
    Tensor *pe = op_embedding(c, P(b->pos), b->positions);
    Tensor *te = op_embedding(c, P(b->type), tt);
    Tensor *s1 = op_add(c, we, pe);
    tensor_release(we); tensor_release(pe);
    Tensor *s2 = op_add(c, s1, te);
    tensor_release(s1); tensor_release(te);
    Tensor *e = layernorm(c, m, &b->ln_emb, s2, cfg->ln_eps);
    tensor_release(s2);
    Tensor *h = op_dropout(c, e, m->training ? cfg->hidden_dropout : 0.0f);
    tensor_release(e);
    for (int l = 0; l < cfg->layers; l++) {
        b->args[l].m = m;
        b->args[l].l = l;
        b->args[l].mask = mask;
        Tensor *y = recompute_wants(&cfg->recompute, l)
                        ? recompute_segment(c, layer_forward, &b->args[l], h)
                        : layer_forward(c, &b->args[l], h);
        tensor_release(h);
        h = y;
    }
    return h;
}

/* MLM logits [M, V] of the M rows the loss scores: h [B, T, D] viewed as
 * [B*T, D], rows i32 [M] (data/mlm.h: the masked positions, padded). Every
 * op of the head is row-wise, so running it on the gathered rows gives those
 * rows' logits exactly; the rows left out have label -100 and would add
 * nothing to the loss or to any gradient (backward: the gather scatters
 * the rows' gradients back, zero elsewhere). The head costs D^2 + V D
 * multiply-adds a row (bert-base: 24 M, next to 85 M for a token's pass
 * through the encoder): on every token it would be ~19% of the step's
 * matmul work, 85% of it for rows the loss ignores.
 * pad: the logits' rows padded to a multiple of 8 (op_linear_pad: 30,522
 * words stored 30,528 apart, the padding softmax's exact zeros), so that
 * the vocabulary GEMMs run cuBLASLt's 16-byte-aligned kernels. */
static Tensor *mlm_logits(Ctx *c, Model *m, Tensor *h, Tensor *rows, int pad)
{
    Bert *b = (Bert *)m->impl;
    Tensor *hm = op_gather_rows(c, h, rows);
    Tensor *t = linear(c, m, &b->transform, hm);
    tensor_release(hm);
    Tensor *g = op_gelu(c, t);
    tensor_release(t);
    Tensor *n = layernorm(c, m, &b->ln_transform, g, b->cfg.ln_eps);
    tensor_release(g);
    /* decoder tied to the word embeddings [V, D], with its own bias */
    const int V = b->cfg.vocab;
    Tensor *z = pad ? op_linear_pad(c, n, P(b->word), P(b->pred_bias), (V + 7) / 8 * 8)
                    : op_linear(c, n, P(b->word), P(b->pred_bias));
    tensor_release(n);
    return z;
}

/* classifier logits [B, classes] from the [CLS] rows */
static Tensor *cls_logits(Ctx *c, Model *m, Tensor *h)
{
    Bert *b = (Bert *)m->impl;
    Tensor *first = op_gather_rows(c, h, b->cls_rows);
    Tensor *p = linear(c, m, &b->pooler, first);
    tensor_release(first);
    Tensor *t = op_tanh(c, p);
    tensor_release(p);
    Tensor *dr = op_dropout(c, t, m->training ? b->cfg.hidden_dropout : 0.0f);
    tensor_release(t);
    Tensor *z = linear(c, m, &b->classifier, dr);
    tensor_release(dr);
    return z;
}

static Tensor *bert_loss(Ctx *c, Model *m, Tensor *const *in, float smoothing, Tensor **logits)
{
    Bert *b = (Bert *)m->impl;
    int mlm = b->cfg.head == BERT_MLM;
    Tensor *labels = in[mlm ? 4 : 3];
    if (mlm) {
        char dr[96], dl[96];
        if (in[3]->dtype != DT_I32 || labels->dtype != DT_I32 || in[3]->ndim != 1 ||
            in[3]->numel != labels->numel)
            ct_fatal("bert MLM: masked rows %s and their labels %s must be i32 [M] alike",
                     tensor_desc(dr, sizeof dr, in[3]), tensor_desc(dl, sizeof dl, labels));
    }
    Tensor *h = bert_encode(c, m, in[0], in[1], in[2]);
    /* padded logits only where nothing but the loss reads them: on CUDA, no
     * label smoothing (its mean over the classes would count the padding),
     * no logits asked for (evaluation reads every column) */
    const int pad = mlm && c->device == DEV_CUDA && smoothing == 0.0f && !logits &&
                    b->cfg.vocab % 8 && setting_switch(SET_LOGITS_PAD);
    Tensor *z = mlm ? mlm_logits(c, m, h, in[3], pad) : cls_logits(c, m, h);
    tensor_release(h);
    Tensor *loss = op_cross_entropy(c, z, labels, -100, smoothing);
    if (logits) *logits = z;
    else tensor_release(z);
    return loss;
}

static void bert_free_impl(Model *m)
{
    Bert *b = (Bert *)m->impl;
    for (int i = 0; i < b->n_indices; i++) {
        tensor_release(b->indices[i].positions);
        tensor_release(b->indices[i].cls_rows);
    }
    free(b->indices);
    for (int l = 0; l < b->cfg.layers; l++) {
        params_join_free(b->layers[l].qkv_w);
        params_join_free(b->layers[l].qkv_b);
    }
    free(b->layers);
    free(b->args);
    free(b);
    m->impl = NULL;
}

void bert_create(Model *m, Ctx *c, const BertConfig *cfg, uint64_t seed)
{
    if (cfg->hidden % cfg->heads)
        ct_fatal("bert: hidden size %d is not a multiple of %d heads", cfg->hidden, cfg->heads);
    Bert *b = (Bert *)calloc(1, sizeof *b);
    if (!b) ct_fatal("out of host memory");
    b->cfg = *cfg;
    memset(m, 0, sizeof *m);
    ParamSet *ps = &m->params;
    params_init(ps);
    int D = cfg->hidden;
    b->word = params_add(ps, "bert.embeddings.word_embeddings.weight", 2,
                         (int64_t[]){cfg->vocab, D}, INIT_NORMAL, 0.02f, 1);
    ps->p[b->word].lookup = 1;   /* train/parallel/dist.c: CTRAIN_DIST_SPARSE_EMB */
    b->pos = params_add(ps, "bert.embeddings.position_embeddings.weight", 2,
                        (int64_t[]){cfg->max_pos, D}, INIT_NORMAL, 0.02f, 1);
    b->type = params_add(ps, "bert.embeddings.token_type_embeddings.weight", 2,
                         (int64_t[]){cfg->type_vocab, D}, INIT_NORMAL, 0.02f, 1);
    b->ln_emb = add_ln(ps, "bert.embeddings.LayerNorm", D);
    b->layers = (BertLayer *)calloc((size_t)cfg->layers, sizeof *b->layers);
    b->args = (LayerArg *)calloc((size_t)cfg->layers, sizeof *b->args);
    for (int l = 0; l < cfg->layers; l++) {
        char p[128];
        BertLayer *L = &b->layers[l];
#define PFX(s) (snprintf(p, sizeof p, "bert.encoder.layer.%d.%s", l, s), p)
        L->q = add_linear(ps, PFX("attention.self.query"), D, D);
        L->k = add_linear(ps, PFX("attention.self.key"), D, D);
        L->v = add_linear(ps, PFX("attention.self.value"), D, D);
        L->o = add_linear(ps, PFX("attention.output.dense"), D, D);
        L->ln_attn = add_ln(ps, PFX("attention.output.LayerNorm"), D);
        L->inter = add_linear(ps, PFX("intermediate.dense"), cfg->intermediate, D);
        L->out = add_linear(ps, PFX("output.dense"), D, cfg->intermediate);
        L->ln_out = add_ln(ps, PFX("output.LayerNorm"), D);
#undef PFX
        Linear *fp8[6] = {&L->q, &L->k, &L->v, &L->o, &L->inter, &L->out};
        for (int k = 0; k < 6; k++) fp8[k]->fp8 = 6 * l + k;
    }
    if (cfg->head == BERT_MLM) {
        b->transform = add_linear(ps, "cls.predictions.transform.dense", D, D);
        b->ln_transform = add_ln(ps, "cls.predictions.transform.LayerNorm", D);
        b->pred_bias = params_add(ps, "cls.predictions.bias", 1, (int64_t[]){cfg->vocab}, INIT_ZERO, 0, 0);
        snprintf(m->name, sizeof m->name, "bert-mlm");
        m->classes = cfg->vocab;
    } else {
        b->pooler = add_linear(ps, "bert.pooler.dense", D, D);
        b->classifier = add_linear(ps, "classifier", cfg->classes, D);
        snprintf(m->name, sizeof m->name, "bert-cls");
        m->classes = cfg->classes;
    }
    m->impl = b;
    m->training = 1;
    m->loss = bert_loss;
    m->n_inputs = cfg->head == BERT_MLM ? 5 : 4;
    m->free_impl = bert_free_impl;
    params_alloc(ps, c, seed);
    if (c->fp8) m->fp8 = fp8_recipe_new(c, 6 * cfg->layers, BERT_FP8_HISTORY, 0);
}

double bert_train_flops_per_seq(const BertConfig *cfg, int T, double head_rows)
{
    double D = cfg->hidden, I = cfg->intermediate, L = cfg->layers, V = cfg->vocab;
    /* matmul multiply-adds per token: 4 D^2 (q, k, v, o) + 2 D I a layer */
    double per_token = L * (4 * D * D + 2 * D * I);
    /* per head row: MLM transform D^2 + decoder V D; classifier: pooler D^2
     * + classifier classes x D */
    double per_head_row = D * D + (cfg->head == BERT_MLM ? V : cfg->classes) * D;
    double attn = L * 2.0 * 2.0 * T * D;   /* QK^T and PV: T D multiply-adds per token each */
    return 6.0 * (T * per_token + head_rows * per_head_row) + 3.0 * T * attn;
}
