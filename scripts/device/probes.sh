#!/bin/bash
# probes.sh — on one GPU, with binaries built elsewhere (scripts/device/stage.sh):
# the two measurements that decide the next step of two issues.
#   1. build/jpeg_gpu_probe 2048 256 4 90: the GPU image path, and nvJPEG's
#      batched decoder alone with RGB against YUV output, idle and beside a
#      busy GPU (does the decode block on its colour-conversion kernels?).
#   2. build/cudnn_fusion_probe: which fused convolution graphs of ResNet50's
#      step cuDNN runs on this card (conv + BN statistics, BN apply + ReLU as
#      the conv's prologue, dgrad + ReLU backward + the BN bias gradient),
#      their time against the plain convolutions plus the passes they remove,
#      and their results against the plain graphs; bf16, then f16.
#
#   OUT=dir bash scripts/device/probes.sh [N]      (the convolution batch, default 256)
#
# ~8-9 minutes. The logs are under $OUT.
# Reads out/new.tar.xz, so the device call carries the ignored folder out/.
: "${OUT:?set OUT to a folder for the logs}"
set -u
me=probes.sh; . scripts/device/unpack.sh   # L, pack, NEW
N=${1:-256}
timeout 90 .dev/new/jpeg_gpu_probe 2048 256 4 90 > "$L/jpeg_probe.log" 2>&1
echo "jpeg_gpu_probe (status $?)"; cat "$L/jpeg_probe.log"
pack
timeout 220 .dev/new/cudnn_fusion_probe "$N" --dtype bf16 > "$L/probe_bf16.log" 2>&1
echo "cudnn_fusion_probe bf16 (status $?)"; cat "$L/probe_bf16.log"
pack
timeout 220 .dev/new/cudnn_fusion_probe "$N" --dtype f16 > "$L/probe_f16.log" 2>&1
echo "cudnn_fusion_probe f16 (status $?)"; cat "$L/probe_f16.log"
pack
