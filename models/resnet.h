/* resnet.h — the ResNet family as torchvision defines it (v1.5: the stride
 * of a bottleneck sits on its 3x3 conv).
 *
 *   stem:   conv 7x7/2 (in_ch -> w) -> BN -> ReLU -> max pool 3x3/2
 *   layer1..layer4: blocks at widths w, 2w, 4w, 8w (w = 64 by default),
 *           the first block of layer2..4 has stride 2 and a downsample
 *           (conv 1x1/s -> BN) on its identity path
 *   BasicBlock (18, 34):    3x3 -> BN -> ReLU -> 3x3 -> BN, + identity, ReLU
 *   Bottleneck (50+):       1x1 -> BN -> ReLU -> 3x3/s -> BN -> ReLU ->
 *                           1x1 (x4 channels) -> BN, + identity, ReLU
 *   head:   global average pool -> fc (8w * expansion -> classes)
 * Images are NHWC. Parameter and buffer names are torchvision's state_dict
 * names (conv1.weight, layer1.0.bn2.running_mean, fc.bias, ...); conv weights
 * are PyTorch [O, I, kH, kW] in the registry and [O, kH, kW, I] in memory.
 * Init as torchvision: Kaiming normal (fan_out, ReLU gain) for convs, BN
 * gamma 1 and beta 0 (optionally gamma 0 on each block's last BN), fc as
 * nn.Linear's default.
 */
#ifndef CTRAIN_MODELS_RESNET_H
#define CTRAIN_MODELS_RESNET_H

#include "engine/recompute.h"
#include "model.h"

typedef struct ResNetConfig {
    int depth;              /* 18, 34, 50, 101, 152 */
    int classes;            /* 1000 */
    int in_channels;        /* 3 */
    int width;              /* 64: the stem / layer1 width */
    int zero_init_residual; /* last BN gamma of each block starts at 0 */
    int no_wd_bn_bias;      /* exclude BN parameters and biases from weight decay */
    RecomputePolicy recompute;  /* per residual block */
    int bn_unit;            /* the batch norm + ReLU between two convs of a block as one
                             * unit (ops/conv_bn.h); default from CTRAIN_CONV_BN */
} ResNetConfig;

/* depth: 18, 34, 50, 101 or 152 (model_kind_resnet_depth in model.h). */
void resnet_config_default(ResNetConfig *cfg, int depth);
void resnet_create(Model *m, Ctx *c, const ResNetConfig *cfg, uint64_t seed);
/* Forward FLOPs (multiply-adds x 2) per image at size x size, for MFU. */
double resnet_flops_per_image(const ResNetConfig *cfg, int size);

#endif
