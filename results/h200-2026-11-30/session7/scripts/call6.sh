#!/bin/bash
# session 7, call 6 (nvidia-h200-x2): the new defaults (sharded update from
# 100M parameters, sparse lookup gradient, tapered buckets from 50 MB,
# graph node priorities) validated: every gpu_dist case, gpu_graph (1 GPU,
# node priorities now on), and `ctrain bench --gpus 2` twice
: "${OUT:?}"
L=$OUT/logs; mkdir -p $L; pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
mkdir -p .dev && tar xJf out/dev.tar.xz -C .dev
B=$PWD/.dev/ctrain
CTRAIN_DIST_TEST_DIR=/tmp/gd timeout 300 .dev/tests/gpu_dist > $L/gpu_dist.log 2>&1
echo "gpu_dist rc=$? $(tail -1 $L/gpu_dist.log)"; grep -m8 FAIL $L/gpu_dist.log | cut -c1-200; pack
timeout 100 .dev/tests/gpu_graph > $L/gpu_graph.log 2>&1
echo "gpu_graph rc=$? $(tail -1 $L/gpu_graph.log)"; grep -m5 FAIL $L/gpu_graph.log | cut -c1-200; pack
for r in 1 2; do
  timeout 150 $B bench --gpus 2 --json $L/scaling_$r.json > $L/scaling_$r.log 2>&1
  echo "bench run $r rc=$?"; grep -A4 "^scaling on" $L/scaling_$r.log; pack
done
