/* test_shape_ops.c — transpose12, reshape and gather_rows on the CPU: exact
 * element moves, and gradients through autograd. */
#include "check.h"
#include "engine/autograd.h"
#include "ops/ops.h"
#include "ops/permute.h"
#include "ops/gather.h"

int main(void)
{
    check_seed(4);
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    enum { A = 2, B = 3, C = 4, D = 5, N = A * B * C * D };
    float xh[N], yh[N], w[N];
    check_fill(xh, N, -1, 1);
    check_fill(w, N, -1, 1);
    Tensor *x = tensor_from_f32(&c, xh, DT_F32, 4, (int64_t[]){A, B, C, D});
    x->requires_grad = 1;
    Tensor *y = op_transpose12(&c, x);
    tensor_to_f32(yh, y);
    int ok = y->shape[1] == C && y->shape[2] == B;
    for (int a = 0; a < A; a++)
        for (int b = 0; b < B; b++)
            for (int cc = 0; cc < C; cc++)
                for (int d = 0; d < D; d++)
                    ok &= yh[((a * C + cc) * B + b) * D + d] == xh[((a * B + b) * C + cc) * D + d];
    check_true("transpose12.forward", ok, "elements misplaced");
    /* loss = sum(w * reshape(y)) so dx = transpose back of w */
    Tensor *r = op_reshape(&c, y, 2, (int64_t[]){A * C, B * D});
    Tensor *wt = tensor_from_f32(&c, w, DT_F32, 2, (int64_t[]){A * C, B * D});
    Tensor *p = op_mul(&c, r, wt);
    Tensor *loss = op_sum(&c, p);
    ad_backward(&c, loss, 1.0f);
    float dx[N], ref[N];
    tensor_to_f32(dx, x->grad);
    for (int a = 0; a < A; a++)
        for (int b = 0; b < B; b++)
            for (int cc = 0; cc < C; cc++)
                for (int d = 0; d < D; d++)
                    ref[((a * B + b) * C + cc) * D + d] = w[((a * C + cc) * B + b) * D + d];
    check_close("transpose12.reshape.backward", dx, ref, N, 0, 0);
    tensor_release(loss); tensor_release(p); tensor_release(wt); tensor_release(r);
    tensor_release(y); tensor_release(x);

    /* gather rows 4, 0, 2 of a [5, 3] matrix; loss = sum(w * y) */
    float gx[15], gw[9], gy[9], gdx[15], gref[15] = {0};
    check_fill(gx, 15, -1, 1);
    check_fill(gw, 9, -1, 1);
    int32_t ix[3] = {4, 0, 2};
    Tensor *X = tensor_from_f32(&c, gx, DT_F32, 2, (int64_t[]){5, 3});
    X->requires_grad = 1;
    Tensor *I = tensor_from_host(&c, ix, DT_I32, 1, (int64_t[]){3});
    Tensor *W = tensor_from_f32(&c, gw, DT_F32, 2, (int64_t[]){3, 3});
    Tensor *G = op_gather_rows(&c, X, I);
    tensor_to_f32(gy, G);
    int gok = 1;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) gok &= gy[i * 3 + j] == gx[ix[i] * 3 + j];
    check_true("gather.forward", gok, "rows misplaced");
    Tensor *GP = op_mul(&c, G, W), *GL = op_sum(&c, GP);
    ad_backward(&c, GL, 1.0f);
    tensor_to_f32(gdx, X->grad);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) gref[ix[i] * 3 + j] = gw[i * 3 + j];
    check_close("gather.backward", gdx, gref, 15, 0, 0);
    tensor_release(GL); tensor_release(GP); tensor_release(G); tensor_release(W);
    tensor_release(I); tensor_release(X);
    ctx_free(&c);
    return check_summary();
}
