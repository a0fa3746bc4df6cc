#!/bin/bash
# ResNet's stem on ctrain's implicit GEMM, the default now: test, kernel times, ResNet-50 bs 256
# tf32 and bf16 cudnn / own alternated, PyTorch beside, and the GPU tests that train ResNets
set -u
S0=$(date +%s)
me=c10; . scripts/device/unpack.sh
el() { echo $(( $(date +%s) - S0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $L/gpu.txt
T=.dev/new/tests
tt() { local n=$1; s=$(date +%s); timeout $2 stdbuf -oL $T/$n > $L/$n.log 2>&1
  echo "$n rc $? $(grep -E '^[0-9]+ passed' $L/$n.log|tail -1) ($(( $(date +%s)-s )) s)"; grep -m8 FAIL $L/$n.log | cut -c1-200; pack; }
tt gpu_conv_stem 60
for p in tf32 bf16; do
  CTRAIN_TIMELINE=$L/tl_$p.json:8:3 timeout 120 $NEW train --model resnet50 --data synthetic \
    --batch 256 --precision $p --graph --optim sgd --lr 0.1 --steps 11 --no-eval > $L/tl_$p.log 2>&1
  echo "timeline $p rc $?"; grep -E "stem|busy ms" $L/tl_$p.json.txt | head -4 | cut -c1-120; rm -f $L/tl_$p.json; pack
done
bb() { local n=$1 lim=$2; shift 2; [ $(el) -lt 400 ] || { echo "$n: no time"; return; }
       timeout $lim env "$@" --json $L/$n.json > $L/$n.log 2>&1
       echo "$n (rc $?) at $(el) s:"; grep -E "^(bert|resnet)" $L/$n.log | cut -c1-120; pack; }
for i in 1 2; do
  bb t_cud$i 100 CTRAIN_CONV_STEM=cudnn $NEW bench --models resnet50 --batch 256 --precision tf32 --time-limit 3
  bb t_own$i 100 $NEW bench --models resnet50 --batch 256 --precision tf32 --time-limit 3
done
bb b_cud 100 CTRAIN_CONV_STEM=cudnn $NEW bench --models resnet50 --batch 256 --precision bf16 --time-limit 3
bb b_own 100 $NEW bench --models resnet50 --batch 256 --precision bf16 --time-limit 3
bb py_cl 100 python3 scripts/torch_bench.py --models resnet50 --batch 256 --precision tf32 --time-limit 3
tt gpu_graph 120
tt gpu_conv2d 120

echo "total $(el) s"
