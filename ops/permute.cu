/* permute.cu — transpose12 on the GPU: each thread moves one element; the
 * innermost dim D stays contiguous on both sides, so reads and writes are
 * coalesced along D (for BERT, D = head size 64). */
#include "permute.h"
#include "../engine/error.h"
#include "cuda_util.cuh"

template <typename T>
__global__ void transpose12_kernel(T *y, const T *x, size_t A, size_t B, size_t C, size_t D, int accum)
{
    size_t n = A * B * C * D;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t d = i % D, r = i / D;
        size_t c = r % C; r /= C;
        size_t b = r % B, a = r / B;
        size_t o = ((a * C + c) * B + b) * D + d;
        y[o] = accum ? from_f32<T>(to_f32(y[o]) + to_f32(x[i])) : x[i];
    }
}

template <typename T>
static void launch(void *y, const void *x, size_t A, size_t B, size_t C, size_t D, int accum,
                   cudaStream_t s)
{
    size_t n = A * B * C * D;
    if (!n) return;
    const unsigned blocks = grid_for(n, 256, 65535u * 16u);
    transpose12_kernel<T><<<blocks, 256, 0, s>>>((T *)y, (const T *)x, A, B, C, D, accum);
    CUDA_CHECK_LAUNCH();
}

extern "C" void transpose12_cuda(void *y, const void *x, DType dt, size_t A, size_t B, size_t C,
                                 size_t D, int accum, cudaStream_t s)
{
    dispatch_float(dt, "transpose12_cuda", [&](auto tag) {
        launch<decltype(tag)>(y, x, A, B, C, D, accum, s);
    });
}
