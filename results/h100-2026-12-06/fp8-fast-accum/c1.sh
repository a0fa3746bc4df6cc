#!/bin/bash
# call 1: the tests of the new defaults and of the dropped bf16 copy, then the fp8 A/B
# (fast accumulation, the weights' bf16 copy) alternated twice.
set -u
me=c1; . scripts/device/unpack.sh; . scripts/device/steps.sh
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $L/gpu.txt
STEPS_BUDGET=540
for t in gpu_fp8_codes gpu_dz_codes gpu_grad_fresh; do tt $t 150; done
B="$NEW bench --models bert-large --seq 128 --batch 256 --precision fp8 --time-limit 3"
for r in 1 2; do
  bb base_$r 45 CTRAIN_FP8_FAST_ACCUM=0 CTRAIN_FP8_WEIGHT_COPY=1 $B
  bb fast_$r 45 CTRAIN_FP8_FAST_ACCUM=1 CTRAIN_FP8_WEIGHT_COPY=1 $B
  bb nocopy_$r 45 CTRAIN_FP8_FAST_ACCUM=0 CTRAIN_FP8_WEIGHT_COPY=0 $B
  bb both_$r 45 CTRAIN_FP8_FAST_ACCUM=1 CTRAIN_FP8_WEIGHT_COPY=0 $B
done
pack; echo "total $(el) s"
