#!/bin/sh
# Issue 7 on a 2-GPU machine (device kind nvidia-h200-x2), binaries in .dev:
# the dist tests and the scaling bench (scripts/dev_run_dist.sh), then
# --graph on 2 GPUs against eager (the NCCL all-reduces captured in the
# graph must give the eager losses), then every log packed into one file.
# Usage: OUT=dir sh scripts/h200x2_dist.sh
: "${OUT:?set OUT to a folder for the logs}"
B=.dev/ctrain
OUT=$OUT BUILD=.dev sh scripts/dev_run_dist.sh test bench
echo "== bert-tiny on 2 GPUs: eager vs --graph (20 steps, losses compared)"
for g in eager graph; do
  f=""; [ $g = graph ] && f="--graph"
  $B train --gpus 2 --model bert-tiny --data synthetic --batch 8 --seq 64 --steps 20 \
     --optim adamw --lr 1e-3 --warmup 5 --accum 2 --log-every 1 --log $OUT/dist_bt_$g.jsonl $f \
     > $OUT/dist_bt_$g.log 2>&1
  echo "$g: status $?; $(grep -c '"step"' $OUT/dist_bt_$g.jsonl) steps logged"
done
grep -o '"loss":[^,]*' $OUT/dist_bt_eager.jsonl > $OUT/l_e.txt
grep -o '"loss":[^,]*' $OUT/dist_bt_graph.jsonl > $OUT/l_g.txt
if cmp -s $OUT/l_e.txt $OUT/l_g.txt; then echo "2-GPU graph losses == eager losses (20 steps)";
else echo "2-GPU graph losses DIFFER from eager:"; paste $OUT/l_e.txt $OUT/l_g.txt | head -5; fi
grep -h "graph" $OUT/dist_bt_graph.log | head -3
(cd $OUT && tar czf dist_logs.tgz --exclude=dist_logs.tgz . 2>/dev/null)
