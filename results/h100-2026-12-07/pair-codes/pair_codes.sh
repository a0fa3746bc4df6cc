#!/bin/bash
# pair_codes.sh — on one GPU, with binaries built elsewhere (scripts/device/stage.sh,
# out/old.tar.xz the revision before the changes, d4ad7e0): three changes written
# without a GPU, their checks, then their worth in ResNet-50's step.
#
#   OUT=dir bash scripts/device/pair_codes.sh
#
#   1. gpu_bn_op_cudnn (CTRAIN_BN_PAIR: our BN + add + ReLU forward writing cuDNN's
#      reserve mask before cuDNN's backward, checked per form), gpu_pool (the max
#      pool's one-byte codes), gpu_conv_stem (the stem's kernels in f16). Seconds.
#   2. `ctrain bench --models resnet50 --batch 256 --time-limit 3`, bf16: old (i32
#      indices) against new (one-byte codes: peak memory ~-0.14 GiB), new with
#      CTRAIN_BN_PAIR=add_relu (the first with the debug log: each form's verdict,
#      the workspace's growth) and =all; fp16: CTRAIN_CONV_STEM=own against all.
#      Alternated, so that a drift of the card shows.
#   3. fp32 with the debug log: the workspace's growth (docs/kernels.md, "the peak
#      it leaves"), where the strict-f32 rows' peak sits above PyTorch's.
# About 8 minutes on an H100 whose plans came in out/plans.tgz; an H200 searches
# its plans in the first bf16 and fp16 runs (~80 s each).
set -u
me=pair_codes; . scripts/device/unpack.sh; . scripts/device/steps.sh
export STEPS_BUDGET=${STEPS_BUDGET:-470}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee $L/gpu.txt
tt gpu_bn_op_cudnn 80
tt gpu_pool 60
tt gpu_conv_stem 60
R="--models resnet50 --batch 256 --time-limit 3"
bb o1 160 $OLD bench $R --precision bf16
bb p1 50 CTRAIN_BN_PAIR=add_relu CTRAIN_LOG=debug $NEW bench $R --precision bf16
bb n1 50 $NEW bench $R --precision bf16
bb f0 160 $NEW bench $R --precision fp16
bb f1 50 CTRAIN_CONV_STEM=all $NEW bench $R --precision fp16
bb p2 50 CTRAIN_BN_PAIR=add_relu $NEW bench $R --precision bf16
bb o2 50 $OLD bench $R --precision bf16
bb f1b 50 CTRAIN_CONV_STEM=all $NEW bench $R --precision fp16
bb f0b 50 $NEW bench $R --precision fp16
bb n2 50 $NEW bench $R --precision bf16
bb a1 50 CTRAIN_BN_PAIR=all $NEW bench $R --precision bf16
bb w32 90 CTRAIN_LOG=debug $NEW bench $R --precision fp32
pack
echo "total $(el) s"
