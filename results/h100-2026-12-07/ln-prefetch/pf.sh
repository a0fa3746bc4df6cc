#!/bin/bash
# LayerNorm rows prefetched into L2: CTRAIN_LN_PREFETCH 0 / 1 / 2, alternated
set -u
me=pf; . scripts/device/unpack.sh; . scripts/device/steps.sh
export STEPS_BUDGET=${STEPS_BUDGET:-330}
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $L/gpu.txt
for t in gpu_add_norm gpu_norm_codes gpu_transformer_ops; do
  s=$(date +%s); CTRAIN_LN_PREFETCH=2 timeout 120 .dev/new/tests/$t > $L/${t}_pf2.log 2>&1
  echo "$t prefetch 2 rc $? $(grep -E '^[0-9]+ passed' $L/${t}_pf2.log | tail -1) ($(( $(date +%s) - s )) s)"
done
pack
B="--models bert-large --seq 128 --batch 256 --time-limit 3"
S="--models bert-large --seq 512 --batch 32 --time-limit 3"
for rep in a b; do
  for k in 0 1 2; do bb f128_${k}$rep 60 CTRAIN_LN_PREFETCH=$k $NEW bench $B --precision fp8; done
done
for k in 0 1 2; do bb f512_$k 50 CTRAIN_LN_PREFETCH=$k $NEW bench $S --precision fp8; done
for k in 0 2 1; do bb h128_$k 60 CTRAIN_LN_PREFETCH=$k $NEW bench $B --precision bf16; done
echo "total $(el) s"
