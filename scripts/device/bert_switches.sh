#!/bin/bash
# bert_switches.sh — on one GPU, with binaries built elsewhere (scripts/device/stage.sh):
# the BERT step's unmeasured A/B switches against today's defaults, each
# checked first by its GPU test:
#   CTRAIN_LINEAR_BGRAD=1   Linear's bias gradient from the weight gradient's
#                           cuBLASLt GEMM (tests/gpu_linear_epilogue)
#   CTRAIN_LN_KERNELS=vec   LayerNorm on 16-byte vectors, rows in registers
#                           (tests/gpu_transformer_ops)
#   CTRAIN_ADD_NORM=fused   dropout + residual add + LayerNorm in one kernel each
#                           way (tests/gpu_add_norm; needs the vector kernels'
#                           row shapes, any CTRAIN_LN_KERNELS)
#
#   OUT=dir bash scripts/device/bert_switches.sh
#
# Then BERT-large bf16, seq 128, batch 32 and 256: `ctrain bench` with none,
# each, all, and none again (the repeat shows the noise), one after the other
# on the same GPU. ~9 minutes. Flip a default in
# engine/settings.c only when its switch is faster in both rows.
# Reads out/new.tar.xz, so the device call carries the ignored folder out/.
: "${OUT:?set OUT to a folder for the logs}"
set -u
me=bert_switches.sh; . scripts/device/unpack.sh   # L, pack, NEW
for t in gpu_linear_epilogue gpu_transformer_ops gpu_add_norm; do
    CTRAIN_PLAN_CACHE=off timeout 200 ".dev/new/tests/$t" > "$L/$t.log" 2>&1
    echo "$t: $(tail -1 "$L/$t.log")"
    grep -E "FAIL|epilogue taken" "$L/$t.log" | head -12
done
n=0
for sw in "0 row composed" "1 row composed" "0 vec composed" "0 vec fused" "1 vec fused" \
          "0 row composed"; do
    set -- $sw
    n=$((n + 1))
    CTRAIN_LINEAR_BGRAD=$1 CTRAIN_LN_KERNELS=$2 CTRAIN_ADD_NORM=$3 timeout 130 "$NEW" bench \
        --models bert-large --batch 32,256 --seq 128 --precision bf16 --time-limit 6 \
        --json "$L/bench_$n.json" > "$L/bench_$n.log" 2>&1
    echo "CTRAIN_LINEAR_BGRAD=$1 CTRAIN_LN_KERNELS=$2 CTRAIN_ADD_NORM=$3 (run $n, status $?):"
    grep -E "bert-large" "$L/bench_$n.log" | head -3
done
pack
