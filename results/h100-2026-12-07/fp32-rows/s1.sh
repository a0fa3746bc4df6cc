#!/bin/bash
# owed checks under CTRAIN_CONV_GEMM=f32, then ResNet-50 fp32 bs 256,64 beside PyTorch NCHW
set -u
me=s1; . scripts/device/unpack.sh; . scripts/device/steps.sh
export STEPS_BUDGET=420
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv > $L/gpu.txt; cat $L/gpu.txt
s=$(date +%s); timeout 50 .dev/new/tests/gpu_conv_bn own1x1 > $L/gpu_conv_bn_own1x1.log 2>&1
echo "own1x1 rc $? $(grep -E '^[0-9]+ passed' $L/gpu_conv_bn_own1x1.log | tail -1) ($(( $(date +%s) - s )) s)"
grep -m5 FAIL $L/gpu_conv_bn_own1x1.log
timeout 90 python3 scripts/torch_parity.py resnet 50 8 224 /tmp/ctrain_parity/resnet50 > $L/parity_ref.log 2>&1; echo "ref rc $?"
export CTRAIN_PARITY_DIR=/tmp/ctrain_parity/resnet50 CTRAIN_BIN=$NEW
tt gpu_resnet_parity 90
tt gpu_graph 60
R="--models resnet50 --batch 256,64 --precision fp32 --time-limit 3"
bb c32 150 $NEW bench $R
bb p32 170 python3 scripts/torch_bench.py $R --nchw
pack
echo "total $(el) s"
