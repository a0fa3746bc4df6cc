set -u
me=r2; . scripts/device/unpack.sh; . scripts/device/steps.sh
export STEPS_BUDGET=150
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $L/gpu.txt
CHECK_VERBOSE=1 timeout 150 .dev/new/tests/gpu_attention_sm90 > $L/sm90.log 2>&1
echo "gpu_attention_sm90 rc $?"; grep -E "FAIL|SKIP|passed" $L/sm90.log | head -20
pack
for r in 1; do
  for v in old new; do
    timeout 60 .dev/$v/tests/gpu_attention_sm90 --bench sm90 | grep kernel | sed "s/^/$v: /"
  done
done 2>&1 | tee $L/old_new.log | sed 's/"B":32,"H":16,"T":512,"p"://; s/,"fwd_tflops.*//'
pack
if grep -q " 0 failed" $L/sm90.log; then
  S5="--models bert-large --seq 512 --batch 32 --precision fp8 --time-limit 3"
  S1="--models bert-large --seq 128 --batch 256 --precision fp8 --time-limit 3"
  bb b512_push1 70 CTRAIN_ATTN=sm90 CTRAIN_ATTN_SM90_DQ=push $NEW bench $S5
  bb b512_cudnn 70 CTRAIN_ATTN=cudnn $NEW bench $S5
  bb b512_kernel 70 CTRAIN_ATTN=sm90 CTRAIN_ATTN_SM90_DQ=kernel $NEW bench $S5
  bb b128_push 90 CTRAIN_ATTN=sm90 CTRAIN_ATTN_SM90_DQ=push $NEW bench $S1
  bb b128_cudnn 90 CTRAIN_ATTN=cudnn $NEW bench $S1
  bb b512_push2 70 CTRAIN_ATTN=sm90 CTRAIN_ATTN_SM90_DQ=push $NEW bench $S5
fi
tt gpu_attention_qkv 60
tt gpu_flash_attn 60
if [ "$(el)" -lt 200 ]; then
  timeout 40 .dev/new/tests/gpu_bn_compare --quick --no-time > $L/bn_compare.log 2>&1
  echo "gpu_bn_compare --quick --no-time rc $? $(grep -E '^[0-9]+ passed' $L/bn_compare.log)"
fi
pack
echo "total $(el) s"
