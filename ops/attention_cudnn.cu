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

namespace {

__global__ void attn_cudnn_rng_kernel(int64_t *rng, uint64_t seed, uint64_t offset,
                                      const uint64_t *base)
{
    if (base) offset += *base;
    rng[0] = (int64_t)seed;
    rng[1] = (int64_t)offset;
}

}  // namespace

extern "C" void attention_cudnn_rng_cuda(int64_t *rng, uint64_t seed, uint64_t offset,
                                         const uint64_t *rng_base, cudaStream_t s)
{
    attn_cudnn_rng_kernel<<<1, 1, 0, s>>>(rng, seed, offset, rng_base);
    CUDA_CHECK_LAUNCH();
}
