/* adam_device.cuh — one AdamW parameter on the device, shared by the
 * optimizer kernels of ops/adam.cu and ops/adamw_fp8.cu so that both do
 * torch's operations in torch's order (ops/adam.h has the math):
 *   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
 *   p = p (1 - lr wd) - (lr / bc1) (m / (sqrt(v) / sqrt(bc2) + eps))
 * every f32 operation rounded on its own (__fmul_rn, __fadd_rn, __fdiv_rn,
 * __fsqrt_rn), so the GPU equals the CPU reference bit for bit.
 *
 * CUDA C++ only; everything in an unnamed namespace, as cuda_util.cuh.
 */
#ifndef CTRAIN_OPS_ADAM_DEVICE_CUH
#define CTRAIN_OPS_ADAM_DEVICE_CUH

#ifndef __CUDACC__
#error "ops/adam_device.cuh is CUDA C++: include it from .cu files only"
#endif

#include "adam_types.h"
#include "cuda_util.cuh"

namespace {

/* The f32 factors are rounded on the host (adam_factors in ops/adam.c, the
 * CPU reference's own); the per-step ones are formed on the device from lr
 * and the step state. */
struct AdamwStep {
    float keep, step_size, bc2_sqrt;
};
__device__ __forceinline__ AdamwStep adamw_step_scalars(float lr, const AdamStepState *st,
                                                        double wd)
{
    AdamwStep k;
    k.keep = __double2float_rn(__dsub_rn(1.0, __dmul_rn((double)lr, wd)));
    k.step_size = __double2float_rn(__ddiv_rn((double)lr, st->bc1));
    k.bc2_sqrt = __double2float_rn(__dsqrt_rn(st->bc2));
    return k;
}

/* m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2: the moments of both
 * AdamW and LAMB (ops/adam.c's adam_moments, operation for operation). */
__device__ __forceinline__ void adam_moments(float &m, float &v, float g, const AdamFactors &f)
{
    m = __fadd_rn(__fmul_rn(f.b1, m), __fmul_rn(f.omb1, g));
    v = __fadd_rn(__fmul_rn(f.b2, v), __fmul_rn(f.omb2, __fmul_rn(g, g)));
}

/* One parameter of AdamW (torch's order, see the file comment). */
__device__ __forceinline__ void adamw_one(float &p, float &m, float &v, float g,
                                          const AdamFactors &f, const AdamwStep &k)
{
    float pd = __fmul_rn(p, k.keep);
    adam_moments(m, v, g, f);
    float den = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), k.bc2_sqrt), f.eps);
    p = __fsub_rn(pd, __fmul_rn(k.step_size, __fdiv_rn(m, den)));
}

/* Element i of the buffers: AdamW, and the working copy in L (f16 / bf16)
 * where there is one. */
template <typename L>
__device__ __forceinline__ void adamw_at(float *p, float *m, float *v, unsigned short *lowp,
                                         const float *g, size_t i, const AdamFactors &f,
                                         const AdamwStep &k)
{
    float pv = p[i], mv = m[i], vv = v[i];
    adamw_one(pv, mv, vv, g[i], f, k);
    p[i] = pv;
    m[i] = mv;
    v[i] = vv;
    if (lowp) lowp[i] = lowp_bits<L>(pv);
}

} // namespace

#endif
