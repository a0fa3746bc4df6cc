#!/bin/bash
# where ctrain's stem kernels spend their time (CUPTI timeline, tf32 and bf16), and the BERT
# rows on the binary with the FP8 weight codes
set -u
S0=$(date +%s)
me=c6; . scripts/device/unpack.sh
el() { echo $(( $(date +%s) - S0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $L/gpu.txt
for p in tf32 bf16; do
  CTRAIN_CONV_STEM=own CTRAIN_TIMELINE=$L/tl_$p.json:8:3 timeout 120 $NEW train --model resnet50 --data synthetic \
    --batch 256 --precision $p --graph --optim sgd --lr 0.1 --steps 11 --no-eval > $L/tl_$p.log 2>&1
  echo "timeline $p rc $? at $(el) s"; grep -E "stem|ms/step" $L/tl_$p.json.txt | head -6 | cut -c1-150
  rm -f $L/tl_$p.json; pack
done
bb() { local n=$1 lim=$2; shift 2; [ $(el) -lt 420 ] || { echo "$n: no time"; return; }
       timeout $lim env "$@" --json $L/$n.json > $L/$n.log 2>&1
       echo "$n (rc $?) at $(el) s:"; grep -E "^(bert|resnet)" $L/$n.log | cut -c1-120; pack; }
bb b128 100 $NEW bench --models bert-large --seq 128 --batch 256 --precision bf16,fp8 --time-limit 3
bb b512 100 $NEW bench --models bert-large --seq 512 --batch 32 --precision bf16,fp8 --time-limit 3
echo "total $(el) s"
