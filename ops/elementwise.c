/* elementwise.c — CPU reference (f32) for add, scale, mul, bias-add, relu, gelu, tanh.
 *
 * Shape letters: n elements; R rows, C columns (the last dim).
 *
 *   add       y = a + b
 *   scale     y (+)= alpha * x              (also the backward of add and scale)
 *   mul       y = a * b                     da (+)= dy * b,  db (+)= dy * a
 *   bias-add  y[r,c] = x[r,c] + b[c]        db[c] (+)= sum_r dy[r,c]
 *   relu      y = max(x, 0)                 dx (+)= dy * [x > 0]
 *   gelu      y = x Phi(x) = 0.5 x (1 + erf(x / sqrt2))
 *                                           dx (+)= dy * (Phi(x) + x phi(x))
 *   tanh      y = tanh(x)                   dx (+)= dy * (1 - y^2)
 *
 * `accum`: 0 writes the result, 1 adds it to what the output holds.
 * Transcendentals and column sums are computed in double and rounded once to
 * f32: this file is the ground truth the CUDA kernels are tested against.
 */
#include "elementwise.h"

#include <math.h>
#include "engine/error.h"

/* Below this many elements a parallel region costs more than the loop. */
#define EW_OMP_MIN 32768

void add_forward_cpu(float *y, const float *a, const float *b, size_t n)
{
#pragma omp parallel for if (n >= EW_OMP_MIN)
    for (size_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

void scale_forward_cpu(float *y, const float *x, float alpha, size_t n, int accum)
{
#pragma omp parallel for if (n >= EW_OMP_MIN)
    for (size_t i = 0; i < n; i++) {
        float v = alpha * x[i];
        y[i] = accum ? y[i] + v : v;
    }
}

void mul_forward_cpu(float *y, const float *a, const float *b, size_t n)
{
#pragma omp parallel for if (n >= EW_OMP_MIN)
    for (size_t i = 0; i < n; i++) y[i] = a[i] * b[i];
}

/* forward: y = a * b   so   da (+)= dy * b,  db (+)= dy * a */
void mul_backward_cpu(float *da, float *db, const float *dy, const float *a,
                      const float *b, size_t n, int accum_a, int accum_b)
{
    if (da) {
#pragma omp parallel for if (n >= EW_OMP_MIN)
        for (size_t i = 0; i < n; i++) {
            float v = dy[i] * b[i];
            da[i] = accum_a ? da[i] + v : v;
        }
    }
    if (db) {
#pragma omp parallel for if (n >= EW_OMP_MIN)
        for (size_t i = 0; i < n; i++) {
            float v = dy[i] * a[i];
            db[i] = accum_b ? db[i] + v : v;
        }
    }
}

void bias_add_forward_cpu(float *y, const float *x, const float *b, size_t R, size_t C)
{
#pragma omp parallel for if (R * C >= EW_OMP_MIN)
    for (size_t r = 0; r < R; r++)
        for (size_t c = 0; c < C; c++) y[r * C + c] = x[r * C + c] + b[c];
}

/* forward: y[r,c] = x[r,c] + b[c]   so   db[c] (+)= sum_r dy[r,c]
 * Columns are split into strips of BIAS_STRIP; each strip walks the rows in
 * order (row-major reads stay contiguous) and sums in double, so the result
 * does not depend on the thread count. */
#define BIAS_STRIP 64
void bias_backward_cpu(float *db, const float *dy, size_t R, size_t C, int accum)
{
    size_t nstrips = (C + BIAS_STRIP - 1) / BIAS_STRIP;
#pragma omp parallel for if (R * C >= EW_OMP_MIN)
    for (size_t s = 0; s < nstrips; s++) {
        size_t c0 = s * BIAS_STRIP;
        size_t w = C - c0 < BIAS_STRIP ? C - c0 : BIAS_STRIP;
        double acc[BIAS_STRIP] = {0};
        for (size_t r = 0; r < R; r++)
            for (size_t j = 0; j < w; j++) acc[j] += dy[r * C + c0 + j];
        for (size_t j = 0; j < w; j++)
            db[c0 + j] = accum ? (float)(db[c0 + j] + acc[j]) : (float)acc[j];
    }
}

/* Phi(x), the standard normal CDF; erfc keeps the left tail accurate where
 * 1 + erf(x) would cancel. */
static double normal_cdf(double x) { return 0.5 * erfc(-x * M_SQRT1_2); }
/* phi(x), the standard normal density. */
static double normal_pdf(double x) { return exp(-0.5 * x * x) * (0.5 * M_2_SQRTPI * M_SQRT1_2); }

void act_forward_cpu(ActKind k, float *y, const float *x, size_t n)
{
    switch (k) {
    case ACT_RELU:
#pragma omp parallel for if (n >= EW_OMP_MIN)
        for (size_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
        break;
    case ACT_GELU:
#pragma omp parallel for if (n >= EW_OMP_MIN)
        for (size_t i = 0; i < n; i++) y[i] = (float)(x[i] * normal_cdf(x[i]));
        break;
    case ACT_TANH:
#pragma omp parallel for if (n >= EW_OMP_MIN)
        for (size_t i = 0; i < n; i++) y[i] = (float)tanh((double)x[i]);
        break;
    default:
        ct_fatal("act_forward_cpu: unknown activation kind %d", (int)k);
    }
}

void act_backward_cpu(ActKind k, float *dx, const float *dy, const float *x,
                      const float *y, size_t n, int accum)
{
    switch (k) {
    case ACT_RELU:
        /* forward: y = x > 0 ? x : 0   so   dx = x > 0 ? dy : 0 */
        CT_ASSERT(n == 0 || x != NULL, "act_backward_cpu: relu backward reads x, got NULL");
#pragma omp parallel for if (n >= EW_OMP_MIN)
        for (size_t i = 0; i < n; i++) {
            float v = x[i] > 0.0f ? dy[i] : 0.0f;
            dx[i] = accum ? dx[i] + v : v;
        }
        break;
    case ACT_GELU:
        /* forward: y = x * Phi(x)   so   dx = dy * (Phi(x) + x * phi(x)) */
        CT_ASSERT(n == 0 || x != NULL, "act_backward_cpu: gelu backward reads x, got NULL");
#pragma omp parallel for if (n >= EW_OMP_MIN)
        for (size_t i = 0; i < n; i++) {
            double xi = x[i];
            float v = (float)(dy[i] * (normal_cdf(xi) + xi * normal_pdf(xi)));
            dx[i] = accum ? dx[i] + v : v;
        }
        break;
    case ACT_TANH:
        /* forward: y = tanh(x)   so   dx = dy * (1 - y^2) */
        CT_ASSERT(n == 0 || y != NULL, "act_backward_cpu: tanh backward reads y, got NULL");
#pragma omp parallel for if (n >= EW_OMP_MIN)
        for (size_t i = 0; i < n; i++) {
            float v = dy[i] * (1.0f - y[i] * y[i]);
            dx[i] = accum ? dx[i] + v : v;
        }
        break;
    default:
        ct_fatal("act_backward_cpu: unknown activation kind %d", (int)k);
    }
}
