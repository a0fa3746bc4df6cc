/* model.c — the parts of a model that do not depend on its kind. */
#include "model.h"

#include <string.h>
#include "ops/ops.h"

void model_free(Model *m)
{
    if (m->free_impl) m->free_impl(m);
    params_free(&m->params);
    memset(m, 0, sizeof *m);
}

Tensor *model_classifier_loss(Ctx *c, Model *m, Tensor *const *in, float label_smoothing,
                              Tensor **logits)
{
    Tensor *z = m->forward(c, m, in[0]);
    Tensor *loss = op_cross_entropy(c, z, in[1], -100, label_smoothing);
    if (logits) *logits = z;
    else tensor_release(z);
    return loss;
}

Tensor *model_loss(Ctx *c, Model *m, Tensor *const *in, float label_smoothing, Tensor **logits)
{
    return m->loss ? m->loss(c, m, in, label_smoothing, logits)
                   : model_classifier_loss(c, m, in, label_smoothing, logits);
}
