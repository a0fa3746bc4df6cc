/* test_dist.c — the host-side logic of multi-GPU data parallel, on the CPU:
 *   sharding: every rank's share of an epoch is disjoint from the others',
 *     the shares together are the epoch minus its last n mod world samples,
 *     all shares are equally long, and the ranks' batch b together is batch
 *     b of one process with world x the batch (loader, and the synthetic
 *     text feed's rows);
 *   buckets: they cover the gradient buffer exactly, in order from its end,
 *     cut only between parameters and at the weight-decay boundary, each at
 *     least the asked size except the last of a group;
 *   readiness: on real models (MLP, BERT-tiny with its tied embeddings,
 *     ResNet) with and without recompute, every bucket is handed out exactly
 *     once, and at that moment its gradients already equal their final
 *     values (nothing adds into them later), and most buckets go out before
 *     backward ends;
 *   --grad-reduce: f32 by default, f32 and bf16 accepted by ctrain train
 *     (bad values: tests/test_cli.c), and a bench config carries it to its
 *     ranks' training options, its JSON mode ("dp-x2-bf16") and its label.
 */
#include <math.h>
#include <string.h>
#include "check.h"
#include "data/image_source.h"
#include "data/loader.h"
#include "data/mlm.h"
#include "data/shuffle.h"
#include "engine/autograd.h"
#include "engine/mem.h"
#include "engine/params.h"
#include "ops/embedding.h"
#include "models/bert.h"
#include "models/mlp.h"
#include "models/resnet.h"
#include "train/bench/bench.h"
#include "train/parallel/dist_bucket.h"
#include "train/feed/feed.h"
#include "train/cli/options.h"

/* ---- sharding ---- */

static void test_shard(uint32_t n, uint32_t world, uint32_t B)
{
    char name[96];
    uint32_t *perm = malloc(n * sizeof *perm), *share = malloc(n * sizeof *share);
    int *owner = malloc(n * sizeof *owner);
    for (uint32_t i = 0; i < n; i++) owner[i] = -1;
    shuffle_perm(perm, n, 7, 3);
    uint32_t k = shuffle_shard_count(n, world);
    int disjoint = 1, counts = 1, batches = 1;
    for (uint32_t r = 0; r < world; r++) {
        shuffle_perm(share, n, 7, 3);
        uint32_t got = shuffle_shard(share, n, r, world);
        counts &= got == k;
        for (uint32_t j = 0; j < got; j++) {
            if (owner[share[j]] >= 0) disjoint = 0;
            owner[share[j]] = (int)r;
            /* batch b of rank r, row i = position r + world (b B + i) of the epoch */
            uint32_t b = j / B, i = j % B;
            if (share[j] != perm[r + world * (b * B + i)]) batches = 0;
        }
    }
    uint32_t covered = 0, tail_ok = 1;
    for (uint32_t p = 0; p < n; p++) {
        int has = owner[perm[p]] >= 0;
        covered += has;
        if (has != (p < k * world)) tail_ok = 0;   /* exactly the last n mod world are dropped */
    }
    snprintf(name, sizeof name, "shard n=%u world=%u: disjoint, equal, complete", n, world);
    check_true(name, disjoint && counts && covered == k * world && tail_ok,
               "disjoint %d, counts %d, covered %u of %u, tail %d", disjoint, counts, covered,
               k * world, tail_ok);
    snprintf(name, sizeof name, "shard n=%u world=%u: batches = one big batch", n, world);
    check_true(name, batches, "a rank's batch row is not its position in the big batch");
    free(perm);
    free(share);
    free(owner);
}

/* Two loaders (ranks 0 and 1 of 2) over one synthetic source: batch b of
 * both together holds the indices of batch b of a loader with batch 2B. */
static void test_loader_shards(void)
{
    enum { N = 41, B = 4, S = 8 };
    ImageSource src;
    src_synthetic_init(&src, N, 5, S, 11);
    LoaderConfig big = {.batch = 2 * B, .workers = 2, .slots = 3, .train = 1, .seed = 5};
    Loader *L = loader_init(&src, &big), *R[2];
    for (uint32_t r = 0; r < 2; r++) {
        LoaderConfig c = big;
        c.batch = B;
        c.rank = r;
        c.world = 2;
        R[r] = loader_init(&src, &c);
    }
    check_true("loader shard: batches per epoch", loader_batches(R[0]) == (N / 2) / B &&
               loader_batches(R[1]) == loader_batches(R[0]),
               "rank batches %u and %u, expected %u", loader_batches(R[0]), loader_batches(R[1]),
               (N / 2) / B);
    int same = 1;
    for (uint64_t e = 0; e < 2; e++) {
        loader_start(L, e, 0);
        loader_start(R[0], e, 0);
        loader_start(R[1], e, 0);
        for (uint32_t b = 0; b < loader_batches(R[0]); b++) {
            LoaderBatch *lb = loader_next(L), *r0 = loader_next(R[0]), *r1 = loader_next(R[1]);
            int seen[N] = {0};
            for (int i = 0; i < B; i++) {
                seen[r0->index[i]]++;
                seen[r1->index[i]]++;
                /* and the pixels are the sample's own, whatever loader made them */
                if (memcmp(r1->x + (size_t)i * S * S * 3,
                           lb->x + (size_t)(2 * i + 1) * S * S * 3, S * S * 3 * sizeof(float)))
                    same = 0;
            }
            for (int i = 0; i < 2 * B; i++) same &= seen[lb->index[i]] == 1;
            loader_release(L, lb);
            loader_release(R[0], r0);
            loader_release(R[1], r1);
        }
    }
    check_true("loader shard: 2 ranks x B = one loader x 2B", same,
               "a batch of the ranks differs from the big batch");
    loader_free(L);
    loader_free(R[0]);
    loader_free(R[1]);
    src_free(&src);
}

/* The synthetic text feed's rank r makes rows r B .. r B + B - 1. */
static void test_mlm_rows(void)
{
    enum { B = 3, T = 16 };
    MlmConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.T = T;
    cfg.B = 2 * B;
    cfg.seed = 9;
    cfg.mask_prob = 0.15f;
    cfg.mask_token_frac = 0.8f;
    cfg.random_token_frac = 0.1f;
    cfg.pad_id = 0; cfg.unk_id = 100; cfg.cls_id = 101; cfg.sep_id = 102; cfg.mask_id = 103;
    cfg.vocab_size = 500;
    MlmBatch big, part;
    mlm_batch_alloc(&big, 2 * B, T, 0);
    mlm_batch_alloc(&part, B, T, 0);
    mlm_synthetic_batch(&big, &cfg, 0);
    cfg.B = B;
    mlm_synthetic_rows(&part, &cfg, 0, B);
    size_t half = (size_t)B * T;
    check_true("synthetic text rows of rank 1 = rows B..2B-1",
               !memcmp(part.input_ids, big.input_ids + half, half * sizeof(int32_t)) &&
               !memcmp(part.labels, big.labels + half, half * sizeof(int32_t)),
               "rank 1's rows differ from the big batch's second half");
    mlm_batch_free(&big);
    mlm_batch_free(&part);
}

/* ---- buckets ---- */

static void test_bucket_plan(void)
{
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    ParamSet ps;
    params_init(&ps);
    /* mixed sizes and groups, in "forward" order; one parameter larger than a bucket */
    int64_t sizes[] = {300, 7, 5000, 40, 40, 900, 3, 1200, 64, 64, 128, 2};
    int decay[] = {1, 0, 1, 0, 0, 1, 0, 1, 0, 1, 1, 0};
    int np = (int)(sizeof sizes / sizeof sizes[0]);
    for (int i = 0; i < np; i++) {
        char n[32];
        snprintf(n, sizeof n, "p%d", i);
        params_add(&ps, n, 1, &sizes[i], INIT_UNIFORM, 0.1f, decay[i]);
    }
    params_alloc(&ps, &c, 3);
    size_t targets[] = {0, 1, 256, 1000, 100000};
    for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++) {
        BucketPlan bp;
        bucket_plan_build(&bp, &ps, targets[t], 0);
        char name[96];
        int ok = bp.n >= 1 && bp.b[0].end == ps.total && bp.b[bp.n - 1].begin == 0;
        int params = 0;
        for (int k = 0; k < bp.n; k++) {
            ok &= bp.b[k].begin < bp.b[k].end;
            if (k) ok &= bp.b[k].end == bp.b[k - 1].begin;     /* contiguous, from the end */
            int group_last = bp.b[k].begin == 0 || bp.b[k].begin == ps.n_decay;
            if (targets[t] && !group_last) ok &= bp.b[k].end - bp.b[k].begin >= targets[t];
            ok &= !(bp.b[k].begin < ps.n_decay && bp.b[k].end > ps.n_decay);   /* one group */
            params += bp.b[k].n_params;
        }
        for (int i = 0; i < np; i++) {   /* each parameter inside its bucket, never split */
            const DistBucket *b = &bp.b[bp.param_bucket[i]];
            ok &= ps.p[i].offset >= b->begin && ps.p[i].offset + ps.p[i].numel <= b->end;
            ok &= bucket_param_of(&bp, &ps, ps.p[i].t) == i;
        }
        ok &= params == np;
        {   /* a view joining p3, p4 (both no decay, back to back): both covered, in order */
            const int pj[2] = {3, 4};
            Tensor *j = params_join(&ps, pj, 2);
            int cov[8], nc = j ? bucket_params_of(&bp, &ps, j, cov, 8) : 0;
            ok &= j && j->shape[0] == 80 && nc == 2 && cov[0] == 3 && cov[1] == 4;
            const int one = 5;   /* a parameter's own view covers itself */
            ok &= bucket_params_of(&bp, &ps, ps.p[one].t, cov, 8) == 1 && cov[0] == one;
            params_join_free(j);
            const int apart[2] = {3, 5};   /* not back to back (other groups): no join */
            ok &= params_join(&ps, apart, 2) == NULL;
        }
        if (!targets[t]) ok &= bp.n == (ps.n_decay && ps.n_decay < ps.total ? 2 : 1);
        snprintf(name, sizeof name, "buckets of %zu elements: exact cover, aligned, grouped",
                 targets[t]);
        check_true(name, ok, "%d buckets violate the plan", bp.n);
        bucket_plan_free(&bp);
    }
    /* a lookup table (engine/params.h) isolated: alone in its bucket, the
     * plan still an exact, contiguous cover within the groups */
    ps.p[5].lookup = 1;
    for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++) {
        BucketPlan bp;
        bucket_plan_build(&bp, &ps, targets[t], 1);
        int b5 = bp.param_bucket[5], ok = bp.b[b5].n_params == 1 &&
                 bp.b[b5].begin == ps.p[5].offset && bp.b[b5].end == ps.p[5].offset + ps.p[5].numel;
        ok &= bp.b[0].end == ps.total && bp.b[bp.n - 1].begin == 0;
        for (int k = 1; k < bp.n; k++) ok &= bp.b[k].end == bp.b[k - 1].begin;
        char name[96];
        snprintf(name, sizeof name, "buckets of %zu elements, lookup isolated: alone, exact cover",
                 targets[t]);
        check_true(name, ok, "parameter 5 in bucket %d of %d", b5, bp.n);
        bucket_plan_free(&bp);
    }
    params_free(&ps);
    ctx_free(&c);
}

/* The tapered plan (BUCKET_TAPER) on a scaled-down BERT layout: word
 * embeddings (a lookup), positions, then 24 layers of four matrices, the
 * biases in the no-decay group. Each bucket, seen from its top, must hold
 * its cap (half of what its group still has below, lookups left out, within
 * [bucket/16, bucket]) unless its group or a lookup's bucket stops it, and
 * no more than the cap plus its lowest parameter; the last buckets shrink. */
static void test_bucket_plan_taper(void)
{
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    ParamSet ps;
    params_init(&ps);
    int64_t word = 3000, pos = 50, mats[4] = {300, 100, 400, 400}, bias = 8;
    int iw = params_add(&ps, "word", 1, &word, INIT_UNIFORM, 0.1f, 1);
    params_add(&ps, "pos", 1, &pos, INIT_UNIFORM, 0.1f, 1);
    char n[32];
    for (int l = 0; l < 24; l++)
        for (int m = 0; m < 4; m++) {
            snprintf(n, sizeof n, "l%d.w%d", l, m);
            params_add(&ps, n, 1, &mats[m], INIT_UNIFORM, 0.1f, 1);
            snprintf(n, sizeof n, "l%d.b%d", l, m);
            params_add(&ps, n, 1, &bias, INIT_UNIFORM, 0.1f, 0);
        }
    params_alloc(&ps, &c, 3);
    ps.p[iw].lookup = 1;
    const size_t bucket = 2500;
    for (int iso = 0; iso < 2; iso++) {
        BucketPlan bp;
        bucket_plan_build(&bp, &ps, bucket, BUCKET_TAPER | (iso ? BUCKET_ISOLATE_LOOKUPS : 0));
        int ok = bp.b[0].end == ps.total && bp.b[bp.n - 1].begin == 0, bad = -1;
        for (int k = 0; k < bp.n && ok; k++) {
            const DistBucket *b = &bp.b[k];
            size_t g0 = b->begin < ps.n_decay ? 0 : ps.n_decay, rest = 0, lowest = 0;
            int stop = b->begin == g0, lone = 0;
            for (int i = 0; i < ps.n; i++) {
                const ParamInfo *p = &ps.p[i];
                int lookup = iso && p->lookup;
                if (p->offset >= g0 && p->offset < b->end && !lookup) rest += p->numel;
                if (p->offset == b->begin) lowest = p->numel, lone |= lookup;
                if (lookup && p->offset + p->numel == b->begin) stop = 1;   /* a lookup below */
            }
            size_t cap = rest / 2;
            cap = cap > bucket ? bucket : cap < bucket / 16 ? bucket / 16 : cap;
            size_t size = b->end - b->begin;
            if (k) ok &= b->end == bp.b[k - 1].begin;
            ok &= !(b->begin < ps.n_decay && b->end > ps.n_decay);
            if (!lone) ok &= (stop || size >= cap) && size - lowest < cap;
            if (!ok) bad = k;
        }
        /* isolated lookup: the decay group's last other bucket, layer 0's
         * last matrices, is small (without isolation the table itself is
         * produced last: that bucket is the table's) */
        int last = -1;
        for (int k = 0; k < bp.n; k++)
            if (bp.b[k].end <= ps.n_decay && !(iso && bp.b[k].begin == ps.p[iw].offset &&
                                               bp.b[k].n_params == 1))
                last = k;
        if (iso)
            ok &= last > 0 && bp.b[last].end - bp.b[last].begin <= bucket / 4 &&
                  bp.b[last - 1].end - bp.b[last - 1].begin >= bp.b[last].end - bp.b[last].begin;
        char name[96];
        snprintf(name, sizeof name, "tapered buckets%s", iso ? ", lookup isolated: caps kept, "
                 "the last ones small" : ": caps kept");
        if (bad >= 0)
            check_true(name, ok, "bucket %d of %d breaks the taper", bad, bp.n);
        else
            check_true(name, ok, "the last bucket before the table (%d of %d, %zu elements) is "
                       "not small", last, bp.n, last >= 0 ? bp.b[last].end - bp.b[last].begin : 0);
        bucket_plan_free(&bp);
    }
    /* bucket size 0 means one bucket (per group), taper or not */
    BucketPlan one;
    bucket_plan_build(&one, &ps, 0, BUCKET_TAPER);
    check_true("tapered buckets of size 0: one per group", one.n == 2, "%d buckets", one.n);
    bucket_plan_free(&one);
    params_free(&ps);
    ctx_free(&c);
}

/* ---- readiness on real models ---- */

typedef struct Snap {
    const ParamSet *ps;
    const BucketPlan *bp;
    float *copy;           /* the buckets' gradients when they were handed out */
    int *count;            /* per bucket */
    int during;            /* handed out while backward was still walking */
    int walking;
} Snap;

static void snap_issue(void *user, int b)
{
    Snap *s = (Snap *)user;
    const DistBucket *k = &s->bp->b[b];
    memcpy(s->copy + k->begin, s->ps->grad + k->begin, (k->end - k->begin) * sizeof(float));
    s->count[b]++;
    s->during += s->walking;
}

static void test_ready(const char *what, Model *m, Ctx *c, Feed *fd, size_t bucket_elems)
{
    ParamSet *ps = &m->params;
    BucketPlan bp;
    bucket_plan_build(&bp, ps, bucket_elems, 0);
    Snap s = {ps, &bp, calloc(ps->total, sizeof(float)), calloc((size_t)bp.n, sizeof(int)), 0, 0};
    GradReady g;
    grad_ready_init(&g, ps, &bp, snap_issue, &s);
    for (int step = 0; step < 2; step++) {   /* the tracker is reused across steps */
        memset(s.count, 0, (size_t)bp.n * sizeof(int));
        s.during = 0;
        params_zero_grad(ps);
        fd->next(fd, c, 0, (uint32_t)step);
        Tensor *loss = model_loss(c, m, fd->in, 0.0f, NULL);
        grad_ready_reset(&g);
        c->bwd_hook = &g.hook;
        s.walking = 1;
        ad_backward(c, loss, 1.0f);
        s.walking = 0;
        c->bwd_hook = NULL;
        grad_ready_finish(&g);
        tensor_release(loss);
    }
    int once = 1;
    for (int b = 0; b < bp.n; b++) once &= s.count[b] == 1;
    char name[128];
    snprintf(name, sizeof name, "%s: each of %d buckets all-reduced once", what, bp.n);
    check_true(name, once, "a bucket was handed out %s", "0 or several times");
    snprintf(name, sizeof name, "%s: a bucket's gradients were final when handed out", what);
    check_true(name, !memcmp(s.copy, ps->grad, ps->total * sizeof(float)),
               "some gradient changed after its bucket was handed out");
    snprintf(name, sizeof name, "%s: buckets go out during backward", what);
    check_true(name, s.during >= bp.n / 2, "only %d of %d buckets before backward ended",
               s.during, bp.n);
    grad_ready_free(&g);
    bucket_plan_free(&bp);
    free(s.copy);
    free(s.count);
}

/* ---- the deferred lookup gradient (train/parallel/dist.c, CTRAIN_DIST_SPARSE_EMB) ----
 * dist.c's rule (grad_ready_lookup_deferrable) picks the node; its backward
 * writes compact rows (ops/embedding.h) into the test's buffers. */
typedef struct Defer {
    GradReady *g;
    const Ctx *c;
    const Node *node;
    int bucket;
    size_t off, N, V, D;
    float *rows;
    int32_t *ids;
    int asked;             /* lookups' backwards met so far */
    int issued_before;     /* the table's bucket was out before the first lookup's backward */
} Defer;

static int defer_pred(void *user, const Node *n, int p)
{
    Defer *df = (Defer *)user;
    if (df->node) return n == df->node;
    if (!grad_ready_lookup_deferrable(df->g, n, p, df->c->bwd_depth)) return 0;
    df->node = n;
    df->bucket = df->g->bp->param_bucket[p];
    df->off = df->g->ps->p[p].offset;
    return 1;
}

static int defer_take(void *user, const void *node, float **rows, int32_t **ids)
{
    Defer *df = (Defer *)user;
    const Node *n = (const Node *)node;
    if (df->asked++ == 0) df->issued_before = df->g->issued[df->bucket];
    if (n != df->node) return 0;
    df->N = n->saved[0]->numel;
    df->V = (size_t)n->i[0];
    df->D = (size_t)n->i[1];
    df->rows = (float *)malloc(df->N * df->D * sizeof(float));
    df->ids = (int32_t *)malloc(df->N * sizeof(int32_t));
    *rows = df->rows;
    *ids = df->ids;
    return 1;
}

/* BERT-tiny, buckets of the default size with the word embeddings alone in
 * theirs: with the lookup deferred that bucket goes out before any lookup's
 * backward (after the decoder's, not with the position and token-type
 * tables at the very end), nothing adds to it afterwards, and its gradient
 * plus the compact rows is the full gradient. */
static void test_ready_deferred(void)
{
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 5);
    FeedSpec fs = {"synthetic", "bert-tiny", 2, 2, 0, 1, 0, 7, 16, NULL, 300, NULL};
    Feed fd;
    feed_open(&fd, &c, &fs);
    BertConfig bc;
    bert_config_named(&bc, "bert-tiny", fd.vocab_size);
    Model m;
    bert_create(&m, &c, &bc, 3);
    ParamSet *ps = &m.params;
    fd.next(&fd, &c, 0, 0);
    /* the reference: every gradient added by backward itself */
    uint64_t rng = c.rng_offset;   /* both runs draw the same dropout masks */
    params_zero_grad(ps);
    Tensor *loss = model_loss(&c, &m, fd.in, 0.0f, NULL);
    ad_backward(&c, loss, 1.0f);
    tensor_release(loss);
    float *ref = (float *)malloc(ps->total * sizeof(float));
    memcpy(ref, ps->grad, ps->total * sizeof(float));
    /* deferred */
    BucketPlan bp;
    bucket_plan_build(&bp, ps,
                      (size_t)(dist_bucket_mb_auto(ps->total * sizeof(float)) * 1048576.0f / 4.0f), 1);
    Snap sn = {ps, &bp, calloc(ps->total, sizeof(float)), calloc((size_t)bp.n, sizeof(int)), 0, 0};
    GradReady g;
    grad_ready_init(&g, ps, &bp, snap_issue, &sn);
    Defer df = {&g, &c, NULL, -1, 0, 0, 0, 0, NULL, NULL, 0, 0};
    g.defer = defer_pred;
    g.defer_user = &df;
    params_zero_grad(ps);
    c.rng_offset = rng;
    loss = model_loss(&c, &m, fd.in, 0.0f, NULL);
    grad_ready_reset(&g);
    c.bwd_hook = &g.hook;
    c.emb_defer = defer_take;
    c.emb_defer_user = &df;
    ad_backward(&c, loss, 1.0f);
    c.bwd_hook = NULL;
    c.emb_defer = NULL;
    grad_ready_finish(&g);
    tensor_release(loss);
    check_true("deferred lookup: the word embeddings' lookup was deferred",
               df.node && df.rows && df.V == (size_t)fd.vocab_size, "node %p rows %p V %zu",
               (const void *)df.node, (void *)df.rows, df.V);
    if (df.rows) {
        check_true("deferred lookup: the table alone in its bucket",
                   bp.b[df.bucket].n_params == 1, "%d parameters", bp.b[df.bucket].n_params);
        check_true("deferred lookup: its bucket went out before the first lookup's backward",
                   df.issued_before && df.asked == 3, "bucket %d, %d lookups", df.bucket,
                   df.asked);
        check_true("deferred lookup: no gradient changed after its bucket went out",
                   !memcmp(sn.copy, ps->grad, ps->total * sizeof(float)), "");
        embedding_rows_add_cpu(ps->grad + df.off, df.rows, df.ids, df.N, df.V, df.D, 1.0f);
        /* the two add the same terms in other orders: f32 rounding of each
         * sum, relative to the result, or to the gradients' scale (the
         * largest |entry|) where terms cancel (an entry near 0 among larger
         * ones) */
        double worst = 0.0, scale = 0.0;
        for (size_t i = 0; i < ps->total; i++) scale = fmax(scale, fabs(ref[i]));
        for (size_t i = 0; i < ps->total; i++) {
            double e = fabs((double)ps->grad[i] - ref[i]) / (fabs(ref[i]) + 1e-3 * scale + 1e-12);
            if (e > worst) worst = e;
        }
        check_true("deferred lookup: dense part + rows = the full gradient", worst < 1e-5,
                   "worst difference %g of |ref| + 1e-3 max |ref|", worst);
    }
    free(df.rows);
    free(df.ids);
    free(ref);
    free(sn.copy);
    free(sn.count);
    grad_ready_free(&g);
    bucket_plan_free(&bp);
    model_free(&m);
    feed_close(&fd, &c);
    ctx_free(&c);
}

static void same_batch(Feed *f, Ctx *c, uint64_t e, uint32_t b)
{
    (void)f; (void)c; (void)e; (void)b;
}

static void ready_models(void)
{
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 5);
    /* MLP */
    {
        Model m;
        int hidden[2] = {64, 32};
        mlp_create(&m, &c, 20, hidden, 2, 5, 3);
        m.training = 1;
        float x[8 * 20];
        int32_t y[8];
        check_fill(x, 8 * 20, -1, 1);
        for (int i = 0; i < 8; i++) y[i] = i % 5;
        Feed fd;   /* hands the same batch every time */
        memset(&fd, 0, sizeof fd);
        fd.n_in = 2;
        fd.in[0] = tensor_from_f32(&c, x, DT_F32, 2, (int64_t[]){8, 20});
        fd.in[1] = tensor_from_host(&c, y, DT_I32, 1, (int64_t[]){8});
        fd.next = same_batch;
        test_ready("mlp", &m, &c, &fd, 500);
        tensor_release(fd.in[0]);
        tensor_release(fd.in[1]);
        model_free(&m);
    }
    /* BERT-tiny (tied word embeddings: input embedding and MLM decoder), with
     * and without recompute, and with q, k, v as three Linears (CTRAIN_QKV_PROJ=0;
     * the default joins them: one node's gradient finishes three parameters) */
    for (int rec = 0; rec < 3; rec++) {
        if (rec == 2) setenv("CTRAIN_QKV_PROJ", "0", 1);
        FeedSpec fs = {"synthetic", "bert-tiny", 2, 2, 0, 1, 0, 7, 16, NULL, 300, NULL};
        Feed fd;
        feed_open(&fd, &c, &fs);
        BertConfig bc;
        bert_config_named(&bc, "bert-tiny", fd.vocab_size);
        bc.recompute.every = rec == 1;
        Model m;
        bert_create(&m, &c, &bc, 3);
        snprintf(m.name, sizeof m.name, "bert-tiny");
        test_ready(rec == 2 ? "bert-tiny q, k, v apart" : rec ? "bert-tiny recompute all"
                                                             : "bert-tiny",
                   &m, &c, &fd, 20000);
        model_free(&m);
        feed_close(&fd, &c);
        if (rec == 2) unsetenv("CTRAIN_QKV_PROJ");
    }
    /* ResNet18 at width 16 (batch norm, residuals), recompute every 2nd block */
    for (int rec = 0; rec < 3; rec += 2) {
        FeedSpec fs = {"synthetic", "resnet18", 2, 2, 32, 1, 10, 7, 0, NULL, 0, NULL};
        Feed fd;
        feed_open(&fd, &c, &fs);
        ResNetConfig rc;
        resnet_config_default(&rc, 18);
        rc.width = 16;
        rc.classes = 10;
        rc.recompute.every = rec;
        Model m;
        resnet_create(&m, &c, &rc, 3);
        test_ready(rec ? "resnet18 recompute every:2" : "resnet18", &m, &c, &fd, 8000);
        model_free(&m);
        feed_close(&fd, &c);
    }
    ctx_free(&c);
}

/* ---- --grad-reduce ---- */

static void test_grad_reduce_option(void)
{
    TrainOptions o;
    train_options_default(&o);
    check_true("--grad-reduce: f32 by default", o.dist.grad_reduce == DT_F32, "got %s",
               dtype_name(o.dist.grad_reduce));
    char *bf16[] = {"--gpus", "2", "--grad-reduce", "bf16"};
    train_options_parse(&o, 4, bf16, "train");
    check_true("--grad-reduce bf16 parses", o.dist.grad_reduce == DT_BF16 && o.dist.gpus == 2,
               "got %s, gpus %d", dtype_name(o.dist.grad_reduce), o.dist.gpus);
    char *f32[] = {"--grad-reduce", "f32"};
    train_options_parse(&o, 2, f32, "train");
    check_true("--grad-reduce f32 parses", o.dist.grad_reduce == DT_F32, "got %s",
               dtype_name(o.dist.grad_reduce));
    const char *bad[] = {"fp32", "BF16", "f16", "fp16", "", "bf16 "};
    int rejected = 1;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        rejected &= dist_grad_reduce_parse(bad[i]) == -1;
    check_true("--grad-reduce: only f32 and bf16", rejected, "a bad value parsed");

    BenchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    bench_config_model(&cfg, MODEL_BERT_LARGE, 224, 0);
    cfg.precision = PREC_BF16;
    cfg.batch = 32;
    cfg.seq = 128;
    cfg.graph = 1;
    cfg.warmup = 3;
    cfg.steps = 10;
    cfg.device = DEV_CUDA;
    cfg.gpus = 2;
    cfg.grad_reduce = DT_BF16;
    bench_train_options(&cfg, &o);
    check_true("bench --grad-reduce bf16: the ranks train with it", o.dist.grad_reduce == DT_BF16,
               "got %s", dtype_name(o.dist.grad_reduce));
    BenchRow row;
    char label[96];
    bench_row_init(&row, &cfg);
    bench_config_label(&cfg, label, sizeof label);
    check_true("bench --grad-reduce bf16: mode and label say so",
               !strcmp(row.mode, "graph dp-x2-bf16") && strstr(label, "(bf16 all-reduce)"),
               "mode '%s', label '%s'", row.mode, label);
    cfg.grad_reduce = DT_F32;
    bench_row_init(&row, &cfg);
    bench_config_label(&cfg, label, sizeof label);
    check_true("bench f32 all-reduce: mode and label as before",
               !strcmp(row.mode, "graph dp-x2") && !strstr(label, "bf16 all-reduce"),
               "mode '%s', label '%s'", row.mode, label);
}

/* params_grad_move (the data-parallel gradients in NCCL-registered memory):
 * the gradients copied, every parameter's grad view in the new buffer, the
 * memory figures unchanged by a move out and back, and the buffer back in
 * the ParamSet's own memory afterwards (freed by params_free). */
static void test_grad_move(void)
{
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    ParamSet ps;
    params_init(&ps);
    int64_t a = 6, b[2] = {2, 3};
    params_add(&ps, "w", 2, b, INIT_UNIFORM, 0.1f, 1);
    params_add(&ps, "bias", 1, &a, INIT_ZERO, 0.0f, 0);
    params_alloc(&ps, &c, 1);
    for (size_t i = 0; i < ps.total; i++) ps.grad[i] = (float)i + 0.5f;
    size_t mem0 = c.mem.current;
    float *mine = (float *)aligned_alloc(64, 64 * ((ps.total * sizeof(float) + 63) / 64));
    params_grad_move(&ps, mine);
    int ok = ps.grad == mine && ps.grad_external;
    for (int i = 0; i < ps.n; i++) ok &= ps.p[i].t->grad->data == (void *)(mine + ps.p[i].offset);
    for (size_t i = 0; i < ps.total; i++) ok &= mine[i] == (float)i + 0.5f;
    check_true("grad move: into the caller's buffer, views and values follow", ok, "");
    check_true("grad move: the ParamSet's own buffer freed", c.mem.current == mem0 -
               ps.total * sizeof(float), "%zu against %zu", c.mem.current, mem0);
    mine[3] = -1.0f;   /* training goes on in the moved buffer */
    params_grad_move(&ps, NULL);
    ok = ps.grad != mine && !ps.grad_external && ps.grad[3] == -1.0f && ps.grad[4] == 4.5f;
    for (int i = 0; i < ps.n; i++) ok &= ps.p[i].t->grad->data == (void *)(ps.grad + ps.p[i].offset);
    check_true("grad move: back into its own memory, values kept", ok, "");
    check_true("grad move: memory figures as before", c.mem.current == mem0, "%zu against %zu",
               c.mem.current, mem0);
    free(mine);
    params_free(&ps);
    ctx_free(&c);
}

/* params_values_move (the sharded update's weights in a symmetric window):
 * out into the caller's buffer and back, the views following each time. */
static void test_values_move(void)
{
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 2);
    ParamSet ps;
    params_init(&ps);
    int64_t shape[2] = {4, 5};
    params_add(&ps, "emb", 2, shape, INIT_NORMAL, 0.02f, 1);
    params_add(&ps, "gain", 1, shape, INIT_ONE, 0.0f, 0);
    params_alloc(&ps, &c, 7);
    float *before = (float *)malloc(ps.total * sizeof(float));
    float *win = (float *)malloc(ps.total * sizeof(float));
    memcpy(before, ps.data, ps.total * sizeof(float));
    size_t mem0 = c.mem.current;
    for (int round = 0; round < 2; round++) {
        params_values_move(&ps, round ? NULL : win, NULL);
        float *at = round ? ps.data : win;
        int ok = ps.data == at && ps.values_external == !round && ps.lowp == NULL &&
                 memcmp(at, before, ps.total * sizeof(float)) == 0;
        for (int i = 0; i < ps.n; i++) ok &= ps.p[i].t->data == (void *)(at + ps.p[i].offset);
        check_true(round ? "values move: back, views and values follow"
                         : "values move: out, views and values follow", ok, "");
        check_true(round ? "values move: memory as before" : "values move: own buffer freed",
                   c.mem.current == mem0 - (round ? 0 : ps.total * sizeof(float)), "%zu, %zu",
                   c.mem.current, mem0);
    }
    params_free(&ps);
    free(win);
    free(before);
    ctx_free(&c);
}

/* The default bucket size: a twelfth of the gradients within [25, 100] MB;
 * --bucket-mb's default asks for it (negative), and 0 stays "one bucket". */
static void test_bucket_auto(void)
{
    const size_t MB = 1024 * 1024;
    check_true("bucket auto: ResNet-50's 102 MB -> 25 MB", dist_bucket_mb_auto(102 * MB) == 25.0f,
               "%g", (double)dist_bucket_mb_auto(102 * MB));
    check_true("bucket auto: BERT-large's 1.34 GB -> 100 MB",
               dist_bucket_mb_auto(1341 * MB) == 100.0f, "%g",
               (double)dist_bucket_mb_auto(1341 * MB));
    float base = dist_bucket_mb_auto(440 * MB);   /* BERT-base */
    check_true("bucket auto: BERT-base's 440 MB -> a twelfth", fabsf(base - 440.0f / 12) < 1e-3f,
               "%g", (double)base);
    check_true("bucket auto: nothing -> 25 MB", dist_bucket_mb_auto(0) == 25.0f, "%g",
               (double)dist_bucket_mb_auto(0));
    DistOptions o;
    dist_options_default(&o);
    check_true("bucket auto: the default --bucket-mb asks for it", o.bucket_mb < 0, "%g",
               (double)o.bucket_mb);
}

int main(void)
{
    check_seed(17);
    uint32_t ns[] = {1, 10, 1000, 1001, 1027};
    uint32_t ws[] = {1, 2, 3, 4, 8};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (size_t j = 0; j < sizeof ws / sizeof ws[0]; j++)
            if (ns[i] >= ws[j]) test_shard(ns[i], ws[j], 1 + (uint32_t)(i % 3));
    test_loader_shards();
    test_mlm_rows();
    test_bucket_plan();
    test_bucket_plan_taper();
    test_bucket_auto();
    test_grad_move();
    test_values_move();
    test_ready_deferred();
    ready_models();
    test_grad_reduce_option();
    return check_summary();
}
