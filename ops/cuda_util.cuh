/* cuda_util.cuh — the small device and launch helpers that every CUDA file
 * in ops/ uses, in one place so that each kernel file holds only its own
 * math. CUDA C++ only: included by .cu files, never by C files (the public
 * ops headers stay plain C).
 *
 * On top of engine/cuda_base.cuh (storage type <-> f32, Vec<T, V> and
 * is_aligned, dispatch_float, grid_for: what the engine's own kernels need
 * too), it holds:
 *   - lowp_bits<L>(v): from_f32's rounding as raw f16/bf16 bits, and
 *     lowp_store4, which writes four of them as one 8-byte store;
 *   - dispatch_head_dim(Dh, what, f): the fused attention kernels' widths;
 *   - dispatch_lowp(dt, what, f): f16 or bf16 only (the tensor-core kernels);
 *   - warp_sum / warp_max: xor butterflies over the full warp; every lane
 *     ends with the same bits (a + b == b + a at each step), and lane 0's
 *     result is the fixed tree (x0 + x16) + (x8 + x24) + ... whatever the
 *     scheduling;
 *   - block_max<NT>: the max of n floats over a block of NT threads, and
 *     mask_row_max<NT>, the same for a mask row that may be absent;
 *   - threads_for: the block width of a row kernel;
 *   - smem_optin: the opt-in a kernel needs for dynamic shared memory above
 *     48 KiB.
 *   - sm_count: the current device's multiprocessors (persistent grids).
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

#include "engine/cuda_base.cuh"
#include "engine/dtype.h"
#include "engine/error.h"

namespace {

constexpr unsigned FULL_MASK = 0xffffffffu; /* every lane of the warp */

/* ---- low-precision bits ---- */

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

/* ---- head widths ---- */

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

/* Calls f with an E of dt's type, f16 or bf16 (the tensor-core kernels have
 * no other); what names the caller in the error. */
template <typename F> void dispatch_lowp(DType dt, const char *what, F f)
{
    switch (dt) {
    case DT_F16: f(__half()); break;
    case DT_BF16: f(__nv_bfloat16()); break;
    default: ct_fatal("%s: dtype %s has no tensor-core kernel (f16, bf16)", what, dtype_name(dt));
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

/* Max of x[0 .. n) over a block of NT threads (-inf when n is 0); every thread
 * calls it and gets the result; red holds NT / 32 floats of shared memory. */
template <int NT> __device__ float block_max(const float *x, int n, float *red)
{
    float m = -INFINITY;
    for (int j = threadIdx.x; j < n; j += NT) m = fmaxf(m, x[j]);
    m = warp_max(m);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
    __syncthreads();
    m = red[0];
#pragma unroll
    for (int w = 1; w < NT / 32; w++) m = fmaxf(m, red[w]);
    return m;
}

/* The max of an additive mask row mb[0 .. n) over a block of NT threads (0
 * without a mask); the attention kernels subtract it before exponentiating. */
template <int NT> __device__ float mask_row_max(const float *mb, int n, float *red)
{
    return mb ? block_max<NT>(mb, n, red) : 0.0f;
}

/* ---- launch sizes ---- */

/* Threads for a row of n elements: n rounded up to whole warps, at most cap. */
inline int threads_for(size_t n, int cap)
{
    return n >= (size_t)cap ? cap : (int)((n + 31) / 32 * 32);
}

/* Dynamic shared memory above the 48 KiB default needs an opt-in per kernel
 * on the current device. A host-side attribute (no stream work): allowed
 * while a graph is captured; called before each such launch. */
template <typename K> void smem_optin(K kernel, size_t bytes)
{
    if (bytes > 48 * 1024)
        CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)bytes));
}

/* the current device's multiprocessor count */
inline int sm_count(void)
{
    int dev = 0, n = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    return n;
}

} // namespace

#endif
