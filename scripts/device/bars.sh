#!/bin/bash
# bars.sh — the issues' bar rows on one GPU (meant for the H200 the bars name), with
# binaries built elsewhere (scripts/device/stage.sh): the checks of the newest defaults,
# then each row beside PyTorch 2.11 eager in the same call.
#
#   OUT=dir bash scripts/device/bars.sh
#
#   1. gpu_workspace (CTRAIN_CONV_WS=per_call, the default since 2026-12-07: the second
#      form, blocks forced with a 1 MiB shared workspace), gpu_bn_op_cudnn (the BN pair,
#      default add_relu), ResNet-50's parity against torchvision.
#   2. BERT-large fp8 seq 128 bs 256 (bar 2,600 seq/s) and seq 512 bs 32 (560).
#   3. ResNet-50 bs 256 tf32 (bar 1.3x PyTorch), bf16 and fp16 (8,500 img/s; peak memory
#      no higher than PyTorch's), PyTorch with the same options.
# An H200 without plans in out/plans.tgz searches ResNet-50's (~80 s a precision): about
# 8 minutes in all; the steps past STEPS_BUDGET seconds are left out.
set -u
me=bars; . scripts/device/unpack.sh; . scripts/device/steps.sh
export STEPS_BUDGET=${STEPS_BUDGET:-440}
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $L/gpu.txt
tt gpu_workspace 90
tt gpu_bn_op_cudnn 60
timeout 100 python3 scripts/torch_parity.py resnet 50 8 224 /tmp/ctrain_parity/resnet50 \
    > $L/parity_ref.log 2>&1 || echo "(no PyTorch reference: $L/parity_ref.log)"
timeout 100 .dev/new/tests/gpu_resnet_parity /tmp/ctrain_parity/resnet50 > $L/gpu_resnet_parity.log 2>&1
echo "gpu_resnet_parity rc $?: $(tail -1 $L/gpu_resnet_parity.log)"; pack
bb b128 90 $NEW bench --models bert-large --seq 128 --batch 256 --precision fp8 --time-limit 3
R="--models resnet50 --batch 256 --time-limit 3"
bb t256 150 $NEW bench $R --precision tf32
timeout 60 python3 scripts/torch_bench.py $R --precision tf32 --json $L/pt_t.json > $L/pt_t.log 2>&1
echo "PyTorch tf32 (rc $?): $(grep -E '^resnet' $L/pt_t.log | cut -c1-110)"; pack
bb b512 70 $NEW bench --models bert-large --seq 512 --batch 32 --precision fp8 --time-limit 3
bb r256 220 $NEW bench $R --precision bf16,fp16
if [ "$(el)" -lt "$STEPS_BUDGET" ]; then
    timeout 90 python3 scripts/torch_bench.py $R --precision bf16,fp16 --json $L/pt_h.json \
        > $L/pt_h.log 2>&1
    echo "PyTorch bf16, fp16 (rc $?):"; grep -E '^resnet' $L/pt_h.log | cut -c1-110
fi
pack
echo "total $(el) s"
