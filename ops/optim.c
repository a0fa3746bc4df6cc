/* optim.c — CPU reference of the optimizer updates (ops/optim.h); the CUDA
 * kernels in ops/optim.cu do the same arithmetic, operation for operation.
 *
 * Shape letters: n parameters in one contiguous range (one weight-decay group).
 *
 * SGD with momentum, PyTorch semantics (torch.optim.SGD, dampening 0):
 *   d = g + wd * p
 *   m = momentum * m + d            (m starts at 0, so step 1 gives m = d)
 *   p = p - lr * (nesterov ? d + momentum * m : m)
 * With momentum 0 this is plain SGD, p -= lr * d (m then just holds d).
 * Math in f32, one rounding per operation and no fused multiply-add, so the
 * GPU (which uses __fmul_rn / __fadd_rn) gives the same bits.
 */
#include "optim.h"

void sgd_step_cpu(float *p, float *m, const float *g, size_t n, float lr,
                  float momentum, float wd, int nesterov)
{
    for (size_t i = 0; i < n; i++) {
        /* one operation per statement: no compiler may fuse a multiply-add */
        float wp = wd * p[i];
        float d = g[i] + wp;
        float mm = momentum * m[i];
        float mi = mm + d;
        float mn = momentum * mi;
        float step = nesterov ? d + mn : mi;
        float ls = lr * step;
        m[i] = mi;
        p[i] = p[i] - ls;
    }
}
