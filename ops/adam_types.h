/* adam_types.h — the per-step state and the f32 factors AdamW's and LAMB's
 * kernels read (the math: ops/adam.h), apart so that the device helpers
 * (ops/adam_device.cuh) take them without the whole interface.
 */
#ifndef CTRAIN_OPS_ADAM_TYPES_H
#define CTRAIN_OPS_ADAM_TYPES_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Lives in device memory (host memory on CPU contexts); zero-initialize.
 * The corrections stay in double: AdamW forms lr / bc1 and sqrt(bc2) in
 * double and rounds once, as torch does with Python floats. */
typedef struct AdamStepState {
    int64_t step;     /* optimizer steps taken; skipped steps do not count */
    double bc1;       /* 1 - beta1^step   (1 without bias correction) */
    double bc2;       /* 1 - beta2^step   (1 without bias correction) */
} AdamStepState;

/* The f32 factors both backends multiply by, rounded once on the host from
 * the double hyperparameters (as torch rounds a Python scalar). */
typedef struct AdamFactors {
    float b1, omb1;    /* beta1, 1 - beta1 */
    float b2, omb2;    /* beta2, 1 - beta2 */
    float eps;
} AdamFactors;

#ifdef __cplusplus
}
#endif
#endif
