#!/bin/bash
# ncu on ctrain's stem kernels in the ResNet-50 step (tf32, bs 256): what limits them
set -u
me=c7; . scripts/device/unpack.sh
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
CTRAIN_CONV_STEM=own timeout 300 $NCU --clock-control none --kernel-name-base demangled -k "regex:stem_(fwd|wgrad)_kernel" \
  --launch-count 2 --set full -o $L/stem $NEW train --model resnet50 --data synthetic --batch 256 --precision tf32 \
  --optim sgd --lr 0.1 --steps 2 --no-eval > $L/ncu.log 2>&1
echo "ncu rc $?"; tail -3 $L/ncu.log
$NCU --import $L/stem.ncu-rep --page details --csv > $L/stem_details.csv 2>/dev/null
$NCU --import $L/stem.ncu-rep --print-summary per-kernel > $L/stem_summary.txt 2>&1
grep -E "Duration|Throughput|Achieved Occupancy|Registers|Shared Memory Configuration Size|Bank|Warp Cycles Per Issued|Issue Slots Busy|Block Limit" $L/stem_summary.txt | head -60
$NCU --import $L/stem.ncu-rep --page details 2>/dev/null | grep -E "stem_|Duration|Memory Throughput|DRAM Throughput|Compute \(SM\)|Achieved Occupancy|Theoretical Occupancy|Block Limit Shared|Issue Slots Busy|L1/TEX Hit|Bank Conflicts|Stall|One or More Eligible" | head -60
rm -f $L/stem.ncu-rep; pack
