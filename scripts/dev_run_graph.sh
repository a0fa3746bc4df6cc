#!/bin/sh
# development batch: CUDA graph tests, the quick bench eager vs graph
B=.dev/ctrain
.dev/tests/gpu_graph > $OUT/gpu_graph.log 2>&1; grep -E "FAIL|passed|fp32:|last-20" $OUT/gpu_graph.log | head -40
.dev/tests/gpu_transformer_ops > $OUT/gpu_transformer_ops.log 2>&1; tail -1 $OUT/gpu_transformer_ops.log
$B bench --quick --graph both --json $OUT/bench_quick.json > $OUT/bench_quick.log 2>&1; cat $OUT/bench_quick.log | cut -c1-200
