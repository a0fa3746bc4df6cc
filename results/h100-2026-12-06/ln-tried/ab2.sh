#!/bin/bash
# A/B: the add_norm backward's next row in flight (FULL), the finish kernels' loads unrolled
set -u
S0=$(date +%s)
me=ab2; . scripts/device/unpack.sh
el() { echo $(( $(date +%s) - S0 )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $L/gpu.txt
T=.dev/new/tests
tt() { local n=$1; s=$(date +%s); timeout $2 stdbuf -oL $T/$n > $L/$n.log 2>&1
  echo "$n rc $? $(grep -E '^[0-9]+ passed' $L/$n.log|tail -1) ($(( $(date +%s)-s )) s)"; grep -m6 FAIL $L/$n.log | cut -c1-200; pack; }
for t in gpu_add_norm gpu_transformer_ops gpu_fp8_gemm; do tt $t 120; done
if timeout 100 python3 scripts/torch_parity.py bert base 8 128 /tmp/ctrain_parity/bert-base > $L/parity_ref_bert.log 2>&1; then
  timeout 150 $T/gpu_bert_parity /tmp/ctrain_parity/bert-base base > $L/gpu_bert_parity.log 2>&1
  echo "gpu_bert_parity rc $? $(tail -n 1 $L/gpu_bert_parity.log) at $(el) s"; grep -m5 FAIL $L/gpu_bert_parity.log|cut -c1-200
fi; pack
bb() { local n=$1 bin=$2; shift 2; [ $(el) -lt 330 ] || { echo "$n: no time"; return; }
       timeout 100 $bin bench "$@" --time-limit 3 --json $L/$n.json > $L/$n.log 2>&1
       echo "$n (rc $?) at $(el) s:"; grep -E "^(bert|resnet)" $L/$n.log | cut -c1-100; pack; }
for r in 1 2; do
  bb b128_old$r $OLD --models bert-large --seq 128 --batch 256 --precision bf16,fp8
  bb b128_new$r $NEW --models bert-large --seq 128 --batch 256 --precision bf16,fp8
done
bb b512_old $OLD --models bert-large --seq 512 --batch 32 --precision bf16,fp8
bb b512_new $NEW --models bert-large --seq 512 --batch 32 --precision bf16,fp8
A="train --model bert-large --data synthetic --seq 128 --batch 256 --optim adamw --lr 1e-4 --steps 1 --log-every 1 --no-eval --precision bf16"
for v in old new; do [ $(el) -lt 360 ] || break; bin=$NEW; [ $v = old ] && bin=$OLD
  timeout 60 ncu --clock-control none --section SpeedOfLight --section Occupancy --kernel-name-base demangled -k "regex:ln_bwd_vec_kernel<__nv_bfloat16, 4, true, true>|ln_bwd_finish" -c 2 $bin $A > $L/ncu_ln_$v.txt 2>&1
  echo "ncu ln $v:"; grep -E "^  [a-z_].*\(|Duration  |DRAM Throughput" $L/ncu_ln_$v.txt | cut -c1-100; pack
done
echo "total $(el) s"
