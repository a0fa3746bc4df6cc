#!/bin/bash
# Second call: tf32 with CTRAIN_BN_PAIR off / add_relu / all beside PyTorch tf32 (issue 19's
# 1.3x), then BERT-large fp8 seq 128 bs 256 and seq 512 bs 32 (issue 20's H200 bars)
set -u
me=s9; . scripts/device/unpack.sh; . scripts/device/steps.sh
export STEPS_BUDGET=${STEPS_BUDGET:-480}
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $L/gpu.txt
R="--models resnet50 --batch 256 --time-limit 3"
bb t0 170 $NEW bench $R --precision tf32
bb t1 50 CTRAIN_BN_PAIR=add_relu $NEW bench $R --precision tf32
timeout 120 python3 scripts/torch_bench.py $R --precision tf32 > $L/pt_tf32.log 2>&1
echo "pt tf32: $(grep -E '^resnet' $L/pt_tf32.log | cut -c1-120)"; pack
bb t2 50 CTRAIN_BN_PAIR=all $NEW bench $R --precision tf32
bb t0b 50 $NEW bench $R --precision tf32
bb t1b 50 CTRAIN_BN_PAIR=add_relu $NEW bench $R --precision tf32
bb b128 110 $NEW bench --models bert-large --seq 128 --batch 256 --precision fp8 --time-limit 3
bb b512 100 $NEW bench --models bert-large --seq 512 --batch 32 --precision fp8 --time-limit 3
pack
echo "total $(el) s"
