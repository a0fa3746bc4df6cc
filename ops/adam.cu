/* adam.cu — CUDA AdamW and LAMB updates (contract and math in ops/adam.h);
 * ops/adam.c is the CPU reference and does the same arithmetic, operation
 * for operation.
 *
 * Shape letters: n parameters in one contiguous range; S segments (one per
 * parameter tensor) cut into chunks of at most LAMB_CHUNK elements.
 *
 *   AdamW:  p = p * (1 - lr wd);  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
 *           p = p - (lr / bc1) * (m / (sqrt(v) / sqrt(bc2) + eps))
 *   LAMB:   m, v as above;  u = (m / bc1) / (sqrt(v / bc2) + eps) + wd p
 *           r = ||p|| / ||u|| (1 if a norm is 0 or the segment is not adaptive)
 *           p = p - (lr r) u
 *
 * Every f32 operation is rounded on its own (__fmul_rn, __fadd_rn,
 * __fdiv_rn, __fsqrt_rn: the compiler may not contract them into FMA), and
 * the per-step scalars are formed in double with __dmul_rn / __ddiv_rn /
 * __dsqrt_rn, so AdamW and LAMB's moments equal the CPU bit for bit.
 *
 * CUDA graphs and AMP: lr, the step count and the bias corrections are read
 * from device memory at run time, *skip != 0 (the grad scaler's found_inf)
 * turns every kernel into a no-op, nothing allocates or syncs.
 *
 * LAMB runs three launches over a prebuilt chunk table (one block per
 * chunk; the table is built once at init, so there is no per-step host
 * work): (1) new m, v and, per chunk, sum p^2 and sum u^2 in double, block
 * tree in a fixed order; (2) one warp per segment adds its chunks' partials
 * in a fixed order and writes r; (3) recomputes u from the new m, v (same
 * operations, same bits) and updates p. Recomputing u instead of storing it
 * costs the same traffic as a scratch buffer (read m, v, p vs write and read
 * u) and leaves the gradient buffer untouched. The order of every sum
 * depends only on the segment table, so two runs give the same bits.
 */
#include "adam.h"

#include <cuda_runtime.h>
#include <stdint.h>

#include "engine/error.h"
#include "adam_device.cuh"
#include "cuda_util.cuh"

namespace {

const int ADAM_THREADS = 256;
const int ADAM_WARPS = ADAM_THREADS / 32;
const unsigned ADAM_MAX_BLOCKS = 4096;   /* elementwise: grid-stride beyond this */
const int64_t LAMB_MAX_BLOCKS = 1 << 20; /* chunk loop beyond this */

/* beta^t by binary powering, as adam_beta_pow in ops/adam.c. */
__device__ double adam_pow_dev(double beta, long long t)
{
    double r = 1.0;
    while (t > 0) {
        if (t & 1) r = __dmul_rn(r, beta);
        beta = __dmul_rn(beta, beta);
        t >>= 1;
    }
    return r;
}

__global__ void adam_begin_kernel(AdamStepState *st, double beta1, double beta2,
                                  int bias_correction, const int *skip)
{
    if (skip && *skip) return; /* a skipped step is not counted */
    long long t = st->step + 1;
    st->step = t;
    st->bc1 = bias_correction ? __dsub_rn(1.0, adam_pow_dev(beta1, t)) : 1.0;
    st->bc2 = bias_correction ? __dsub_rn(1.0, adam_pow_dev(beta2, t)) : 1.0;
}

template <typename L>
__global__ void adamw_kernel(float *p, float *m, float *v, unsigned short *lowp, const float *g,
                             size_t n, const float *lr, const AdamStepState *st, AdamFactors f,
                             double wd, const int *skip, int vec)
{
    if (skip && *skip) return; /* the grad scaler found inf/nan: keep everything */
    const AdamwStep k = adamw_step_scalars(*lr, st, wd);
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t head = 0;
    if (vec) {
        const size_t n4 = n / 4;
        float4 *p4 = reinterpret_cast<float4 *>(p);
        float4 *m4 = reinterpret_cast<float4 *>(m);
        float4 *v4 = reinterpret_cast<float4 *>(v);
        const float4 *g4 = reinterpret_cast<const float4 *>(g);
        for (size_t i = tid; i < n4; i += stride) {
            float4 pv = p4[i], mv = m4[i], vv = v4[i];
            const float4 gv = g4[i];
            adamw_one(pv.x, mv.x, vv.x, gv.x, f, k);
            adamw_one(pv.y, mv.y, vv.y, gv.y, f, k);
            adamw_one(pv.z, mv.z, vv.z, gv.z, f, k);
            adamw_one(pv.w, mv.w, vv.w, gv.w, f, k);
            p4[i] = pv;
            m4[i] = mv;
            v4[i] = vv;
            if (lowp) lowp_store4<L>(lowp, i, pv);
        }
        head = n4 * 4;
    }
    for (size_t i = head + tid; i < n; i += stride) adamw_at<L>(p, m, v, lowp, g, i, f, k);
}

/* ---- LAMB ---- */

/* u = (m / bc1) / (sqrt(v / bc2) + eps) + wd p */
__device__ __forceinline__ float lamb_u(float m, float v, float p, float bc1, float bc2,
                                        float eps, float wd)
{
    float den = __fadd_rn(__fsqrt_rn(__fdiv_rn(v, bc2)), eps);
    return __fadd_rn(__fdiv_rn(__fdiv_rn(m, bc1), den), __fmul_rn(wd, p));
}

/* (1) m, v for every element of the chunk; partial[2c] = sum p^2 (old p),
 * partial[2c + 1] = sum u^2, each summed per thread in index order, then a
 * fixed tree over the block. */
__global__ void lamb_moments_kernel(float *m, float *v, double *partial, const float *p,
                                    const float *g, const OptSeg *seg, const OptChunk *chunk,
                                    int64_t nchunk, const AdamStepState *st, AdamFactors f,
                                    const int *skip)
{
    __shared__ double part[2][ADAM_WARPS];
    if (skip && *skip) return;
    const float bc1 = __double2float_rn(st->bc1), bc2 = __double2float_rn(st->bc2);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (int64_t c = blockIdx.x; c < nchunk; c += gridDim.x) {
        const OptChunk ch = chunk[c];
        const float wd = seg[ch.seg].wd;
        double sp = 0.0, su = 0.0;
        for (int i = threadIdx.x; i < ch.len; i += ADAM_THREADS) {
            const size_t j = (size_t)ch.start + i;
            float mv = m[j], vv = v[j];
            const float pv = p[j];
            adam_moments(mv, vv, g[j], f);
            m[j] = mv;
            v[j] = vv;
            const float u = lamb_u(mv, vv, pv, bc1, bc2, f.eps, wd);
            sp += (double)pv * (double)pv;
            su += (double)u * (double)u;
        }
        sp = warp_sum(sp);
        su = warp_sum(su);
        if (lane == 0) {
            part[0][warp] = sp;
            part[1][warp] = su;
        }
        __syncthreads();
        if (warp == 0) {
            sp = lane < ADAM_WARPS ? part[0][lane] : 0.0;
            su = lane < ADAM_WARPS ? part[1][lane] : 0.0;
            sp = warp_sum(sp);
            su = warp_sum(su);
            if (lane == 0) {
                partial[2 * c] = sp;
                partial[2 * c + 1] = su;
            }
        }
        __syncthreads(); /* part is reused by the next chunk */
    }
}

/* (2) one warp per segment: lane l adds the partials of chunks l, l + 32, ...
 * in order, then a fixed tree; r = sqrt(sum p^2) / sqrt(sum u^2). */
__global__ void lamb_ratio_kernel(float *ratio, const double *partial, const OptSeg *seg,
                                  int nseg, const int *skip)
{
    if (skip && *skip) return;
    const int lane = threadIdx.x % 32;
    const int64_t step = (int64_t)gridDim.x * ADAM_WARPS;
    for (int64_t s = (int64_t)blockIdx.x * ADAM_WARPS + threadIdx.x / 32; s < nseg; s += step) {
        const OptSeg sg = seg[s];
        double sp = 0.0, su = 0.0;
        for (int64_t k = lane; k < sg.nchunk; k += 32) {
            sp += partial[2 * (sg.chunk0 + k)];
            su += partial[2 * (sg.chunk0 + k) + 1];
        }
        sp = warp_sum(sp);
        su = warp_sum(su);
        if (lane == 0) {
            float r = 1.0f;
            /* apex: ratio only when both norms are nonzero (NaN counts as nonzero) */
            if (sg.adaptive && sp != 0.0 && su != 0.0)
                r = __double2float_rn(__ddiv_rn(__dsqrt_rn(sp), __dsqrt_rn(su)));
            ratio[s] = r;
        }
    }
}

/* (3) p = p - (lr r) u, u recomputed from the new m, v and the old p. */
template <typename L>
__global__ void lamb_update_kernel(float *p, unsigned short *lowp, const float *m,
                                   const float *v, const float *ratio, const OptSeg *seg,
                                   const OptChunk *chunk, int64_t nchunk, const float *lr,
                                   const AdamStepState *st, AdamFactors f, const int *skip)
{
    if (skip && *skip) return;
    const float bc1 = __double2float_rn(st->bc1), bc2 = __double2float_rn(st->bc2);
    const float lrv = *lr;
    for (int64_t c = blockIdx.x; c < nchunk; c += gridDim.x) {
        const OptChunk ch = chunk[c];
        const float wd = seg[ch.seg].wd;
        const float lr_r = __fmul_rn(lrv, ratio[ch.seg]);
        for (int i = threadIdx.x; i < ch.len; i += ADAM_THREADS) {
            const size_t j = (size_t)ch.start + i;
            const float u = lamb_u(m[j], v[j], p[j], bc1, bc2, f.eps, wd);
            const float pn = __fsub_rn(p[j], __fmul_rn(lr_r, u));
            p[j] = pn;
            if (lowp) lowp[j] = lowp_bits<L>(pn);
        }
    }
}

void check_lowp(const void *p_lowp, DType lowp_t, const char *who)
{
    if (p_lowp && lowp_t != DT_F16 && lowp_t != DT_BF16)
        ct_fatal_hint("the low-precision copy holds the autocast type: f16 or bf16",
                      "%s: low-precision copy of type %s is not supported", who,
                      dtype_name(lowp_t));
}

} // namespace

extern "C" void adam_begin_cuda(AdamStepState *st, double beta1, double beta2,
                                int bias_correction, const int *skip, cudaStream_t s)
{
    CT_ASSERT(st, "adam_begin_cuda: the step state must be a device pointer");
    adam_begin_kernel<<<1, 1, 0, s>>>(st, beta1, beta2, bias_correction, skip);
    CUDA_CHECK_LAUNCH();
}

extern "C" void adamw_step_cuda(float *p, float *m, float *v, void *p_lowp, DType lowp_t,
                                const float *g, size_t n, const float *lr,
                                const AdamStepState *st, double beta1, double beta2, double eps,
                                double wd, const int *skip, cudaStream_t s)
{
    if (n == 0) return;
    CT_ASSERT(p && m && v && g && lr && st,
              "adamw_step_cuda: p, m, v, g, lr and st must be device pointers");
    check_lowp(p_lowp, lowp_t, "adamw_step_cuda");
    const int vec = ((uintptr_t)p % 16 == 0) && ((uintptr_t)m % 16 == 0) &&
                    ((uintptr_t)v % 16 == 0) && ((uintptr_t)g % 16 == 0) &&
                    ((uintptr_t)p_lowp % 8 == 0);
    const size_t items = vec ? n / 4 + n % 4 : n;
    const unsigned blocks = grid_for(items, ADAM_THREADS, ADAM_MAX_BLOCKS);
    const AdamFactors f = adam_factors(beta1, beta2, eps);
    unsigned short *lp = (unsigned short *)p_lowp;
    if (p_lowp && lowp_t == DT_BF16)
        adamw_kernel<__nv_bfloat16><<<blocks, ADAM_THREADS, 0, s>>>(
            p, m, v, lp, g, n, lr, st, f, wd, skip, vec);
    else
        adamw_kernel<__half><<<blocks, ADAM_THREADS, 0, s>>>(
            p, m, v, lp, g, n, lr, st, f, wd, skip, vec);
    CUDA_CHECK_LAUNCH();
}

extern "C" void lamb_step_cuda(float *p, float *m, float *v, void *p_lowp, DType lowp_t,
                               float *ratio, double *partial, const float *g, const OptSeg *seg,
                               int nseg, const OptChunk *chunk, int64_t nchunk, const float *lr,
                               const AdamStepState *st, double beta1, double beta2, double eps,
                               const int *skip, cudaStream_t s)
{
    if (nseg == 0) return;
    CT_ASSERT(p && m && v && g && lr && st && seg && ratio && (nchunk == 0 || (chunk && partial)),
              "lamb_step_cuda: buffers, tables and scratch must be device pointers");
    check_lowp(p_lowp, lowp_t, "lamb_step_cuda");
    const AdamFactors f = adam_factors(beta1, beta2, eps);
    const unsigned cblocks = (unsigned)(nchunk < LAMB_MAX_BLOCKS ? nchunk : LAMB_MAX_BLOCKS);
    if (nchunk > 0) {
        lamb_moments_kernel<<<cblocks, ADAM_THREADS, 0, s>>>(m, v, partial, p, g, seg, chunk,
                                                             nchunk, st, f, skip);
        CUDA_CHECK_LAUNCH();
    }
    int64_t rblocks = ((int64_t)nseg + ADAM_WARPS - 1) / ADAM_WARPS;
    if (rblocks > 65535) rblocks = 65535;
    lamb_ratio_kernel<<<(unsigned)rblocks, ADAM_THREADS, 0, s>>>(ratio, partial, seg, nseg, skip);
    CUDA_CHECK_LAUNCH();
    if (nchunk == 0) return;
    unsigned short *lp = (unsigned short *)p_lowp;
    if (p_lowp && lowp_t == DT_BF16)
        lamb_update_kernel<__nv_bfloat16><<<cblocks, ADAM_THREADS, 0, s>>>(
            p, lp, m, v, ratio, seg, chunk, nchunk, lr, st, f, skip);
    else
        lamb_update_kernel<__half><<<cblocks, ADAM_THREADS, 0, s>>>(
            p, lp, m, v, ratio, seg, chunk, nchunk, lr, st, f, skip);
    CUDA_CHECK_LAUNCH();
}
