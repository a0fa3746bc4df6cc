#!/bin/bash
# session 6 call 5 (1 GPU; no 2-GPU machine lent): the single-GPU tests the session's
# changes touch (the matmul plan key gained the SM target; the overlapped update's
# stream gained an event record), and BERT-large bf16 next to session 5's figure
: "${OUT:?}"; L=$OUT/logs; mkdir -p $L; pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
mkdir -p .dev && tar xJf out/dev.tar.xz -C .dev
B=$PWD/.dev/ctrain
t() { n=$1; shift; timeout 240 "$@" > $L/$n.log 2>&1; echo "$n rc=$? $(tail -1 $L/$n.log)"; grep -m3 FAIL $L/$n.log; }
for x in gpu_matmul gpu_linear_epilogue gpu_graph gpu_optim_amp gpu_model; do t $x .dev/tests/$x; done; pack
timeout 120 $B bench --models bert-large --batch 32 --seq 128 --precision bf16 --time-limit 5 --json $L/bl.json > $L/bl.log 2>&1
grep "^bert-large" $L/bl.log; pack
