/* dropout.c — CPU reference (f32) for inverted dropout with a Philox mask;
 * ops/dropout.cu holds the CUDA kernels (contract in dropout.h).
 *
 * Shape letters: n elements.
 *
 *   keep_i = drop_keep_bit(seed, offset, i, thr),   s = drop_scale(p)
 *   y_i = keep_i ? x_i * s : 0            dx_i (+)= keep_i ? dy_i * s : 0
 *
 * A group of 16 elements takes one Philox call (drop_keep16). The products
 * are single f32 multiplies with the same s as the GPU, so f32 results match
 * the CUDA kernels bit for bit.
 */
#include "dropout.h"

/* Below this many elements a parallel region costs more than the loop. */
#define DROPOUT_OMP_MIN 16384

/* y[i] (+)= keep_i ? x[i] * s : 0, sixteen elements a Philox call */
static void dropout_cpu(float *y, const float *x, float p, uint64_t seed, uint64_t offset,
                        size_t n, int accum)
{
    const float s = drop_scale(p);
    const uint32_t thr = drop_threshold(p);
    const size_t ng = (size_t)drop_blocks(n);
#pragma omp parallel for if (n >= DROPOUT_OMP_MIN)
    for (size_t g = 0; g < ng; g++) {
        const unsigned keep = drop_keep16(seed, offset, g, thr);
        for (size_t i = 16 * g; i < n && i < 16 * g + 16; i++) {
            const float v = (keep >> (i & 15)) & 1u ? x[i] * s : 0.0f;
            y[i] = accum ? y[i] + v : v;
        }
    }
}

void dropout_forward_cpu(float *y, const float *x, float p, uint64_t seed, uint64_t offset,
                         size_t n)
{
    dropout_cpu(y, x, p, seed, offset, n, 0);
}

/* forward: y = keep ? x * s : 0   so   dx = keep ? dy * s : 0   (the same mask,
 * regenerated from (seed, offset)) */
void dropout_backward_cpu(float *dx, const float *dy, float p, uint64_t seed,
                          uint64_t offset, size_t n, int accum)
{
    dropout_cpu(dx, dy, p, seed, offset, n, accum);
}
