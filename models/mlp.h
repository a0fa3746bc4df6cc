/* mlp.h — a multi-layer perceptron: Linear -> ReLU -> ... -> Linear.
 *
 *   h_0 = x [B, in];  h_i = relu(h_{i-1} W_i^T + b_i);  logits = h_L W^T + b
 * Parameter names fc1.weight, fc1.bias, ..., fcN.* (PyTorch nn.Linear
 * layouts: weight [out, in]); PyTorch's default init: weight and bias
 * U(-1/sqrt(in), 1/sqrt(in)).
 */
#ifndef CTRAIN_MODELS_MLP_H
#define CTRAIN_MODELS_MLP_H

#include "model.h"

#define MLP_MAX_LAYERS 8

/* hidden: nh widths of the hidden layers. Allocates the parameters on c. */
void mlp_create(Model *m, Ctx *c, int in, const int *hidden, int nh, int classes,
                uint64_t seed);

#endif
