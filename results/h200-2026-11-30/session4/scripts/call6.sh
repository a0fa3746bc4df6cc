#!/bin/bash
# session 4 call 6 (x2): gpu_dist, all cases (NCCL-registered buffers, sync-bn 5 steps by its fall)
: "${OUT:?}"; L=$OUT/logs; mkdir -p $L
mkdir -p .dev && tar xJf out/dev.tar.xz -C .dev && cp out/gpu_dist .dev/tests/gpu_dist
CTRAIN_DIST_TEST_DIR=/tmp/gd timeout 300 .dev/tests/gpu_dist > $L/gpu_dist.log 2>&1; echo "gpu_dist rc=$?"
grep -E "FAIL|passed" $L/gpu_dist.log | head; grep -o "data parallel:.*buffers" /tmp/gd/*registered*two.out /tmp/gd/*window*two.out | cut -c1-200
