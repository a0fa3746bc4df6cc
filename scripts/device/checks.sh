#!/bin/bash
# checks.sh — on one GPU, with binaries built elsewhere (scripts/device/stage.sh):
# the first call of a GPU session after work done without one. Runs every GPU
# test program whose code changed since the last run on a GPU, in the order
# that unblocks most (a failure here comes before any measurement):
#   gpu_fp8, gpu_fp8_gemm, gpu_linear_fp8   --precision fp8's casts, GEMM, op
#   gpu_linear_epilogue    bias and bias-gradient epilogues (CTRAIN_LINEAR_BGRAD)
#   gpu_transformer_ops    LayerNorm's vector kernels, dropout's vector path
#   gpu_add_norm           dropout + residual add + LayerNorm fused (CTRAIN_ADD_NORM)
#   gpu_conv_plan_store    convolution plans kept on disk and taken back
#   gpu_jpeg               the nvJPEG planes path (CTRAIN_JPEG_PLANES) beside the RGB one
#   gpu_graph              eager = graph bit for bit (the interval-mean loss)
#   gpu_conv2d             the convolution search itself (store off)
# Each program's last line, its first failures, and the total as tests/run.sh
# counts it. Two parts, each one device call (~5 minutes on an H200):
#
#   OUT=dir bash scripts/device/checks.sh 1    fp8, epilogues, LayerNorm, add_norm, nvJPEG
#   OUT=dir bash scripts/device/checks.sh 2    plans on disk, graphs, the convolution search
#
# Reads out/new.tar.xz, so the device call carries the ignored folder out/.
: "${OUT:?set OUT to a folder for the logs}"
set -u
me=checks.sh; . scripts/device/unpack.sh   # L, pack, NEW
T=.dev/new/tests
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv > "$L/gpu.txt" 2>&1
cat "$L/gpu.txt"
pass=0; nfail=0
case ${1:-1} in
    1) progs="gpu_fp8 gpu_fp8_gemm gpu_linear_fp8 gpu_linear_epilogue gpu_transformer_ops gpu_add_norm gpu_jpeg" ;;
    *) progs="gpu_conv_plan_store gpu_graph gpu_conv2d" ;;
esac
for t in $progs; do
    s=$(date +%s)
    # the store's own test sets CTRAIN_PLAN_CACHE itself; the others search afresh
    CTRAIN_PLAN_CACHE=off timeout 300 "$T/$t" > "$L/$t.log" 2>&1; rc=$?
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$L/$t.log" | tail -n 1)
    if [ -z "$line" ]; then
        echo "$t: FAIL (status $rc, no summary)"; nfail=$((nfail + 1))
        tail -5 "$L/$t.log"
        continue
    fi
    p=${line%% *}; f=$(echo "$line" | cut -d' ' -f3)
    [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
    pass=$((pass + p)); nfail=$((nfail + f))
    echo "$t: $line ($(( $(date +%s) - s )) s)"
    grep -m4 FAIL "$L/$t.log" | cut -c1-220
    pack
done
echo "$pass passed, $nfail failed"
pack
