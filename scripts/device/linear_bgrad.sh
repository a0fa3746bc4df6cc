#!/bin/bash
# linear_bgrad.sh — on one GPU, with binaries built elsewhere (scripts/device/stage.sh):
# the Linear bias gradient taken from the weight gradient's cuBLASLt GEMM
# (CTRAIN_LINEAR_BGRAD=1, ops/matmul_op.c) against the separate pass over dy.
#
#   OUT=dir bash scripts/device/linear_bgrad.sh
#
# 1. tests/gpu_linear_epilogue (both epilogues against the CPU and against
#    the separate passes; the bias-gradient epilogue must be taken).
# 2. BERT-large bf16, seq 128 at batch 32 and 256: `ctrain bench` with
#    CTRAIN_LINEAR_BGRAD=0, =1, =0 again (the repeat shows the noise), one
#    after the other on the same GPU. ~7 minutes.
# Flip the default in engine/settings.c only when =1 is faster in both rows.
# Reads out/new.tar.xz, so the device call carries the ignored folder out/.
: "${OUT:?set OUT to a folder for the logs}"
set -u
me=linear_bgrad.sh; . scripts/device/unpack.sh   # L, pack, NEW
CTRAIN_PLAN_CACHE=off .dev/new/tests/gpu_linear_epilogue > "$L/gpu_linear_epilogue.log" 2>&1
echo "gpu_linear_epilogue: $(tail -1 "$L/gpu_linear_epilogue.log")"
grep -E "FAIL|epilogue taken" "$L/gpu_linear_epilogue.log" | head -12
n=0
for v in 0 1 0; do
    n=$((n + 1))
    CTRAIN_LINEAR_BGRAD=$v timeout 190 "$NEW" bench --models bert-large --batch 32,256 --seq 128 \
        --precision bf16 --time-limit 8 --json "$L/bench_bgrad${v}_$n.json" > "$L/bench_bgrad${v}_$n.log" 2>&1
    echo "CTRAIN_LINEAR_BGRAD=$v (run $n, status $?):"
    grep -E "bert-large" "$L/bench_bgrad${v}_$n.log" | head -3
done
pack
