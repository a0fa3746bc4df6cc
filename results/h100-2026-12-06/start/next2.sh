#!/bin/bash
# next session's second call (~300 s): where the seq 512 steps go now (timelines, q/k/v joined),
# and ncu on the GELU backward with the bias sums (366 us a call at seq 128, ~65% of bandwidth)
set -u
S0=$(date +%s)
me=next2; . scripts/device/unpack.sh
el() { echo $(( $(date +%s) - S0 )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $L/gpu.txt
W=$(mktemp -d)
if timeout 120 python3 scripts/torch_parity.py bert base 8 128 /tmp/ctrain_parity/bert-base > $L/parity_ref_bert.log 2>&1; then
  timeout 200 .dev/new/tests/gpu_bert_parity /tmp/ctrain_parity/bert-base base > $L/gpu_bert_parity.log 2>&1
  echo "gpu_bert_parity: status $?, $(tail -n 1 $L/gpu_bert_parity.log) at $(el) s"; grep -m5 FAIL $L/gpu_bert_parity.log|cut -c1-200
else echo "no parity reference"; tail -3 $L/parity_ref_bert.log; fi; pack
tl() { local n=$1; shift; [ $(el) -lt 200 ] || return; CTRAIN_TIMELINE=$W/$n.json:8:3 timeout 80 "$@" > $L/$n.log 2>&1
  echo "timeline $n rc $? at $(el) s"; cp $W/$n.json.txt $L/$n.txt; sed -n 2p $L/$n.txt; sed -n 6,24p $L/$n.txt | cut -c1-150; pack; }
BT="train --model bert-large --data synthetic --graph --optim adamw --lr 1e-4 --steps 11 --log-every 5 --no-eval"
tl tl512_fp8 $NEW $BT --seq 512 --batch 32 --precision fp8
tl tl512_bf16 $NEW $BT --seq 512 --batch 32 --precision bf16
tl tl128_fp8 $NEW $BT --seq 128 --batch 256 --precision fp8
timeout 120 .dev/new/cudnn_sdpa_probe 32 16 512 64 --dtype bf16 --accum > $L/sdpa512.log 2>&1
echo "sdpa probe seq 512 (dQ direct against the f32 accumulator form) rc $? at $(el) s"
grep -E "median_ms|NON-DET|refus" $L/sdpa512.log | grep -E '"bwd"|NON|refus' | cut -c1-220 | head -12; pack
A="train --model bert-large --data synthetic --seq 128 --batch 256 --optim adamw --lr 1e-4 --steps 1 --log-every 1 --no-eval"
timeout 150 ncu --clock-control none --set full -k "regex:colsum_vec_kernel" -c 2 $NEW $A --precision bf16 > $L/ncu_colsum.txt 2>&1
echo "ncu colsum rc $? at $(el) s"
grep -E "^  [a-z_].*\(|Duration  |Compute \(SM\) Throughput|DRAM Throughput|Registers Per|Achieved Occupancy|Executed Ipc Active|Issue Slots Busy" $L/ncu_colsum.txt | cut -c1-150
pack
echo "total $(el) s"
