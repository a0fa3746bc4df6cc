set -u
me=r1; . scripts/device/unpack.sh; . scripts/device/steps.sh
export STEPS_BUDGET=330
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $L/gpu.txt
CHECK_VERBOSE=1 timeout 150 .dev/new/tests/gpu_attention_sm90 > $L/sm90.log 2>&1
echo "gpu_attention_sm90 rc $?"; grep -E "FAIL|SKIP|passed" $L/sm90.log | head -20
grep -E "cluster.dq:" $L/sm90.log | head -8
pack
for r in 1 2; do
  for v in old new; do
    [ -x .dev/$v/tests/gpu_attention_sm90 ] || continue
    timeout 60 .dev/$v/tests/gpu_attention_sm90 --bench sm90 | grep kernel | sed "s/^/$v: /"
  done
done 2>&1 | tee $L/old_new.log | cut -c1-150
pack
if grep -q " 0 failed" $L/sm90.log; then
  for a in cluster kernel cluster kernel; do
    bb b512_$a 70 CTRAIN_ATTN=sm90 CTRAIN_ATTN_SM90_DQ=$a $NEW bench --models bert-large --seq 512 \
        --batch 32 --precision fp8 --time-limit 3
  done
  bb b512_cudnn 70 CTRAIN_ATTN=cudnn $NEW bench --models bert-large --seq 512 --batch 32 \
      --precision fp8 --time-limit 3
  for a in cluster kernel; do
    bb b128_$a 90 CTRAIN_ATTN=sm90 CTRAIN_ATTN_SM90_DQ=$a $NEW bench --models bert-large --seq 128 \
        --batch 256 --precision fp8 --time-limit 3
  done
fi
tt gpu_attention_qkv 100
tt gpu_add_norm 60
tt gpu_bn_compare 60
echo "total $(el) s"
