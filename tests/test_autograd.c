/* test_autograd.c — the tape, on the CPU backend, through whole graphs:
 *   - gradients of a graph using every tensor op (fan-out, broadcasting
 *     matmul, casts, losses) against central finite differences;
 *   - parameter gradients accumulate (+=) across backward calls;
 *   - no-grad mode records nothing; activation memory is returned after
 *     backward (the step allocates the same way every time);
 *   - shape mismatches are refused (checked in a child process).
 */
#include <string.h>
#include "check.h"
#include "../engine/autograd.h"
#include "../engine/params.h"
#include "../engine/mem.h"
#include "../ops/ops.h"
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

int main(void)
{
    check_seed(7);
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    test_finite_differences(&c);
    test_lifetimes(&c);
    test_lowp_cpu(&c);
    ctx_free(&c);
    test_fatal_messages();
    return check_summary();
}
