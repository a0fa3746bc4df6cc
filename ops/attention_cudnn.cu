/* attention_cudnn.cu — the seed and offset tensors of cuDNN's fused
 * attention (ops/attention_cudnn.h): one thread writes
 *   rng[0] = seed,   rng[1] = offset + *rng_base (rng_base set: inside a captured step)
 * as int64 on the context's stream, right before an execution reads them.
 * So the forward and its backward read the node's same (seed, offset) and
 * cuDNN's RNG operation draws the same mask in both, and each replay of a
 * captured step draws the next step's mask, as ctrain's own dropout does
 * (ops/dropout.h). No math besides the add.
 */
#include <stdint.h>

#include "engine/error.h"
#include "attention_cudnn.h"
#include "dropout_mask.h"
#include "cuda_util.cuh"

namespace {

__global__ void attn_cudnn_rng_kernel(int64_t *rng, uint64_t seed, uint64_t offset,
                                      const uint64_t *base)
{
    if (base) offset += *base;
    rng[0] = (int64_t)seed;
    rng[1] = (int64_t)offset;
}

/* 8 elements a thread: one Philox call, one 16-byte store */
template <typename T>
__global__ void attn_drop_mask_kernel(T *m, size_t groups, uint32_t thr, uint64_t seed,
                                      uint64_t offset, const uint64_t *base)
{
    if (base) offset += *base;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x; g < groups; g += stride) {
        const unsigned b = drop_keep8(seed, offset, g, thr);
        Vec<T, 8> o;
#pragma unroll
        for (int e = 0; e < 8; e++) o.v[e] = from_f32<T>((b >> e) & 1u ? 1.0f : 0.0f);
        reinterpret_cast<Vec<T, 8> *>(m)[g] = o;
    }
}

}  // namespace

extern "C" void attention_cudnn_drop_mask_cuda(void *m, DType dt, size_t n, float p,
                                               uint64_t seed, uint64_t offset,
                                               const uint64_t *rng_base, cudaStream_t s)
{
    CT_ASSERT(n % 8 == 0 && (dt == DT_BF16 || dt == DT_F16),
              "attention_cudnn_drop_mask_cuda: n %zu not a multiple of 8, or not f16 / bf16", n);
    if (n == 0) return;
    const size_t groups = n / 8;
    const unsigned blocks = grid_for(groups, 256, 8192);
    const uint32_t thr = drop_threshold(p);
    if (dt == DT_BF16)
        attn_drop_mask_kernel<__nv_bfloat16><<<blocks, 256, 0, s>>>(
            (__nv_bfloat16 *)m, groups, thr, seed, offset, rng_base);
    else
        attn_drop_mask_kernel<__half><<<blocks, 256, 0, s>>>((__half *)m, groups, thr, seed,
                                                              offset, rng_base);
    CUDA_CHECK_LAUNCH();
}

extern "C" void attention_cudnn_rng_cuda(int64_t *rng, uint64_t seed, uint64_t offset,
                                         const uint64_t *rng_base, cudaStream_t s)
{
    attn_cudnn_rng_kernel<<<1, 1, 0, s>>>(rng, seed, offset, rng_base);
    CUDA_CHECK_LAUNCH();
}
