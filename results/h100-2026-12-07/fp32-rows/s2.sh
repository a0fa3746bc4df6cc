#!/bin/bash
# CTRAIN_CONV_GEMM=search against the default (f32: the GEMM in strict fp32 only) in tf32 / bf16 / fp16
set -u
me=s2; . scripts/device/unpack.sh; . scripts/device/steps.sh
export STEPS_BUDGET=470
R="--models resnet50 --batch 256 --time-limit 3"
bb t_def 100 $NEW bench $R --precision tf32
bb t_srch 130 CTRAIN_CONV_GEMM=search $NEW bench $R --precision tf32
bb t_def2 60 $NEW bench $R --precision tf32
bb h_def 80 $NEW bench $R --precision bf16,fp16
bb h_srch 150 CTRAIN_CONV_GEMM=search $NEW bench $R --precision bf16,fp16
bb p32cl 100 python3 scripts/torch_bench.py --models resnet50 --batch 256,64 --precision fp32 --time-limit 3 --channels-last
pack
echo "total $(el) s"
