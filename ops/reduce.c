/* reduce.c — CPU reference (f32) for sum and mean over the last dimension.
 *
 * Shape letters: R rows, C columns (the reduced, last dim); R = 1 reduces
 * everything.
 *
 *   forward:  y[r] = scale * sum_c x[r,c]      (scale 1 for sum, 1/C for mean)
 *   backward: dx[r,c] (+)= scale * dy[r]
 *
 * Row sums run in double and are rounded once, so the reference is as close
 * to the exact sum as f32 output allows and does not depend on thread count.
 */
#include "reduce.h"

/* Below this many elements a parallel region costs more than the loop. */
#define RED_OMP_MIN 32768

void reduce_sum_forward_cpu(float *y, const float *x, float scale, size_t R, size_t C)
{
#pragma omp parallel for if (R * C >= RED_OMP_MIN && R > 1)
    for (size_t r = 0; r < R; r++) {
        const float *row = x + r * C;
        double s = 0.0;
        for (size_t c = 0; c < C; c++) s += row[c];
        y[r] = (float)(s * scale);
    }
}

/* forward: y[r] = scale * sum_c x[r,c]   so   dx[r,c] (+)= scale * dy[r] */
void reduce_sum_backward_cpu(float *dx, const float *dy, float scale, size_t R,
                             size_t C, int accum)
{
#pragma omp parallel for if (R * C >= RED_OMP_MIN)
    for (size_t r = 0; r < R; r++) {
        float g = scale * dy[r];
        float *row = dx + r * C;
        for (size_t c = 0; c < C; c++) row[c] = accum ? row[c] + g : g;
    }
}
