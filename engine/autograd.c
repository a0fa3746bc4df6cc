/* autograd.c — recording nodes and walking the tape in reverse. */
#include "autograd.h"

#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "log.h"
#include "mem.h"
#include "kernels.h"

Tape *tape_new(void)
{
    Tape *t = (Tape *)calloc(1, sizeof *t);
    if (!t) ct_fatal("out of host memory for the autograd tape");
    return t;
}

static void node_drop(Node *n)
{
    for (int i = 0; i < n->n_saved; i++) tensor_release(n->saved[i]);
    for (int i = 0; i < n->n_in; i++) tensor_unhold(n->in[i]);
    tensor_unhold(n->out);
    memset(n, 0, sizeof *n);
}

void tape_free(Tape *t)
{
    if (!t) return;
    for (int i = 0; i < t->n; i++) node_drop(&t->nodes[i]);
    free(t->nodes);
    free(t);
}

int ad_set_grad(Ctx *c, int enabled)
{
    int old = c->grad_enabled;
    c->grad_enabled = enabled;
    return old;
}

int ad_needs_grad(const Ctx *c, Tensor *const *in, int n)
{
    if (!c->grad_enabled) return 0;
    for (int i = 0; i < n; i++)
        if (in[i] && in[i]->requires_grad) return 1;
    return 0;
}

Node *ad_record(Ctx *c, const char *op, BackwardFn fn, Tensor *out, Tensor *const *in, int n_in)
{
    Tape *t = c->tape;
    CT_ASSERT(n_in <= NODE_MAX_IN, "op %s has %d inputs (max %d)", op, n_in, NODE_MAX_IN);
    if (t->n == t->cap) {
        int cap = t->cap ? t->cap * 2 : 256;
        Node *nn = (Node *)realloc(t->nodes, (size_t)cap * sizeof *nn);
        if (!nn) ct_fatal("out of host memory growing the autograd tape");
        t->nodes = nn;
        t->cap = cap;
    }
    Node *n = &t->nodes[t->n++];
    memset(n, 0, sizeof *n);
    n->op = op;
    c->mem.last_op = op;   /* where a forward has come, for the memory's high point */
    n->backward = fn;
    n->out = out;
    tensor_hold(out);
    out->requires_grad = 1;
    for (int i = 0; i < n_in; i++) {
        n->in[i] = in[i];
        if (in[i]) tensor_hold(in[i]);
    }
    n->n_in = n_in;
    return n;
}

void ad_save(Node *n, Tensor *t)
{
    CT_ASSERT(n->n_saved < NODE_MAX_SAVED, "op %s saves more than %d tensors", n->op,
              NODE_MAX_SAVED);
    tensor_retain(t);
    n->saved[n->n_saved++] = t;
}

/* Whether a contribution to parameter x's gradient adds (1) or writes (0):
 * it writes while x holds no gradient of this step (grad_fresh, set by
 * params_grad_fresh; else the buffer was zeroed and it adds). A joined
 * parameter writes when every part is fresh; when only some are, those are
 * zeroed here and it adds. */
static int param_accum(Tensor *x)
{
    if (!x->nparts) {
        const int fresh = x->grad_fresh;
        x->grad_fresh = 0;
        return !fresh;
    }
    int fresh = 0;
    for (int i = 0; i < x->nparts; i++) fresh += x->parts[i]->grad_fresh;
    for (int i = 0; i < x->nparts; i++) {
        Tensor *p = x->parts[i];
        if (p->grad_fresh && fresh < x->nparts) tensor_zero(p->grad);
        p->grad_fresh = 0;
    }
    return fresh < x->nparts;
}

Tensor *ad_grad_dst(Ctx *c, Tensor *x, int *accum)
{
    if (!x || !x->requires_grad) return NULL;
    if (x->is_param) { *accum = param_accum(x); return x->grad; }
    if (x->grad) { *accum = 1; return x->grad; }
    x->grad = tensor_new_like(c, x, x->dtype);
    *accum = 0;
    return x->grad;
}

Tensor *ad_grad_over(Ctx *c, Node *n, int i, int *accum)
{
    Tensor *x = n->in[i];
    if (!x || !x->requires_grad) return NULL;
    int saved = 0;   /* the one holder left must be this node's saved reference */
    for (int j = 0; j < n->n_saved; j++) saved |= n->saved[j] == x;
    if (saved && !x->is_param && !x->grad) {
        Tensor *g = tensor_take_storage(x);
        if (g) { x->grad = g; *accum = 0; return g; }
    }
    return ad_grad_dst(c, x, accum);
}

int ad_grad_pass(Tensor *x, Tensor *dy)
{
    if (!x || !x->requires_grad || x->is_param || x->grad) return 0;
    if (dy->dtype != x->dtype || dy->numel != x->numel) return 0;
    x->grad = tensor_reshape_view(dy, x->ndim, x->shape);
    return 1;
}

static void tensor_fill(Ctx *c, Tensor *t, float v)
{
    CT_ASSERT(t->dtype == DT_F32, "fill expects f32");
    if (c->device == DEV_CPU) {
        for (size_t i = 0; i < t->numel; i++) ((float *)t->data)[i] = v;
        return;
    }
#ifdef CTRAIN_CUDA
    fill_cuda(t->data, t->dtype, v, t->numel, c->stream);
#endif
}

void ad_backward(Ctx *c, Tensor *loss, float seed)
{
    CT_ASSERT(loss->numel == 1, "backward needs a scalar loss, got %zu elements", loss->numel);
    CT_ASSERT(loss->dtype == DT_F32, "the loss must be f32 (losses run in f32 under autocast)");
    if (!loss->requires_grad)
        ct_fatal_hint("check that the model's parameters were registered and grad mode is on",
                      "backward on a loss that does not depend on anything requiring grad");
    if (!loss->grad) loss->grad = tensor_new_like(c, loss, DT_F32);
    tensor_fill(c, loss->grad, seed);
    ad_backward_from(c, loss);
}

void ad_backward_dev(Ctx *c, Tensor *loss, const float *seed_dev, float mult)
{
    CT_ASSERT(loss->numel == 1 && loss->dtype == DT_F32, "backward needs a scalar f32 loss");
    if (!loss->requires_grad)
        ct_fatal_hint("check that the model's parameters were registered and grad mode is on",
                      "backward on a loss that does not depend on anything requiring grad");
    if (!loss->grad) loss->grad = tensor_new_like(c, loss, DT_F32);
    if (c->device == DEV_CPU) {
        *(float *)loss->grad->data = mult * *seed_dev;
    } else {
#ifdef CTRAIN_CUDA
        scale_forward_cuda(loss->grad->data, seed_dev, mult, DT_F32, 1, 0, c->stream);
#endif
    }
    ad_backward_from(c, loss);
}

void ad_backward_from(Ctx *c, Tensor *out)
{
    Tape *t = c->tape;
    (void)out;  /* its gradient is in place; the walk finds it via its node */
    AdHook *h = c->bwd_hook;
    int depth = ++c->bwd_depth;
    c->mem.last_op = NULL;   /* the forward is over */
    if (h && h->begin) h->begin(h->user, t, depth);
    t->walking = 1;
    for (int k = t->n - 1; k >= 0; k--) {
        Node *n = &t->nodes[k];
        if (n->out->grad) {
            LOG_T("backward %s", n->op);
            const char *was = c->mem.where;
            c->mem.where = n->op;   /* where the memory's high point comes, if it does here */
            n->backward(c, n);
            c->mem.where = was;
            if (!n->out->is_param) tensor_drop_grad(n->out);
        }
        if (h && h->node) h->node(h->user, n, depth);
        node_drop(n);
    }
    t->n = 0;
    t->walking = 0;
    if (h && h->end) h->end(h->user, depth);
    c->bwd_depth--;
    c->mem.last_op = NULL;   /* a recompute's records are not a forward */
}

void ad_tape_clear(Ctx *c)
{
    Tape *t = c->tape;
    for (int k = t->n - 1; k >= 0; k--) {
        Node *n = &t->nodes[k];
        if (n->out->grad && !n->out->is_param) tensor_drop_grad(n->out);
        node_drop(n);
    }
    t->n = 0;
}
