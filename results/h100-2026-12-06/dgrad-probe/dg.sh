#!/bin/bash
# The strided convolutions' data gradient: cuDNN's direct kernel against four stride-1 phases
# (build/cudnn_dgrad_probe), bf16 and f32 with TF32, batch 256
set -u
me=dg; . scripts/device/unpack.sh; . scripts/device/steps.sh
nvidia-smi --query-gpu=name --format=csv,noheader | tee $L/gpu.txt
timeout 280 .dev/new/cudnn_dgrad_probe 256 --dtype both > $L/dgrad_probe.txt 2>&1
echo "probe rc $? at $(el) s"; cat $L/dgrad_probe.txt | cut -c1-150; pack
