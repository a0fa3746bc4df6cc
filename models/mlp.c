/* mlp.c — the MLP model: registry of fc layers and the forward pass.
 * Backward needs no code here: each op recorded its own node. */
#include "mlp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine/error.h"
#include "ops/ops.h"

typedef struct Mlp {
    int n_layers;
    int w[MLP_MAX_LAYERS], b[MLP_MAX_LAYERS];   /* parameter indices */
} Mlp;

static Tensor *mlp_forward(Ctx *c, Model *m, Tensor *x)
{
    Mlp *mlp = (Mlp *)m->impl;
    char d[96];
    if (tensor_cols(x) != (size_t)m->in_features)
        ct_fatal("mlp: input %s has %zu features, the model expects %d",
                 tensor_desc(d, sizeof d, x), tensor_cols(x), m->in_features);
    Tensor *h = x;
    tensor_retain(h);
    for (int l = 0; l < mlp->n_layers; l++) {
        Tensor *w = m->params.p[mlp->w[l]].t, *b = m->params.p[mlp->b[l]].t;
        /* hidden layers: Linear + ReLU as one op; the last Linear alone */
        Tensor *z = l == mlp->n_layers - 1 ? op_linear(c, h, w, b) : op_linear_act(c, h, w, b, ACT_RELU);
        tensor_release(h);
        h = z;
    }
    return h;
}

static void mlp_free_impl(Model *m) { free(m->impl); m->impl = NULL; }

void mlp_create(Model *m, Ctx *c, int in, const int *hidden, int nh, int classes, uint64_t seed)
{
    CT_ASSERT(nh >= 0 && nh < MLP_MAX_LAYERS, "an MLP has at most %d hidden layers", MLP_MAX_LAYERS - 1);
    Mlp *mlp = (Mlp *)calloc(1, sizeof *mlp);
    if (!mlp) ct_fatal("out of host memory");
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "mlp");
    params_init(&m->params);
    int fan_in = in;
    mlp->n_layers = nh + 1;
    for (int l = 0; l <= nh; l++) {
        int out = l < nh ? hidden[l] : classes;
        char name[64];
        float bound = 1.0f / sqrtf((float)fan_in);
        snprintf(name, sizeof name, "fc%d.weight", l + 1);
        mlp->w[l] = params_add(&m->params, name, 2, (int64_t[]){out, fan_in}, INIT_UNIFORM, bound, 1);
        snprintf(name, sizeof name, "fc%d.bias", l + 1);
        mlp->b[l] = params_add(&m->params, name, 1, (int64_t[]){out}, INIT_UNIFORM, bound, 1);
        fan_in = out;
    }
    m->impl = mlp;
    m->in_features = in;
    m->classes = classes;
    m->forward = mlp_forward;
    m->training = 1;
    m->free_impl = mlp_free_impl;
    params_alloc(&m->params, c, seed);
}
