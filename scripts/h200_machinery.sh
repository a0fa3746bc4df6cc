#!/bin/sh
# Issue 5's measurements on one GPU (the figures in README "Results"):
#  - ResNet50 bs 256 and BERT-large bs 32 seq 128 in fp32/tf32/fp16/bf16,
#    eager and with CUDA graphs, ctrain and PyTorch in the same call;
#  - recompute: BERT-large seq 512 bs 32 bf16 and ResNet50 bs 256 bf16,
#    peak / state memory and step time without and with --recompute all;
#  - the largest batch that fits, without and with recompute.
# Usage: OUT=dir sh scripts/h200_machinery.sh [ctrain binary]
B=${1:-.dev/ctrain}
: "${OUT:?set OUT to a folder for the logs}"
$B bench --models resnet50 --batch 256 --precision fp32,tf32,fp16,bf16 --graph both \
   --json $OUT/m_r50.json > $OUT/m_r50.log 2>&1
$B bench --models bert-large --batch 32 --seq 128 --precision fp32,tf32,fp16,bf16 --graph both \
   --json $OUT/m_bl.json > $OUT/m_bl.log 2>&1
for r in none all; do
  $B bench --models bert-large --batch 32 --seq 512 --precision bf16 --recompute $r \
     --json $OUT/rc_bl_$r.json > $OUT/rc_bl_$r.log 2>&1
  $B bench --models resnet50 --batch 256 --precision bf16 --recompute $r \
     --json $OUT/rc_r50_$r.json > $OUT/rc_r50_$r.log 2>&1
done
$B bench --max-batch --models resnet50,bert-large --precision bf16 --json $OUT/maxb.json \
   > $OUT/maxb.log 2>&1
