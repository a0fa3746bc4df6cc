#!/bin/bash
# session 6 call 7 (x2): the best combination of calls 4 and 6 (split all-reduce in a
# symmetric window with NCCL's zero-CTA policy) on both default scaling configs, and the
# split equivalence test under it
: "${OUT:?}"; L=$OUT/logs; mkdir -p $L; pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
mkdir -p .dev && tar xJf out/dev.tar.xz -C .dev
B=$PWD/.dev/ctrain
CTRAIN_DIST_SPLIT=1 CTRAIN_NCCL_REG=2 NCCL_CTA_POLICY=2 timeout 200 $B bench --gpus 2 --json $L/scaling_ce.json > $L/scaling_ce.log 2>&1
echo "rc=$?"; grep -A4 "^scaling" $L/scaling_ce.log; pack
CTRAIN_NCCL_REG=2 NCCL_CTA_POLICY=2 CTRAIN_DIST_TEST_DIR=/tmp/gd_s timeout 150 .dev/tests/gpu_dist bert-split > $L/gpu_dist_split_ce.log 2>&1
echo "gpu_dist split (window, zero-CTA policy) rc=$? $(tail -1 $L/gpu_dist_split_ce.log)"; grep -m4 FAIL $L/gpu_dist_split_ce.log; pack
