#!/bin/bash
# the attention layouts after the review's fix: gpu_attention_cudnn (both layouts), gpu_attention_qkv
set -u
S0=$(date +%s)
me=g4; . scripts/device/unpack.sh
T=.dev/new/tests
nvidia-smi --query-gpu=name --format=csv,noheader | tee $L/gpu.txt
for n in gpu_attention_cudnn gpu_attention_qkv; do s=$(date +%s); timeout 100 stdbuf -oL $T/$n > $L/$n.log 2>&1
  echo "$n rc $? $(grep -E '^[0-9]+ passed' $L/$n.log|tail -1) ($(( $(date +%s)-s )) s)"; grep -m6 FAIL $L/$n.log | cut -c1-200; pack; done
echo "total $(( $(date +%s) - S0 )) s"
bb() { local n=$1; shift; timeout 60 $NEW bench "$@" --time-limit 3 --json $L/$n.json > $L/$n.log 2>&1
       echo "$n (rc $?):"; grep -E "^(bert|resnet)" $L/$n.log | cut -c1-130; grep -m3 -iE "error|fatal" $L/$n.log | cut -c1-200; pack; }
F128="--models bert-large --seq 128 --batch 256 --precision fp8"
bb f128 $F128
CTRAIN_QKV_PROJ_FP8=1 bb f128_qkv $F128
echo "total $(( $(date +%s) - S0 )) s"
