#!/bin/bash
# session 7, call 3 (nvidia-h200-x2): the tapered buckets (CTRAIN_DIST_TAPER=1)
# - gpu_dist bert-taper (2 GPUs against 1, plain and shard+sparse graphed)
# - bench --gpus 2 bert-large: shard+sparse+prio twice, + taper twice, default + taper
# - CUPTI timelines: 1 GPU, 2 GPUs shard+sparse+prio, and + taper (traces returned)
: "${OUT:?}"
L=$OUT/logs; mkdir -p $L /tmp/tl; pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
mkdir -p .dev && tar xJf out/dev.tar.xz -C .dev
B=$PWD/.dev/ctrain
CTRAIN_DIST_TEST_DIR=/tmp/gd timeout 200 .dev/tests/gpu_dist bert-taper > $L/gpu_dist_taper.log 2>&1
echo "gpu_dist bert-taper rc=$? $(tail -1 $L/gpu_dist_taper.log)"; grep -m8 FAIL $L/gpu_dist_taper.log | cut -c1-200
LEV="CTRAIN_DIST_SHARD=1 CTRAIN_DIST_SPARSE_EMB=1 CTRAIN_GRAPH_NODE_PRIORITY=1"
k() { n=$1; shift; env "$@" timeout 90 $B bench --gpus 2 --models bert-large --time-limit 4 \
        --json $L/k_$n.json > $L/k_$n.log 2>&1
      echo "$n: $(grep -E "^bert-large .*%" $L/k_$n.log) $(grep -m1 -iE 'error|fatal' $L/k_$n.log | cut -c1-150)"; }
k levers $LEV
k levers_taper $LEV CTRAIN_DIST_TAPER=1
k levers_b $LEV
k levers_taper_b $LEV CTRAIN_DIST_TAPER=1
k default_taper CTRAIN_DIST_TAPER=1
pack
T="train --model bert-large --data synthetic --batch 32 --seq 128 --precision bf16 --steps 40 --graph"
env CTRAIN_TIMELINE=/tmp/tl/one.json:20:5 timeout 120 $B $T > $L/tl_one.log 2>&1
python3 scripts/timeline_phases.py /tmp/tl/one.json | tee $L/phases_one.txt
for v in levers levers_taper; do
  env $LEV $([ $v = levers_taper ] && echo CTRAIN_DIST_TAPER=1) \
    CTRAIN_TIMELINE=/tmp/tl/$v.json:20:5 timeout 120 $B $T --gpus 2 > $L/tl_$v.log 2>&1
  python3 scripts/timeline_phases.py /tmp/tl/$v.json.rank0 | tee $L/phases_$v.txt
done
cp /tmp/tl/*.txt $L/
tar czf $OUT/traces.tgz -C /tmp/tl .
pack
