/* fp8_recipe.cu — the one kernel the FP8 recipe needs beyond
 * ops/fp8.cu: the device step counter's increment, so the recipe's update
 * (fp8_recipe.c) stays on the device inside a captured graph.
 *
 *   step:  *step += 1     (one thread)
 */
#include <cuda_runtime.h>

__global__ void fp8_step_advance_kernel(long long *step) { *step += 1; }

extern "C" void fp8_step_advance_cuda(long long *step, cudaStream_t s)
{
    fp8_step_advance_kernel<<<1, 1, 0, s>>>(step);
}
