#!/bin/bash
# call 2: ResNet-50 bf16 timelines at batch 64 and 256 (where the small batch's step goes),
# the bs 64 rows beside PyTorch.
set -u
me=c2; . scripts/device/unpack.sh; . scripts/device/steps.sh
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $L/gpu.txt
STEPS_BUDGET=500
W=$(mktemp -d)
for b in 64 256; do
  CTRAIN_TIMELINE=$W/r$b.json:8:3 timeout 150 $NEW train --model resnet50 --data synthetic \
    --batch $b --precision bf16 --graph --optim sgd --lr 0.1 --steps 11 --log-every 5 --no-eval \
    > $L/r$b.log 2>&1
  echo "r$b rc $? at $(el) s"; cp $W/r$b.json.txt $L/r$b.txt 2>/dev/null; sed -n 2,4p $L/r$b.txt; pack
done
bb rn64 90 $NEW bench --models resnet50 --batch 64 --precision bf16,fp16 --time-limit 3
timeout 150 python3 scripts/torch_bench.py --models resnet50 --batch 64 --precision bf16 \
  --time-limit 3 > $L/torch64.log 2>&1; echo "torch rc $?"; grep -E "^resnet" $L/torch64.log
pack; echo "total $(el) s"
