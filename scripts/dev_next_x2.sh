#!/bin/bash
# What session 3 left unverified, for one call on a 2-GPU machine (nvidia-h200-x2), binaries
# staged in .dev/ (ctrain + tests/gpu_*): the GPU tests with the new defaults (tensor-core
# attention for f16/bf16, 4 GiB conv search workspace; gpu_linear_epilogue and the
# save-mask cases of gpu_flash_attn), A/B of CTRAIN_ATTN_SAVE_MASK and CTRAIN_LINEAR_EPILOGUE,
# gpu_dist (sync-bn tolerance, --grad-reduce bf16 cases), and the 2-GPU scaling with f32 and
# bf16 gradient all-reduce.
# Usage: OUT=dir bash scripts/dev_next_x2.sh   (logs packed into $OUT/logs.tgz: only 8 files come back)
: "${OUT:?}"
L=$OUT/logs; mkdir -p $L
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
B=.dev/ctrain
for t in .dev/tests/gpu_*; do
  n=$(basename $t)
  case $n in gpu_dist|gpu_resnet_parity|gpu_bert_parity|gpu_bn_compare) continue;; esac
  CUDA_VISIBLE_DEVICES=0 timeout 120 $t > $L/$n.log 2>&1; echo "$n rc=$? $(tail -1 $L/$n.log)"
done | tee $L/tests_summary.txt
pack
echo "== A/B, BERT-large bf16 bs 32 (GPU 0): saved dropout bits, bias epilogue"
for v in "BASE=1 X=1" "MASK=1 CTRAIN_ATTN_SAVE_MASK=1" "EPI=1 CTRAIN_LINEAR_EPILOGUE=1"; do
  tag=${v%%=*}
  env $v CUDA_VISIBLE_DEVICES=0 timeout 60 $B bench --models bert-large --batch 32 --seq 128,512 --precision bf16 \
    --time-limit 5 --json $L/ab_$tag.json > $L/ab_$tag.log 2>&1
  echo "$tag rc=$?"; grep "^bert-large" $L/ab_$tag.log | cut -c1-100
done
CUDA_VISIBLE_DEVICES=0 CTRAIN_FLASH_BENCH=1 CTRAIN_FLASH_BENCH_ONLY=1 timeout 60 .dev/tests/gpu_flash_attn > $L/flash_bench.log 2>&1
pack
for r in f32 bf16; do
  timeout 150 $B bench --gpus 2 --grad-reduce $r --json $L/scaling_$r.json > $L/scaling_$r.log 2>&1
  echo "grad-reduce $r rc=$?"; grep -A4 "^scaling" $L/scaling_$r.log
done
pack
CTRAIN_DIST_TEST_DIR=/tmp/gd timeout 300 .dev/tests/gpu_dist > $L/gpu_dist.log 2>&1; echo "gpu_dist rc=$?"
grep -E "FAIL|passed" $L/gpu_dist.log | head; pack
