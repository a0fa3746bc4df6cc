/* fixture_graph.h — a small graph that uses every tensor op, shared by the
 * CPU autograd test (finite differences) and the GPU test (CUDA vs CPU).
 * Include after check.h and ops/ops.h. */
#ifndef CTRAIN_TESTS_FIXTURE_GRAPH_H
#define CTRAIN_TESTS_FIXTURE_GRAPH_H

#include "engine/autograd.h"
#include "engine/params.h"

/* The test graph. x [4, 6] input (requires grad), params:
 *   w1 [5, 6], b1 [5], w2 [3, 5], b2 [3], m [2, 5, 5] (batched weight)
 *   h  = gelu(linear(x, w1, b1))            [4, 5]
 *   g  = tanh(h) * h + scale(h, 0.5)        fan-out of h
 *   hb = matmul(g3, m)  with g3 = g viewed [2, 2, 5], batched   [2, 2, 5]
 *   z  = linear(hb, w2, b2) -> logits [4, 3]
 *   loss = cross_entropy(z, t, ignore 2, smoothing 0.1) + 0.3 * mean(softmax(z) * z)
 *          + 0.01 * sum(matmul(g, x, 1, 0))  (transposed operand)
 */
typedef struct Graph {
    ParamSet ps;
    Tensor *x, *t;
} Graph;


static inline float graph_loss(Ctx *c, Graph *g, int backward)
{
    Tensor *w1 = params_get(&g->ps, "w1"), *b1 = params_get(&g->ps, "b1");
    Tensor *w2 = params_get(&g->ps, "w2"), *b2 = params_get(&g->ps, "b2");
    Tensor *m = params_get(&g->ps, "m");
    Tensor *l1 = op_linear(c, g->x, w1, b1);
    Tensor *h = op_gelu(c, l1);
    Tensor *th = op_tanh(c, h);
    Tensor *p = op_mul(c, th, h);
    Tensor *hs = op_scale(c, h, 0.5f);
    Tensor *gg = op_add(c, p, hs);
    /* batched: treat gg [4,5] as the 2-D left operand broadcast against m [2,5,5] */
    Tensor *hb = op_matmul(c, gg, m, 0, 0);             /* [2, 4, 5] */
    Tensor *hbs = op_sum_last(c, hb);                   /* [2, 4] f32 */
    Tensor *z = op_linear(c, gg, w2, b2);               /* [4, 3] */
    Tensor *ce = op_cross_entropy(c, z, g->t, 2, 0.1f);
    Tensor *sm = op_softmax(c, z);
    Tensor *smz = op_mul(c, sm, z);
    Tensor *msmz = op_mean(c, smz);
    Tensor *gx = op_matmul(c, gg, g->x, 1, 0);          /* [5, 6] = gg^T x */
    Tensor *sgx = op_sum(c, gx);
    Tensor *shb = op_mean(c, hbs);
    Tensor *c16 = op_cast(c, shb, DT_F32);              /* identity cast */
    Tensor *s1 = op_scale(c, msmz, 0.3f), *s2 = op_scale(c, sgx, 0.01f);
    Tensor *s3 = op_scale(c, c16, 0.05f);
    Tensor *t1 = op_add(c, ce, s1);
    Tensor *t2 = op_add(c, s2, s3);
    Tensor *loss = op_add(c, t1, t2);
    float v;
    tensor_to_f32(&v, loss);
    Tensor *all[] = {l1, h, th, p, hs, gg, hb, hbs, z, ce, sm, smz, msmz, gx, sgx, shb, c16, s1, s2, s3, t1, t2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tensor_release(all[i]);
    if (backward) ad_backward(c, loss, 1.0f);
    else ad_tape_clear(c);
    tensor_release(loss);
    return v;
}

static inline void graph_init(Ctx *c, Graph *g)
{
    params_init(&g->ps);
    params_add(&g->ps, "w1", 2, (int64_t[]){5, 6}, INIT_UNIFORM, 0.6f, 1);
    params_add(&g->ps, "b1", 1, (int64_t[]){5}, INIT_UNIFORM, 0.3f, 0);
    params_add(&g->ps, "w2", 2, (int64_t[]){3, 5}, INIT_NORMAL, 0.5f, 1);
    params_add(&g->ps, "b2", 1, (int64_t[]){3}, INIT_UNIFORM, 0.3f, 0);
    params_add(&g->ps, "m", 3, (int64_t[]){2, 5, 5}, INIT_NORMAL, 0.4f, 1);
    params_alloc(&g->ps, c, 1234);
    float xh[24];
    check_fill(xh, 24, -1.5f, 1.5f);
    g->x = tensor_from_f32(c, xh, DT_F32, 2, (int64_t[]){4, 6});
    g->x->requires_grad = 1;
    int32_t th[4] = {0, 2, 1, 0};   /* row 1 is ignored (ignore_index 2) */
    g->t = tensor_from_host(c, th, DT_I32, 1, (int64_t[]){4});
}

#endif
