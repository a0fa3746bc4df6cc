#!/bin/bash
# session 5 call 1 (x2): the CUPTI timeline's first GPU run (BERT-large 1 vs 2 GPUs),
# seq 512 kernels next to torch.profiler's, --max-batch BERT-large seq 512 again
: "${OUT:?}"; L=$OUT/logs; mkdir -p $L; pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
mkdir -p .dev && tar xJf out/dev.tar.xz -C .dev
B=$PWD/.dev/ctrain
nvidia-smi > $L/nvidia-smi.txt; nvidia-smi topo -m >> $L/nvidia-smi.txt
OUT=$L sh scripts/h200x2_timeline.sh $B; pack
echo "== seq 512 (GPU 0) and max-batch (GPU 1)"
( CUDA_VISIBLE_DEVICES=1 timeout 280 $B bench --max-batch --models bert-large --seq 512 --precision bf16 --batch 64 \
    --json $L/maxb_bl.json > $L/maxb_bl.log 2>&1; echo "max-batch rc=$?" ) &
CUDA_VISIBLE_DEVICES=0 CTRAIN_TIMELINE=$L/s512.json:20:3 timeout 100 $B train --model bert-large --data synthetic \
  --batch 32 --seq 512 --precision bf16 --steps 30 --graph > $L/s512.log 2>&1
echo "s512 rc=$?"; grep -E "timeline|samples/s" $L/s512.log | tail -2; pack
timeout 150 python3 scripts/torch_bench.py --models bert-large --batch 32 --seq 512 --precision bf16 --time-limit 3 \
  --profile $L/torch --json $L/torch_s512.json > $L/torch_s512.log 2>&1
echo "torch rc=$?"; grep "^bert-large" $L/torch_s512.log | cut -c1-100; pack
wait; grep -A3 "^model" $L/maxb_bl.log; pack
