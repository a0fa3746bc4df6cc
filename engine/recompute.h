/* recompute.h — gradient checkpointing ("recompute", to keep "checkpoint"
 * for files).
 *
 * Without it, every activation a segment's ops save for their backward stays
 * in memory from the forward until that backward runs: for a deep network
 * that is most of the peak memory. With it, a segment (a ResNet block, a
 * BERT layer) trades memory for compute:
 *
 *   forward:   run the segment with grad mode OFF, so its ops record nothing
 *              and free their intermediates at once; keep only the segment's
 *              input x and the RNG position; record ONE node on the tape.
 *   backward:  when the walk reaches that node, re-run the segment's forward
 *              with grad mode ON onto a fresh sub-tape (same input, same
 *              Philox offset so dropout draws the same masks, batch-norm
 *              running statistics not updated twice), then walk the sub-tape
 *              from the re-run output with the incoming gradient. Parameter
 *              gradients land in the one gradient buffer as usual and x's
 *              gradient flows on into the outer tape.
 *
 * Peak memory falls from "all segments' activations" to "one segment's
 * activations + every segment's input"; the cost is one extra forward of
 * each recomputed segment (about +1/3 of the step's compute).
 */
#ifndef CTRAIN_RECOMPUTE_H
#define CTRAIN_RECOMPUTE_H

#include "ctx.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A segment: y = fn(c, arg, x). It must be deterministic given x, the
 * parameters and the RNG offset (the ops here are). */
typedef Tensor *(*SegmentFn)(Ctx *c, void *arg, Tensor *x);

/* Run fn as a recomputed segment (or plainly, when grad mode is off).
 * `arg` must stay valid until backward has run. */
Tensor *recompute_segment(Ctx *c, SegmentFn fn, void *arg, Tensor *x);

/* Recompute policy: none, all, or every n-th segment. */
typedef struct RecomputePolicy {
    int every;   /* 0: none, 1: all, n: segments 0, n, 2n, ... */
} RecomputePolicy;

/* Parse "none", "all", "every:N"; returns -1 when the text is not a policy. */
int recompute_parse(const char *s, RecomputePolicy *p);
static inline int recompute_wants(const RecomputePolicy *p, int segment)
{
    return p->every > 0 && segment % p->every == 0;
}

#ifdef __cplusplus
}
#endif
#endif
