# issue 19 status: ResNet50 bs 256 tf32 and fp32, ctrain then PyTorch (channels_last, NCHW) in one call
me=r19a.sh; . scripts/device/unpack.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$L/gpu.txt"
t0=$(date +%s)
timeout 220 "$NEW" bench --models resnet50 --batch 256 --precision tf32,fp32 --json "$OUT/ctrain.json" > "$L/ctrain.log" 2>&1
echo "ctrain rc $? ($(( $(date +%s) - t0 )) s)"; grep -E '^resnet50' "$L/ctrain.log"
pack
PYTHONUNBUFFERED=1 timeout 120 python3 scripts/torch_bench.py --models resnet50 --batch 256 --precision tf32,fp32 --json "$OUT/torch_cl.json" > "$L/torch_cl.log" 2>&1
echo "torch cl rc $?"; grep -E '^resnet50' "$L/torch_cl.log"
PYTHONUNBUFFERED=1 timeout 80 python3 scripts/torch_bench.py --models resnet50 --batch 256 --precision tf32,fp32 --nchw --json "$OUT/torch_nchw.json" > "$L/torch_nchw.log" 2>&1
echo "torch nchw rc $?"; grep -E '^resnet50' "$L/torch_nchw.log"
echo "total $(( $(date +%s) - t0 )) s"
pack
