#!/bin/bash
# next session's first call (~400 s; staged from c89f6a0, whose re-read changed kernels unmeasured): the stem test's new cases (8 images, 300 x 31, 5 x 63:
# compiled, never run), the FP8 codes' test, then the issue rows with PyTorch beside (ask an H200)
set -u
me=next; . scripts/device/unpack.sh; . scripts/device/steps.sh
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $L/gpu.txt
tt gpu_conv_stem 120
tt gpu_fp8_codes 120
bb b128 100 $NEW bench --models bert-large --seq 128 --batch 256 --precision bf16,fp8 --time-limit 3
bb b512 100 $NEW bench --models bert-large --seq 512 --batch 32 --precision bf16,fp8 --time-limit 3
bb r256 150 $NEW bench --models resnet50 --batch 256 --precision tf32,bf16 --time-limit 3
bb py_r 150 python3 scripts/torch_bench.py --models resnet50 --batch 256 --precision tf32,bf16 --time-limit 3
echo "total $(el) s"
