/* sgd.h — SGD with momentum over the parameter buffer (PyTorch semantics).
 *
 * The momentum buffer is one block laid out like the parameters. A step is
 * one kernel launch per weight-decay group (the registry makes each group one
 * contiguous range). On CUDA the learning rate is read from device memory,
 * so the step launches without a host round trip.
 */
#ifndef CTRAIN_TRAIN_SGD_H
#define CTRAIN_TRAIN_SGD_H

#include "engine/ctx.h"
#include "engine/params.h"

typedef struct Sgd {
    float momentum, weight_decay;
    int nesterov;
    float *m;          /* momentum, ps->total f32 on the device */
    float *lr_dev;     /* the current learning rate (device memory on CUDA) */
} Sgd;

void sgd_init(Sgd *o, ParamSet *ps, float momentum, float weight_decay, int nesterov);
/* skip: a device flag (the grad scaler's found_inf) or NULL; CPU ignores it. */
void sgd_step(Sgd *o, ParamSet *ps, float lr, const int *skip);
/* The same with the learning rate already in o->lr_dev (a CUDA graph writes
 * it there from the device-side schedule). */
void sgd_step_lr(Sgd *o, ParamSet *ps, const int *skip);
/* The overlapped update (optimizer.h: optimizer_split_range): elements
 * [begin, end), inside one weight-decay group, queued on `stream` (a
 * cudaStream_t; ignored on the CPU), no skip flag. */
void sgd_step_range(Sgd *o, ParamSet *ps, size_t begin, size_t end, void *stream);
void sgd_free(Sgd *o, ParamSet *ps);

#endif
