/* optimizer.h — one front for SGD, AdamW and LAMB, as the trainer uses them.
 * Every optimizer keeps fp32 state laid out like the parameter buffer and
 * takes the grad scaler's found_inf flag (or NULL) as its skip flag. */
#ifndef CTRAIN_TRAIN_OPTIMIZER_H
#define CTRAIN_TRAIN_OPTIMIZER_H

#include "engine/params.h"
#include "adamw.h"
#include "lamb.h"
#include "sgd.h"

typedef enum { OPT_SGD = 0, OPT_ADAMW, OPT_LAMB } OptimKind;

/* What the run decides about the optimizer (--optim, --momentum, --wd,
 * --nesterov); the learning rate comes from the schedule at each step. */
typedef struct OptimConfig {
    OptimKind kind;
    float momentum;          /* SGD */
    float weight_decay;
    int nesterov;            /* SGD */
} OptimConfig;

/* "sgd", "adamw", "lamb" -> OptimKind; -1 otherwise. */
int optim_parse(const char *s);
const char *optim_name(OptimKind k);

typedef struct Optimizer {
    OptimKind kind;
    Sgd sgd;
    AdamW adamw;
    Lamb lamb;
} Optimizer;

void optimizer_init(Optimizer *o, ParamSet *ps, const OptimConfig *cfg);
void optimizer_step(Optimizer *o, ParamSet *ps, float lr, const int *skip);
void optimizer_free(Optimizer *o, ParamSet *ps);
/* The optimizer's learning-rate word (device memory on CUDA) and a step that
 * takes the rate from it as it stands: how a CUDA graph feeds the schedule
 * (train/loop/step_graph.h). */
float *optimizer_lr_dev(Optimizer *o);
void optimizer_step_lr(Optimizer *o, ParamSet *ps, const int *skip);

/* The overlapped update (train/loop/overlap.h) splits a step into a once-per-step
 * part, queued on the compute stream before backward (AdamW's step count and
 * bias corrections; the learning rate must be in optimizer_lr_dev already),
 * and updates of element ranges [begin, end), each inside one weight-decay
 * group, queued on `stream` (a cudaStream_t; ignored on the CPU) once the
 * range's gradients are final. No skip flag: the fp16 scaler's check needs
 * every gradient first. The ranges of one step, together covering the
 * buffer once, give the same values as optimizer_step_lr. SGD and AdamW
 * only: LAMB's trust ratios need whole-tensor norms. */
int optimizer_can_split(const Optimizer *o);
void optimizer_split_begin(Optimizer *o, ParamSet *ps);
void optimizer_split_range(Optimizer *o, ParamSet *ps, size_t begin, size_t end, void *stream);

/* For checkpoints. The state blocks (ps->total f32 each, on the params'
 * device) in a fixed order: SGD momentum; AdamW / LAMB m, v. Returns how
 * many (at most OPTIM_MAX_BLOCKS). */
enum { OPTIM_MAX_BLOCKS = 2 };
int optimizer_state(const Optimizer *o, float **blocks);
/* The device step counter (AdamW, LAMB): optimizer_steps returns it
 * (synchronizes), -1 for SGD, which keeps none; optimizer_set_steps writes it
 * (and the bias corrections it implies). */
int64_t optimizer_steps(const Optimizer *o, ParamSet *ps);
void optimizer_set_steps(Optimizer *o, ParamSet *ps, int64_t step);

#endif
