set -u
me=r4; . scripts/device/unpack.sh; . scripts/device/steps.sh
CHECK_VERBOSE=1 timeout 120 .dev/new/tests/gpu_attention_sm90 > $L/sm90.log 2>&1
echo "gpu_attention_sm90 rc $?"; grep -E "FAIL|passed" $L/sm90.log | head -8
timeout 80 .dev/new/tests/gpu_attention_qkv > $L/qkv.log 2>&1; echo "qkv rc $? $(grep passed $L/qkv.log | tail -1)"
for r in 1 2 3; do for v in old new; do
  timeout 60 .dev/$v/tests/gpu_attention_sm90 --bench sm90 | grep kernel | sed "s/^/$v: /"
done; done 2>&1 | tee $L/old_new.log | cut -c1-130
echo "at $(el) s"
export STEPS_BUDGET=150
for a in cudnn sm90; do
  bb b512_$a 50 CTRAIN_ATTN=$a $NEW bench --models bert-large --seq 512 --batch 32 --precision fp8 --time-limit 3
done
pack
echo "total $(el) s"
