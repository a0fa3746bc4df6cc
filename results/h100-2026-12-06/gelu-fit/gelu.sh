#!/bin/bash
# GELU's Phi on a degree-7 fit (ops/normal_f32.h): tests, then old / new alternated on the rows it touches
set -u
me=gelu; . scripts/device/unpack.sh; . scripts/device/steps.sh
nvidia-smi --query-gpu=name --format=csv,noheader | tee $L/gpu.txt
STEPS_BUDGET=470
tt gpu_elementwise 120
tt gpu_linear_fp8 150
tt gpu_linear_act 120
W=$(mktemp -d)
tl() { local n=$1 b=$2; shift 2; CTRAIN_TIMELINE=$W/$n.json:8:3 timeout 100 $b train --model bert-large --data synthetic --seq 128 --batch 256 --optim adamw --lr 1e-4 --graph --steps 11 --log-every 5 --no-eval "$@" > $L/$n.log 2>&1
  echo "$n rc $?"; cp $W/$n.json.txt $L/$n.txt 2>/dev/null; grep -E "^ +[0-9.]+ +[0-9.]+ +[0-9.]+ .*(fp8_cast|map_kernel<.*Gelu|GELU|colsum_vec|act)" $L/$n.txt | cut -c1-120 | head -8; pack; }
tl tl_old $OLD --precision fp8
tl tl_new $NEW --precision fp8
for r in 1 2; do
  bb f_old$r 80 $OLD bench --models bert-large --seq 128 --batch 256 --precision fp8 --time-limit 3
  bb f_new$r 80 $NEW bench --models bert-large --seq 128 --batch 256 --precision fp8 --time-limit 3
done
bb b_old 80 $OLD bench --models bert-large --seq 128 --batch 256 --precision bf16 --time-limit 3
bb b_new 80 $NEW bench --models bert-large --seq 128 --batch 256 --precision bf16 --time-limit 3
echo "total $(el) s"
