#!/bin/bash
# this call: the 1x1 conv+BN probe, then H200 bench rows (BERT fp8/bf16, ResNet bf16)
: "${OUT:?}"
set -u
me=next.sh; . scripts/device/unpack.sh; . scripts/device/steps.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
for a in "" "--plain" "--bn64"; do
  timeout 90 .dev/new/conv1x1_bn_probe 256 $a > "$L/probe256$a.log" 2>&1
  echo "== probe 256 $a (rc $?)"; cat "$L/probe256$a.log"; pack
done
timeout 60 .dev/new/conv1x1_bn_probe 64 > "$L/probe64.log" 2>&1; echo "== probe 64 (rc $?)"; cat "$L/probe64.log"; pack
STEPS_BUDGET=480
bb b128fp8 100 $NEW bench --models bert-large --seq 128 --batch 256 --precision fp8 --time-limit 3
bb b128bf16 100 $NEW bench --models bert-large --seq 128 --batch 256 --precision bf16 --time-limit 3
bb b512fp8 100 $NEW bench --models bert-large --seq 512 --batch 32 --precision fp8 --time-limit 3
bb b512bf16 100 $NEW bench --models bert-large --seq 512 --batch 32 --precision bf16 --time-limit 3
bb r256bf16 200 $NEW bench --models resnet50 --batch 256 --precision bf16 --time-limit 3
bb b128fp8b 100 $NEW bench --models bert-large --seq 128 --batch 256 --precision fp8 --time-limit 3
echo "end at $(el) s"
