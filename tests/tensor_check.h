/* tensor_check.h — comparing two engine tensors in tests (any float type,
 * read back in f32), and the weighted-sum loss the gradient checks
 * backpropagate. Include after check.h and gpu_util.h. */
#ifndef CTRAIN_TESTS_TENSOR_CHECK_H
#define CTRAIN_TESTS_TENSOR_CHECK_H

#include <stdlib.h>
#include "engine/autograd.h"
#include "engine/tensor.h"
#include "ops/ops.h"

/* A leaf of host f32 values (requires_grad), as a parameter or input the
 * test differentiates against. */
__attribute__((unused)) static Tensor *leaf_f32(Ctx *c, const float *h, int ndim,
                                               const int64_t *shape)
{
    Tensor *t = tensor_from_f32(c, h, DT_F32, ndim, shape);
    t->requires_grad = 1;
    return t;
}

/* A tensor's values read back as f32 (malloc'd: the caller frees them). */
__attribute__((unused)) static float *host_f32(Tensor *t)
{
    float *h = (float *)malloc((t->numel ? t->numel : 1) * sizeof(float));
    if (!h) abort();
    tensor_to_f32(h, t);
    return h;
}

/* loss = sum(y * w) on y's context, then backward: every gradient of y's
 * inputs is then w pulled back through the op. */
__attribute__((unused)) static void backward_weighted(Ctx *c, Tensor *y, const float *w)
{
    Tensor *tw = tensor_from_f32(c, w, y->dtype, y->ndim, y->shape);
    Tensor *m = op_mul(c, y, tw);
    Tensor *loss = op_sum(c, m);
    tensor_release(m);
    tensor_release(tw);
    ad_backward(c, loss, 1.0f);
    tensor_release(loss);
}

/* Two tensors of any float type compared in f32: by relative norm when
 * norm_tol > 0, element-wise (atol, rtol) otherwise. */
__attribute__((unused)) static void cmp_tensors(const char *name, Tensor *got, Tensor *ref,
                                                double atol, double rtol, double norm_tol)
{
    if (got->numel != ref->numel) {
        check_true(name, 0, "sizes differ: %zu vs %zu", got->numel, ref->numel);
        return;
    }
    float *a = falloc(got->numel), *b = falloc(ref->numel);
    tensor_to_f32(a, got);
    tensor_to_f32(b, ref);
    if (norm_tol > 0) check_rel_norm(name, a, b, got->numel, norm_tol);
    else check_close(name, a, b, got->numel, atol, rtol);
    free(a);
    free(b);
}

#endif
