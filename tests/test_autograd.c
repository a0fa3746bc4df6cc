/* test_autograd.c — the tape, on the CPU backend, through whole graphs:
 *   - gradients of a graph using every tensor op (fan-out, broadcasting
 *     matmul, casts, losses) against central finite differences;
 *   - parameter gradients accumulate (+=) across backward calls;
 *   - no-grad mode records nothing; activation memory is returned after
 *     backward (the step allocates the same way every time);
 *   - gradients passed on without a copy (ad_grad_pass) and written over
 *     the values they replace (ad_grad_over); the memory's high point
 *     named by the node whose backward reached it (mem.peak_at); in the forward
 *     by the op recorded before it, after the backward by neither
 *     (mem_peak_place);
 *   - a gradient handed over in another form (Tensor.grad_aux beside it, as
 *     the FP8 dz codes hand theirs): the maker's backward sees both, and the
 *     walk, ad_tape_clear and the tensor's last release each free both;
 *   - shape mismatches are refused (checked in a child process).
 */
#include <math.h>
#include <string.h>
#include "check.h"
#include "engine/autograd.h"
#include "engine/params.h"
#include "engine/mem.h"
#include "ops/ops.h"
#include "ops/permute.h"
#include "fixture_graph.h"

static void test_finite_differences(Ctx *c)
{
    Graph g;
    graph_init(c, &g);
    graph_loss(c, &g, 1);
    size_t n = g.ps.total;
    double *ana = malloc(n * sizeof(double)), *num = malloc(n * sizeof(double));
    float *p = g.ps.data;
    for (size_t i = 0; i < n; i++) ana[i] = g.ps.grad[i];
    double ax[24], nx[24];
    float *xd = (float *)g.x->data;
    for (int i = 0; i < 24; i++) ax[i] = ((float *)g.x->grad->data)[i];
    int grad = ad_set_grad(c, 0);
    const float eps = 2e-3f;
    for (size_t i = 0; i < n; i++) {
        float keep = p[i];
        p[i] = keep + eps; double lp = graph_loss(c, &g, 0);
        p[i] = keep - eps; double lm = graph_loss(c, &g, 0);
        p[i] = keep;
        num[i] = (lp - lm) / (2.0 * eps);
    }
    for (int i = 0; i < 24; i++) {
        float keep = xd[i];
        xd[i] = keep + eps; double lp = graph_loss(c, &g, 0);
        xd[i] = keep - eps; double lm = graph_loss(c, &g, 0);
        xd[i] = keep;
        nx[i] = (lp - lm) / (2.0 * eps);
    }
    ad_set_grad(c, grad);
    check_close_f64("graph.dparams_vs_fd", ana, num, n, 2e-3, 2e-2);
    check_close_f64("graph.dx_vs_fd", ax, nx, 24, 2e-3, 2e-2);
    /* accumulation: a second backward without zeroing doubles every gradient */
    graph_loss(c, &g, 1);
    for (size_t i = 0; i < n; i++) num[i] = 2.0 * ana[i];
    for (size_t i = 0; i < n; i++) ana[i] = g.ps.grad[i];
    check_close_f64("graph.param_grads_accumulate", ana, num, n, 1e-6, 1e-5);
    free(ana); free(num);
    tensor_release(g.x); tensor_release(g.t);
    params_free(&g.ps);
}

static void test_lifetimes(Ctx *c)
{
    Graph g;
    graph_init(c, &g);
    size_t base = c->mem.current;
    graph_loss(c, &g, 1);
    /* the input's gradient stays (it is a leaf we asked for); release it */
    tensor_release(g.x->grad); g.x->grad = NULL;
    check_true("mem.backward_frees_activations", c->mem.current == base,
               "%zu bytes still held after backward (base %zu)", c->mem.current, base);
    size_t a1 = c->mem.n_allocs;
    graph_loss(c, &g, 1);
    tensor_release(g.x->grad); g.x->grad = NULL;
    size_t per_step = c->mem.n_allocs - a1;
    graph_loss(c, &g, 1);
    tensor_release(g.x->grad); g.x->grad = NULL;
    check_true("mem.same_allocations_each_step", c->mem.n_allocs - a1 == 2 * per_step,
               "step 2 made %zu allocations, step 1 %zu", c->mem.n_allocs - a1 - per_step, per_step);
    int grad = ad_set_grad(c, 0);
    graph_loss(c, &g, 0);
    check_true("nograd.records_nothing", c->tape->n == 0, "%d nodes recorded", c->tape->n);
    ad_set_grad(c, grad);
    /* grad on, forward only, then clear: nothing leaks */
    graph_loss(c, &g, 0);
    check_true("tape_clear.frees", c->mem.current == base && c->tape->n == 0,
               "%zu bytes held, %d nodes", c->mem.current, c->tape->n);
    tensor_release(g.x); tensor_release(g.t);
    params_free(&g.ps);
}

/* f16 / bf16 on the CPU backend: the op computes in f32 and rounds; the
 * result must equal rounding the f32 result of the same (rounded) inputs. */
static void test_lowp_cpu(Ctx *c)
{
    float a[64], b[64];
    check_fill(a, 64, -2, 2);
    check_fill(b, 64, -2, 2);
    DType types[2] = {DT_F16, DT_BF16};
    for (int k = 0; k < 2; k++) {
        Tensor *ta = tensor_from_f32(c, a, types[k], 2, (int64_t[]){8, 8});
        Tensor *tb = tensor_from_f32(c, b, types[k], 2, (int64_t[]){8, 8});
        Tensor *y = op_matmul(c, ta, tb, 0, 1);
        float ra[64], rb[64], ref[64], got[64];
        tensor_to_f32(ra, ta);
        tensor_to_f32(rb, tb);
        for (int i = 0; i < 8; i++)
            for (int j = 0; j < 8; j++) {
                double s = 0;
                for (int q = 0; q < 8; q++) s += (double)ra[i * 8 + q] * rb[j * 8 + q];
                ref[i * 8 + j] = (float)s;
            }
        tensor_to_f32(got, y);
        check_close(types[k] == DT_F16 ? "cpu.matmul.f16" : "cpu.matmul.bf16", got, ref, 64,
                    1e-2, types[k] == DT_F16 ? 2e-3 : 1.6e-2);
        check_true("cpu.matmul.dtype", y->dtype == types[k], "output dtype %s", dtype_name(y->dtype));
        tensor_release(ta); tensor_release(tb); tensor_release(y);
    }
}

/* A shape mismatch ends the process with a message naming both tensors. */
static void child_mismatch(void *arg)
{
    (void)arg;
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    float v[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    Tensor *a = tensor_from_f32(&c, v, DT_F32, 2, (int64_t[]){3, 4});
    Tensor *b = tensor_from_f32(&c, v, DT_F32, 2, (int64_t[]){4, 3});
    op_add(&c, a, b);
}

/* Out of memory names the bytes asked, held and peak, with a hint. */
static void child_oom(void *arg)
{
    (void)arg;
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    mem_alloc(&c, (size_t)1 << 62);
}

static void test_fatal_messages(void)
{
    char buf[2048];
    int st = check_run_child(child_mismatch, NULL, buf, sizeof buf);
    check_true("mismatch.refused", st == 1 && strstr(buf, "add: operands differ") &&
               strstr(buf, "[3, 4]") && strstr(buf, "[4, 3]"), "status %d, message: %s", st, buf);
    st = check_run_child(child_oom, NULL, buf, sizeof buf);
    check_true("oom.message", st == 1 && strstr(buf, "out of memory on cpu:0 allocating") &&
               strstr(buf, "peak") && strstr(buf, "hint: use a smaller --batch"),
               "status %d, message: %s", st, buf);
}

static Tensor *leaf(Ctx *c, const float *v, int ndim, const int64_t *shape, int grad)
{
    Tensor *t = tensor_from_f32(c, v, DT_F32, ndim, shape);
    t->requires_grad = grad;
    return t;
}

/* sum(a * b) */
static Tensor *dot(Ctx *c, Tensor *a, Tensor *b)
{
    Tensor *m = op_mul(c, a, b), *s = op_sum(c, m);
    tensor_release(m);
    return s;
}

/* ad_grad_pass: reshape and add hand their incoming gradient on without a
 * copy (the input's gradient becomes a view of it), and later
 * contributions still add up right, with no two gradients sharing memory. */
static void test_grad_pass(Ctx *c)
{
    const size_t before = c->mem.current;
    float xv[12], w1[12], w2[12], w3[12], ref[12], got[12];
    check_fill(xv, 12, -1, 1); check_fill(w1, 12, -1, 1);
    check_fill(w2, 12, -1, 1); check_fill(w3, 12, -1, 1);
    const int64_t s26[2] = {2, 6}, s34[2] = {3, 4};
    /* 1. x used twice: x * w2 (recorded first), then reshape(x) * w1: the
     * reshape's backward runs first and passes dr on, then x * w2 adds in */
    Tensor *x = leaf(c, xv, 2, s26, 1), *tw1 = leaf(c, w1, 2, s34, 0), *tw2 = leaf(c, w2, 2, s26, 0);
    Tensor *l1 = dot(c, x, tw2), *r = op_reshape(c, x, 2, s34), *l2 = dot(c, r, tw1);
    Tensor *loss = op_add(c, l1, l2);
    ad_backward(c, loss, 1.0f);
    for (int i = 0; i < 12; i++) ref[i] = w1[i] + w2[i];
    check_true("autograd.grad_pass: reshape handed dr on as x's gradient (a view, no copy)",
               x->grad && x->grad->base != NULL, "x's gradient is its own buffer");
    memcpy(got, x->grad->data, sizeof got);
    check_close("autograd.grad_pass: then x * w2 added into it", got, ref, 12, 0, 0);
    tensor_release(loss); tensor_release(l1); tensor_release(l2); tensor_release(r);
    tensor_release(x); tensor_release(tw1); tensor_release(tw2);
    /* 2. s = u + v, loss = sum(s * w1) + sum(u * w3) (u * w3 recorded
     * first): du = w1 (passed on) + w3 (added later), dv = w1 (a copy that
     * the later add into du must not touch) */
    Tensor *u = leaf(c, xv, 2, s34, 1), *v = leaf(c, w2, 2, s34, 1);
    Tensor *t1 = leaf(c, w1, 2, s34, 0), *t3 = leaf(c, w3, 2, s34, 0);
    Tensor *lu = dot(c, u, t3), *sum = op_add(c, u, v), *ls = dot(c, sum, t1);
    loss = op_add(c, lu, ls);
    ad_backward(c, loss, 1.0f);
    for (int i = 0; i < 12; i++) ref[i] = w1[i] + w3[i];
    memcpy(got, u->grad->data, sizeof got);
    check_close("autograd.grad_pass: add, first input du = w1 + w3", got, ref, 12, 0, 0);
    memcpy(got, v->grad->data, sizeof got);
    check_close("autograd.grad_pass: add, second input dv = w1 untouched", got, w1, 12, 0, 0);
    check_true("autograd.grad_pass: add's two gradients do not share memory",
               u->grad->data != v->grad->data, "same buffer");
    tensor_release(loss); tensor_release(lu); tensor_release(ls); tensor_release(sum);
    tensor_release(t1); tensor_release(t3);
    tensor_release(u); tensor_release(v);
    /* 3. s = u + u: both halves land in one gradient, 2 w1 */
    Tensor *u2 = leaf(c, xv, 2, s34, 1), *tw = leaf(c, w1, 2, s34, 0);
    Tensor *dbl = op_add(c, u2, u2);
    loss = dot(c, dbl, tw);
    ad_backward(c, loss, 1.0f);
    for (int i = 0; i < 12; i++) ref[i] = 2.0f * w1[i];
    memcpy(got, u2->grad->data, sizeof got);
    check_close("autograd.grad_pass: u + u gives 2 w1", got, ref, 12, 0, 0);
    tensor_release(loss); tensor_release(dbl); tensor_release(u2); tensor_release(tw);
    check_true("autograd.grad_pass: all memory returned", c->mem.current == before,
               "%zu bytes held, %zu before", c->mem.current, before);
}

/* The memory held right after the cross-entropy node's backward ran */
typedef struct { Ctx *c; size_t at; } CeWatch;

static void ce_watch(void *user, const Node *n, int depth)
{
    (void)depth;
    CeWatch *w = (CeWatch *)user;
    if (!strcmp(n->op, "cross_entropy")) w->at = w->c->mem.current;
}

/* One cross-entropy over z = cast(a * w) (6 rows, 10 classes, one row
 * ignored, label smoothing 0.1): da, and what the backward holds over the
 * forward's memory once the loss's node has run. keep: the caller still
 * holds z (its gradient must not touch it); else z is let go before. */
typedef struct {
    float da[60];
    size_t after_ce, zbytes;
    int z_intact, took;
    const char *peak_at;   /* where the backward's high point came (mem.peak_at) */
} OverRun;

static OverRun over_run(Ctx *c, DType dt, int keep)
{
    OverRun o = {0};
    float av[60], wv[60], zv[60], zafter[60];
    for (int i = 0; i < 60; i++) {   /* the same values in every run */
        av[i] = 2.0f * sinf(0.7f * (float)i);
        wv[i] = 1.5f * cosf(0.3f * (float)i + 1.0f);
    }
    const int64_t s[2] = {6, 10}, six = 6;
    const int32_t lab[6] = {3, 0, -100, 9, 5, 1};
    Tensor *a = leaf(c, av, 2, s, 1), *w = leaf(c, wv, 2, s, 0);
    Tensor *t = tensor_from_host(c, lab, DT_I32, 1, &six);
    Tensor *m = op_mul(c, a, w), *z = op_cast(c, m, dt);
    tensor_release(m);
    tensor_to_f32(zv, z);
    o.zbytes = z->nbytes;
    Tensor *loss = op_cross_entropy(c, z, t, -100, 0.1f);
    if (!keep) { tensor_release(z); z = NULL; }
    CeWatch cw = {c, 0};
    AdHook h = {NULL, ce_watch, NULL, &cw};
    const size_t held = c->mem.current;
    mem_reset_peak(c);
    c->bwd_hook = &h;
    ad_backward(c, loss, 1.0f);
    c->bwd_hook = NULL;
    o.peak_at = c->mem.peak_at;
    o.after_ce = cw.at - held;
    memcpy(o.da, a->grad->data, sizeof o.da);
    if (z) {
        tensor_to_f32(zafter, z);
        o.z_intact = memcmp(zv, zafter, sizeof zv) == 0;
        o.took = z->nbytes == 0;
    }
    tensor_release(z); tensor_release(loss); tensor_release(t);
    tensor_release(a); tensor_release(w);
    return o;
}

/* ad_grad_over: cross-entropy writes the logits' gradient over the logits
 * when the model let go of them (no buffer their size at the backward's
 * peak), and leaves them alone while anyone holds them; the gradients are
 * the same bits either way, and all memory comes back. */
static void test_grad_over(Ctx *c)
{
    const DType dts[2] = {DT_F32, DT_BF16};
    for (int k = 0; k < 2; k++) {
        const size_t before = c->mem.current;
        OverRun held = over_run(c, dts[k], 1), let = over_run(c, dts[k], 0);
        const char *dn = dtype_name(dts[k]);
        check_true("autograd.grad_over: logits still held: their values untouched",
                   held.z_intact && !held.took, "%s: z changed by the backward", dn);
        check_close("autograd.grad_over: logits let go: same gradient, bit for bit", let.da,
                    held.da, 60, 0, 0);
        check_true("autograd.grad_over: logits let go: their gradient took their buffer",
                   held.after_ce == held.zbytes && let.after_ce == 0,
                   "%s: after the loss's backward %zu bytes more held (logits kept), %zu (let "
                   "go); the logits are %zu bytes", dn, held.after_ce, let.after_ce, held.zbytes);
        /* the high point: mul's da beside the logits' gradient (held) or alone */
        check_true("autograd.peak_at: the backward's high point is named by its node",
                   held.peak_at && let.peak_at && !strcmp(held.peak_at, "mul") &&
                   !strcmp(let.peak_at, "mul") && c->mem.where == NULL,
                   "%s: at '%s' (logits held), '%s' (let go); want 'mul'", dn,
                   held.peak_at ? held.peak_at : "outside", let.peak_at ? let.peak_at : "outside");
        check_true("autograd.grad_over: all memory returned", c->mem.current == before,
                   "%s: %zu bytes held, %zu before", dn, c->mem.current, before);
    }
}

/* mem_peak_place outside a backward: a high point in the forward is named by
 * the op recorded before it; after the backward (the optimizer's place) by
 * neither. */
static void test_peak_forward(Ctx *c)
{
    float av[60], wv[60];
    for (int i = 0; i < 60; i++) {
        av[i] = sinf(0.5f * (float)i);
        wv[i] = cosf(0.2f * (float)i);
    }
    const int64_t s[2] = {6, 10};
    Tensor *a = leaf(c, av, 2, s, 1), *w = leaf(c, wv, 2, s, 0);
    mem_reset_peak(c);
    Tensor *m = op_mul(c, a, w);
    Tensor *big = op_add(c, m, m);   /* allocated after "mul" was recorded: the high point */
    tensor_release(m);               /* add keeps nothing: m's buffer goes */
    Tensor *loss = op_sum(c, big);
    char place[96];
    mem_peak_place(c, place, sizeof place);
    check_true("autograd.peak_place: a forward's high point is named by the op before it",
               !strcmp(place, "forward, after mul"), "'%s', want 'forward, after mul'", place);
    ad_backward(c, loss, 1.0f);
    check_true("autograd.peak_place: a backward ends the forward's place", c->mem.last_op == NULL,
               "last_op '%s'", c->mem.last_op ? c->mem.last_op : "");
    tensor_release(loss);
    tensor_release(big);
    mem_reset_peak(c);
    Tensor *after = op_mul(c, a, w);   /* its output comes before its node is recorded */
    mem_peak_place(c, place, sizeof place);
    check_true("autograd.peak_place: after the backward, outside both",
               !strcmp(place, "outside the forward and backward"), "'%s'", place);
    tensor_release(after);
    ad_tape_clear(c);
    tensor_release(a);
    tensor_release(w);
}

/* A gradient handed over in another form: "consumer" (z -> out) writes
 * z's gradient as a U8 tensor with an f32 one in grad_aux; "maker" (a -> z)
 * reads both. */
static int maker_saw;

static void maker_backward(Ctx *c, Node *n)
{
    (void)c;
    Tensor *z = n->out;
    maker_saw = z->grad && z->grad->dtype == DT_U8 && z->grad_aux &&
                z->grad_aux->dtype == DT_F32;
}

static void consumer_backward(Ctx *c, Node *n)
{
    Tensor *z = n->in[0];
    const int64_t k = 16, p = 4;
    z->grad = tensor_new(c, DT_U8, 1, &k);
    z->grad_aux = tensor_new(c, DT_F32, 1, &p);
}

static void test_handed_grad(Ctx *c)
{
    const int64_t k = 16;
    Tensor *a = tensor_new(c, DT_F32, 1, &k);
    tensor_zero(a);
    a->requires_grad = 1;
    const size_t base = c->mem.current;
    for (int walk = 0; walk < 2; walk++) {
        Tensor *z = tensor_new(c, DT_F32, 1, &k), *out = tensor_new(c, DT_F32, 1, &k);
        ad_record(c, "maker", maker_backward, z, &a, 1);
        ad_record(c, "consumer", consumer_backward, out, &z, 1);
        maker_saw = 0;
        if (walk) {
            out->grad = tensor_new(c, DT_F32, 1, &k);
            ad_backward_from(c, out);
            check_true("handed_grad.maker_sees_both", maker_saw, "the maker saw %s",
                       z->grad ? "no grad_aux" : "no gradient");
        } else {   /* a tape cleared with the handed gradient in place */
            z->grad = tensor_new(c, DT_U8, 1, &k);
            z->grad_aux = tensor_new(c, DT_F32, 1, &k);
            ad_tape_clear(c);
        }
        check_true(walk ? "handed_grad.walk_frees_both" : "handed_grad.tape_clear_frees_both",
                   !z->grad && !z->grad_aux, "grad %p, grad_aux %p", (void *)z->grad,
                   (void *)z->grad_aux);
        tensor_release(z);
        tensor_release(out);
        check_true(walk ? "handed_grad.nothing_held_after_walk"
                        : "handed_grad.nothing_held_after_clear",
                   c->mem.current == base, "%zu bytes held (base %zu)", c->mem.current, base);
    }
    /* the last release of a tensor that still holds both */
    Tensor *t = tensor_new(c, DT_F32, 1, &k);
    t->grad = tensor_new(c, DT_U8, 1, &k);
    t->grad_aux = tensor_new(c, DT_F32, 1, &k);
    tensor_release(t);
    check_true("handed_grad.release_frees_both", c->mem.current == base,
               "%zu bytes held (base %zu)", c->mem.current, base);
    tensor_release(a);
}

int main(void)
{
    check_seed(7);
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    test_finite_differences(&c);
    test_lifetimes(&c);
    test_lowp_cpu(&c);
    test_grad_pass(&c);
    test_grad_over(&c);
    test_peak_forward(&c);
    test_handed_grad(&c);
    ctx_free(&c);
    test_fatal_messages();
    return check_summary();
}
