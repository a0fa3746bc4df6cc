#!/bin/bash
# session 7, call 4 (nvidia-h200-x2): each micro-batch graph cut at the loss
# (CTRAIN_GRAPH_SPLIT=1) against the forward's launch gaps
# - gpu_graph (1 GPU) with the split; gpu_dist bert-graph-split and bert-taper
# - bench --gpus 2 bert-large: levers+taper with and without the split (twice each),
#   default with the split; resnet50 levers+taper+split
# - CUPTI timelines: 1 GPU split, 2 GPUs levers+taper+split (traces returned)
: "${OUT:?}"
L=$OUT/logs; mkdir -p $L /tmp/tl; pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
mkdir -p .dev && tar xJf out/dev.tar.xz -C .dev
B=$PWD/.dev/ctrain
CTRAIN_GRAPH_SPLIT=1 timeout 150 .dev/tests/gpu_graph > $L/gpu_graph_split.log 2>&1
echo "gpu_graph split rc=$? $(tail -1 $L/gpu_graph_split.log)"; grep -m5 FAIL $L/gpu_graph_split.log | cut -c1-200
CTRAIN_DIST_TEST_DIR=/tmp/gd timeout 200 .dev/tests/gpu_dist bert-graph-split > $L/gpu_dist_split.log 2>&1
echo "gpu_dist bert-graph-split rc=$? $(tail -1 $L/gpu_dist_split.log)"; grep -m8 FAIL $L/gpu_dist_split.log | cut -c1-200
LEV="CTRAIN_DIST_SHARD=1 CTRAIN_DIST_SPARSE_EMB=1 CTRAIN_GRAPH_NODE_PRIORITY=1 CTRAIN_DIST_TAPER=1"
k() { n=$1; m=$2; shift 2; env "$@" timeout 90 $B bench --gpus 2 --models $m --time-limit 4 \
        --json $L/k_$n.json > $L/k_$n.log 2>&1
      echo "$n: $(grep -E "^$m .*%" $L/k_$n.log) $(grep -m1 -iE 'error|fatal' $L/k_$n.log | cut -c1-150)"; }
k levers bert-large $LEV
k levers_split bert-large $LEV CTRAIN_GRAPH_SPLIT=1
k levers_b bert-large $LEV
k levers_split_b bert-large $LEV CTRAIN_GRAPH_SPLIT=1
k default_split bert-large CTRAIN_GRAPH_SPLIT=1
k r50_levers_split resnet50 $LEV CTRAIN_GRAPH_SPLIT=1
pack
T="train --model bert-large --data synthetic --batch 32 --seq 128 --precision bf16 --steps 40 --graph"
env CTRAIN_GRAPH_SPLIT=1 CTRAIN_TIMELINE=/tmp/tl/one_split.json:20:5 timeout 120 $B $T > $L/tl_one_split.log 2>&1
python3 scripts/timeline_phases.py /tmp/tl/one_split.json | tee $L/phases_one_split.txt
env $LEV CTRAIN_GRAPH_SPLIT=1 CTRAIN_TIMELINE=/tmp/tl/levers_split.json:20:5 timeout 120 $B $T --gpus 2 > $L/tl_levers_split.log 2>&1
python3 scripts/timeline_phases.py /tmp/tl/levers_split.json.rank0 | tee $L/phases_levers_split.txt
cp /tmp/tl/*.txt $L/
tar czf $OUT/traces.tgz -C /tmp/tl .
pack
