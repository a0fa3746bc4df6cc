/* dropout.c — CPU reference (f32) for inverted dropout with a Philox mask;
 * ops/dropout.cu holds the CUDA kernels (contract in dropout.h).
 *
 * Shape letters: n elements.
 *
 *   keep_i = philox_uniform(seed, offset, i) >= p,   s = 1 / (1 - p)
 *   y_i = keep_i ? x_i * s : 0            dx_i (+)= keep_i ? dy_i * s : 0
 *
 * The products are single f32 multiplies with the same s as the GPU
 * (dropout_scale), so f32 results match the CUDA kernels bit for bit.
 */
#include "dropout.h"

/* Below this many elements a parallel region costs more than the loop. */
#define DROPOUT_OMP_MIN 16384

void dropout_forward_cpu(float *y, const float *x, float p, uint64_t seed, uint64_t offset,
                         size_t n)
{
    const float s = dropout_scale(p);
#pragma omp parallel for if (n >= DROPOUT_OMP_MIN)
    for (size_t i = 0; i < n; i++)
        y[i] = philox_uniform(seed, offset, i) >= p ? x[i] * s : 0.0f;
}

/* forward: y = keep ? x * s : 0   so   dx = keep ? dy * s : 0   (the same mask,
 * regenerated from (seed, offset)) */
void dropout_backward_cpu(float *dx, const float *dy, float p, uint64_t seed,
                          uint64_t offset, size_t n, int accum)
{
    const float s = dropout_scale(p);
#pragma omp parallel for if (n >= DROPOUT_OMP_MIN)
    for (size_t i = 0; i < n; i++) {
        float v = philox_uniform(seed, offset, i) >= p ? dy[i] * s : 0.0f;
        dx[i] = accum ? dx[i] + v : v;
    }
}
