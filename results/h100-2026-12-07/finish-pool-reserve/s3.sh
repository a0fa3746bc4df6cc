#!/bin/bash
# the column sums' finish on 8 columns x 64 slices (colsum_finish2; LayerNorm's dgamma/dbeta too);
# the stem pool's backward on 2 x 2 patches; what cuDNN's batch norm keeps in its reserve space
set -u
me=s3; . scripts/device/unpack.sh; . scripts/device/steps.sh
export STEPS_BUDGET=300
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $L/gpu.txt
for t in gpu_pool gpu_fp8_gemm gpu_dz_codes gpu_add_norm gpu_transformer_ops gpu_elementwise; do tt $t 40; done
mkdir -p $L/bnres; s=$(date +%s); timeout 70 .dev/new/bn_reserve_probe $L/bnres > $L/bnres/probe.log 2>&1
echo "bn_reserve_probe rc $? ($(( $(date +%s) - s )) s)"; grep -E "^(onehot|random)" $L/bnres/probe.log | cut -c1-150 | head -40; pack
B="--models bert-large --seq 128 --batch 256 --time-limit 3"
bb o8 50 $OLD bench $B --precision fp8
bb n8 50 $NEW bench $B --precision fp8
R="--models resnet50 --batch 256 --precision bf16 --time-limit 3"
bb or 45 $OLD bench $R
bb nr 45 $NEW bench $R
bb n8b 50 $NEW bench $B --precision fp8
bb o8b 50 $OLD bench $B --precision fp8
bb nr2 45 $NEW bench $R
bb or2 45 $OLD bench $R
pack
echo "total $(el) s"
