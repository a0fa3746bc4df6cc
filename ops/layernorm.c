/* layernorm.c — CPU reference (f32 in and out) for LayerNorm over the last
 * dim; ops/layernorm.cu holds the CUDA kernels (contract in layernorm.h).
 *
 * Shape letters: R rows, D the normalized width; row r is x[r*D .. r*D + D).
 *
 *   mean_r = sum_d x / D,  var_r = sum_d (x - mean_r)^2 / D   (two passes)
 *   invstd_r = 1 / sqrt(var_r + eps),  xhat = (x - mean_r) invstd_r
 *   y = xhat * gamma + beta
 *
 * Row statistics and the column sums of the backward are computed in double
 * and rounded once: this file is the ground truth the CUDA kernels are
 * tested against. The backward reads the saved f32 mean/invstd, as the CUDA
 * backward does, so both differentiate the same rounded statistics.
 */
#include "layernorm.h"

#include <math.h>
#include <stdlib.h>

#include "engine/error.h"

/* Below this many elements a parallel region costs more than the loop. */
#define LN_OMP_MIN 32768

void layernorm_forward_cpu(float *y, float *mean, float *invstd, const float *x,
                           const float *gamma, const float *beta, float eps, size_t R,
                           size_t D)
{
    CT_ASSERT(D > 0, "layernorm_forward_cpu: D must be positive");
#pragma omp parallel for if (R * D >= LN_OMP_MIN)
    for (size_t r = 0; r < R; r++) {
        const float *xr = x + r * D;
        float *yr = y + r * D;
        double s = 0.0, q = 0.0;
        for (size_t d = 0; d < D; d++) s += xr[d];
        double mu = s / (double)D;
        for (size_t d = 0; d < D; d++) q += ((double)xr[d] - mu) * ((double)xr[d] - mu);
        double is = 1.0 / sqrt(q / (double)D + (double)eps);
        for (size_t d = 0; d < D; d++)
            yr[d] = (float)(((double)xr[d] - mu) * is * gamma[d] + beta[d]);
        mean[r] = (float)mu;
        invstd[r] = (float)is;
    }
}

/* forward: y = (x - mean) * invstd * gamma + beta
 *   so dbeta[d] += dy,  dgamma[d] += dy * xhat,  and with g = dy * gamma,
 *   dx = invstd * (g - mean(g) - xhat * mean(g * xhat))
 * (mean and invstd depend on x; these are their contributions, folded in). */
void layernorm_backward_cpu(float *dx, float *dgamma, float *dbeta, const float *dy,
                            const float *x, const float *mean, const float *invstd,
                            const float *gamma, size_t R, size_t D, int accum_x,
                            int accum_gamma, int accum_beta)
{
    if (dx) {
#pragma omp parallel for if (R * D >= LN_OMP_MIN)
        for (size_t r = 0; r < R; r++) {
            const float *xr = x + r * D, *dyr = dy + r * D;
            float *dxr = dx + r * D;
            double mu = mean[r], is = invstd[r], m1 = 0.0, m2 = 0.0;
            for (size_t d = 0; d < D; d++) {
                double xh = ((double)xr[d] - mu) * is, g = (double)dyr[d] * gamma[d];
                m1 += g;
                m2 += g * xh;
            }
            m1 /= (double)D;
            m2 /= (double)D;
            for (size_t d = 0; d < D; d++) {
                double xh = ((double)xr[d] - mu) * is, g = (double)dyr[d] * gamma[d];
                double v = is * (g - m1 - xh * m2);
                dxr[d] = accum_x ? (float)(dxr[d] + v) : (float)v;
            }
        }
    }
    if (!dgamma && !dbeta) return;
    double *acc = (double *)calloc(2 * D, sizeof(double));
    if (!acc) ct_fatal("layernorm_backward_cpu: out of host memory (%zu columns)", D);
    /* rows in order, so the sums do not depend on the thread count */
    for (size_t r = 0; r < R; r++) {
        const float *xr = x + r * D, *dyr = dy + r * D;
        double mu = mean[r], is = invstd[r];
        for (size_t d = 0; d < D; d++) {
            acc[d] += (double)dyr[d] * (((double)xr[d] - mu) * is);
            acc[D + d] += dyr[d];
        }
    }
    for (size_t d = 0; d < D; d++) {
        if (dgamma) dgamma[d] = accum_gamma ? (float)(dgamma[d] + acc[d]) : (float)acc[d];
        if (dbeta) dbeta[d] = accum_beta ? (float)(dbeta[d] + acc[D + d]) : (float)acc[D + d];
    }
    free(acc);
}
