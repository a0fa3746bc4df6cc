#!/bin/bash
# session 5 call 2 (x2): the vectorized transpose12 (test, timelines at seq 128/512,
# bench next to PyTorch), 2-GPU timelines f32 / bf16 reduce / NCCL_MAX_CTAS=4, bench --gpus 2
: "${OUT:?}"; L=$OUT/logs; mkdir -p $L; pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
mkdir -p .dev && tar xJf out/dev.tar.xz -C .dev
B=$PWD/.dev/ctrain
T="train --model bert-large --data synthetic --batch 32 --precision bf16 --graph"
.dev/tests/gpu_shape_ops > $L/gpu_shape_ops.log 2>&1; echo "gpu_shape_ops rc=$? $(tail -1 $L/gpu_shape_ops.log)"
CUDA_VISIBLE_DEVICES=0 CTRAIN_TIMELINE=$L/one.json:20:5 timeout 100 $B $T --seq 128 --steps 40 > $L/one.log 2>&1 &
CUDA_VISIBLE_DEVICES=1 CTRAIN_TIMELINE=$L/s512.json:20:3 timeout 100 $B $T --seq 512 --steps 30 > $L/s512.log 2>&1; wait
for f in one s512; do echo "$f: $(sed -n 2p $L/$f.json.txt)"; grep transpose $L/$f.json.txt; done; pack
echo "== 1 GPU bench: ctrain GPU 0, PyTorch GPU 1"
CUDA_VISIBLE_DEVICES=0 timeout 120 $B bench --models bert-large --batch 32 --seq 128,512 --precision bf16 --time-limit 6 \
  --json $L/bl_ctrain.json > $L/bl_ctrain.log 2>&1 &
timeout 200 python3 scripts/torch_bench.py --models bert-large --batch 32 --seq 128,512 --precision bf16 --time-limit 6 \
  --device cuda:1 --json $L/bl_torch.json > $L/bl_torch.log 2>&1; wait
grep -h "^bert-large" $L/bl_ctrain.log $L/bl_torch.log | cut -c1-100; pack
echo "== 2 GPUs"
tl() { tag=$1; shift; env "$@" CTRAIN_TIMELINE=$L/$tag.json:20:5 timeout 100 $B $T --seq 128 --steps 40 --gpus 2 $EXTRA > $L/$tag.log 2>&1
  echo "$tag rc=$? $(sed -n 2p $L/$tag.json.rank0.txt)"
  python3 scripts/timeline_diff.py $L/one.json.txt $L/$tag.json.rank0.txt --top 12 > $L/diff_$tag.txt 2>&1; }
EXTRA= tl two_f32 X=1
EXTRA="--grad-reduce bf16" tl two_bf16 X=1
EXTRA= tl two_cta4 NCCL_MAX_CTAS=4 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING
grep -h "all events\|ncclDev\|busy" $L/diff_two_*.txt $L/two_*.json.rank0.txt | sort | uniq | head -30; pack
timeout 150 $B bench --gpus 2 --models bert-large --json $L/scaling_bl.json > $L/scaling_bl.log 2>&1
echo "scaling rc=$?"; grep -A4 "^scaling" $L/scaling_bl.log; pack
