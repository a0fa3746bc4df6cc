/* cuda_base.cuh — the device and launch helpers an elementwise kernel needs,
 * shared by the engine's own kernels (engine/kernels.cu) and every CUDA
 * file of ops/ (through ops/cuda_util.cuh, which adds the warp reductions,
 * the packed low-precision stores and the head-width dispatch). CUDA C++
 * only: included by .cu files, never by C files (public headers stay plain
 * C).
 *
 * It holds:
 *   - storage type <-> f32: to_f32(v) for f32, f16, bf16; from_f32<T>(v)
 *     rounds to nearest even (__float2half_rn / __float2bfloat16_rn), the
 *     rounding the CPU reference uses (engine/dtype.h), so CPU and GPU agree
 *     bit for bit;
 *   - Vec<T, V>: V elements moved as one aligned access; is_aligned();
 *   - dispatch_float(dt, what, f): calls f with a value of the C++ type that
 *     stores dt (only the type matters), the one place a dtype becomes a
 *     template argument; any other dtype is a fatal error naming `what`;
 *   - grid_for: launch sizes computed the same way everywhere.
 *
 * Everything sits in an unnamed namespace: each .cu file gets its own copy,
 * as it had when the helpers were written out per file.
 */
#ifndef CTRAIN_ENGINE_CUDA_BASE_CUH
#define CTRAIN_ENGINE_CUDA_BASE_CUH

#ifndef __CUDACC__
#error "engine/cuda_base.cuh is CUDA C++: include it from .cu files only"
#endif

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/dtype.h"
#include "engine/error.h"

namespace {

/* ---- storage type <-> f32 ---- */

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ T from_f32(float v);
template <> __device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_f32<__half>(float v)
{
    return __float2half_rn(v);
}
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v)
{
    return __float2bfloat16_rn(v);
}

/* V elements moved as one aligned access (16 bytes when V = 16 / sizeof(T)). */
template <typename T, int V> struct alignas(sizeof(T) * V) Vec {
    T v[V];
};

inline bool is_aligned(const void *p, size_t bytes) { return ((uintptr_t)p % bytes) == 0; }

/* ---- dtype -> C++ storage type ---- */

/* Calls f with a value of the C++ type that stores dt (the value itself is
 * unused; only its type matters):
 *   dispatch_float(dt, "relu_cuda", [&](auto tag) { using T = decltype(tag); ... });
 */
template <typename F> void dispatch_float(DType dt, const char *what, F f)
{
    switch (dt) {
    case DT_F32: f(float()); break;
    case DT_F16: f(__half()); break;
    case DT_BF16: f(__nv_bfloat16()); break;
    default:
        ct_fatal("%s: dtype %s is not supported here (f32, f16 or bf16)", what,
                 dtype_name(dt));
    }
}

/* ---- launch sizes ---- */

/* Blocks for n work items at per_block items a block: ceil(n / per_block),
 * at least 1, at most cap (a grid-stride loop covers the rest). */
inline unsigned grid_for(size_t n, int per_block, unsigned cap)
{
    size_t b = (n + per_block - 1) / per_block;
    if (b < 1) b = 1;
    return (unsigned)(b < cap ? b : cap);
}

} // namespace

#endif
