set -u
me=r8bit; . scripts/device/unpack.sh; . scripts/device/steps.sh
export STEPS_BUDGET=470
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $L/gpu.txt
tt gpu_attention_sm90 120
for r in 1 2; do
  for v in old new; do
    timeout 60 .dev/$v/tests/gpu_attention_sm90 --bench sm90 | grep kernel | sed "s/^/$v: /"
  done
done 2>&1 | tee $L/old_new.log | cut -c1-150
pack
S5="--models bert-large --seq 512 --batch 32 --precision fp8 --time-limit 3"
S1="--models bert-large --seq 128 --batch 256 --precision fp8 --time-limit 3"
if grep -q " 0 failed" $L/gpu_attention_sm90.log; then
  for r in 1 2; do
    bb b512_cudnn_$r 70 CTRAIN_ATTN=cudnn $NEW bench $S5
    bb b512_old_$r 70 CTRAIN_ATTN=sm90 $OLD bench $S5
    bb b512_new_$r 70 CTRAIN_ATTN=sm90 $NEW bench $S5
  done
  bb b128_cudnn 90 CTRAIN_ATTN=cudnn $NEW bench $S1
  bb b128_kernel 90 CTRAIN_ATTN=sm90 CTRAIN_ATTN_SM90_DQ=kernel $NEW bench $S1
  bb b128_cluster 90 CTRAIN_ATTN=sm90 CTRAIN_ATTN_SM90_DQ=cluster $NEW bench $S1
fi
for t in gpu_flash_attn gpu_transformer_ops gpu_attention_qkv gpu_graph gpu_grad_fresh gpu_linear_fp8; do
  [ "$(el)" -lt 540 ] && CTRAIN_ATTN=sm90 tt $t 60
done
if [ "$(el)" -lt 540 ]; then
  timeout 50 .dev/new/tests/gpu_bn_compare --quick --no-time > $L/bn_quick.log 2>&1
  echo "bn_quick rc $? $(grep -E '^[0-9]+ passed' $L/bn_quick.log)"; grep -m5 -E "FAIL|ambiguous" $L/bn_quick.log | cut -c1-200
  pack
fi
echo "total $(el) s"
