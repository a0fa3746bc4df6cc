#!/bin/bash
# next session's first call (~500 s): the cast test with NaN in every input type, the BERT rows
# on whatever card comes, ResNet-50 tf32 and cuDNN's fused conv + statistics graphs in f32 / TF32
# (issue 19's 1.3x: 47% of the tf32 step is cuDNN's f32 batch norms). cuDNN's searches come back in
# logs.tgz as logs/plans.tgz (scripts/device/unpack.sh): copy it to out/plans.tgz for the next call.
set -u
S0=$(date +%s)
me=next; . scripts/device/unpack.sh
el() { echo $(( $(date +%s) - S0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $L/gpu.txt
T=.dev/new/tests
tt() { local n=$1; s=$(date +%s); timeout $2 stdbuf -oL $T/$n > $L/$n.log 2>&1
  echo "$n rc $? $(grep -E '^[0-9]+ passed' $L/$n.log|tail -1) ($(( $(date +%s)-s )) s)"; grep -m6 FAIL $L/$n.log | cut -c1-200; pack; }
tt gpu_fp8_gemm 120
bb() { local n=$1 lim=$2; shift 2; [ $(el) -lt 520 ] || { echo "$n: no time"; return; }
       timeout $lim env "$@" --json $L/$n.json > $L/$n.log 2>&1
       echo "$n (rc $?) at $(el) s:"; grep -E "^(bert|resnet)" $L/$n.log | cut -c1-120; pack; }
bb b128 100 $NEW bench --models bert-large --seq 128 --batch 256 --precision bf16,fp8 --time-limit 3
bb b512 100 $NEW bench --models bert-large --seq 512 --batch 32 --precision bf16,fp8 --time-limit 3
bb rtf32 150 $NEW bench --models resnet50 --batch 256 --precision tf32 --time-limit 3
# the fused unit runs cuDNN's fused graphs in f16 / bf16 only (ops/conv_bn_cudnn.c): first ask
# whether cuDNN fuses the statistics (and the BN + ReLU prologue) with f32 storage and TF32 math
[ $(el) -lt 380 ] && { timeout 200 .dev/new/cudnn_fusion_probe 256 --dtype f32 --shapes 1,3 --candidates 4 > $L/fusion_f32.log 2>&1
  echo "fusion probe f32 rc $? at $(el) s"; grep -vE "^\s*$" $L/fusion_f32.log | cut -c1-150 | head -40; pack; }
echo "total $(el) s"
