#!/bin/bash
# the FP8 weight codes from the optimizer: the kernel and training tests, then the A/B
# (CTRAIN_FP8_WEIGHT_CODES=0 / 1, the same binary, alternated) on BERT-large fp8
set -u
S0=$(date +%s)
me=c2; . scripts/device/unpack.sh
el() { echo $(( $(date +%s) - S0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $L/gpu.txt
T=.dev/new/tests
tt() { local n=$1; s=$(date +%s); timeout $2 stdbuf -oL $T/$n > $L/$n.log 2>&1
  echo "$n rc $? $(grep -E '^[0-9]+ passed' $L/$n.log|tail -1) ($(( $(date +%s)-s )) s)"; grep -m8 FAIL $L/$n.log | cut -c1-220; pack; }
tt gpu_fp8_codes 240
tt gpu_optim_amp 120
tt gpu_linear_fp8 120
bb() { local n=$1 lim=$2; shift 2; [ $(el) -lt 500 ] || { echo "$n: no time"; return; }
       timeout $lim env "$@" --json $L/$n.json > $L/$n.log 2>&1
       echo "$n (rc $?) at $(el) s:"; grep -E "^(bert|resnet)" $L/$n.log | cut -c1-120; pack; }
for i in 1 2; do
  bb s128_c0_$i 70 CTRAIN_FP8_WEIGHT_CODES=0 $NEW bench --models bert-large --seq 128 --batch 256 --precision fp8 --time-limit 3
  bb s128_c1_$i 70 CTRAIN_FP8_WEIGHT_CODES=1 $NEW bench --models bert-large --seq 128 --batch 256 --precision fp8 --time-limit 3
done
bb s512_c0 70 CTRAIN_FP8_WEIGHT_CODES=0 $NEW bench --models bert-large --seq 512 --batch 32 --precision fp8 --time-limit 3
bb s512_c1 70 CTRAIN_FP8_WEIGHT_CODES=1 $NEW bench --models bert-large --seq 512 --batch 32 --precision fp8 --time-limit 3
echo "total $(el) s"
