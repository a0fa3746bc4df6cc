#!/bin/bash
# conv_bn.sh — on one GPU, with binaries built elsewhere (scripts/device/stage.sh):
# ResNet's conv + batch-norm unit (ops/conv_bn.h, CTRAIN_CONV_BN=unit), written
# without a GPU: its tests, then its cost and memory against the separate ops.
#
#   OUT=dir bash scripts/device/conv_bn.sh [tests|tests2|ab|ab2]     (one part a call)
#
#   tests  gpu_conv_bn alone (the unit against the separate ops on our
#          batch-norm kernels bit for bit, per type and shape, gradients added
#          into, and ResNet-50 steps: f32, recompute, bf16 under autocast; the
#          fused graphs of ops/conv_bn_cudnn.h forced, every form alone,
#          against the separate way: which kinds and forms cuDNN takes on this
#          card is in its log, SKIP lines say where it took none). Up to ~9
#          minutes (each search compiles kernels at run time).
#   tests2 gpu_batchnorm and gpu_bn_compare (batch norm's statistics finish
#          in one pinned device function, its pre-activation's roundings
#          pinned, the mask's relu mode 2). ~2 minutes.
#   ab     ctrain bench ResNet50 bs 256 bf16 and fp16 with CTRAIN_CONV_BN
#          separate, unit, fused: img/s and peak memory (docs/kernels.md
#          predicts -1.7 GB for the unit at bs 256, ~-10% speed with our
#          kernels alone; fused logs each shape's verdict, fused or separate,
#          with both times: `grep "conv + statistics"`). ~8 minutes.
#   ab2    the repeat (fused, separate: the noise), then bs 64 bf16 separate
#          and fused. ~7 minutes.
# Reads out/new.tar.xz, so the device call carries the ignored folder out/.
: "${OUT:?set OUT to a folder for the logs}"
PART=${1:-tests}
set -u
me=conv_bn.sh; . scripts/device/unpack.sh   # L, pack, NEW
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$L/gpu.txt"
T=.dev/new/tests
case $PART in
tests|tests2)
    progs="gpu_batchnorm gpu_bn_compare"; limit=200
    [ "$PART" = tests ] && progs=gpu_conv_bn && limit=560
    for t in $progs; do
        s=$(date +%s)
        CTRAIN_LOG=info CTRAIN_PLAN_CACHE=off timeout $limit "$T/$t" > "$L/$t.log" 2>&1
        echo "$t: status $?, $(tail -n 1 "$L/$t.log") ($(( $(date +%s) - s )) s)"
        grep -m6 FAIL "$L/$t.log" | cut -c1-220
        grep -E "SKIP|fused graph ran|shapes fused|fused_unit|form [0-9]: fused as" "$L/$t.log" | head -24
        pack
    done ;;
ab|ab2)
    if [ "$PART" = ab ]; then
        runs=("separate 256 bf16,fp16" "unit 256 bf16,fp16" "fused 256 bf16,fp16")
    else
        runs=("fused 256 bf16,fp16" "separate 256 bf16,fp16" "separate 64 bf16" "fused 64 bf16")
    fi
    n=0
    for run in "${runs[@]}"; do
        set -- $run; n=$((n + 1))
        CTRAIN_LOG=info CTRAIN_CONV_BN=$1 timeout 170 "$NEW" bench --models resnet50 \
            --batch "$2" --precision "$3" --json "$L/${PART}_${n}_$1.json" \
            > "$L/${PART}_${n}_$1.log" 2>&1
        echo "run $n $1 bs $2 (status $?):"
        grep -E '^resnet50' "$L/${PART}_${n}_$1.log" | head -2
        grep -c ": fused$" "$L/${PART}_${n}_$1.log" | sed 's/^/  graphs fused (all kinds): /'
        pack
    done ;;
*) echo "conv_bn.sh: unknown part '$PART' (tests, tests2, ab or ab2)"; exit 2 ;;
esac
