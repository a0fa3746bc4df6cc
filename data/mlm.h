/* mlm.h — masked-language-model batches for BERT pre-training, from a
 * token shard (data/text_shards.h) or synthetic.
 *
 * Shape letters: B sequences a batch, T tokens a sequence, V vocab size.
 *
 * Packing. The shard's documents, in order, make one stream in which each
 * document is followed by [SEP]:  d0 [SEP] d1 [SEP] d2 [SEP] ...
 * Sequence i is [CLS] then stream positions [i (T-1), (i+1)(T-1)): so every
 * sequence but the last is full, documents continue across sequence
 * boundaries (a long one spans several), and the last is padded with
 * [PAD]. n_seq = ceil(stream length / (T-1)). A sequence is a pure function
 * of its index, so any one can be built alone (random access, resume).
 * Single segment: token_type_ids are all 0 and there is no next-sentence
 * task (RoBERTa's finding: NSP does not help MLM pre-training).
 *
 * Masking (BERT; labels as Hugging Face's DataCollatorForLanguageModeling):
 *   candidates: positions whose token is not [PAD] [UNK] [CLS] [SEP] [MASK]
 *   choose round(mask_prob x candidates), at least 1, of them uniformly
 *   (an exact count, where HF draws each position independently)
 *   each chosen: with p 0.8 -> [MASK], 0.1 -> a random token, 0.1 unchanged
 *   labels = the original id at chosen positions, -100 (ignored) elsewhere
 * Random tokens are uniform over the vocab minus the special tokens (the
 * five above, and with mlm_init_vocab every "[...]" token such as
 * [unused0]). All randomness is Philox 4x32-10 (engine/philox.h) with
 * counter (draw / 4, sequence index, epoch, 0x4D4C4D00) (index and epoch
 * mod 2^32) and key = seed: a sequence's masking depends only on (seed,
 * epoch, sequence index), never on the batch it lands in, so batches replay
 * exactly after a resume.
 *
 * Epochs. Epoch e visits the sequences in the order shuffle_perm(n_seq,
 * seed, e) (data/shuffle.h); batch b of the epoch holds positions
 * [b B, (b+1) B) of it, wrapping to the start of the same permutation for
 * the last batch, so every batch is full: batches_per_epoch = ceil(n_seq/B).
 * Data parallel (mlm_set_shard): each rank keeps its share of the
 * permutation (shuffle_shard: positions rank, rank + world, ...; n_seq /
 * world of them) and batches it the same way, wrapping within its share.
 *
 * Outputs, row-major [B, T]:
 *   input_ids       i32   masked tokens
 *   token_type_ids  i32   0
 *   attention_mask  i32   1 for real tokens, 0 for [PAD] (and f32 copy, optional)
 *   labels          i32   original id at masked positions, -100 elsewhere
 *
 * Masked rows. The MLM head (models/bert.h) runs only on the rows the loss
 * scores, listed in a tensor of static size (a captured step's shapes are
 * fixed): S slots per sequence, S = mlm_max_masked(T, mask_prob) = the most
 * positions mlm_mask can choose in T tokens, so M = B S rows a batch (Google
 * BERT's max_predictions_per_seq, derived rather than configured). Slots of
 * sequence b hold its labelled positions b T + t in order, then, as
 * padding, its first unlabelled positions (distinct, so the gather's backward
 * needs no atomics) with the label -100: they cost head work, never loss or
 * gradient. mlm_select_rows makes the pair (rows [M], row labels [M]).
 */
#ifndef CTRAIN_DATA_MLM_H
#define CTRAIN_DATA_MLM_H

#include <stddef.h>
#include <stdint.h>

#include "text_shards.h"
#include "wordpiece.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MLM_OK = 0,
    MLM_ERR_SHAPE = -1,    /* T < 3 or B < 1 */
    MLM_ERR_VOCAB = -2,    /* the vocab size disagrees with the shard's */
    MLM_ERR_SPECIAL = -3,  /* the vocab lacks [PAD] [UNK] [CLS] [SEP] or [MASK] */
    MLM_ERR_EMPTY = -4,    /* no token to mask: no documents, or only [UNK] / specials */
    MLM_ERR_LIMIT = -5,    /* more sequences than an epoch permutation holds */
    MLM_ERR_NOMEM = -6,
    MLM_ERR_CONFIG = -7,   /* masking rates out of range (a programming error) */
} MlmStatus;

/* What to do about a failed mlm_init, by its status (NULL: nothing a user
 * can change). */
const char *mlm_hint(int status);

#define MLM_IGNORE_INDEX (-100)
#define MLM_MASK_PROB 0.15f   /* BERT's: the share of candidate positions masked */

typedef struct {
    int T;                       /* sequence length, >= 3 */
    int B;                       /* batch size */
    uint64_t seed;
    float mask_prob;             /* MLM_MASK_PROB */
    float mask_token_frac;       /* 0.8: chosen -> [MASK] */
    float random_token_frac;     /* 0.1: chosen -> random token (rest unchanged) */
    int32_t pad_id, unk_id, cls_id, sep_id, mask_id;
    uint32_t vocab_size;         /* V */
} MlmConfig;

/* The standard BERT settings for T, B, seed and the specials of wp. */
MlmConfig mlm_config_default(const Wordpiece *wp, int T, int B, uint64_t seed);

typedef struct {
    int32_t *input_ids;          /* [B, T] */
    int32_t *token_type_ids;     /* [B, T] */
    int32_t *attention_mask;     /* [B, T] */
    float *attention_mask_f32;   /* [B, T], filled when not NULL */
    int32_t *labels;             /* [B, T] */
    int B, T;
} MlmBatch;

/* Allocate the arrays of a [B, T] batch (with_f32: also attention_mask_f32).
 * Returns 0 or -1 (no memory). */
int mlm_batch_alloc(MlmBatch *b, int B, int T, int with_f32);
void mlm_batch_free(MlmBatch *b);

typedef struct {
    const TextShard *shard;
    MlmConfig cfg;
    uint64_t stream_len;         /* tokens + one [SEP] per document */
    uint64_t n_seq;
    uint32_t *rand_ids;          /* the ids a random replacement draws from */
    uint32_t n_rand;
    uint32_t *perm;              /* [n_seq] order of the cached epoch */
    uint64_t perm_epoch;
    int perm_valid;
    uint32_t rank, world;        /* data parallel: this rank's share (world 1: all) */
    uint64_t n_train;            /* sequences the epochs draw from: n_seq minus the held-out tail */
    uint64_t n_local;            /* sequences an epoch visits: n_train / world */
} MlmBatcher;

/* Set up over an open shard (kept by pointer: keep it open). A batcher
 * caches the current epoch's permutation: one per loader thread. wp (may be
 * NULL) lets random replacements skip every "[...]" token; without it only
 * the five specials are skipped. Returns 0, or a negative MlmStatus with a
 * message in err (T < 3, a vocab size that disagrees with the shard, missing
 * special ids, all named; a shard with no token to mask: no documents, or
 * every token [UNK] or special, which would train with a loss of 0). */
int mlm_init(MlmBatcher *mb, const TextShard *shard, const MlmConfig *cfg, const Wordpiece *wp,
             char *err, size_t errlen);
void mlm_free(MlmBatcher *mb);

/* Take rank's share of every epoch (world ranks); fatal when a rank would
 * get no sequence. Call after mlm_init, before the first batch. */
void mlm_set_shard(MlmBatcher *mb, uint32_t rank, uint32_t world);

uint64_t mlm_batches_per_epoch(const MlmBatcher *mb);

/* Held-out evaluation: the last n sequences of the shard leave the epochs
 * (call after mlm_init, before mlm_set_shard; n < n_seq) and are read in
 * order by mlm_eval_batch, masked as in an epoch of their own
 * (MLM_EVAL_EPOCH), so every evaluation scores the same positions. */
#define MLM_EVAL_EPOCH 0xE7A10000u
void mlm_hold_out(MlmBatcher *mb, uint64_t n);
/* Held-out sequences first .. first + n - 1 (0 = the first held out; all
 * must be held out; n <= cfg.B) into rows 0 .. n-1 of out. */
void mlm_eval_batch(const MlmBatcher *mb, MlmBatch *out, uint64_t first, int n);
/* How many of n_seq sequences a run holds out: 1% (Hugging Face's run_mlm
 * holds out 5%; a shard is often small), at most 10,000, and none below 100
 * sequences. A function of the shard alone, so `ctrain eval` holds out what
 * the training run did, whatever the batch. */
uint64_t mlm_held_out_count(uint64_t n_seq);

/* Batch `step` (0-based, < mlm_batches_per_epoch) of `epoch` into out
 * (allocated for cfg.B x cfg.T). */
void mlm_batch(MlmBatcher *mb, MlmBatch *out, uint64_t epoch, uint64_t step);

/* Sequence `seq` (< n_seq) packed, before masking: ids [T], mask [T];
 * returns the count of real tokens. */
int mlm_pack(const MlmBatcher *mb, int32_t *ids, int32_t *attn, uint64_t seq);

/* Mask ids [T] in place and write labels [T], for (cfg->seed, epoch, seq).
 * rand_ids [n_rand]: the replacement ids; NULL: 0..V-1 minus the five
 * specials. Returns the count of positions chosen. */
int mlm_mask(int32_t *ids, int32_t *labels, int T, const MlmConfig *cfg,
             const uint32_t *rand_ids, uint32_t n_rand, uint64_t epoch, uint64_t seq);

/* The most positions mlm_mask chooses in a sequence of T tokens:
 * round(mask_prob x T), at least 1 (the count grows with the candidates,
 * which are at most T). The slots per sequence of the masked-row list. */
int mlm_max_masked(int T, float mask_prob);

/* The most labelled (!= MLM_IGNORE_INDEX) positions of one sequence of
 * labels [B, T]: the smallest S mlm_select_rows accepts. */
int mlm_labelled_max(const int32_t *labels, int B, int T);

/* labels [B, T] -> rows [B S] (flat positions b T + t) and row_labels
 * [B S] as the header says: each sequence's labelled positions in order,
 * then its first unlabelled positions, labelled MLM_IGNORE_INDEX. Returns the
 * labelled rows, or -1 when a sequence has more than S labels (or S > T). */
long mlm_select_rows(int32_t *rows, int32_t *row_labels, const int32_t *labels, int B, int T,
                     int S);

/* Synthetic batch for throughput runs: each row [CLS] w1 .. w(T-2) [SEP]
 * with w uniform over 0..V-1 minus the five specials, attention all 1,
 * masked as above (the step standing for the epoch, the row for the
 * sequence), so the masking rate is the real one. */
void mlm_synthetic_batch(MlmBatch *out, const MlmConfig *cfg, uint64_t step);
/* The same with the rows first_row .. first_row + B - 1 of a larger batch:
 * data-parallel rank r of a synthetic run makes rows r B .. r B + B - 1, so
 * N ranks x B hold what one process with batch N B holds. */
void mlm_synthetic_rows(MlmBatch *out, const MlmConfig *cfg, uint64_t step, uint32_t first_row);

#ifdef __cplusplus
}
#endif
#endif
