#!/bin/bash
# session 4 call 4 (x2): all single-GPU tests with the new defaults (2 lanes), parity, tokenizer parity,
# BERT-large bf16/fp16 ctrain (GPU 0) next to PyTorch (GPU 1), 2-GPU scaling (auto buckets), gpu_dist
: "${OUT:?}"; L=$OUT/logs; mkdir -p $L; pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
mkdir -p .dev && tar xJf out/dev.tar.xz -C .dev
B=.dev/ctrain; T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s]"; }
lane() { gpu=$1; shift; for n in "$@"; do
  CUDA_VISIBLE_DEVICES=$gpu timeout 200 .dev/tests/$n > $L/$n.log 2>&1; echo "$n rc=$? $(tail -1 $L/$n.log) $(el)"; done; }
BL="--models bert-large --batch 32 --seq 128,512 --precision bf16,fp16 --time-limit 6"
( lane 0 gpu_flash_attn gpu_conv2d gpu_bn_op_cudnn gpu_batchnorm gpu_graph
  CUDA_VISIBLE_DEVICES=0 timeout 120 $B bench $BL --json $L/bl_ctrain.json > $L/bl_ctrain.log 2>&1; echo "bl ctrain rc=$? $(el)" ) > $L/laneA.txt 2>&1 &
( lane 1 gpu_transformer_ops gpu_linear_epilogue gpu_matmul gpu_model gpu_optim_amp gpu_pool gpu_shape_ops gpu_softmax gpu_elementwise
  export CUDA_VISIBLE_DEVICES=1
  timeout 100 python3 scripts/torch_parity.py bert base 8 128 /tmp/bp > $L/bert_parity_ref.log 2>&1
  CTRAIN_BERT_PARITY_DIR=/tmp/bp timeout 100 .dev/tests/gpu_bert_parity /tmp/bp base > $L/bert_parity.log 2>&1; echo "bert parity rc=$? $(tail -1 $L/bert_parity.log) $(el)"
  timeout 150 python3 scripts/tokenizer_parity.py --ctrain $B --corpus .dev/fortunes > $L/tokenizer_parity.log 2>&1
  echo "tokenizer rc=$? $(tail -1 $L/tokenizer_parity.log) $(el)"
  PYTHONUNBUFFERED=1 timeout 150 python3 scripts/torch_bench.py $BL --device cuda:0 --json $L/bl_torch.json > $L/bl_torch.log 2>&1; echo "bl torch rc=$? $(el)" ) > $L/laneB.txt 2>&1 &
wait; cat $L/laneA.txt $L/laneB.txt; pack
grep -E "^bert-large" $L/bl_ctrain.log | cut -c1-120; grep -E "^bert-large" $L/bl_torch.log | cut -c1-120
for r in f32 bf16; do
  timeout 100 $B bench --gpus 2 --grad-reduce $r --json $L/scaling_$r.json > $L/scaling_$r.log 2>&1
  echo "grad-reduce $r rc=$? $(el)"; grep -A3 "^model " $L/scaling_$r.log; pack
done
CTRAIN_DIST_TEST_DIR=/tmp/gd timeout 170 .dev/tests/gpu_dist > $L/gpu_dist.log 2>&1; echo "gpu_dist rc=$? $(el)"
grep -E "FAIL|passed" $L/gpu_dist.log | head -5; pack
