/* test_accum.c — gradient accumulation: K micro-batches of B, each loss
 * scaled by 1/K, add into the gradient buffer exactly what one batch of K*B
 * gives (f32, <= 1e-5 relative). The MLP has no batch coupling; a ResNet's
 * batch norm couples the samples of a batch, so there accumulation equals
 * the big batch only per micro-batch, not across (tested with the ResNet).
 */
#include <string.h>
#include "check.h"
#include "engine/autograd.h"
#include "models/mlp.h"
#include "ops/ops.h"

static void grads_for(Ctx *c, Model *m, const float *x, const int32_t *y, int B, int K, float *out)
{
    params_zero_grad(&m->params);
    int mb = B / K;
    for (int k = 0; k < K; k++) {
        Tensor *xt = tensor_from_f32(c, x + (size_t)k * mb * 784, DT_F32, 2, (int64_t[]){mb, 784});
        Tensor *yt = tensor_from_host(c, y + (size_t)k * mb, DT_I32, 1, (int64_t[]){mb});
        Tensor *z = m->forward(c, m, xt);
        Tensor *loss = op_cross_entropy(c, z, yt, -1, 0.0f);
        ad_backward(c, loss, 1.0f / (float)K);   /* loss / K: the mean over K*B samples */
        tensor_release(loss); tensor_release(z); tensor_release(xt); tensor_release(yt);
    }
    memcpy(out, m->params.grad, m->params.total * sizeof(float));
}

int main(void)
{
    check_seed(99);
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    Model m;
    int hidden[2] = {64, 32};
    mlp_create(&m, &c, 784, hidden, 2, 10, 7);
    enum { B = 48 };
    static float x[B * 784];
    int32_t y[B];
    check_fill(x, B * 784, -1, 2);
    for (int i = 0; i < B; i++) y[i] = (int32_t)check_uniform(0, 10) % 10;
    size_t n = m.params.total;
    float *big = malloc(n * sizeof(float)), *acc = malloc(n * sizeof(float));
    grads_for(&c, &m, x, y, B, 1, big);
    int ks[3] = {2, 4, 8};
    for (int i = 0; i < 3; i++) {
        char name[64];
        grads_for(&c, &m, x, y, B, ks[i], acc);   /* 48 = 2 * 24 = 4 * 12 = 8 * 6 */
        snprintf(name, sizeof name, "accum.mlp.K%d_equals_big_batch", ks[i]);
        check_close(name, acc, big, n, 1e-7, 1e-5);
    }
    free(big); free(acc);
    model_free(&m);
    ctx_free(&c);
    return check_summary();
}
