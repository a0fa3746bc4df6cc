/* recompute.c — the recompute node: forward without recording, backward by
 * re-running onto a sub-tape and walking it. */
#include "recompute.h"

#include <stdlib.h>
#include <string.h>
#include "autograd.h"
#include "error.h"
#include "log.h"

int recompute_parse(const char *s, RecomputePolicy *p)
{
    if (!strcmp(s, "none")) { p->every = 0; return 0; }
    if (!strcmp(s, "all")) { p->every = 1; return 0; }
    if (!strncmp(s, "every:", 6)) {
        char *end;
        long n = strtol(s + 6, &end, 10);
        if (*end == 0 && n >= 1 && n < 1000000) { p->every = (int)n; return 0; }
    }
    return -1;
}

/* Node layout: in[0] = x (held), saved[0] = x (its values, for the re-run);
 * i[0] = Philox offset at segment start; fn and arg in i[1], i[2]. */
static void recompute_backward(Ctx *c, Node *n)
{
    SegmentFn fn = (SegmentFn)(uintptr_t)n->i[1];
    void *arg = (void *)(uintptr_t)n->i[2];
    Tensor *x = n->saved[0];
    Tensor *dy = n->out->grad;

    /* re-run onto a fresh sub-tape, with the RNG rewound to the segment start */
    Tape *outer = c->tape;
    c->tape = tape_new();
    uint64_t rng_keep = c->rng_offset;
    c->rng_offset = (uint64_t)n->i[0];
    int grad = ad_set_grad(c, 1);
    c->recomputing++;
    Tensor *y = fn(c, arg, x);
    c->recomputing--;
    c->recomputed++;
    ad_set_grad(c, grad);
    c->rng_offset = rng_keep;
    LOG_T("recompute: re-ran segment (%d nodes)", c->tape->n);

    /* walk the sub-tape from y with the incoming gradient */
    CT_ASSERT(tensor_same_shape(y, dy), "recompute: re-run output shape differs from forward");
    if (y->requires_grad) {
        tensor_retain(dy);
        y->grad = dy;
        ad_backward_from(c, y);
    } else {
        ad_tape_clear(c);
    }
    tensor_release(y);
    tape_free(c->tape);
    c->tape = outer;
}

Tensor *recompute_segment(Ctx *c, SegmentFn fn, void *arg, Tensor *x)
{
    if (!c->grad_enabled) return fn(c, arg, x);
    uint64_t rng_start = c->rng_offset;
    ad_set_grad(c, 0);
    Tensor *y = fn(c, arg, x);
    ad_set_grad(c, 1);
    Node *n = ad_record(c, "recompute", recompute_backward, y, &x, 1);
    n->i[0] = (int64_t)rng_start;
    n->i[1] = (int64_t)(uintptr_t)fn;
    n->i[2] = (int64_t)(uintptr_t)arg;
    ad_save(n, x);
    return y;
}
