/* dist_bucket.h — gradient buckets and when they are ready.
 *
 * Buckets. The gradient buffer (one f32 block, engine/params.h: the
 * weight-decay group [0, n_decay) then the rest [n_decay, total), each in
 * registration = forward order) is cut into contiguous ranges of about
 * `bucket_elems` elements that together cover [0, total) exactly. Cuts fall
 * only on parameter boundaries (a parameter is never split, so a parameter
 * larger than a bucket is a bucket of its own) and always at n_decay (so a
 * bucket never waits on both groups). The plan walks from the end of the
 * buffer towards the start, because backward produces gradients in reverse
 * forward order: bucket 0 ends at `total`, bucket k + 1 ends where bucket k
 * begins. Each group's last bucket (nearest its start) takes what is left
 * and may be small. bucket_elems 0: one bucket.
 *
 * Readiness. A bucket may be all-reduced once no later backward node adds
 * into any of its parameters' gradients. GradReady watches the autograd
 * walk (engine/autograd.h's hook): at the start of the outer walk it counts
 * each parameter's uses as a node input on the tape; after each node it
 * counts them down; a parameter whose count reaches 0 is final, a bucket
 * whose parameters are all final is handed to `issue` (the all-reduce).
 * A parameter used twice (BERT's tied word embeddings: the input embedding
 * and the MLM decoder) is final after its last use in backward order.
 *
 * Recomputed segments: the outer tape holds one "recompute" node for a
 * segment, without its parameters; their nodes appear only on the sub-tape
 * the segment re-runs during backward. Their uses are counted when that
 * sub-tape's walk begins, so they become final inside the segment's
 * backward, right after their last use there (not only at the end). This is
 * exact as long as a parameter inside a segment is not also used by a node
 * that backward visits later (an earlier layer): then it would have been
 * final, and all-reduced, too early. That case is detected (a sub-tape that
 * uses an already final parameter) and fatal, with a hint to run without
 * recompute; the models here never do it.
 * Parameters no node used (an unused head) and everything when the hook did
 * not run are issued by grad_ready_finish, in bucket order.
 *
 * Every rank walks the same tape, so every rank issues the buckets in the
 * same order, as NCCL requires.
 *
 * Deferred uses (GradReady.defer): a use the caller takes care of itself is
 * not counted, so a parameter whose only other use came earlier in backward
 * is final sooner (BERT's word embeddings after the MLM decoder, not after
 * the lookup at the very end).
 */
#ifndef CTRAIN_TRAIN_DIST_BUCKET_H
#define CTRAIN_TRAIN_DIST_BUCKET_H

#include <stddef.h>
#include "engine/autograd.h"
#include "engine/params.h"

typedef struct DistBucket {
    size_t begin, end;   /* gradient elements [begin, end) */
    int n_params;
} DistBucket;

typedef struct BucketPlan {
    DistBucket *b;
    int n;
    int *param_bucket;   /* [ps->n] the bucket of each parameter */
    int *by_offset;      /* [ps->n] parameter indices sorted by offset */
    int n_params;
} BucketPlan;

/* The default bucket size in MB for `grad_bytes` of gradients: a twelfth
 * of them, at least 25 MB and at most 100. Measured on 2 H200s: ResNet-50
 * (102 MB of gradients) scales best with PyTorch's 25 MB (97.5%), where
 * the overlap needs several buckets; BERT-large (1.34 GB) with 100 MB
 * (+2% over 25 MB: fewer, larger all-reduces, the same bytes). */
float dist_bucket_mb_auto(size_t grad_bytes);

/* Plan the buckets of ps (see above). flags:
 *   BUCKET_ISOLATE_LOOKUPS  every parameter marked lookup (engine/params.h)
 *       gets a bucket of its own, so the deferred lookup gradient
 *       (train/parallel/dist.c, CTRAIN_DIST_SPARSE_EMB) lets it go out as soon as its
 *       other uses are done, not with its neighbours;
 *   BUCKET_TAPER  the buckets shrink towards the start of each group: a
 *       bucket holds at most half of what its group still has below it
 *       (isolated lookups not counted), and at least a sixteenth of
 *       bucket_elems. Backward produces the start of the buffer last, so the
 *       last buckets are small and what is left to send after backward (a
 *       reduce-scatter, an update share, an all-gather) is short: for
 *       BERT-large at 100 MB with the word table isolated, the last buckets
 *       before the table's own are 56, 36, 12 and 6 MB instead of 100 and
 *       10. A table that is not isolated counts as still to come, so the
 *       caps stay whole there (BERT without the sparse lookup: no taper).
 *       No taper with bucket_elems 0 (one bucket). */
/* train/parallel/dist.c tapers by default from buckets of this size up: on 2 H200s
 * BERT-large (100 MB buckets) 94.8% -> 95.2%, ResNet-50 (25 MB, where the
 * last bucket is short anyway) 98.5% -> 97.8% */
#define DIST_TAPER_AUTO_MB 50.0f
#define BUCKET_ISOLATE_LOOKUPS 1
#define BUCKET_TAPER 2
void bucket_plan_build(BucketPlan *bp, const ParamSet *ps, size_t bucket_elems, int flags);
void bucket_plan_free(BucketPlan *bp);
/* The parameter whose value view is t (found by address), or -1. */
int bucket_param_of(const BucketPlan *bp, const ParamSet *ps, const Tensor *t);
/* Every parameter t covers: one for a parameter's own view, several for a
 * view joining neighbours (engine/params.h: params_join, BERT's Wqkv), into
 * p[] (at most max); their count, 0 when t is no parameter. */
int bucket_params_of(const BucketPlan *bp, const ParamSet *ps, const Tensor *t, int *p, int max);

typedef void (*BucketIssueFn)(void *user, int bucket);

typedef struct GradReady {
    const ParamSet *ps;
    const BucketPlan *bp;
    int *uses;               /* [params] uses left on the tapes counted so far */
    unsigned char *state;    /* [params] GR_UNSEEN, GR_PENDING, GR_FINAL */
    int *left;               /* [buckets] parameters not final yet */
    unsigned char *issued;   /* [buckets] */
    int n_issued;
    BucketIssueFn issue;
    void *user;
    AdHook hook;             /* set ctx->bwd_hook = &g->hook for the walk to report */
    /* Optional (NULL: every use counts): defer(defer_user, n, p) = 1 says
     * node n's use of parameter p does not count, because n's gradient for
     * p arrives another way (data parallel's compact lookup gradient,
     * train/parallel/dist.c). Asked at the walk's begin and after n ran, with the
     * same answer both times. */
    int (*defer)(void *user, const Node *n, int p);
    void *defer_user;
} GradReady;

enum { GR_UNSEEN = 0, GR_PENDING = 1, GR_FINAL = 2 };

/* The rule for a deferrable use (data parallel's sparse lookup gradient,
 * train/parallel/dist.c): node n is an "embedding" lookup of parameter p, a table
 * marked lookup (engine/params.h) with more than 16 rows and at least 4x
 * more rows than the lookup has positions, met on the outer tape (depth 1:
 * not inside a recomputed segment) before p's bucket went out. */
int grad_ready_lookup_deferrable(const GradReady *g, const Node *n, int p, int depth);

void grad_ready_init(GradReady *g, const ParamSet *ps, const BucketPlan *bp, BucketIssueFn issue,
                     void *user);
/* Before a backward whose gradients are to be all-reduced: nothing counted,
 * nothing issued. */
void grad_ready_reset(GradReady *g);
/* After it: issue every bucket not issued yet, in bucket order. */
void grad_ready_finish(GradReady *g);
void grad_ready_free(GradReady *g);

#endif
