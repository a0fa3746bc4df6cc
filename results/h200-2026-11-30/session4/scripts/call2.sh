#!/bin/bash
# session 4 call 2 (x2): tokenizer parity (transformers 5), where the 2-GPU BERT-large step loses time, gpu_dist
: "${OUT:?}"; L=$OUT/logs; mkdir -p $L; pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
mkdir -p .dev && tar xJf out/dev.tar.xz -C .dev && cp build/ctrain .dev/ctrain
B=.dev/ctrain
timeout 150 python3 scripts/tokenizer_parity.py --ctrain $B --corpus .dev/fortunes > $L/tokenizer_parity.log 2>&1
echo "tokenizer rc=$? $(tail -1 $L/tokenizer_parity.log)"; grep -E "identical|transformers " $L/tokenizer_parity.log; pack
T="train --gpus 2 --model bert-large --data synthetic --batch 32 --seq 128 --precision bf16"
for v in "f32 25" "bf16 25" "f32 100" "bf16 100"; do set -- $v
  CTRAIN_DIST_GRAPH=0 CTRAIN_DIST_TRACE=1 timeout 60 $B $T --steps 40 --grad-reduce $1 --bucket-mb $2 > $L/trace_$1_$2.log 2>&1
  echo "trace $1 $2 rc=$?"; grep "step trace" $L/trace_$1_$2.log | sed 's/.*trace, //'
done; pack
for v in "f32 25" "bf16 25" "f32 100" "bf16 100"; do set -- $v
  timeout 50 $B $T --steps 150 --graph --grad-reduce $1 --bucket-mb $2 > $L/graph_$1_$2.log 2>&1
  echo "graph $1 $2 rc=$? $(grep 'step 150/150' $L/graph_$1_$2.log | grep -o '[0-9]* samples/s')"
done; pack
BB="bench --models bert-large --batch 32 --seq 128 --precision bf16 --time-limit 5"
CUDA_VISIBLE_DEVICES=0 timeout 60 $B $BB > $L/solo0.log 2>&1; echo "solo0 $(grep '^bert-large' $L/solo0.log | cut -c1-60)"
CUDA_VISIBLE_DEVICES=0 timeout 60 $B $BB > $L/pair0.log 2>&1 & CUDA_VISIBLE_DEVICES=1 timeout 60 $B $BB > $L/pair1.log 2>&1; wait
echo "pair0 $(grep '^bert-large' $L/pair0.log | cut -c1-60)"; echo "pair1 $(grep '^bert-large' $L/pair1.log | cut -c1-60)"; pack
CTRAIN_DIST_TEST_DIR=/tmp/gd timeout 230 .dev/tests/gpu_dist > $L/gpu_dist.log 2>&1; echo "gpu_dist rc=$?"
grep -E "FAIL|passed" $L/gpu_dist.log | head; pack
