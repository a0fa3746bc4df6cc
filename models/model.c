/* model.c — the model kinds' names, and the parts of a model that do not
 * depend on its kind. */
#include "model.h"

#include <stdio.h>
#include <string.h>
#include "ops/linear_fp8.h"
#include "ops/ops.h"

static const struct { const char *name; int depth; } KINDS[MODEL_KIND_COUNT] = {
    [MODEL_MLP] = {"mlp", 0},
    [MODEL_RESNET18] = {"resnet18", 18}, [MODEL_RESNET34] = {"resnet34", 34},
    [MODEL_RESNET50] = {"resnet50", 50}, [MODEL_RESNET101] = {"resnet101", 101},
    [MODEL_RESNET152] = {"resnet152", 152},
    [MODEL_BERT_TINY] = {"bert-tiny", 0}, [MODEL_BERT_MINI] = {"bert-mini", 0},
    [MODEL_BERT_SMALL] = {"bert-small", 0}, [MODEL_BERT_MEDIUM] = {"bert-medium", 0},
    [MODEL_BERT_BASE] = {"bert-base", 0}, [MODEL_BERT_LARGE] = {"bert-large", 0},
};

int model_kind_parse(const char *name)
{
    if (!name) return -1;
    for (int k = 0; k < MODEL_KIND_COUNT; k++)
        if (!strcmp(name, KINDS[k].name)) return k;
    return -1;
}

const char *model_kind_name(ModelKind k)
{
    return (unsigned)k < MODEL_KIND_COUNT ? KINDS[k].name : "?";
}

const char *model_kind_list(void)
{
    static char list[256];   /* the same text every time; written once */
    if (!list[0]) {
        size_t n = 0;
        for (int k = 0; k < MODEL_KIND_COUNT; k++)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", k ? ", " : "", KINDS[k].name);
    }
    return list;
}

int model_kind_is_resnet(ModelKind k) { return k >= MODEL_RESNET18 && k <= MODEL_RESNET152; }
int model_kind_is_bert(ModelKind k) { return k >= MODEL_BERT_TINY && k <= MODEL_BERT_LARGE; }
int model_kind_resnet_depth(ModelKind k)
{
    return (unsigned)k < MODEL_KIND_COUNT ? KINDS[k].depth : 0;
}

void model_free(Model *m)
{
    if (m->free_impl) m->free_impl(m);
    fp8_recipe_free(m->fp8);
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
