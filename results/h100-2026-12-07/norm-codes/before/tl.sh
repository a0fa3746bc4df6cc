#!/bin/bash
# timelines of BERT-large fp8 seq 512 bs 32, fp8 seq 128 bs 256, bf16 seq 512 bs 32
set -u
me=tl; . scripts/device/unpack.sh; . scripts/device/steps.sh
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $L/gpu.txt
W=$(mktemp -d)
for c in "fp8 512 32" "fp8 128 256" "bf16 512 32"; do
    set -- $c; n=tl_$1_$2
    CTRAIN_TIMELINE=$W/$n.json:8:3 timeout 120 "$NEW" train --model bert-large \
        --data synthetic --seq $2 --batch $3 --precision $1 --graph --optim adamw \
        --lr 1e-4 --steps 12 --log-every 4 --no-eval > "$L/$n.log" 2>&1
    echo "timeline $n (status $?)"; cp "$W/$n.json.txt" "$L/$n.txt" 2>/dev/null
    head -45 "$L/$n.txt"
    pack
done
echo "total $(el) s"
