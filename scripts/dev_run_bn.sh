#!/bin/sh
# development batch: cuDNN batch norm in the op, graphs with it, ResNet parity, quick bench
B=.dev/ctrain
.dev/tests/gpu_bn_op_cudnn > $OUT/gpu_bn_op_cudnn.log 2>&1; grep -E "FAIL|note|ran forward|passed" $OUT/gpu_bn_op_cudnn.log | head -30
.dev/tests/gpu_batchnorm > $OUT/gpu_batchnorm.log 2>&1; tail -1 $OUT/gpu_batchnorm.log
.dev/tests/gpu_graph > $OUT/gpu_graph.log 2>&1; grep -E "FAIL|passed" $OUT/gpu_graph.log
python3 scripts/torch_parity.py resnet 50 8 224 /tmp/par > $OUT/parity.log 2>&1
.dev/tests/gpu_resnet_parity /tmp/par 50 >> $OUT/parity.log 2>&1; grep -E "FAIL|passed|worst" $OUT/parity.log | head
$B bench --models resnet50 --batch 256 --precision bf16,fp16,tf32 --json $OUT/bench_bn.json > $OUT/bench_bn.log 2>&1; tail -6 $OUT/bench_bn.log | cut -c1-160
CTRAIN_BN=own $B bench --models resnet50 --batch 256 --precision bf16 > $OUT/bench_own.log 2>&1; tail -3 $OUT/bench_own.log | cut -c1-160
$B bench --quick --json $OUT/ctrain_quick.json > $OUT/ctrain_quick.log 2>&1; tail -14 $OUT/ctrain_quick.log | cut -c1-160
PYTHONUNBUFFERED=1 python3 scripts/torch_bench.py --quick --json $OUT/torch_quick.json > $OUT/torch_quick.log 2>&1; tail -16 $OUT/torch_quick.log | cut -c1-200
$B report $OUT/ctrain_quick.json $OUT/torch_quick.json --out $OUT/report_quick.md > /dev/null 2>&1; head -30 $OUT/report_quick.md
