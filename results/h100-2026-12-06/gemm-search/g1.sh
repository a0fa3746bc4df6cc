#!/bin/bash
# GEMM search (CTRAIN_GEMM_SEARCH): its tests, BERT-large off / on / on (loaded) / off
set -u
S0=$(date +%s)
me=g1; . scripts/device/unpack.sh
el() { echo $(( $(date +%s) - S0 )); }
T=.dev/new/tests
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader | tee $L/gpu.txt
tt() { local n=$1; s=$(date +%s); timeout $2 stdbuf -oL $T/$n > $L/$n$3.log 2>&1
  echo "$n$3 rc $? $(grep -E '^[0-9]+ passed' $L/$n$3.log|tail -1) ($(( $(date +%s)-s )) s)"; grep -m8 FAIL $L/$n$3.log | cut -c1-200; pack; }
tt gpu_matmul_search 150 ""
CTRAIN_PLAN_CACHE=off tt gpu_matmul 120 ""
CTRAIN_PLAN_CACHE=off CTRAIN_GEMM_SEARCH=1 tt gpu_linear_epilogue 120 _search
CTRAIN_PLAN_CACHE=off CTRAIN_GEMM_SEARCH=1 tt gpu_linear_act 60 _search

export CTRAIN_PLAN_CACHE=$L/plans
mkdir -p $CTRAIN_PLAN_CACHE
bb() { local n=$1; shift; [ $(el) -lt 330 ] || { echo "$n: no time"; return; }
       timeout 120 $NEW bench "$@" --time-limit 3 --json $L/$n.json > $L/$n.log 2>&1
       echo "$n (rc $?) at $(el) s:"; grep -E "^(bert|resnet)" $L/$n.log | cut -c1-130; pack; }
B128="--models bert-large --seq 128 --batch 256 --precision bf16,fp8"
B512="--models bert-large --seq 512 --batch 32 --precision bf16,fp8"
CTRAIN_GEMM_SEARCH=0 bb b128_off $B128
CTRAIN_GEMM_SEARCH=1 CTRAIN_LOG=debug bb b128_on $B128
grep -h "matmul_cuda: .*candidate\|matmul algorithms chosen" $L/b128_on.log | sort | uniq -c | sort -rn | head -30 | cut -c1-170
CTRAIN_GEMM_SEARCH=1 bb b128_on2 $B128
CTRAIN_GEMM_SEARCH=0 bb b128_off2 $B128
CTRAIN_GEMM_SEARCH=1 bb b512_on $B512
CTRAIN_GEMM_SEARCH=0 bb b512_off $B512

ls -la $CTRAIN_PLAN_CACHE; wc -l $CTRAIN_PLAN_CACHE/*.txt
W=$(mktemp -d)
tl() { local n=$1; shift; [ $(el) -lt 350 ] || return; CTRAIN_TIMELINE=$W/$n.json:8:3 timeout 80 "$@" > $L/$n.log 2>&1
  echo "timeline $n rc $? at $(el) s"; cp $W/$n.json.txt $L/$n.txt; sed -n 2p $L/$n.txt; sed -n 6,18p $L/$n.txt | cut -c1-150; pack; }
BT="train --model bert-large --data synthetic --graph --optim adamw --lr 1e-4 --steps 11 --log-every 5 --no-eval"
CTRAIN_GEMM_SEARCH=1 tl tl128_on $NEW $BT --seq 128 --batch 256 --precision bf16
pack
echo "total $(el) s"
