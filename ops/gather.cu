/* gather.cu — row gather and its scatter-add backward: one block per
 * gathered row, threads along D (coalesced). Distinct indices mean each
 * destination row has one writer, so the backward needs no atomics. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include "gather.h"
#include "../engine/error.h"

template <typename T> __device__ __forceinline__ float to_f(T v) { return (float)v; }
template <> __device__ __forceinline__ float to_f<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_f(float v) { return (T)v; }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

template <typename T>
__global__ void gather_kernel(T *y, const T *x, const int32_t *idx, size_t n, size_t D)
{
    for (size_t i = blockIdx.x; i < n; i += gridDim.x) {
        const T *src = x + (size_t)idx[i] * D;
        for (size_t j = threadIdx.x; j < D; j += blockDim.x) y[i * D + j] = src[j];
    }
}

template <typename T>
__global__ void gather_backward_kernel(T *dx, const T *dy, const int32_t *idx, size_t n, size_t D)
{
    for (size_t i = blockIdx.x; i < n; i += gridDim.x) {
        T *d = dx + (size_t)idx[i] * D;
        for (size_t j = threadIdx.x; j < D; j += blockDim.x)
            d[j] = from_f<T>(to_f(d[j]) + to_f(dy[i * D + j]));
    }
}

template <typename T>
static void launch(int bwd, void *a, const void *b, const int32_t *idx, size_t n, size_t D,
                   cudaStream_t s)
{
    if (!n || !D) return;
    unsigned blocks = (unsigned)(n < 65535 * 8 ? n : 65535 * 8);
    unsigned threads = D >= 256 ? 256 : (unsigned)((D + 31) / 32 * 32);
    if (bwd) gather_backward_kernel<T><<<blocks, threads, 0, s>>>((T *)a, (const T *)b, idx, n, D);
    else gather_kernel<T><<<blocks, threads, 0, s>>>((T *)a, (const T *)b, idx, n, D);
    CUDA_CHECK_LAUNCH();
}

static void dispatch(int bwd, void *a, const void *b, DType dt, const int32_t *idx, size_t n,
                     size_t D, cudaStream_t s)
{
    switch (dt) {
    case DT_F32: launch<float>(bwd, a, b, idx, n, D, s); break;
    case DT_F16: launch<__half>(bwd, a, b, idx, n, D, s); break;
    case DT_BF16: launch<__nv_bfloat16>(bwd, a, b, idx, n, D, s); break;
    default: ct_fatal("gather_rows: dtype %s is not supported (f32, f16 or bf16)", dtype_name(dt));
    }
}

extern "C" void gather_rows_cuda(void *y, const void *x, DType dt, const int32_t *idx, size_t n,
                                 size_t D, cudaStream_t s)
{
    dispatch(0, y, x, dt, idx, n, D, s);
}

extern "C" void gather_rows_backward_cuda(void *dx, const void *dy, DType dt, const int32_t *idx,
                                          size_t n, size_t D, cudaStream_t s)
{
    dispatch(1, dx, dy, dt, idx, n, D, s);
}
