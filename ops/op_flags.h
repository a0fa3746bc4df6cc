/* op_flags.h — the device error counters of the ops, and what each means.
 *
 * A kernel that meets bad input it cannot refuse without a host sync (a
 * label or a token id out of range) counts it in a device counter and
 * carries on safely (a zero row, a skipped term). The host reads the
 * counters at its next sync (ctx_check_flags, engine/ctx.h) and stops with
 * the message registered here. The engine owns the counters; which slot
 * means what, and the message a user sees, is decided in this file's
 * table, one slot per condition:
 *
 *   OP_FLAG_XENT_TARGET   cross-entropy target outside [0, classes) and not
 *                         the ignore index (ops/softmax_op.c)
 *   OP_FLAG_EMBEDDING_ID  embedding id outside [0, vocab) (ops/embedding_op.c)
 *
 * When several are set, the lowest slot is reported.
 */
#ifndef CTRAIN_OPS_OP_FLAGS_H
#define CTRAIN_OPS_OP_FLAGS_H

#include <stdint.h>
#include "engine/ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    OP_FLAG_XENT_TARGET = 0,
    OP_FLAG_EMBEDDING_ID = 1,
} OpFlag;

#ifdef CTRAIN_CUDA
/* The device counter (i32) of f on a CUDA context, its message registered
 * with the context; a kernel adds the number of bad entries it met. */
int32_t *op_flag(Ctx *c, OpFlag f);
#endif

#ifdef __cplusplus
}
#endif
#endif
