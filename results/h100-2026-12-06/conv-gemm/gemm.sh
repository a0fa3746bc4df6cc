#!/bin/bash
# 1 x 1 convolutions as cuBLASLt GEMMs (CTRAIN_CONV_GEMM): correctness, then ResNet-50 fp32 off / f32
set -u
me=gemm; . scripts/device/unpack.sh; . scripts/device/steps.sh
export STEPS_BUDGET=200
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv > $L/gpu.txt; cat $L/gpu.txt
tt gpu_conv2d 90
R="--models resnet50 --batch 256 --precision fp32 --time-limit 3"
bb r32off 110 CTRAIN_CONV_GEMM=off $NEW bench $R
bb r32s 100 CTRAIN_CONV_GEMM=f32 CTRAIN_LOG=debug $NEW bench $R
grep "conv2d_cuda" $L/r32s.log > $L/r32s_plans.txt; grep -c "GEMM" $L/r32s_plans.txt
bb py32 70 python3 scripts/torch_bench.py $R
if [ "$(el)" -lt 240 ]; then
s=$(date +%s); timeout 40 .dev/new/tests/gpu_conv_bn own1x1 > $L/gpu_conv_bn_own1x1.log 2>&1
echo "own1x1 rc $? $(grep -E '^[0-9]+ passed' $L/gpu_conv_bn_own1x1.log | tail -1) ($(( $(date +%s) - s )) s)"
fi
[ "$(el)" -lt 250 ] && tt gpu_conv_plan_store 40
pack
echo "total $(el) s"
