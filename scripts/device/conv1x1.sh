#!/bin/bash
# conv1x1.sh — on one GPU, with binaries built elsewhere (scripts/device/stage.sh):
# the unit's 1 x 1 convolutions on ctrain's own kernel (ops/conv1x1_bn.h,
# CTRAIN_CONV_BN_1X1=own), written without a GPU: its checks, its kernel
# against the separate way, then its worth in ResNet-50's step.
#
#   OUT=dir bash scripts/device/conv1x1.sh
#
#   1. `gpu_conv_bn own1x1`: the kernels forced against the separate way (the
#      convolution + statistics, f16 and bf16, tile tails, stage 4; the unit
#      with the prologue and the data and filter gradients' twins; a strided 1 x 1 not
#      taken; a ResNet-50 bf16 step with them against without). Seconds.
#   2. `ctrain bench --models resnet50 --batch 256 --precision bf16`: separate,
#      CTRAIN_CONV_BN=unit, unit + CTRAIN_CONV_BN_1X1=backward (the two
#      gradients' twins) and unit + own (the forward too), twice (the repeat
#      shows the noise).
#   3. With PROBE=1: `conv1x1_bn_probe 256` (the forward kernel on ResNet-50's
#      eight 1 x 1 shapes against cuBLAS + the two passes) first; with
#      TIMELINE=1, the unit's timeline with the kernels on (CTRAIN_TIMELINE,
#      steps 8-10); with NCU=1 ncu's stalls of the forward kernel at stage 1 conv3;
#      gpu_flash_attn last when time is left (its PTX wrappers moved to
#      ops/mma_sm80.cuh).
# ~2 minutes with the plan store carried (out/plans.tgz), ~4 without.
: "${OUT:?set OUT to a folder for the logs}"
set -u
me=conv1x1.sh; . scripts/device/unpack.sh; . scripts/device/steps.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 120 .dev/new/tests/gpu_conv_bn own1x1 > "$L/gpu_conv_bn_own1x1.log" 2>&1
echo "gpu_conv_bn own1x1 rc $? $(grep -E '^[0-9]+ passed' "$L/gpu_conv_bn_own1x1.log" | tail -1)"
grep -E "FAIL|own 1 x 1|not taken" "$L/gpu_conv_bn_own1x1.log" | head -20
pack
if [ "${PROBE:-0}" = 1 ]; then
    timeout 60 .dev/new/conv1x1_bn_probe 256 > "$L/probe256.log" 2>&1
    echo "probe 256 rc $?"; cat "$L/probe256.log"; pack
fi
STEPS_BUDGET=440
R="bench --models resnet50 --precision bf16 --time-limit 3 --batch 256"
U="CTRAIN_CONV_BN=unit"
for rep in 1 2; do
    bb sep256_$rep 150 $NEW $R
    bb unit256_$rep 150 $U $NEW $R
    bb back256_$rep 150 $U CTRAIN_CONV_BN_1X1=backward $NEW $R
    bb own256_$rep 150 $U CTRAIN_CONV_BN_1X1=own $NEW $R
done
W=$(mktemp -d)
if [ "${TIMELINE:-0}" = 1 ] && [ "$(el)" -lt 470 ]; then
    env $U CTRAIN_CONV_BN_1X1=own CTRAIN_TIMELINE=$W/own.json:8:3 timeout 90 \
        $NEW train --model resnet50 --data synthetic --batch 256 --precision bf16 --graph \
        --optim sgd --lr 0.1 --steps 11 --log-every 5 --no-eval > $L/tl_own.log 2>&1
    echo "timeline rc $? at $(el) s"; cp $W/own.json.txt $L/tl_own.txt 2>/dev/null
    sed -n 2,4p $L/tl_own.txt; pack
fi
if [ "${NCU:-0}" = 1 ]; then   # the forward kernel's stalls at stage 1 conv3 (its first launches)
    NCU_BIN=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
    timeout 150 "$NCU_BIN" --clock-control none --kernel-name regex:conv1x1_bn_kernel \
        --launch-count 2 --section SpeedOfLight --section Occupancy --section SchedulerStats \
        --section WarpStateStats --section MemoryWorkloadAnalysis --section LaunchStats \
        .dev/new/conv1x1_bn_probe 256 > $L/ncu_fwd.txt 2>&1
    echo "ncu rc $? at $(el) s"
    grep -E "Stall|Throughput|Issued|Eligible|Occupancy" $L/ncu_fwd.txt | head -30; pack
fi
[ "$(el)" -lt 400 ] && tt gpu_flash_attn 150   # its PTX wrappers moved to ops/mma_sm80.cuh
echo "end at $(el) s"
