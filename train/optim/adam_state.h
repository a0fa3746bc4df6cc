/* adam_state.h — what AdamW and LAMB keep alike, in the params' device
 * memory (host memory on CPU contexts): the moments m and v (ps->total f32
 * each, laid out like the parameters), the step state (count and bias
 * corrections, ops/adam.h) and the learning-rate word a step reads; and
 * the checks of their hyperparameters. AdamW (adamw.h) and LAMB (lamb.h)
 * keep these as their own fields m, v, st, lr_dev; the functions here take
 * them one by one so both structs stay flat.
 */
#ifndef CTRAIN_TRAIN_ADAM_STATE_H
#define CTRAIN_TRAIN_ADAM_STATE_H

#include <stdint.h>
#include "engine/params.h"
#include "ops/adam.h"

/* Fatal with a hint unless 0 <= beta < 1 and eps, weight decay >= 0;
 * who: "AdamW" or "LAMB". */
void adam_state_check(const char *who, double beta1, double beta2, double eps,
                      double weight_decay);
/* Allocate m, v, the step state and the learning-rate word, all zero. */
void adam_state_alloc(ParamSet *ps, float **m, float **v, AdamStepState **st, float **lr_dev);
void adam_state_free(ParamSet *ps, float *m, float *v, AdamStepState *st, float *lr_dev);
/* Steps taken so far (skipped ones do not count); synchronizes. */
int64_t adam_state_steps(ParamSet *ps, const AdamStepState *st);
/* Set the count to `step` and the bias corrections it implies (a resumed run). */
void adam_state_set_steps(ParamSet *ps, AdamStepState *st, int64_t step, double beta1,
                          double beta2, int bias_correction);

#endif
