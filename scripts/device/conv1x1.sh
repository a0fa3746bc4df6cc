#!/bin/bash
# conv1x1.sh — on one GPU, with binaries built elsewhere (scripts/device/stage.sh):
# the unit's 1 x 1 convolutions on ctrain's own kernel (ops/conv1x1_bn.h,
# CTRAIN_CONV_BN_1X1=own), written without a GPU: its checks, its kernel
# against the separate way, then its worth in ResNet-50's step.
#
#   OUT=dir bash scripts/device/conv1x1.sh
#
#   1. `gpu_conv_bn own1x1`: the kernel forced against the separate way (the
#      convolution + statistics, f16 and bf16, tile tails, stage 4; the unit
#      with the prologue; a strided 1 x 1 not taken; a ResNet-50 bf16 step
#      with it against without). Seconds.
#   2. `conv1x1_bn_probe 256` (and `--plain`): the op's kernel on ResNet-50's
#      eight 1 x 1 shapes against cuBLAS + the two passes (the figures of
#      results/h100-2026-12-06/conv1x1-probe/v2/, now through the op).
#   3. `ctrain bench --models resnet50 --batch 256 --precision bf16` with
#      CTRAIN_CONV_BN=unit, then unit + CTRAIN_CONV_BN_1X1=own, then
#      separate, twice (the repeat shows the noise); then batch 64.
#      gpu_conv_stem and gpu_flash_attn last (the PTX wrappers moved to
#      ops/mma_sm80.cuh: a pure move).
# ~6 minutes with the plan store carried (out/plans.tgz), ~8 without.
: "${OUT:?set OUT to a folder for the logs}"
set -u
me=conv1x1.sh; . scripts/device/unpack.sh; . scripts/device/steps.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 120 .dev/new/tests/gpu_conv_bn own1x1 > "$L/gpu_conv_bn_own1x1.log" 2>&1
echo "gpu_conv_bn own1x1 rc $? $(grep -E '^[0-9]+ passed' "$L/gpu_conv_bn_own1x1.log" | tail -1)"
grep -E "FAIL|own 1 x 1|not taken" "$L/gpu_conv_bn_own1x1.log" | head -20
pack
for a in "" "--plain"; do
    timeout 60 .dev/new/conv1x1_bn_probe 256 $a > "$L/probe256$a.log" 2>&1
    echo "probe 256 $a rc $?"; cat "$L/probe256$a.log"; pack
done
STEPS_BUDGET=420
R="$NEW bench --models resnet50 --precision bf16 --time-limit 3"
for rep in 1 2; do
    bb unit256_$rep 150 CTRAIN_CONV_BN=unit $R --batch 256
    bb own256_$rep 150 CTRAIN_CONV_BN=unit CTRAIN_CONV_BN_1X1=own $R --batch 256
    bb sep256_$rep 150 $R --batch 256
done
bb unit64 100 CTRAIN_CONV_BN=unit $R --batch 64
bb own64 100 CTRAIN_CONV_BN=unit CTRAIN_CONV_BN_1X1=own $R --batch 64
tt gpu_conv_stem 60
tt gpu_flash_attn 150
echo "end at $(el) s"
