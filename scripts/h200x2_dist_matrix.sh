#!/bin/bash
# h200x2_dist_matrix.sh — issue 7's 2-GPU check: the tests of the
# data-parallel options (gpu_dist, every case; gpu_transformer_ops for the
# compact embedding kernels), then `ctrain bench --gpus 2` BERT-large with the
# defaults and with each of session 7's defaults turned off in turn
# (CTRAIN_DIST_SHARD, CTRAIN_DIST_SPARSE_EMB, CTRAIN_DIST_TAPER,
# CTRAIN_GRAPH_NODE_PRIORITY), each line with its own 1-GPU baseline, and
# ResNet50 (defaults, and with the sharded update forced on); then a CUPTI
# timeline of the defaults and of session 6's defaults (all four off),
# split into phases (scripts/timeline_phases.py: forward, backward, the
# tail after backward).
# Run on nvidia-h200-x2 after `make ARCH=90 && sh scripts/stage_dev.sh`,
# carrying ["out"]; logs under $OUT/logs (packed as $OUT/logs.tgz).
# Usage: OUT=dir bash scripts/h200x2_dist_matrix.sh [tests|bench|all]
# (all, the default, takes ~8 minutes: near one device call's 10; the two
# halves fit one call each)
: "${OUT:?set OUT to a folder for the logs}"
PART=${1:-all}
L=$OUT/logs; mkdir -p $L; pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
mkdir -p .dev && tar xJf out/dev.tar.xz -C .dev
B=$PWD/.dev/ctrain
if [ $PART != bench ]; then
timeout 200 .dev/tests/gpu_transformer_ops > $L/gpu_transformer_ops.log 2>&1
echo "gpu_transformer_ops rc=$? $(tail -1 $L/gpu_transformer_ops.log)"; grep -m4 FAIL $L/gpu_transformer_ops.log
CTRAIN_DIST_TEST_DIR=/tmp/gd timeout 420 .dev/tests/gpu_dist > $L/gpu_dist.log 2>&1
echo "gpu_dist rc=$? $(tail -1 $L/gpu_dist.log)"; grep -m8 FAIL $L/gpu_dist.log | cut -c1-200; pack
fi
[ $PART = tests ] && exit 0
k() { n=$1; m=$2; shift 2; env "$@" timeout 90 $B bench --gpus 2 --models $m --time-limit 4 \
        --json $L/k_$n.json > $L/k_$n.log 2>&1
      echo "$n: $(grep -E "^$m .*%" $L/k_$n.log) $(grep -m1 -iE 'error|fatal' $L/k_$n.log | cut -c1-150)"; }
k default bert-large X=1
k no_shard bert-large CTRAIN_DIST_SHARD=0
k no_sparse bert-large CTRAIN_DIST_SPARSE_EMB=0
k no_taper bert-large CTRAIN_DIST_TAPER=0
k no_prio bert-large CTRAIN_GRAPH_NODE_PRIORITY=0
k default_b bert-large X=1
k r50_default resnet50 X=1
k r50_shard resnet50 CTRAIN_DIST_SHARD=1
pack
# where the 2-GPU step goes, the defaults and session 6's: forward, backward, the tail
T="train --model bert-large --data synthetic --batch 32 --seq 128 --precision bf16 --steps 40 --graph"
S6="CTRAIN_DIST_SHARD=0 CTRAIN_DIST_SPARSE_EMB=0 CTRAIN_DIST_TAPER=0 CTRAIN_GRAPH_NODE_PRIORITY=0"
mkdir -p /tmp/tl
for n in default session6; do
  env $([ $n = session6 ] && echo $S6 || echo X=1) \
    CTRAIN_TIMELINE=/tmp/tl/$n.json:20:5 timeout 120 $B $T --gpus 2 > $L/tl_$n.log 2>&1
  python3 scripts/timeline_phases.py /tmp/tl/$n.json.rank0 | tee $L/phases_$n.txt
  cp /tmp/tl/$n.json.rank0.txt $L/tl_$n.summary.txt 2>/dev/null; done
pack
