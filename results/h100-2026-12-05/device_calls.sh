# The two device calls of 2026-12-05 (an H100 80GB HBM3 was lent), binaries of d251850
# built with `make -j2 ARCH=90` and packed with scripts/device/stage.sh (carry out/).
# 1: the GPU tests written without a GPU
OUT=$OUT bash scripts/device/checks.sh 2            # gpu_conv_plan_store, gpu_graph, gpu_conv2d
.dev/new/tests/gpu_fp8_gemm; .dev/new/tests/gpu_jpeg
# 2: the fp8 and bf16 step timelines, then ncu on the FP8 cast kernels
for p in fp8 bf16; do
  CTRAIN_TIMELINE=tl_$p.json:8:3 ctrain train --model bert-large --data synthetic --seq 128 --batch 256 \
      --precision $p --graph --optim adamw --lr 1e-4 --steps 12 --log-every 4 --no-eval
done
ncu --clock-control none -k regex:fp8_cast -c 12 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section Occupancy --section LaunchStats ctrain train --model bert-large --data synthetic --seq 128 \
    --batch 256 --precision fp8 --optim adamw --lr 1e-4 --steps 2 --log-every 1 --no-eval
