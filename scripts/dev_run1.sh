#!/bin/sh
# one GPU session's batch of checks (development helper)
set -x
python3 scripts/torch_parity.py resnet 50 8 224 /tmp/par > $OUT/parity.log 2>&1
.dev/tests/gpu_resnet_parity /tmp/par 50 >> $OUT/parity.log 2>&1
tail -6 $OUT/parity.log
.dev/ctrain train --model resnet18 --data fashion-mnist:.data/fashion-mnist --epochs 1 --batch 128 --lr 0.1 --workers 12 --log-every 100 > $OUT/r18.log 2>&1
tail -4 $OUT/r18.log
for p in fp32 tf32; do
.dev/ctrain train --model resnet50 --data synthetic --batch 256 --steps 30 --precision $p --log-every 10 > $OUT/r50_$p.log 2>&1
tail -3 $OUT/r50_$p.log
done
python3 scripts/torch_bench.py --models resnet50 --precision fp32,tf32 --batch 256 --steps 20 --warmup 5 > $OUT/torch.log 2>&1
cat $OUT/torch.log | cut -c1-400
