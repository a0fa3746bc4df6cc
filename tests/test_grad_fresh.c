/* test_grad_fresh.c — CTRAIN_GRAD_FRESH (engine/params.h params_grad_fresh):
 * each parameter's first gradient contribution of a step writes instead of
 * adding into a zeroed buffer. On the CPU:
 *   - the autograd level: a parameter no op reaches is zeroed by
 *     params_grad_settle, a reached one holds exactly the zero-then-add
 *     gradient over last step's values, a joined parameter (params_join)
 *     writes when all its parts are fresh and zeroes the fresh ones when
 *     one part was reached alone first; a parameter that is attention's
 *     q and k at once (the op zeroes the shared buffer itself);
 *   - whole runs through the Trainer: BERT-tiny with AdamW (tied embedding
 *     and decoder), with recompute, ResNet-18 with SGD (batch norm), the
 *     same losses and weights bit for bit with the switch on and off; with
 *     accumulation the switch stays out of the step.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "grad_fresh_case.h"
#include "engine/params.h"
#include "ops/attention.h"
#include "ops/ops.h"

/* loss = sum(x w0^T) + sum(x w1^T)  (w0 [2, 3] and w1 [2, 3] through their
 * join [4, 3] when joined, else w0 alone: w1 is not reached) */
static void backward_once(Ctx *c, ParamSet *ps, Tensor *x, Tensor *j, int use_w0_alone)
{
    Tensor *y = op_linear(c, x, j ? j : ps->p[0].t, NULL);
    Tensor *loss = op_sum(c, y);
    if (use_w0_alone) {   /* w0 once more, alone, before the join's contribution */
        Tensor *y0 = op_linear(c, x, ps->p[0].t, NULL), *l0 = op_sum(c, y0);
        Tensor *both = op_add(c, loss, l0);
        tensor_release(loss);
        tensor_release(y0);
        tensor_release(l0);
        loss = both;
    }
    ad_backward(c, loss, 1.0f);
    tensor_release(y);
    tensor_release(loss);
}

static void autograd_level(Ctx *c)
{
    ParamSet ps;
    params_init(&ps);
    const int64_t shape[2] = {2, 3};
    params_add(&ps, "w0", 2, shape, INIT_UNIFORM, 1.0f, 1);
    params_add(&ps, "w1", 2, shape, INIT_UNIFORM, 1.0f, 1);
    params_alloc(&ps, c, 7);
    const float xv[6] = {0.5f, -1.0f, 2.0f, 1.5f, 0.25f, -0.75f};
    const int64_t xs[2] = {2, 3};
    Tensor *x = tensor_from_f32(c, xv, DT_F32, 2, xs);
    const int idx[2] = {0, 1};
    Tensor *j = params_join(&ps, idx, 2);
    check_true("params_join lists its parts", j && j->nparts == 2 && j->parts[1] == ps.p[1].t,
               "no list");
    float ref[12], got[12];

    /* reference: zeroed buffer, w0 alone */
    params_zero_grad(&ps);
    backward_once(c, &ps, x, NULL, 0);
    memcpy(ref, ps.grad, sizeof ref);
    /* fresh over stale values: the same gradient; w1 (unreached) zeroed by settle */
    for (int i = 0; i < 12; i++) ps.grad[i] = 1e3f + (float)i;
    params_grad_fresh(&ps);
    backward_once(c, &ps, x, NULL, 0);
    check_true("fresh: the unreached parameter is still marked before settle",
               ps.p[1].t->grad_fresh == 1 && ps.p[0].t->grad_fresh == 0, "marks %d %d",
               ps.p[0].t->grad_fresh, ps.p[1].t->grad_fresh);
    params_grad_settle(&ps);
    memcpy(got, ps.grad, sizeof got);
    check_true("fresh: the reached gradient written over stale values, the same bits",
               !memcmp(got, ref, 6 * sizeof(float)), "w0's gradient differs");
    int zero = 1;
    for (int i = 6; i < 12; i++) zero &= got[i] == 0.0f;
    check_true("fresh: settle zeroes the unreached parameter's gradient", zero, "not zero");

    /* the join: all parts fresh -> one write over stale values */
    params_zero_grad(&ps);
    backward_once(c, &ps, x, j, 0);
    memcpy(ref, ps.grad, sizeof ref);
    for (int i = 0; i < 12; i++) ps.grad[i] = -7.0f;
    params_grad_fresh(&ps);
    backward_once(c, &ps, x, j, 0);
    params_grad_settle(&ps);
    memcpy(got, ps.grad, sizeof got);
    check_true("fresh: a joined parameter writes both parts", !memcmp(got, ref, sizeof ref),
               "they differ");

    /* the join after one part was reached alone (w0 written first, w1 still
     * fresh): w1 zeroed, then the join adds */
    params_zero_grad(&ps);
    backward_once(c, &ps, x, j, 1);
    memcpy(ref, ps.grad, sizeof ref);
    for (int i = 0; i < 12; i++) ps.grad[i] = 5.0f;
    params_grad_fresh(&ps);
    backward_once(c, &ps, x, j, 1);
    params_grad_settle(&ps);
    memcpy(got, ps.grad, sizeof got);
    int close = 1;   /* the sums' order is the same; only a zero's sign could differ */
    for (int i = 0; i < 12; i++) close &= got[i] == ref[i];
    check_true("fresh: a joined parameter with one part reached first (zeroes the other)",
               close, "they differ");
    tensor_release(x);
    params_join_free(j);
    params_free(&ps);
}

/* loss = sum(attention(P, P, V)): one parameter as both q and k, whose
 * gradient buffer the op zeroes itself before both add (it is a view: the
 * bytes to clear are its elements', not the bytes it owns, which are 0) */
static float attention_shared_grad(Ctx *c, ParamSet *ps, Tensor *v, float *g)
{
    Tensor *y = op_attention(c, ps->p[0].t, ps->p[0].t, v, NULL, 0.0f);
    Tensor *loss = op_sum(c, y);
    ad_backward(c, loss, 1.0f);
    float l;
    tensor_to_f32(&l, loss);
    memcpy(g, ps->p[0].t->grad->data, ps->p[0].numel * sizeof(float));
    tensor_release(y);
    tensor_release(loss);
    return l;
}

static void attention_shared(Ctx *c)
{
    ParamSet ps;
    params_init(&ps);
    const int64_t shape[4] = {1, 2, 3, 4};   /* [B, H, T, Dh] */
    params_add(&ps, "p", 4, shape, INIT_UNIFORM, 1.0f, 1);
    params_alloc(&ps, c, 11);
    float vh[24];
    for (int i = 0; i < 24; i++) vh[i] = 0.1f * (float)(i % 7) - 0.3f;
    Tensor *v = tensor_from_f32(c, vh, DT_F32, 4, shape);
    float ref[24], got[24];
    params_zero_grad(&ps);
    attention_shared_grad(c, &ps, v, ref);
    for (int i = 0; i < 24; i++) ps.grad[i] = 100.0f;
    params_grad_fresh(&ps);
    attention_shared_grad(c, &ps, v, got);
    params_grad_settle(&ps);
    check_true("fresh: one parameter as attention's q and k, its gradient over stale values",
               !memcmp(got, ref, sizeof ref), "it differs (stale values kept?)");
    tensor_release(v);
    params_free(&ps);
}

int main(void)
{
    check_seed(20261206);
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    autograd_level(&c);
    attention_shared(&c);
    const char *bert = "--model bert-tiny --data synthetic --batch 4 --seq 32 --steps 4 "
                       "--optim adamw --lr 1e-3 --warmup 2 --wd 0.01";
    grad_fresh_same_run(&c, DEV_CPU, "bert-tiny adamw", bert, 1);
    char b2[400];
    snprintf(b2, sizeof b2, "%s --recompute all", bert);
    grad_fresh_same_run(&c, DEV_CPU, "bert-tiny adamw recompute all", b2, 1);
    snprintf(b2, sizeof b2, "%s --accum 2", bert);
    grad_fresh_same_run(&c, DEV_CPU, "bert-tiny adamw accum 2", b2, 0);
    grad_fresh_same_run(&c, DEV_CPU, "resnet18 sgd nesterov",
             "--model resnet18 --data synthetic --batch 4 --image-size 32 --classes 10 --steps 4 "
             "--optim sgd --lr 0.05 --momentum 0.9 --nesterov --wd 1e-4", 1);
    ctx_free(&c);
    return check_summary();
}
