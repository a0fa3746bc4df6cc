#!/bin/bash
# session 5 call 3 (x2): the overlapped update and the background communicator:
# GPU tests (gpu_graph, new gpu_dist cases), then A/B of `bench --gpus 2`
: "${OUT:?}"; L=$OUT/logs; mkdir -p $L; pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
mkdir -p .dev && tar xJf out/dev.tar.xz -C .dev
B=$PWD/.dev/ctrain
timeout 200 .dev/tests/gpu_graph > $L/gpu_graph.log 2>&1; echo "gpu_graph rc=$? $(tail -1 $L/gpu_graph.log)"
grep -E "FAIL" $L/gpu_graph.log | head -20; pack
for c in bert-no-overlap bert-adamw-overlap-graph bert-bg-ctas bert-graph bert-bf16-reduce-graph; do
  CTRAIN_DIST_TEST_DIR=/tmp/gd timeout 100 .dev/tests/gpu_dist $c > $L/gpu_dist_$c.log 2>&1
  echo "gpu_dist $c rc=$? $(tail -1 $L/gpu_dist_$c.log)"; grep FAIL $L/gpu_dist_$c.log | head -3
done; pack
ab() { tag=$1; shift; env "$@" timeout 150 $B bench --gpus 2 --models $M --json $L/sc_$tag.json > $L/sc_$tag.log 2>&1
  echo "$tag rc=$? $(grep -A3 '^scaling' $L/sc_$tag.log | tail -1)"; pack; }
M=bert-large
ab bl_ov0 CTRAIN_OVERLAP_UPDATE=0
ab bl_ov1 X=1
ab bl_ov1_bg8 CTRAIN_NCCL_BG_CTAS=8
ab bl_ov1_bg4 CTRAIN_NCCL_BG_CTAS=4
ab bl_ov1_bg16 CTRAIN_NCCL_BG_CTAS=16
M=resnet50
ab r50_ov0 CTRAIN_OVERLAP_UPDATE=0
ab r50_ov1 X=1
