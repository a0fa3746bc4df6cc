#!/bin/bash
# session 6 call 6 (x2): what in call 4's split_ce (91.4%) helps: the split alone, with the
# symmetric window, with the CTA policy, and repeats of the base and split_ce
: "${OUT:?}"; L=$OUT/logs; mkdir -p $L; pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
mkdir -p .dev && tar xJf out/dev.tar.xz -C .dev
B=$PWD/.dev/ctrain
k() { n=$1; shift; env "$@" timeout 120 $B bench --gpus 2 --models bert-large --time-limit 4 --json $L/k_$n.json > $L/k_$n.log 2>&1
  echo "$n: $(grep -E '^bert-large .*%' $L/k_$n.log) $(grep -m1 -iE 'error|fatal' $L/k_$n.log | cut -c1-150)"; }
k base X=1
k split CTRAIN_DIST_SPLIT=1
k split_reg2 CTRAIN_DIST_SPLIT=1 CTRAIN_NCCL_REG=2
k split_p2 CTRAIN_DIST_SPLIT=1 NCCL_CTA_POLICY=2
k split_ce CTRAIN_DIST_SPLIT=1 CTRAIN_NCCL_REG=2 NCCL_CTA_POLICY=2
k reg2_p2 CTRAIN_NCCL_REG=2 NCCL_CTA_POLICY=2
k split_ce_b CTRAIN_DIST_SPLIT=1 CTRAIN_NCCL_REG=2 NCCL_CTA_POLICY=2
pack
