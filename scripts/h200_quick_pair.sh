#!/bin/sh
# The quick suites of both engines, one after the other on one GPU, and the
# report that puts them side by side. Usage: OUT=dir sh scripts/h200_quick_pair.sh
: "${OUT:?set OUT to a folder for the logs}"
B=.dev/ctrain
timeout 80 $B bench --quick --json $OUT/ctrain_quick.json > $OUT/ctrain_quick.log 2>&1
PYTHONUNBUFFERED=1 timeout 90 python3 scripts/torch_bench.py --quick --json $OUT/torch_quick.json > $OUT/torch_quick.log 2>&1
$B report $OUT/ctrain_quick.json $OUT/torch_quick.json --baseline pytorch --out $OUT/report_quick.md > /dev/null 2>&1
sed -n 1,12p $OUT/report_quick.md
timeout 60 .dev/tests/gpu_graph > $OUT/gpu_graph.log 2>&1; grep -E "FAIL|passed" $OUT/gpu_graph.log
