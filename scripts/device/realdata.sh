#!/bin/sh
# realdata.sh — on the GPU machine: ResNet50 on a JPEG ImageFolder against
# synthetic data, both decode paths, in one call (the real-data figures of
# docs/results.md).
#
#   OUT=$OUT sh scripts/device/realdata.sh [IMAGES] [BENCH ARGS...]
#     IMAGES  training images to generate (default 6400; 10% more for val/)
#     BENCH ARGS replace the default bench selection
#
# Makes /tmp/imf with scripts/make_image_folder.py (photo-like JPEGs of
# ImageNet-like sizes, --mix: progressive, gray, 4:4:4, a CMYK JPEG and a PNG
# per split), runs the decode tests (gpu_jpeg, gpu_jpeg_feed), then
# `ctrain bench --data /tmp/imf --decode cpu,gpu` (a synthetic row and a
# real-data row per decoder for each config) into $OUT/realdataN.json and the
# report beside it, and one `ctrain train` on the folder with --log, whose
# step records carry the interval data rates. Logs: $OUT/logs.tgz.
me=realdata.sh; . scripts/device/unpack.sh
N=${1:-6400}; [ $# -gt 0 ] && shift
T=$PWD/.dev/new/tests
{
    nproc; nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv
    t0=$(date +%s)
    python3 scripts/make_image_folder.py /tmp/imf --train "$N" --val $((N / 10)) --classes 100 --mix
    echo "folder made in $(( $(date +%s) - t0 )) s"; du -sh /tmp/imf
    python3 - <<'EOF'
import glob, os
s = sorted(os.path.getsize(f) for f in glob.glob('/tmp/imf/train/*/*.jpg'))
print(f"{len(s)} train JPEGs, median {s[len(s) // 2] / 1024:.0f} KiB, mean {sum(s) / len(s) / 1024:.0f} KiB")
EOF
} > "$L/folder.log" 2>&1
cat "$L/folder.log"
for t in gpu_jpeg gpu_jpeg_feed; do
    [ -x "$T/$t" ] && { timeout 90 "$T/$t" > "$L/$t.log" 2>&1; echo "$t: $(tail -1 "$L/$t.log")"; }
done
pack
# one bench per selection (each its own JSON), so a slow one cannot take the others
sel=1
run_bench() {
    timeout "$BT" "$NEW" bench "$@" --data /tmp/imf --decode cpu,gpu --workers "$(nproc)" \
        --json "$OUT/realdata$sel.json" > "$L/bench$sel.log" 2>&1
    echo "bench $sel ($*) rc $?"; grep -v '^ *$' "$L/bench$sel.log" | tail -14
    sel=$((sel + 1)); pack
}
if [ $# -gt 0 ]; then BT=300 run_bench "$@"; else
    BT=220 run_bench --models resnet50 --batch 256,64 --precision bf16
    BT=200 run_bench --models resnet50 --batch 256,64 --precision fp16
fi
timeout 80 "$NEW" train --model resnet50 --data /tmp/imf --batch 256 --precision bf16 --graph \
    --workers "$(nproc)" --steps 60 --log-every 10 --log "$L/train_gpu.jsonl" > "$L/train_gpu.log" 2>&1
echo "train --decode auto rc $?"; grep -E "decode|trained" "$L/train_gpu.log" | tail -4
grep '"step"' "$L/train_gpu.jsonl" | tail -3
pack
