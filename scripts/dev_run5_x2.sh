#!/bin/bash
# 2-GPU session (development helper): the scaling bench, --graph on 2 GPUs, tests/gpu_dist.
# Usage: OUT=dir bash scripts/dev_run5_x2.sh   (binaries staged under .dev/)
: "${OUT:?}"
L=$OUT/logs; mkdir -p $L
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
B=.dev/ctrain
nvidia-smi topo -m > $L/topo.txt 2>&1
echo "== bench --gpus 2"
timeout 170 $B bench --gpus 2 --json $L/scaling.json > $L/scaling.log 2>&1; echo "rc=$?"
tail -8 $L/scaling.log; pack
echo "== bert-tiny 2 GPUs graph vs eager"
for g in eager graph; do
  f=""; [ $g = graph ] && f="--graph"
  CTRAIN_DIST_GRAPH=1 NCCL_DEBUG=WARN timeout 45 $B train --gpus 2 --model bert-tiny --data synthetic --batch 8 --seq 64 --steps 20 \
     --optim adamw --lr 1e-3 --warmup 5 --log-every 1 --log $L/bt_$g.jsonl $f --dist-timeout 20 > $L/bt_$g.log 2>&1
  echo "$g rc=$? $(grep -c '"step"' $L/bt_$g.jsonl 2>/dev/null) steps"
done
grep -o '"loss":[^,]*' $L/bt_eager.jsonl > $L/le.txt; grep -o '"loss":[^,]*' $L/bt_graph.jsonl > $L/lg.txt
cmp -s $L/le.txt $L/lg.txt && echo "graph losses == eager" || { echo "DIFFER"; paste $L/le.txt $L/lg.txt | head -4; tail -5 $L/bt_graph.log; }
pack
echo "== gpu_dist"
CTRAIN_DIST_TEST_DIR=/tmp/gd timeout 290 .dev/tests/gpu_dist > $L/gpu_dist.log 2>&1; echo "rc=$?"
grep -E "FAIL|passed" $L/gpu_dist.log | head -20
pack
