/* embedding.h — embedding lookup (BERT's word, position and token-type
 * embeddings) and its deterministic scatter-add backward.
 *
 * Shape letters: N looked-up positions (ids of any shape, flattened),
 * V vocabulary rows, D embedding width.
 *
 *   forward:  out[n, :] = table[ids[n], :]
 *   backward: dtable[v, :] (+)= sum_{n : ids[n] == v} dout[n, :]
 *
 * The table and its gradient are f32 (parameters); out and dout have
 * storage type dt on CUDA (the autocast type under autocast). The backward
 * never uses float atomics: the sum for each row v runs over v's positions
 * in a fixed order (ops/embedding.cu explains how), so it is bit-identical
 * run to run. Ids outside [0, V) are a caller error: the CPU reference exits
 * naming the id and its position; the CUDA forward counts them into *nbad
 * (device, i32; the op passes its counter, ops/op_flags.h) and writes a zero
 * row, and the CUDA backward skips them, so a bad id never reads or writes
 * out of bounds and the step needs no host sync.
 *
 * `accum`: 0 writes dtable (rows no id hits become 0), 1 adds into it.
 */
#ifndef CTRAIN_OPS_EMBEDDING_H
#define CTRAIN_OPS_EMBEDDING_H

#include <stddef.h>
#include <stdint.h>
#include "engine/ctx.h"
#include "engine/dtype.h"
#include "engine/tensor.h"
#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- CPU reference (f32) ---- */
void embedding_forward_cpu(float *out, const float *table, const int32_t *ids, size_t N,
                           size_t V, size_t D);
void embedding_backward_cpu(float *dtable, const float *dout, const int32_t *ids, size_t N,
                            size_t V, size_t D, int accum);

/* Tables of at most this many rows (token types) take the CUDA backward's
 * short path (ops/embedding.cu), which has no compact form. */
#define EMBEDDING_SMALL_V 16

/* Compact backward (data parallel's sparse lookup gradient, train/parallel/dist.c):
 * the same per-id sums, not added into a table but written as rows: for the
 * k-th id used (in increasing order) ids_out[k] = v and rows[k, :] = the sum
 * of v's positions; ids_out[k] = -1 for k from the number of ids used up to
 * N (rows there: unspecified). rows holds N x D floats, ids_out N ints.
 * rows_add: dtable[ids[k], :] += scale * rows[k, :] for each k < K with an id
 * in [0, V) (-1 skipped); the ids must be distinct (one list of the above). */
void embedding_backward_compact_cpu(float *rows, int32_t *ids_out, const float *dout,
                                    const int32_t *ids, size_t N, size_t V, size_t D);
void embedding_rows_add_cpu(float *dtable, const float *rows, const int32_t *ids, size_t K,
                            size_t V, size_t D, float scale);

#ifdef CTRAIN_CUDA
/* ---- CUDA (dt = storage type of out / dout) ---- */
/* nbad: device counter, incremented once per out-of-range id (may be NULL) */
void embedding_forward_cuda(void *out, DType dt, const float *table, const int32_t *ids,
                            int32_t *nbad, size_t N, size_t V, size_t D, cudaStream_t s);
/* Scratch (about 4 (N/1024 + 2) V + 8 N bytes) comes from the stream-ordered
 * pool, so the launch is capturable in a CUDA graph. */
void embedding_backward_cuda(float *dtable, const void *dout, DType dt, const int32_t *ids,
                             size_t N, size_t V, size_t D, int accum, cudaStream_t s);
/* The compact forms above (bit for bit the sums embedding_backward_cuda adds;
 * V above EMBEDDING_SMALL_V). */
void embedding_backward_compact_cuda(float *rows, int32_t *ids_out, const void *dout, DType dt,
                                     const int32_t *ids, size_t N, size_t V, size_t D,
                                     cudaStream_t s);
void embedding_rows_add_cuda(float *dtable, const float *rows, const int32_t *ids, size_t K,
                             size_t V, size_t D, float scale, cudaStream_t s);
#endif

/* ---- tensor op (ops/embedding_op.c) ----
 * table f32 [V, D] (a parameter), ids i32 of any shape -> out ids.shape + [D],
 * f32, or the autocast type when autocast is on. */
Tensor *op_embedding(Ctx *c, Tensor *table, Tensor *ids);

#ifdef __cplusplus
}
#endif
#endif
