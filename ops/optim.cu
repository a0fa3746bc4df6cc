/* optim.cu — CUDA optimizer updates (ops/optim.h); ops/optim.c is the CPU
 * reference and does the same arithmetic, operation for operation.
 *
 * Shape letters: n parameters in one contiguous range (one weight-decay group).
 *
 * SGD with momentum, PyTorch semantics (dampening 0):
 *   d = g + wd * p
 *   m = momentum * m + d
 *   p = p - lr * (nesterov ? d + momentum * m : m)
 * p, m, g are f32 (master weights, momentum, the f32 gradient buffer).
 *
 * For CUDA graphs and AMP the step never syncs the host: lr is read from a
 * device pointer, *skip != 0 (device flag from the grad scaler) turns the
 * whole step into a no-op, and p_lowp (f16 or bf16) receives the updated
 * weights rounded to nearest even, so autocast needs no separate cast.
 *
 * Each operation is rounded separately (__fmul_rn / __fadd_rn, which the
 * compiler may not contract into FMA) so the result matches the CPU bit for
 * bit. The kernel is a grid-stride loop, float4 wide when p, m, g are 16-byte
 * aligned (and p_lowp 8-byte aligned), with a scalar tail.
 */
#include "optim.h"

#include <cuda_runtime.h>
#include <stdint.h>

#include "engine/error.h"
#include "cuda_util.cuh"

namespace {

/* One parameter: d = g + wd p; m = mom m + d; p -= lr (nesterov ? d + mom m : m). */
__device__ __forceinline__ void sgd_one(float &p, float &m, float g, float lr, float mom,
                                        float wd, int nesterov)
{
    float d = __fadd_rn(g, __fmul_rn(wd, p));
    m = __fadd_rn(__fmul_rn(mom, m), d);
    float step = nesterov ? __fadd_rn(d, __fmul_rn(mom, m)) : m;
    p = __fsub_rn(p, __fmul_rn(lr, step));
}

template <typename L>
__global__ void sgd_kernel(float *p, float *m, unsigned short *lowp, const float *g,
                           size_t n, const float *lr_dev, float mom, float wd,
                           int nesterov, const int *skip, int vec)
{
    if (skip && *skip) return; /* the grad scaler found inf/nan: keep everything */
    const float lr = *lr_dev;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t head = 0;
    if (vec) {
        const size_t n4 = n / 4;
        float4 *p4 = reinterpret_cast<float4 *>(p);
        float4 *m4 = reinterpret_cast<float4 *>(m);
        const float4 *g4 = reinterpret_cast<const float4 *>(g);
        for (size_t i = tid; i < n4; i += stride) {
            float4 pv = p4[i], mv = m4[i];
            const float4 gv = g4[i];
            sgd_one(pv.x, mv.x, gv.x, lr, mom, wd, nesterov);
            sgd_one(pv.y, mv.y, gv.y, lr, mom, wd, nesterov);
            sgd_one(pv.z, mv.z, gv.z, lr, mom, wd, nesterov);
            sgd_one(pv.w, mv.w, gv.w, lr, mom, wd, nesterov);
            p4[i] = pv;
            m4[i] = mv;
            if (lowp) lowp_store4<L>(lowp, i, pv);
        }
        head = n4 * 4;
    }
    for (size_t i = head + tid; i < n; i += stride) {
        float pv = p[i], mv = m[i];
        sgd_one(pv, mv, g[i], lr, mom, wd, nesterov);
        p[i] = pv;
        m[i] = mv;
        if (lowp) lowp[i] = lowp_bits<L>(pv);
    }
}

} // namespace

extern "C" void sgd_step_cuda(float *p, float *m, void *p_lowp, DType lowp_t,
                              const float *g, size_t n, const float *lr, float momentum,
                              float wd, int nesterov, const int *skip, cudaStream_t s)
{
    if (n == 0) return;
    CT_ASSERT(p && m && g && lr, "sgd_step_cuda: p, m, g and lr must be device pointers");
    if (p_lowp && lowp_t != DT_F16 && lowp_t != DT_BF16)
        ct_fatal_hint("the low-precision copy holds the autocast type: f16 or bf16",
                      "sgd_step_cuda: low-precision copy of type %s is not supported",
                      dtype_name(lowp_t));
    const int vec = ((uintptr_t)p % 16 == 0) && ((uintptr_t)m % 16 == 0) &&
                    ((uintptr_t)g % 16 == 0) && ((uintptr_t)p_lowp % 8 == 0);
    const int threads = 256;
    const size_t items = vec ? n / 4 + n % 4 : n;
    const unsigned blocks = grid_for(items, threads, 4096); /* grid-stride beyond a few waves */
    unsigned short *lp = (unsigned short *)p_lowp;
    if (p_lowp && lowp_t == DT_BF16)
        sgd_kernel<__nv_bfloat16><<<blocks, threads, 0, s>>>(
            p, m, lp, g, n, lr, momentum, wd, nesterov, skip, vec);
    else
        sgd_kernel<__half><<<blocks, threads, 0, s>>>(
            p, m, lp, g, n, lr, momentum, wd, nesterov, skip, vec);
    CUDA_CHECK_LAUNCH();
}
