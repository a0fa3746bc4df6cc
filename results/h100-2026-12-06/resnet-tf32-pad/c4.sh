#!/bin/bash
# ResNet-50 tf32 bs 256: the stem padded to 4 channels (CTRAIN_CONV_PAD=always) against the
# default, PyTorch's channels_last and NCHW in the same call (issue 19's 1.3x); then the
# FP8 codes' final binary through the optimizer tests
set -u
S0=$(date +%s)
me=c4; . scripts/device/unpack.sh
el() { echo $(( $(date +%s) - S0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $L/gpu.txt
T=.dev/new/tests
tt() { local n=$1; s=$(date +%s); timeout $2 stdbuf -oL $T/$n > $L/$n.log 2>&1
  echo "$n rc $? $(grep -E '^[0-9]+ passed' $L/$n.log|tail -1) ($(( $(date +%s)-s )) s)"; grep -m8 FAIL $L/$n.log | cut -c1-220; pack; }
bb() { local n=$1 lim=$2; shift 2; [ $(el) -lt 420 ] || { echo "$n: no time"; return; }
       timeout $lim env "$@" --json $L/$n.json > $L/$n.log 2>&1
       echo "$n (rc $?) at $(el) s:"; grep -E "^(bert|resnet)" $L/$n.log | cut -c1-120; pack; }
tt gpu_fp8_codes 120
tt gpu_optim_amp 60
bb r_def1 120 $NEW bench --models resnet50 --batch 256 --precision tf32 --time-limit 3
bb r_pad1 150 CTRAIN_CONV_PAD=always $NEW bench --models resnet50 --batch 256 --precision tf32 --time-limit 3
bb t_cl 150 python3 scripts/torch_bench.py --models resnet50 --batch 256 --precision tf32 --time-limit 3
bb t_nchw 150 python3 scripts/torch_bench.py --models resnet50 --batch 256 --precision tf32 --time-limit 3 --nchw
bb r_def2 60 $NEW bench --models resnet50 --batch 256 --precision tf32 --time-limit 3
bb r_pad2 60 CTRAIN_CONV_PAD=always $NEW bench --models resnet50 --batch 256 --precision tf32 --time-limit 3

tt gpu_graph 240
echo "total $(el) s"
