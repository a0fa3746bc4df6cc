#!/bin/bash
# fusion_probe.sh — on one GPU, with binaries built elsewhere (scripts/device/stage.sh):
# which fused convolution graphs of ResNet50's step cuDNN runs on this card
# (scripts/cudnn_fusion_probe.c: conv + BN statistics, BN apply + ReLU as the
# conv's prologue, dgrad + ReLU backward + the BN bias gradient), their time
# against the plain convolutions plus the passes they remove, and their
# results against the plain graphs.
#
#   OUT=dir bash scripts/device/fusion_probe.sh [N]      (default 256)
#
# bf16 then f16 over the five shapes, at most 4 candidates a graph (each
# runtime-compiled: seconds apiece); ~5-8 minutes. The log is under $OUT.
# Reads out/new.tar.xz, so the device call carries the ignored folder out/.
: "${OUT:?set OUT to a folder for the logs}"
set -u
me=fusion_probe.sh; . scripts/device/unpack.sh   # L, pack, NEW
N=${1:-256}
timeout 260 .dev/new/cudnn_fusion_probe "$N" --dtype bf16 > "$L/probe_bf16.log" 2>&1
echo "bf16 (status $?)"; cat "$L/probe_bf16.log"
timeout 260 .dev/new/cudnn_fusion_probe "$N" --dtype f16 > "$L/probe_f16.log" 2>&1
echo "f16 (status $?)"; cat "$L/probe_f16.log"
pack
