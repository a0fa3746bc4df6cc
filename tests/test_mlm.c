/* test_mlm.c — masked-LM batches and the fortunes classification set.
 *
 * A synthetic shard (V = 1000, specials [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3
 * [MASK]=4, documents of known ids and lengths from 1 to 3T) is packed and
 * masked; the checks read like mlm.h's contract:
 *   packing: every sequence starts with [CLS]; the sequences, [CLS] removed
 *     and concatenated, are exactly d0 [SEP] d1 [SEP] ... (order and
 *     boundaries kept); only the last is padded; attention = not [PAD]
 *   masking: 15% of the candidates chosen (exact count, at least 1),
 *     80/10/10 within 4 standard deviations over ~65k choices; labels -100
 *     except at chosen positions, where they hold the original id;
 *     [CLS] [SEP] [PAD] never chosen; random tokens never special
 *   determinism: the same (seed, epoch, step) gives the same batch, in a
 *     fresh batcher too; a sequence is masked the same whatever batch size
 *     it lands in; another epoch reorders and remasks; an epoch visits all
 *   masked rows: mlm_max_masked(T) slots a sequence hold every count the
 *     masker makes; mlm_select_rows lists each sequence's labelled rows,
 *     then distinct unlabelled ones as padding
 * Setup failures: each mlm_init failure has its own status and hint (none
 * in the message): a T below 3, missing specials (all named), a shard with
 * no token to mask (no documents, or only [UNK]), a vocab of another size;
 * the fortunes set's errors likewise (a missing DIR: "check the path", the
 * missing default folder: install the package).
 * The synthetic generator and the fortunes set (with the filter that leaves
 * the classification set's held-out entries out of a pre-training shard) (skipped, saying so, when
 * the Debian package fortunes is not installed) are checked last.
 * Shape letters: B batch, T tokens.
 */
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/corpus.h"
#include "data/mlm.h"
#include "data/text_cls.h"
#include "data/text_shards.h"
#include "data/vocab_build.h"
#include "data/wordpiece.h"
/* check.h's helpers are static; this program does not use all of them. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "check.h"
#pragma GCC diagnostic pop

enum { V = 1000, PAD = 0, UNK = 1, CLS = 2, SEP = 3, MASK = 4, T = 64 };

static char tmp[256];

static MlmConfig test_config(int B, uint64_t seed)
{
    MlmConfig c = {T, B, seed, 0.15f, 0.8f, 0.1f, PAD, UNK, CLS, SEP, MASK, V};
    return c;
}

/* D documents; document d has 1 + (d * 37) % (3T) tokens, ids 5..V-1 except
 * that every 50th token is [UNK] (special: must never be masked). */
static uint32_t *make_docs(uint64_t *off, uint32_t D)
{
    uint64_t n = 0;
    off[0] = 0;
    for (uint32_t d = 0; d < D; d++) off[d + 1] = off[d] + 1 + (d * 37u) % (3 * T);
    n = off[D];
    uint32_t *tok = malloc(n * sizeof *tok);
    for (uint64_t k = 0; k < n; k++)
        tok[k] = k % 50 == 49 ? UNK : 5 + (uint32_t)((k * 7919u) % (V - 5));
    return tok;
}

static void test_packing(const MlmBatcher *mb, const uint32_t *tok, const uint64_t *off,
                         uint32_t D)
{
    /* the expected stream */
    uint64_t L = off[D] + D, k = 0;
    int32_t *stream = malloc(L * sizeof *stream);
    for (uint32_t d = 0; d < D; d++) {
        for (uint64_t j = off[d]; j < off[d + 1]; j++) stream[k++] = (int32_t)tok[j];
        stream[k++] = SEP;
    }
    check_true("pack.n_seq", mb->n_seq == (L + T - 2) / (T - 1), "n_seq %llu for stream %llu",
               (unsigned long long)mb->n_seq, (unsigned long long)L);
    int32_t ids[T], attn[T];
    uint64_t pos = 0;
    int ok = 1, attn_ok = 1, pad_ok = 1;
    char why[200] = "";
    for (uint64_t q = 0; q < mb->n_seq; q++) {
        int real = mlm_pack(mb, ids, attn, q);
        if (ids[0] != CLS) ok = 0, snprintf(why, sizeof why, "seq %llu starts with %d",
                                            (unsigned long long)q, ids[0]);
        for (int t = 1; t < real && ok; t++, pos++)
            if (pos >= L || ids[t] != stream[pos])
                ok = 0, snprintf(why, sizeof why, "seq %llu pos %d: %d, stream[%llu] = %d",
                                 (unsigned long long)q, t, ids[t], (unsigned long long)pos,
                                 pos < L ? stream[pos] : -1);
        for (int t = 0; t < T; t++) attn_ok &= attn[t] == (ids[t] != PAD);
        if (q + 1 < mb->n_seq && real != T) pad_ok = 0;
    }
    check_true("pack.stream", ok && pos == L, "%s (consumed %llu of %llu)", why,
               (unsigned long long)pos, (unsigned long long)L);
    check_true("pack.attention", attn_ok, "attention mask differs from ids != [PAD]");
    check_true("pack.only_last_padded", pad_ok, "a sequence before the last is padded");
    mlm_pack(mb, ids, attn, mb->n_seq - 1);
    check_true("pack.last_padded", ids[T - 1] == PAD || L % (T - 1) == 0, "last seq unpadded");
    free(stream);
}

static void test_masking(MlmBatcher *mb)
{
    MlmBatch b;
    mlm_batch_alloc(&b, mb->cfg.B, T, 1);
    int32_t orig[T], attn[T];
    uint64_t cand = 0, chosen = 0, n_mask = 0, n_rand = 0, n_keep = 0, bad_min = 0;
    int labels_ok = 1, specials_ok = 1, rand_ok = 1, type_ok = 1, f32_ok = 1;
    uint64_t steps = mlm_batches_per_epoch(mb);
    for (uint64_t epoch = 0; epoch < 16; epoch++) {
        for (uint64_t step = 0; step < steps; step++) {
            mlm_batch(mb, &b, epoch, step);
            for (int r = 0; r < b.B; r++) {
                const int32_t *x = b.input_ids + (size_t)r * T, *y = b.labels + (size_t)r * T;
                /* recover the unmasked sequence: the labels hold the originals */
                uint64_t seq = mb->perm[(step * (uint64_t)b.B + (uint64_t)r) % mb->n_seq];
                mlm_pack(mb, orig, attn, seq);
                int nc = 0, nch = 0;
                for (int t = 0; t < T; t++) {
                    int special = orig[t] == PAD || orig[t] == UNK || orig[t] == CLS ||
                                  orig[t] == SEP || orig[t] == MASK;
                    nc += !special;
                    type_ok &= b.token_type_ids[(size_t)r * T + t] == 0;
                    f32_ok &= b.attention_mask_f32[(size_t)r * T + t] == (float)attn[t];
                    if (y[t] == MLM_IGNORE_INDEX) {
                        labels_ok &= x[t] == orig[t];
                        continue;
                    }
                    nch++;
                    labels_ok &= y[t] == orig[t];
                    specials_ok &= !special;
                    if (x[t] == MASK) n_mask++;
                    else if (x[t] == orig[t]) n_keep++;
                    else {
                        n_rand++;
                        rand_ok &= x[t] > MASK && x[t] < V;
                    }
                }
                int want = (int)(0.15f * (float)nc + 0.5f);
                if (want < 1) want = 1;
                if (nch != want) bad_min++;
                cand += (uint64_t)nc;
                chosen += (uint64_t)nch;
            }
        }
    }
    double rate = (double)chosen / (double)cand;
    check_true("mask.rate", fabs(rate - 0.15) < 0.01 && bad_min == 0,
               "rate %.4f; %llu sequences with a count other than round(0.15 n)", rate,
               (unsigned long long)bad_min);
    double n = (double)chosen, pm = n_mask / n, pr = n_rand / n, pk = n_keep / n;
    double sm = 4 * sqrt(0.8 * 0.2 / n), s1 = 4 * sqrt(0.1 * 0.9 / n);
    check_true("mask.80_10_10", fabs(pm - 0.8) < sm && fabs(pr - 0.1) < s1 &&
               fabs(pk - 0.1) < s1 + 0.001,
               "[MASK] %.4f random %.4f kept %.4f over %.0f choices", pm, pr, pk, n);
    check_true("mask.labels", labels_ok, "labels are not -100 / the original id");
    check_true("mask.never_special", specials_ok, "a special token was chosen");
    check_true("mask.random_not_special", rand_ok, "a random replacement is special");
    check_true("mask.token_types", type_ok, "token_type_ids not all 0");
    check_true("mask.attention_f32", f32_ok, "f32 attention mask differs from the i32 one");
    printf("  masking: %.0f choices, rate %.4f, [MASK] %.4f random %.4f kept %.4f\n", n, rate,
           pm, pr, pk);
    mlm_batch_free(&b);
}

static int batch_eq(const MlmBatch *a, const MlmBatch *b)
{
    size_t n = (size_t)a->B * (size_t)a->T * sizeof(int32_t);
    return !memcmp(a->input_ids, b->input_ids, n) && !memcmp(a->labels, b->labels, n) &&
           !memcmp(a->attention_mask, b->attention_mask, n);
}

static void test_determinism(const TextShard *s)
{
    char err[256];
    MlmConfig c4 = test_config(4, 42), c8 = test_config(8, 42);
    MlmBatcher m1, m2, m8;
    mlm_init(&m1, s, &c4, NULL, err, sizeof err);
    mlm_init(&m2, s, &c4, NULL, err, sizeof err);
    mlm_init(&m8, s, &c8, NULL, err, sizeof err);
    MlmBatch a, b, c;
    mlm_batch_alloc(&a, 4, T, 0);
    mlm_batch_alloc(&b, 4, T, 0);
    mlm_batch_alloc(&c, 8, T, 0);
    mlm_batch(&m1, &a, 3, 5);
    mlm_batch(&m1, &b, 0, 0); /* m1 moves on to another epoch... */
    mlm_batch(&m1, &b, 3, 5); /* ...and back */
    check_true("determinism.same_batcher", batch_eq(&a, &b), "epoch 3 step 5 differs");
    mlm_batch(&m2, &b, 3, 5);
    check_true("determinism.fresh_batcher", batch_eq(&a, &b), "a fresh batcher differs");
    mlm_batch(&m2, &b, 4, 5);
    check_true("determinism.other_epoch", !batch_eq(&a, &b), "epoch 4 equals epoch 3");
    /* sequence m1.perm[20] (epoch 3, step 5, row 0 at B=4) sits in step 2,
     * row 4 at B=8: masked identically */
    mlm_batch(&m8, &c, 3, 2);
    int same = !memcmp(a.input_ids, c.input_ids + 4 * T, T * sizeof(int32_t)) &&
               !memcmp(a.labels, c.labels + 4 * T, T * sizeof(int32_t));
    check_true("determinism.per_sequence", same, "masking depends on the batch");
    /* an epoch visits every sequence */
    uint8_t *seen = calloc(m1.n_seq, 1);
    MlmBatch e;
    mlm_batch_alloc(&e, 4, T, 0);
    for (uint64_t st = 0; st < mlm_batches_per_epoch(&m1); st++) {
        mlm_batch(&m1, &e, 7, st);
        for (int r = 0; r < 4; r++) seen[m1.perm[(st * 4 + (uint64_t)r) % m1.n_seq]] = 1;
    }
    uint64_t nseen = 0;
    for (uint64_t q = 0; q < m1.n_seq; q++) nseen += seen[q];
    check_true("epoch.covers_all", nseen == m1.n_seq, "%llu of %llu sequences",
               (unsigned long long)nseen, (unsigned long long)m1.n_seq);
    free(seen);
    mlm_batch_free(&a);
    mlm_batch_free(&b);
    mlm_batch_free(&c);
    mlm_batch_free(&e);
    mlm_free(&m1);
    mlm_free(&m2);
    mlm_free(&m8);
}

/* The held-out tail: out of every epoch, read in order by mlm_eval_batch,
 * masked the same way each time and independently of the batch size. */
static void test_hold_out(const TextShard *s)
{
    check_true("hold_out.count", mlm_held_out_count(99) == 0 && mlm_held_out_count(100) == 1 &&
               mlm_held_out_count(200) == 2 &&
               mlm_held_out_count(13282) == 133 && mlm_held_out_count(5000000) == 10000,
               "%llu %llu %llu %llu %llu", (unsigned long long)mlm_held_out_count(99),
               (unsigned long long)mlm_held_out_count(100),
               (unsigned long long)mlm_held_out_count(200),
               (unsigned long long)mlm_held_out_count(13282),
               (unsigned long long)mlm_held_out_count(5000000));
    char err[256];
    MlmConfig c4 = test_config(4, 42), c3 = test_config(3, 42);
    MlmBatcher m, m3;
    mlm_init(&m, s, &c4, NULL, err, sizeof err);
    mlm_init(&m3, s, &c3, NULL, err, sizeof err);
    const uint64_t n_seq = m.n_seq, held = 5;
    mlm_hold_out(&m, held);
    mlm_hold_out(&m3, held);
    MlmBatch e, a, b;
    mlm_batch_alloc(&e, 4, T, 0);
    mlm_batch_alloc(&a, 4, T, 0);
    mlm_batch_alloc(&b, 3, T, 0);
    int leak = 0;
    for (uint64_t st = 0; st < mlm_batches_per_epoch(&m); st++) {
        mlm_batch(&m, &e, 2, st);
        for (int r = 0; r < 4; r++) leak |= m.perm[(st * 4 + (uint64_t)r) % m.n_local] >= n_seq - held;
    }
    check_true("hold_out.not_trained_on", !leak && m.n_train == n_seq - held, "a held-out "
               "sequence is in an epoch (n_train %llu of %llu)", (unsigned long long)m.n_train,
               (unsigned long long)n_seq);
    /* sequence n_seq - held + 3: row 3 of the first batch of 4, row 0 of the
     * second batch of 3; packed as mlm_pack does, masked identically */
    mlm_eval_batch(&m, &a, 0, 4);
    mlm_eval_batch(&m3, &b, 3, 2);
    int32_t ids[64], attn[64];
    mlm_pack(&m, ids, attn, n_seq - held + 3);
    int same_mask = !memcmp(a.input_ids + 3 * T, b.input_ids, T * sizeof(int32_t)) &&
                    !memcmp(a.labels + 3 * T, b.labels, T * sizeof(int32_t));
    int labelled = 0, packed = 1;
    for (int t = 0; t < T; t++) {
        const int32_t l = a.labels[3 * T + t];
        labelled += l != MLM_IGNORE_INDEX;
        packed &= (l != MLM_IGNORE_INDEX ? l : a.input_ids[3 * T + t]) == ids[t];
    }
    check_true("hold_out.eval_batch_fixed", same_mask && packed && labelled > 0,
               "same masking %d, packed %d, %d labelled", same_mask, packed, labelled);
    mlm_batch_free(&e);
    mlm_batch_free(&a);
    mlm_batch_free(&b);
    mlm_free(&m);
    mlm_free(&m3);
}

static void test_synthetic(void)
{
    MlmConfig c = test_config(16, 7);
    MlmBatch b, b2;
    mlm_batch_alloc(&b, 16, T, 0);
    mlm_batch_alloc(&b2, 16, T, 0);
    uint64_t chosen = 0, cand = 0;
    int shape_ok = 1;
    for (uint64_t step = 0; step < 20; step++) {
        mlm_synthetic_batch(&b, &c, step);
        for (int r = 0; r < 16; r++) {
            const int32_t *x = b.input_ids + r * T, *y = b.labels + r * T;
            shape_ok &= x[0] == CLS && x[T - 1] == SEP && y[0] == -100 && y[T - 1] == -100;
            for (int t = 0; t < T; t++) {
                shape_ok &= b.attention_mask[r * T + t] == 1 && x[t] >= 0 && x[t] < V;
                chosen += y[t] != -100;
                if (y[t] != -100) shape_ok &= y[t] > MASK;
            }
            cand += T - 2;
        }
    }
    mlm_synthetic_batch(&b2, &c, 19);
    check_true("synthetic.shape", shape_ok, "[CLS] .. [SEP], attention 1, labels non-special");
    check_true("synthetic.rate", fabs((double)chosen / (double)cand - 0.15) < 0.01, "rate %.4f",
               (double)chosen / (double)cand);
    check_true("synthetic.deterministic", batch_eq(&b, &b2), "step 19 differs");
    mlm_batch_free(&b);
    mlm_batch_free(&b2);
}

/* The masked-row slots: mlm_max_masked bounds every count mlm_mask makes
 * (packed sequences of the batcher over many epochs, and mlm_mask on
 * sequences of every candidate count 0..T); mlm_select_rows on a hand-made
 * case and on real batches. */
static void test_masked_rows(MlmBatcher *mb)
{
    const MlmConfig *c = &mb->cfg;
    int S = mlm_max_masked(T, c->mask_prob);
    check_true("rows.slots_value", S == 10 && mlm_max_masked(128, 0.15f) == 19 &&
               mlm_max_masked(512, 0.15f) == 77 && mlm_max_masked(4, 0.15f) == 1,
               "slots %d for T %d, %d for 128, %d for 512, %d for 4", S, T,
               mlm_max_masked(128, 0.15f), mlm_max_masked(512, 0.15f), mlm_max_masked(4, 0.15f));
    int most = 0;
    for (int n = 0; n <= T; n++) {   /* n candidates, the rest [PAD] */
        int32_t ids[T], lab[T];
        for (int t = 0; t < T; t++) ids[t] = t < n ? 5 + t : PAD;
        int k = mlm_mask(ids, lab, T, c, NULL, 0, 0, (uint64_t)n);
        if (k > most) most = k;
    }
    MlmBatch b;
    mlm_batch_alloc(&b, c->B, T, 0);
    int32_t rows[8 * T], rl[8 * T];
    int ok = 1;
    for (uint64_t e = 0; e < 3; e++)
        for (uint64_t step = 0; step < mlm_batches_per_epoch(mb); step++) {
            mlm_batch(mb, &b, e, step);
            int k = mlm_labelled_max(b.labels, c->B, T);
            if (k > most) most = k;
            long labelled = 0;
            for (int i = 0; i < c->B * T; i++) labelled += b.labels[i] != -100;
            long got = mlm_select_rows(rows, rl, b.labels, c->B, T, S);
            /* every row in its sequence's range, distinct, labels as the batch's */
            unsigned char seen[8 * T] = {0};
            for (int i = 0; got >= 0 && i < c->B * S; i++) {
                int bi = i / S;
                ok &= rows[i] >= bi * T && rows[i] < (bi + 1) * T && !seen[rows[i]]++ &&
                      rl[i] == b.labels[rows[i]];
            }
            ok &= got == labelled;
        }
    mlm_batch_free(&b);
    check_true("rows.slots_bound_masking", most <= S, "mlm_mask chose %d positions, %d slots", most, S);
    check_true("rows.select_real_batches", ok, "rows out of range, repeated, or mislabelled");

    /* hand-made: B 2, T 6, 3 slots */
    const int32_t lab[12] = {-100, 7, -100, 9, -100, -100,   -100, -100, -100, -100, -100, 5};
    int32_t r[6], l[6];
    const int32_t r_want[6] = {1, 3, 0, 11, 6, 7}, l_want[6] = {7, 9, -100, 5, -100, -100};
    long got = mlm_select_rows(r, l, lab, 2, 6, 3);
    check_true("rows.select_hand", got == 3 && !memcmp(r, r_want, sizeof r) && !memcmp(l, l_want, sizeof l),
               "got %ld: rows %d %d %d %d %d %d", got, r[0], r[1], r[2], r[3], r[4], r[5]);
    check_true("rows.select_too_many", mlm_select_rows(r, l, lab, 2, 6, 1) < 0 &&
               mlm_labelled_max(lab, 2, 6) == 2, "2 labels in 1 slot was accepted");
}

/* Walks one topic file's documents through the held-out filter and checks
 * each against the split: kept = training entry, dropped = held-out entry. */
typedef struct {
    const TextCls *ds;
    int32_t label;
    const char *path;
    TextClsExclude x;
    uint32_t next;        /* entries of this topic seen */
    int ok;
    int fortune_file;
} ExcludeCheck;

static int exclude_check_doc(void *ctx, const char *doc, size_t len)
{
    ExcludeCheck *e = ctx;
    int keep = textcls_exclude_held_out(&e->x, e->path, e->fortune_file, doc, len);
    size_t i = 0;
    while (i < len && (doc[i] == ' ' || doc[i] == '\t' || doc[i] == '\n' || doc[i] == '\r')) i++;
    if (i == len) return 0;   /* blank: no entry */
    /* the topic's e->next-th example in ds (examples are grouped by topic, in file order) */
    uint32_t seen = 0, j = 0;
    for (; j < e->ds->n; j++)
        if (e->ds->label[j] == e->label && seen++ == e->next) break;
    e->ok &= j < e->ds->n && keep == !e->ds->held_out[j] &&
             strlen(textcls_text(e->ds, j)) == len && !memcmp(textcls_text(e->ds, j), doc, len);
    e->next++;
    return 0;
}

static void test_fortunes(void)
{
    struct stat sb;
    if (stat(FORTUNES_DEFAULT_DIR, &sb) != 0) {
        printf("  skip fortunes: %s missing (apt-get install fortunes)\n", FORTUNES_DEFAULT_DIR);
        return;
    }
    char err[1024];
    TextCls ds, ds2;
    int st = textcls_load_fortunes(&ds, NULL, NULL, 6, 0.1, err, sizeof err);
    check_true("fortunes.load", st == 0, "%s", err);
    if (st) return;
    textcls_load_fortunes(&ds2, NULL, NULL, 6, 0.1, err, sizeof err);
    int same = ds.n == ds2.n && ds.n_test == ds2.n_test &&
               !memcmp(ds.held_out, ds2.held_out, ds.n) &&
               !memcmp(ds.label, ds2.label, ds.n * sizeof *ds.label);
    check_true("fortunes.deterministic", same, "two loads differ");
    textcls_free(&ds2);
    double frac = (double)ds.n_test / ds.n;
    int labels_ok = 1, topics_ok = 1;
    for (uint32_t i = 0; i < ds.n; i++) labels_ok &= ds.label[i] >= 0 && ds.label[i] < 6;
    for (uint32_t k = 1; k < ds.n_topics; k++)
        topics_ok &= strcmp(ds.topics[k - 1], ds.topics[k]) < 0;
    check_true("fortunes.split", ds.n > 1000 && frac > 0.07 && frac < 0.13 &&
               ds.n_train + ds.n_test == ds.n, "%u examples, %.3f held out", ds.n, frac);
    check_true("fortunes.labels", labels_ok && topics_ok, "labels out of range / topics unsorted");
    /* the same entry keeps its split when other topics are chosen */
    const char *one[1] = {ds.topics[2]};
    st = textcls_load_fortunes(&ds2, NULL, one, 1, 0.1, err, sizeof err);
    int stable = st == 0 && ds2.n == ds.topic_size[2];
    for (uint32_t i = 0, j = 0; stable && i < ds.n; i++)
        if (ds.label[i] == 2) stable = ds.held_out[i] == ds2.held_out[j++];
    check_true("fortunes.split_stable", stable, "status %d: %s", st, err);
    if (!st) textcls_free(&ds2);
    const char *nope[1] = {"no-such-topic"};
    st = textcls_load_fortunes(&ds2, NULL, nope, 1, 0.1, err, sizeof err);
    check_true("fortunes.bad_topic", st != 0 && strstr(err, "no-such-topic"), "%s", err);
    printf("  fortunes: %u examples in %u topics (%s %s %s %s %s %s), %u held out\n", ds.n,
           ds.n_topics, ds.topics[0], ds.topics[1], ds.topics[2], ds.topics[3], ds.topics[4],
           ds.topics[5], ds.n_test);

    /* a vocab and a shard from the package; MLM and classification batches */
    char vocab[512], shard[512];
    snprintf(vocab, sizeof vocab, "%s/fortunes_vocab.txt", tmp);
    snprintf(shard, sizeof shard, "%s/fortunes.tok", tmp);
    st = vocab_build(FORTUNES_DEFAULT_DIR, 2000, WP_UNCASED, vocab, err, sizeof err);
    check_true("fortunes.vocab", st == 0, "%s", err);
    Wordpiece wp;
    if (st || wordpiece_load(&wp, vocab, WP_UNCASED, err, sizeof err)) {
        textcls_free(&ds);
        return;
    }
    ShardStats ss;
    st = shard_write(FORTUNES_DEFAULT_DIR, &wp, shard, SHARD_DOC_AUTO, &ss, err, sizeof err);
    check_true("fortunes.shard", st == 0 && ss.unk == 0 && ss.docs > 10000, "status %d: %s "
               "(%llu docs, %llu unk)", st, err, (unsigned long long)ss.docs,
               (unsigned long long)ss.unk);
    /* --exclude-held-out: the filter drops exactly the entries the split
     * holds out, in every file (the 6 topics' files compared entry by entry),
     * and the shard loses exactly those documents */
    TextClsExclude x = {TEXTCLS_HELD_OUT, NULL, 0};
    ShardStats sx;
    char shard_x[512];
    snprintf(shard_x, sizeof shard_x, "%s/fortunes_train.tok", tmp);
    int stx = shard_write_filtered(FORTUNES_DEFAULT_DIR, &wp, shard_x, SHARD_DOC_AUTO,
                                   textcls_exclude_held_out, &x, &sx, err, sizeof err);
    check_true("fortunes.exclude_shard", stx == 0 && sx.dropped > 0.07 * ss.docs &&
               sx.docs + sx.dropped == ss.docs, "status %d: %llu docs + %llu dropped vs %llu: %s",
               stx, (unsigned long long)sx.docs, (unsigned long long)sx.dropped,
               (unsigned long long)ss.docs, err);
    int same_split = 1;
    for (uint32_t k = 0; k < ds.n_topics; k++) {
        char path[600], *text;
        size_t n;
        snprintf(path, sizeof path, "%s/%s", FORTUNES_DEFAULT_DIR, ds.topics[k]);
        if (corpus_read(path, 1, &text, &n, err, sizeof err) != 0) { same_split = 0; break; }
        ExcludeCheck ec = {&ds, (int32_t)k, path, {TEXTCLS_HELD_OUT, NULL, 0}, 0, 1, 0};
        shard_split_docs(text, n, SHARD_DOC_AUTO, &ec.fortune_file, exclude_check_doc, &ec);
        same_split &= ec.ok && ec.next == (uint32_t)ds.topic_size[k];
        free(text);
    }
    check_true("fortunes.exclude_matches_split", same_split, "the filter kept or dropped an entry "
               "the split puts elsewhere");
    /* NAME.u8 (a copy of the package that followed its links) goes as NAME */
    TextClsExclude xa = {TEXTCLS_HELD_OUT, NULL, 0}, xb = {TEXTCLS_HELD_OUT, NULL, 0};
    int same_u8 = 1, dropped = 0;
    for (int i = 0; i < 200; i++) {
        int ka = textcls_exclude_held_out(&xa, "/d/people", 1, "x", 1);
        same_u8 &= ka == textcls_exclude_held_out(&xb, "/d/people.u8", 1, "x", 1);
        dropped += !ka;
    }
    check_true("fortunes.exclude_u8_alias", same_u8 && dropped > 5 && dropped < 40,
               "people.u8 split unlike people (%d of 200 dropped)", dropped);
    TextShard s;
    if (!st && !(st = shard_open(&s, shard, err, sizeof err))) {
        MlmConfig c = mlm_config_default(&wp, 128, 8, 1);
        MlmBatcher mb;
        st = mlm_init(&mb, &s, &c, &wp, err, sizeof err);
        check_true("fortunes.mlm_init", st == 0, "%s", err);
        if (!st) {
            MlmBatch b;
            mlm_batch_alloc(&b, 8, 128, 0);
            mlm_batch(&mb, &b, 0, 0);
            int masked = 0;
            for (int i = 0; i < 8 * 128; i++) masked += b.labels[i] != -100;
            check_true("fortunes.mlm_batch", b.input_ids[0] == wp.cls_id && masked > 8 * 10,
                       "%d masked", masked);
            printf("  fortunes shard: %llu docs, %llu tokens, %llu sequences of 128\n",
                   (unsigned long long)ss.docs, (unsigned long long)ss.tokens,
                   (unsigned long long)mb.n_seq);
            mlm_batch_free(&b);
            mlm_free(&mb);
        }
        shard_close(&s);
    }
    /* mlm_init refuses a vocab that is not the shard's */
    if (!shard_open(&s, shard, err, sizeof err)) {
        MlmConfig c = test_config(2, 1);
        MlmBatcher mb;
        st = mlm_init(&mb, &s, &c, NULL, err, sizeof err);
        check_true("fortunes.mlm_vocab_mismatch", st == MLM_ERR_VOCAB && !strstr(err, "hint") &&
                   strstr(mlm_hint(st), "the vocab.txt the shard was made with"), "%s", err);
        shard_close(&s);
    }
    st = textcls_tokenize(&ds, &wp, err, sizeof err);
    check_true("fortunes.tokenize", st == 0, "%s", err);
    if (!st) {
        enum { B = 4, TC = 32 };
        int32_t x[B * TC], tt[B * TC], m[B * TC], y[B];
        uint32_t idx[B] = {ds.train[0], ds.train[1], ds.test[0], ds.n - 1};
        textcls_batch(x, tt, m, y, &ds, idx, B, TC, wp.cls_id, wp.sep_id, wp.pad_id);
        int ok = 1;
        for (int r = 0; r < B; r++) {
            uint64_t n = ds.ids_off[idx[r] + 1] - ds.ids_off[idx[r]];
            int len = n > TC - 2 ? TC - 2 : (int)n;
            ok &= x[r * TC] == wp.cls_id && x[r * TC + len + 1] == wp.sep_id &&
                  y[r] == ds.label[idx[r]];
            for (int t = 0; t < TC; t++) {
                ok &= m[r * TC + t] == (t <= len + 1) && tt[r * TC + t] == 0;
                if (t > len + 1) ok &= x[r * TC + t] == wp.pad_id;
                if (t >= 1 && t <= len) ok &= x[r * TC + t] == ds.ids[ds.ids_off[idx[r]] + t - 1];
            }
        }
        check_true("fortunes.cls_batch", ok, "[CLS] text [SEP] [PAD]..., mask, labels");
    }
    wordpiece_free(&wp);
    textcls_free(&ds);
}

static void check_msg(const char *name, const char *msg, const char *want)
{
    check_true(name, msg && strstr(msg, want) != NULL, "\"%s\" lacks \"%s\"",
               msg ? msg : "(null)", want);
}

/* mlm_init's failures, each with its status and its own hint. */
static void test_init_errors(const TextShard *s)
{
    char err[512], path[600];
    MlmBatcher mb;
    MlmConfig c = test_config(8, 1);
    c.T = 2;
    int st = mlm_init(&mb, s, &c, NULL, err, sizeof err);
    check_true("init.short_T", st == MLM_ERR_SHAPE && strstr(mlm_hint(st), "--seq 3"),
               "status %d: %s", st, err);
    c = test_config(8, 1);
    c.pad_id = -1;
    c.mask_id = -1;
    st = mlm_init(&mb, s, &c, NULL, err, sizeof err);
    check_true("init.specials_named", st == MLM_ERR_SPECIAL &&
               strstr(err, "special tokens [PAD], [MASK], which the vocab lacks"),
               "status %d: %s", st, err);
    check_msg("init.specials_hint", mlm_hint(st), "[PAD] [UNK] [CLS] [SEP] [MASK]");
    /* one hint per cause, none of them the old catch-all, none inside a message */
    const int all[] = {MLM_ERR_SHAPE, MLM_ERR_VOCAB, MLM_ERR_SPECIAL, MLM_ERR_EMPTY,
                       MLM_ERR_LIMIT, MLM_ERR_NOMEM};
    int distinct = 1;
    for (int i = 0; i < 6; i++) {
        for (int j = 0; j < i; j++) distinct &= strcmp(mlm_hint(all[i]), mlm_hint(all[j])) != 0;
        distinct &= !strstr(mlm_hint(all[i]), "longer corpus");
    }
    check_true("init.hints_distinct", distinct && !strstr(err, "hint"), "hints repeat");

    /* shards with nothing to mask: no documents; only [UNK] and [SEP] */
    uint64_t off0[1] = {0};
    snprintf(path, sizeof path, "%s/nodocs.tok", tmp);
    TextShard e;
    st = shard_write_tokens(path, V, 0, NULL, off0, 0, err, sizeof err);
    st = st ? st : shard_open(&e, path, err, sizeof err);
    if (!st) {
        c = test_config(8, 1);
        st = mlm_init(&mb, &e, &c, NULL, err, sizeof err);
        check_true("init.no_docs", st == MLM_ERR_EMPTY && strstr(err, "holds no tokens"),
                   "status %d: %s", st, err);
        check_msg("init.empty_hint", mlm_hint(st), "ctrain shard");
        shard_close(&e);
    }
    uint32_t unk[5] = {UNK, UNK, SEP, UNK, UNK};
    uint64_t off2[3] = {0, 2, 5};
    snprintf(path, sizeof path, "%s/unk.tok", tmp);
    st = shard_write_tokens(path, V, 0, unk, off2, 2, err, sizeof err);
    st = st ? st : shard_open(&e, path, err, sizeof err);
    if (!st) {
        c = test_config(8, 1);
        st = mlm_init(&mb, &e, &c, NULL, err, sizeof err);
        check_true("init.all_unk", st == MLM_ERR_EMPTY && strstr(err, "5 tokens are all [UNK]"),
                   "status %d: %s", st, err);
        if (!st) mlm_free(&mb);
        shard_close(&e);
    }
}

/* The fortunes set's errors: one hint each, right for the cause. */
static void test_textcls_errors(void)
{
    char err[512], dir[600];
    TextCls ds;
    int st = textcls_load_fortunes(&ds, "/nonexistent", NULL, 4, 0.1, err, sizeof err);
    check_true("textcls.missing_dir", st == TEXTCLS_ERR_OPEN && !strstr(err, "hint") &&
               strstr(err, "/nonexistent"), "status %d: %s", st, err);
    check_true("textcls.missing_dir_hint", strstr(textcls_hint(st, "/nonexistent"),
               "check the path") && !strstr(textcls_hint(st, "/nonexistent"), "install"),
               "%s", textcls_hint(st, "/nonexistent"));
    check_true("textcls.default_hint", strstr(textcls_hint(st, NULL), "install the fortunes "
               "package (bash scripts/setup.sh, or apt-get install fortunes)") != NULL, "%s",
               textcls_hint(st, NULL));
    snprintf(dir, sizeof dir, "%s/nofortunes", tmp);
    mkdir(dir, 0700);
    st = textcls_load_fortunes(&ds, dir, NULL, 4, 0.1, err, sizeof err);
    check_true("textcls.empty_dir", st == TEXTCLS_ERR_EMPTY, "status %d: %s", st, err);
    char f[700];
    snprintf(f, sizeof f, "%s/art", dir);
    FILE *fp = fopen(f, "w");
    if (fp) { fputs("one\n%\ntwo\n%\nthree\n", fp); fclose(fp); }
    st = textcls_load_fortunes(&ds, dir, NULL, 4, 0.1, err, sizeof err);
    check_true("textcls.few_topics", st == TEXTCLS_ERR_TOPICS &&
               strstr(textcls_hint(st, dir), "--classes"), "status %d: %s", st, err);
    fp = fopen(f, "w");
    if (fp) { fputs("caf\xe9\n%\n", fp); fclose(fp); }
    st = textcls_load_fortunes(&ds, dir, NULL, 1, 0.1, err, sizeof err);
    check_true("textcls.latin1", st == TEXTCLS_ERR_UTF8 && !strstr(err, "hint") &&
               strstr(textcls_hint(st, dir), "iconv"), "status %d: %s", st, err);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    return remove(path);
}

int main(void)
{
    snprintf(tmp, sizeof tmp, "/tmp/ctrain_mlm_XXXXXX");
    if (!mkdtemp(tmp)) {
        fprintf(stderr, "test: mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    enum { D = 300 };
    uint64_t off[D + 1];
    uint32_t *tok = make_docs(off, D);
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/synthetic.tok", tmp);
    int st = shard_write_tokens(path, V, 0, tok, off, D, err, sizeof err);
    TextShard s;
    st = st ? st : shard_open(&s, path, err, sizeof err);
    check_true("shard.synthetic", st == 0, "%s", err);
    if (!st) {
        MlmConfig c = test_config(8, 1234);
        MlmBatcher mb;
        st = mlm_init(&mb, &s, &c, NULL, err, sizeof err);
        check_true("mlm.init", st == 0, "%s", err);
        if (!st) {
            test_packing(&mb, tok, off, D);
            test_masking(&mb);
            test_masked_rows(&mb);
            mlm_free(&mb);
            test_determinism(&s);
            test_hold_out(&s);
        }
        MlmConfig bad = test_config(8, 1);
        bad.mask_id = -1;
        st = mlm_init(&mb, &s, &bad, NULL, err, sizeof err);
        check_true("mlm.init_no_mask", st == MLM_ERR_SPECIAL && strstr(err, "[MASK]"), "%s", err);
        test_init_errors(&s);
        shard_close(&s);
    }
    free(tok);
    test_synthetic();
    test_fortunes();
    test_textcls_errors();
    nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return check_summary();
}
