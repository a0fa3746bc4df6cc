#!/bin/bash
# 2-GPU session (development helper): BERT-large rows of both engines (issue 4),
# largest batch BERT-large s512 (issue 5), bucket-size experiments for BERT-large on 2 GPUs.
: "${OUT:?}"
L=$OUT/logs; mkdir -p $L
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
B=.dev/ctrain
echo "== bert-large rows, ctrain (GPU0) and PyTorch (GPU1) at once"
CUDA_VISIBLE_DEVICES=0 timeout 200 $B bench --models bert-large --batch 32 --seq 128,512 --precision fp32,tf32 \
  --time-limit 8 --json $L/bl_ctrain.json > $L/bl_ctrain.log 2>&1 &
CUDA_VISIBLE_DEVICES=1 PYTHONUNBUFFERED=1 timeout 200 python3 scripts/torch_bench.py --models bert-large --batch 32 --seq 128,512 \
  --precision fp32,tf32 --time-limit 8 --json $L/bl_torch.json > $L/bl_torch.log 2>&1
wait
$B report $L/bl_ctrain.json $L/bl_torch.json --baseline pytorch --out $L/bl_report.md > /dev/null 2>&1
cat $L/bl_report.md | head -14; pack
echo "== max batch bert-large s512 bf16"
timeout 230 $B bench --max-batch --models bert-large --seq 512 --precision bf16 --batch 64 --json $L/maxb_bl.json > $L/maxb_bl.log 2>&1; echo "rc=$?"
grep -v "^\[" $L/maxb_bl.log | tail -16; pack
echo "== bert-large 2 GPUs bucket sizes (graph, bf16, bs 32, seq 128)"
for mb in 25 100 0; do
  timeout 45 $B train --gpus 2 --model bert-large --data synthetic --batch 32 --seq 128 --precision bf16 --steps 120 \
    --graph --bucket-mb $mb --log-every 20 --log $L/bk_$mb.jsonl > $L/bk_$mb.log 2>&1
  echo "bucket-mb $mb rc=$? $(grep -o '"samples_per_s":[0-9.]*' $L/bk_$mb.jsonl | tail -3 | tr '\n' ' ')"
done
pack
