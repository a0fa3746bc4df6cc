#!/bin/bash
# call 3: the FP8 tests with fast accumulation on by default, then the BERT rows (and on an
# H200 the ResNet rows beside PyTorch).
set -u
me=c3; . scripts/device/unpack.sh; . scripts/device/steps.sh
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $L/gpu.txt
STEPS_BUDGET=480
for t in gpu_linear_fp8 gpu_fp8 gpu_fp8_codes gpu_dz_codes gpu_attention_qkv; do tt $t 150; done
bb b128 100 $NEW bench --models bert-large --seq 128 --batch 256 --precision bf16,fp8 --time-limit 3
bb b512 100 $NEW bench --models bert-large --seq 512 --batch 32 --precision bf16,fp8 --time-limit 3
if grep -q H200 $L/gpu.txt; then
  bb r256 120 $NEW bench --models resnet50 --batch 256 --precision tf32,bf16 --time-limit 3
  timeout 120 python3 scripts/torch_bench.py --models resnet50 --batch 256 --precision tf32 \
    --time-limit 3 > $L/torch_r256.log 2>&1; grep -E "^resnet" $L/torch_r256.log
fi
W=$(mktemp -d)
for z in 0 1; do
  [ "$(el)" -lt 520 ] || break
  CTRAIN_FP8_DZ_CODES=$z CTRAIN_TIMELINE=$W/z$z.json:8:3 timeout 90 $NEW train --model bert-large \
    --data synthetic --seq 128 --batch 256 --precision fp8 --optim adamw --lr 1e-4 --graph \
    --steps 11 --log-every 5 --no-eval > $L/z$z.log 2>&1
  echo "z$z rc $? at $(el) s"; cp $W/z$z.json.txt $L/z$z.txt 2>/dev/null; sed -n 2,2p $L/z$z.txt; pack
done
python3 scripts/timeline_diff.py $L/z0.txt $L/z1.txt --top 15 2>&1 | cut -c1-200 | tee $L/zdiff.txt
pack; echo "total $(el) s"
