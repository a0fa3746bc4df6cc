#!/bin/bash
# The FP8 cast-transpose with the next tile's loads in flight (ops/fp8.cu): tests, kernel times
# old / new (CUPTI), the fp8 rows old / new alternated
set -u
me=pf; . scripts/device/unpack.sh; . scripts/device/steps.sh
nvidia-smi --query-gpu=name --format=csv,noheader | tee $L/gpu.txt
STEPS_BUDGET=300
tt gpu_fp8_gemm 150
tt gpu_linear_fp8 120
tt gpu_fp8 120
W=$(mktemp -d)
tl() { local n=$1 b=$2; shift 2; CTRAIN_TIMELINE=$W/$n.json:8:3 timeout 100 $b train --model bert-large --data synthetic --seq 128 --batch 256 --optim adamw --lr 1e-4 --graph --steps 11 --log-every 5 --no-eval "$@" > $L/$n.log 2>&1
  echo "$n rc $?"; cp $W/$n.json.txt $L/$n.txt 2>/dev/null; sed -n 2p $L/$n.txt; grep -E "^ +[0-9.]+ +[0-9.]+ +[0-9.]+ .*fp8_cast" $L/$n.txt | cut -c1-110 | head -6; pack; }
tl tl_old $OLD --precision fp8
tl tl_new $NEW --precision fp8
for r in 1 2; do
  bb f_old$r 80 $OLD bench --models bert-large --seq 128 --batch 256 --precision fp8 --time-limit 3
  bb f_new$r 80 $NEW bench --models bert-large --seq 128 --batch 256 --precision fp8 --time-limit 3
done
bb s_old 80 $OLD bench --models bert-large --seq 512 --batch 32 --precision fp8 --time-limit 3
bb s_new 80 $NEW bench --models bert-large --seq 512 --batch 32 --precision fp8 --time-limit 3
echo "total $(el) s"
