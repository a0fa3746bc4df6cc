#!/bin/bash
# drop8_d.sh — what f036dd7..ec7cbfb, the backward's ring and the stem's staging owe a
# measurement of (docs/kernels.md, "Every dropout at 8 bits a decision", "D made by the dq
# kernel", "The backward's tiles through a ring of three", "The stem's rows staged with their
# loads in flight"): the checks they touch (gpu_conv_stem too), the sm90 kernels' bench
# old / mid / new, BERT-large fp8 at seq 512 bs 32 (twice, and mid once) and seq 128 bs 256
# old against new, a CUPTI timeline of each at seq 512 (add_norm's forward, the dq kernel,
# the D kernel gone), then CTRAIN_ATTN's default against cudnn at every BERT row of the
# targets (owed since the default changed), the other checks and the overlapped update.
#   git worktree add /tmp/ctrain-old 849446e && make -C /tmp/ctrain-old -j ARCH=90
#   (out/old.tar.xz: that build's ctrain and tests/gpu_attention_sm90, stripped, and mid/
#   holding cfd0039's ctrain and gpu_attention_sm90: the mask and D without the ring; nosd/
#   holding gpu_attention_sm90 of the tree at e231ec5 without d50f954: the ring, not the
#   dropout's scale out of the sums)
#   scripts/device/stage.sh build new
#   STEPS_BUDGET=470 OUT=dir bash scripts/device/drop8_d.sh      (~8 minutes on an H100)
#   LEAN=1 OUT=dir bash scripts/device/drop8_d.sh   (~3 minutes: sm90 checks, kernels, one A/B)
set -u
me=drop8_d; . scripts/device/unpack.sh; . scripts/device/steps.sh
export STEPS_BUDGET=${STEPS_BUDGET:-470}
[ -x "$OLD" ] || { echo "drop8_d.sh: no out/old.tar.xz (see the header)" >&2; exit 2; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $L/gpu.txt
tt gpu_attention_sm90 90
S5="--models bert-large --seq 512 --batch 32 --precision fp8 --time-limit 3"
if [ "${LEAN:-0}" = 1 ]; then   # a short call (little device time left): the first answers only
    for v in old/tests old/mid old/nosd new/tests; do
        timeout 40 .dev/$v/gpu_attention_sm90 --bench sm90 | grep kernel | sed "s|^|$v: |"
    done 2>&1 | tee $L/old_new.log | cut -c1-150
    pack
    bb ab512_old_1 50 $OLD bench $S5
    bb ab512_new_1 50 $NEW bench $S5
    for t in gpu_add_norm gpu_transformer_ops gpu_conv_stem; do tt $t 40; done
    echo "total $(el) s"
    exit 0
fi
( timeout 90 python3 scripts/torch_parity.py bert base 8 128 /tmp/ctrain_parity/bert-base \
    > $L/parity_ref_bert.log 2>&1 ) &
for t in gpu_add_norm gpu_transformer_ops gpu_conv_stem; do tt $t 60; done
MID=$PWD/.dev/old/mid/ctrain
wait   # the parity reference off the GPU before anything is timed
for r in 1 2; do
    for v in old/tests old/mid old/nosd new/tests; do
        [ -x .dev/$v/gpu_attention_sm90 ] || continue
        timeout 60 .dev/$v/gpu_attention_sm90 --bench sm90 | grep kernel | sed "s|^|$v: |"
    done
done 2>&1 | tee $L/old_new.log | cut -c1-150
pack
# the sm90 kernels' SASS, for counting a tile's instructions off the device
CUOBJ=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
[ -n "$CUOBJ" ] && timeout 60 "$CUOBJ" -sass .dev/new/tests/gpu_attention_sm90 2>/dev/null |
    awk '/Function :/ { keep = /sm90_/ } keep' | gzip > $L/sass_sm90.txt.gz
pack
S1="--models bert-large --seq 128 --batch 256 --precision fp8 --time-limit 3"
for r in 1 2; do
    bb ab512_old_$r 60 $OLD bench $S5
    bb ab512_new_$r 60 $NEW bench $S5
done
[ -x "$MID" ] && bb ab512_mid 60 $MID bench $S5
bb ab128_old 60 $OLD bench $S1
bb ab128_new 60 $NEW bench $S1
# the stem's staged loads (ResNet has no dropout or attention: old against new is the stem)
for v in old new; do
    V=$OLD; [ $v = new ] && V=$NEW
    bb rn256_$v 60 $V bench --models resnet50 --batch 256 --precision bf16 --time-limit 3
    bb rn64_$v 60 $V bench --models resnet50 --batch 64 --precision bf16 --time-limit 3
done
for v in old new; do
    CTRAIN_TIMELINE=$L/tl_$v.json:8:4 timeout 60 .dev/$v/ctrain bench --models bert-large \
        --seq 512 --batch 32 --precision fp8 --steps 14 --time-limit 20 > $L/tl_$v.log 2>&1
    echo "timeline $v rc $?"
done
python3 scripts/timeline_diff.py $L/tl_old.json.txt $L/tl_new.json.txt --top 30 > $L/diff.txt 2>&1
head -42 $L/diff.txt | cut -c1-160; rm -f $L/*.json; pack
round() {
    for cfg in "fp8 512 32" "bf16 512 32" "fp8 128 256" "bf16 128 256" "bf16 128 32"; do
        set -- $cfg
        A="--models bert-large --seq $2 --batch $3 --precision $1 --time-limit 3"
        bb ${1}_$2_$3_cudnn_$r 60 CTRAIN_ATTN=cudnn $NEW bench $A
        bb ${1}_$2_$3_auto_$r 60 $NEW bench $A
    done
}
r=1; round
for t in gpu_attention_qkv gpu_graph gpu_grad_fresh gpu_norm_codes gpu_dz_codes; do tt $t 40; done
wait
tt gpu_bert_parity 40
r=2; round
B="--models bert-base --seq 128 --batch 256 --precision bf16 --time-limit 3"
bb base_cudnn 50 CTRAIN_ATTN=cudnn $NEW bench $B
bb base_auto 50 $NEW bench $B
# the update overlapped with the backward (off: measured no faster in bf16 on H200s), once
# more at fp8 seq 512, whose optimizer is 3.7 ms of a 62 ms step
bb fp8_512_32_overlap 60 CTRAIN_OVERLAP_UPDATE=1 $NEW bench $S5
pack
echo "total $(el) s"
