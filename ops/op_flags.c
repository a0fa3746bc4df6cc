/* op_flags.c — the messages of the ops' device error counters (the table is
 * in op_flags.h). Each report runs in ctx_check_flags with the count a
 * kernel left in its slot, and stops the program with what to do. */
#include "op_flags.h"

#ifdef CTRAIN_CUDA
#include "engine/error.h"

static void xent_target_report(int32_t n)
{
    ct_fatal_hint("labels must lie in [0, classes) or equal the ignore index",
                  "%d target%s out of range in the cross-entropy loss", n,
                  n == 1 ? " was" : "s were");
}

static void embedding_id_report(int32_t n)
{
    ct_fatal_hint("token ids must lie in [0, vocab): check that the tokenizer's vocabulary "
                  "matches the model's vocab size",
                  "%d token id%s out of range in an embedding lookup", n,
                  n == 1 ? " was" : "s were");
}

int32_t *op_flag(Ctx *c, OpFlag f)
{
    switch (f) {
    case OP_FLAG_XENT_TARGET: return ctx_flag(c, (int)f, xent_target_report);
    case OP_FLAG_EMBEDDING_ID: return ctx_flag(c, (int)f, embedding_id_report);
    }
    ct_fatal("op_flag: unknown device error counter %d", (int)f);
}
#else
typedef int ct_op_flags_unused_; /* ISO C forbids an empty translation unit */
#endif
