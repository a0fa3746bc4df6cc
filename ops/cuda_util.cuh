/* cuda_util.cuh — the small device and launch helpers that every CUDA file
 * in ops/ uses, in one place so that each kernel file holds only its own
 * math. CUDA C++ only: included by .cu files, never by C files (the public
 * ops headers stay plain C).
 *
 * It holds:
 *   - storage type <-> f32: to_f32(v) for f32, f16, bf16; from_f32<T>(v)
 *     rounds to nearest even (__float2half_rn / __float2bfloat16_rn), the
 *     rounding the CPU reference uses (engine/dtype.h), so CPU and GPU agree
 *     bit for bit; lowp_bits<L>(v) gives the same rounding as raw bits, and
 *     lowp_store4 writes four of them as one 8-byte store;
 *   - Vec<T, V>: V elements moved as one aligned access; is_aligned();
 *   - dispatch_float(dt, what, f): calls f with a value of the C++ type that
 *     stores dt (only the type matters), the one place a dtype becomes a
 *     template argument; any other dtype is a fatal error naming `what`;
 *   - warp_sum / warp_max: xor butterflies over the full warp; every lane
 *     ends with the same bits (a + b == b + a at each step), and lane 0's
 *     result is the fixed tree (x0 + x16) + (x8 + x24) + ... whatever the
 *     scheduling;
 *   - grid_for / threads_for: launch sizes computed the same way everywhere.
 *
 * Everything sits in an unnamed namespace: each .cu file gets its own copy,
 * as it had when the helpers were written out per file.
 */
#ifndef CTRAIN_OPS_CUDA_UTIL_CUH
#define CTRAIN_OPS_CUDA_UTIL_CUH

#ifndef __CUDACC__
#error "ops/cuda_util.cuh is CUDA C++: include it from .cu files only"
#endif

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stddef.h>
#include <stdint.h>
#include <type_traits>

#include "engine/dtype.h"
#include "engine/error.h"

namespace {

constexpr unsigned FULL_MASK = 0xffffffffu; /* every lane of the warp */

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

/* Round-to-nearest-even bits of v in the low-precision type L (f16 or bf16). */
template <typename L> __device__ __forceinline__ unsigned short lowp_bits(float v);
template <> __device__ __forceinline__ unsigned short lowp_bits<__half>(float v)
{
    return __half_as_ushort(__float2half_rn(v));
}
template <> __device__ __forceinline__ unsigned short lowp_bits<__nv_bfloat16>(float v)
{
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

/* lowp[4i .. 4i+3] = v.x .. v.w in L, one 8-byte store (lowp 8-byte aligned). */
template <typename L>
__device__ __forceinline__ void lowp_store4(unsigned short *lowp, size_t i, float4 v)
{
    uint2 b;
    b.x = (unsigned)lowp_bits<L>(v.x) | ((unsigned)lowp_bits<L>(v.y) << 16);
    b.y = (unsigned)lowp_bits<L>(v.z) | ((unsigned)lowp_bits<L>(v.w) << 16);
    reinterpret_cast<uint2 *>(lowp)[i] = b;
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

/* Calls f with std::integral_constant<int, Dh> for the head widths the
 * fused attention kernels are compiled for (ops/attention_fused.cu,
 * ops/attention_fa_tc*.cu). */
template <typename F> void dispatch_head_dim(size_t Dh, const char *what, F f)
{
    switch (Dh) {
    case 32: f(std::integral_constant<int, 32>()); break;
    case 64: f(std::integral_constant<int, 64>()); break;
    case 128: f(std::integral_constant<int, 128>()); break;
    default:
        ct_fatal_hint("set CTRAIN_ATTN=cublas (any head width)",
                      "%s: head width Dh = %zu has no fused kernel (32, 64, 128)", what, Dh);
    }
}

/* ---- warp reductions ---- */

/* Sum over the warp (float, double or int); every lane gets the result. */
template <typename V> __device__ __forceinline__ V warp_sum(V v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

/* Max over the warp (fmaxf: a NaN lane loses to a number); every lane gets it. */
__device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
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

/* Threads for a row of n elements: n rounded up to whole warps, at most cap. */
inline int threads_for(size_t n, int cap)
{
    return n >= (size_t)cap ? cap : (int)((n + 31) / 32 * 32);
}

} // namespace

#endif
