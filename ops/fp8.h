/* fp8.h — the two 8-bit float formats of FP8 training, their scaled cast and
 * the delayed-scaling recipe: the CPU reference (ops/fp8.c) and the CUDA
 * version (ops/fp8.cu), one contract.
 *
 * Formats (OCP 8-bit floating point, what Hopper and Ada tensor cores read):
 *   E4M3  sign, 4 exponent bits (bias 7), 3 mantissa bits. No infinities;
 *         S.1111.111 is NaN; largest finite 448 (S.1111.110 = 1.75 * 2^8);
 *         smallest subnormal 2^-9. Forward operands: weights, activations.
 *   E5M2  sign, 5 exponent bits (bias 15), 2 mantissa bits, IEEE-like:
 *         S.11111.00 infinity, S.11111.xx (xx != 0) NaN; largest finite
 *         57344 (1.75 * 2^15); smallest subnormal 2^-16. Gradients: more
 *         range, less precision.
 *
 * Cast f32 -> FP8 ("satfinite", as the hardware's cvt.rn.satfinite):
 *   - round to nearest, ties to even, subnormals included;
 *   - a finite value beyond the largest finite, or an infinity, becomes the
 *     largest finite of its sign (no overflow to NaN or inf);
 *   - NaN becomes 0x7F (positive NaN in both formats);
 *   - +-0 keeps its sign; values below half the smallest subnormal -> +-0.
 *
 * Scaled cast (per-tensor scaling): FP8's range is narrow (E4M3 covers
 * 2^-9 .. 448), so a tensor is multiplied by a scale s before the cast and
 * the GEMM multiplies its result by 1/s ("scale_inv") of each operand:
 *     q = fp8(x * s)                 amax = max |x|   (same pass)
 *     x ~ q / s                      (dequantized)
 *
 * Delayed scaling (Transformer Engine's recipe): the scale used at step t
 * comes from the amaxes of earlier steps, so the cast needs no second pass
 * and no host sync. Per tensor, a history of the last L amaxes:
 *     history[t mod L] = amax_t                       (after step t)
 *     m   = max(history)
 *     s   = fmt_max / m / 2^margin     when m > 0 and s is finite,
 *           else s stays what it was
 * A non-finite amax (an overflow in the tensor) is recorded as 0 and
 * reported, so one bad step does not poison L steps of scales.
 */
#ifndef CTRAIN_OPS_FP8_H
#define CTRAIN_OPS_FP8_H

#include <stddef.h>
#include <stdint.h>
#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>
#endif

#include "engine/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { FP8_E4M3 = 0, FP8_E5M2 = 1 } Fp8Format;

#define FP8_E4M3_MAX 448.0f
#define FP8_E5M2_MAX 57344.0f
#define FP8_NAN 0x7F

float fp8_max(Fp8Format f);
const char *fp8_name(Fp8Format f);

/* ---- CPU reference ---- */

/* One value each way. */
uint8_t fp8_from_f32(float x, Fp8Format f);
float fp8_to_f32(uint8_t q, Fp8Format f);

/* q[i] = fp8(x[i] * scale); *amax = max |x[i]| over the n values (NaN
 * ignored, as fmaxf does; an infinity counts). */
void fp8_cast_cpu(uint8_t *q, float *amax, const float *x, size_t n, float scale, Fp8Format f);
/* x[i] = fp8_to_f32(q[i]) * scale_inv */
void fp8_dequant_cpu(float *x, const uint8_t *q, size_t n, float scale_inv, Fp8Format f);

/* The delayed-scaling update after step `step` (0, 1, ...): history[step
 * mod len] = amax (0 when amax is not finite), then the scale from the
 * history's maximum with `margin` powers of two of headroom; scale_inv =
 * 1 / scale. Returns 1 when amax was not finite (an overflow), else 0. */
int fp8_scale_update_cpu(float *history, int len, long step, float amax, Fp8Format f,
                         int margin, float *scale, float *scale_inv);

#ifdef CTRAIN_CUDA
/* ---- CUDA (ops/fp8.cu), bit-identical to the CPU reference ----
 * On `stream`; scale and amax live on the device so a captured step reads
 * this step's values. fp8_cast_cuda: q = fp8(x * *scale) and *amax =
 * max(*amax, max |x|) (the caller zeroes *amax when a new step starts:
 * fp8_amax_zero_cuda). x is f32, f16 or bf16 (xt). */
void fp8_cast_cuda(uint8_t *q, float *amax, const void *x, DType xt, size_t n,
                   const float *scale, Fp8Format f, cudaStream_t s);
/* The same cast of a row-major [rows, cols] x, written transposed: qt is
 * row-major [cols, rows], qt[c * rows + r] = fp8(x[r * cols + c] * *scale);
 * when q is not NULL the same codes also go to q untransposed (q[r * cols
 * + c], fp8_cast_cuda's output) in the same pass. *amax as fp8_cast_cuda.
 * The FP8 GEMM takes both operands with K contiguous (ops/fp8_gemm.h), so
 * a Linear layer needs x_q for forward and x_q^T for its weight gradient. */
void fp8_cast_transpose_cuda(uint8_t *qt, uint8_t *q, float *amax, const void *x, DType xt,
                             size_t rows, size_t cols, const float *scale, Fp8Format f,
                             cudaStream_t s);
/* The same cast-transpose of g = GELU(x) instead of x, g rounded to x's
 * type first: the bits op_gelu would write (ops/elementwise.h), which this
 * pass never writes. *amax is g's. The FP8 Linear that follows a GELU
 * (op_linear_fp8_gelu, ops/linear_fp8.h) casts its input with it. */
void fp8_cast_transpose_gelu_cuda(uint8_t *qt, uint8_t *q, float *amax, const void *x, DType xt,
                                  size_t rows, size_t cols, const float *scale, Fp8Format f,
                                  cudaStream_t s);
/* The same cast-transpose that also sums x's columns, in the one read of
 * x (the Linear's bias gradient from dy): db[c] = sum_r x[r * cols + c]
 * (accum 0) or db[c] += it (accum 1), f32, in an order fixed by (rows,
 * cols) alone (ops/fp8.cu): deterministic. scratch: device memory for
 * fp8_colsum_scratch_floats(rows, cols) floats (the partial sums of each
 * 64-row tile), from the caller so that nothing here allocates and the
 * pair of kernels can be captured. */
size_t fp8_colsum_scratch_floats(size_t rows, size_t cols);
void fp8_cast_transpose_colsum_cuda(uint8_t *qt, uint8_t *q, float *amax, float *db, int accum,
                                    float *scratch, const void *x, DType xt, size_t rows,
                                    size_t cols, const float *scale, Fp8Format f,
                                    cudaStream_t s);
/* The same cast-transpose (and column sums, when db is not NULL) of GELU's
 * backward dh = T(dg GELU'(h)) (dg, h [rows, cols] of type xt; T = xt), the
 * bits op_gelu's backward would write, which this pass never writes: the
 * gradient of the Linear before a GELU cast for its backward straight from
 * the next Linear's dg (op_ffn_fp8, ops/linear_fp8.h). *amax is dh's. */
void fp8_cast_transpose_dgelu_colsum_cuda(uint8_t *qt, uint8_t *q, float *amax, float *db,
                                          int accum, float *scratch, const void *dg,
                                          const void *h, DType xt, size_t rows, size_t cols,
                                          const float *scale, Fp8Format f, cudaStream_t s);
/* Codes already made row-major (q [rows, cols], by a kernel that casts as
 * it writes: the add_norm backward's, ops/layernorm.h) transposed into qt
 * [cols, rows]: the same bytes. Needs rows and cols multiples of 16 and q,
 * qt 16-byte aligned. */
void fp8_transpose_codes_cuda(uint8_t *qt, const uint8_t *q, size_t rows, size_t cols,
                              cudaStream_t s);
/* db[c] (+)= sum over g < G of part[g * cols + c], in a fixed order (the
 * cast-transpose's own second pass): the column sums from the partials
 * another kernel left, one row of cols floats per chunk of rows. */
void fp8_colsum_finish_cuda(float *db, int accum, const float *part, size_t G, size_t cols,
                            cudaStream_t s);
void fp8_amax_zero_cuda(float *amax, int n, cudaStream_t s);
/* The kernels' conversion (one cvt.rn.satfinite instruction on sm_89 and
 * later) against fp8_from_f32 on every f32 bit pattern: how many codes
 * differ (0 is the contract), *first_bad the smallest differing pattern
 * (0xFFFFFFFF when none). Synchronous; ~1 s. */
long long fp8_cvt_check_cuda(Fp8Format f, uint32_t *first_bad);
/* The update for `ntensors` tensors at once: history [ntensors, len],
 * amax / scale [ntensors], scale_inv [ntensors] sinv_stride words apart
 * (the recipe's 16-byte spacing, fp8_recipe.h), *step the device step counter (read,
 * not advanced: the caller advances it once per optimizer step), overflow
 * [ntensors] set to 1 where amax was not finite (else left alone). */
void fp8_scale_update_cuda(float *history, int len, const long long *step, const float *amax,
                           int ntensors, Fp8Format f, int margin, float *scale,
                           float *scale_inv, int sinv_stride, int *overflow, cudaStream_t s);
#endif

#ifdef __cplusplus
}
#endif
#endif
