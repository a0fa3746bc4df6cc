/* batchnorm_sync.c — CPU reference of the sync batch norm's per-channel
 * steps (math in ops/batchnorm_sync.h). */
#include "batchnorm_sync.h"

#include <math.h>

void bn_sync_center_cpu(float *dev, const float *mean_i, const float *invstd_i,
                        const float *mean, float eps, size_t C)
{
    for (size_t c = 0; c < C; c++) {
        float var_i = 1.0f / (invstd_i[c] * invstd_i[c]) - eps;
        float d = mean_i[c] - mean[c];
        dev[c] = (var_i > 0.0f ? var_i : 0.0f) + d * d;
    }
}

void bn_sync_finish_cpu(float *mean_out, float *invstd_out, float *running_mean,
                        float *running_var, int64_t *num_batches_tracked, const float *mean,
                        const float *var, float momentum, float eps, size_t M_total, size_t C)
{
    for (size_t c = 0; c < C; c++) {
        float m = mean[c], v = var[c] > 0.0f ? var[c] : 0.0f;
        mean_out[c] = m;
        invstd_out[c] = 1.0f / sqrtf(v + eps);
        if (running_mean) {
            float unbiased = M_total > 1 ? v * (float)M_total / (float)(M_total - 1) : v;
            running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * m;
            running_var[c] = (1.0f - momentum) * running_var[c] + momentum * unbiased;
        }
    }
    if (running_mean && num_batches_tracked) *num_batches_tracked += 1;
}

void bn_sync_grads_cpu(float *dgamma, float *dbeta, float *sums, size_t M, size_t C,
                       int accum_g, int accum_b)
{
    float *sg = sums, *sgx = sums + C;
    for (size_t c = 0; c < C; c++) {
        if (dbeta) dbeta[c] = accum_b ? dbeta[c] + sg[c] : sg[c];
        if (dgamma) dgamma[c] = accum_g ? dgamma[c] + sgx[c] : sgx[c];
        sg[c] /= (float)M;
        sgx[c] /= (float)M;
    }
}
