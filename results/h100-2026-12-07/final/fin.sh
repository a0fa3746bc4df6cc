#!/bin/bash
# the session's final binary: the GPU checks its changes touch, BERT's parity, and issue 20's rows
set -u
me=fin; . scripts/device/unpack.sh; . scripts/device/steps.sh
export STEPS_BUDGET=${STEPS_BUDGET:-380}
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $L/gpu.txt
for t in gpu_norm_codes gpu_add_norm gpu_transformer_ops gpu_linear_fp8 gpu_fp8_codes \
         gpu_dz_codes gpu_attention_qkv gpu_graph; do tt $t 150; done
if timeout 120 python3 scripts/torch_parity.py bert base 8 128 /tmp/ctrain_parity/bert-base \
    > $L/parity_ref_bert.log 2>&1; then
    timeout 150 .dev/new/tests/gpu_bert_parity /tmp/ctrain_parity/bert-base base \
        > $L/gpu_bert_parity.log 2>&1
    echo "gpu_bert_parity rc $?: $(tail -1 $L/gpu_bert_parity.log)"
else echo "gpu_bert_parity: no reference ($L/parity_ref_bert.log)"; fi
pack
B="--models bert-large --seq 128 --batch 256 --time-limit 3"
S="--models bert-large --seq 512 --batch 32 --time-limit 3"
bb f128 60 $NEW bench $B --precision fp8,bf16
bb f512 60 $NEW bench $S --precision fp8,bf16
if [ "$(el)" -lt "$STEPS_BUDGET" ]; then
  timeout 100 python3 scripts/torch_bench.py $B --precision bf16 --json $L/pt128.json > $L/pt128.log 2>&1
  echo "PyTorch seq 128 (rc $?): $(grep -E '^bert' $L/pt128.log | cut -c1-110)"
  timeout 80 python3 scripts/torch_bench.py $S --precision bf16 --json $L/pt512.json > $L/pt512.log 2>&1
  echo "PyTorch seq 512 (rc $?): $(grep -E '^bert' $L/pt512.log | cut -c1-110)"
fi
pack
echo "total $(el) s"
