#!/bin/bash
# session 5 call 5 (x2): attention on [B, T, H, Dh] (no head transposes), the few-rows
# embedding backward: GPU tests, BERT parity, bench next to PyTorch, timeline, scaling
: "${OUT:?}"; L=$OUT/logs; mkdir -p $L; pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
mkdir -p .dev && tar xJf out/dev.tar.xz -C .dev
B=$PWD/.dev/ctrain
t() { n=$1; shift; CUDA_VISIBLE_DEVICES=${GPU:-0} timeout ${TO:-150} "$@" > $L/$n.log 2>&1; echo "$n rc=$? $(tail -1 $L/$n.log)"; grep -m5 FAIL $L/$n.log; }
GPU=0 t gpu_flash_attn .dev/tests/gpu_flash_attn &
GPU=1 t gpu_transformer_ops .dev/tests/gpu_transformer_ops; GPU=1 t gpu_shape_ops .dev/tests/gpu_shape_ops
GPU=1 TO=200 t gpu_graph .dev/tests/gpu_graph; wait; pack
CUDA_VISIBLE_DEVICES=0 timeout 120 python3 scripts/torch_parity.py bert base 8 128 /tmp/bp > $L/parity_gen.log 2>&1
GPU=0 t gpu_bert_parity .dev/tests/gpu_bert_parity /tmp/bp base; pack
echo "== 1 GPU bench: ctrain GPU 0, PyTorch GPU 1"
CUDA_VISIBLE_DEVICES=0 timeout 120 $B bench --models bert-large --batch 32 --seq 128,512 --precision bf16,fp16 --time-limit 5 \
  --json $L/bl_ctrain.json > $L/bl_ctrain.log 2>&1 &
timeout 200 python3 scripts/torch_bench.py --models bert-large --batch 32 --seq 128,512 --precision bf16,fp16 --time-limit 5 \
  --device cuda:1 --json $L/bl_torch.json > $L/bl_torch.log 2>&1; wait
grep -h "^bert-large" $L/bl_ctrain.log $L/bl_torch.log | cut -c1-100; pack
CUDA_VISIBLE_DEVICES=0 CTRAIN_TIMELINE=$L/one.json:20:5 timeout 100 $B train --model bert-large --data synthetic --batch 32 \
  --precision bf16 --graph --seq 128 --steps 40 > $L/one.log 2>&1; echo "timeline: $(sed -n 2p $L/one.json.txt)"; head -20 $L/one.json.txt | tail -14; pack
timeout 200 $B bench --gpus 2 --json $L/scaling.json > $L/scaling.log 2>&1; echo "scaling rc=$?"; grep -A4 "^scaling" $L/scaling.log; pack
for c in bert-overlap bert-adamw-overlap-graph; do
  CTRAIN_DIST_TEST_DIR=/tmp/gd timeout 100 .dev/tests/gpu_dist $c > $L/gpu_dist_$c.log 2>&1
  echo "gpu_dist $c rc=$? $(tail -1 $L/gpu_dist_$c.log)"; grep FAIL $L/gpu_dist_$c.log | head -3
done; pack
