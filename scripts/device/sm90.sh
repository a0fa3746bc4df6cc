#!/bin/bash
# sm90.sh — the wgmma attention's device run (ops/attention_sm90.h): the probe,
# the checks, the kernels old against new, the step A/B against cuDNN, the
# step's timeline for both, and ncu of each kernel.
#   scripts/device/stage.sh build new     (and, for the kernels' old side, an
#   out/old.tar.xz holding an earlier build's tests/gpu_attention_sm90)
#   OUT=dir bash scripts/device/sm90.sh

set -u
me=sm90; . scripts/device/unpack.sh; . scripts/device/steps.sh
export STEPS_BUDGET=${STEPS_BUDGET:-330}
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $L/gpu.txt
timeout 60 .dev/new/wgmma_probe > $L/wgmma.log 2>&1; echo "wgmma_probe rc $?"
grep -E "PASS|FAIL" $L/wgmma.log
CHECK_VERBOSE=1 timeout 150 .dev/new/tests/gpu_attention_sm90 > $L/sm90.log 2>&1
echo "gpu_attention_sm90 rc $?"
grep -E "FAIL|SKIP|passed" $L/sm90.log | head -20
timeout 100 .dev/new/tests/gpu_attention_qkv > $L/qkv.log 2>&1; echo "gpu_attention_qkv rc $?"
grep -E "FAIL|SKIP|passed" $L/qkv.log | head -10
timeout 120 .dev/new/tests/gpu_attention_sm90 --bench > $L/sm90_bench.log 2>&1; echo "bench rc $?"
cat $L/sm90_bench.log | grep kernel
for r in 1 2; do
  for v in old new; do
    [ -x .dev/$v/tests/gpu_attention_sm90 ] || continue
    timeout 60 .dev/$v/tests/gpu_attention_sm90 --bench sm90 | grep kernel | sed "s/^/$v: /"
  done
done 2>&1 | tee $L/old_new.log
pack
if grep -q " 0 failed" $L/sm90.log; then
  for a in sm90 cudnn sm90; do
    bb b512_$a 70 CTRAIN_ATTN=$a $NEW bench --models bert-large --seq 512 --batch 32 \
        --precision fp8 --time-limit 3
  done
  for a in sm90 cudnn; do
    bb b128_$a 90 CTRAIN_ATTN=$a $NEW bench --models bert-large --seq 128 --batch 256 \
        --precision fp8 --time-limit 3
  done
fi
# the step's timeline, cuDNN against sm90 (per kernel: scripts/timeline_diff.py)
if [ "$(el)" -lt 330 ]; then
  for a in cudnn sm90; do
    CTRAIN_ATTN=$a CTRAIN_TIMELINE=$L/tl_$a.json:8:4 timeout 60 $NEW bench --models bert-large \
      --seq 512 --batch 32 --precision fp8 --steps 14 --time-limit 20 > $L/tl_$a.log 2>&1
    echo "timeline $a rc $?"
  done
  python3 scripts/timeline_diff.py $L/tl_cudnn.json.txt $L/tl_sm90.json.txt --top 16 \
    > $L/timeline_diff.txt 2>&1
  sed -n 13,30p $L/timeline_diff.txt
  rm -f $L/tl_*.json
  pack
fi
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
for k in sm90_fwd_kernel sm90_dq_kernel sm90_dkdv_kernel; do
  [ "$(el)" -lt 420 ] || break
  timeout 90 $NCU --clock-control none -k regex:$k --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    --section Occupancy --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    .dev/new/tests/gpu_attention_sm90 --bench sm90 > $L/ncu_$k.txt 2>&1
  echo "ncu $k rc $?"
  grep -E "Duration|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Achieved Occupancy" \
    $L/ncu_$k.txt | head -12
  pack
done
echo "total $(el) s"
