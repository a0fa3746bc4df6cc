/* adam.h — AdamW and LAMB update kernels over the contiguous f32 parameter,
 * gradient and moment buffers (CPU reference in ops/adam.c, CUDA in
 * ops/adam.cu).
 *
 * Shape letters: n parameters in one contiguous range (one weight-decay
 * group, for AdamW); S segments (one per parameter tensor, for LAMB), each
 * cut into chunks of at most LAMB_CHUNK elements.
 *
 * Step count and bias correction (both optimizers). adam_begin_* runs once
 * per optimizer step, before the update launches: unless *skip != 0 it does
 *   t = t + 1;  bc1 = 1 - beta1^t;  bc2 = 1 - beta2^t
 * into an AdamStepState that lives in device memory, so the step advances
 * inside a replayed CUDA graph and a step skipped by the grad scaler does not
 * count (torch.amp.GradScaler skips optimizer.step(), which is where torch
 * increments `step`). beta^t is computed by binary powering in double (plain
 * multiplications, one rounding each), identically on CPU and GPU.
 *
 * Hyperparameters are doubles, like torch's Python floats; the f32 factors
 * the kernels multiply by are rounded from them once, as torch rounds a
 * Python scalar: beta1, 1 - beta1, beta2, 1 - beta2, eps, and per step
 * 1 - lr * wd and lr / bc1 (formed in double from the f32 device lr).
 *
 * AdamW, torch.optim.AdamW semantics (decoupled weight decay):
 *   p = p * (1 - lr * wd)
 *   m = beta1 * m + (1 - beta1) * g
 *   v = beta2 * v + (1 - beta2) * g^2
 *   p = p - (lr / bc1) * (m / (sqrt(v) / sqrt(bc2) + eps))
 * which is p - lr * mhat / (sqrt(vhat) + eps) with mhat = m / bc1,
 * vhat = v / bc2, in torch's operation order. The no-decay group is a
 * second launch with wd = 0.
 *
 * LAMB (You et al. 2019, as NVIDIA's apex FusedLAMB computes it for BERT),
 * per parameter tensor (segment):
 *   m, v as in Adam;  mhat = m / bc1;  vhat = v / bc2   (bc = 1 without bias correction)
 *   u = mhat / (sqrt(vhat) + eps) + wd * p
 *   r = ||p|| / ||u||   (1 when either norm is 0, or when the segment is not adaptive)
 *   p = p - (lr * r) * u
 * ||p|| is the norm before the update; bc1 and bc2 are rounded to f32 (apex
 * passes them as floats), and so is r = sqrt(sum p^2) / sqrt(sum u^2). apex applies the trust ratio only to
 * tensors with weight decay unless use_nvlamb is set; OptSeg.adaptive says,
 * per segment, which one the caller chose.
 *
 * Device-side conventions (CUDA graphs, AMP): lr and the step state are read
 * from device memory; skip, when non-NULL, is the grad scaler's found_inf
 * flag: *skip != 0 makes every kernel here a no-op (nothing written, step
 * not counted); p_lowp, when non-NULL, receives the updated weights rounded
 * to nearest even in lowp_t (DT_F16 or DT_BF16), same element offsets as p.
 * Nothing here allocates or synchronizes; LAMB's scratch (2 * nchunk doubles
 * of partial sums, S trust ratios) is passed in.
 *
 * Arithmetic: f32, one rounding per operation, no fused multiply-add (the
 * GPU uses __fmul_rn / __fadd_rn / __fdiv_rn / __fsqrt_rn), so AdamW and
 * the LAMB moments match the CPU bit for bit; LAMB's norms are sums of
 * squares accumulated in double in a fixed order (deterministic), whose
 * order differs between CPU and GPU, so p after LAMB can differ from the CPU
 * in the last bit of r.
 */
#ifndef CTRAIN_OPS_ADAM_H
#define CTRAIN_OPS_ADAM_H

#include <stddef.h>
#include <stdint.h>
#include "engine/dtype.h"
#include "adam_types.h"
#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* One parameter tensor of a multi-tensor (LAMB) launch. Elements
 * [offset, offset + numel) of the buffers; chunk0 / nchunk are filled by
 * lamb_chunks_build. */
typedef struct OptSeg {
    int64_t offset;
    int64_t numel;
    float wd;          /* weight decay of this tensor (0 for biases and norms) */
    int32_t adaptive;  /* 1: trust ratio ||p|| / ||u||; 0: ratio 1 */
    int64_t chunk0;    /* first chunk of this segment in the chunk table */
    int64_t nchunk;
} OptSeg;

/* A piece of one segment, the unit of work of one CUDA block. */
typedef struct OptChunk {
    int64_t start;     /* first element, from the start of the buffers */
    int32_t len;       /* 1 .. LAMB_CHUNK */
    int32_t seg;       /* index into the segment table */
} OptChunk;

#define LAMB_CHUNK 16384

/* Fill seg[i].chunk0 / nchunk for chunks of at most chunk_len elements and,
 * when chunk is non-NULL, the chunk table; returns the number of chunks.
 * Call once with chunk = NULL to size the table. */
int64_t lamb_chunks_build(OptChunk *chunk, OptSeg *seg, int nseg, int64_t chunk_len);

/* Shared by both backends (ops/adam.c). */
AdamFactors adam_factors(double beta1, double beta2, double eps);

/* ---- CPU reference ---- */
/* beta^t by binary powering (multiplications only, as the GPU forms it), for
 * the bias corrections 1 - beta^t. */
double adam_beta_pow(double beta, int64_t t);
/* The step state after `step` steps: what adam_begin_cpu writes, and what a
 * resumed run restores. */
AdamStepState adam_step_state(int64_t step, double beta1, double beta2, int bias_correction);
void adam_begin_cpu(AdamStepState *st, double beta1, double beta2, int bias_correction,
                    const int *skip);
void adamw_step_cpu(float *p, float *m, float *v, const float *g, size_t n, float lr,
                    const AdamStepState *st, double beta1, double beta2, double eps, double wd,
                    const int *skip);
/* ratio (S floats, may be NULL) receives each segment's trust ratio. */
void lamb_step_cpu(float *p, float *m, float *v, float *ratio, const float *g,
                   const OptSeg *seg, int nseg, float lr, const AdamStepState *st,
                   double beta1, double beta2, double eps, const int *skip);

#ifdef CTRAIN_CUDA
/* ---- CUDA (every pointer is device memory; nothing syncs or allocates) ---- */
void adam_begin_cuda(AdamStepState *st, double beta1, double beta2, int bias_correction,
                     const int *skip, cudaStream_t s);
void adamw_step_cuda(float *p, float *m, float *v, void *p_lowp, DType lowp_t, const float *g,
                     size_t n, const float *lr, const AdamStepState *st, double beta1,
                     double beta2, double eps, double wd, const int *skip, cudaStream_t s);
/* seg (S) and chunk (nchunk) are the device copies of the tables built by
 * lamb_chunks_build; partial is scratch of 2 * nchunk doubles; ratio (S)
 * receives the trust ratios. Three launches: moments + per-chunk sums of
 * squares, per-segment ratio, update. */
void lamb_step_cuda(float *p, float *m, float *v, void *p_lowp, DType lowp_t, float *ratio,
                    double *partial, const float *g, const OptSeg *seg, int nseg,
                    const OptChunk *chunk, int64_t nchunk, const float *lr,
                    const AdamStepState *st, double beta1, double beta2, double eps,
                    const int *skip, cudaStream_t s);
#endif

#ifdef __cplusplus
}
#endif
#endif
