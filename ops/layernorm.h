/* layernorm.h — layer normalization over the last dim (BERT's LayerNorm).
 *
 * Shape letters: R rows (every dim but the last), D the normalized width.
 *
 *   mean_r   = sum_d x[r,d] / D
 *   var_r    = sum_d (x[r,d] - mean_r)^2 / D          (biased, as PyTorch)
 *   invstd_r = 1 / sqrt(var_r + eps)                   (BERT: eps = 1e-12)
 *   xhat     = (x - mean_r) * invstd_r
 *   y[r,d]   = xhat[r,d] * gamma[d] + beta[d]
 * backward, with g = dy * gamma:
 *   dx[r,d]  = invstd_r * (g[r,d] - mean_d g[r,:] - xhat[r,d] * mean_d (g[r,:] * xhat[r,:]))
 *   dgamma[d] = sum_r dy[r,d] * xhat[r,d],   dbeta[d] = sum_r dy[r,d]
 *
 * Statistics are computed in f32 on the GPU (double in the CPU reference)
 * and saved as f32 mean[R], invstd[R] for the backward. gamma, beta and
 * their gradients are f32 (parameters); x, y, dy, dx have storage type dt
 * on CUDA. dgamma/dbeta are deterministic: per-chunk partial sums, then a
 * fixed-order reduction over the chunks (no float atomics).
 *
 * `accum` flags: 0 writes, 1 adds into what the output holds. Any of dx,
 * dgamma, dbeta may be NULL (not needed).
 */
#ifndef CTRAIN_OPS_LAYERNORM_H
#define CTRAIN_OPS_LAYERNORM_H

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

/* ---- CPU reference (f32 in and out, statistics in double) ---- */
void layernorm_forward_cpu(float *y, float *mean, float *invstd, const float *x,
                           const float *gamma, const float *beta, float eps, size_t R,
                           size_t D);
void layernorm_backward_cpu(float *dx, float *dgamma, float *dbeta, const float *dy,
                            const float *x, const float *mean, const float *invstd,
                            const float *gamma, size_t R, size_t D, int accum_x,
                            int accum_gamma, int accum_beta);

#ifdef CTRAIN_CUDA
/* ---- CUDA (dt = storage type of x, y, dy, dx) ---- */
void layernorm_forward_cuda(void *y, float *mean, float *invstd, const void *x,
                            const float *gamma, const float *beta, DType dt, float eps,
                            size_t R, size_t D, cudaStream_t s);
/* Scratch for the dgamma/dbeta partial sums comes from the stream-ordered
 * pool (cudaMallocAsync), so the launch is capturable in a CUDA graph. */
void layernorm_backward_cuda(void *dx, float *dgamma, float *dbeta, const void *dy,
                             const void *x, const float *mean, const float *invstd,
                             const float *gamma, DType dt, size_t R, size_t D, int accum_x,
                             int accum_gamma, int accum_beta, cudaStream_t s);
/* The dropout and residual add fused in front of LayerNorm (the vector
 * kernels; ops/add_norm_op.c):
 *   forward   s = x + dropout(z; p, seed, offset)   each step rounded to dt
 *             as dropout and add round; s saved in s_out; y = LayerNorm(s)
 *   backward  ds = LayerNorm's dx of dy; dx (+)= ds (the residual's
 *             gradient, accum_x); dz (+)= keep ? ds * scale : 0 (accum_z),
 *             scale = drop_scale(p) = 256 / (256 - ceil(256 p)) (ops/dropout_mask.h)
 * The same bits as dropout, add and LayerNorm's vector kernels run one after
 * the other. Either of dx, dz may be NULL. base: the Philox base inside a
 * CUDA graph (dropout.h), or NULL. bits (p > 0; NULL: none): the dropout
 * mask as keep bits, R D / V bytes (V = 16 / dtype_size(dt), the vector:
 * bit k of byte i / V is element i's keep, i % V = k), written by the
 * forward and read by the backward in place of a second Philox draw; a
 * backward without them draws the same mask again. Returns 0 with nothing
 * done when the rows do not suit the vector kernels (the caller runs the
 * three ops): a width that is no multiple of 16 bytes or over 4 vectors a
 * lane (bf16 / f16 D <= 1024, f32 D <= 512), or a pointer not 16-byte
 * aligned. */
int add_norm_forward_cuda(void *y, void *s_out, float *mean, float *invstd, const void *x,
                          const void *z, const float *gamma, const float *beta, DType dt,
                          float eps, float p, uint64_t seed, uint64_t offset,
                          const uint64_t *base, void *bits, size_t R, size_t D, cudaStream_t s);
int add_norm_backward_cuda(void *dx, void *dz, float *dgamma, float *dbeta, const void *dy,
                           const void *s_saved, const float *mean, const float *invstd,
                           const float *gamma, DType dt, float p, uint64_t seed,
                           uint64_t offset, const uint64_t *base, const void *bits, size_t R,
                           size_t D, int accum_x, int accum_z, int accum_gamma, int accum_beta,
                           cudaStream_t s);
/* Whether add_norm_forward_codes_cuda takes rows R x D of dt (its shape rule;
 * the pointers' alignment is checked by the call). */
int add_norm_forward_codes_fits(DType dt, size_t R, size_t D);
/* The forward that also makes y's E4M3 codes for the FP8 Linear that reads
 * y (ops/linear_fp8.h, "Codes made by the producer"): as
 * add_norm_forward_cuda, and from each value of y as stored, its code at
 * *scale into q [R, D] and into qt [D, R] (the transpose), and *amax raised
 * to max |y| (amax NULL: not recorded): the codes and amax
 * fp8_cast_transpose_cuda would make reading y. Returns 0 with nothing done
 * unless dt is bf16, R is a multiple of 32 and D is 256, 512 or 1,024 (32
 * vectors of 16 bytes times 1, 2 or 4), every pointer 16-byte aligned. */
int add_norm_forward_codes_cuda(void *y, void *s_out, float *mean, float *invstd, const void *x,
                                const void *z, const float *gamma, const float *beta, DType dt,
                                float eps, float p, uint64_t seed, uint64_t offset,
                                const uint64_t *base, void *bits, uint8_t *q, uint8_t *qt,
                                float *amax, const float *scale, size_t R, size_t D,
                                cudaStream_t s);
/* The backward with dz handed over as FP8 codes (the FP8 Linear's hand-off,
 * ops/linear_fp8.h "The gradient's codes"): instead of dz, its E5M2 codes
 * at *qscale into q [R, D] (each value rounded to dt as dz would be stored:
 * the codes and amax the Linear's own cast of dz would make), *amax raised
 * to max |dz|, and dz's column sums as partials into zpart
 * (add_norm_codes_partials(R, D) floats: one row of D a chunk of rows, for
 * fp8_colsum_finish_cuda), summed in the kernel's order (each warp its rows,
 * the warps in order), not the cast's. dz written, never added (accum_z 0).
 * Returns 0 with nothing done unless the call suits the fused kernel's
 * straight-line form: p > 0 with the forward's keep bits, dgamma and dbeta
 * both wanted, D exactly 32 vectors of 16 bytes times 1, 2 or 4 (1,024 in
 * bf16), the pointers as add_norm_backward_cuda needs them. */
int add_norm_backward_codes_cuda(void *dx, uint8_t *q, float *amax, const float *qscale,
                                 float *zpart, float *dgamma, float *dbeta, const void *dy,
                                 const void *s_saved, const float *mean, const float *invstd,
                                 const float *gamma, DType dt, float p, uint64_t seed,
                                 uint64_t offset, const uint64_t *base, const void *bits,
                                 size_t R, size_t D, int accum_x, int accum_gamma,
                                 int accum_beta, cudaStream_t s);
size_t add_norm_codes_partials(size_t R, size_t D);
/* The rows a call needs before the vector kernels pay (CTRAIN_LN_KERNELS=auto,
 * CTRAIN_ADD_NORM=auto): they hold a row a warp, so fewer rows leave too few
 * warps in flight to cover memory latency (ops/layernorm.cu). */
#define LAYERNORM_VEC_MIN_ROWS 16384

/* Which kernels run (ops/layernorm.cu says how they differ): 0 one element
 * per lane per access, 1 16-byte vectors with the row in registers where D
 * allows, 2 the vector kernels for calls of at least 16,384 rows and the
 * first below, 3 the vector forward and the split backward (dx, then the
 * parameter sums in their own pass). Starts from CTRAIN_LN_KERNELS (row |
 * vec | auto | split); tests set it. */
void layernorm_cuda_set_kernels(int vec);
#endif

/* ---- tensor op (ops/layernorm_op.c) ----
 * x [..., D] in f32/f16/bf16; gamma, beta f32 [D] (parameters). y has x's
 * type (f32 math whatever the storage, also under autocast). Saves x, gamma
 * and mean/invstd [R] f32 for the backward. */
Tensor *op_layernorm(Ctx *c, Tensor *x, Tensor *gamma, Tensor *beta, float eps);

/* ---- tensor op (ops/add_norm_op.c) ----
 * y = LayerNorm(x + dropout(z; p)) with gamma, beta, eps as op_layernorm:
 * the end of a BERT sub-layer (x the residual, z the sub-layer's output, of
 * one shape). The three recorded ops, or on CUDA with CTRAIN_ADD_NORM=fused
 * one node over add_norm_*_cuda: the same values, draws and gradients.
 * x and z are not consumed. */
Tensor *op_add_norm(Ctx *c, Tensor *x, Tensor *z, Tensor *gamma, Tensor *beta, float p,
                    float eps);
/* op_add_norm whose y is read next by an FP8 Linear in recipe layer `layer`
 * of r (ops/linear_fp8.h, "Codes made by the producer"): on CUDA, where the
 * fused kernel's codes form takes the rows (add_norm_forward_codes_cuda),
 * y's E4M3 codes at that layer's x scale are made in the same pass, its amax
 * recorded as the Linear's cast would, and the codes marked on y
 * (Tensor.fwd_codes) for that Linear to take instead of casting y. The same
 * y, gradients and codes as op_add_norm then the Linear's own cast.
 * Elsewhere op_add_norm. */
struct Fp8Recipe;
Tensor *op_add_norm_fp8_codes(Ctx *c, Tensor *x, Tensor *z, Tensor *gamma, Tensor *beta,
                              float p, float eps, struct Fp8Recipe *r, int layer);
/* How many add_norm forwards so far made y's codes (op_add_norm_fp8_codes): for tests. */
long add_norm_codes_runs(void);
/* How many add_norm backwards so far handed z's gradient over as FP8 codes
 * (the FP8 Linear's hand-off, add_norm_backward_codes_cuda): for tests. */
long add_norm_dz_codes_runs(void);

#ifdef __cplusplus
}
#endif
#endif
