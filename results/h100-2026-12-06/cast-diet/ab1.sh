#!/bin/bash
# A/B: the FP8 casts' instruction diet (rcp.approx.ftz, NaN by vector, FMT template, 2D grid)
set -u
S0=$(date +%s)
me=ab1; . scripts/device/unpack.sh
el() { echo $(( $(date +%s) - S0 )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $L/gpu.txt
T=.dev/new/tests
tt() { local n=$1; s=$(date +%s); timeout $2 stdbuf -oL $T/$n > $L/$n.log 2>&1
  echo "$n rc $? $(grep -E '^[0-9]+ passed' $L/$n.log|tail -1) ($(( $(date +%s)-s )) s)"; grep -m6 FAIL $L/$n.log | cut -c1-200; pack; }
for t in gpu_fp8 gpu_fp8_gemm gpu_linear_fp8 gpu_elementwise gpu_linear_act; do tt $t 120; done
bb() { local n=$1 bin=$2; shift 2; [ $(el) -lt 420 ] || { echo "$n: no time"; return; }
       timeout 100 $bin bench "$@" --time-limit 3 --json $L/$n.json > $L/$n.log 2>&1
       echo "$n (rc $?) at $(el) s:"; grep -E "^(bert|resnet)" $L/$n.log | cut -c1-100; pack; }
for r in 1 2; do
  bb b128_old$r $OLD --models bert-large --seq 128 --batch 256 --precision fp8,bf16
  bb b128_new$r $NEW --models bert-large --seq 128 --batch 256 --precision fp8,bf16
done
bb b512_old $OLD --models bert-large --seq 512 --batch 32 --precision fp8,bf16
bb b512_new $NEW --models bert-large --seq 512 --batch 32 --precision fp8,bf16
A="train --model bert-large --data synthetic --seq 128 --batch 256 --optim adamw --lr 1e-4 --steps 1 --log-every 1 --no-eval --precision fp8"
for k in 0 1 2; do [ $(el) -lt 460 ] || break
  timeout 60 ncu --clock-control none --section SpeedOfLight --section InstructionStats --kernel-name-base demangled -k "regex:bfloat16, .int.$k, .int.[01]>" -c 1 $NEW $A > $L/ncu_new$k.txt 2>&1
  echo "ncu mode $k:"; grep -E "Duration  |DRAM Throughput|Executed Instructions  |Compute \(SM\)" $L/ncu_new$k.txt | cut -c1-100; pack
done
B="train --model bert-large --data synthetic --seq 128 --batch 256 --optim adamw --lr 1e-4 --steps 1 --log-every 1 --no-eval --precision bf16"
for v in old new; do [ $(el) -lt 480 ] || break; bin=$NEW; [ $v = old ] && bin=$OLD
  timeout 60 ncu --clock-control none --section SpeedOfLight --section InstructionStats --kernel-name-base demangled -k "regex:colsum_vec_kernel<__nv_bfloat16, .ActKind.1>" -c 1 $bin $B > $L/ncu_colsum_$v.txt 2>&1
  echo "ncu colsum $v:"; grep -E "Duration  |DRAM Throughput|Executed Instructions  |Compute \(SM\)" $L/ncu_colsum_$v.txt | cut -c1-100; pack
done
echo "total $(el) s"
