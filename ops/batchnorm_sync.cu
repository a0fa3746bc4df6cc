/* batchnorm_sync.cu — the sync batch norm's per-channel steps on the GPU
 * (math in ops/batchnorm_sync.h; the CPU reference is batchnorm_sync.c).
 * One thread a channel: C is at most a few thousand, these are tiny next to
 * the statistics and backward passes around them. */
#include "batchnorm_sync.h"

#include "cuda_util.cuh"

namespace {

__global__ void center_kernel(float *dev, const float *mean_i, const float *invstd_i,
                              const float *mean, float eps, size_t C)
{
    size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float var_i = 1.0f / (invstd_i[c] * invstd_i[c]) - eps;
    float d = mean_i[c] - mean[c];
    dev[c] = fmaxf(var_i, 0.0f) + d * d;
}

__global__ void finish_kernel(float *mean_out, float *invstd_out, float *rmean, float *rvar,
                              int64_t *nbt, const float *mean, const float *var, float momentum,
                              float eps, size_t M_total, size_t C)
{
    size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c == 0 && rmean && nbt) *nbt += 1;
    if (c >= C) return;
    float m = mean[c], v = fmaxf(var[c], 0.0f);
    mean_out[c] = m;
    invstd_out[c] = 1.0f / sqrtf(v + eps);
    if (rmean) {
        float unbiased = M_total > 1 ? v * (float)M_total / (float)(M_total - 1) : v;
        rmean[c] = (1.0f - momentum) * rmean[c] + momentum * m;
        rvar[c] = (1.0f - momentum) * rvar[c] + momentum * unbiased;
    }
}

__global__ void grads_kernel(float *dgamma, float *dbeta, float *sums, size_t M, size_t C,
                             int accum_g, int accum_b)
{
    size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float sg = sums[c], sgx = sums[C + c];
    if (dbeta) dbeta[c] = accum_b ? dbeta[c] + sg : sg;
    if (dgamma) dgamma[c] = accum_g ? dgamma[c] + sgx : sgx;
    sums[c] = sg / (float)M;
    sums[C + c] = sgx / (float)M;
}

unsigned blocks_for(size_t C) { return (unsigned)((C + 255) / 256 ? (C + 255) / 256 : 1); }

} // namespace

extern "C" void bn_sync_center_cuda(float *dev, const float *mean_i, const float *invstd_i,
                                    const float *mean, float eps, size_t C, cudaStream_t s)
{
    center_kernel<<<blocks_for(C), 256, 0, s>>>(dev, mean_i, invstd_i, mean, eps, C);
    CUDA_CHECK_LAUNCH();
}

extern "C" void bn_sync_finish_cuda(float *mean_out, float *invstd_out, float *running_mean,
                                    float *running_var, int64_t *num_batches_tracked,
                                    const float *mean, const float *var, float momentum,
                                    float eps, size_t M_total, size_t C, cudaStream_t s)
{
    finish_kernel<<<blocks_for(C), 256, 0, s>>>(mean_out, invstd_out, running_mean, running_var,
                                                num_batches_tracked, mean, var, momentum, eps,
                                                M_total, C);
    CUDA_CHECK_LAUNCH();
}

extern "C" void bn_sync_grads_cuda(float *dgamma, float *dbeta, float *sums, size_t M, size_t C,
                                   int accum_g, int accum_b, cudaStream_t s)
{
    grads_kernel<<<blocks_for(C), 256, 0, s>>>(dgamma, dbeta, sums, M, C, accum_g, accum_b);
    CUDA_CHECK_LAUNCH();
}
