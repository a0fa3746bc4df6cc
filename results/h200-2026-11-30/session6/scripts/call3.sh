#!/bin/bash
# session 6 call 3 (x2): which NCCL protocol the bucket all-reduces run (NCCL_DEBUG
# TUNING/COLL lines), and the 2-GPU BERT-large bench with the protocol forced
: "${OUT:?}"; L=$OUT/logs; mkdir -p $L; pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
mkdir -p .dev && tar xJf out/dev.tar.xz -C .dev
B=$PWD/.dev/ctrain
T="train --model bert-large --data synthetic --batch 32 --seq 128 --precision bf16 --steps 6"
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING,COLL,ENV timeout 120 $B $T --gpus 2 > $L/nccl_info.log 2>&1
echo "info rc=$?"; grep -ciE "allreduce" $L/nccl_info.log; grep -iE "allreduce" $L/nccl_info.log | grep -v "Bytes 4 " | head -12 | cut -c1-240
grep -iE "channels|protocol|proto|NCCL_" $L/nccl_info.log | head -20 | cut -c1-200
pack
k() { n=$1; shift; env "$@" timeout 120 $B bench --gpus 2 --models bert-large --time-limit 4 $EXTRA --json $L/k_$n.json > $L/k_$n.log 2>&1
  echo "$n: $(grep -E '^bert-large .*%' $L/k_$n.log)"; }
EXTRA= k base X=1
EXTRA= k simple NCCL_PROTO=Simple
EXTRA= k ll128 NCCL_PROTO=LL128
EXTRA="--grad-reduce bf16" k bf16_simple NCCL_PROTO=Simple
EXTRA= k simple_ch32 NCCL_PROTO=Simple NCCL_MIN_NCHANNELS=32
EXTRA= k simple_ch8 NCCL_PROTO=Simple NCCL_MAX_NCHANNELS=8
pack
