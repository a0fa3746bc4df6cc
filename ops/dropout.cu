/* dropout.cu — CUDA inverted dropout with a Philox mask (contract and math
 * in ops/dropout.h, the mask in ops/dropout_mask.h; ops/dropout.c is the CPU
 * reference).
 *
 * The multiply and the accumulating add are __fmul_rn / __fadd_rn: never
 * fused into one FMA, so a kernel that folds dropout in (LayerNorm's
 * add_norm) rounds as this one does.
 *
 * Shape letters: n elements; element i is byte i % 16 of Philox counter
 * offset + i / 16. A lane draws a group of sixteen consecutive elements, so
 * one Philox call (seven rounds) serves sixteen elements, the same keep bits
 * the CPU reference draws; the warp then moves its groups' elements in
 * contiguous rows (dropout_kernel). Storage dt in {f32, f16, bf16}, math in
 * f32 (x * s, one multiply, as on the CPU), stores round to nearest even. The
 * forward and the backward are the same kernel (the backward with the accum
 * flag): y (+)= keep ? x * s : 0. When x and y allow it (VEC), four elements
 * move as one access (8 bytes in f16/bf16, 16 in f32) instead of four: the
 * same values, fewer memory instructions.
 */
#include <stdint.h>

#include "engine/error.h"
#include "cuda_util.cuh"
#include "dropout.h"

namespace {

constexpr int DROP_THREADS = 256;
constexpr unsigned DROP_MAX_BLOCKS = 65535;

/* y[i] (+)= keep_i ? x[i] * s : 0 for i < n, sixteen elements per Philox call.
 * A warp takes 32 groups (512 elements) a step: lane l draws group l's call,
 * then the warp moves the 512 elements as four rows of 32 consecutive
 * 4-element vectors (lane l has elements 128 q + 4 l .. + 3 in row q, of
 * group 8 q + l / 4, whose bits come from that lane by a shuffle), so every
 * access of the warp is contiguous. The loop runs per warp, so all its lanes
 * reach the shuffles. */
template <typename T, bool VEC>
__global__ void dropout_kernel(T *y, const T *x, uint32_t thr, float s, uint64_t seed,
                               uint64_t offset, const uint64_t *base, size_t n, int accum)
{
    if (base) offset += *base;   /* inside a CUDA graph: the step's Philox base */
    const size_t ng = (size_t)drop_blocks(n), nsteps = (ng + 31) / 32;
    const int lane = threadIdx.x & 31;
    const size_t nwarps = ((size_t)gridDim.x * blockDim.x) >> 5;
    for (size_t w = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; w < nsteps;
         w += nwarps) {
        const size_t g = 32 * w + (size_t)lane;
        const unsigned mine = g < ng ? drop_keep16(seed, offset, g, thr) : 0u;
#pragma unroll
        for (int q = 0; q < 4; q++) {
            const unsigned keep = __shfl_sync(FULL_MASK, mine, 8 * q + (lane >> 2)) >>
                                  (4 * (lane & 3));
            const size_t i0 = 512 * w + 128 * (size_t)q + 4 * (size_t)lane;
            if (VEC && i0 + 3 < n) { /* a whole vector, one access each way */
                const Vec<T, 4> a = reinterpret_cast<const Vec<T, 4> *>(x)[i0 / 4];
                Vec<T, 4> o;
                if (accum) o = reinterpret_cast<const Vec<T, 4> *>(y)[i0 / 4];
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    float v = (keep >> k) & 1u ? __fmul_rn(to_f32(a.v[k]), s) : 0.0f;
                    if (accum) v = __fadd_rn(v, to_f32(o.v[k]));
                    o.v[k] = from_f32<T>(v);
                }
                reinterpret_cast<Vec<T, 4> *>(y)[i0 / 4] = o;
                continue;
            }
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const size_t i = i0 + k;
                if (i >= n) break;
                float v = (keep >> k) & 1u ? __fmul_rn(to_f32(x[i]), s) : 0.0f;
                if (accum) v = __fadd_rn(v, to_f32(y[i]));
                y[i] = from_f32<T>(v);
            }
        }
    }
}

void dropout_launch(void *y, const void *x, DType dt, float p, uint64_t seed, uint64_t offset,
                    const uint64_t *base, size_t n, int accum, cudaStream_t s, const char *what)
{
    if (n == 0) return;
    const size_t ng = (size_t)drop_blocks(n);
    const unsigned blocks = grid_for(ng, DROP_THREADS, DROP_MAX_BLOCKS);
    const float sc = drop_scale(p);
    const uint32_t thr = drop_threshold(p);
    const size_t group_bytes = 4 * dtype_size(dt);
    const bool vec = ((uintptr_t)x % group_bytes) == 0 && ((uintptr_t)y % group_bytes) == 0;
    dispatch_float(dt, what, [&](auto tag) {
        using T = decltype(tag);
        if (vec)
            dropout_kernel<T, true><<<blocks, DROP_THREADS, 0, s>>>(
                (T *)y, (const T *)x, thr, sc, seed, offset, base, n, accum);
        else
            dropout_kernel<T, false><<<blocks, DROP_THREADS, 0, s>>>(
                (T *)y, (const T *)x, thr, sc, seed, offset, base, n, accum);
        CUDA_CHECK_LAUNCH();
    });
}

} // namespace

extern "C" void dropout_forward_cuda(void *y, const void *x, DType dt, float p, uint64_t seed,
                                     uint64_t offset, const uint64_t *base, size_t n,
                                     cudaStream_t s)
{
    dropout_launch(y, x, dt, p, seed, offset, base, n, 0, s, "dropout_forward_cuda");
}

/* forward: y = keep ? x * s : 0   so   dx (+)= keep ? dy * s : 0 */
extern "C" void dropout_backward_cuda(void *dx, const void *dy, DType dt, float p,
                                      uint64_t seed, uint64_t offset, const uint64_t *base,
                                      size_t n, int accum, cudaStream_t s)
{
    dropout_launch(dx, dy, dt, p, seed, offset, base, n, accum, s, "dropout_backward_cuda");
}
