#!/bin/bash
# session 6 call 2 (x2): backward's GEMMs planned for fewer SMs while NCCL runs
# (CTRAIN_DIST_GEMM_CARVEOUT=N leaves N SMs out of cuBLASLt's plan), 2-GPU BERT-large bench
: "${OUT:?}"; L=$OUT/logs; mkdir -p $L; pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
mkdir -p .dev && tar xJf out/dev.tar.xz -C .dev
B=$PWD/.dev/ctrain
k() { n=$1; shift; env "$@" timeout 120 $B bench --gpus 2 --models bert-large --time-limit 4 $EXTRA --json $L/k_$n.json > $L/k_$n.log 2>&1
  echo "$n: $(grep -E '^bert-large .*%' $L/k_$n.log)"; }
EXTRA= k co0 X=1
for n in 24 16 32 40 8; do EXTRA= k co$n CTRAIN_DIST_GEMM_CARVEOUT=$n; done
EXTRA="--grad-reduce bf16" k bf16_co24 CTRAIN_DIST_GEMM_CARVEOUT=24
EXTRA= k co0b X=1
pack
T="train --model bert-large --data synthetic --batch 32 --seq 128 --precision bf16 --steps 40 --graph"
mkdir -p /tmp/tl; for c in 0 24; do CTRAIN_DIST_GEMM_CARVEOUT=$c CTRAIN_TIMELINE=/tmp/tl/two_co$c.json:20:5 timeout 120 $B $T --gpus 2 > $L/two_co$c.log 2>&1
  python3 scripts/timeline_diff.py results/h200-2026-11-30/session5/call6/one.json.txt /tmp/tl/two_co$c.json.rank0.txt --by-kind > $L/kind_co$c.txt 2>&1; cat $L/kind_co$c.txt; sed -n 2,6p /tmp/tl/two_co$c.json.rank0.txt
  done; python3 scripts/timeline_diff.py /tmp/tl/two_co0.json.rank0.txt /tmp/tl/two_co24.json.rank0.txt --top 30 > $L/diff_co24.txt 2>&1; head -45 $L/diff_co24.txt
cp /tmp/tl/*.txt $L/; pack
