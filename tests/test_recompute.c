/* test_recompute.c — gradient checkpointing on the CPU backend: the same
 * gradients (bit for bit: the re-run is the same deterministic computation)
 * with recompute none / all / every:2, and a lower peak of activation memory.
 */
#include <string.h>
#include "check.h"
#include "engine/autograd.h"
#include "engine/mem.h"
#include "engine/params.h"
#include "engine/recompute.h"
#include "ops/ops.h"

#define NSEG 6
#define WIDTH 64
#define ROWS 128

typedef struct Seg { Tensor *w1, *b1, *w2, *b2; } Seg;

/* y = x + linear(gelu(linear(x))) with a 4x wider hidden layer */
static Tensor *seg_forward(Ctx *c, void *arg, Tensor *x)
{
    Seg *s = (Seg *)arg;
    Tensor *h = op_linear(c, x, s->w1, s->b1);
    Tensor *g = op_gelu(c, h);
    tensor_release(h);
    Tensor *o = op_linear(c, g, s->w2, s->b2);
    tensor_release(g);
    Tensor *y = op_add(c, x, o);
    tensor_release(o);
    return y;
}

static void run(Ctx *c, ParamSet *ps, Seg *segs, Tensor *x, Tensor *t, RecomputePolicy pol,
                float *grads, size_t *peak_act)
{
    params_zero_grad(ps);
    size_t base = c->mem.current;
    mem_reset_peak(c);
    Tensor *h = x;
    tensor_retain(h);
    for (int i = 0; i < NSEG; i++) {
        Tensor *y = recompute_wants(&pol, i) ? recompute_segment(c, seg_forward, &segs[i], h)
                                             : seg_forward(c, &segs[i], h);
        tensor_release(h);
        h = y;
    }
    Tensor *loss = op_cross_entropy(c, h, t, -1, 0.0f);
    tensor_release(h);
    ad_backward(c, loss, 1.0f);
    tensor_release(loss);
    *peak_act = c->mem.peak - base;
    memcpy(grads, ps->grad, ps->total * sizeof(float));
}

int main(void)
{
    check_seed(21);
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    ParamSet ps;
    params_init(&ps);
    int idx[NSEG][4];
    for (int i = 0; i < NSEG; i++) {
        char n[64];
        snprintf(n, sizeof n, "seg%d.w1", i);
        idx[i][0] = params_add(&ps, n, 2, (int64_t[]){4 * WIDTH, WIDTH}, INIT_UNIFORM, 0.12f, 1);
        snprintf(n, sizeof n, "seg%d.b1", i);
        idx[i][1] = params_add(&ps, n, 1, (int64_t[]){4 * WIDTH}, INIT_UNIFORM, 0.1f, 0);
        snprintf(n, sizeof n, "seg%d.w2", i);
        idx[i][2] = params_add(&ps, n, 2, (int64_t[]){WIDTH, 4 * WIDTH}, INIT_UNIFORM, 0.06f, 1);
        snprintf(n, sizeof n, "seg%d.b2", i);
        idx[i][3] = params_add(&ps, n, 1, (int64_t[]){WIDTH}, INIT_UNIFORM, 0.1f, 0);
    }
    params_alloc(&ps, &c, 3);
    Seg segs[NSEG];
    for (int i = 0; i < NSEG; i++) {
        segs[i].w1 = ps.p[idx[i][0]].t; segs[i].b1 = ps.p[idx[i][1]].t;
        segs[i].w2 = ps.p[idx[i][2]].t; segs[i].b2 = ps.p[idx[i][3]].t;
    }
    float xh[ROWS * WIDTH];
    check_fill(xh, ROWS * WIDTH, -1, 1);
    int32_t th[ROWS];
    for (int i = 0; i < ROWS; i++) th[i] = (int32_t)(check_uniform(0, WIDTH)) % WIDTH;
    Tensor *x = tensor_from_f32(&c, xh, DT_F32, 2, (int64_t[]){ROWS, WIDTH});
    Tensor *t = tensor_from_host(&c, th, DT_I32, 1, (int64_t[]){ROWS});

    float *g_none = malloc(ps.total * sizeof(float)), *g = malloc(ps.total * sizeof(float));
    size_t peak_none, peak_all, peak_2;
    RecomputePolicy none = {0}, all = {1}, every2 = {2};
    run(&c, &ps, segs, x, t, none, g_none, &peak_none);
    run(&c, &ps, segs, x, t, all, g, &peak_all);
    check_true("recompute.all.same_grads", memcmp(g, g_none, ps.total * sizeof(float)) == 0,
               "gradients differ from the no-recompute run");
    run(&c, &ps, segs, x, t, every2, g, &peak_2);
    check_true("recompute.every2.same_grads", memcmp(g, g_none, ps.total * sizeof(float)) == 0,
               "gradients differ from the no-recompute run");
    printf("  activation peak: none %zu bytes, every:2 %zu, all %zu\n", peak_none, peak_2, peak_all);
    check_true("recompute.all.less_memory", peak_all * 2 < peak_none,
               "peak with recompute %zu vs %zu without", peak_all, peak_none);
    check_true("recompute.every2.between", peak_2 < peak_none && peak_2 > peak_all,
               "every:2 peak %zu not between %zu and %zu", peak_2, peak_all, peak_none);
    check_true("recompute.tape_empty", c.tape->n == 0, "%d nodes left", c.tape->n);

    RecomputePolicy p;
    check_true("recompute.parse", recompute_parse("every:3", &p) == 0 && p.every == 3 &&
               recompute_parse("all", &p) == 0 && p.every == 1 &&
               recompute_parse("every:0", &p) == -1 && recompute_parse("some", &p) == -1,
               "policy parsing");
    free(g_none); free(g);
    tensor_release(x); tensor_release(t);
    params_free(&ps);
    ctx_free(&c);
    return check_summary();
}
