/* fuzz_model.h — the small model of fuzz_checkpoint.c and its seed files
 * (make_corpus.c): a conv weight kept as OHWI (permuted on load), f32
 * parameters, batch-norm buffers (f32 running stats, an i64 scalar
 * num_batches_tracked), and the extra tensors of a training checkpoint as
 * train/loop/step.c names them (AdamW's two state blocks and step, the loss
 * scaler, the position and the RNG offset).
 */
#ifndef CTRAIN_TESTS_FUZZ_MODEL_H
#define CTRAIN_TESTS_FUZZ_MODEL_H

#include <string.h>
#include "engine/params.h"
#include "train/io/checkpoint.h"

#define FUZZ_MODEL_P 105   /* 4*3*3*2 + 4 + 4 + 5*4 + 5 */

static inline void fuzz_model_build(ParamSet *ps, Ctx *c)
{
    params_init(ps);
    params_add_layout(ps, "conv1.weight", 4, (int64_t[]){4, 3, 3, 2}, LAYOUT_OHWI, INIT_NORMAL,
                      0.5f, 1);
    params_add(ps, "bn1.weight", 1, (int64_t[]){4}, INIT_ONE, 0.0f, 0);
    params_add(ps, "bn1.bias", 1, (int64_t[]){4}, INIT_ZERO, 0.0f, 0);
    params_add(ps, "fc.weight", 2, (int64_t[]){5, 4}, INIT_UNIFORM, 0.3f, 1);
    params_add(ps, "fc.bias", 1, (int64_t[]){5}, INIT_UNIFORM, 0.3f, 0);
    params_add_buffer(ps, "bn1.running_mean", DT_F32, 1, (int64_t[]){4}, INIT_ZERO);
    params_add_buffer(ps, "bn1.running_var", DT_F32, 1, (int64_t[]){4}, INIT_ONE);
    params_add_buffer(ps, "bn1.num_batches_tracked", DT_I64, 0, NULL, INIT_ZERO);
    params_alloc(ps, c, 7);
}

/* A training checkpoint's tensors beside the parameters. */
typedef struct FuzzTrainState {
    CkptTensor t[8];
    int n;
    float blocks[2][FUZZ_MODEL_P];
    int64_t opt_step, counts[2], step, micro, rng;
    float scale;
} FuzzTrainState;

static inline void fuzz_state_init(FuzzTrainState *s)
{
    memset(s, 0, sizeof *s);
    const struct { const char *name; DType dt; int64_t n; void *data; } t[8] = {
        {"__ctrain.optimizer.0", DT_F32, FUZZ_MODEL_P, s->blocks[0]},
        {"__ctrain.optimizer.1", DT_F32, FUZZ_MODEL_P, s->blocks[1]},
        {"__ctrain.optimizer.step", DT_I64, 1, &s->opt_step},
        {"__ctrain.scaler", DT_F32, 1, &s->scale},
        {"__ctrain.scaler.counts", DT_I64, 2, s->counts},
        {"__ctrain.step", DT_I64, 1, &s->step},
        {"__ctrain.micro", DT_I64, 1, &s->micro},
        {"__ctrain.rng_offset", DT_I64, 1, &s->rng},
    };
    for (int i = 0; i < 8; i++)
        s->t[s->n++] = (CkptTensor){.name = t[i].name, .dtype = t[i].dt, .ndim = 1,
                                    .shape = {t[i].n}, .data = t[i].data};
}

#endif
