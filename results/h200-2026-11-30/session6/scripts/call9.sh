#!/bin/bash
# session 6 call 9 (x2): the sharded update with the weights in symmetric windows too
# (their all-gathers like the gradients' under the new defaults): gpu_dist shard cases, bench
: "${OUT:?}"; L=$OUT/logs; mkdir -p $L; pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
mkdir -p .dev && tar xJf out/dev.tar.xz -C .dev
B=$PWD/.dev/ctrain
k() { n=$1; shift; env "$@" timeout 60 $B bench --gpus 2 --models bert-large --time-limit 3 --json $L/k_$n.json > $L/k_$n.log 2>&1
  echo "$n: $(grep -E '^bert-large .*%' $L/k_$n.log) $(grep -m1 -iE 'error|fatal' $L/k_$n.log | cut -c1-150)"; }
k shard_win CTRAIN_DIST_SHARD=1
k default X=1
k shard_nowin CTRAIN_DIST_SHARD=1 CTRAIN_DIST_SHARD_WINDOW=0
pack
CTRAIN_DIST_TEST_DIR=/tmp/gd timeout 100 .dev/tests/gpu_dist shard > $L/gpu_dist_shard.log 2>&1; echo "gpu_dist shard rc=$? $(tail -1 $L/gpu_dist_shard.log)"; grep -m5 FAIL $L/gpu_dist_shard.log | cut -c1-200; pack
