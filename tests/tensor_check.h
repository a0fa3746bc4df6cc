/* tensor_check.h — comparing two engine tensors in tests (any float type,
 * read back in f32). Include after check.h and gpu_util.h. */
#ifndef CTRAIN_TESTS_TENSOR_CHECK_H
#define CTRAIN_TESTS_TENSOR_CHECK_H

#include <stdlib.h>
#include "../engine/tensor.h"

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
