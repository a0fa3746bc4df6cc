#!/bin/bash
# torch_pair.sh — ctrain and PyTorch measured in the same device call, the way
# docs/results.md's side-by-side tables were: `ctrain bench` and
# scripts/torch_bench.py with the same suite flags, then `ctrain report` with
# PyTorch as the baseline. Binaries from scripts/device/stage.sh (carry out/);
# python3 with torch (and transformers for BERT) on the GPU machine.
#
#   OUT=dir bash scripts/device/torch_pair.sh [SUITE FLAGS...]    (default --quick)
#   e.g. ... torch_pair.sh --models bert-large --batch 32 --seq 128,512 --precision bf16,fp16 --time-limit 5
#
# One GPU: the two engines one after the other on GPU 0. With two GPUs
# (TORCH_GPU=1): ctrain on GPU 0 and PyTorch on GPU 1 at the same time, which
# halves the wall time but shares the host's CPUs (launch-bound PyTorch
# configs then read low: docs/results.md says where that mattered).
: "${OUT:?set OUT to a folder for the logs}"
[ $# -gt 0 ] || set -- --quick
me=torch_pair.sh; . scripts/device/unpack.sh   # L, pack, NEW
B=$NEW
echo "suite: $*" | tee "$L/suite.txt"
if [ -n "${TORCH_GPU:-}" ]; then
    CUDA_VISIBLE_DEVICES=0 timeout 560 "$B" bench "$@" --json "$L/ctrain.json" > "$L/ctrain.log" 2>&1 &
    PYTHONUNBUFFERED=1 timeout 560 python3 scripts/torch_bench.py "$@" --device cuda:$TORCH_GPU \
        --json "$L/torch.json" > "$L/torch.log" 2>&1
    wait
else
    timeout 280 "$B" bench "$@" --json "$L/ctrain.json" > "$L/ctrain.log" 2>&1; echo "ctrain bench status $?"; pack
    PYTHONUNBUFFERED=1 timeout 280 python3 scripts/torch_bench.py "$@" --json "$L/torch.json" > "$L/torch.log" 2>&1
    echo "torch_bench.py status $?"
fi
"$B" report "$L/ctrain.json" "$L/torch.json" --baseline pytorch --out "$L/report.md" > "$L/report.log" 2>&1
sed -n '/^| model/,/^$/p' "$L/report.md"
pack
