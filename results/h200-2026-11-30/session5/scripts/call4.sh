#!/bin/bash
# session 5 call 4 (x2): the overlapped update on a lowest-priority stream (compute
# stream one level above): GPU tests, then A/B of `bench --gpus 2` and seq 512
: "${OUT:?}"; L=$OUT/logs; mkdir -p $L; pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
mkdir -p .dev && tar xJf out/dev.tar.xz -C .dev
B=$PWD/.dev/ctrain
ab() { tag=$1; shift; env "$@" timeout 150 $B bench --gpus 2 --models $M --json $L/sc_$tag.json > $L/sc_$tag.log 2>&1
  echo "$tag rc=$? $(grep -A3 '^scaling' $L/sc_$tag.log | tail -1)"; pack; }
M=bert-large
ab bl_ov1 X=1
ab bl_ov0 CTRAIN_OVERLAP_UPDATE=0
M=resnet50
ab r50_ov1 X=1
ab r50_ov0 CTRAIN_OVERLAP_UPDATE=0
for v in 0 1; do
  CUDA_VISIBLE_DEVICES=0 CTRAIN_OVERLAP_UPDATE=$v timeout 100 $B bench --models bert-large --batch 32 --seq 512 --precision bf16 \
    --time-limit 5 > $L/s512_ov$v.log 2>&1; echo "s512 ov$v $(grep '^bert-large' $L/s512_ov$v.log | cut -c1-70)"
done; pack
timeout 200 .dev/tests/gpu_graph > $L/gpu_graph.log 2>&1; echo "gpu_graph rc=$? $(tail -1 $L/gpu_graph.log)"
grep -E "FAIL" $L/gpu_graph.log | head -20; pack
for c in bert-adamw-overlap-graph bert-no-overlap bert-graph bert-bf16-reduce-graph; do
  CTRAIN_DIST_TEST_DIR=/tmp/gd timeout 100 .dev/tests/gpu_dist $c > $L/gpu_dist_$c.log 2>&1
  echo "gpu_dist $c rc=$? $(tail -1 $L/gpu_dist_$c.log)"; grep FAIL $L/gpu_dist_$c.log | head -3
done; pack
