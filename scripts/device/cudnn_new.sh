#!/bin/bash
# cudnn_new.sh — the same binary on the GPU machine's newer cuDNN. ctrain is linked against
# the toolkit's cuDNN (9.14, RUNPATH /usr/local/cuda/lib64); PyTorch's wheel brings its own
# (9.19 on 2026-12-07), whose engines for batch norm, the convolutions and fused attention
# may differ. LD_LIBRARY_PATH comes before a RUNPATH, so the wheel's library directory put
# there loads it (the bench's children inherit it; the rows' JSON names the version loaded).
#
#   OUT=dir bash scripts/device/cudnn_new.sh
#
#   1. The checks under the newer cuDNN first (a new cuDNN is run through them before it is
#      trusted: docs/kernels.md, "cuDNN's fused attention on the graph API"): gpu_bn_op_cudnn,
#      gpu_conv2d, gpu_attention_cudnn.
#   2. The rows, toolkit's / wheel's alternated: ResNet-50 bs 256 bf16, bs 64 bf16 and fp16,
#      bs 256 tf32; BERT-large seq 512 bs 32 fp8 and bf16 (attention is its largest piece).
# The plan store keys on cuDNN's version, so the first row of each precision under the
# wheel's searches (~80 s for ResNet-50); steps past STEPS_BUDGET seconds are left out.
set -u
me=cudnn_new; . scripts/device/unpack.sh; . scripts/device/steps.sh
export STEPS_BUDGET=${STEPS_BUDGET:-480}
W=$(python3 -c 'import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' \
    2>/dev/null)
if [ -z "$W" ] || ! ls "$W"/libcudnn.so.9* > /dev/null 2>&1; then
    echo "cudnn_new.sh: no cuDNN in PyTorch's wheel on this machine (nvidia.cudnn: '$W')"
    exit 2
fi
echo "the wheel's cuDNN: $W"; ls "$W" | head -20 > $L/wheel_libs.txt
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $L/gpu.txt
for t in gpu_bn_op_cudnn gpu_conv2d gpu_attention_cudnn; do
    s=$(date +%s)
    LD_LIBRARY_PATH="$W" timeout 90 stdbuf -oL ".dev/new/tests/$t" > "$L/${t}_new.log" 2>&1
    echo "$t (wheel's cuDNN) rc $? $(grep -E '^[0-9]+ passed' "$L/${t}_new.log" | tail -1)" \
         "($(( $(date +%s) - s )) s)"
    grep -m8 FAIL "$L/${t}_new.log" | cut -c1-200
done
pack
R="--models resnet50 --time-limit 3"
B="--models bert-large --seq 512 --batch 32 --time-limit 3"
bb r256_sys 60 $NEW bench $R --batch 256 --precision bf16
bb r256_whl 150 LD_LIBRARY_PATH="$W" $NEW bench $R --batch 256 --precision bf16
bb f512_sys 60 $NEW bench $B --precision fp8
bb f512_whl 90 LD_LIBRARY_PATH="$W" $NEW bench $B --precision fp8
bb r64_sys 50 $NEW bench $R --batch 64 --precision bf16,fp16
bb r64_whl 150 LD_LIBRARY_PATH="$W" $NEW bench $R --batch 64 --precision bf16,fp16
bb b512_sys 60 $NEW bench $B --precision bf16
bb b512_whl 60 LD_LIBRARY_PATH="$W" $NEW bench $B --precision bf16
bb t256_sys 60 $NEW bench $R --batch 256 --precision tf32
bb t256_whl 150 LD_LIBRARY_PATH="$W" $NEW bench $R --batch 256 --precision tf32
bb r256_whl2 60 LD_LIBRARY_PATH="$W" $NEW bench $R --batch 256 --precision bf16
bb r256_sys2 60 $NEW bench $R --batch 256 --precision bf16
pack
echo "total $(el) s"
