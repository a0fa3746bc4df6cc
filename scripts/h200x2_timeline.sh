#!/bin/sh
# The 2-GPU BERT-large gap, kernel by kernel (issue 7; ops/NOTES.md "Data
# parallel"): the same bf16 bs 32 seq 128 step on GPU 0 alone and on 2 GPUs,
# each with a CUPTI timeline of steps 20-24 (CTRAIN_TIMELINE, train/bench/timeline.h),
# then scripts/timeline_diff.py on the two summaries. Run on nvidia-h200-x2.
# Usage: OUT=dir sh scripts/h200x2_timeline.sh [ctrain binary]   (default .dev/ctrain)
: "${OUT:?set OUT to a folder for the logs}"
B=${1:-$PWD/.dev/ctrain}
T="train --model bert-large --data synthetic --batch 32 --seq 128 --precision bf16 --steps 40 --graph"
CUDA_VISIBLE_DEVICES=0 CTRAIN_TIMELINE=$OUT/one.json:20:5 timeout 120 $B $T > $OUT/one.log 2>&1
echo "1 GPU rc=$?"; grep -E "timeline|samples/s" $OUT/one.log | tail -2
CTRAIN_TIMELINE=$OUT/two.json:20:5 timeout 120 $B $T --gpus 2 > $OUT/two.log 2>&1
echo "2 GPUs rc=$?"; grep -E "timeline|samples/s" $OUT/two.log | tail -3
python3 scripts/timeline_diff.py $OUT/one.json.txt $OUT/two.json.rank0.txt --top 30 > $OUT/diff.txt 2>&1
head -50 $OUT/diff.txt
(cd $OUT && tar czf timeline.tgz *.json *.txt *.log 2>/dev/null)
