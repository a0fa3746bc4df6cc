/* dropout.h — inverted dropout with a counter-based mask (ops/dropout_mask.h).
 *
 * Shape letters: n elements (any shape, flattened; element i is x[i]).
 *
 *   keep_i = drop_keep_bit(seed, offset, i, thr),  thr = ceil(256 p)
 *                                                  (P(keep) = 1 - thr / 256)
 *   y_i    = keep_i ? x_i * s : 0,     s = drop_scale(p) = 256 / (256 - thr)
 *   backward: dx_i (+)= keep_i ? dy_i * s : 0
 *
 * Element i is byte i % 16 of Philox counter offset + i / 16 (seven rounds),
 * so a draw of n elements consumes drop_blocks(n) counter blocks, and the
 * mask is a pure function of (seed, offset, i): the CPU and the GPU give the
 * same mask bit for bit, the backward regenerates it instead of storing it
 * (no mask memory), and recompute reproduces it from the same offset. p is
 * resolved to 1/256 (0.1 drops at 26/256), the scale the inverse of the rate
 * drawn; p above 255/256 drops everything (s = 0).
 */
#ifndef CTRAIN_OPS_DROPOUT_H
#define CTRAIN_OPS_DROPOUT_H

#include <stddef.h>
#include <stdint.h>
#include "engine/ctx.h"
#include "engine/dtype.h"
#include "engine/tensor.h"
#include "dropout_mask.h"
#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- CPU reference (f32) ---- */
void dropout_forward_cpu(float *y, const float *x, float p, uint64_t seed, uint64_t offset,
                         size_t n);
void dropout_backward_cpu(float *dx, const float *dy, float p, uint64_t seed,
                          uint64_t offset, size_t n, int accum);

#ifdef CTRAIN_CUDA
/* ---- CUDA (dt = storage type of x, y, dy, dx) ----
 * base: NULL, or a device word the kernel adds to offset when it runs. A
 * step captured in a CUDA graph passes offsets relative to the step's start
 * and the context's base (ctx.h: rng_base), which the graph advances, so
 * every replay draws fresh masks — the same ones eager steps would draw. */
void dropout_forward_cuda(void *y, const void *x, DType dt, float p, uint64_t seed,
                          uint64_t offset, const uint64_t *base, size_t n, cudaStream_t s);
void dropout_backward_cuda(void *dx, const void *dy, DType dt, float p, uint64_t seed,
                           uint64_t offset, const uint64_t *base, size_t n, int accum,
                           cudaStream_t s);
#endif

/* ---- tensor ops (ops/dropout_op.c) ----
 * op_dropout draws its counter blocks from the context
 * (ctx_rng_take(c, drop_blocks(n))) and stores (seed, offset) in the node.
 * p = 0 returns x itself with a new reference (no node, no copy).
 * Dropout is applied whenever p > 0, also in no-grad mode: the no-grad
 * forward of a recompute segment must drop the same units as its replay.
 * Eval is the caller's choice: pass p = 0 (models keep a training flag).
 * op_dropout_at uses an explicit (seed, offset), e.g. to replay a forward. */
Tensor *op_dropout(Ctx *c, Tensor *x, float p);
Tensor *op_dropout_at(Ctx *c, Tensor *x, float p, uint64_t seed, uint64_t offset);

#ifdef __cplusplus
}
#endif
#endif
