#!/bin/bash
# the unit with own 1 x 1 kernels: old (c4d7cf2, the plain forward taken too) against new
# (the plain forward left to cuDNN + the statistics pass), backward-only and separate, twice
set -u
me=ab; . scripts/device/unpack.sh; . scripts/device/steps.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 120 .dev/new/tests/gpu_conv_bn own1x1 > "$L/own1x1.log" 2>&1
echo "gpu_conv_bn own1x1 rc $? $(grep -E '^[0-9]+ passed' "$L/own1x1.log" | tail -1)"
grep -E "FAIL|own 1 x 1" "$L/own1x1.log" | head; pack
R="bench --models resnet50 --precision bf16 --time-limit 3 --batch 256"
U="CTRAIN_CONV_BN=unit"
for rep in 1 2; do
    bb sep_$rep 120 $NEW $R
    bb back_$rep 120 $U CTRAIN_CONV_BN_1X1=backward $NEW $R
    bb oldown_$rep 120 $U CTRAIN_CONV_BN_1X1=own $OLD $R
    bb own_$rep 120 $U CTRAIN_CONV_BN_1X1=own $NEW $R
done

echo "end at $(el) s"
