#!/bin/bash
# CTRAIN_BN_PAIR: our BN + add + ReLU forward (cuDNN's reserve layout) before cuDNN's backward
set -u
me=s4; . scripts/device/unpack.sh; . scripts/device/steps.sh
export STEPS_BUDGET=150
nvidia-smi --query-gpu=name --format=csv,noheader | tee $L/gpu.txt
tt gpu_bn_op_cudnn 80
R="--models resnet50 --batch 256 --time-limit 3"
bb p0 40 CTRAIN_BN_PAIR=off $NEW bench $R --precision bf16
bb p1 40 CTRAIN_BN_PAIR=add_relu CTRAIN_LOG=debug $NEW bench $R --precision bf16
bb p1b 40 CTRAIN_BN_PAIR=add_relu $NEW bench $R --precision bf16
bb p0b 40 CTRAIN_BN_PAIR=off $NEW bench $R --precision bf16
bb t0 50 CTRAIN_BN_PAIR=off $NEW bench $R --precision tf32
bb t1 50 CTRAIN_BN_PAIR=add_relu $NEW bench $R --precision tf32
bb a1 40 CTRAIN_BN_PAIR=all $NEW bench $R --precision bf16
pack
echo "total $(el) s"
