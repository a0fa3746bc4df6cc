#!/bin/bash
# session 5 call 7 (1 GPU): gpu_bn_compare with the f32 ReLU-mask reference fix
: "${OUT:?}"; L=$OUT/logs; mkdir -p $L
mkdir -p .dev && tar xJf out/dev.tar.xz -C .dev
timeout 400 .dev/tests/gpu_bn_compare > $L/gpu_bn_compare.log 2>&1; echo "gpu_bn_compare rc=$? $(tail -1 $L/gpu_bn_compare.log)"
grep -E "FAIL|note bn" $L/gpu_bn_compare.log | head -20
