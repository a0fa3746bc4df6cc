#!/bin/sh
# development batch: PyTorch loads a ctrain checkpoint, BERT parity, BERT-large throughput
B=.dev/ctrain
$B train --model resnet50 --data synthetic --image-size 64 --batch 8 --steps 2 --save /tmp/r50.safetensors > $OUT/save.log 2>&1; tail -1 $OUT/save.log
python3 scripts/torch_load_check.py resnet50 /tmp/r50.safetensors 2>&1 | tail -2
python3 scripts/torch_parity.py bert base 8 128 /tmp/bp > $OUT/bert_parity.log 2>&1; .dev/tests/gpu_bert_parity /tmp/bp base >> $OUT/bert_parity.log 2>&1; grep -E "loss|worst|passed|FAIL" $OUT/bert_parity.log
for p in fp32 tf32; do
  $B train --model bert-large --data synthetic --batch 32 --seq 128 --steps 20 --optim adamw --lr 1e-4 --precision $p --log-every 10 > $OUT/bl_$p.log 2>&1; echo "bert-large $p: $(grep 'step 20/' $OUT/bl_$p.log | cut -c1-110)"
done
python3 scripts/torch_bench.py --models bert-large --precision fp32,tf32 --batch 32 --seq 128 --steps 10 --warmup 3 --json $OUT/torch_bert.jsonl > /dev/null 2>&1; cut -c1-420 $OUT/torch_bert.jsonl
