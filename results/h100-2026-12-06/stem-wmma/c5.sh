#!/bin/bash
# ResNet's stem on ctrain's tensor-core kernels (CTRAIN_CONV_STEM=own): the test against the
# CPU reference, then ResNet-50 bs 256 tf32 and bf16 cudnn / own alternated, PyTorch beside
set -u
S0=$(date +%s)
me=c5; . scripts/device/unpack.sh
el() { echo $(( $(date +%s) - S0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $L/gpu.txt
T=.dev/new/tests
tt() { local n=$1; s=$(date +%s); timeout $2 stdbuf -oL $T/$n > $L/$n.log 2>&1
  echo "$n rc $? $(grep -E '^[0-9]+ passed' $L/$n.log|tail -1) ($(( $(date +%s)-s )) s)"; grep -m12 FAIL $L/$n.log | cut -c1-220; pack; }
bb() { local n=$1 lim=$2; shift 2; [ $(el) -lt 420 ] || { echo "$n: no time"; return; }
       timeout $lim env "$@" --json $L/$n.json > $L/$n.log 2>&1
       echo "$n (rc $?) at $(el) s:"; grep -E "^(bert|resnet)" $L/$n.log | cut -c1-120; pack; }
tt gpu_conv_stem 120
grep -q "^0 failed\| 0 failed" $L/gpu_conv_stem.log || { echo "stem test failed: no bench"; exit 0; }
for i in 1 2; do
  bb t_cud$i 120 CTRAIN_CONV_STEM=cudnn $NEW bench --models resnet50 --batch 256 --precision tf32 --time-limit 3
  bb t_own$i 120 CTRAIN_CONV_STEM=own $NEW bench --models resnet50 --batch 256 --precision tf32 --time-limit 3
done
bb b_cud 150 CTRAIN_CONV_STEM=cudnn $NEW bench --models resnet50 --batch 256 --precision bf16 --time-limit 3
bb b_own 120 CTRAIN_CONV_STEM=own $NEW bench --models resnet50 --batch 256 --precision bf16 --time-limit 3
bb py_cl 120 python3 scripts/torch_bench.py --models resnet50 --batch 256 --precision tf32 --time-limit 3
echo "total $(el) s"
