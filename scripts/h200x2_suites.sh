#!/bin/sh
# The benchmark suites of both engines at once on a 2-GPU machine: ctrain on
# GPU 0, PyTorch on GPU 1 (same card model, same host, same time), then the
# machinery extras (eager rows, recompute) on GPU 0 and the fortunes BERT
# pipeline on GPU 1. Every part has its own time bound.
# Usage: OUT=dir sh scripts/h200x2_suites.sh   (binary .dev/ctrain, corpus .dev/fortunes)
: "${OUT:?set OUT to a folder for the logs}"
B=$PWD/.dev/ctrain
(
  export CUDA_VISIBLE_DEVICES=0
  timeout 400 $B bench --time-limit 8 --json $OUT/ctrain_full.json > $OUT/ctrain_full.log 2>&1
  timeout 60 $B bench --models resnet50 --batch 256 --precision fp32,tf32,fp16,bf16 --graph off \
     --time-limit 5 --json $OUT/ctrain_r50_eager.json > $OUT/ctrain_r50_eager.log 2>&1
  timeout 60 $B bench --models bert-large --batch 32 --seq 128 --precision fp32,tf32,fp16,bf16 \
     --graph off --time-limit 5 --json $OUT/ctrain_bl_eager.json > $OUT/ctrain_bl_eager.log 2>&1
  timeout 40 $B bench --models bert-large --batch 32 --seq 512 --precision bf16 --recompute all \
     --time-limit 5 --json $OUT/rc_bl.json > $OUT/rc_bl.log 2>&1
  timeout 30 $B bench --models resnet50 --batch 256 --precision bf16 --recompute all \
     --time-limit 5 --json $OUT/rc_r50.json > $OUT/rc_r50.log 2>&1
) &
(
  export CUDA_VISIBLE_DEVICES=1 PYTHONUNBUFFERED=1
  timeout 380 python3 scripts/torch_bench.py --time-limit 8 --json $OUT/torch_full.json \
     > $OUT/torch_full.log 2>&1
  C=$PWD/.dev/fortunes; W=/tmp/fort; mkdir -p $W
  timeout 100 sh -c "$B vocab --corpus $C --size 8000 --out $W/vocab.txt &&
    $B shard --corpus $C --vocab $W/vocab.txt --out $W/f.tok &&
    $B train --model bert-small --data mlm:$W/f.tok --vocab $W/vocab.txt --seq 128 --batch 64 \
      --optim adamw --lr 5e-4 --warmup 300 --schedule linear --steps 3000 --precision bf16 --graph \
      --log-every 500 --save $W/mlm.safetensors &&
    $B train --model bert-small --head cls --data fortunes-cls:$C --classes 4 --vocab $W/vocab.txt \
      --load $W/mlm.safetensors --seq 128 --batch 32 --optim adamw --lr 5e-5 --epochs 3 \
      --precision bf16 --log-every 100" > $OUT/fortunes.log 2>&1
) &
wait
for f in ctrain_full ctrain_r50_eager ctrain_bl_eager rc_bl rc_r50; do grep -E "^(model|resnet|bert)|configs in" $OUT/$f.log | cut -c1-150; done
grep -E "^(model|resnet|bert)|configs in" $OUT/torch_full.log | cut -c1-150
grep -E "test_acc|majority|trained|accuracy|ctrain:" $OUT/fortunes.log | cut -c1-200
$B report $OUT/ctrain_full.json $OUT/torch_full.json --baseline pytorch --out $OUT/report_full.md > /dev/null 2>&1
(cd $OUT && tar czf suites.tgz *.log *.json *.md 2>/dev/null)
