#!/bin/bash
# branch.sh — the filter gradients' branch (engine/branch.h, CTRAIN_WGRAD_BRANCH) on
# one GPU: its checks, then ResNet-50 with it off and on, alternated in one call,
# PyTorch 2.11 eager beside the bf16 row, and the BERT-large fp8 rows.
#
#   OUT=dir bash scripts/device/branch.sh
#
#   1. gpu_graph (the graph equals the eager step bit for bit with the branch, f32,
#      bf16, accumulation with recompute, the overlapped update).
#   2. ResNet-50 bs 256 bf16 off / on, PyTorch bf16 bs 256 (channels_last); bs 64 bf16
#      and fp16 off / on.
#   3. BERT-large seq 128 bs 256 bf16 off / on (its Linears' weight gradients branch
#      too), then fp8 seq 128 bs 256 and seq 512 bs 32 (issue 20's bars).
#   4. bs 256 bf16 on / off again.
# Without plans for this card in out/plans.tgz the first bf16 and fp16 rows search
# (~80 s each); the steps past STEPS_BUDGET seconds are left out.
set -u
me=branch; . scripts/device/unpack.sh; . scripts/device/steps.sh
export STEPS_BUDGET=${STEPS_BUDGET:-490}
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $L/gpu.txt
tt gpu_graph 170
R="--models resnet50 --time-limit 3"
bb b256_off 200 CTRAIN_WGRAD_BRANCH=0 $NEW bench $R --batch 256 --precision bf16
bb b256_on 60 CTRAIN_WGRAD_BRANCH=1 $NEW bench $R --batch 256 --precision bf16
timeout 70 python3 scripts/torch_bench.py $R --batch 256 --precision bf16 \
    --json $L/pt_b256.json > $L/pt_b256.log 2>&1
echo "PyTorch bf16 bs 256 (rc $?): $(grep -E '^resnet' $L/pt_b256.log | cut -c1-110)"; pack
bb b64_off 50 CTRAIN_WGRAD_BRANCH=0 $NEW bench $R --batch 64 --precision bf16
bb b64_on 50 CTRAIN_WGRAD_BRANCH=1 $NEW bench $R --batch 64 --precision bf16
bb h64_off 150 CTRAIN_WGRAD_BRANCH=0 $NEW bench $R --batch 64 --precision fp16
bb h64_on 50 CTRAIN_WGRAD_BRANCH=1 $NEW bench $R --batch 64 --precision fp16
B="--models bert-large --seq 128 --batch 256 --time-limit 3"
bb bert_off 90 CTRAIN_WGRAD_BRANCH=0 $NEW bench $B --precision bf16
bb bert_on 60 CTRAIN_WGRAD_BRANCH=1 $NEW bench $B --precision bf16
bb f128 90 $NEW bench --models bert-large --seq 128 --batch 256 --precision fp8 --time-limit 3
bb f512 70 $NEW bench --models bert-large --seq 512 --batch 32 --precision fp8 --time-limit 3
bb b256_on2 60 CTRAIN_WGRAD_BRANCH=1 $NEW bench $R --batch 256 --precision bf16
bb b256_off2 60 CTRAIN_WGRAD_BRANCH=0 $NEW bench $R --batch 256 --precision bf16
pack
echo "total $(el) s"
