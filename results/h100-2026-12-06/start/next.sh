#!/bin/bash
# next session's first call (~420 s): the fp8 convergence check with q, k, v joined (the
# default now), the four BERT-large rows with PyTorch beside, the GPU tests today's changes touch
set -u
S0=$(date +%s)
me=next; . scripts/device/unpack.sh
el() { echo $(( $(date +%s) - S0 )); }
T=.dev/new/tests
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $L/gpu.txt
tt() { local n=$1; s=$(date +%s); timeout $2 stdbuf -oL $T/$n > $L/$n.log 2>&1
  echo "$n rc $? $(grep -E '^[0-9]+ passed' $L/$n.log|tail -1) ($(( $(date +%s)-s )) s)"; grep -m6 FAIL $L/$n.log | cut -c1-200; pack; }
for t in gpu_attention_qkv gpu_matmul_search gpu_linear_fp8 gpu_bert_parity gpu_graph; do tt $t 150; done
bb() { local n=$1; shift; [ $(el) -lt 300 ] || { echo "$n: no time"; return; }
       timeout 100 $NEW bench "$@" --time-limit 3 --json $L/$n.json > $L/$n.log 2>&1
       echo "$n (rc $?) at $(el) s:"; grep -E "^(bert|resnet)" $L/$n.log | cut -c1-130; pack; }
bb b128 --models bert-large --seq 128 --batch 256 --precision bf16,fp8
bb b512 --models bert-large --seq 512 --batch 32 --precision bf16,fp8
for sb in "128 256" "512 32"; do set -- $sb
  [ $(el) -lt 330 ] && { timeout 70 python3 scripts/torch_bench.py --models bert-large --seq $1 --batch $2 --precision bf16 --time-limit 3 > $L/torch_bert$1.log 2>&1
  echo "torch bert $1 rc $? at $(el) s"; grep -E "^bert" $L/torch_bert$1.log | cut -c1-130; pack; }
done
[ $(el) -lt 340 ] && { mkdir -p $L/conv; OUT=$L/conv timeout 300 bash scripts/device/fp8.sh converge 2>&1 | tail -12; pack; }
echo "total $(el) s"
