#!/bin/bash
# cuDNN SDPA engine knobs at BERT-large seq 512 bs 32 (p 0.1, no mask), bf16
set -u
me=knobs; . scripts/device/unpack.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $L/gpu.txt
timeout 280 .dev/new/cudnn_sdpa_probe 32 16 512 64 --knobs > $L/knobs512.log 2>&1
echo "probe rc $?"; grep -v "^ *knob .*rel diff" $L/knobs512.log | head -40
grep "^ *knob" $L/knobs512.log | sort -t'(' -k2 -n | head -12
pack
