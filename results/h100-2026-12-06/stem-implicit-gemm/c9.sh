#!/bin/bash
# ResNet's stem as an implicit GEMM of ctrain's own (CTRAIN_CONV_STEM=own): the test against the
# CPU reference, the kernels' times in a step, ResNet-50 bs 256 tf32 and bf16 cudnn / own alternated
set -u
S0=$(date +%s)
me=c9; . scripts/device/unpack.sh
el() { echo $(( $(date +%s) - S0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $L/gpu.txt
T=.dev/new/tests
timeout 120 $T/gpu_conv_stem > $L/gpu_conv_stem.log 2>&1; echo "gpu_conv_stem rc $? $(tail -1 $L/gpu_conv_stem.log)"
grep -m12 FAIL $L/gpu_conv_stem.log | cut -c1-200; pack
grep -q " 0 failed" $L/gpu_conv_stem.log || { echo "stem test failed: no bench"; exit 0; }
for p in tf32 bf16; do
  CTRAIN_CONV_STEM=own CTRAIN_TIMELINE=$L/tl_$p.json:8:3 timeout 120 $NEW train --model resnet50 --data synthetic \
    --batch 256 --precision $p --graph --optim sgd --lr 0.1 --steps 11 --no-eval > $L/tl_$p.log 2>&1
  echo "timeline $p rc $?"; grep -E "stem|busy ms" $L/tl_$p.json.txt | head -4 | cut -c1-120; rm -f $L/tl_$p.json; pack
done
bb() { local n=$1 lim=$2; shift 2; [ $(el) -lt 420 ] || { echo "$n: no time"; return; }
       timeout $lim env "$@" --json $L/$n.json > $L/$n.log 2>&1
       echo "$n (rc $?) at $(el) s:"; grep -E "^(bert|resnet)" $L/$n.log | cut -c1-120; pack; }
for i in 1; do
  bb t_cud$i 120 CTRAIN_CONV_STEM=cudnn $NEW bench --models resnet50 --batch 256 --precision tf32 --time-limit 3
  bb t_own$i 120 CTRAIN_CONV_STEM=own $NEW bench --models resnet50 --batch 256 --precision tf32 --time-limit 3
done
bb b_cud 120 CTRAIN_CONV_STEM=cudnn $NEW bench --models resnet50 --batch 256 --precision bf16 --time-limit 3
bb b_own 120 CTRAIN_CONV_STEM=own $NEW bench --models resnet50 --batch 256 --precision bf16 --time-limit 3
echo "total $(el) s"
