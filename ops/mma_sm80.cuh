/* mma_sm80.cuh — the PTX wrappers the tensor-core kernels of ops/ share
 * (sm_80 and later; built for sm_90 here): cp.async copies into shared
 * memory, ldmatrix, mma.sync m16n8k16 with f32 accumulation in f16 or
 * bf16, and the packing of two floats into one 32-bit register of the
 * storage type. The fragment layouts (PTX ISA; g = lane / 4, t = lane % 4):
 *
 *   A (16 x 16, row-major)   a0 = A[g][2t, 2t+1]    a1 = A[g+8][2t, 2t+1]
 *                            a2 = A[g][2t+8, 2t+9]  a3 = A[g+8][2t+8, 2t+9]
 *   B (16 x 8, k x n)        b0 = B[2t, 2t+1][g]    b1 = B[2t+8, 2t+9][g]
 *   C (16 x 8, f32)          c0, c1 = C[g][2t, 2t+1]   c2, c3 = C[g+8][2t, 2t+1]
 *
 * ldmatrix.x4 reads four 8 x 8 tiles, lane l giving the address of row
 * l % 8 of tile l / 8; each lane gets the fragment layout above for each.
 * Users: ops/attention_fa_tc*.cu (through attention_fa_tc.cuh),
 * ops/conv1x1_bn.cu. Everything is in an anonymous namespace: each file
 * gets its own copy. On an older architecture the wrappers trap. */
#ifndef CTRAIN_OPS_MMA_SM80_CUH
#define CTRAIN_OPS_MMA_SM80_CUH

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <type_traits>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define TC_ARCH_OK 0
#else
#define TC_ARCH_OK 1
#endif

__device__ __forceinline__ uint32_t smem_u32(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* 16 bytes global -> shared, asynchronously; zero-filled when !valid */
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, bool valid)
{
#if TC_ARCH_OK
    const int n = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n)
                 : "memory");
#else
    __trap();
#endif
}
__device__ __forceinline__ void cp_async_commit()
{
#if TC_ARCH_OK
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
/* wait until at most N committed groups are still in flight */
template <int N> __device__ __forceinline__ void cp_async_wait()
{
#if TC_ARCH_OK
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr)
{
#if TC_ARCH_OK
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
#else
    __trap();
#endif
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], uint32_t addr)
{
#if TC_ARCH_OK
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
#else
    __trap();
#endif
}

/* log2(e) and ln(2) in f32, for softmax in base 2 */
constexpr float LOG2E_F32 = 1.4426950408889634f;
constexpr float LN2_F32 = 0.6931471805599453f;

/* 2^x, one MUFU instruction (relative error ~2^-22; 2^-inf = 0) */
__device__ __forceinline__ float ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/* The online softmax's step for one row of a tile, held by the four lanes of
 * a quad (C's layout above, and wgmma's): mx, this lane's max of the row's
 * new terms t, becomes the quad's; m' = max(m, mx); mu = m', or 0 while the
 * row is all -inf so that 2^(t - mu) is 0 and not NaN; l *= 2^(m - mu);
 * m = m'. Returns 2^(m - mu), the factor for the row's output. */
__device__ __forceinline__ float softmax_row_step(float &m, float &l, float mx, float &mu)
{
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float mn = fmaxf(m, mx);
    mu = mn == -INFINITY ? 0.0f : mn;
    const float corr = ex2(m - mu);
    m = mn;
    l *= corr;
    return corr;
}

/* c += a b, m16n8k16, f32 accumulate; E selects f16 or bf16 inputs */
template <typename E>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1)
{
#if TC_ARCH_OK
    if constexpr (std::is_same<E, __half>::value)
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
            "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
            "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    __trap();
#endif
}

/* (lo, hi) rounded to E (nearest even), lo in the low 16 bits */
template <typename E> __device__ __forceinline__ uint32_t pack2(float lo, float hi)
{
    uint32_t u;
    if constexpr (std::is_same<E, __half>::value) {
        const __half2 h = __floats2half2_rn(lo, hi);
        memcpy(&u, &h, 4);
    } else {
        const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
        memcpy(&u, &h, 4);
    }
    return u;
}
template <typename E> __device__ __forceinline__ float2 unpack2(uint32_t u)
{
    if constexpr (std::is_same<E, __half>::value) {
        __half2 h;
        memcpy(&h, &u, 4);
        return __half22float2(h);
    } else {
        __nv_bfloat162 h;
        memcpy(&h, &u, 4);
        return __bfloat1622float2(h);
    }
}

} // namespace

#endif
