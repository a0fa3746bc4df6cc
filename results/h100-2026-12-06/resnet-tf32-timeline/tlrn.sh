#!/bin/bash
# ResNet-50 tf32 bs 256: where the step goes (CUPTI timeline), for issue 19's 1.3x
set -u
S0=$(date +%s)
me=tlrn; . scripts/device/unpack.sh
el() { echo $(( $(date +%s) - S0 )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $L/gpu.txt
W=$(mktemp -d)
CTRAIN_TIMELINE=$W/tl.json:8:3 timeout 130 $NEW train --model resnet50 --data synthetic --batch 256 --precision tf32 --graph --optim sgd --lr 0.1 --steps 11 --log-every 5 --no-eval > $L/tlrn_tf32.log 2>&1
echo "timeline rc $? at $(el) s"; cp $W/tl.json.txt $L/tlrn_tf32.txt 2>/dev/null; sed -n 2,4p $L/tlrn_tf32.txt; sed -n 6,40p $L/tlrn_tf32.txt | cut -c1-150; pack
echo "total $(el) s"
