/* colsum_finish.cuh — the second kernel of the deterministic column sums
 * (ops/fp8.cu's cast-transpose with db, ops/elementwise.cu's vector
 * bias_backward): the first kernel leaves partial[g, c], one f32 row per
 * chunk of input rows; this adds a column's G partials in a fixed order
 *
 *   db[c] (+)= sum over g < G of partial[g, c]
 *
 * with a block of CF_COLS columns (threadIdx.x) x CF_SLICES slices
 * (threadIdx.y): slice y adds its run of chunks [y k, (y + 1) k) in order
 * (k = ceil(G / CF_SLICES)), then slice 0 adds the slice sums in slice
 * order. A column's G partials are spread over CF_SLICES threads, so a large
 * G (many small chunks, for the first kernel's occupancy) costs no long
 * serial chain. The order depends on (G, C) alone. CUDA C++ only; the
 * kernel sits in an unnamed namespace in each file that includes this.
 */
#ifndef CTRAIN_OPS_COLSUM_FINISH_CUH
#define CTRAIN_OPS_COLSUM_FINISH_CUH

#include <cuda_runtime.h>
#include <stddef.h>

#include "engine/error.h"

namespace {

const int CF_COLS = 32;
const int CF_SLICES = 16;

__global__ void colsum_finish_kernel(float *__restrict__ db, const float *__restrict__ partial,
                                     size_t G, size_t cols, int accum)
{
    __shared__ float slice_sum[CF_SLICES][CF_COLS];
    const size_t c = (size_t)blockIdx.x * CF_COLS + threadIdx.x;
    const size_t k = (G + CF_SLICES - 1) / CF_SLICES;
    const size_t g0 = threadIdx.y * k, g1 = g0 + k < G ? g0 + k : G;
    float sum = 0.0f;
    if (c < cols)
        for (size_t g = g0; g < g1; g++) sum = __fadd_rn(sum, partial[g * cols + c]);
    slice_sum[threadIdx.y][threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
        float total = slice_sum[0][threadIdx.x];
        for (int y = 1; y < CF_SLICES; y++) total = __fadd_rn(total, slice_sum[y][threadIdx.x]);
        db[c] = accum ? __fadd_rn(db[c], total) : total;
    }
}

/* Launches it on s for partial [G, cols]. */
inline void colsum_finish(float *db, int accum, const float *partial, size_t G, size_t cols,
                          cudaStream_t s)
{
    const unsigned blocks = (unsigned)((cols + CF_COLS - 1) / CF_COLS);
    colsum_finish_kernel<<<blocks, dim3(CF_COLS, CF_SLICES), 0, s>>>(db, partial, G, cols, accum);
    CUDA_CHECK_LAUNCH();
}

} // namespace

#endif
