#!/bin/bash
# ResNet's stem forward with two output rows a pass (ops/conv_stem.cu): the stem test, the stem
# kernels' times old / new (CUPTI, tf32 and bf16), ResNet-50 bs 256 old / new
set -u
me=stem2; . scripts/device/unpack.sh; . scripts/device/steps.sh
nvidia-smi --query-gpu=name --format=csv,noheader | tee $L/gpu.txt
STEPS_BUDGET=120
tt gpu_conv_stem 60
W=$(mktemp -d)
tl() { local n=$1 b=$2; shift 2; CTRAIN_TIMELINE=$W/$n.json:8:3 timeout 100 $b train --model resnet50 --data synthetic --batch 256 --optim sgd --lr 0.1 --graph --steps 11 --log-every 5 --no-eval "$@" > $L/$n.log 2>&1
  echo "$n rc $?"; cp $W/$n.json.txt $L/$n.txt 2>/dev/null; sed -n 2p $L/$n.txt; grep -E "^ +[0-9.]+ +[0-9.]+ +[0-9.]+ .*stem_" $L/$n.txt | cut -c1-100; pack; }
tl tl_old_t $OLD --precision tf32
tl tl_new_t $NEW --precision tf32
tl tl_new_b $NEW --precision bf16
bb r_old 60 $OLD bench --models resnet50 --batch 256 --precision tf32 --time-limit 2
bb r_new 60 $NEW bench --models resnet50 --batch 256 --precision tf32 --time-limit 2
bb b_new 60 $NEW bench --models resnet50 --batch 256 --precision bf16 --time-limit 2
bb b_old 60 $OLD bench --models resnet50 --batch 256 --precision bf16 --time-limit 2
echo "total $(el) s"
