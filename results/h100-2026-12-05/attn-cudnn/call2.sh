#!/bin/bash
# call 2: ResNet-50: batch norm ours vs cuDNN per call (f32 and the rest), the stem's patches, tf32 with our BN
set -u
S0=$(date +%s)
me=call2; . scripts/device/unpack.sh
el() { echo $(( $(date +%s) - S0 )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$L/gpu.txt"
timeout 75 .dev/new/tests/gpu_bn_compare --no-check > "$L/bn_compare.log" 2>&1
echo "bn_compare rc $? at $(el) s"; grep -E "^[0-9]+x[0-9]+x" "$L/bn_compare.log" | cut -c1-160
pack
b() {   # NAME LIMIT ENV... -- ARGS
    local name=$1 lim=$2 envs=(); shift 2
    while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
    env "${envs[@]}" timeout "$lim" "$NEW" bench "$@" --time-limit 3 --json "$L/$name.json" \
        > "$L/$name.log" 2>&1
    echo "$name (rc $?) at $(el) s:"
    grep -E "^(bert|resnet)" "$L/$name.log" | head -4 | cut -c1-200
    pack
}
R="--models resnet50 --batch 256"
b rn_bf16 80 X=1 -- $R --precision bf16
b rn_bf16_stem 80 CTRAIN_CONV_STEM=im2col -- $R --precision bf16
[ $(el) -lt 250 ] && b rn_tf32 130 X=1 -- $R --precision tf32
[ $(el) -lt 400 ] && b rn_tf32_own 90 CTRAIN_BN=own -- $R --precision tf32
[ $(el) -lt 480 ] && b rn_tf32_stem 80 CTRAIN_CONV_STEM=im2col -- $R --precision tf32
echo "total $(el) s"
