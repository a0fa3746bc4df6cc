#!/bin/bash
# dist2.sh — on a machine with 2 GPUs (device kind nvidia-h200-x2), with
# binaries built elsewhere (scripts/device/stage.sh): the data-parallel tests
# and the scaling bench, logs under $OUT.
#
#   OUT=dir bash scripts/device/dist2.sh [tests|bench|timeline|all]   (default tests bench)
#
#   tests     the host-side tests test_dist, test_dist_env, test_sync_bn, then
#             tests/gpu_dist, every case (2 GPUs x B against 1 GPU x 2B,
#             graphs, accumulation, recompute, sync-bn, fp16/bf16, the bf16
#             reduce, the overlapped and sharded updates, the sparse lookup
#             gradient, tapered buckets, a killed rank): ~5-7 minutes.
#             A case name narrows it: gpu_dist bert-graph (CASES=... here).
#   bench     ctrain bench --gpus 2 (ResNet50 bf16 bs 256, BERT-large bf16 bs
#             32 seq 128: each on 1 GPU, then on 2) for the new binary, and for
#             the old one when out/old.tar.xz was staged: ~2-3 minutes each.
#   timeline  BERT-large bf16 bs 32 seq 128 with --graph on 1 GPU and on 2, a
#             CUPTI timeline of steps 20-24 each (CTRAIN_TIMELINE), compared
#             kernel by kernel (scripts/timeline_diff.py) and by phase
#             (scripts/timeline_phases.py: forward, backward, the tail after it).
# One call has 10 minutes: run tests and bench in separate calls when both
# binaries are benched. Reads out/new.tar.xz (and out/old.tar.xz): carry out/.
# Exit status 1 when a test failed.
: "${OUT:?set OUT to a folder for the logs}"
PARTS=${*:-tests bench}
[ "$PARTS" = all ] && PARTS="tests bench timeline"
set -u
me=dist2.sh; . scripts/device/unpack.sh   # L, pack, NEW, OLD
nvidia-smi -L > "$L/gpus.txt" 2>&1; nvidia-smi topo -m >> "$L/gpus.txt" 2>&1; head -2 "$L/gpus.txt"
fail=0
summary() {   # name, status: the program's last summary line, and whether it failed
    local line; line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$L/$1.log" | tail -n 1)
    echo "$1: ${line:-no summary} (status $2)"; grep -m8 FAIL "$L/$1.log" | cut -c1-200
    case "$line" in *" 0 failed") [ "$2" -eq 0 ] || fail=1 ;; *) fail=1 ;; esac
}
for part in $PARTS; do
case $part in
tests)
    for x in test_dist test_dist_env test_sync_bn; do
        timeout 120 .dev/new/tests/$x > "$L/$x.log" 2>&1; summary $x $?
    done
    CTRAIN_BIN=$NEW CTRAIN_DIST_TEST_DIR=/tmp/gpu_dist timeout 480 .dev/new/tests/gpu_dist ${CASES:-} > "$L/gpu_dist.log" 2>&1
    summary gpu_dist $?; rm -rf /tmp/gpu_dist; pack ;;
bench)
    for n in new old; do
        b=$PWD/.dev/$n/ctrain; [ -x "$b" ] || continue
        timeout 240 "$b" bench --gpus 2 --json "$L/scaling_$n.json" > "$L/scaling_$n.log" 2>&1
        echo "== ctrain bench --gpus 2, $n (status $?)"; sed -n '/^scaling on/,$p' "$L/scaling_$n.log" | grep -v '^wrote'
        pack
    done ;;
timeline)
    T="train --model bert-large --data synthetic --batch 32 --seq 128 --precision bf16 --steps 40 --graph"
    CUDA_VISIBLE_DEVICES=0 CTRAIN_TIMELINE=$L/one.json:20:5 timeout 150 $NEW $T > "$L/tl_one.log" 2>&1
    echo "1 GPU (status $?)"
    CTRAIN_TIMELINE=$L/two.json:20:5 timeout 150 $NEW $T --gpus 2 > "$L/tl_two.log" 2>&1
    echo "2 GPUs (status $?)"
    python3 scripts/timeline_diff.py "$L/one.json.txt" "$L/two.json.rank0.txt" --by-kind > "$L/diff_by_kind.txt" 2>&1
    cat "$L/diff_by_kind.txt"
    for f in one.json two.json.rank0; do python3 scripts/timeline_phases.py "$L/$f" | tee "$L/phases_$f.txt"; done
    xz -f "$L"/one.json "$L"/two.json.rank* 2>/dev/null; pack ;;
*) echo "dist2.sh: unknown part '$part' (tests, bench, timeline, all)"; exit 2 ;;
esac
done
exit $fail
