#!/bin/bash
# sm90_default.sh — what flipping CTRAIN_ATTN's default to sm90 needs (docs/kernels.md,
# "Attention of our own on wgmma"): the GPU tests that run attention inside a model or a
# captured step, with CTRAIN_ATTN=sm90 in their environment, then the step A/B repeated,
# sm90 (dq kernel and cluster) against cuDNN, at BERT-large fp8 seq 512 bs 32 and seq 128
# bs 256, alternated three times.
#   scripts/device/stage.sh build new
#   OUT=dir bash scripts/device/sm90_default.sh          (~5 minutes on an H100)
set -u
me=sm90_default; . scripts/device/unpack.sh; . scripts/device/steps.sh
export STEPS_BUDGET=${STEPS_BUDGET:-300}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $L/gpu.txt
for t in gpu_attention_qkv gpu_graph gpu_grad_fresh gpu_linear_fp8 gpu_transformer_ops; do
    CTRAIN_ATTN=sm90 tt $t 120
done
S5="--models bert-large --seq 512 --batch 32 --precision fp8 --time-limit 3"
S1="--models bert-large --seq 128 --batch 256 --precision fp8 --time-limit 3"
for r in 1 2 3; do
    bb b512_cudnn_$r 70 CTRAIN_ATTN=cudnn $NEW bench $S5
    bb b512_kernel_$r 70 CTRAIN_ATTN=sm90 CTRAIN_ATTN_SM90_DQ=kernel $NEW bench $S5
    bb b128_cudnn_$r 90 CTRAIN_ATTN=cudnn $NEW bench $S1
    bb b128_kernel_$r 90 CTRAIN_ATTN=sm90 CTRAIN_ATTN_SM90_DQ=kernel $NEW bench $S1
    bb b128_cluster_$r 90 CTRAIN_ATTN=sm90 CTRAIN_ATTN_SM90_DQ=cluster $NEW bench $S1
done
pack
echo "total $(el) s"
