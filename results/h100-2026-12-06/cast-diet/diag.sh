#!/bin/bash
# diagnostics: per-SASS-instruction counts of the GELU casts and the bf16 GELU backward
set -u
S0=$(date +%s)
me=diag; . scripts/device/unpack.sh
el() { echo $(( $(date +%s) - S0 )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $L/gpu.txt
A="train --model bert-large --data synthetic --seq 128 --batch 256 --optim adamw --lr 1e-4 --steps 1 --log-every 1 --no-eval"
W=$(mktemp -d)
pr() { local n=$1 rx=$2 prec=$3
  timeout 150 ncu --clock-control none --set full --import-source no --kernel-name-base demangled -k "regex:$rx" -c 1 -o $W/$n $NEW $A --precision $prec > $L/ncu_$n.log 2>&1
  echo "ncu $n rc $? at $(el) s"
  ncu --import $W/$n.ncu-rep --page details > $L/det_$n.txt 2>&1
  grep -E "Duration  |DRAM Throughput|Executed Ipc Active|Issue Slots Busy|Registers Per|Achieved Occupancy|Executed Instructions  " $L/det_$n.txt | cut -c1-120
  ncu --import $W/$n.ncu-rep --page source --csv --print-source sass > $L/sass_$n.csv 2>&1
  echo "sass rows $(wc -l < $L/sass_$n.csv)"; pack; }
pr gelu "bfloat16, .int.1>" fp8
pr dgelu "bfloat16, .int.2>" fp8
pr plain "bfloat16, .int.0>" fp8
pr colsum1 "colsum_vec_kernel<__nv_bfloat16, .ActKind.1>" bf16
echo "total $(el) s"
