#!/bin/bash
# session 6 call 8 (x2): every gpu_dist case with the new defaults (gradients in a
# symmetric window, split all-reduce, NCCL's zero-CTA policy)
: "${OUT:?}"; L=$OUT/logs; mkdir -p $L; pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
mkdir -p .dev && tar xJf out/dev.tar.xz -C .dev
CTRAIN_DIST_TEST_DIR=/tmp/gd timeout 400 .dev/tests/gpu_dist > $L/gpu_dist.log 2>&1; echo "gpu_dist rc=$? $(tail -1 $L/gpu_dist.log)"; grep -m8 FAIL $L/gpu_dist.log | cut -c1-220; pack
