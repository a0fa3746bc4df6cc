#!/bin/bash
# This binary: CTRAIN_BN_PAIR=add_relu the default, the pair's check on real pixels only;
# CTRAIN_CONV_WS=shared|per_call (new, off). Tests first, then fp16 / fp32 peak and speed
# with the workspace per call, the pair's verdicts in bf16's debug log, bs 64 with the pair
set -u
me=s10; . scripts/device/unpack.sh; . scripts/device/steps.sh
export STEPS_BUDGET=${STEPS_BUDGET:-330}
nvidia-smi --query-gpu=name --format=csv,noheader | tee $L/gpu.txt
CTRAIN_LOG=debug timeout 80 .dev/new/tests/gpu_bn_op_cudnn > $L/bnop.log 2>&1
echo "bnop rc $?: $(tail -1 $L/bnop.log)"; grep FAIL $L/bnop.log | head -8 | cut -c1-220
grep -i "pair" $L/bnop.log | grep -v "^  ok" | sed 's/[0-9]* of [0-9]* mask/N of M mask/' | sort | uniq -c | head -12 | cut -c1-220
tt gpu_workspace 150
grep "calls took" $L/gpu_workspace.log
tt gpu_resnet_parity 90
R="--models resnet50 --batch 256 --time-limit 2"
bb h0 60 CTRAIN_LOG=debug $NEW bench $R --precision fp16
grep -h "workspace" $L/h0.log | cut -c1-200 | head -20
bb h1 60 CTRAIN_CONV_WS=per_call $NEW bench $R --precision fp16
bb h0b 60 $NEW bench $R --precision fp16
bb h1b 60 CTRAIN_CONV_WS=per_call $NEW bench $R --precision fp16
bb w0 60 CTRAIN_LOG=debug $NEW bench $R --precision fp32
grep -h "workspace" $L/w0.log | cut -c1-200 | head -20
bb w1 60 CTRAIN_CONV_WS=per_call $NEW bench $R --precision fp32
bb pd 60 CTRAIN_LOG=debug $NEW bench $R --precision bf16
grep -h "pair" $L/pd.log | sed 's/[0-9]* of [0-9]* mask/N of M mask/' | sort | uniq -c | cut -c1-200
bb b1 60 CTRAIN_CONV_WS=per_call $NEW bench $R --precision bf16,tf32
R="--models resnet50 --batch 64 --time-limit 2"
bb q0 100 CTRAIN_BN_PAIR=off $NEW bench $R --precision bf16,fp16
bb q1 60 $NEW bench $R --precision bf16,fp16
mkdir -p $L/probe
timeout 60 .dev/new/bn_reserve_probe $L/probe 3,5,7,64 > $L/probe.log 2>&1
echo "probe rc $?"; grep -v "first elements" $L/probe.log | cut -c1-230
tt gpu_graph 150
pack
echo "total $(el) s"
