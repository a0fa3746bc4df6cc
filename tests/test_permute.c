/* test_permute.c — transpose12 and reshape on the CPU: exact element moves,
 * and gradients through autograd (the transpose of the incoming gradient). */
#include "check.h"
#include "../engine/autograd.h"
#include "../ops/ops.h"
#include "../ops/permute.h"

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
    ctx_free(&c);
    return check_summary();
}
