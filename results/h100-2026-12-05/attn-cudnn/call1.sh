#!/bin/bash
# call 1: the blind changes' GPU tests, then BERT-large old/new/cudnn attention
set -u
S0=$(date +%s)
me=call1; . scripts/device/unpack.sh
el() { echo $(( $(date +%s) - S0 )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$L/gpu.txt"
T=.dev/new/tests
for t in gpu_softmax gpu_linear_act gpu_elementwise gpu_linear_epilogue gpu_add_norm gpu_conv2d; do
    s=$(date +%s)
    CTRAIN_PLAN_CACHE=off timeout 70 stdbuf -oL "$T/$t" > "$L/$t.log" 2>&1; rc=$?
    echo "$t: rc $rc, $(grep -E '^[0-9]+ passed, [0-9]+ failed' "$L/$t.log" | tail -1) ($(( $(date +%s) - s )) s)"
    grep -m5 FAIL "$L/$t.log" | cut -c1-240
done
pack
b() {   # NAME BIN ENV... -- ARGS
    local name=$1 bin=$2 envs=(); shift 2
    while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
    env "${envs[@]}" timeout 100 "$bin" bench "$@" --time-limit 3 --json "$L/$name.json" \
        > "$L/$name.log" 2>&1
    echo "$name (rc $?) at $(el) s:"
    grep -E "^(bert|resnet)" "$L/$name.log" | head -4 | cut -c1-200
    pack
}
A128="--models bert-large --seq 128 --batch 256"
A512="--models bert-large --seq 512 --batch 32"
b old128 "$OLD" X=1 -- $A128 --precision bf16
b new128 "$NEW" X=1 -- $A128 --precision bf16
b cudnn128 "$NEW" CTRAIN_ATTN=cudnn -- $A128 --precision bf16
b new512 "$NEW" X=1 -- $A512 --precision bf16
b cudnn512 "$NEW" CTRAIN_ATTN=cudnn -- $A512 --precision bf16
[ $(el) -lt 420 ] && b old128b "$OLD" X=1 -- $A128 --precision bf16
[ $(el) -lt 470 ] && b new128b "$NEW" X=1 -- $A128 --precision bf16
[ $(el) -lt 500 ] && b new128fp8 "$NEW" X=1 -- $A128 --precision fp8
echo "total $(el) s"
