/* gather.cu — row gather and its scatter-add backward: one block per
 * gathered row, threads along D (coalesced). Distinct indices mean each
 * destination row has one writer, so the backward needs no atomics. */
#include "gather.h"
#include "engine/error.h"
#include "cuda_util.cuh"

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
            d[j] = from_f32<T>(to_f32(d[j]) + to_f32(dy[i * D + j]));
    }
}

template <typename T>
static void launch(int bwd, void *a, const void *b, const int32_t *idx, size_t n, size_t D,
                   cudaStream_t s)
{
    if (!n || !D) return;
    unsigned blocks = grid_for(n, 1, 65535 * 8); /* a block per row */
    unsigned threads = threads_for(D, 256);
    if (bwd) gather_backward_kernel<T><<<blocks, threads, 0, s>>>((T *)a, (const T *)b, idx, n, D);
    else gather_kernel<T><<<blocks, threads, 0, s>>>((T *)a, (const T *)b, idx, n, D);
    CUDA_CHECK_LAUNCH();
}

static void dispatch(int bwd, void *a, const void *b, DType dt, const int32_t *idx, size_t n,
                     size_t D, cudaStream_t s)
{
    dispatch_float(dt, "gather_rows", [&](auto tag) {
        launch<decltype(tag)>(bwd, a, b, idx, n, D, s);
    });
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
