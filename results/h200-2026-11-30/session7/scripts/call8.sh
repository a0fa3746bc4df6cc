#!/bin/bash
# session 7, call 8 (nvidia-h200-x2): the final binary: `ctrain bench --gpus 2`
# (ResNet-50 and BERT-large, defaults) and the graphed gpu_dist cases
: "${OUT:?}"
L=$OUT/logs; mkdir -p $L; pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
mkdir -p .dev && tar xJf out/dev.tar.xz -C .dev
B=$PWD/.dev/ctrain
timeout 170 $B bench --gpus 2 --json $L/scaling.json > $L/scaling.log 2>&1
echo "bench rc=$?"; grep -A4 "^scaling on" $L/scaling.log; pack
CTRAIN_DIST_TEST_DIR=/tmp/gd timeout 100 .dev/tests/gpu_dist bert-graph > $L/gpu_dist_graph.log 2>&1
echo "gpu_dist bert-graph rc=$? $(tail -1 $L/gpu_dist_graph.log)"; grep -m8 FAIL $L/gpu_dist_graph.log | cut -c1-200
pack
