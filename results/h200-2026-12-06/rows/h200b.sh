#!/bin/bash
# H200 baseline of the session's other ResNet rows: fp32 bs 256/64, small batches bf16/fp16, PyTorch beside, torch.compile bf16
set -u
me=h200b; . scripts/device/unpack.sh; . scripts/device/steps.sh
bb r32 200 $NEW bench --models resnet50 --batch 256,64 --precision fp32 --time-limit 3
bb py32 200 python3 scripts/torch_bench.py --models resnet50 --batch 256,64 --precision fp32 --time-limit 3
bb rsm 150 $NEW bench --models resnet50 --batch 32,64 --precision bf16,fp16 --time-limit 3
bb pysm 150 python3 scripts/torch_bench.py --models resnet50 --batch 32,64 --precision bf16,fp16 --time-limit 3
echo "total $(el) s"
