#!/bin/bash
# session 4 call 5 (x2): sync-bn 5-step check (new settings) x3; BERT-large fp32/tf32 ctrain vs PyTorch; bucket / NCCL knobs
: "${OUT:?}"; L=$OUT/logs; mkdir -p $L; pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
mkdir -p .dev && tar xJf out/dev.tar.xz -C .dev && cp out/gpu_dist .dev/tests/gpu_dist
B=.dev/ctrain; T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s]"; }
BL="--models bert-large --batch 32 --seq 128,512 --precision fp32,tf32 --time-limit 6"
CUDA_VISIBLE_DEVICES=0 timeout 150 $B bench $BL --json $L/bl32_ctrain.json > $L/bl32_ctrain.log 2>&1 &
CUDA_VISIBLE_DEVICES=1 PYTHONUNBUFFERED=1 timeout 150 python3 scripts/torch_bench.py $BL --json $L/bl32_torch.json > $L/bl32_torch.log 2>&1
wait; echo "bl32 done $(el)"; grep -E "^bert-large" $L/bl32_ctrain.log | cut -c1-100; grep -E "^bert-large" $L/bl32_torch.log | cut -c1-100; pack
for i in 1 2 3; do
  CTRAIN_DIST_TEST_DIR=/tmp/gd$i timeout 100 .dev/tests/gpu_dist sync-bn > $L/syncbn_$i.log 2>&1; echo "sync-bn run $i rc=$? $(tail -1 $L/syncbn_$i.log) $(el)"
  grep FAIL $L/syncbn_$i.log; paste <(grep -o '"loss":[0-9.e-]*' /tmp/gd$i/syncbn5.one.jsonl) <(grep -o '"loss":[0-9.e-]*' /tmp/gd$i/syncbn5.two.jsonl) | tr '\n' ' '; echo
done; pack
T="train --gpus 2 --model bert-large --data synthetic --batch 32 --seq 128 --precision bf16 --steps 150 --graph"
for v in "A X=1 -" "B NCCL_GRAPH_MIXING_SUPPORT=0 -" "C X=1 --bucket-mb=200" "D X=1 --bucket-mb=50"; do set -- $v
  env $2 timeout 45 $B $T $(echo $3 | tr = ' ' | sed 's/^-$//') > $L/k_$1.log 2>&1; echo "$v rc=$? $(grep 'step 150/150' $L/k_$1.log | grep -o '[0-9]* samples/s') $(el)"
done; pack
