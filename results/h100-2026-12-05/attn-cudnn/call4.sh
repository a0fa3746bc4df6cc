#!/bin/bash
# call 4: CTRAIN_ATTN=cudnn as the default: the GPU tests it touches, BERT parity with
# transformers, and seq 512 flash against cudnn again
set -u
S0=$(date +%s)
me=call4; . scripts/device/unpack.sh
el() { echo $(( $(date +%s) - S0 )); }
T=.dev/new/tests
python3 scripts/torch_parity.py bert base 8 128 /tmp/par/bert-base > $L/torch_parity.log 2>&1
echo "torch_parity rc $? at $(el) s"
for t in gpu_transformer_ops gpu_attention_cudnn gpu_flash_attn gpu_model gpu_graph; do
    s=$(date +%s)
    CTRAIN_PLAN_CACHE=off timeout 150 stdbuf -oL $T/$t > $L/$t.log 2>&1; rc=$?
    echo "$t: rc $rc, $(grep -E '^[0-9]+ passed' $L/$t.log | tail -1) ($(( $(date +%s)-s )) s)"
    grep -m5 FAIL $L/$t.log | cut -c1-220
done
s=$(date +%s)
CTRAIN_BERT_PARITY_DIR=/tmp/par/bert-base timeout 120 $T/gpu_bert_parity /tmp/par/bert-base \
    > $L/gpu_bert_parity.log 2>&1; rc=$?
echo "gpu_bert_parity: rc $rc, $(grep -E '^[0-9]+ passed' $L/gpu_bert_parity.log | tail -1) ($(( $(date +%s)-s )) s)"
grep -m5 FAIL $L/gpu_bert_parity.log | cut -c1-220
pack
for a in flash cudnn; do
    [ $(el) -lt 470 ] || break
    CTRAIN_ATTN=$a timeout 90 $NEW bench --models bert-large --seq 512 --batch 32 --precision bf16 \
        --time-limit 3 > $L/b512_$a.log 2>&1
    echo "seq 512 $a:"; grep -E "^bert" $L/b512_$a.log
done
pack
echo "total $(el) s"
