/* dropout.cu — CUDA inverted dropout with a Philox mask (contract and math
 * in ops/dropout.h, the mask in ops/dropout_mask.h; ops/dropout.c is the CPU
 * reference).
 *
 * The multiply and the accumulating add are __fmul_rn / __fadd_rn: never
 * fused into one FMA, so a kernel that folds dropout in (LayerNorm's
 * add_norm) rounds as this one does.
 *
 * Shape letters: n elements; element i is byte i % 16 of Philox counter
 * offset + i / 16. A thread takes a group of sixteen consecutive elements,
 * so one Philox call (seven rounds) serves sixteen elements, the same keep
 * bits the CPU reference draws. Storage dt in {f32, f16, bf16}, math in f32
 * (x * s, one multiply, as on the CPU), stores round to nearest even. The
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

/* y[i] (+)= keep_i ? x[i] * s : 0 for i < n, sixteen elements per Philox call */
template <typename T, bool VEC>
__global__ void dropout_kernel(T *y, const T *x, uint32_t thr, float s, uint64_t seed,
                               uint64_t offset, const uint64_t *base, size_t n, int accum)
{
    if (base) offset += *base;   /* inside a CUDA graph: the step's Philox base */
    const size_t ng = (size_t)drop_blocks(n), stride = (size_t)gridDim.x * blockDim.x;
    for (size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x; g < ng; g += stride) {
        const unsigned keep = drop_keep16(seed, offset, g, thr);
        if (VEC && 16 * g + 15 < n) { /* a whole group, four accesses each way */
#pragma unroll
            for (int q = 0; q < 4; q++) {
                const size_t v4 = 4 * g + q;
                const Vec<T, 4> a = reinterpret_cast<const Vec<T, 4> *>(x)[v4];
                Vec<T, 4> o;
                if (accum) o = reinterpret_cast<const Vec<T, 4> *>(y)[v4];
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    float v = (keep >> (4 * q + k)) & 1u ? __fmul_rn(to_f32(a.v[k]), s) : 0.0f;
                    if (accum) v = __fadd_rn(v, to_f32(o.v[k]));
                    o.v[k] = from_f32<T>(v);
                }
                reinterpret_cast<Vec<T, 4> *>(y)[v4] = o;
            }
            continue;
        }
        for (int k = 0; k < 16; k++) {
            const size_t i = 16 * g + k;
            if (i >= n) break;
            float v = (keep >> k) & 1u ? __fmul_rn(to_f32(x[i]), s) : 0.0f;
            if (accum) v = __fadd_rn(v, to_f32(y[i]));
            y[i] = from_f32<T>(v);
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
