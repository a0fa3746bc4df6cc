#!/bin/bash
# 2-GPU session (development helper): chunked conv tests, scaling with graphs, gpu_dist, max batch R50.
: "${OUT:?}"
L=$OUT/logs; mkdir -p $L
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
B=.dev/ctrain
timeout 60 .dev/tests/gpu_conv2d > $L/gpu_conv2d.log 2>&1; echo "gpu_conv2d rc=$? $(tail -1 $L/gpu_conv2d.log)"
grep FAIL $L/gpu_conv2d.log | head -5
echo "== bench --gpus 2 (graph)"
timeout 170 $B bench --gpus 2 --json $L/scaling_graph.json > $L/scaling_graph.log 2>&1; echo "rc=$?"
tail -5 $L/scaling_graph.log; grep -i "note\|warn" $L/scaling_graph.log | head -3; pack
echo "== gpu_dist"
CTRAIN_DIST_TEST_DIR=/tmp/gd timeout 300 .dev/tests/gpu_dist > $L/gpu_dist.log 2>&1; echo "rc=$?"
grep -E "FAIL|passed" $L/gpu_dist.log | head -20; pack
echo "== max batch resnet50"
timeout 200 $B bench --max-batch --models resnet50 --precision bf16 --batch 256 --json $L/maxb_r50.json > $L/maxb_r50.log 2>&1; echo "rc=$?"
grep -v "^\[" $L/maxb_r50.log | tail -22; pack
