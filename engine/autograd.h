/* autograd.h — the tape: reverse-mode automatic differentiation.
 *
 * Forward: an op computes its output, and when grad mode is on and some
 * input requires grad, it records a Node {backward function, inputs, saved
 * tensors, small params} at the end of the tape.
 *
 * Backward: ad_backward(loss) seeds d(loss) and walks the tape in reverse.
 * Node order is creation order, so when a node runs, every consumer of its
 * output has already run and the output's gradient is complete. The node's
 * backward reads out->grad and adds into each input's grad (ad_grad_dst).
 * Then, immediately:
 *   - out->grad is freed (an activation gradient lives from its first
 *     producer to its one consumer, no longer);
 *   - saved tensors are released (their data goes once no one else holds it);
 *   - the node drops its hold on its inputs and output.
 * Parameter gradients are views into the one f32 gradient buffer and always
 * accumulate (+=): that is what makes gradient accumulation free.
 *
 * No-grad mode (ad_set_grad / ctx->grad_enabled = 0) records nothing: eval
 * and the recompute forward.
 *
 * Walk hook (ctx->bwd_hook, NULL: none): the walk tells an observer what it
 * does, so data-parallel training (train/parallel/dist.h) can start all-reducing the
 * parameter gradients that are final while the rest of backward runs.
 *   begin(t, depth)  before walking tape t: depth 1 is the outer tape, 2+ a
 *                    recompute segment's sub-tape (walked inside the
 *                    "recompute" node's backward, whose own node call comes
 *                    after its sub-walk has ended)
 *   node(n, depth)   after node n's backward ran, or was skipped because its
 *                    output got no gradient; n's inputs are still readable
 *   end(depth)       after the walk of that tape
 * The hook must not record nodes or walk tapes itself.
 */
#ifndef CTRAIN_AUTOGRAD_H
#define CTRAIN_AUTOGRAD_H

#include "ctx.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NODE_MAX_IN 6
#define NODE_MAX_SAVED 6

typedef struct Node Node;
typedef void (*BackwardFn)(Ctx *c, Node *n);

struct Node {
    const char *op;                 /* op name, for traces and errors */
    BackwardFn backward;
    Tensor *out;                    /* held */
    Tensor *in[NODE_MAX_IN];        /* held: where input gradients go */
    int n_in;
    Tensor *saved[NODE_MAX_SAVED];  /* retained: values backward reads */
    int n_saved;
    float f[8];                     /* small op params */
    int64_t i[8];
};

struct AdHook {
    void (*begin)(void *user, const Tape *t, int depth);
    void (*node)(void *user, const Node *n, int depth);
    void (*end)(void *user, int depth);
    void *user;
};

struct Tape {
    Node *nodes;
    int n, cap;
    int walking;                    /* inside ad_backward */
};

Tape *tape_new(void);
void tape_free(Tape *t);

/* 1 when grad mode is on and any of the n inputs requires grad. */
int ad_needs_grad(const Ctx *c, Tensor *const *in, int n);
/* Set grad mode; returns the previous one. */
int ad_set_grad(Ctx *c, int enabled);

/* Record a node producing `out` from `in`; marks out as requiring grad.
 * The returned pointer is valid until the next ad_record. */
Node *ad_record(Ctx *c, const char *op, BackwardFn fn, Tensor *out, Tensor *const *in, int n_in);
/* Keep t's values for the backward. */
void ad_save(Node *n, Tensor *t);

/* Where x's gradient goes: NULL when x needs none. *accum is 0 when the
 * buffer was just created (write into it), 1 when it already holds a
 * gradient (add into it). Parameters: their view in the gradient buffer,
 * added into, or written by the step's first contribution when the step
 * marked the parameters fresh (params_grad_fresh) instead of zeroing the
 * buffer. A backward that asks must then write the whole gradient: the
 * view holds last step's values. */
Tensor *ad_grad_dst(Ctx *c, Tensor *x, int *accum);
/* ad_grad_dst for node n's input i, x, when n's backward may write x's
 * gradient over x's own values (it reads x[i] and writes dx[i] in one
 * place, and reads x nowhere else): where x needs a gradient, has none yet,
 * is not a parameter, owns its storage, and its data has one holder left
 * which is n's saved reference (the model let go of x), the gradient takes
 * x's storage (tensor_take_storage) and nothing is allocated. Cross-entropy's
 * logits: BERT-large's masked-row logits are 300 MB at batch 256, at the
 * step's peak. Call it once, before reading x. */
Tensor *ad_grad_over(Ctx *c, Node *n, int i, int *accum);
/* A backward whose gradient for x is dy itself (reshape; one input of add)
 * passes it on without a copy when it can: x needs a gradient, has none
 * yet, is not a parameter (those live in the gradient buffer), and dy has
 * x's dtype and size. x's gradient then becomes a view of dy (the walk
 * releases dy after the node, so the view holds the only reference, and a
 * later contribution adds into it as into any gradient). Returns 1 when it
 * did; 0: add dy into ad_grad_dst as usual. */
int ad_grad_pass(Tensor *x, Tensor *dy);

/* Backpropagate from a scalar loss with d(loss) = seed (1, or the grad
 * scaler's scale). Empties the tape. */
void ad_backward(Ctx *c, Tensor *loss, float seed);
/* Same, with d(loss) = mult * (*seed_dev) read on the device: the grad
 * scaler's scale never comes to the host, so the step needs no sync and can
 * be captured in a CUDA graph. (On the CPU seed_dev is host memory.) */
void ad_backward_dev(Ctx *c, Tensor *loss, const float *seed_dev, float mult);
/* Walk the tape from `out`, whose gradient the caller has already placed in
 * out->grad (recompute's sub-tapes). Empties the tape. */
void ad_backward_from(Ctx *c, Tensor *out);
/* Drop all recorded nodes without running them (after a forward whose
 * backward will not run). */
void ad_tape_clear(Ctx *c);

#ifdef __cplusplus
}
#endif
#endif
