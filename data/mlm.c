/* mlm.c — packing and masking of BERT pre-training batches (see mlm.h).
 *
 * Stream arithmetic: document d (tokens [off[d], off[d+1]) of the shard)
 * starts at stream position off[d] + d, since the d documents before it
 * each added one [SEP]; its [SEP] sits at off[d+1] + d. So the document
 * holding stream position p is the last d with off[d] + d <= p: a binary
 * search, and a sequence is filled by walking on from there.
 *
 * Random numbers: word w of the stream for (seed, epoch, seq) is word w%4
 * of Philox4x32-10(counter = (w/4, seq, epoch, MLM_TAG), key = seed). Draw
 * numbering within one sequence: [0, k) pick the k positions (partial
 * Fisher-Yates over the candidates), T + 2j decides position j's fate
 * (mask / random / keep), T + 2j + 1 picks its random token. The synthetic
 * generator uses SYN_TAG for the tokens themselves. Shape letters: B, T.
 */
#include "mlm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shuffle.h"
#include "engine/error.h"
#include "engine/philox.h"

#define MLM_TAG 0x4D4C4D00u /* "MLM" */
#define SYN_TAG 0x53594E00u /* "SYN" */

/* One sequence's random stream, a block of four words cached. */
typedef struct {
    uint64_t seed;
    uint32_t seq, epoch, tag;
    uint32_t block, have; /* cached block index, valid flag */
    uint32_t w[4];
} Rng;

static uint32_t rng_u32(Rng *r, uint32_t i)
{
    if (!r->have || r->block != i >> 2) {
        philox4x32_10(r->w, i >> 2, r->seq, r->epoch, r->tag, (uint32_t)r->seed,
                      (uint32_t)(r->seed >> 32));
        r->block = i >> 2;
        r->have = 1;
    }
    return r->w[i & 3];
}

/* Uniform in [0, n) from a 32-bit draw (multiply-high; bias <= n / 2^32). */
static uint32_t below(uint32_t x, uint32_t n) { return (uint32_t)(((uint64_t)x * n) >> 32); }

static int is_special(const MlmConfig *c, int32_t t)
{
    return t == c->pad_id || t == c->unk_id || t == c->cls_id || t == c->sep_id ||
           t == c->mask_id;
}

/* The r-th id of 0..V-1 that is not one of the five specials. */
static uint32_t nonspecial(const MlmConfig *c, uint32_t r)
{
    int32_t sp[5] = {c->pad_id, c->unk_id, c->cls_id, c->sep_id, c->mask_id};
    for (int i = 1; i < 5; i++) /* sort the five */
        for (int j = i; j > 0 && sp[j - 1] > sp[j]; j--) {
            int32_t t = sp[j];
            sp[j] = sp[j - 1];
            sp[j - 1] = t;
        }
    uint32_t id = r;
    for (int i = 0; i < 5; i++)
        if (sp[i] >= 0 && (uint32_t)sp[i] <= id && (i == 0 || sp[i] != sp[i - 1])) id++;
    return id;
}

static uint32_t n_nonspecial(const MlmConfig *c)
{
    int32_t sp[5] = {c->pad_id, c->unk_id, c->cls_id, c->sep_id, c->mask_id};
    uint32_t n = c->vocab_size;
    for (int i = 0; i < 5; i++) {
        int dup = 0;
        for (int j = 0; j < i; j++) dup |= sp[j] == sp[i];
        if (!dup && sp[i] >= 0 && (uint32_t)sp[i] < c->vocab_size) n--;
    }
    return n;
}

const char *mlm_hint(int status)
{
    switch (status) {
    case MLM_OK: return NULL;
    case MLM_ERR_SHAPE: return "pass --seq 3 or more and --batch 1 or more";
    case MLM_ERR_VOCAB: return "use the vocab.txt the shard was made with, or make the shard "
                               "again with: ctrain shard --corpus DIR --vocab vocab.txt --out FILE";
    case MLM_ERR_SPECIAL: return "use a BERT vocab.txt ([PAD] [UNK] [CLS] [SEP] [MASK] among "
                                 "its lines): ctrain vocab --corpus DIR --size N --out vocab.txt "
                                 "builds one";
    case MLM_ERR_EMPTY: return "make the shard from a corpus with text, with a vocab.txt built "
                               "from it: ctrain vocab, then ctrain shard";
    case MLM_ERR_LIMIT: return "split the corpus into smaller shards, or pass a longer --seq";
    case MLM_ERR_NOMEM: return "free some memory, or use a smaller shard";
    default: return NULL;
    }
}

MlmConfig mlm_config_default(const Wordpiece *wp, int T, int B, uint64_t seed)
{
    MlmConfig c;
    memset(&c, 0, sizeof c);
    c.T = T;
    c.B = B;
    c.seed = seed;
    c.mask_prob = MLM_MASK_PROB;
    c.mask_token_frac = 0.8f;
    c.random_token_frac = 0.1f;
    c.pad_id = wp->pad_id;
    c.unk_id = wp->unk_id;
    c.cls_id = wp->cls_id;
    c.sep_id = wp->sep_id;
    c.mask_id = wp->mask_id;
    c.vocab_size = wp->V;
    return c;
}

int mlm_batch_alloc(MlmBatch *b, int B, int T, int with_f32)
{
    memset(b, 0, sizeof *b);
    size_t n = (size_t)B * (size_t)T;
    b->input_ids = malloc(n * sizeof(int32_t));
    b->token_type_ids = malloc(n * sizeof(int32_t));
    b->attention_mask = malloc(n * sizeof(int32_t));
    b->labels = malloc(n * sizeof(int32_t));
    if (with_f32) b->attention_mask_f32 = malloc(n * sizeof(float));
    b->B = B;
    b->T = T;
    if (!b->input_ids || !b->token_type_ids || !b->attention_mask || !b->labels ||
        (with_f32 && !b->attention_mask_f32)) {
        mlm_batch_free(b);
        return -1;
    }
    return 0;
}

void mlm_batch_free(MlmBatch *b)
{
    free(b->input_ids);
    free(b->token_type_ids);
    free(b->attention_mask);
    free(b->attention_mask_f32);
    free(b->labels);
    memset(b, 0, sizeof *b);
}

/* ---- masking ------------------------------------------------------------- */

int mlm_mask(int32_t *ids, int32_t *labels, int T, const MlmConfig *cfg,
             const uint32_t *rand_ids, uint32_t n_rand, uint64_t epoch, uint64_t seq)
{
    int32_t cand[T > 0 ? T : 1];
    int n = 0;
    for (int t = 0; t < T; t++) {
        labels[t] = MLM_IGNORE_INDEX;
        if (!is_special(cfg, ids[t])) cand[n++] = t;
    }
    if (!n) return 0;
    int k = (int)(cfg->mask_prob * (float)n + 0.5f);
    if (k < 1) k = 1;
    if (k > n) k = n;
    Rng r = {cfg->seed, (uint32_t)seq, (uint32_t)epoch, MLM_TAG, 0, 0, {0}};
    for (int j = 0; j < k; j++) { /* partial Fisher-Yates: cand[0..k) uniform */
        int pick = j + (int)below(rng_u32(&r, (uint32_t)j), (uint32_t)(n - j));
        int32_t t = cand[j];
        cand[j] = cand[pick];
        cand[pick] = t;
    }
    if (!rand_ids) n_rand = n_nonspecial(cfg);
    for (int j = 0; j < k; j++) {
        int pos = cand[j];
        labels[pos] = ids[pos];
        float u = (float)(rng_u32(&r, (uint32_t)(T + 2 * j)) >> 8) * (1.0f / 16777216.0f);
        if (u < cfg->mask_token_frac) {
            ids[pos] = cfg->mask_id;
        } else if (u < cfg->mask_token_frac + cfg->random_token_frac && n_rand) {
            uint32_t x = below(rng_u32(&r, (uint32_t)(T + 2 * j + 1)), n_rand);
            ids[pos] = (int32_t)(rand_ids ? rand_ids[x] : nonspecial(cfg, x));
        }
    }
    return k;
}

int mlm_max_masked(int T, float mask_prob)
{
    int k = (int)(mask_prob * (float)T + 0.5f);   /* mlm_mask's count for T candidates */
    if (k < 1) k = 1;
    return k > T ? T : k;
}

int mlm_labelled_max(const int32_t *labels, int B, int T)
{
    int most = 0;
    for (int b = 0; b < B; b++) {
        int k = 0;
        for (int t = 0; t < T; t++) k += labels[(size_t)b * T + t] != MLM_IGNORE_INDEX;
        if (k > most) most = k;
    }
    return most;
}

long mlm_select_rows(int32_t *rows, int32_t *row_labels, const int32_t *labels, int B, int T,
                     int S)
{
    if (S > T || S < 0) return -1;
    long total = 0;
    for (int b = 0; b < B; b++) {
        const int32_t *lab = labels + (size_t)b * T;
        int32_t *r = rows + (size_t)b * S, *rl = row_labels + (size_t)b * S;
        int j = 0;
        for (int t = 0; t < T; t++) {
            if (lab[t] == MLM_IGNORE_INDEX) continue;
            if (j == S) return -1;
            r[j] = (int32_t)((size_t)b * T + t);
            rl[j++] = lab[t];
        }
        total += j;
        for (int t = 0; j < S; t++)   /* padding: unlabelled positions, S <= T keeps them in range */
            if (lab[t] == MLM_IGNORE_INDEX) {
                r[j] = (int32_t)((size_t)b * T + t);
                rl[j++] = MLM_IGNORE_INDEX;
            }
    }
    return total;
}

/* ---- packing ------------------------------------------------------------- */

int mlm_pack(const MlmBatcher *mb, int32_t *ids, int32_t *attn, uint64_t seq)
{
    const TextShard *s = mb->shard;
    const MlmConfig *c = &mb->cfg;
    int T = c->T, t = 0;
    ids[t] = c->cls_id;
    attn[t++] = 1;
    uint64_t p = seq * (uint64_t)(T - 1), end = p + (uint64_t)(T - 1);
    if (end > mb->stream_len) end = mb->stream_len;
    if (p < end) {
        uint32_t lo = 0, hi = s->n_docs - 1; /* last d with off[d] + d <= p */
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo + 1) / 2;
            if (s->offsets[mid] + mid <= p) lo = mid;
            else hi = mid - 1;
        }
        uint32_t d = lo;
        while (p < end) {
            uint64_t q = p - (s->offsets[d] + d), len = s->offsets[d + 1] - s->offsets[d];
            if (q < len) {
                ids[t] = (int32_t)shard_token(s, s->offsets[d] + q);
            } else { /* the document's [SEP] */
                ids[t] = c->sep_id;
                d++;
            }
            attn[t++] = 1;
            p++;
        }
    }
    int real = t;
    for (; t < T; t++) {
        ids[t] = c->pad_id;
        attn[t] = 0;
    }
    return real;
}

/* ---- the batcher --------------------------------------------------------- */

int mlm_init(MlmBatcher *mb, const TextShard *shard, const MlmConfig *cfg, const Wordpiece *wp,
             char *err, size_t errlen)
{
    memset(mb, 0, sizeof *mb);
    const MlmConfig *c = cfg;
    if (c->T < 3 || c->B < 1)
        return ct_fail(err, errlen, MLM_ERR_SHAPE, "MLM batches need T >= 3 and B >= 1 (got "
                       "T=%d, B=%d)", c->T, c->B);
    if (c->vocab_size != shard->vocab_size)
        return ct_fail(err, errlen, MLM_ERR_VOCAB, "the shard was tokenized with a vocab of %u "
                       "tokens, the MLM config has %u", shard->vocab_size, c->vocab_size);
    if (wp && wp->V != c->vocab_size)
        return ct_fail(err, errlen, MLM_ERR_VOCAB, "the vocab has %u tokens, the MLM config %u",
                       wp->V, c->vocab_size);
    int32_t sp[5] = {c->pad_id, c->unk_id, c->cls_id, c->sep_id, c->mask_id};
    static const char *const names[5] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    char missing[64] = "";
    int nmiss = 0;
    for (int i = 0; i < 5; i++)
        if (sp[i] < 0 || (uint32_t)sp[i] >= c->vocab_size) {
            size_t l = strlen(missing);
            snprintf(missing + l, sizeof missing - l, "%s%s", nmiss++ ? ", " : "", names[i]);
        }
    if (nmiss)
        return ct_fail(err, errlen, MLM_ERR_SPECIAL, "masked-LM training needs the special "
                       "token%s %s, which the vocab lacks", nmiss > 1 ? "s" : "", missing);
    if (!(c->mask_prob > 0 && c->mask_prob <= 1) || c->mask_token_frac < 0 ||
        c->random_token_frac < 0 || c->mask_token_frac + c->random_token_frac > 1.0001f)
        return ct_fail(err, errlen, MLM_ERR_CONFIG, "MLM masking rates out of range: mask_prob "
                       "%g, [MASK] %g, random %g", (double)c->mask_prob,
                       (double)c->mask_token_frac, (double)c->random_token_frac);
    if (!shard->n_docs || !shard->n_tokens)
        return ct_fail(err, errlen, MLM_ERR_EMPTY, "the shard holds no tokens (%u documents): "
                       "nothing to mask", shard->n_docs);
    uint64_t k = 0;
    while (k < shard->n_tokens && is_special(c, (int32_t)shard_token(shard, k))) k++;
    if (k == shard->n_tokens)
        return ct_fail(err, errlen, MLM_ERR_EMPTY, "the shard's %llu tokens are all [UNK] or "
                       "special tokens: nothing to mask (training would report a loss of 0)",
                       (unsigned long long)shard->n_tokens);
    mb->shard = shard;
    mb->cfg = *c;
    mb->rank = 0;
    mb->world = 1;
    mb->stream_len = shard->n_tokens + shard->n_docs;
    mb->n_seq = (mb->stream_len + (uint64_t)(c->T - 2)) / (uint64_t)(c->T - 1);
    if (mb->n_seq > UINT32_MAX)
        return ct_fail(err, errlen, MLM_ERR_LIMIT, "the shard packs into %llu sequences, more "
                       "than an epoch permutation holds (%u)", (unsigned long long)mb->n_seq,
                       UINT32_MAX);
    mb->n_train = mb->n_seq;
    mb->n_local = mb->n_seq;
    mb->rand_ids = malloc(c->vocab_size * sizeof *mb->rand_ids);
    mb->perm = malloc(mb->n_seq * sizeof *mb->perm);
    if (!mb->rand_ids || !mb->perm) {
        mlm_free(mb);
        return ct_fail(err, errlen, MLM_ERR_NOMEM, "out of memory for the MLM batcher");
    }
    for (uint32_t id = 0; id < c->vocab_size; id++) {
        if (is_special(c, (int32_t)id)) continue;
        if (wp) { /* "[unused0]" and the like: special-looking, never a real word */
            const char *t = wordpiece_token(wp, (int32_t)id);
            size_t l = strlen(t);
            if (l >= 3 && t[0] == '[' && t[l - 1] == ']') continue;
        }
        mb->rand_ids[mb->n_rand++] = id;
    }
    return 0;
}

void mlm_free(MlmBatcher *mb)
{
    free(mb->rand_ids);
    free(mb->perm);
    memset(mb, 0, sizeof *mb);
}

void mlm_set_shard(MlmBatcher *mb, uint32_t rank, uint32_t world)
{
    if (world < 1) world = 1;
    CT_ASSERT(rank < world, "mlm_set_shard: rank %u of %u", rank, world);
    uint64_t k = shuffle_shard_count((uint32_t)mb->n_train, world);
    if (k == 0)
        ct_fatal_hint("use a longer corpus, a shorter --seq or fewer GPUs",
                      "the shard packs into %llu training sequences, fewer than the %u ranks",
                      (unsigned long long)mb->n_train, world);
    mb->rank = rank;
    mb->world = world;
    mb->n_local = k;
    mb->perm_valid = 0;
}

uint64_t mlm_batches_per_epoch(const MlmBatcher *mb)
{
    return (mb->n_local + (uint64_t)mb->cfg.B - 1) / (uint64_t)mb->cfg.B;
}

/* Row b of out: sequence seq packed and masked as in `epoch`. */
static void batch_row(const MlmBatcher *mb, MlmBatch *out, int b, uint64_t seq, uint64_t epoch)
{
    const MlmConfig *c = &mb->cfg;
    const int T = c->T;
    int32_t *ids = out->input_ids + (size_t)b * T, *attn = out->attention_mask + (size_t)b * T;
    mlm_pack(mb, ids, attn, seq);
    mlm_mask(ids, out->labels + (size_t)b * T, T, c, mb->rand_ids, mb->n_rand, epoch, seq);
    memset(out->token_type_ids + (size_t)b * T, 0, (size_t)T * sizeof(int32_t));
    if (out->attention_mask_f32)
        for (int t = 0; t < T; t++) out->attention_mask_f32[(size_t)b * T + t] = (float)attn[t];
}

void mlm_batch(MlmBatcher *mb, MlmBatch *out, uint64_t epoch, uint64_t step)
{
    const MlmConfig *c = &mb->cfg;
    if (!mb->perm_valid || mb->perm_epoch != epoch) {
        shuffle_perm(mb->perm, (uint32_t)mb->n_train, c->seed, epoch);
        shuffle_shard(mb->perm, (uint32_t)mb->n_train, mb->rank, mb->world);
        mb->perm_epoch = epoch;
        mb->perm_valid = 1;
    }
    for (int b = 0; b < c->B; b++)
        batch_row(mb, out, b, mb->perm[(step * (uint64_t)c->B + (uint64_t)b) % mb->n_local], epoch);
}

void mlm_hold_out(MlmBatcher *mb, uint64_t n)
{
    CT_ASSERT(n < mb->n_seq && mb->world == 1, "mlm_hold_out: %llu of %llu sequences (world %u)",
              (unsigned long long)n, (unsigned long long)mb->n_seq, mb->world);
    mb->n_train = mb->n_seq - n;
    mb->n_local = mb->n_train;
    mb->perm_valid = 0;
}

uint64_t mlm_held_out_count(uint64_t n_seq)
{
    if (n_seq < 100) return 0;
    const uint64_t n = (n_seq + 99) / 100;
    return n > 10000 ? 10000 : n;
}

void mlm_eval_batch(const MlmBatcher *mb, MlmBatch *out, uint64_t first, int n)
{
    const MlmConfig *c = &mb->cfg;
    CT_ASSERT(n >= 1 && n <= c->B && mb->n_train + first + (uint64_t)n <= mb->n_seq,
              "mlm_eval_batch: held-out sequences %llu + %d past the %llu held out",
              (unsigned long long)first, n, (unsigned long long)(mb->n_seq - mb->n_train));
    for (int b = 0; b < n; b++)
        batch_row(mb, out, b, mb->n_train + first + (uint64_t)b, MLM_EVAL_EPOCH);
}

void mlm_synthetic_batch(MlmBatch *out, const MlmConfig *cfg, uint64_t step)
{
    mlm_synthetic_rows(out, cfg, step, 0);
}

void mlm_synthetic_rows(MlmBatch *out, const MlmConfig *cfg, uint64_t step, uint32_t first_row)
{
    int T = cfg->T;
    uint32_t nr = n_nonspecial(cfg);
    for (int b = 0; b < out->B; b++) {
        int32_t *ids = out->input_ids + (size_t)b * T;
        uint32_t row = first_row + (uint32_t)b;   /* the row's draws depend on its global index */
        Rng r = {cfg->seed, row, (uint32_t)step, SYN_TAG, 0, 0, {0}};
        ids[0] = cfg->cls_id;
        for (int t = 1; t < T - 1; t++)
            ids[t] = (int32_t)nonspecial(cfg, below(rng_u32(&r, (uint32_t)t), nr ? nr : 1));
        ids[T - 1] = cfg->sep_id;
        mlm_mask(ids, out->labels + (size_t)b * T, T, cfg, NULL, 0, step, (uint64_t)row);
        for (int t = 0; t < T; t++) {
            out->token_type_ids[(size_t)b * T + t] = 0;
            out->attention_mask[(size_t)b * T + t] = 1;
            if (out->attention_mask_f32) out->attention_mask_f32[(size_t)b * T + t] = 1.0f;
        }
    }
}
