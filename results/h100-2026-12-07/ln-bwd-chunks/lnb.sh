#!/bin/bash
# LayerNorm's vector backward: CTRAIN_LN_BWD_CHUNKS 1024 (before) / 528 / 264, alternated
set -u
me=lnb; . scripts/device/unpack.sh; . scripts/device/steps.sh
export STEPS_BUDGET=${STEPS_BUDGET:-400}
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $L/gpu.txt
for k in 264 1024; do
  for t in gpu_add_norm gpu_norm_codes; do
    s=$(date +%s); CTRAIN_LN_BWD_CHUNKS=$k timeout 120 .dev/new/tests/$t > $L/${t}_$k.log 2>&1
    echo "$t chunks $k rc $? $(grep -E '^[0-9]+ passed' $L/${t}_$k.log | tail -1) ($(( $(date +%s) - s )) s)"
  done
done
pack
B="--models bert-large --seq 128 --batch 256 --time-limit 3"
S="--models bert-large --seq 512 --batch 32 --time-limit 3"
for rep in a b; do
  for k in 1024 528 264; do
    bb f128_${k}$rep 60 CTRAIN_LN_BWD_CHUNKS=$k $NEW bench $B --precision fp8
  done
done
for k in 1024 264 528; do bb f512_$k 50 CTRAIN_LN_BWD_CHUNKS=$k $NEW bench $S --precision fp8; done
for k in 1024 264 528; do bb h128_$k 60 CTRAIN_LN_BWD_CHUNKS=$k $NEW bench $B --precision bf16; done
echo "total $(el) s"
