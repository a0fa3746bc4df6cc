#!/bin/bash
: "${OUT:?}"
mkdir -p .p && tar xJf out/probe.tar.xz -C .p
nvidia-smi --query-gpu=name --format=csv,noheader
for a in "" "--plain"; do
  timeout 90 .p/conv1x1_bn_probe 256 $a > "$OUT/probe256$a.log" 2>&1; echo "== 256 $a rc $?"; cat "$OUT/probe256$a.log"
done
timeout 60 .p/conv1x1_bn_probe 64 > "$OUT/probe64.log" 2>&1; echo "== 64 rc $?"; cat "$OUT/probe64.log"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
for sk in 3 279; do
timeout 150 $NCU --clock-control none --kernel-name regex:conv1x1_bn_kernel --launch-skip $sk --launch-count 1 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
  --section SchedulerStats --section LaunchStats --section ComputeWorkloadAnalysis \
  .p/conv1x1_bn_probe 256 > "$OUT/ncu_$sk.log" 2>&1
echo "== ncu skip $sk rc $?"; grep -vE "^==PROF==|^conv1x1|^stage|^shape|^copy" "$OUT/ncu_$sk.log" | grep -E "Throughput|Duration|Stall|Warp Cycles|Eligible|Issued|Occupancy|Registers|Shared|L2 Hit|L1/TEX Hit|DRAM|Memory|Executed Ipc|Block Limit|One or More|No Eligible" | head -60
done
