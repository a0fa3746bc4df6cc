#!/bin/bash
# session 4 call 7 (x2): NCCL / stream knobs for the BERT-large 2-GPU step, then bench --gpus 2 with the best
: "${OUT:?}"; L=$OUT/logs; mkdir -p $L; pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
mkdir -p .dev && tar xJf out/dev.tar.xz -C .dev && cp build/ctrain .dev/ctrain && cp out/gpu_dist .dev/tests/gpu_dist
B=.dev/ctrain; T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s]"; }
CTRAIN_DIST_TEST_DIR=/tmp/gd timeout 90 .dev/tests/gpu_dist bert-nccl > $L/gpu_dist_nccl.log 2>&1; echo "gpu_dist bert-nccl rc=$? $(tail -1 $L/gpu_dist_nccl.log) $(el)"
grep FAIL $L/gpu_dist_nccl.log | head -5
T="train --gpus 2 --model bert-large --data synthetic --batch 32 --seq 128 --precision bf16 --steps 150 --graph"
best=0; bestenv="X=1"
for v in "ref X=1" "prio CTRAIN_DIST_COMM_PRIORITY=normal" "ll128 NCCL_PROTO=LL128" "tree NCCL_ALGO=Tree" \
         "nt256 NCCL_NTHREADS=256" "nt128 NCCL_NTHREADS=128" "cta12 NCCL_MAX_CTAS=12" "cta32 NCCL_MIN_CTAS=32" \
         "buf16m NCCL_BUFFSIZE=16777216" "ref2 X=1"; do set -- $v
  env $2 timeout 40 $B $T > $L/k_$1.log 2>&1; rc=$?
  r=$(grep 'step 150/150' $L/k_$1.log | grep -o '[0-9]* samples/s' | grep -o '[0-9]*'); echo "$1 $2 rc=$rc ${r:-none} $(el)"
  if [ -n "$r" ] && [ "$r" -gt "$best" ]; then best=$r; bestenv=$2; fi
done; pack
echo "best: $bestenv ($best)"
env $bestenv timeout 100 $B bench --gpus 2 --models bert-large --json $L/scaling_best.json > $L/scaling_best.log 2>&1
echo "bench best rc=$? $(el)"; grep -A2 "^model .*reduce" $L/scaling_best.log; pack
