/* batchnorm.c — CPU references (f32 in and out) for batch normalization with
 * the fused residual add and ReLU; ops/batchnorm.cu holds the CUDA kernels
 * with the same contract, and ops/batchnorm.h the math.
 *
 * Shape letters: x [M, C], M = N*H*W rows, C channels (contiguous).
 *
 * Statistics and the gradient sums run in double (two passes for the
 * variance), so the reference is exact to f32 rounding; the per-element
 * passes compute in f32 as the GPU does, and use OpenMP over rows.
 * Also here: the chunking of the CUDA reductions (batchnorm_chunks), which
 * the host needs to size their scratch.
 */
#include "batchnorm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/error.h"

/* ---- CUDA reduction layout (host arithmetic, also built without CUDA) ---- */

size_t batchnorm_cols(size_t C) { return C < BN_COLS ? (C ? C : 1) : BN_COLS; }
size_t batchnorm_lanes(size_t C) { return BN_THREADS / batchnorm_cols(C); }

size_t batchnorm_chunks(size_t M, size_t C, size_t *rows_per_chunk)
{
    size_t cols = batchnorm_cols(C);
    size_t col_blocks = (C + cols - 1) / cols;
    if (col_blocks < 1) col_blocks = 1;
    size_t G = (BN_TARGET_BLOCKS + col_blocks - 1) / col_blocks;
    size_t min_rows = batchnorm_lanes(C) * BN_MIN_ROWS_PER_LANE;
    size_t max_G = (M + min_rows - 1) / min_rows;
    if (G > max_G) G = max_G;
    if (G < 1) G = 1;
    size_t rpc = (M + G - 1) / G;
    if (rpc < 1) rpc = 1;
    G = (M + rpc - 1) / rpc; /* no empty chunk at the end */
    if (G < 1) G = 1;
    if (rows_per_chunk) *rows_per_chunk = rpc;
    return G;
}

size_t batchnorm_scratch_bytes(size_t M, size_t C)
{
    size_t G = batchnorm_chunks(M, C, NULL);
    return (2 * G * C + 2 * C) * sizeof(float);
}

/* ---- statistics ---- */

/* mu[c] = (1/M) sum x, ss[c] = sum (x - mu)^2 in double, two passes;
 * s holds 2 C doubles, zeroed by the caller */
static void moments_d(double *mu, double *ss, const float *x, size_t M, size_t C)
{
    /* rows outer, channels inner: one sequential sweep per pass */
    for (size_t m = 0; m < M; m++)
        for (size_t c = 0; c < C; c++) mu[c] += x[m * C + c];
    for (size_t c = 0; c < C; c++) mu[c] /= (double)M;
    for (size_t m = 0; m < M; m++)
        for (size_t c = 0; c < C; c++) {
            double d = x[m * C + c] - mu[c];
            ss[c] += d * d;
        }
}

void batchnorm_stats_cpu(float *mean, float *invstd, float *running_mean, float *running_var,
                         int64_t *num_batches_tracked, const float *x, float momentum,
                         float eps, size_t M, size_t C)
{
    CT_ASSERT(M >= 1, "batchnorm_stats_cpu: no rows (M = 0)");
    double *s = calloc(2 * C, sizeof(double)), *mu = s, *ss = s + C;
    if (!s) ct_fatal("out of host memory for batch norm statistics");
    moments_d(mu, ss, x, M, C);
    for (size_t c = 0; c < C; c++) {
        double var = ss[c] / (double)M; /* biased: what normalises the batch */
        mean[c] = (float)mu[c];
        invstd[c] = (float)(1.0 / sqrt(var + (double)eps));
        if (running_mean && running_var) {
            CT_ASSERT(M >= 2, "batchnorm: the unbiased variance needs M >= 2 rows");
            double unbiased = ss[c] / (double)(M - 1);
            running_mean[c] = (float)((1.0 - momentum) * running_mean[c] + momentum * mu[c]);
            running_var[c] = (float)((1.0 - momentum) * running_var[c] + momentum * unbiased);
        }
    }
    if (num_batches_tracked) *num_batches_tracked += 1;
    free(s);
}

void batchnorm_moments_cpu(float *mean, float *m2, const float *x, size_t M, size_t C)
{
    CT_ASSERT(M >= 1, "batchnorm_moments_cpu: no rows (M = 0)");
    double *s = calloc(2 * C, sizeof(double)), *mu = s, *ss = s + C;
    if (!s) ct_fatal("out of host memory for batch norm statistics");
    moments_d(mu, ss, x, M, C);
    for (size_t c = 0; c < C; c++) {
        mean[c] = (float)mu[c];
        m2[c] = (float)ss[c];
    }
    free(s);
}

void batchnorm_stats_from_moments_cpu(float *mean, float *invstd, float *running_mean,
                                      float *running_var, int64_t *num_batches_tracked,
                                      const float *mom_mean, const float *mom_m2, float momentum,
                                      float eps, size_t M, size_t C)
{
    CT_ASSERT(M >= 1, "batchnorm_stats_from_moments_cpu: no rows (M = 0)");
    for (size_t c = 0; c < C; c++) {
        double mu = mom_mean[c], ss = mom_m2[c];
        mean[c] = mom_mean[c];
        invstd[c] = (float)(1.0 / sqrt(ss / (double)M + (double)eps));
        if (running_mean && running_var) {
            CT_ASSERT(M >= 2, "batchnorm: the unbiased variance needs M >= 2 rows");
            double unbiased = ss / (double)(M - 1);
            running_mean[c] = (float)((1.0 - momentum) * running_mean[c] + momentum * mu);
            running_var[c] = (float)((1.0 - momentum) * running_var[c] + momentum * unbiased);
        }
    }
    if (num_batches_tracked) *num_batches_tracked += 1;
}

void batchnorm_eval_stats_cpu(float *mean, float *invstd, const float *running_mean,
                              const float *running_var, float eps, size_t C)
{
    for (size_t c = 0; c < C; c++) {
        mean[c] = running_mean[c];
        invstd[c] = 1.0f / sqrtf(running_var[c] + eps);
    }
}

/* ---- forward ---- */

/* y = act((x - mean) s + beta + z),  s = gamma invstd */
void batchnorm_forward_cpu(float *y, const float *x, const float *z, const float *mean,
                           const float *invstd, const float *gamma, const float *beta,
                           int relu, size_t M, size_t C)
{
#pragma omp parallel for schedule(static) if (M * C > 65536)
    for (size_t m = 0; m < M; m++) {
        const float *xr = x + m * C;
        float *yr = y + m * C;
        for (size_t c = 0; c < C; c++) {
            float s = (gamma ? gamma[c] : 1.0f) * invstd[c];
            float v = (xr[c] - mean[c]) * s + (beta ? beta[c] : 0.0f);
            if (z) v += z[m * C + c];
            yr[c] = relu && !(v > 0.0f) ? 0.0f : v;
        }
    }
}

/* ---- backward ---- */

/* The ReLU's mask of element i (channel c): relu 1 reads the output y,
 * relu 2 recomputes gamma xhat + beta from x as the forward did; 0: none */
static int bn_keep(int relu, const float *y, const float *x, const float *mean,
                   const float *invstd, const float *gamma, const float *beta, size_t i,
                   size_t c)
{
    if (relu == 1) return y[i] > 0.0f;
    if (relu == 2) {
        float s = (gamma ? gamma[c] : 1.0f) * invstd[c];
        return (x[i] - mean[c]) * s + (beta ? beta[c] : 0.0f) > 0.0f;
    }
    return 1;
}

/* forward: y = act(gamma xhat + beta + z),  xhat = (x - mean) invstd
 *   so with g = act'(.) dy (the ReLU mask read from y):
 *   dbeta += sum g,  dgamma += sum g xhat,  dz += g, and
 *   training: mean and invstd depend on x, which gives
 *     dx = gamma invstd (g - mean(g) - xhat mean(g xhat))
 *   eval: dx = gamma invstd g */
void batchnorm_backward_cpu(float *dx, float *dz, float *dgamma, float *dbeta, const float *dy,
                            const float *x, const float *y, const float *mean,
                            const float *invstd, const float *gamma, const float *beta,
                            int training, int relu,
                            size_t M, size_t C, int accum_x, int accum_z, int accum_p)
{
    CT_ASSERT(relu >= 0 && relu <= 2, "batchnorm_backward_cpu: relu mode %d (0, 1 or 2)", relu);
    CT_ASSERT(relu != 1 || y, "batchnorm_backward_cpu: the ReLU mask is read from y, got NULL");
    CT_ASSERT(relu != 2 || !dz, "batchnorm_backward_cpu: relu mode 2 recomputes the mask "
                                "without a residual; dz must be NULL");
    int need_sums = dgamma || dbeta || (dx && training);
    double *s = calloc(2 * C, sizeof(double)), *sg = s, *sgx = s + C;
    if (!s) ct_fatal("out of host memory for batch norm gradients");
    if (need_sums) {
        for (size_t m = 0; m < M; m++)
            for (size_t c = 0; c < C; c++) {
                size_t i = m * C + c;
                float g = bn_keep(relu, y, x, mean, invstd, gamma, beta, i, c) ? dy[i] : 0.0f;
                float xhat = (x[i] - mean[c]) * invstd[c];
                sg[c] += g;
                sgx[c] += (double)g * xhat;
            }
        for (size_t c = 0; c < C; c++) {
            if (dbeta) dbeta[c] = (float)(accum_p ? dbeta[c] + sg[c] : sg[c]);
            if (dgamma) dgamma[c] = (float)(accum_p ? dgamma[c] + sgx[c] : sgx[c]);
        }
    }
    float *mg = malloc(2 * (C ? C : 1) * sizeof(float)), *mgx = mg + C;
    if (!mg) ct_fatal("out of host memory for batch norm gradients");
    for (size_t c = 0; c < C; c++) {
        mg[c] = (float)(sg[c] / (double)M);
        mgx[c] = (float)(sgx[c] / (double)M);
    }
    batchnorm_backward_dx_cpu(dx, dz, dy, x, y, mean, invstd, gamma, beta, mg, mgx, training,
                              relu, M,
                              C, accum_x, accum_z);
    free(mg);
    free(s);
}

void batchnorm_backward_dx_cpu(float *dx, float *dz, const float *dy, const float *x,
                               const float *y, const float *mean, const float *invstd,
                               const float *gamma, const float *beta, const float *mg,
                               const float *mgx,
                               int training, int relu, size_t M, size_t C, int accum_x,
                               int accum_z)
{
    if (!dx && !dz) return;
#pragma omp parallel for schedule(static) if (M * C > 65536)
    for (size_t m = 0; m < M; m++)
        for (size_t c = 0; c < C; c++) {
            size_t i = m * C + c;
            float g = bn_keep(relu, y, x, mean, invstd, gamma, beta, i, c) ? dy[i] : 0.0f;
            if (dx) {
                float k = (gamma ? gamma[c] : 1.0f) * invstd[c];
                float v;
                if (training) {
                    float xhat = (x[i] - mean[c]) * invstd[c];
                    v = k * (g - mg[c] - xhat * mgx[c]);
                } else {
                    v = k * g;
                }
                dx[i] = accum_x ? dx[i] + v : v;
            }
            if (dz) dz[i] = accum_z ? dz[i] + g : g;
        }
}
