/* lamb.h — LAMB over the parameter buffer (BERT pre-training's optimizer, as
 * NVIDIA's apex FusedLAMB computes it; math in ops/adam.h).
 *
 * Per parameter tensor: u = mhat / (sqrt(vhat) + eps) + wd * p, trust ratio
 * r = ||p|| / ||u|| (1 when a norm is 0), p -= lr * r * u. The per-tensor
 * norms come from a segment table (offset, numel, wd, adaptive per tensor)
 * and a chunk table built once here from the parameter registry and copied
 * to the device; a step is four launches over the whole buffer, with no
 * per-step host work, so it can be captured in a CUDA graph.
 *
 * Which tensors get a trust ratio: apex's default (use_nvlamb off) applies
 * it only to tensors with weight decay, the others (biases, LayerNorm) take
 * the plain Adam-style step (r = 1); nvlamb = 1 applies it to every tensor,
 * as the LAMB paper does. Global gradient clipping (apex's max_grad_norm) is
 * the separate scaler_clip in train/loop/grad_scaler.h.
 */
#ifndef CTRAIN_TRAIN_LAMB_H
#define CTRAIN_TRAIN_LAMB_H

#include <stdint.h>
#include "engine/ctx.h"
#include "engine/params.h"
#include "ops/adam.h"

typedef struct Lamb {
    double beta1, beta2, eps, weight_decay;
    int bias_correction;     /* 1 (apex default): mhat = m / (1 - beta1^t), ... */
    int nvlamb;              /* 1: trust ratio on every tensor; 0: only with decay */
    float *m, *v;            /* ps->total f32 each, on the params' device */
    AdamStepState *st;       /* step count and bias corrections, on the device */
    float *lr_dev;           /* the learning rate lamb_step writes, on the device */
    int nseg;                /* one segment per registered parameter */
    int64_t nchunk;
    OptSeg *seg;             /* device */
    OptChunk *chunk;         /* device */
    double *partial;         /* device scratch, 2 * nchunk */
    float *ratio;            /* device, nseg: the last step's trust ratios */
} Lamb;

/* apex FusedLAMB defaults: betas (0.9, 0.999), eps 1e-6, weight_decay 0.01,
 * bias_correction 1, nvlamb 0. */
void lamb_init(Lamb *o, ParamSet *ps, double beta1, double beta2, double eps,
               double weight_decay, int bias_correction, int nvlamb);
/* One step at learning rate lr (captured as a value in a CUDA graph: use
 * lamb_step_lr with a device lr there). skip: scaler_found_inf() or NULL;
 * p_lowp: NULL or the f16/bf16 working copy of all ps->total weights. */
void lamb_step(Lamb *o, ParamSet *ps, float lr, const int *skip, void *p_lowp, DType lowp_t);
void lamb_step_lr(Lamb *o, ParamSet *ps, const float *lr_dev, const int *skip, void *p_lowp,
                  DType lowp_t);
/* Steps taken so far (skipped ones do not count); synchronizes. */
int64_t lamb_steps(const Lamb *o, ParamSet *ps);
/* Set the step count (and the bias corrections it implies): a resumed run. */
void lamb_set_steps(Lamb *o, ParamSet *ps, int64_t step);
/* The last step's trust ratio of each parameter (nseg floats); synchronizes. */
void lamb_read_ratios(const Lamb *o, ParamSet *ps, float *ratio);
void lamb_free(Lamb *o, ParamSet *ps);

#endif
