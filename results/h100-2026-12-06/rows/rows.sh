#!/bin/bash
# issue rows on whatever card came: BERT-large's four rows and ResNet-50 tf32 / fp32, PyTorch beside
set -u
S0=$(date +%s)
me=rows; . scripts/device/unpack.sh
el() { echo $(( $(date +%s) - S0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm,memory.total --format=csv,noheader | tee $L/gpu.txt
bb() { local n=$1; shift; [ $(el) -lt 380 ] || { echo "$n: no time"; return; }
       timeout 150 $NEW bench "$@" --json $L/$n.json > $L/$n.log 2>&1
       echo "$n (rc $?) at $(el) s:"; grep -E "^(bert|resnet)" $L/$n.log | cut -c1-120; pack; }
tb() { local n=$1; shift; [ $(el) -lt 400 ] || { echo "$n: no time"; return; }
       timeout 120 python3 scripts/torch_bench.py "$@" > $L/$n.log 2>&1
       echo "$n (rc $?) at $(el) s:"; grep -E "^(bert|resnet)" $L/$n.log | cut -c1-120; pack; }
bb b128 --models bert-large --seq 128 --batch 256 --precision bf16,fp8 --time-limit 4
bb b512 --models bert-large --seq 512 --batch 32 --precision bf16,fp8 --time-limit 4
tb t128 --models bert-large --seq 128 --batch 256 --precision bf16 --time-limit 4
tb t512 --models bert-large --seq 512 --batch 32 --precision bf16 --time-limit 4
bb r256 --models resnet50 --batch 256 --precision tf32,fp32,bf16 --time-limit 4
tb tr256 --models resnet50 --batch 256 --precision tf32,fp32,bf16 --time-limit 4
tb tr256n --models resnet50 --batch 256 --precision tf32,fp32 --nchw --time-limit 4
echo "total $(el) s"
