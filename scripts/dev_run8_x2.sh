#!/bin/bash
# 2-GPU session (development helper): the fused attention test and whole-step BERT-large with it,
# BERT-large 2-GPU bucket / NCCL CTA experiments, ResNet50 fp32 conv search settings.
: "${OUT:?}"
L=$OUT/logs; mkdir -p $L
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
B=.dev/ctrain
CUDA_VISIBLE_DEVICES=0 timeout 40 .dev/tests/gpu_flash_attn > $L/gpu_flash_attn.log 2>&1; echo "flash rc=$? $(tail -1 $L/gpu_flash_attn.log)"
grep FAIL $L/gpu_flash_attn.log | head -5
echo "== bert-large bf16 whole step: attention cublas (GPU0) vs fused (GPU1), then swapped"
CUDA_VISIBLE_DEVICES=0 CTRAIN_ATTN=cublas timeout 70 $B bench --models bert-large --batch 32 --seq 128,512 --precision bf16 --time-limit 5 --json $L/att_cublas.json > $L/att_cublas.log 2>&1 &
CUDA_VISIBLE_DEVICES=1 CTRAIN_ATTN=fused timeout 70 $B bench --models bert-large --batch 32 --seq 128,512 --precision bf16 --time-limit 5 --json $L/att_fused.json > $L/att_fused.log 2>&1
wait
grep "^bert-large" $L/att_cublas.log | sed 's/^/cublas /' | cut -c1-100; grep "^bert-large" $L/att_fused.log | sed 's/^/fused  /' | cut -c1-100
pack
echo "== resnet50 fp32 bs 256 conv search settings (GPU0) || bert-large 2-GPU experiments later"
for v in "WS=4096 CTRAIN_CONV_SEARCH_WS_MB=4096" "ND=1 CTRAIN_CONV_NONDETERMINISTIC=1"; do
  tag=${v%%=*}
  env $v CUDA_VISIBLE_DEVICES=0 timeout 50 $B bench --models resnet50 --batch 256 --precision fp32 --time-limit 5 --json $L/fp32_$tag.json > $L/fp32_$tag.log 2>&1
  echo "$tag rc=$? $(grep '^resnet50' $L/fp32_$tag.log | cut -c1-90)"
done
pack
run_bl() {
  local tag=$1; shift
  env "$@" timeout 40 $B train --gpus 2 --model bert-large --data synthetic --batch 32 --seq 128 --precision bf16 --steps 120 \
    --graph --log-every 20 --log $L/bk_$tag.jsonl ${BK_ARGS} > $L/bk_$tag.log 2>&1
  echo "$tag rc=$? $(grep -o '"samples_per_s":[0-9.]*' $L/bk_$tag.jsonl | tail -3 | cut -d: -f2 | tr '\n' ' ')"
}
BK_ARGS="--bucket-mb 100" run_bl mb100_cta8 NCCL_MAX_CTAS=8
BK_ARGS="--bucket-mb 100" run_bl mb100_cta16 NCCL_MAX_CTAS=16
BK_ARGS="--bucket-mb 50" run_bl mb50 X=1
pack
