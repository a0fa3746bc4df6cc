/* precision.c — the precision names and what each mode sets in the context. */
#include "precision.h"

#include <string.h>

static const char *const NAMES[PREC_COUNT] = {"fp32", "tf32", "fp16", "bf16", "fp8"};

int precision_parse(const char *s)
{
    if (!s) return -1;
    for (int i = 0; i < PREC_COUNT; i++)
        if (!strcmp(s, NAMES[i])) return i;
    return -1;
}

const char *precision_name(Precision p)
{
    return (unsigned)p < PREC_COUNT ? NAMES[p] : "?";
}

DType precision_autocast(Precision p)
{
    return p == PREC_FP16 ? DT_F16 : p == PREC_BF16 || p == PREC_FP8 ? DT_BF16 : DT_F32;
}

void precision_apply(Ctx *c, Precision p)
{
    c->allow_tf32 = p == PREC_TF32;
    c->autocast = precision_autocast(p);
    c->fp8 = p == PREC_FP8;
}
