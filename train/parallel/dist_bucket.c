/* dist_bucket.c — the bucket plan and the readiness tracker (dist_bucket.h
 * says how both work and why). Pure host code: no device, no NCCL. */
#include "dist_bucket.h"

#include <stdlib.h>
#include <string.h>
#include "engine/error.h"
#include "ops/embedding.h"

/* The most parameters one joined view covers (params_join: BERT's q, k, v). */
#define BUCKET_JOIN_MAX 8

static const ParamSet *sort_ps;
static int by_offset_cmp(const void *a, const void *b)
{
    size_t x = sort_ps->p[*(const int *)a].offset, y = sort_ps->p[*(const int *)b].offset;
    return (x > y) - (x < y);
}

float dist_bucket_mb_auto(size_t grad_bytes)
{
    double mb = (double)grad_bytes / 12.0 / (1024.0 * 1024.0);
    return (float)(mb < 25.0 ? 25.0 : mb > 100.0 ? 100.0 : mb);
}

/* The taper's cap for a bucket (BUCKET_TAPER, dist_bucket.h) with `rest`
 * elements of its group at or below its top (upto[] below: the group's
 * elements up to and including each offset-ordered parameter, isolated
 * lookups left out): half of that, within [bucket_elems / 16, bucket_elems]. */
static size_t taper_cap(size_t bucket_elems, size_t rest)
{
    size_t cap = rest / 2, least = bucket_elems / 16 ? bucket_elems / 16 : 1;
    return cap > bucket_elems ? bucket_elems : cap < least ? least : cap;
}

void bucket_plan_build(BucketPlan *bp, const ParamSet *ps, size_t bucket_elems, int flags)
{
    memset(bp, 0, sizeof *bp);
    int n = ps->n, isolate = flags & BUCKET_ISOLATE_LOOKUPS, taper = flags & BUCKET_TAPER;
    bp->n_params = n;
    bp->param_bucket = (int *)malloc((size_t)(n ? n : 1) * sizeof(int));
    bp->by_offset = (int *)malloc((size_t)(n ? n : 1) * sizeof(int));
    bp->b = (DistBucket *)calloc((size_t)(n ? n : 1), sizeof(DistBucket));
    size_t *upto = (size_t *)calloc((size_t)(n ? n : 1), sizeof(size_t));
    if (!bp->param_bucket || !bp->by_offset || !bp->b || !upto) ct_fatal("out of host memory");
    for (int i = 0; i < n; i++) bp->by_offset[i] = i;
    sort_ps = ps;
    qsort(bp->by_offset, (size_t)n, sizeof(int), by_offset_cmp);
    sort_ps = NULL;
    if (!bucket_elems) {   /* one bucket (--bucket-mb 0): nothing to taper */
        bucket_elems = ps->total ? ps->total : 1;
        taper = 0;
    }
    /* upto[k]: the elements of parameters 0..k (offset order) in k's
     * group, lookups left out when isolated (they go out on their own) */
    for (int k = 0; k < n; k++) {
        const ParamInfo *p = &ps->p[bp->by_offset[k]];
        int new_group = !k || (p->offset >= ps->n_decay &&
                               ps->p[bp->by_offset[k - 1]].offset < ps->n_decay);
        upto[k] = (new_group ? 0 : upto[k - 1]) + (isolate && p->lookup ? 0 : p->numel);
    }
    /* from the last parameter down; a bucket closes once it holds its cap
     * (bucket_elems, or the taper's), or where the weight-decay group
     * begins below it */
    size_t end = ps->total, cap = bucket_elems;
    DistBucket *cur = NULL;
    int prev_alone = 0;
    for (int k = n - 1; k >= 0; k--) {
        const ParamInfo *p = &ps->p[bp->by_offset[k]];
        int crosses = cur && end >= ps->n_decay && p->offset < ps->n_decay;
        int alone = isolate && p->lookup;   /* a bucket of its own */
        if (!cur || crosses || alone || prev_alone || cur->end - p->offset - p->numel >= cap) {
            if (cur) cur->begin = end;
            cur = &bp->b[bp->n++];
            cur->end = end;
            cap = taper ? taper_cap(bucket_elems, upto[k]) : bucket_elems;
        }
        bp->param_bucket[bp->by_offset[k]] = bp->n - 1;
        cur->n_params++;
        end = p->offset;
        prev_alone = alone;
    }
    if (cur) cur->begin = end;   /* 0: the lowest parameter starts the buffer */
    free(upto);
}

void bucket_plan_free(BucketPlan *bp)
{
    free(bp->b);
    free(bp->param_bucket);
    free(bp->by_offset);
    memset(bp, 0, sizeof *bp);
}

/* The place in bp->by_offset of the parameter starting at t's data, or -1. */
static int by_offset_at(const BucketPlan *bp, const ParamSet *ps, const Tensor *t)
{
    if (!t || !t->is_param || !ps->data) return -1;
    const float *d = (const float *)t->data;
    if (d < ps->data || d >= ps->data + ps->total) return -1;
    size_t off = (size_t)(d - ps->data);
    int lo = 0, hi = bp->n_params - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        size_t o = ps->p[bp->by_offset[mid]].offset;
        if (o == off) return mid;
        if (o < off) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

int bucket_param_of(const BucketPlan *bp, const ParamSet *ps, const Tensor *t)
{
    int at = by_offset_at(bp, ps, t);
    return at < 0 ? -1 : bp->by_offset[at];
}

int bucket_params_of(const BucketPlan *bp, const ParamSet *ps, const Tensor *t, int *p, int max)
{
    int at = by_offset_at(bp, ps, t), n = 0;
    if (at < 0) return 0;
    const size_t end = ps->p[bp->by_offset[at]].offset + t->numel;
    for (; at < bp->n_params && (n == 0 || ps->p[bp->by_offset[at]].offset < end); at++) {
        CT_ASSERT(n < max, "data parallel: a joined view covers more than %d parameters", max);
        p[n++] = bp->by_offset[at];
    }
    return n;
}

/* ---- readiness ---- */

static void issue_bucket(GradReady *g, int b)
{
    if (g->issued[b]) return;
    g->issued[b] = 1;
    g->n_issued++;
    g->issue(g->user, b);
}

static void on_begin(void *user, const Tape *t, int depth)
{
    GradReady *g = (GradReady *)user;
    for (int k = 0; k < t->n; k++) {
        const Node *n = &t->nodes[k];
        for (int i = 0; i < n->n_in; i++) {
            int ps[BUCKET_JOIN_MAX];
            const int np = bucket_params_of(g->bp, g->ps, n->in[i], ps, BUCKET_JOIN_MAX);
            for (int j = 0; j < np; j++) {
                const int p = ps[j];
                if (g->defer && g->defer(g->defer_user, n, p)) continue;
                if (g->state[p] == GR_FINAL)
                    ct_fatal_hint("run with --recompute none (or keep the parameter's uses inside "
                                  "one recomputed segment)",
                                  "data parallel: parameter %s is used in a recomputed segment "
                                  "after its gradient was complete and all-reduced (depth %d)",
                                  g->ps->p[p].name, depth);
                g->uses[p]++;
                g->state[p] = GR_PENDING;
            }
        }
    }
}

static void on_node(void *user, const Node *n, int depth)
{
    GradReady *g = (GradReady *)user;
    (void)depth;
    for (int i = 0; i < n->n_in; i++) {
        int ps[BUCKET_JOIN_MAX];
        const int np = bucket_params_of(g->bp, g->ps, n->in[i], ps, BUCKET_JOIN_MAX);
        for (int j = 0; j < np; j++) {
            const int p = ps[j];
            if (g->state[p] != GR_PENDING) continue;
            if (g->defer && g->defer(g->defer_user, n, p)) continue;
            if (--g->uses[p] > 0) continue;
            g->state[p] = GR_FINAL;
            int b = g->bp->param_bucket[p];
            if (--g->left[b] == 0) issue_bucket(g, b);
        }
    }
}

int grad_ready_lookup_deferrable(const GradReady *g, const Node *n, int p, int depth)
{
    if (strcmp(n->op, "embedding") || n->n_saved < 1 || !g->ps->p[p].lookup) return 0;
    /* inside a recomputed segment the lookup is met after its other uses
     * may have finished the bucket (then on_begin's own check stops the run) */
    if (depth != 1 || g->issued[g->bp->param_bucket[p]]) return 0;
    size_t N = n->saved[0]->numel, V = (size_t)n->i[0];
    return V > EMBEDDING_SMALL_V && V >= 4 * N;   /* the compact form, worth it */
}

void grad_ready_init(GradReady *g, const ParamSet *ps, const BucketPlan *bp, BucketIssueFn issue,
                     void *user)
{
    memset(g, 0, sizeof *g);
    g->ps = ps;
    g->bp = bp;
    g->issue = issue;
    g->user = user;
    size_t np = (size_t)(ps->n ? ps->n : 1), nb = (size_t)(bp->n ? bp->n : 1);
    g->uses = (int *)calloc(np, sizeof(int));
    g->state = (unsigned char *)calloc(np, 1);
    g->left = (int *)calloc(nb, sizeof(int));
    g->issued = (unsigned char *)calloc(nb, 1);
    if (!g->uses || !g->state || !g->left || !g->issued) ct_fatal("out of host memory");
    g->hook.begin = on_begin;
    g->hook.node = on_node;
    g->hook.end = NULL;
    g->hook.user = g;
    grad_ready_reset(g);
}

void grad_ready_reset(GradReady *g)
{
    memset(g->uses, 0, (size_t)g->ps->n * sizeof(int));
    memset(g->state, GR_UNSEEN, (size_t)g->ps->n);
    memset(g->issued, 0, (size_t)g->bp->n);
    for (int b = 0; b < g->bp->n; b++) g->left[b] = g->bp->b[b].n_params;
    g->n_issued = 0;
}

void grad_ready_finish(GradReady *g)
{
    for (int b = 0; b < g->bp->n; b++) issue_bucket(g, b);
}

void grad_ready_free(GradReady *g)
{
    free(g->uses);
    free(g->state);
    free(g->left);
    free(g->issued);
    memset(g, 0, sizeof *g);
}
