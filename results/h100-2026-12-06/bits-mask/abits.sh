#!/bin/bash
# the add_norm's keep bits (CTRAIN_ADD_NORM_BITS=1) and cuDNN's attention on ctrain's mask
# (CTRAIN_ATTN_CUDNN_MASK=1) against the defaults, one binary: gpu_add_norm, then BERT-large
# seq 128 bs 256 bf16,fp8 old / new / new / old, seq 512 bs 32 bf16,fp8 new / old, the new
# step's timeline (bf16 seq 128), PyTorch's row, gpu_flash_attn
set -u
S0=$(date +%s)
me=abits; . scripts/device/unpack.sh
el() { echo $(( $(date +%s) - S0 )); }
T=.dev/new/tests
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader | tee $L/gpu.txt
s=$(date +%s); CTRAIN_PLAN_CACHE=off timeout 100 stdbuf -oL $T/gpu_add_norm > $L/gpu_add_norm.log 2>&1
echo "gpu_add_norm rc $? $(grep -E '^[0-9]+ passed' $L/gpu_add_norm.log|tail -1) ($(( $(date +%s)-s )) s)"
grep -m5 FAIL $L/gpu_add_norm.log | cut -c1-200
bb() { local n=$1 bin=$2; shift 2; [ $(el) -lt 470 ] || { echo "$n: no time"; return; }
       timeout 120 $bin bench "$@" --time-limit 3 --json $L/$n.json > $L/$n.log 2>&1
       echo "$n (rc $?) at $(el) s:"; grep -E "^(bert|resnet)" $L/$n.log | cut -c1-200; pack; }
s=$(date +%s); CTRAIN_PLAN_CACHE=off timeout 90 stdbuf -oL $T/gpu_attention_cudnn > $L/gpu_attention_cudnn.log 2>&1
echo "gpu_attention_cudnn rc $? $(grep -E '^[0-9]+ passed' $L/gpu_attention_cudnn.log|tail -1) ($(( $(date +%s)-s )) s)"
grep -m8 "FAIL\|SKIP" $L/gpu_attention_cudnn.log | cut -c1-220; pack
B128="--models bert-large --seq 128 --batch 256 --precision bf16,fp8"
B512="--models bert-large --seq 512 --batch 32 --precision bf16,fp8"
bb b128_a $NEW $B128
CTRAIN_ADD_NORM_BITS=1 bb b128_bits $NEW $B128
CTRAIN_ADD_NORM_BITS=1 CTRAIN_ATTN_CUDNN_MASK=1 bb b128_bitsmask $NEW $B128
bb b512_a $NEW $B512
CTRAIN_ADD_NORM_BITS=1 bb b512_bits $NEW $B512
CTRAIN_ADD_NORM_BITS=1 CTRAIN_ATTN_CUDNN_MASK=1 bb b512_bitsmask $NEW $B512
bb b128_a2 $NEW $B128
CTRAIN_ADD_NORM_BITS=1 bb b128_bits2 $NEW $B128
python3 - $L/b128_a.json $L/b128_bits.json $L/b128_bitsmask.json $L/b512_a.json $L/b512_bits.json $L/b512_bitsmask.json <<'P'
import json,sys
for f in sys.argv[1:]:
    for r in json.load(open(f))["results"]:
        print({k:r.get(k) for k in ("seq","precision","samples_per_s","peak_mem_bytes","live_peak_bytes","live_peak_at")})
P
if [ $(el) -lt 470 ]; then
  CTRAIN_TIMELINE=/tmp/tl.json:8:3 timeout 90 $NEW train --model bert-large --data synthetic --seq 128 \
     --batch 256 --precision bf16 --graph --optim adamw --lr 1e-4 --steps 11 --log-every 5 --no-eval > $L/tl.log 2>&1
  echo "timeline rc $? at $(el) s"; cp /tmp/tl.json.txt $L/ 2>/dev/null; sed -n 2p /tmp/tl.json.txt
  grep -E "ln_|tc_|cudnn|fmha|sm90_flash" /tmp/tl.json.txt | head -8 | cut -c1-150; pack
fi
if [ $(el) -lt 430 ]; then
  timeout 100 python3 scripts/torch_bench.py --models bert-large --seq 128 --batch 256 --precision bf16 --time-limit 3 > $L/torch_bert128.log 2>&1
  echo "torch bert128 rc $? at $(el) s"; grep -E "^bert" $L/torch_bert128.log | cut -c1-200; pack
fi
if [ $(el) -lt 450 ]; then
  s=$(date +%s); CTRAIN_PLAN_CACHE=off timeout 70 stdbuf -oL $T/gpu_flash_attn > $L/gpu_flash_attn.log 2>&1
  echo "gpu_flash_attn rc $? $(grep -E '^[0-9]+ passed' $L/gpu_flash_attn.log|tail -1) ($(( $(date +%s)-s )) s)"
  grep -m5 FAIL $L/gpu_flash_attn.log | cut -c1-200; pack
fi
echo "total $(el) s"
