/* fp8_recipe.h — the delayed-scaling state of a model's FP8 Linear layers
 * (ops/linear_fp8.h): per scaled tensor an amax history, this step's amax,
 * the scale and its inverse, all in device memory so a captured step
 * updates them without the host (the recipe's math: ops/fp8.h).
 *
 * Slots: layer k (0 .. layers-1) has x in forward slot 2k, w in forward slot
 * 2k + 1 (group 0, E4M3), dy in backward slot k (group 1, E5M2). A group's
 * block (n tensors, history length len), f32:
 *   [0, n len)          the amax histories, tensor i at i len
 *   [n len, n len + n)  this step's amaxes
 *   then n scales, padding up to a multiple of 4 words, then the n
 *   scale_invs FP8_SINV_STRIDE (4) words apart: cuBLASLt's FP8 GEMMs take
 *   a scale pointer only when it is 16-byte aligned (any other one: "not
 *   supported" at the launch, though the heuristic offered the algorithm;
 *   seen with cuBLASLt 13.1 on an H200), and the GEMMs read scale_inv.
 */
#ifndef CTRAIN_OPS_FP8_RECIPE_H
#define CTRAIN_OPS_FP8_RECIPE_H

#include <stddef.h>
#include "engine/ctx.h"
#include "engine/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct Fp8Recipe {
    int layers;            /* Linear layers with a slot */
    int len;               /* amax history length */
    int margin;            /* powers of two of headroom in the scale */
    /* group 0: forward (2 x layers tensors, E4M3); group 1: backward (layers, E5M2).
     * Each group one f32 tensor: [history (n x len) | amax (n) | scale (n) | pad |
     * scale_inv (n, 4 words apart)] */
    Tensor *block[2];
    int n[2];
    Tensor *overflow;      /* i32 [3 x layers]: 1 where a step's amax was not finite */
    Tensor *step;          /* i64 [1]: steps recorded so far (the history slot) */
    Tensor *discard;       /* f32 [1]: where a forward without autograd (evaluation)
                              puts its amax, so it does not steer training's scales */
    int calibrating;       /* 1: forwards without autograd record their amaxes too
                              (ctrain eval's calibration pass over weights-only files) */
    /* the weights' codes the optimizer writes (fp8_codes_enable; NULL: each
     * forward casts its weight) */
    struct Fp8WeightCodes *codes;   /* [layers] */
    int codes_ready;       /* 1: every layer with `fused` set holds its weight's codes at
                              the weight's current value and scale */
    int codes_version;     /* bumped whenever a layer binds a weight */
} Fp8Recipe;

/* One layer's weight codes, kept between steps: the E4M3 codes of its f32
 * weight w [rows, cols] both ways, at the weight's scale slot. The forward
 * binds them to the weight it is given (fp8_codes_bind); the optimizer
 * rewrites them after each update (train/optim/adamw.c, ops/adamw_fp8.h),
 * so a forward while codes_ready reads them without a cast. */
typedef struct Fp8WeightCodes {
    const void *w;         /* the weight's data; NULL: nothing bound */
    int rows, cols;
    Tensor *q, *qt;        /* u8 [rows, cols], [cols, rows] */
    int fused;             /* 1: the optimizer's update writes them */
    int used;              /* a training forward read them since the last update */
    int tabled;            /* `used` when the optimizer's table was built */
} Fp8WeightCodes;

/* Keep the weights' codes between steps (the trainer, where its optimizer
 * writes them: CUDA, AdamW, the update after backward). */
void fp8_codes_enable(Fp8Recipe *r);
/* Layer `layer`'s codes bound to w (bound now if they were not, or were
 * another tensor's: codes_ready drops and codes_version moves); NULL when
 * the codes are not kept, or are another tensor's and cannot be rebound
 * here (a forward without autograd, a capture, captured graphs alive: the
 * caller casts into buffers of its own). A training forward marks them
 * used. */
Fp8WeightCodes *fp8_codes_bind(Ctx *c, Fp8Recipe *r, int layer, const Tensor *w);
/* The weights or the scales changed outside the optimizer (a checkpoint
 * loaded, a run resumed): the next forwards cast again. */
void fp8_codes_invalidate(Fp8Recipe *r);

/* A recipe for `layers` Linear layers on c's device: histories zero, scales 1. */
Fp8Recipe *fp8_recipe_new(Ctx *c, int layers, int history_len, int margin);
void fp8_recipe_free(Fp8Recipe *r);

/* Once a step, after backward and before the optimizer's update (inside the
 * captured update graph too): the next scales from the histories with this
 * step's amaxes, amaxes zeroed, step += 1. */
void fp8_recipe_step(Ctx *c, Fp8Recipe *r);

/* One tensor's state, read to the host (tests, --trace): group 0 forward,
 * 1 backward; slot as above. */
typedef struct Fp8TensorState {
    float amax, scale, scale_inv;
    int overflow;
} Fp8TensorState;
void fp8_recipe_read(const Fp8Recipe *r, int group, int slot, Fp8TensorState *s);
/* How many tensors have overflowed (a step whose amax was not finite) so far. */
int fp8_recipe_overflows(const Fp8Recipe *r);

/* Whether this device can run FP8 GEMMs (sm_89 or later); the CPU always
 * can (the reference). */
int fp8_supported(const Ctx *c);

/* ---- the block's layout, for the FP8 ops ---- */

static inline float *fp8_amax_of(const Fp8Recipe *r, float *block, int g)
{
    return block + (size_t)r->n[g] * (size_t)r->len;
}

static inline float *fp8_scale_of(const Fp8Recipe *r, float *block, int g)
{
    return fp8_amax_of(r, block, g) + r->n[g];
}

#define FP8_SINV_STRIDE 4   /* words between two scale_invs: 16 bytes (the top of the file) */

/* Where the scale_invs start: after the scales, at a multiple of 4 words
 * (the block's base is the allocator's, 256-byte aligned). */
static inline size_t fp8_sinv_offset(int n, int len)
{
    const size_t end = (size_t)n * ((size_t)len + 2);
    return (end + FP8_SINV_STRIDE - 1) / FP8_SINV_STRIDE * FP8_SINV_STRIDE;
}

/* The words of a group's block. */
static inline size_t fp8_block_words(int n, int len)
{
    return fp8_sinv_offset(n, len) + (size_t)n * FP8_SINV_STRIDE;
}

/* Tensor slot's scale_inv (16-byte aligned on the device). */
static inline float *fp8_sinv_of(const Fp8Recipe *r, float *block, int g, int slot)
{
    return block + fp8_sinv_offset(r->n[g], r->len) + (size_t)slot * FP8_SINV_STRIDE;
}

/* Where a cast records its amax: the slot's, or the discard word when
 * autograd is off (evaluation) and the recipe is not calibrating. */
static inline float *fp8_amax_slot(const Ctx *c, const Fp8Recipe *r, int g, int slot)
{
    if (!c->grad_enabled && !r->calibrating) return (float *)r->discard->data;
    return fp8_amax_of(r, (float *)r->block[g]->data, g) + slot;
}

#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>
/* *step += 1 on the stream (fp8_recipe.cu). */
void fp8_step_advance_cuda(long long *step, cudaStream_t s);
#endif

#ifdef __cplusplus
}
#endif
#endif
