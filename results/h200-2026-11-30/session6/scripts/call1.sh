#!/bin/bash
# session 6 call 1 (x2): the GPU tests of session 5's unrun changes (shared q/k/v
# attention gradient, fused-attention layout parameter), gpu_dist; then knobs on the
# 2-GPU BERT-large bench (CTA caps, bf16 reduce, connections) and two timelines
: "${OUT:?}"; L=$OUT/logs; mkdir -p $L; pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
mkdir -p .dev && tar xJf out/dev.tar.xz -C .dev
B=$PWD/.dev/ctrain
nvidia-smi topo -m > $L/topo.txt 2>&1
t() { n=$1; shift; CUDA_VISIBLE_DEVICES=$GPU timeout 240 "$@" > $L/$n.log 2>&1; echo "$n rc=$? $(tail -1 $L/$n.log)"; grep -m3 FAIL $L/$n.log; }
python3 scripts/torch_parity.py bert base 8 128 /tmp/bp > $L/parity_gen_bert.log 2>&1
( GPU=0; for x in gpu_flash_attn gpu_graph; do t $x .dev/tests/$x; done ) &
( GPU=1; t gpu_bert_parity .dev/tests/gpu_bert_parity /tmp/bp base; t gpu_transformer_ops .dev/tests/gpu_transformer_ops ) &
wait; pack
CTRAIN_DIST_TEST_DIR=/tmp/gd timeout 330 .dev/tests/gpu_dist > $L/gpu_dist.log 2>&1; echo "gpu_dist rc=$? $(tail -1 $L/gpu_dist.log)"; grep -m5 FAIL $L/gpu_dist.log; pack
k() { n=$1; shift; env "$@" timeout 120 $B bench --gpus 2 --models bert-large --time-limit 4 $EXTRA --json $L/k_$n.json > $L/k_$n.log 2>&1
  echo "$n: $(grep -E '^bert-large .*%' $L/k_$n.log)"; }
EXTRA= k f32 X=1
EXTRA="--grad-reduce bf16" k bf16 X=1
EXTRA= k f32_cta8 NCCL_MAX_CTAS=8
EXTRA="--grad-reduce bf16" k bf16_cta8 NCCL_MAX_CTAS=8
EXTRA="--grad-reduce bf16" k bf16_cta16 NCCL_MAX_CTAS=16
EXTRA="--grad-reduce bf16" k bf16_cta4 NCCL_MAX_CTAS=4
EXTRA="--grad-reduce bf16" k bf16_conn32 CUDA_DEVICE_MAX_CONNECTIONS=32
EXTRA= k f32_conn32 CUDA_DEVICE_MAX_CONNECTIONS=32
EXTRA= k f32_b2 X=1
pack
T="train --model bert-large --data synthetic --batch 32 --seq 128 --precision bf16 --steps 40 --graph"
mkdir -p /tmp/tl; for c in 8 16; do NCCL_MAX_CTAS=$c CTRAIN_TIMELINE=/tmp/tl/two_cta$c.json:20:5 timeout 120 $B $T --gpus 2 > $L/two_cta$c.log 2>&1
  python3 scripts/timeline_diff.py results/h200-2026-11-30/session5/call6/one.json.txt /tmp/tl/two_cta$c.json.rank0.txt --by-kind > $L/kind_cta$c.txt 2>&1; cat $L/kind_cta$c.txt; sed -n 2,6p /tmp/tl/two_cta$c.json.rank0.txt; done
cp /tmp/tl/*.txt $L/; pack
