/* permute.cu — transpose12 on the GPU: each thread moves one element; the
 * innermost dim D stays contiguous on both sides, so reads and writes are
 * coalesced along D (for BERT, D = head size 64). */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include "permute.h"
#include "../engine/error.h"

template <typename T> __device__ __forceinline__ float to_f(T v) { return (float)v; }
template <> __device__ __forceinline__ float to_f<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_f(float v) { return (T)v; }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

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
        y[o] = accum ? from_f<T>(to_f(y[o]) + to_f(x[i])) : x[i];
    }
}

template <typename T>
static void launch(void *y, const void *x, size_t A, size_t B, size_t C, size_t D, int accum,
                   cudaStream_t s)
{
    size_t n = A * B * C * D;
    if (!n) return;
    size_t blocks = (n + 255) / 256;
    if (blocks > 65535u * 16u) blocks = 65535u * 16u;
    transpose12_kernel<T><<<(unsigned)blocks, 256, 0, s>>>((T *)y, (const T *)x, A, B, C, D, accum);
    CUDA_CHECK_LAUNCH();
}

extern "C" void transpose12_cuda(void *y, const void *x, DType dt, size_t A, size_t B, size_t C,
                                 size_t D, int accum, cudaStream_t s)
{
    switch (dt) {
    case DT_F32: launch<float>(y, x, A, B, C, D, accum, s); break;
    case DT_F16: launch<__half>(y, x, A, B, C, D, accum, s); break;
    case DT_BF16: launch<__nv_bfloat16>(y, x, A, B, C, D, accum, s); break;
    default: ct_fatal("transpose12_cuda: dtype %s is not supported (f32, f16 or bf16)", dtype_name(dt));
    }
}
