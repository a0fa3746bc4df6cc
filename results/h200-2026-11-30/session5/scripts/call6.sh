#!/bin/bash
# session 5 call 6 (x2): the final figures (BERT-large next to PyTorch, 1 GPU timeline,
# bench --gpus 2), then every GPU test: gpu_dist next to two lanes of single-GPU tests
: "${OUT:?}"; L=$OUT/logs; mkdir -p $L; pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
mkdir -p .dev && tar xJf out/dev.tar.xz -C .dev
B=$PWD/.dev/ctrain
CUDA_VISIBLE_DEVICES=0 timeout 120 $B bench --models bert-large --batch 32 --seq 128,512 --precision bf16,fp16 --time-limit 5 \
  --json $L/bl_ctrain.json > $L/bl_ctrain.log 2>&1 &
timeout 200 python3 scripts/torch_bench.py --models bert-large --batch 32 --seq 128,512 --precision bf16,fp16 --time-limit 5 \
  --device cuda:1 --json $L/bl_torch.json > $L/bl_torch.log 2>&1; wait
grep -h "^bert-large" $L/bl_ctrain.log $L/bl_torch.log | cut -c1-100; pack
CUDA_VISIBLE_DEVICES=0 CTRAIN_TIMELINE=$L/one.json:20:5 timeout 100 $B train --model bert-large --data synthetic --batch 32 \
  --precision bf16 --graph --seq 128 --steps 40 > $L/one.log 2>&1; echo "timeline: $(sed -n 2p $L/one.json.txt)"; pack
timeout 200 $B bench --gpus 2 --json $L/scaling.json > $L/scaling.log 2>&1; echo "scaling rc=$?"; grep -A4 "^scaling" $L/scaling.log; pack
python3 scripts/torch_parity.py resnet 50 8 224 /tmp/rp > $L/parity_gen_resnet.log 2>&1
python3 scripts/torch_parity.py bert base 8 128 /tmp/bp > $L/parity_gen_bert.log 2>&1
t() { n=$1; shift; CUDA_VISIBLE_DEVICES=$GPU timeout 240 "$@" > $L/$n.log 2>&1; echo "$n rc=$? $(tail -1 $L/$n.log)"; grep -m3 FAIL $L/$n.log; }
( CTRAIN_DIST_TEST_DIR=/tmp/gd timeout 330 .dev/tests/gpu_dist > $L/gpu_dist.log 2>&1; echo "gpu_dist rc=$? $(tail -1 $L/gpu_dist.log)"; grep -m5 FAIL $L/gpu_dist.log ) &
( GPU=0; for x in gpu_transformer_ops gpu_flash_attn gpu_graph gpu_model gpu_matmul gpu_linear_epilogue; do t $x .dev/tests/$x; done ) &
( GPU=1; t gpu_bert_parity .dev/tests/gpu_bert_parity /tmp/bp base; t gpu_resnet_parity .dev/tests/gpu_resnet_parity /tmp/rp
  for x in gpu_shape_ops gpu_elementwise gpu_optim_amp gpu_softmax gpu_pool gpu_batchnorm gpu_bn_compare gpu_bn_op_cudnn gpu_conv2d; do t $x .dev/tests/$x; done ) &
wait; pack
