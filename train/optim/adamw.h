/* adamw.h — AdamW over the parameter buffer (torch.optim.AdamW semantics,
 * math in ops/adam.h).
 *
 * The moments m and v are one block each, laid out like the parameters. A
 * step is one small launch that counts it (skipped steps do not count) and
 * one update launch per weight-decay group: [0, n_decay) with weight_decay,
 * [n_decay, total) with 0. The step count, bias corrections and learning
 * rate live in device memory, so a captured CUDA graph advances them itself.
 *
 * skip: the grad scaler's found_inf (scaler_found_inf()) or NULL.
 * p_lowp: NULL, or the f16/bf16 working copy of all ps->total weights (same
 * layout) that the step refreshes in the same pass.
 */
#ifndef CTRAIN_TRAIN_ADAMW_H
#define CTRAIN_TRAIN_ADAMW_H

#include <stdint.h>
#include "engine/ctx.h"
#include "engine/params.h"
#include "ops/adam.h"

struct Fp8Recipe;

typedef struct AdamW {
    double beta1, beta2, eps, weight_decay;
    float *m, *v;            /* ps->total f32 each, on the params' device */
    AdamStepState *st;       /* step count and bias corrections, on the device */
    float *lr_dev;           /* the learning rate adamw_step writes, on the device */
    /* --precision fp8 (adamw_write_fp8_codes): the step writes the FP8 layers'
     * weight codes too, one launch over a job table (ops/adamw_fp8.h) */
    struct Fp8Recipe *fp8;
    struct AdamwJob *jobs;   /* the table, on the device */
    int njobs, jobs_version; /* jobs_version: the recipe's codes_version it was built at */
    int64_t nblocks;
} AdamW;

/* torch defaults: betas (0.9, 0.999), eps 1e-8, weight_decay 0.01. */
void adamw_init(AdamW *o, ParamSet *ps, double beta1, double beta2, double eps,
                double weight_decay);
/* One step at learning rate lr (queued as a value: inside a CUDA graph the
 * captured lr is replayed; use adamw_step_lr with a device lr there). */
void adamw_step(AdamW *o, ParamSet *ps, float lr, const int *skip, void *p_lowp, DType lowp_t);
/* One step reading the learning rate from lr_dev (device memory; host memory
 * on CPU contexts) when it runs. */
void adamw_step_lr(AdamW *o, ParamSet *ps, const float *lr_dev, const int *skip, void *p_lowp,
                   DType lowp_t);
/* The overlapped update (optimizer.h: optimizer_split_*): the step's begin
 * alone (count and bias corrections, queued on the compute stream), then
 * updates of element ranges [begin, end), each inside one weight-decay
 * group, reading the learning rate from o->lr_dev and refreshing ps->lowp
 * when AMP keeps one, queued on `stream` (a cudaStream_t; ignored on the
 * CPU), with no skip flag. */
void adamw_step_begin(AdamW *o, ParamSet *ps, const int *skip);
void adamw_step_range(AdamW *o, ParamSet *ps, size_t begin, size_t end, void *stream);
/* From now on each whole step (not the overlapped update's ranges) also
 * writes the codes of r's FP8 weights (ops/fp8_recipe.h, Fp8WeightCodes)
 * and their amaxes, after the recipe's own step: the same codes the next
 * forward would cast, which then casts none. CUDA only; a weight whose
 * shape or place the kernel cannot take is left to the forward's cast. */
void adamw_write_fp8_codes(AdamW *o, struct Fp8Recipe *r);
/* Steps taken so far (skipped ones do not count); synchronizes. */
int64_t adamw_steps(const AdamW *o, ParamSet *ps);
/* Set the step count (and the bias corrections it implies): a resumed run. */
void adamw_set_steps(AdamW *o, ParamSet *ps, int64_t step);
void adamw_free(AdamW *o, ParamSet *ps);

#endif
