#!/bin/bash
# plans.sh — on one GPU, with binaries built elsewhere (scripts/device/stage.sh):
# the convolution plans kept on disk (ops/plan_store.h, CTRAIN_PLAN_CACHE).
#
#   OUT=dir bash scripts/device/plans.sh
#
# 1. tests/gpu_conv_plan_store (a later context takes every plan back, outputs
#    bit-identical; a refused value and a cut line searched again; off keeps
#    nothing) and tests/gpu_conv2d with the store off (the search itself).
# 2. ResNet50, batch 256, strict fp32 and bf16: `ctrain train --steps 4` twice
#    with one fresh store folder, the wall time of each run (the first
#    searches, the second takes the plans back), then `ctrain bench` of the
#    same configs with the full store and with CTRAIN_PLAN_CACHE=off, one
#    after the other: the throughput must not depend on where the plans came
#    from. ~6 minutes.
# Reads out/new.tar.xz, so the device call carries the ignored folder out/.
: "${OUT:?set OUT to a folder for the logs}"
set -u
me=plans.sh; . scripts/device/unpack.sh   # L, pack, NEW
T=.dev/new/tests
"$T/gpu_conv_plan_store" > "$L/gpu_conv_plan_store.log" 2>&1
echo "gpu_conv_plan_store: $(tail -1 "$L/gpu_conv_plan_store.log")"
grep FAIL "$L/gpu_conv_plan_store.log" | head -10
CTRAIN_PLAN_CACHE=off "$T/gpu_conv2d" > "$L/gpu_conv2d.log" 2>&1
echo "gpu_conv2d (store off): $(tail -1 "$L/gpu_conv2d.log")"

P=$(mktemp -d)
for prec in fp32 bf16; do
    for run in 1 2; do
        t0=$(date +%s.%N)
        CTRAIN_PLAN_CACHE=$P "$NEW" train --model resnet50 --data synthetic --batch 256 \
            --precision "$prec" --steps 4 --no-eval > "$L/train_${prec}_$run.log" 2>&1
        rc=$?
        t1=$(date +%s.%N)
        printf 'resnet50 bs 256 %s run %d: %s s wall (status %d) %s\n' "$prec" "$run" \
            "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')" "$rc" "$(grep -o '[0-9]* convolution plans kept' "$L/train_${prec}_$run.log")"
    done
done
wc -l "$P"/conv-*.txt
cp "$P"/conv-*.txt "$L/" 2>/dev/null
for store in "$P" off; do
    CTRAIN_PLAN_CACHE=$store timeout 280 "$NEW" bench --models resnet50 --batch 256 \
        --precision fp32,bf16 --time-limit 6 --json "$L/bench_store_$(basename "$store").json" \
        > "$L/bench_store_$(basename "$store").log" 2>&1
    echo "bench with CTRAIN_PLAN_CACHE=$store (status $?):"
    grep -E "resnet50" "$L/bench_store_$(basename "$store").log" | head -4
done
pack
