#!/bin/sh
# dev_run_dist.sh — the multi-GPU checks, for a machine with 2 (or more) GPUs.
#   scripts/dev_run_dist.sh [build] [test] [bench]     (no argument: all three)
#   build  make the binary and the tests into $BUILD (default .dev), ARCH=90
#   test   the host-side dist tests, then tests/gpu_dist (1 GPU x 2B against
#          2 GPUs x B, sync-bn, fp16/bf16, a killed rank with and without the
#          launcher) and a short 2-GPU ResNet50 run
#   bench  ctrain bench --gpus 2: resnet50 and bert-large in bf16, scaling
# Logs go to $OUT (default ./out); each stage prints a short summary.
set -u
OUT=${OUT:-out}
BUILD=${BUILD:-.dev}
B=$BUILD/ctrain
mkdir -p "$OUT"
stages="$*"
[ -z "$stages" ] && stages="build test bench"
for s in $stages; do
  case $s in
  build)
    echo "== build ($BUILD)"
    make -j"$(nproc)" ARCH=90 BUILD="$BUILD" > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
    grep -c nvcc "$OUT/build.log" | sed 's/^/nvcc runs: /'
    ;;
  test)
    echo "== GPUs"
    nvidia-smi -L 2>&1 | tee "$OUT/gpus.txt"
    nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
    echo "== host-side dist tests"
    for t in test_dist test_dist_env test_sync_bn; do
      "$BUILD/tests/$t" > "$OUT/$t.log" 2>&1; echo "$t: $(tail -1 "$OUT/$t.log")"
    done
    echo "== tests/gpu_dist (runs ctrain about 14 times; ~5 minutes)"
    rm -rf "$OUT/gpu_dist"
    CTRAIN_DIST_TEST_DIR="$OUT/gpu_dist" "$BUILD/tests/gpu_dist" > "$OUT/gpu_dist.log" 2>&1
    grep -E "FAIL|passed" "$OUT/gpu_dist.log"
    rm -f "$OUT"/gpu_dist/*.safetensors   # large; the logs say what was compared
    echo "== resnet50 bf16 on 2 GPUs, 60 steps"
    $B train --gpus 2 --model resnet50 --data synthetic --batch 256 --precision bf16 --steps 60 \
      --log-every 20 > "$OUT/train_r50_2gpu.log" 2>&1
    echo "status $?"; grep -E "data parallel|trained|ctrain:" "$OUT/train_r50_2gpu.log" | cut -c1-300
    ;;
  bench)
    echo "== ctrain bench --gpus 2"
    $B bench --gpus 2 --json "$OUT/bench_scaling.json" > "$OUT/bench_scaling.log" 2>&1
    echo "status $?"; sed -n '/^scaling on/,$p' "$OUT/bench_scaling.log"
    ;;
  *) echo "unknown stage '$s' (build, test, bench)"; exit 2 ;;
  esac
done
