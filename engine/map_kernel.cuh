/* map_kernel.cuh — the one elementwise kernel shape: y (+)= f(x0, x1).
 *
 * Shape letter: n elements. A kernel loads its storage types (f32, f16 or
 * bf16; To for y, Ti for the inputs), computes f in f32, and stores with
 * round-to-nearest-even (from_f32, engine/cuda_base.cuh); with `accum` the
 * old y is added in f32 before the one rounding. f is a small functor
 * taking (x0[i], x1[i]) as floats; NIN says how many inputs are read (0, 1
 * or 2), the others are passed as 0. It moves 16 bytes per access when
 * every pointer allows it (V elements, V = 16 / the larger element size)
 * and one element per access otherwise; a grid-stride loop with size_t
 * indices covers any n.
 *
 * Used by the engine's fill, scale and cast (engine/kernels.cu) and by the
 * elementwise ops (ops/elementwise.cu), each with its own functors. CUDA
 * C++ only; the templates sit in an unnamed namespace like cuda_base.cuh's.
 */
#ifndef CTRAIN_ENGINE_MAP_KERNEL_CUH
#define CTRAIN_ENGINE_MAP_KERNEL_CUH

#include "engine/cuda_base.cuh"
#include "engine/error.h"

namespace {

static const int EW_THREADS = 256;
/* Enough blocks to fill any current GPU; the grid-stride loop does the rest. */
static const unsigned EW_MAX_BLOCKS = 65535;

/* ---- map: y (+)= f(x0, x1) ---- */

/* y[i] = f(x0[i], x1[i]) (+ y[i] with accum). NIN inputs are read (0, 1 or 2);
 * the others are passed as 0. The first n / V * V elements go V at a time, the
 * tail one at a time. */
template <typename To, typename Ti, int V, int NIN, typename F>
__global__ void map_kernel(To *y, const Ti *x0, const Ti *x1, size_t n, int accum, F f)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t nv = n / V;
    for (size_t i = tid; i < nv; i += stride) {
        Vec<Ti, V> a, b;
        Vec<To, V> o;
        if constexpr (NIN > 0) a = reinterpret_cast<const Vec<Ti, V> *>(x0)[i];
        if constexpr (NIN > 1) b = reinterpret_cast<const Vec<Ti, V> *>(x1)[i];
        if (accum) o = reinterpret_cast<const Vec<To, V> *>(y)[i];
#pragma unroll
        for (int k = 0; k < V; k++) {
            float va = 0.0f, vb = 0.0f;
            if constexpr (NIN > 0) va = to_f32(a.v[k]);
            if constexpr (NIN > 1) vb = to_f32(b.v[k]);
            float r = f(va, vb);
            if (accum) r += to_f32(o.v[k]);
            o.v[k] = from_f32<To>(r);
        }
        reinterpret_cast<Vec<To, V> *>(y)[i] = o;
    }
    for (size_t i = nv * V + tid; i < n; i += stride) {
        float va = 0.0f, vb = 0.0f;
        if constexpr (NIN > 0) va = to_f32(x0[i]);
        if constexpr (NIN > 1) vb = to_f32(x1[i]);
        float r = f(va, vb);
        if (accum) r += to_f32(y[i]);
        y[i] = from_f32<To>(r);
    }
}

template <typename To, typename Ti, int NIN, typename F>
static void launch_map(void *y, const void *x0, const void *x1, size_t n, int accum, F f,
                       cudaStream_t s)
{
    if (n == 0) return;
    constexpr int V = 16 / (sizeof(To) > sizeof(Ti) ? sizeof(To) : sizeof(Ti));
    bool vec = is_aligned(y, V * sizeof(To)) && is_aligned(x0, V * sizeof(Ti)) &&
               is_aligned(x1, V * sizeof(Ti));
    To *yt = (To *)y;
    const Ti *a = (const Ti *)x0, *b = (const Ti *)x1;
    const unsigned blocks = grid_for(vec ? (n + V - 1) / V : n, EW_THREADS, EW_MAX_BLOCKS);
    if (vec)
        map_kernel<To, Ti, V, NIN><<<blocks, EW_THREADS, 0, s>>>(yt, a, b, n, accum, f);
    else
        map_kernel<To, Ti, 1, NIN><<<blocks, EW_THREADS, 0, s>>>(yt, a, b, n, accum, f);
    CUDA_CHECK_LAUNCH();
}

} // namespace

#endif
