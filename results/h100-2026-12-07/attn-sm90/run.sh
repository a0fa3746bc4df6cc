#!/bin/bash
# the wgmma probe, then the sm90 attention test and its timing
set -u
me=w2; . scripts/device/unpack.sh; . scripts/device/steps.sh
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $L/gpu.txt
timeout 120 .dev/new/wgmma_probe > $L/wgmma.log 2>&1; echo "wgmma_probe rc $?"
grep -E "PASS|FAIL|TFLOP|flash" $L/wgmma.log | head -30
CHECK_VERBOSE=1 timeout 150 .dev/new/tests/gpu_attention_sm90 > $L/sm90.log 2>&1; echo "gpu_attention_sm90 rc $?"
grep -E "FAIL|SKIP|passed" $L/sm90.log | head -40
timeout 100 .dev/new/tests/gpu_attention_qkv > $L/qkv.log 2>&1; echo "gpu_attention_qkv rc $?"
grep -E "FAIL|SKIP|passed" $L/qkv.log | head -20
grep -E "sm90 rel" $L/sm90.log | head -24
timeout 100 .dev/new/tests/gpu_attention_sm90 --bench > $L/sm90_bench.log 2>&1; echo "bench rc $?"
cat $L/sm90_bench.log | tail -8
pack
if grep -q " 0 failed" $L/sm90.log; then
  for a in cudnn sm90 cudnn sm90; do
    bb b512_$a 70 CTRAIN_ATTN=$a $NEW bench --models bert-large --seq 512 --batch 32 --precision fp8 --time-limit 3
  done
  pack
  for a in cudnn sm90; do
    bb b128_$a 90 CTRAIN_ATTN=$a $NEW bench --models bert-large --seq 128 --batch 256 --precision fp8 --time-limit 3
  done
  pack
fi
echo "total $(el) s"
