#!/bin/bash
# session 7, call 5 (nvidia-h200-x2): which of the BERT-large levers help or
# hurt ResNet-50 and BERT-base before they become defaults
# - resnet50 bf16 bs 256: default (twice), node priority, taper, both
# - bert-base bf16 bs 32: default, shard + sparse + taper + priority
: "${OUT:?}"
L=$OUT/logs; mkdir -p $L; pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
mkdir -p .dev && tar xJf out/dev.tar.xz -C .dev
B=$PWD/.dev/ctrain
k() { n=$1; m=$2; shift 2; env "$@" timeout 90 $B bench --gpus 2 --models $m --time-limit 4 \
        --json $L/k_$n.json > $L/k_$n.log 2>&1
      echo "$n: $(grep -E "^$m .*%" $L/k_$n.log) $(grep -m1 -iE 'error|fatal' $L/k_$n.log | cut -c1-150)"; }
k r50_default resnet50 X=1
k r50_prio resnet50 CTRAIN_GRAPH_NODE_PRIORITY=1
k r50_taper resnet50 CTRAIN_DIST_TAPER=1
k r50_prio_taper resnet50 CTRAIN_GRAPH_NODE_PRIORITY=1 CTRAIN_DIST_TAPER=1
k r50_default_b resnet50 X=1
k base_default bert-base X=1
k base_levers bert-base CTRAIN_DIST_SHARD=1 CTRAIN_DIST_SPARSE_EMB=1 CTRAIN_GRAPH_NODE_PRIORITY=1 CTRAIN_DIST_TAPER=1
k base_levers_noshard bert-base CTRAIN_DIST_SPARSE_EMB=1 CTRAIN_GRAPH_NODE_PRIORITY=1 CTRAIN_DIST_TAPER=1
pack
