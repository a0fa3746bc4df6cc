/* precision.h — the training precision, decided once (--precision) and
 * passed down as this enum.
 *
 *   fp32  f32 storage, f32 math (TF32 tensor cores off)
 *   tf32  f32 storage, matmuls and convolutions in TF32 (10-bit mantissa)
 *   fp16  autocast: matmul / conv / attention in f16 with f32 accumulation,
 *         f32 master weights, the dynamic grad scaler (grad_scaler.h)
 *   bf16  autocast as fp16 in bf16 (8-bit mantissa, f32's range: no scaler)
 *   fp8   bf16, and the Linear layers a model marks FP8-capable (BERT's
 *         encoder) run their GEMMs on E4M3 / E5M2 operands with delayed
 *         per-tensor scaling (ops/linear_fp8.h); sm_89 or later
 *
 * The context has the two knobs these modes set (ctx->autocast,
 * ctx->allow_tf32); precision_apply is the one place that turns a mode into
 * them. The enum lives in train/loop/, not in engine/: the engine needs the
 * knobs only, and what a name like "bf16" means as a training mode is the
 * trainer's decision; the CLI, the bench and the peak table (above the loop)
 * read it from here.
 */
#ifndef CTRAIN_TRAIN_PRECISION_H
#define CTRAIN_TRAIN_PRECISION_H

#include "engine/ctx.h"
#include "engine/dtype.h"

typedef enum { PREC_FP32 = 0, PREC_TF32, PREC_FP16, PREC_BF16, PREC_FP8, PREC_COUNT } Precision;

/* For messages: "'x' is not " PRECISION_CHOICES. */
#define PRECISION_CHOICES "fp32, tf32, fp16, bf16 or fp8"

/* "fp32", "tf32", "fp16", "bf16" (exactly: lower case) -> Precision; -1 otherwise. */
int precision_parse(const char *s);
/* The name precision_parse reads ("?" out of range). */
const char *precision_name(Precision p);
/* The autocast dtype: DT_F16, DT_BF16, or DT_F32 (off) for fp32 and tf32. */
DType precision_autocast(Precision p);
/* The context for p: its autocast dtype, whether f32 math may use TF32, and
 * whether FP8-capable Linear layers run in FP8. */
void precision_apply(Ctx *c, Precision p);

#endif
