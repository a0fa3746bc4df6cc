/* fp8.cu — the CUDA half of ops/fp8.h: the scaled cast to E4M3 / E5M2 with
 * the tensor's amax, and the delayed-scaling update, bit-identical to the
 * CPU reference (ops/fp8.c) because both convert with ops/fp8_cvt.h.
 *
 * Shape letters: n elements; T tensors of one update, L history length.
 *
 *   cast:    q[i] = fp8(x[i] * *scale);  *amax = max(*amax, max_i |x[i]|)
 *   cast-transpose (x row-major [R, C]):
 *            qt[c * R + r] = fp8(x[r * C + c] * *scale)   (and q = the cast)
 *   with the column sums (a Linear's bias gradient from dy, in the same read):
 *            db[c] (+)= sum_r x[r * C + c]                (f32, a fixed order)
 *   with GELU on the way in (the FP8 Linear after BERT's GELU, which then
 *   never writes GELU's output):
 *            g = T(gelu(x))   (rounded to x's type T, as op_gelu's output)
 *   with GELU's backward on the way in (the gradient of the Linear before
 *   that GELU, op_ffn_fp8, which then never writes dh), from dg and h:
 *            dh = T(dg gelu'(h))   (op_gelu's backward's bits)
 *            qt, q, *amax, db as above of dh
 *            qt, q as above of g; *amax = max(*amax, max |g|)
 *   update:  per tensor t (one thread each):
 *            history[t, step mod L] = finite(amax[t]) ? amax[t] : 0
 *            m = max over history[t, :]
 *            scale[t] = fmt_max / m / 2^margin  when m > 0 and finite
 *            scale_inv[t] = 1 / scale[t]
 *
 * The cast is a grid-stride pass; each block reduces |x| with warp_max and
 * one atomicMax on the float's bits (a non-negative float orders like its
 * unsigned bit pattern; NaN is skipped with fmaxf's rule, +inf is the
 * largest such pattern), so the amax does not depend on the block order.
 * The conversion is fp8_cvt.h's rule (round to nearest even from the f32,
 * saturate to the largest finite, NaN -> 0x7F). On sm_89 and later the
 * kernels convert two values with one cvt.rn.satfinite instruction, which
 * rounds and saturates by the same rule (only NaN's code is put right
 * after it); fp8_cvt_check_cuda runs both on all 2^32 f32 bit patterns,
 * and gpu_fp8 asserts they agree. Elsewhere the kernels run fp8_cvt.h's
 * integer code itself. Either way the codes are the CPU reference's. (The
 * integer code cost the cast-transpose ~80% of the SM's issue slots: the
 * kernel was bound by it, not by memory.)
 *
 * The cast-transpose goes through shared memory a 64 x 64 tile at a time
 * (a grid-stride loop over tiles): the block reads the tile's rows with
 * consecutive threads on consecutive columns, converts, keeps the codes in
 * shared memory (rows padded to 68 bytes, so a warp reading a column of
 * the tile touches 32 different banks) and writes them out along the
 * tile's columns, which are rows of qt; both global passes are coalesced.
 * Its amax is the cast's: warp_max, then one atomicMax per block. Where
 * the shape and alignment allow (BERT's always do), a second kernel moves
 * the same tile 16 bytes a thread each way (fp8_cast_transpose_vec_kernel,
 * a block per column tile walking row tiles, its NaN test once a vector;
 * CTRAIN_FP8_CAST_VEC=0 keeps the first, for an A/B).
 *
 * Column sums, deterministic without atomics: in a tile each thread adds
 * its column's rows ty, ty + 4, ... in order, the four row lanes are added
 * in lane order into partial[tile row][c] (f32 scratch [ceil(R / 64), C]),
 * and a second kernel adds a column's partials (ops/colsum_finish.cuh: a
 * block of 32 columns x 16 slices, each slice adding its contiguous run of
 * tile rows in order, then the 16 slice sums in slice order, so a column's
 * partials are spread over 16 threads). The order depends on
 * (R, C) alone, never on which block took which tile. This saves
 * bias_backward's separate read of dy (2 bytes an element of bf16 dy; the
 * partials cost 8 / 64 bytes an element, written once and read once).
 */
#include "fp8.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "colsum_finish.cuh"
#include "cuda_util.cuh"
#include "engine/error.h"
#include "engine/settings.h"
#include "fp8_cvt.h"
#include "fp8_device.cuh"
#include "normal_f32.h"

namespace {

const unsigned FP8_MAX_BLOCKS = 4096;

template <typename T>
__global__ void fp8_cast_kernel(uint8_t *__restrict__ q, float *amax, const T *__restrict__ x,
                                size_t n, const float *scale, int fmt)
{
    const float s = *scale;
    float m = 0.0f;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const float v = to_f32(x[i]);
        q[i] = fp8_code(v * s, fmt);
        m = fmaxf(m, fabsf(v));
    }
    block_amax_atomic(m, amax);
}

/* Cast-transpose tiles: TILE x TILE elements; the block's FP8_THREADS
 * threads cover TILE columns x TILE_ROWS rows per pass. */
const int TILE = 64;
const int TILE_ROWS = FP8_THREADS / TILE;
const int TILE_PITCH = TILE + 4;   /* 68 bytes = 17 words: a tile column hits 32 banks */


/* The tiles of a [rows, cols] tensor, row-major over tile rows: how many,
 * and tile t's first row and column. */
__device__ __forceinline__ size_t tile_count(size_t rows, size_t cols, size_t *tiles_c)
{
    *tiles_c = (cols + TILE - 1) / TILE;
    return *tiles_c * ((rows + TILE - 1) / TILE);
}

__device__ __forceinline__ void tile_origin(size_t t, size_t tiles_c, size_t *r0, size_t *c0)
{
    *r0 = t / tiles_c * TILE;
    *c0 = t % tiles_c * TILE;
}

/* What a cast-transpose casts: x itself, GELU(x), or GELU's backward
 * dg GELU'(h) from x = dg and aux = h; the last two rounded to T as the
 * ops' outputs would be. */
enum { CAST_PLAIN = 0, CAST_GELU = 1, CAST_DGELU = 2 };

/* One element's value (x, or through GELU or its backward, rounded to T as
 * op_gelu's output or its gradient), added to the column sum. a: aux's
 * element (CAST_DGELU only). */
template <typename T, int MODE>
__device__ __forceinline__ float cast_value_sum(T xv, T a, float *sum)
{
    float v = to_f32(xv);
    if constexpr (MODE == CAST_GELU) v = to_f32(from_f32<T>(normal_f32_gelu(v)));
    if constexpr (MODE == CAST_DGELU) v = to_f32(from_f32<T>(normal_f32_gelu_grad(v, to_f32(a))));
    /* GELU's cast is a forward one: it never sums columns (one add an
     * element fewer in a kernel bound by its issue slots) */
    if constexpr (MODE != CAST_GELU) *sum = __fadd_rn(*sum, v);
    return v;
}

/* The same, added to the running amax too. */
template <typename T, int MODE>
__device__ __forceinline__ float cast_value(T xv, T a, float *m, float *sum)
{
    const float v = cast_value_sum<T, MODE>(xv, a, sum);
    *m = fmaxf(*m, fabsf(v));
    return v;
}

/* One element: its value as above, and its code. */
template <typename T, int MODE>
__device__ __forceinline__ uint8_t cast_elem(T xv, T a, float s, int fmt, float *m, float *sum)
{
    return fp8_code(cast_value<T, MODE>(xv, a, m, sum) * s, fmt);
}

/* A tile column's sum: its LANES row-lane partials added in lane order. */
template <int LANES>
__device__ __forceinline__ float lanes_sum(const float (*lane_sum)[TILE], int col)
{
    float p = lane_sum[0][col];
    for (int l = 1; l < LANES; l++) p = __fadd_rn(p, lane_sum[l][col]);
    return p;
}

/* colsum: NULL, or partial [ceil(rows / TILE), cols] (the column sums of
 * each row tile, the top of the file). MODE: what is cast (CAST_*; aux is
 * h for CAST_DGELU, else unused). */
template <typename T, int MODE>
__global__ void fp8_cast_transpose_kernel(uint8_t *__restrict__ qt, uint8_t *__restrict__ q,
                                          float *amax, float *__restrict__ colsum,
                                          const T *__restrict__ x, const T *__restrict__ aux,
                                          size_t rows, size_t cols, const float *scale, int fmt)
{
    __shared__ uint8_t tile[TILE][TILE_PITCH];
    __shared__ float lane_sum[TILE_ROWS][TILE];
    const float s = *scale;
    const int tx = threadIdx.x % TILE, ty = threadIdx.x / TILE;
    size_t tiles_c, r0, c0;
    const size_t ntiles = tile_count(rows, cols, &tiles_c);
    float m = 0.0f;
    for (size_t t = blockIdx.x; t < ntiles; t += gridDim.x) {
        tile_origin(t, tiles_c, &r0, &c0);
        /* in: tile row i is x's row r0 + i; thread tx reads column c0 + tx */
        const size_t c = c0 + tx;
        float sum = 0.0f;
        for (int i = ty; i < TILE; i += TILE_ROWS) {
            const size_t r = r0 + i;
            if (r < rows && c < cols) {
                const size_t at = r * cols + c;
                const T a = MODE == CAST_DGELU ? aux[at] : T();
                const uint8_t code = cast_elem<T, MODE>(x[at], a, s, fmt, &m, &sum);
                tile[i][tx] = code;
                if (q) q[r * cols + c] = code;
            }
        }
        if (colsum) lane_sum[ty][tx] = sum;
        __syncthreads();
        /* out: tile column i is qt's row c0 + i; thread tx writes its column r0 + tx */
        const size_t r = r0 + tx;
        for (int i = ty; i < TILE; i += TILE_ROWS) {
            const size_t cq = c0 + i;
            if (r < rows && cq < cols) qt[cq * rows + r] = tile[tx][i];
        }
        if (colsum && ty == 0 && c < cols)
            colsum[r0 / TILE * cols + c] = lanes_sum<TILE_ROWS>(lane_sum, tx);
        __syncthreads();   /* the next tile overwrites this one */
    }
    block_amax_atomic(m, amax);
}

/* The same tile, 16 bytes a thread each way (the path BERT's shapes take):
 * VEC = 16 / sizeof(T) consecutive columns a thread per load (one 16-byte
 * load, VEC codes stored to q as one word), TPR = 64 / VEC threads a tile
 * row, RP = 256 / TPR rows a pass; out, each thread writes 16 consecutive
 * rows of one qt row (one 16-byte store: tile column i = tid / 4, rows
 * 16 (tid % 4) ..). A thread issues its TILE / RP loads of a tile before
 * converting any (2 in bf16, 4 in f32: more bytes in flight). Needs
 * cols % VEC == 0, rows % 16 == 0 and x, q, qt 16-byte aligned
 * (cast_transpose checks; else the kernel above). The
 * codes and amax are the scalar kernel's; the column sums add a thread's
 * rows in pass order, then the RP row lanes in lane order (another fixed
 * order, of the same depth bound).
 * The tiles: block (x, y) takes column tile x and row tiles y, y + gridDim.y,
 * ... (no division by the tile count: a 64-bit one cost ~2.5 instructions an
 * element, ncu). Six blocks an SM (40 registers), four for the dGELU cast
 * (64: it loads two tensors). FMT is the format (0 E4M3, 1 E5M2), fixed at compile time.
 * NaN: a vector's values go through one NaN-keeping max (max_nan); a vector
 * with none (every vector, in training that has not diverged) converts by
 * the hardware alone and adds that max to the amax once, a vector with one
 * takes fp8_code2 and fmaxf per element: the same codes and amax either way
 * (the per-pair NaN fix-ups had cost ~4 instructions an element). */
template <typename T, int MODE, int FMT>
__global__ void __launch_bounds__(FP8_THREADS, MODE == CAST_DGELU ? 4 : 6)
    fp8_cast_transpose_vec_kernel(uint8_t *__restrict__ qt, uint8_t *__restrict__ q,
                                              float *amax, float *__restrict__ colsum,
                                              const T *__restrict__ x, const T *__restrict__ aux,
                                              size_t rows, size_t cols, const float *scale)
{
    constexpr int VEC = 16 / sizeof(T), TPR = TILE / VEC, RP = FP8_THREADS / TPR;
    constexpr int PASSES = TILE / RP;
    __shared__ __align__(16) uint8_t tile[TILE][TILE_PITCH];
    __shared__ float lane_sum[RP][TILE];
    const float s = *scale;
    /* the fast path's test is on the values; with a scale of 0, inf or NaN a value
     * times it may be NaN where the value is not: such a scale takes the exact path */
    const bool s_ok = isfinite(s) && s != 0.0f;
    const int cg = threadIdx.x % TPR, rl = threadIdx.x / TPR;
    const size_t tiles_r = (rows + TILE - 1) / TILE, c0 = (size_t)blockIdx.x * TILE;
    const size_t c = c0 + (size_t)cg * VEC;
    float m = 0.0f;
    for (size_t rt = blockIdx.y; rt < tiles_r; rt += gridDim.y) {
        const size_t r0 = rt * TILE;
        float sum[VEC];
#pragma unroll
        for (int j = 0; j < VEC; j++) sum[j] = 0.0f;
        /* every pass's load first, so a thread has them all in flight at once */
        union { uint4 u; T v[VEC]; } in[PASSES], ax[MODE == CAST_DGELU ? PASSES : 1];
#pragma unroll
        for (int p = 0; p < PASSES; p++) {
            const size_t r = r0 + rl + p * RP;
            if (r < rows && c < cols) {
                in[p].u = *(const uint4 *)(x + r * cols + c);
                if constexpr (MODE == CAST_DGELU) ax[p].u = *(const uint4 *)(aux + r * cols + c);
            }
        }
#pragma unroll
        for (int p = 0; p < PASSES; p++) {
            const int i = rl + p * RP;
            const size_t r = r0 + i;
            if (r >= rows || c >= cols) continue;
            const int pa = MODE == CAST_DGELU ? p : 0;   /* aux's vector (DGELU) */
            float v[VEC];
            float mv = 0.0f;   /* the vector's max |v|, NaN if one is */
#pragma unroll
            for (int j = 0; j < VEC; j++) {
                v[j] = cast_value_sum<T, MODE>(in[p].v[j], ax[pa].v[j], &sum[j]);
                mv = max_nan(mv, fabsf(v[j]));
            }
            union { uint8_t b[VEC]; uint16_t h[VEC / 2]; uint32_t w[VEC / 4]; } code;
            fp8_codes_vec<FMT, VEC>(code.h, &m, v, mv, s, s_ok);
#pragma unroll
            for (int k = 0; k < VEC / 4; k++)   /* rows of 68 bytes: 4-byte aligned */
                *(uint32_t *)&tile[i][cg * VEC + 4 * k] = code.w[k];
            if (q) {
                if constexpr (VEC == 8)
                    *(uint2 *)(q + r * cols + c) = make_uint2(code.w[0], code.w[1]);
                else
                    *(uint32_t *)(q + r * cols + c) = code.w[0];
            }
        }
        if (colsum)
#pragma unroll
            for (int j = 0; j < VEC; j++) lane_sum[rl][cg * VEC + j] = sum[j];
        __syncthreads();
        fp8_tile_out<TILE_PITCH>(qt, tile, r0, c0, rows, cols);
        if (colsum && threadIdx.x < TILE && c0 + threadIdx.x < cols)
            colsum[rt * cols + c0 + threadIdx.x] = lanes_sum<RP>(lane_sum, threadIdx.x);
        __syncthreads();   /* the next tile overwrites this one */
    }
    block_amax_atomic(m, amax);
}

__global__ void fp8_amax_zero_kernel(float *amax, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) amax[i] = 0.0f;
}

__global__ void fp8_scale_update_kernel(float *history, int len, const long long *step,
                                        const float *amax, int ntensors, float fmt_max,
                                        float headroom, float *scale, float *scale_inv,
                                        int sinv_stride, int *overflow)
{
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= ntensors) return;
    float *h = history + (size_t)t * len;
    const float a = amax[t];
    const bool bad = !isfinite(a);
    h[*step % len] = bad ? 0.0f : a;
    if (bad && overflow) overflow[t] = 1;
    float m = 0.0f;
    for (int i = 0; i < len; i++) m = fmaxf(m, h[i]);
    if (m > 0.0f) {
        /* the CPU's order: fmt_max / m / 2^margin */
        const float s = fmt_max / m / headroom;
        if (isfinite(s) && s > 0.0f) scale[t] = s;
    }
    scale_inv[(size_t)t * sinv_stride] = 1.0f / scale[t];
}

/* Every f32 bit pattern u in [base, base + span) through fp8_code2 (two an
 * instruction: u and u + 1) against fp8_cvt_from_f32: the count of codes
 * that differ, and the smallest such pattern. */
__global__ void fp8_cvt_check_kernel(unsigned long long *bad, unsigned int *first, uint64_t base,
                                     uint64_t span, int fmt)
{
    for (uint64_t k = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; 2 * k < span;
         k += (uint64_t)gridDim.x * blockDim.x) {
        const uint32_t u = (uint32_t)(base + 2 * k);
        const float a = __uint_as_float(u), b = __uint_as_float(u + 1);
        const uint16_t fast = fp8_code2(a, b, fmt);
        const uint8_t ra = fp8_cvt_from_f32(a, fmt), rb = fp8_cvt_from_f32(b, fmt);
        const int da = (fast & 0xFFu) != ra, db = (fast >> 8) != rb;
        if (da || db) {
            atomicAdd(bad, (unsigned long long)(da + db));
            atomicMin(first, da ? u : u + 1);
        }
    }
}

} // namespace

long long fp8_cvt_check_cuda(Fp8Format f, uint32_t *first_bad)
{
    unsigned long long *bad;
    unsigned int *first;
    CUDA_CHECK(cudaMalloc((void **)&bad, sizeof *bad));
    CUDA_CHECK(cudaMalloc((void **)&first, sizeof *first));
    CUDA_CHECK(cudaMemset(bad, 0, sizeof *bad));
    CUDA_CHECK(cudaMemset(first, 0xFF, sizeof *first));
    /* 2^32 patterns in 16 launches of 2^28 (a launch stays well under a second) */
    for (uint64_t base = 0; base < (1ull << 32); base += 1ull << 28) {
        fp8_cvt_check_kernel<<<4096, 256>>>(bad, first, base, 1ull << 28, (int)f);
        CUDA_CHECK_LAUNCH();
    }
    unsigned long long n = 0;
    unsigned int u = 0;
    CUDA_CHECK(cudaMemcpy(&n, bad, sizeof n, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(&u, first, sizeof u, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaFree(bad));
    CUDA_CHECK(cudaFree(first));
    if (first_bad) *first_bad = u;
    return (long long)n;
}

void fp8_cast_cuda(uint8_t *q, float *amax, const void *x, DType xt, size_t n,
                   const float *scale, Fp8Format f, cudaStream_t s)
{
    if (n == 0) return;
    const unsigned blocks = grid_for(n, FP8_THREADS, FP8_MAX_BLOCKS);
    dispatch_float(xt, "fp8_cast_cuda", [&](auto tag) {
        using T = decltype(tag);
        fp8_cast_kernel<T><<<blocks, FP8_THREADS, 0, s>>>(q, amax, (const T *)x, n, scale,
                                                          (int)f);
    });
    CUDA_CHECK_LAUNCH();
}

/* x (and aux) -> codes, with the mode's values (CAST_*). */
template <int MODE>
static void cast_transpose_mode(uint8_t *qt, uint8_t *q, float *amax, float *colsum,
                                const void *x, const void *aux, DType xt, size_t rows,
                                size_t cols, const float *scale, Fp8Format f, cudaStream_t s)
{
    const size_t tiles = ((rows + TILE - 1) / TILE) * ((cols + TILE - 1) / TILE);
    const unsigned blocks = grid_for(tiles, 1, FP8_MAX_BLOCKS);
    const auto aligned = [](const void *p) { return ((uintptr_t)p & 15) == 0; };
    static int vec_on = -1;   /* CTRAIN_FP8_CAST_VEC, read once */
    if (vec_on < 0) vec_on = setting_switch(SET_FP8_CAST_VEC);
    dispatch_float(xt, "fp8_cast_transpose_cuda", [&](auto tag) {
        using T = decltype(tag);
        const size_t vec = 16 / sizeof(T);
        if (vec_on && cols % vec == 0 && rows % 16 == 0 && aligned(x) && aligned(qt) &&
            (!q || aligned(q)) && (MODE != CAST_DGELU || aligned(aux))) {
            /* column tiles across, row tiles down: ~FP8_MAX_BLOCKS blocks */
            const size_t tc = (cols + TILE - 1) / TILE, tr = (rows + TILE - 1) / TILE;
            size_t gy = (FP8_MAX_BLOCKS + tc - 1) / tc;
            if (gy > tr) gy = tr;
            if (gy > 65535) gy = 65535;
            CT_ASSERT(tc <= 0x7fffffffu, "fp8 cast-transpose: %zu columns", cols);
            const dim3 grid((unsigned)tc, (unsigned)gy);
            if (f == FP8_E4M3)
                fp8_cast_transpose_vec_kernel<T, MODE, 0><<<grid, FP8_THREADS, 0, s>>>(
                    qt, q, amax, colsum, (const T *)x, (const T *)aux, rows, cols, scale);
            else
                fp8_cast_transpose_vec_kernel<T, MODE, 1><<<grid, FP8_THREADS, 0, s>>>(
                    qt, q, amax, colsum, (const T *)x, (const T *)aux, rows, cols, scale);
        } else
            fp8_cast_transpose_kernel<T, MODE><<<blocks, FP8_THREADS, 0, s>>>(
                qt, q, amax, colsum, (const T *)x, (const T *)aux, rows, cols, scale, (int)f);
    });
    CUDA_CHECK_LAUNCH();
}

static void cast_transpose(uint8_t *qt, uint8_t *q, float *amax, float *colsum, int mode,
                           const void *x, const void *aux, DType xt, size_t rows, size_t cols,
                           const float *scale, Fp8Format f, cudaStream_t s)
{
    CT_ASSERT(mode != CAST_GELU || !colsum, "fp8 cast-transpose: GELU's cast sums no columns");
    if (mode == CAST_GELU)
        cast_transpose_mode<CAST_GELU>(qt, q, amax, colsum, x, aux, xt, rows, cols, scale, f, s);
    else if (mode == CAST_DGELU)
        cast_transpose_mode<CAST_DGELU>(qt, q, amax, colsum, x, aux, xt, rows, cols, scale, f, s);
    else
        cast_transpose_mode<CAST_PLAIN>(qt, q, amax, colsum, x, aux, xt, rows, cols, scale, f, s);
}

void fp8_cast_transpose_cuda(uint8_t *qt, uint8_t *q, float *amax, const void *x, DType xt,
                             size_t rows, size_t cols, const float *scale, Fp8Format f,
                             cudaStream_t s)
{
    if (rows == 0 || cols == 0) return;
    cast_transpose(qt, q, amax, NULL, CAST_PLAIN, x, NULL, xt, rows, cols, scale, f, s);
}

void fp8_cast_transpose_gelu_cuda(uint8_t *qt, uint8_t *q, float *amax, const void *x, DType xt,
                                  size_t rows, size_t cols, const float *scale, Fp8Format f,
                                  cudaStream_t s)
{
    if (rows == 0 || cols == 0) return;
    cast_transpose(qt, q, amax, NULL, CAST_GELU, x, NULL, xt, rows, cols, scale, f, s);
}

size_t fp8_colsum_scratch_floats(size_t rows, size_t cols)
{
    return (rows + TILE - 1) / TILE * cols;
}

void fp8_cast_transpose_colsum_cuda(uint8_t *qt, uint8_t *q, float *amax, float *db, int accum,
                                    float *scratch, const void *x, DType xt, size_t rows,
                                    size_t cols, const float *scale, Fp8Format f,
                                    cudaStream_t s)
{
    if (cols == 0) return;
    if (rows == 0) {   /* an empty sum: db = 0, or unchanged */
        if (!accum) CUDA_CHECK(cudaMemsetAsync(db, 0, cols * sizeof(float), s));
        return;
    }
    cast_transpose(qt, q, amax, scratch, CAST_PLAIN, x, NULL, xt, rows, cols, scale, f, s);
    colsum_finish(db, accum, scratch, (rows + TILE - 1) / TILE, cols, s);
}

namespace {

/* q [rows, cols] -> qt [cols, rows], a 64 x 64 tile a pass: the tile's rows
 * in 16-byte loads (thread t: row t / 4, columns 16 (t % 4) ..), written out
 * along its columns by fp8_tile_out. rows, cols multiples of 16. Block
 * (x, y): column tile x, row tiles y, y + gridDim.y, ... */
__global__ void __launch_bounds__(FP8_THREADS)
    fp8_transpose_kernel(uint8_t *__restrict__ qt, const uint8_t *__restrict__ q, size_t rows,
                         size_t cols)
{
    __shared__ __align__(16) uint8_t tile[TILE][TILE_PITCH];
    const size_t tiles_r = (rows + TILE - 1) / TILE, c0 = (size_t)blockIdx.x * TILE;
    const int i = threadIdx.x / 4, seg = threadIdx.x % 4;
    const size_t c = c0 + 16 * (size_t)seg;
    for (size_t rt = blockIdx.y; rt < tiles_r; rt += gridDim.y) {
        const size_t r0 = rt * TILE, r = r0 + i;
        if (r < rows && c < cols) {
            const uint4 v = *(const uint4 *)(q + r * cols + c);
            uint32_t *d = (uint32_t *)&tile[i][16 * seg];   /* rows of 68 bytes: 4-aligned */
            d[0] = v.x;
            d[1] = v.y;
            d[2] = v.z;
            d[3] = v.w;
        }
        __syncthreads();
        fp8_tile_out<TILE_PITCH>(qt, tile, r0, c0, rows, cols);
        __syncthreads();   /* the next tile overwrites this one */
    }
}

} // namespace

void fp8_transpose_codes_cuda(uint8_t *qt, const uint8_t *q, size_t rows, size_t cols,
                              cudaStream_t s)
{
    if (rows == 0 || cols == 0) return;
    CT_ASSERT(rows % 16 == 0 && cols % 16 == 0 && ((uintptr_t)q & 15) == 0 &&
                  ((uintptr_t)qt & 15) == 0,
              "fp8_transpose_codes_cuda: [%zu, %zu] needs multiples of 16 and aligned codes",
              rows, cols);
    const size_t tc = (cols + TILE - 1) / TILE, tr = (rows + TILE - 1) / TILE;
    size_t gy = (FP8_MAX_BLOCKS + tc - 1) / tc;
    if (gy > tr) gy = tr;
    if (gy > 65535) gy = 65535;
    CT_ASSERT(tc <= 0x7fffffffu, "fp8_transpose_codes_cuda: %zu columns", cols);
    fp8_transpose_kernel<<<dim3((unsigned)tc, (unsigned)gy), FP8_THREADS, 0, s>>>(qt, q, rows,
                                                                                 cols);
    CUDA_CHECK_LAUNCH();
}

void fp8_colsum_finish_cuda(float *db, int accum, const float *part, size_t G, size_t cols,
                            cudaStream_t s)
{
    if (cols == 0) return;
    if (G == 0) {
        if (!accum) CUDA_CHECK(cudaMemsetAsync(db, 0, cols * sizeof(float), s));
        return;
    }
    colsum_finish(db, accum, part, G, cols, s);
}

void fp8_cast_transpose_dgelu_colsum_cuda(uint8_t *qt, uint8_t *q, float *amax, float *db,
                                          int accum, float *scratch, const void *dg,
                                          const void *h, DType xt, size_t rows, size_t cols,
                                          const float *scale, Fp8Format f, cudaStream_t s)
{
    if (cols == 0) return;
    if (rows == 0) {
        if (db && !accum) CUDA_CHECK(cudaMemsetAsync(db, 0, cols * sizeof(float), s));
        return;
    }
    cast_transpose(qt, q, amax, db ? scratch : NULL, CAST_DGELU, dg, h, xt, rows, cols, scale,
                   f, s);
    if (db) colsum_finish(db, accum, scratch, (rows + TILE - 1) / TILE, cols, s);
}

void fp8_amax_zero_cuda(float *amax, int n, cudaStream_t s)
{
    if (n <= 0) return;
    fp8_amax_zero_kernel<<<(n + 255) / 256, 256, 0, s>>>(amax, n);
    CUDA_CHECK_LAUNCH();
}

void fp8_scale_update_cuda(float *history, int len, const long long *step, const float *amax,
                           int ntensors, Fp8Format f, int margin, float *scale,
                           float *scale_inv, int sinv_stride, int *overflow, cudaStream_t s)
{
    CT_ASSERT(len > 0 && margin >= 0 && margin < 64 && ntensors >= 0 && sinv_stride >= 1,
              "fp8_scale_update_cuda: history length %d, margin %d, %d tensors, scale_inv "
              "stride %d", len, margin, ntensors, sinv_stride);
    if (ntensors == 0) return;
    fp8_scale_update_kernel<<<(ntensors + 127) / 128, 128, 0, s>>>(
        history, len, step, amax, ntensors, fp8_max(f), ldexpf(1.0f, margin), scale, scale_inv,
        sinv_stride, overflow);
    CUDA_CHECK_LAUNCH();
}
