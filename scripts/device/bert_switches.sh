#!/bin/bash
# bert_switches.sh — on one GPU, with binaries built elsewhere (scripts/device/stage.sh):
# the BERT step's unmeasured A/B switches, each alone against today's
# defaults, each checked first by its GPU test:
#   CTRAIN_LN_KERNELS=vec    LayerNorm on 16-byte vectors, rows in registers
#                            (tests/gpu_transformer_ops)
#   CTRAIN_LN_KERNELS=auto   the vector kernels from 16,384 rows a call, the row
#                            kernels below (tests/gpu_transformer_ops)
#   CTRAIN_LN_KERNELS=split  the vector forward; the backward's dx without the
#                            parameter partials, dgamma / dbeta in their own
#                            pass (tests/gpu_transformer_ops)
#   CTRAIN_ADD_NORM=fused    dropout + residual add + LayerNorm in one kernel each
#                            way (tests/gpu_add_norm; needs the vector kernels'
#                            row shapes, any CTRAIN_LN_KERNELS)
#   CTRAIN_LINEAR_ACT_BGRAD=1  the intermediate Linear's bias gradient summed in
#                            GELU's backward pass (tests/gpu_linear_act)
# (CTRAIN_LINEAR_BGRAD=1 was measured slower in both rows on 2026-12-05 and
# stays off.)
#
#   OUT=dir bash scripts/device/bert_switches.sh
#
# Then BERT-large bf16, seq 128, batch 32 and 256: `ctrain bench` with the
# defaults, each switch alone, and the defaults again (the repeat shows the
# noise), one after the other on the same GPU. ~9 minutes. Flip a default
# in engine/settings.c only when its switch is faster in both rows.
# Reads out/new.tar.xz, so the device call carries the ignored folder out/.
: "${OUT:?set OUT to a folder for the logs}"
set -u
me=bert_switches.sh; . scripts/device/unpack.sh   # L, pack, NEW
for t in gpu_transformer_ops gpu_add_norm gpu_linear_act; do
    CTRAIN_PLAN_CACHE=off timeout 200 ".dev/new/tests/$t" > "$L/$t.log" 2>&1
    echo "$t: $(tail -1 "$L/$t.log")"
    grep -E "FAIL" "$L/$t.log" | head -12
done
pack
n=0
for sw in "row composed 0" "vec composed 0" "auto composed 0" "split composed 0" \
          "row fused 0" "row composed 1" "row composed 0"; do
    set -- $sw
    n=$((n + 1))
    CTRAIN_LN_KERNELS=$1 CTRAIN_ADD_NORM=$2 CTRAIN_LINEAR_ACT_BGRAD=$3 timeout 110 "$NEW" bench \
        --models bert-large --batch 32,256 --seq 128 --precision bf16 --time-limit 4 \
        --json "$L/bench_$n.json" > "$L/bench_$n.log" 2>&1
    echo "CTRAIN_LN_KERNELS=$1 CTRAIN_ADD_NORM=$2 CTRAIN_LINEAR_ACT_BGRAD=$3 (run $n, status $?):"
    grep -E "^bert-large" "$L/bench_$n.log" | head -2
    pack
done
