#!/bin/bash
# conv_bn.sh — on one GPU, with binaries built elsewhere (scripts/device/stage.sh):
# ResNet's conv + batch-norm unit (ops/conv_bn.h, CTRAIN_CONV_BN=unit), written
# without a GPU: its tests, then its cost and memory against the separate ops.
#
#   OUT=dir bash scripts/device/conv_bn.sh [tests|tests2|ab|fused|ab2]     (one part a call)
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
#          separate, unit, separate, unit (the repeat shows the noise): img/s
#          and peak memory (docs/kernels.md predicts -1.7 GB for the unit at
#          bs 256, ~-10% speed with our kernels alone). ~7 minutes.
#   fused  CTRAIN_CONV_BN=fused, the plan store in a fresh folder: per
#          precision (fp16, then bf16) `ctrain train --steps 3` (the searches:
#          its wall time is their cost, each kind's verdict in its log with
#          both times, `grep ": fused$\|separate$"`), then `ctrain bench` of
#          the same config taking the kept verdicts. ~9 minutes. PRECS picks
#          the precisions (default "fp16 bf16"); TL=1 adds the fused step's
#          CUPTI timeline per precision. The plan store comes back in logs.tgz
#          (logs/plans); unpacked into out/plans and carried, a later call on
#          the same card skips the searches.
#   ab2    bs 64 bf16 separate and fused (the store from `fused` is gone with
#          the machine: this one searches again at bs 64). ~6 minutes.
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
ab)
    n=0
    for mode in separate unit separate unit; do
        n=$((n + 1))
        CTRAIN_CONV_BN=$mode timeout 140 "$NEW" bench --models resnet50 --batch 256 \
            --precision bf16,fp16 --json "$L/ab_${n}_$mode.json" > "$L/ab_${n}_$mode.log" 2>&1
        echo "run $n $mode (status $?):"
        grep -E '^resnet50' "$L/ab_${n}_$mode.log" | head -2
        pack
    done ;;
fused|ab2)
    P=$(mktemp -d)
    # a plan store kept from an earlier call (its logs.tgz's logs/plans, unpacked into
    # out/plans and carried): the kept verdicts, so no search runs again on that card
    [ -d out/plans ] && cp out/plans/* "$P"/ 2>/dev/null
    runs=()
    if [ "$PART" = fused ]; then for p in ${PRECS:-fp16 bf16}; do runs+=("$p 256"); done
    else runs=("bf16 64"); fi
    for run in "${runs[@]}"; do
        set -- $run
        t0=$(date +%s)
        CTRAIN_LOG=info CTRAIN_PLAN_CACHE=$P CTRAIN_CONV_BN=fused timeout 360 "$NEW" train \
            --model resnet50 --data synthetic --batch "$2" --precision "$1" --steps 3 \
            --log-every 1 --no-eval > "$L/${PART}_search_$1_$2.log" 2>&1
        echo "search $1 bs $2 (status $?): $(( $(date +%s) - t0 )) s;" \
             "$(grep -c ': fused$' "$L/${PART}_search_$1_$2.log") fused," \
             "$(grep -c ': separate$' "$L/${PART}_search_$1_$2.log") separate after timing"
        for mode in fused separate; do
            [ "$PART" = fused ] && [ "$mode" = separate ] && continue
            CTRAIN_PLAN_CACHE=$P CTRAIN_CONV_BN=$mode timeout 120 "$NEW" bench \
                --models resnet50 --batch "$2" --precision "$1" \
                --json "$L/${PART}_${mode}_$1_$2.json" > "$L/${PART}_${mode}_$1_$2.log" 2>&1
            echo "bench $mode $1 bs $2 (status $?):"
            grep -E '^resnet50' "$L/${PART}_${mode}_$1_$2.log" | head -2
        done
        if [ -n "${TL:-}" ]; then   # the fused step's CUPTI timeline, the kept verdicts
            CTRAIN_PLAN_CACHE=$P CTRAIN_CONV_BN=fused CTRAIN_TIMELINE=/tmp/tl.json:8:3 \
                timeout 90 "$NEW" train --model resnet50 --data synthetic --batch "$2" \
                --precision "$1" --graph --steps 12 --log-every 4 --no-eval \
                > "$L/${PART}_timeline_$1_$2.log" 2>&1
            echo "timeline fused $1 bs $2 (status $?)"
            cp /tmp/tl.json.txt "$L/${PART}_timeline_$1_$2.txt"
            head -30 "$L/${PART}_timeline_$1_$2.txt" | cut -c1-150
        fi
        mkdir -p "$L/plans"; cp "$P"/* "$L/plans"/ 2>/dev/null   # the store, for the next call
        pack
    done ;;
*) echo "conv_bn.sh: unknown part '$PART' (tests, tests2, ab, fused or ab2)"; exit 2 ;;
esac
