#!/bin/bash
# add_norm's FP8 codes: checks, then CTRAIN_FP8_NORM_CODES 0/1 alternated, then a timeline
set -u
me=nc; . scripts/device/unpack.sh; . scripts/device/steps.sh
export STEPS_BUDGET=${STEPS_BUDGET:-430}
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $L/gpu.txt
tt gpu_norm_codes 150
tt gpu_add_norm 90
tt gpu_linear_fp8 90
B="--models bert-large --seq 128 --batch 256 --precision fp8 --time-limit 3"
S="--models bert-large --seq 512 --batch 32 --precision fp8 --time-limit 3"
bb b128_0 60 CTRAIN_FP8_NORM_CODES=0 $NEW bench $B
bb b128_1 60 CTRAIN_FP8_NORM_CODES=1 $NEW bench $B
bb b512_0 50 CTRAIN_FP8_NORM_CODES=0 $NEW bench $S
bb b512_1 50 CTRAIN_FP8_NORM_CODES=1 $NEW bench $S
bb b128_1b 60 CTRAIN_FP8_NORM_CODES=1 $NEW bench $B
bb b128_0b 60 CTRAIN_FP8_NORM_CODES=0 $NEW bench $B
bb b512_1b 50 CTRAIN_FP8_NORM_CODES=1 $NEW bench $S
bb b512_0b 50 CTRAIN_FP8_NORM_CODES=0 $NEW bench $S
W=$(mktemp -d)
CTRAIN_FP8_NORM_CODES=1 CTRAIN_TIMELINE=$W/tl.json:8:3 timeout 120 "$NEW" train --model bert-large \
    --data synthetic --seq 128 --batch 256 --precision fp8 --graph --optim adamw \
    --lr 1e-4 --steps 12 --log-every 4 --no-eval > "$L/tl.log" 2>&1
echo "timeline (status $?)"; cp "$W/tl.json.txt" "$L/tl_fp8_128_codes.txt" 2>/dev/null
head -30 "$L/tl_fp8_128_codes.txt" | cut -c1-150
pack
tt gpu_fp8_codes 150
s=$(date +%s); timeout 150 compute-sanitizer --tool memcheck .dev/new/tests/gpu_norm_codes > $L/memcheck.log 2>&1; echo "memcheck rc $? ($(( $(date +%s) - s )) s): $(grep -E "ERROR SUMMARY|passed" $L/memcheck.log | tail -2 | tr "\n" " ")"; pack
echo "total $(el) s"
