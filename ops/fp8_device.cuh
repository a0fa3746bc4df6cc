/* fp8_device.cuh — the device side of the FP8 casts that more than one
 * kernel file needs: two codes an instruction (the hardware's
 * cvt.rn.satfinite on sm_89 and later, fp8_cvt.h's integer rule elsewhere,
 * NaN's code put right either way), the NaN-keeping max, and a block's
 * amax raised into the tensor's with one atomicMax on the float's bits (a
 * non-negative float orders like its unsigned pattern), a vector's codes by
 * the NaN-once rule, and a 64 x 64 tile's codes written out transposed. ops/fp8.cu's casts
 * and ops/adamw_fp8.cu's optimizer use them, so both write the CPU
 * reference's codes (ops/fp8.h has the formats and their rounding).
 *
 * CUDA C++ only; everything in an unnamed namespace, as cuda_util.cuh.
 */
#ifndef CTRAIN_OPS_FP8_DEVICE_CUH
#define CTRAIN_OPS_FP8_DEVICE_CUH

#ifndef __CUDACC__
#error "ops/fp8_device.cuh is CUDA C++: include it from .cu files only"
#endif

#include <math.h>
#include <stdint.h>

#include "cuda_util.cuh"
#include "fp8_cvt.h"

namespace {

const int FP8_THREADS = 256;   /* the block width of every FP8 cast kernel */

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
/* The pair's codes by the hardware conversion (sm_89 and later): d = {cvt(hi)
 * in the high byte, cvt(lo) in the low}. fp8_cvt.h's rule but for NaN,
 * whose code the callers put right (fp8_code2) or know cannot occur. */
template <int FMT> __device__ __forceinline__ uint16_t fp8_cvt2_hw(float lo, float hi)
{
    uint16_t r;
    if constexpr (FMT == 0)
        asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
    else
        asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
    return r;
}
#endif

/* The codes of lo (low byte) and hi (high byte): fp8_cvt_from_f32's. */
__device__ __forceinline__ uint16_t fp8_code2(float lo, float hi, int fmt)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    uint16_t r = fmt == 0 ? fp8_cvt2_hw<0>(lo, hi) : fp8_cvt2_hw<1>(lo, hi);
    /* NaN is rare: one test for the pair ahead of the two fix-ups (each
     * alone cost ~5 instructions a code in the issue-bound GELU casts) */
    if (__builtin_expect(isnan(lo + hi), 0)) {
        if (isnan(lo)) r = (uint16_t)((r & 0xFF00u) | 0x007Fu);
        if (isnan(hi)) r = (uint16_t)((r & 0x00FFu) | 0x7F00u);
    }
    return r;
#else
    return (uint16_t)(fp8_cvt_from_f32(lo, fmt) | (uint32_t)fp8_cvt_from_f32(hi, fmt) << 8);
#endif
}

__device__ __forceinline__ uint8_t fp8_code(float x, int fmt)
{
    return (uint8_t)(fp8_code2(x, 0.0f, fmt) & 0xFFu);
}

/* The pair's codes with NaN's code not put right: for values known to hold
 * no NaN (the vector kernel tests a whole vector first and takes fp8_code2
 * when one is there). Below sm_89, fp8_code2 itself. */
template <int FMT>
__device__ __forceinline__ uint16_t fp8_code2_finite(float lo, float hi)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    return fp8_cvt2_hw<FMT>(lo, hi);
#else
    return fp8_code2(lo, hi, FMT);
#endif
}

/* max(a, b), NaN when either is NaN (fmaxf would drop it): one instruction on
 * sm_80 and later */
__device__ __forceinline__ float max_nan(float a, float b)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
#else
    return isnan(a) || isnan(b) ? NAN : fmaxf(a, b);
#endif
}

/* *amax = max(*amax, max of every thread's m): the warp's fmaxf butterfly,
 * then warp 0 over the per-warp maxima and one atomicMax on the bits. */
__device__ __forceinline__ void block_amax_atomic(float m, float *amax)
{
    m = warp_max(m);
    __shared__ float part[FP8_THREADS / 32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) part[warp] = m;
    __syncthreads();
    if (warp == 0) {
        m = warp_max(lane < FP8_THREADS / 32 ? part[lane] : 0.0f);
        if (lane == 0) atomicMax((unsigned int *)amax, __float_as_uint(m));
    }
}

/* The codes of VEC values v[j] * s, two a 16-bit word (h[j / 2]), and *m
 * raised to their max |v|: the scaled cast's rule once a vector. vmax is the
 * values' max |v| through max_nan (NaN if one is); a vector without NaN,
 * under a finite non-zero scale, converts by the hardware alone and adds
 * vmax to *m once; otherwise (a product could be NaN where its value is not)
 * each pair takes fp8_code2 and fmaxf, which leaves NaN out of the amax.
 * The same codes and amax either way. */
template <int FMT, int VEC>
__device__ __forceinline__ void fp8_codes_vec(uint16_t *h, float *m, const float *v, float vmax,
                                              float s, bool s_ok)
{
    if (s_ok && !isnan(vmax)) {
        *m = fmaxf(*m, vmax);
#pragma unroll
        for (int j = 0; j < VEC; j += 2)   /* two codes an instruction */
            h[j / 2] = fp8_code2_finite<FMT>(v[j] * s, v[j + 1] * s);
    } else {
#pragma unroll
        for (int j = 0; j < VEC; j += 2) {
            *m = fmaxf(fmaxf(*m, fabsf(v[j])), fabsf(v[j + 1]));
            h[j / 2] = fp8_code2(v[j] * s, v[j + 1] * s, FMT);
        }
    }
}

/* A 64 x 64 tile's codes, held in shared memory by rows (tile[i][j]: row
 * r0 + i, column c0 + j of a [rows, cols] tensor), written out along its
 * columns, which are rows of qt [cols, rows]: thread t (of 256) writes qt
 * row c0 + t / 4 at rows r0 + 16 (t % 4) .. + 15, one 16-byte store. Needs
 * rows % 16 == 0 (a thread's 16 rows all in or all out) and qt 16-byte
 * aligned. */
template <int PITCH>
__device__ __forceinline__ void fp8_tile_out(uint8_t *qt, const uint8_t (*tile)[PITCH], size_t r0,
                                             size_t c0, size_t rows, size_t cols)
{
    const int i = threadIdx.x / 4, seg = threadIdx.x % 4;
    const size_t cq = c0 + i, r = r0 + 16 * (size_t)seg;
    if (cq < cols && r < rows) {
        union { uint8_t b[16]; uint4 u; } out;
#pragma unroll
        for (int k = 0; k < 16; k++) out.b[k] = tile[16 * seg + k][i];
        *(uint4 *)(qt + cq * rows + r) = out.u;
    }
}

} // namespace

#endif
