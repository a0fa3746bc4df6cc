#!/bin/bash
# session 4 call 3 (x2): NCCL-registered gradient buffers / symmetric windows / CTA policy, A/B; gpu_dist
: "${OUT:?}"; L=$OUT/logs; mkdir -p $L; pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
mkdir -p .dev && tar xJf out/dev.tar.xz -C .dev && cp build/ctrain .dev/ctrain && cp out/gpu_dist .dev/tests/gpu_dist
B=.dev/ctrain
T="train --gpus 2 --model bert-large --data synthetic --batch 32 --seq 128 --precision bf16 --steps 150 --graph"
run() { tag=$1; envs=$2; args=$3; env $envs timeout 50 $B $T $args > $L/g_$tag.log 2>&1; rc=$?
  echo "$tag rc=$rc $(grep 'step 150/150' $L/g_$tag.log | grep -o '[0-9]* samples/s') | $(grep -o 'buckets of.*backward, [a-zA-Z -]* buffers' $L/g_$tag.log | head -1) $(grep -c WARN $L/g_$tag.log) warn"; }
run f32_r0 "CTRAIN_NCCL_REG=0 X=1" "--grad-reduce f32"
run f32_r1 "CTRAIN_NCCL_REG=1 X=1" "--grad-reduce f32"
run f32_r2 "CTRAIN_NCCL_REG=2 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,REG,TUNING" "--grad-reduce f32"
run bf16_r2 "CTRAIN_NCCL_REG=2 X=1" "--grad-reduce bf16"
run bf16_r1 "CTRAIN_NCCL_REG=1 X=1" "--grad-reduce bf16"
run f32_cta1 "NCCL_CTA_POLICY=1 X=1" "--grad-reduce f32"
run f32_r2_cta1 "CTRAIN_NCCL_REG=2 NCCL_CTA_POLICY=1" "--grad-reduce f32"
run f32_r2_100 "CTRAIN_NCCL_REG=2 X=1" "--grad-reduce f32 --bucket-mb 100"
pack
CTRAIN_NCCL_REG=2 CTRAIN_DIST_GRAPH=0 CTRAIN_DIST_TRACE=1 timeout 60 $B train --gpus 2 --model bert-large --data synthetic --batch 32 --seq 128 --precision bf16 --steps 40 > $L/trace_r2.log 2>&1
echo "trace r2 rc=$?"; grep "step trace" $L/trace_r2.log | sed 's/.*trace, //'; pack
CTRAIN_DIST_TEST_DIR=/tmp/gd timeout 240 .dev/tests/gpu_dist > $L/gpu_dist.log 2>&1; echo "gpu_dist rc=$?"
grep -E "FAIL|passed" $L/gpu_dist.log | head; pack
