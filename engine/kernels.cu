/* kernels.cu — the CUDA fill, scale and cast of kernels.h.
 *
 * Shape letter: n elements.
 *
 *   fill:  y[i] = value     scale:  y[i] (+)= alpha * x[i]     cast:  y[i] (+)= x[i]
 *
 * Each is the elementwise map (engine/map_kernel.cuh) with a functor that
 * returns a constant, a scaled input or the input: the value is formed in
 * f32 and rounded once to y's type (round to nearest even), 16 bytes per
 * access where the pointers allow it.
 */
#include "kernels.h"

#include "engine/error.h"
#include "engine/map_kernel.cuh"

struct ConstF {
    float value;
    __device__ float operator()(float, float) const { return value; }
};
struct ScaleF {
    float alpha;
    __device__ float operator()(float x, float) const { return alpha * x; }
};
struct CopyF {
    __device__ float operator()(float x, float) const { return x; }
};

extern "C" void fill_cuda(void *y, DType dt, float value, size_t n, cudaStream_t s)
{
    dispatch_float(dt, "fill_cuda", [&](auto tag) {
        using T = decltype(tag);
        launch_map<T, T, 0>(y, nullptr, nullptr, n, 0, ConstF{value}, s);
    });
}

/* Also the backward of add and scale: dx (+)= alpha * dy. */
extern "C" void scale_forward_cuda(void *y, const void *x, float alpha, DType dt, size_t n,
                                   int accum, cudaStream_t s)
{
    dispatch_float(dt, "scale_forward_cuda", [&](auto tag) {
        using T = decltype(tag);
        launch_map<T, T, 1>(y, x, nullptr, n, accum, ScaleF{alpha}, s);
    });
}

extern "C" void cast_cuda(void *y, DType ty, const void *x, DType tx, size_t n, int accum,
                          cudaStream_t s)
{
    if (n == 0) return;
    if (ty == tx && !accum && dtype_is_float(ty)) {
        if (y != x)
            CUDA_CHECK(cudaMemcpyAsync(y, x, n * dtype_size(ty), cudaMemcpyDeviceToDevice, s));
        return;
    }
    dispatch_float(ty, "cast_cuda (output)", [&](auto ytag) {
        using To = decltype(ytag);
        dispatch_float(tx, "cast_cuda (input)", [&](auto xtag) {
            using Ti = decltype(xtag);
            launch_map<To, Ti, 1>(y, x, nullptr, n, accum, CopyF{}, s);
        });
    });
}
