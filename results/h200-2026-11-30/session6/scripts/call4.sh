#!/bin/bash
# session 6 call 4 (x2): the sharded update (CTRAIN_DIST_SHARD=1) and the split all-reduce
# (CTRAIN_DIST_SPLIT=1) tested (gpu_dist cases), then the 2-GPU BERT-large bench: sharded,
# GEMM carve-out (the variable now read), all-gathers on the copy engines (NCCL_CTA_POLICY=2)
: "${OUT:?}"; L=$OUT/logs; mkdir -p $L; pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
mkdir -p .dev && tar xJf out/dev.tar.xz -C .dev
B=$PWD/.dev/ctrain
for c in shard split; do CTRAIN_DIST_TEST_DIR=/tmp/gd_$c timeout 200 .dev/tests/gpu_dist $c > $L/gpu_dist_$c.log 2>&1
  echo "gpu_dist $c rc=$? $(tail -1 $L/gpu_dist_$c.log)"; grep -m6 FAIL $L/gpu_dist_$c.log | cut -c1-200; done; pack
k() { n=$1; shift; env "$@" timeout 120 $B bench --gpus 2 --models bert-large --time-limit 4 $EXTRA --json $L/k_$n.json > $L/k_$n.log 2>&1
  echo "$n: $(grep -E '^bert-large .*%' $L/k_$n.log) $(grep -m1 -iE 'error|fatal' $L/k_$n.log | cut -c1-150)"; }
EXTRA= k base X=1
EXTRA= k shard CTRAIN_DIST_SHARD=1
EXTRA= k co24 CTRAIN_DIST_GEMM_CARVEOUT=24
EXTRA= k shard_ce CTRAIN_DIST_SHARD=1 CTRAIN_NCCL_REG=2 NCCL_CTA_POLICY=2
EXTRA= k split_ce CTRAIN_DIST_SPLIT=1 CTRAIN_NCCL_REG=2 NCCL_CTA_POLICY=2
EXTRA= k shard_co24 CTRAIN_DIST_SHARD=1 CTRAIN_DIST_GEMM_CARVEOUT=24
pack
T="train --model bert-large --data synthetic --batch 32 --seq 128 --precision bf16 --steps 4"
CTRAIN_DIST_SHARD=1 CTRAIN_NCCL_REG=2 NCCL_CTA_POLICY=2 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING timeout 120 $B $T --gpus 2 > $L/nccl_ce.log 2>&1
echo "ce rc=$?"; grep -iE "copy engine|cta policy|AllGather:|ReduceScatter:" $L/nccl_ce.log | sed 's/^[^]]*\]//' | sort | uniq -c | sort -rn | head -8 | cut -c1-200
T="train --model bert-large --data synthetic --batch 32 --seq 128 --precision bf16 --steps 40 --graph"
mkdir -p /tmp/tl; CTRAIN_DIST_SHARD=1 CTRAIN_TIMELINE=/tmp/tl/two_shard.json:20:5 timeout 120 $B $T --gpus 2 > $L/two_shard.log 2>&1
python3 scripts/timeline_diff.py results/h200-2026-11-30/session6/call2/two_co0.json.rank0.txt /tmp/tl/two_shard.json.rank0.txt --by-kind > $L/kind_shard.txt 2>&1; cat $L/kind_shard.txt; sed -n 2,8p /tmp/tl/two_shard.json.rank0.txt
cp /tmp/tl/*.txt $L/; pack
