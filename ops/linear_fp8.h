/* linear_fp8.h — a Linear layer whose three GEMMs read FP8 operands, with
 * per-tensor delayed scaling (ops/fp8.h has the formats and the recipe).
 *
 * Forward and backward side by side, for x [R, In], w [Out, In], bias [Out]:
 *   forward   xq = e4m3(x * s_x)      wq = e4m3(w * s_w)
 *             y  = (xq . wq^T) / (s_x s_w) + bias                  [R, Out]
 *   backward  gq = e5m2(dy * s_g)
 *             dx  = (gq . wq) / (s_g s_w)                          [R, In]
 *             dw += (gq^T . xq) / (s_g s_x)       (f32, the gradient buffer)
 *             db += sum_r dy[r]                   (dy itself: no rounding)
 * i.e. the quantization is a straight-through estimator: the gradient of
 * round(x) is taken to be 1, and the backward GEMMs read the same FP8 values
 * the forward did. E4M3 (3 mantissa bits, range 2^-9..448) for weights and
 * activations; E5M2 (2 mantissa bits, range 2^-16..57344) for gradients,
 * whose magnitudes spread wider. Every product is accumulated in f32.
 *
 * The scales are delayed (Transformer Engine's recipe, ops/fp8.h): a step
 * casts with the scales the previous steps' amaxes gave, and records its own
 * amax (max |x| over every micro-batch of the step) in the same pass as the
 * cast; after backward, fp8_recipe_step turns each tensor's amax history
 * into its next scale, zeroes the amaxes and advances the history slot
 * (ops/fp8_recipe.h: the slots of layer k, the state's layout). In data
 * parallel the trainer first takes each amax's maximum over the ranks, so
 * every rank casts with the same scales (and a checkpoint, rank 0's, resumes
 * them all). With AdamW the optimizer then writes each weight's codes at
 * its new scale, and records the weight's amax, so the next forwards need
 * not cast it (ops/adamw_fp8.h; the same codes). A forward with autograd
 * off (evaluation) casts with the same scales but
 * leaves the amaxes alone. All of it lives in device memory, so a captured
 * CUDA graph replays it and no step waits for the host. The first step
 * casts with scale 1.
 *
 * The bias is added in f32 before y's one rounding: on the CPU, and on CUDA
 * in the GEMM's epilogue (CTRAIN_LINEAR_EPILOGUE, on by default). Where the
 * epilogue is off or has no algorithm, or y is f32, CUDA rounds x w^T to
 * y's type first and adds the bias in a separate pass: one rounding more.
 * Under autocast CUDA reads the bias rounded to y's type either way (its
 * bf16 working copy), the CPU the f32 bias.
 *
 * CPU: the reference, on the same FP8 values (ops/fp8.c's casts, f32 GEMMs of
 * the dequantized operands): what the GPU's FP8 GEMM computes up to the
 * order of its f32 sums. CUDA: the casts of ops/fp8.cu and cuBLASLt's FP8
 * GEMM (ops/fp8_gemm.h), on sm_89 and later.
 *
 * The gradient's codes (CUDA, CTRAIN_FP8_DZ_CODES): the backward reads dy
 * only to cast it (gq both ways) and sum its columns (db). So the forward
 * marks y with that cast (Tensor.grad_cast: the gradient slot's scale and
 * amax, E5M2), and an op that makes y's
 * gradient may write gq instead of dy: BERT's add_norm backward
 * (ops/layernorm.h add_norm_backward_codes_cuda), when nothing else adds to
 * y's gradient, hands over gq as y's gradient (U8) with dy's column
 * partials beside it (grad_aux); this backward then only transposes gq and
 * adds the partials into db. The same codes and amax as its own cast (each
 * from dy's value rounded to dy's type); db the same sums in another fixed
 * order. dy, R x Out in bf16, is never written nor read back.
 *
 * Codes made by the producer (CUDA, CTRAIN_FP8_NORM_CODES): in the forward
 * the other way round. The op that makes x may also write x's E4M3 codes, both
 * ways, at the scale of the x slot of the Linear that reads x next, raising
 * that slot's amax as this op's cast would, and mark x with them
 * (Tensor.fwd_codes): BERT's add_norm (op_add_norm_fp8_codes), whose output
 * the feed-forward block and the next layer's q, k, v read. The Linear of
 * that slot takes the codes over instead of casting x (one read of x fewer);
 * the same codes and amax, so the same bits.
 */
#ifndef CTRAIN_OPS_LINEAR_FP8_H
#define CTRAIN_OPS_LINEAR_FP8_H

#include "engine/ctx.h"
#include "engine/tensor.h"
#include "fp8_recipe.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y = x w^T + bias through FP8 GEMMs (the math above), recorded for
 * backward; x f32, f16 or bf16 [.., In]; y in x's autocast type
 * (ops/autocast.h), as op_linear's. */
Tensor *op_linear_fp8(Ctx *c, Tensor *x, Tensor *w, Tensor *bias, Fp8Recipe *r, int layer);

/* The FP8 codes of an input that several Linear layers read (BERT's query,
 * key and value all read the layer's input): the first
 * op_linear_fp8_shared call with it casts it and keeps the codes here, the
 * later calls with the same tensor take them (no cast, the same scale: the
 * x slot of the first call's recipe layer; the later layers' x slots are
 * never recorded and stay at scale 1). Their values are what separate calls
 * would give: the three x slots would see the same amaxes, so the same
 * scales. Release it (fp8_shared_x_release) once the last reader ran: it
 * holds the input and its codes; it serves one recipe within one step (a
 * recipe step between the calls would change the scale: release it first).
 * Zero-initialize before first use. An input that autocast must cast first
 * is a new tensor at each call, so it is cast each time (BERT's layer input
 * already has the autocast type). */
typedef struct Fp8SharedX {
    Tensor *x;          /* the input whose codes these are (held); NULL: empty */
    Tensor *xq, *xqT;   /* its codes, row-major and transposed (xqT NULL on the CPU) */
    const Fp8Recipe *r; /* the recipe whose slot scaled them */
    int layer;          /* that recipe's layer whose x slot scaled them */
} Fp8SharedX;

Tensor *op_linear_fp8_shared(Ctx *c, Tensor *x, Tensor *w, Tensor *bias, Fp8Recipe *r,
                             int layer, Fp8SharedX *share);
void fp8_shared_x_release(Fp8SharedX *share);

/* How many FP8 Linear calls so far took codes their input's producer made
 * (Tensor.fwd_codes) instead of casting it: for tests. */
long linear_fp8_fwd_codes_taken(void);

/* y = GELU(h) w^T + bias, the same values as op_linear_fp8(op_gelu(h), ...)
 * (BERT's FFN output layer). On CUDA, when h is bf16 or f32 and already in
 * the type the Linear reads, one op: the FP8 cast applies GELU on the way
 * in, so GELU's output is never written (nor read back: R x In elements of
 * h's type, twice), and the backward runs GELU's derivative after the
 * dgrad GEMM (linear_fp8_cuda.c). Elsewhere, and on the CPU, the two ops. */
Tensor *op_linear_fp8_gelu(Ctx *c, Tensor *h, Tensor *w, Tensor *bias, Fp8Recipe *r, int layer);

/* y = GELU(x w1^T + b1) w2^T + b2 (BERT's feed-forward block), the same
 * values as op_linear_fp8 (recipe layer l1) then op_linear_fp8_gelu (l2).
 * On CUDA, with both biases and x (after autocast) bf16 or f32, one node:
 * the forward is those two ops' kernels; the backward casts the first
 * Linear's gradient dh = dg GELU'(h) straight from dg = dy w2 with GELU's
 * backward applied in the cast (fp8_cast_transpose_dgelu_colsum_cuda), so dh
 * is never written nor read back (R x Hd elements, twice). Elsewhere, and
 * on the CPU, the two ops. */
Tensor *op_ffn_fp8(Ctx *c, Tensor *x, Tensor *w1, Tensor *b1, Tensor *w2, Tensor *b2,
                   Fp8Recipe *r, int l1, int l2);

#ifdef __cplusplus
}
#endif
#endif
