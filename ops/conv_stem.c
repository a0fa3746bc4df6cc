/* conv_stem.c — when ResNet's stem takes ctrain's own kernels, and their
 * host side (ops/conv_stem.h has the math; the kernels: ops/conv_stem.cu).
 */
#include "conv_stem.h"

#include "engine/settings.h"

int conv_stem_applies(const Ctx *c, const Conv2dShape *s, DType dt)
{
    const int mode = setting_choice(SET_CONV_STEM);   /* cudnn|own|all */
    if (c->device != DEV_CUDA || mode == 0) return 0;
    if (dt != DT_BF16 && !(dt == DT_F32 && c->allow_tf32) && !(dt == DT_F16 && mode == 2))
        return 0;
    return s->C == 3 && s->K == 64 && s->R == 7 && s->S == 7 && s->stride_h == 2 &&
           s->stride_w == 2 && s->pad_h == 3 && s->pad_w == 3 && s->dil_h == 1 &&
           s->dil_w == 1 && s->Q % 16 == 0 && s->Q <= CONV_STEM_MAX_Q;
}

#ifdef CTRAIN_CUDA
void conv_stem_forward_cuda(Ctx *c, void *y, const void *x, const void *w, DType dt,
                            const Conv2dShape *s)
{
    conv_stem_forward_launch(y, x, w, dt, s->N, s->H, s->W, s->P, s->Q, c->stream);
}

void conv_stem_backward_filter_cuda(Ctx *c, float *dw, const void *dy, const void *x, DType dt,
                                    const Conv2dShape *s, int accum)
{
    /* the blocks' partials in the shared workspace (one stream: nothing else uses it
     * meanwhile), grown in the eager steps before a capture as cuDNN's plans grow it */
    float *part = (float *)ctx_workspace(c, conv_stem_part_floats() * sizeof(float));
    conv_stem_wgrad_launch(dw, part, dy, x, dt, s->N, s->H, s->W, s->P, s->Q, accum, c->stream);
}
#endif
