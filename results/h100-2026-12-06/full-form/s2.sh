#!/bin/bash
# cuDNN RNG-dropout probe vs host reference; LN backward FULL form old/new; BERT rows; timelines;
# ResNet own BN vs cuDNN BN; PyTorch beside
set -u
S0=$(date +%s)
me=s2; . scripts/device/unpack.sh
el() { echo $(( $(date +%s) - S0 )); }
T=.dev/new/tests
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader | tee $L/gpu.txt
P=.dev/new/cudnn_sdpa_probe
for sh in "2 4 128 64" "2 4 512 64"; do
  f="$L/probe_${sh// /_}.log"; timeout 60 $P $sh --dtype both > "$f" 2>&1; echo "probe $sh rc $? at $(el) s"
  grep -iE "fail|ref|^\(|rel" "$f" | cut -c1-170 | head -40
done
for r in 32768 16384; do timeout 60 .dev/new/gemm_algo_probe $r > $L/gemm_probe_$r.log 2>&1; echo "gemm probe $r rc $? at $(el) s"; cat $L/gemm_probe_$r.log | cut -c1-150; done
pack
tt() { local n=$1; s=$(date +%s); CTRAIN_PLAN_CACHE=off timeout $2 stdbuf -oL $T/$n > $L/$n.log 2>&1
  echo "$n rc $? $(grep -E '^[0-9]+ passed' $L/$n.log|tail -1) ($(( $(date +%s)-s )) s)"; grep -m5 FAIL $L/$n.log | cut -c1-200; pack; }
tt gpu_add_norm 90
tt gpu_fp8 60
bb() { local n=$1 bin=$2; shift 2; [ $(el) -lt 480 ] || { echo "$n: no time"; return; }
       timeout 100 $bin bench "$@" --time-limit 3 --json $L/$n.json > $L/$n.log 2>&1
       echo "$n (rc $?) at $(el) s:"; grep -E "^(bert|resnet)" $L/$n.log | cut -c1-200; pack; }
B128="--models bert-large --seq 128 --batch 256 --precision bf16,fp8"
B512="--models bert-large --seq 512 --batch 32 --precision bf16,fp8"
bb b128_old $OLD $B128
bb b128_new $NEW $B128
bb b512_new $NEW $B512
bb b512_old $OLD $B512
bb b128_new2 $NEW $B128
bb b128_old2 $OLD $B128
[ $(el) -lt 300 ] && tt gpu_transformer_ops 90
python3 - $L/b128_new.json $L/b512_new.json <<'P'
import json,sys
for f in sys.argv[1:]:
    try:
        for r in json.load(open(f))["results"]:
            print({k:r.get(k) for k in ("seq","precision","samples_per_s","peak_mem_bytes","live_peak_bytes","live_peak_at")})
    except Exception as e: print(f, e)
P
W=$(mktemp -d)
tl() { local n=$1; shift; [ $(el) -lt 470 ] || return; CTRAIN_TIMELINE=$W/$n.json:8:3 timeout 80 "$@" > $L/$n.log 2>&1
  echo "timeline $n rc $? at $(el) s"; cp $W/$n.json.txt $L/$n.txt; sed -n 2p $L/$n.txt; sed -n 6,22p $L/$n.txt | cut -c1-150; pack; }
BT="train --model bert-large --data synthetic --graph --optim adamw --lr 1e-4 --steps 11 --log-every 5 --no-eval"
tl tl512_fp8 $NEW $BT --seq 512 --batch 32 --precision fp8
tl tl128_bf16 $NEW $BT --seq 128 --batch 256 --precision bf16
for sb in "128 256" "512 32"; do set -- $sb
  [ $(el) -lt 420 ] && { timeout 70 python3 scripts/torch_bench.py --models bert-large --seq $1 --batch $2 --precision bf16 --time-limit 3 > $L/torch_bert$1.log 2>&1
  echo "torch bert $1 rc $? at $(el) s"; grep -E "^bert" $L/torch_bert$1.log | cut -c1-200; pack; }
done
bb rn256 $NEW --models resnet50 --batch 256 --precision bf16
CTRAIN_BN=own bb rn256own $NEW --models resnet50 --batch 256 --precision bf16
RT="train --model resnet50 --data synthetic --batch 256 --precision bf16 --graph --steps 11 --log-every 5 --no-eval"
tl tlrn_cudnn $NEW $RT
CTRAIN_BN=own tl tlrn_own $NEW $RT
tl tl512_bf16 $NEW $BT --seq 512 --batch 32 --precision bf16
tl tlrn_tf32 $NEW train --model resnet50 --data synthetic --batch 256 --precision tf32 --graph --steps 11 --log-every 5 --no-eval
echo "total $(el) s"
