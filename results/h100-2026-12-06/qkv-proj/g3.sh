#!/bin/bash
# GEMM search on by default: tests with the defaults, BERT on / off; CTRAIN_QKV_PROJ: its test, BERT
set -u
S0=$(date +%s)
me=g3; . scripts/device/unpack.sh
el() { echo $(( $(date +%s) - S0 )); }
T=.dev/new/tests
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader | tee $L/gpu.txt
tt() { local n=$1; s=$(date +%s); timeout $2 stdbuf -oL $T/$n > $L/$n.log 2>&1
  echo "$n rc $? $(grep -E '^[0-9]+ passed' $L/$n.log|tail -1) ($(( $(date +%s)-s )) s)"; grep -m6 FAIL $L/$n.log | cut -c1-200; pack; }
tt gpu_attention_qkv 90
tt gpu_matmul_search 90
tt gpu_linear_epilogue 90
tt gpu_linear_act 60
bb() { local n=$1; shift; [ $(el) -lt 150 ] || { echo "$n: no time"; return; }
       timeout 90 $NEW bench "$@" --time-limit 3 --json $L/$n.json > $L/$n.log 2>&1
       echo "$n (rc $?) at $(el) s:"; grep -E "^(bert|resnet)" $L/$n.log | cut -c1-130; grep -m3 -iE "error|fatal" $L/$n.log | cut -c1-200; pack; }
B128="--models bert-large --seq 128 --batch 256 --precision bf16"
B512="--models bert-large --seq 512 --batch 32 --precision bf16"
bb b128_def $B128
CTRAIN_QKV_PROJ=1 bb b128_qkv $B128
CTRAIN_GEMM_SEARCH=0 bb b128_nosearch $B128
CTRAIN_QKV_PROJ=1 bb b128_qkv2 $B128

CTRAIN_QKV_PROJ=1 bb b512_qkv $B512
bb b512_def $B512
CTRAIN_QKV_PROJ=1 CTRAIN_PLAN_CACHE=off timeout 60 $NEW train --model bert-base --data synthetic --seq 128 --batch 32 --precision bf16 --graph --optim adamw --lr 1e-4 --steps 20 --log-every 10 --no-eval > $L/train_qkv.log 2>&1; echo "train qkv rc $?"; grep -E "step|loss" $L/train_qkv.log | tail -3 | cut -c1-160
wc -l ~/.cache/ctrain/*.txt
pack
echo "total $(el) s"
