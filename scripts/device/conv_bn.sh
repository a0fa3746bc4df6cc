#!/bin/bash
# conv_bn.sh — on one GPU, with binaries built elsewhere (scripts/device/stage.sh):
# ResNet's conv + batch-norm unit (ops/conv_bn.h, CTRAIN_CONV_BN=unit), written
# without a GPU: its tests, then its cost and memory against the separate ops.
#
#   OUT=dir bash scripts/device/conv_bn.sh [tests|ab]     (one part a call)
#
#   tests  gpu_conv_bn (the unit against the separate ops on our batch-norm
#          kernels bit for bit, per type and shape, gradients added into, and
#          ResNet-50 steps: f32, recompute, bf16 under autocast), gpu_batchnorm
#          and gpu_bn_compare (batch norm's statistics now finish in one pinned
#          device function). ~3 minutes.
#   ab     ctrain bench ResNet50 bs 256 bf16 and fp16, separate, unit,
#          separate, unit (the repeat shows the noise), then bs 64 bf16 each
#          way: img/s and peak memory (docs/kernels.md predicts -1.7 GB at bs
#          256 and ~-10% speed until cuDNN's fused graphs serve the unit).
#          ~8 minutes.
# Reads out/new.tar.xz, so the device call carries the ignored folder out/.
: "${OUT:?set OUT to a folder for the logs}"
PART=${1:-tests}
set -u
me=conv_bn.sh; . scripts/device/unpack.sh   # L, pack, NEW
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$L/gpu.txt"
T=.dev/new/tests
case $PART in
tests)
    for t in gpu_conv_bn gpu_batchnorm gpu_bn_compare; do
        s=$(date +%s)
        CTRAIN_PLAN_CACHE=off timeout 200 "$T/$t" > "$L/$t.log" 2>&1
        echo "$t: status $?, $(tail -n 1 "$L/$t.log") ($(( $(date +%s) - s )) s)"
        grep -m6 FAIL "$L/$t.log" | cut -c1-220
        pack
    done ;;
ab)
    n=0
    for run in "separate 256 bf16,fp16" "unit 256 bf16,fp16" "separate 256 bf16,fp16" \
               "unit 256 bf16,fp16" "separate 64 bf16" "unit 64 bf16"; do
        set -- $run; n=$((n + 1))
        CTRAIN_CONV_BN=$1 timeout 150 "$NEW" bench --models resnet50 --batch "$2" \
            --precision "$3" --json "$L/ab_${n}_$1.json" > "$L/ab_${n}_$1.log" 2>&1
        echo "run $n $1 bs $2 (status $?):"
        grep -E '^resnet50' "$L/ab_${n}_$1.log" | head -2
        pack
    done ;;
*) echo "conv_bn.sh: unknown part '$PART' (tests or ab)"; exit 2 ;;
esac
