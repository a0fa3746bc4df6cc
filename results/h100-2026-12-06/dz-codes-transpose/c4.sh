#!/bin/bash
# call 4: the dz codes' transpose written by the add_norm backward's kernel: tests, then
# CTRAIN_FP8_DZ_CODES 0 / 1 alternated (the codes path now carries the transpose), seq 128
# and 512, and a timeline of the on run.
set -u
me=c4; . scripts/device/unpack.sh; . scripts/device/steps.sh
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $L/gpu.txt
STEPS_BUDGET=480
for t in gpu_dz_codes gpu_linear_fp8 gpu_add_norm gpu_fp8_codes; do tt $t 150; done
B="$NEW bench --models bert-large --seq 128 --batch 256 --precision fp8 --time-limit 3"
for r in 1 2; do
  bb z0_$r 45 CTRAIN_FP8_DZ_CODES=0 $B
  bb z1_$r 45 CTRAIN_FP8_DZ_CODES=1 $B
done
S="$NEW bench --models bert-large --seq 512 --batch 32 --precision fp8 --time-limit 3"
bb s0 45 CTRAIN_FP8_DZ_CODES=0 $S
bb s1 45 CTRAIN_FP8_DZ_CODES=1 $S
W=$(mktemp -d)
CTRAIN_TIMELINE=$W/t1.json:8:3 timeout 90 $NEW train --model bert-large --data synthetic --seq 128 \
  --batch 256 --precision fp8 --optim adamw --lr 1e-4 --graph --steps 11 --log-every 5 --no-eval \
  > $L/t1.log 2>&1
echo "t1 rc $? at $(el) s"; cp $W/t1.json.txt $L/t1.txt 2>/dev/null
grep -E "ln_bwd_vec_kernel|fp8_transpose_kernel|colsum_finish|cast_transpose_vec_kernel<__nv_bfloat16, 0, 1>" $L/t1.txt | head -6 | cut -c1-120
pack; echo "total $(el) s"
