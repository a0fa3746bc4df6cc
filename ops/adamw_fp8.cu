/* adamw_fp8.cu — AdamW over a job table with the FP8 weight codes written in
 * the same pass (contract and math in ops/adamw_fp8.h; ops/adamw_fp8.c is
 * the CPU reference).
 *
 *   every job:  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
 *               p = p (1 - lr wd) - (lr / bc1) (m / (sqrt(v) / sqrt(bc2) + eps))
 *   fp8 job:    q = e4m3(p * s), qt = q^T, amax max= |p|      (the new p)
 *
 * One launch, one block a unit: block b belongs to the last job whose
 * block0 <= b (a binary search over the table, once a block). A plain job's
 * block updates ADAMW_JOB_CHUNK consecutive elements, a thread every 256th
 * (any alignment). An fp8 job's block takes one 64 x 64 tile of the
 * weight, as ops/fp8.cu's vector cast-transpose does for an f32 input: 16
 * threads a tile row, each 4 consecutive columns (16-byte loads of p, m, v,
 * g and stores of p, m, v; 8 bytes of the working copy; 4 codes to q), 16
 * rows a pass, 4 passes; the codes wait in shared memory (rows padded to
 * 68 bytes) and leave along the tile's columns, 16 rows a thread, as one
 * 16-byte store to qt. The NaN test is once a vector (max.NaN), the exact
 * per-element conversion only where a NaN is: the codes and amax of
 * fp8_cast_cpu either way. The AdamW arithmetic is ops/adam.cu's, from
 * adam_device.cuh: p, m, v equal the CPU reference bit for bit.
 */
#include "adamw_fp8.h"

#include <cuda_runtime.h>
#include <stdint.h>

#include "engine/error.h"
#include "adam_device.cuh"
#include "cuda_util.cuh"
#include "fp8_device.cuh"

namespace {

const int JOB_TILE = ADAMW_JOB_TILE;
const int TPR = JOB_TILE / 4;           /* threads a tile row: 4 columns each */
const int RP = FP8_THREADS / TPR;       /* rows a pass */
const int PASSES = JOB_TILE / RP;
const int PITCH = JOB_TILE + 4;         /* 68 bytes: a tile column hits 32 banks */
const int PER_THREAD = ADAMW_JOB_CHUNK / FP8_THREADS;
static_assert(PER_THREAD * FP8_THREADS == ADAMW_JOB_CHUNK, "a plain chunk fills the block");

/* The job of block b: the last one whose block0 <= b. */
__device__ __forceinline__ int job_of(const AdamwJob *jobs, int n, int64_t b)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (jobs[mid].block0 <= b) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* A plain job's chunk: element k of thread t is chunk start + t + 256 k. */
template <typename L>
__device__ void plain_chunk(float *p, float *m, float *v, unsigned short *lowp, const float *g,
                            const AdamwJob &J, int64_t b, const AdamFactors &f,
                            const AdamwStep &k)
{
    const int64_t first = b * ADAMW_JOB_CHUNK;
#pragma unroll 4
    for (int e = 0; e < PER_THREAD; e++) {
        const int64_t i = first + threadIdx.x + (int64_t)e * FP8_THREADS;
        if (i >= J.numel) break;
        adamw_at<L>(p, m, v, lowp, g, (size_t)(J.offset + i), f, k);
    }
}

/* An fp8 job's tile t (row tiles down, column tiles across). */
template <typename L>
__device__ void fp8_tile(float *p, float *m, float *v, unsigned short *lowp, const float *g,
                         const AdamwJob &J, int64_t t, const AdamFactors &f, const AdamwStep &k,
                         bool step)
{
    __shared__ __align__(16) uint8_t tile[JOB_TILE][PITCH];
    const int64_t tiles_c = (J.cols + JOB_TILE - 1) / JOB_TILE;
    const int64_t r0 = t / tiles_c * JOB_TILE, c0 = t % tiles_c * JOB_TILE;
    const int cg = threadIdx.x % TPR, rl = threadIdx.x / TPR;
    const int64_t c = c0 + 4 * cg;
    const float s = *J.scale;
    const bool s_ok = isfinite(s) && s != 0.0f;   /* else the exact path (ops/fp8.cu) */
    float amax = 0.0f;
#pragma unroll
    for (int ps = 0; ps < PASSES; ps++) {
        const int i = rl + ps * RP;
        const int64_t r = r0 + i;
        if (r >= J.rows || c >= J.cols) continue;
        const size_t at = (size_t)(J.offset + r * J.cols + c);   /* a multiple of 4 */
        float4 pv = *(float4 *)(p + at);
        if (step) {
            float4 mv = *(float4 *)(m + at), vv = *(float4 *)(v + at);
            const float4 gv = *(const float4 *)(g + at);
            adamw_one(pv.x, mv.x, vv.x, gv.x, f, k);
            adamw_one(pv.y, mv.y, vv.y, gv.y, f, k);
            adamw_one(pv.z, mv.z, vv.z, gv.z, f, k);
            adamw_one(pv.w, mv.w, vv.w, gv.w, f, k);
            *(float4 *)(p + at) = pv;
            *(float4 *)(m + at) = mv;
            *(float4 *)(v + at) = vv;
            if (lowp) lowp_store4<L>(lowp, at / 4, pv);
        }
        const float v[4] = {pv.x, pv.y, pv.z, pv.w};
        const float vmax = max_nan(max_nan(fabsf(v[0]), fabsf(v[1])),
                                   max_nan(fabsf(v[2]), fabsf(v[3])));
        union { uint16_t h[2]; uint32_t w; } code;
        fp8_codes_vec<0, 4>(code.h, &amax, v, vmax, s, s_ok);
        *(uint32_t *)&tile[i][4 * cg] = code.w;
        *(uint32_t *)(J.q + (size_t)r * J.cols + c) = code.w;
    }
    __syncthreads();
    fp8_tile_out<PITCH>(J.qt, tile, (size_t)r0, (size_t)c0, (size_t)J.rows, (size_t)J.cols);
    block_amax_atomic(amax, J.amax);
}

template <typename L>
__global__ void __launch_bounds__(FP8_THREADS)
    adamw_jobs_kernel(float *p, float *m, float *v, unsigned short *lowp, const float *g,
                      const AdamwJob *jobs, int njobs, const float *lr,
                      const AdamStepState *st, AdamFactors f, const int *skip)
{
    const bool step = !(skip && *skip);
    const int64_t b = blockIdx.x;
    const AdamwJob J = jobs[job_of(jobs, njobs, b)];
    const AdamwStep k = adamw_step_scalars(*lr, st, J.wd);
    if (J.q) fp8_tile<L>(p, m, v, lowp, g, J, b - J.block0, f, k, step);
    else if (step) plain_chunk<L>(p, m, v, lowp, g, J, b - J.block0, f, k);
}

} // namespace

extern "C" void adamw_jobs_step_cuda(float *p, float *m, float *v, void *p_lowp, DType lowp_t,
                                     const float *g, const AdamwJob *jobs, int njobs,
                                     int64_t nblocks, const float *lr, const AdamStepState *st,
                                     double beta1, double beta2, double eps, const int *skip,
                                     cudaStream_t s)
{
    if (njobs == 0 || nblocks == 0) return;
    CT_ASSERT(p && m && v && g && jobs && lr && st,
              "adamw_jobs_step_cuda: p, m, v, g, the jobs, lr and st must be device pointers");
    CT_ASSERT(!p_lowp || lowp_t == DT_F16 || lowp_t == DT_BF16,
              "adamw_jobs_step_cuda: a working copy of type %s (f16 or bf16)",
              dtype_name(lowp_t));
    CT_ASSERT((uintptr_t)p % 16 == 0 && (uintptr_t)m % 16 == 0 && (uintptr_t)v % 16 == 0 &&
                  (uintptr_t)g % 16 == 0 && (uintptr_t)p_lowp % 8 == 0,
              "adamw_jobs_step_cuda: p, m, v, g 16-byte aligned, the working copy 8");
    CT_ASSERT(nblocks <= 0x7fffffff, "adamw_jobs_step_cuda: %lld blocks", (long long)nblocks);
    const AdamFactors f = adam_factors(beta1, beta2, eps);
    unsigned short *lp = (unsigned short *)p_lowp;
    if (p_lowp && lowp_t == DT_F16)
        adamw_jobs_kernel<__half><<<(unsigned)nblocks, FP8_THREADS, 0, s>>>(
            p, m, v, lp, g, jobs, njobs, lr, st, f, skip);
    else
        adamw_jobs_kernel<__nv_bfloat16><<<(unsigned)nblocks, FP8_THREADS, 0, s>>>(
            p, m, v, lp, g, jobs, njobs, lr, st, f, skip);
    CUDA_CHECK_LAUNCH();
}
