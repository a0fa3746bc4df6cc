/* permute.cu — transpose12 on the GPU. The innermost dim D stays contiguous
 * on both sides, so each thread moves a run of V elements along D as one
 * 16-byte access (V = 8 for f16/bf16, 4 for f32) when D and both pointers
 * allow it, else one element. Index math is 32-bit when the tensor has
 * fewer than 2^32 runs (the common case: the 64-bit divisions of a generic
 * index cost more than the move itself). For BERT (D = head size 64) the
 * vector path reads and writes 128-byte rows: a memory-bound copy.
 * The one-element, 64-bit-index version measured 0.6 TB/s on the H200
 * (docs/kernels.md, "transpose12"). */
#include "permute.h"
#include "engine/error.h"
#include "cuda_util.cuh"

/* Runs of V elements: x [A, B, C, Dv] -> y [A, C, B, Dv], Dv = D / V. */
template <typename T, int V, typename I>
__global__ void transpose12_kernel(T *y, const T *x, I A, I B, I C, I Dv, int accum)
{
    using W = Vec<T, V>;
    const I n = A * B * C * Dv;
    const W *xv = reinterpret_cast<const W *>(x);
    W *yv = reinterpret_cast<W *>(y);
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x) {
        I d = i % Dv, r = i / Dv;
        I c = r % C; r /= C;
        I b = r % B, a = r / B;
        I o = ((a * C + c) * B + b) * Dv + d;
        W v = xv[i];
        if (accum) {
            W w = yv[o];
#pragma unroll
            for (int k = 0; k < V; k++) v.v[k] = from_f32<T>(to_f32(w.v[k]) + to_f32(v.v[k]));
        }
        yv[o] = v;
    }
}

template <typename T, int V>
static void launch_v(void *y, const void *x, size_t A, size_t B, size_t C, size_t D, int accum,
                     cudaStream_t s)
{
    const size_t runs = A * B * C * (D / V);
    const unsigned blocks = grid_for(runs, 256, 65535u * 16u);
    if (runs + (size_t)blocks * 256 < ((size_t)1 << 32))   /* every index, i + stride too, fits */
        transpose12_kernel<T, V, unsigned><<<blocks, 256, 0, s>>>(
            (T *)y, (const T *)x, (unsigned)A, (unsigned)B, (unsigned)C, (unsigned)(D / V), accum);
    else
        transpose12_kernel<T, V, size_t><<<blocks, 256, 0, s>>>((T *)y, (const T *)x, A, B, C, D / V, accum);
    CUDA_CHECK_LAUNCH();
}

template <typename T>
static void launch(void *y, const void *x, size_t A, size_t B, size_t C, size_t D, int accum,
                   cudaStream_t s)
{
    constexpr int V = 16 / sizeof(T);
    if (A * B * C * D == 0) return;
    if (D % V == 0 && is_aligned(x, 16) && is_aligned(y, 16))
        launch_v<T, V>(y, x, A, B, C, D, accum, s);
    else
        launch_v<T, 1>(y, x, A, B, C, D, accum, s);
}

extern "C" void transpose12_cuda(void *y, const void *x, DType dt, size_t A, size_t B, size_t C,
                                 size_t D, int accum, cudaStream_t s)
{
    dispatch_float(dt, "transpose12_cuda", [&](auto tag) {
        launch<decltype(tag)>(y, x, A, B, C, D, accum, s);
    });
}
