#!/bin/bash
# bn_kernels.sh — on one GPU, with binaries built elsewhere (scripts/device/stage.sh):
# our batch-norm kernels (ops/batchnorm.cu) after a change, in one call:
#   1. gpu_batchnorm (every form, type and path against the CPU reference)
#      and gpu_pool (max pooling's channel-vector kernels likewise);
#   2. gpu_bn_compare --no-check (own against cuDNN, ResNet-50's shapes at
#      batch 256: the timing table of docs/kernels.md);
#   3. (unit) ResNet-50 bs 256 bf16 with CTRAIN_CONV_BN=unit (the unit runs
#      our kernels for 32 of its 53 batch norms) and separate: `ctrain bench`;
#      (timeline) the unit's CUPTI timeline (per-kernel ms a step, beside the
#      one of an earlier call);
#   4. (probe) build/jpeg_gpu_probe: nvJPEG alone, one decode thread and
#      two, beside a busy GPU;
#   5. (fused) scripts/device/conv_bn.sh fused for bf16 with its timeline.
# PARTS picks the parts by name (default all).
#
#   OUT=dir [PARTS="tests compare unit timeline probe fused"] bash scripts/device/bn_kernels.sh
# Logs: $OUT/logs.tgz. Reads out/new.tar.xz (carry out/).
: "${OUT:?set OUT to a folder for the logs}"
set -u
PARTS=${PARTS:-tests compare unit timeline probe fused}
want() { case " $PARTS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
me=bn_kernels.sh; . scripts/device/unpack.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$L/gpu.txt"
T=.dev/new/tests
if want tests; then
    for t in gpu_batchnorm gpu_pool; do
        timeout 90 "$T/$t" > "$L/$t.log" 2>&1
        echo "$t: status $?, $(tail -n 1 "$L/$t.log")"
        grep -m8 FAIL "$L/$t.log" | cut -c1-220
    done
    pack
fi
if want compare; then
    timeout 120 "$T/gpu_bn_compare" --no-check > "$L/gpu_bn_compare.log" 2>&1
    echo "gpu_bn_compare --no-check: status $?"
    grep -E "^[0-9]+x[0-9]+x" "$L/gpu_bn_compare.log" | grep bf16 | head -15
    pack
fi
if want unit; then
    CTRAIN_CONV_BN=unit timeout 80 "$NEW" bench --models resnet50 --batch 256 \
        --precision bf16 --time-limit 5 --json "$L/unit.json" > "$L/unit.log" 2>&1
    echo "bench unit (status $?):"; grep -E '^resnet50' "$L/unit.log" | head -2
    CTRAIN_CONV_BN=separate timeout 80 "$NEW" bench --models resnet50 --batch 256 \
        --precision bf16 --time-limit 5 --json "$L/separate.json" > "$L/separate.log" 2>&1
    echo "bench separate (status $?):"; grep -E '^resnet50' "$L/separate.log" | head -2
    pack
fi
if want timeline; then
    CTRAIN_CONV_BN=unit CTRAIN_TIMELINE=/tmp/tl_unit.json:8:3 timeout 80 "$NEW" train \
        --model resnet50 --data synthetic --batch 256 --precision bf16 --graph --steps 12 \
        --log-every 4 --no-eval > "$L/tl_unit.log" 2>&1
    echo "timeline unit (status $?)"; cp /tmp/tl_unit.json.txt "$L/tl_unit.txt"
    head -30 "$L/tl_unit.txt" | cut -c1-140
    pack
fi
if want probe; then   # nvJPEG beside a busy GPU: one decode thread, then two
    timeout 60 .dev/new/jpeg_gpu_probe 2048 256 4 90 > "$L/jpeg_probe.log" 2>&1
    echo "jpeg_gpu_probe (status $?):"; grep '"nvjb"' "$L/jpeg_probe.log" | cut -c1-200
    pack
fi
if want fused; then
    rm -f "$OUT/logs.tgz"; mv "$L" "$OUT/bn_logs"
    PRECS=bf16 TL=1 OUT=$OUT bash scripts/device/conv_bn.sh fused
    mv "$OUT/bn_logs" "$OUT/logs/bn"; pack
fi
