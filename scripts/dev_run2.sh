#!/bin/sh
# development batch: conv algorithm choice in fp32, Fashion-MNIST accuracy, throughput vs PyTorch
B=.dev/ctrain
for p in fp32 tf32; do
  $B train --model resnet50 --data synthetic --batch 256 --steps 40 --precision $p --log-every 10 > $OUT/r50_$p.log 2>&1; echo "$p det: $(grep 'step 40/' $OUT/r50_$p.log | cut -c1-90)"
done
CTRAIN_CONV_NONDETERMINISTIC=1 $B train --model resnet50 --data synthetic --batch 256 --steps 40 --precision fp32 --log-every 10 > $OUT/r50_fp32_nd.log 2>&1; echo "fp32 nondet: $(grep 'step 40/' $OUT/r50_fp32_nd.log | cut -c1-90)"
python3 scripts/torch_bench.py --models resnet50 --precision fp32,tf32 --batch 256 --steps 20 --warmup 5 --json $OUT/torch.jsonl > /dev/null 2>&1; cut -c1-330 $OUT/torch.jsonl
$B train --model resnet50 --data fashion-mnist:.data/fashion-mnist --image-size 32 --epochs 15 --batch 128 --lr 0.1 --nesterov --wd 5e-4 --no-wd-bn-bias --schedule cosine --warmup 400 --precision tf32 --workers 14 --log-every 200 --log $OUT/fm50.jsonl > $OUT/fm50.log 2>&1; tail -3 $OUT/fm50.log
