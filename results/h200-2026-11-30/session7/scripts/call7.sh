#!/bin/bash
# session 7, call 7 (nvidia-h200-x2): with a deferred lookup, the last
# bucket's all-gather now waits for the lookup rows (train/dist.c held_ag)
# - gpu_dist: the sparse, shard and taper cases
# - bench --gpus 2 bert-large, defaults, three times
: "${OUT:?}"
L=$OUT/logs; mkdir -p $L; pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
mkdir -p .dev && tar xJf out/dev.tar.xz -C .dev
B=$PWD/.dev/ctrain
for c in sparse shard taper; do
  CTRAIN_DIST_TEST_DIR=/tmp/gd timeout 150 .dev/tests/gpu_dist $c > $L/gpu_dist_$c.log 2>&1
  echo "gpu_dist $c rc=$? $(tail -1 $L/gpu_dist_$c.log)"; grep -m8 FAIL $L/gpu_dist_$c.log | cut -c1-200
done
pack
for r in 1 2 3; do
  timeout 90 $B bench --gpus 2 --models bert-large --time-limit 4 --json $L/k_$r.json > $L/k_$r.log 2>&1
  echo "run $r: $(grep -E '^bert-large .*%' $L/k_$r.log)"; pack
done
