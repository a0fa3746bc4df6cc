#!/bin/bash
# fp8.sh — on one GPU with FP8 tensor cores (H100/H200, sm_90; Ada sm_89), with
# binaries built elsewhere (scripts/device/stage.sh): what --precision fp8
# needs measured, in parts that each fit one device call (logs under $OUT).
#
#   OUT=dir bash scripts/device/fp8.sh [tests|bench|converge|all]   (default all)
#
#   tests     gpu_fp8 (the casts, bit-identical to the CPU), gpu_fp8_gemm (the
#             transposed cast, the cuBLASLt FP8 GEMM against its reference;
#             prints the error it saw on full-range inputs) and gpu_linear_fp8
#             (the op and its recipe against the CPU over two steps), then one short
#             BERT-large fp8 training run with --graph (the recipe inside the
#             captured update) under compute-sanitizer's memcheck at bs 16;
#             ~2 minutes.
#   bench     BERT-large at the issue's configs, bf16 against fp8, ctrain and
#             PyTorch (torch_bench.py: Transformer Engine where installed, else
#             a "not supported" row) in one call: seq 128 bs 256, seq 512 bs 32;
#             fp8 again with CTRAIN_FP8_FAST_ACCUM=1 (the forward GEMM's fast
#             accumulation); the report beside the JSONs. ~5 minutes.
#   converge  BERT-small on the fortunes package, masked-LM pre-training then
#             topic fine-tuning (scripts/bert_fortunes.sh), bf16 and fp8 with
#             the same seed: both summaries, the loss curves in one PNG
#             (scripts/plot_log.py), then scripts/fp8_converge.py's checks
#             against the stated bars (MLM loss within 3% at every logged
#             step and 1% at the end, held-out loss within 3%, the
#             classifier's held-out accuracy within 1 point). ~5 minutes.
#
# Reads out/new.tar.xz, so the device call carries the ignored folder out/.
: "${OUT:?set OUT to a folder for the logs}"
PART=${1:-all}
set -u
me=fp8.sh; . scripts/device/unpack.sh   # L, pack, NEW
T=$PWD/.dev/new/tests
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv > "$L/gpu.txt" 2>&1
cat "$L/gpu.txt"

if [ "$PART" = tests ] || [ "$PART" = all ]; then
    for t in gpu_fp8 gpu_fp8_gemm gpu_linear_fp8; do
        timeout 240 "$T/$t" > "$L/$t.log" 2>&1
        echo "$t (status $?): $(tail -1 "$L/$t.log")"; grep -E "FAIL|error ratio|saw" "$L/$t.log" | head -12
    done
    timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 "$NEW" train --model bert-large \
        --data synthetic --seq 128 --batch 16 --steps 6 --graph --graph-warmup 2 --precision fp8 \
        --optim adamw --lr 1e-4 --log-every 1 --no-eval > "$L/sanitizer_fp8.log" 2>&1
    echo "memcheck fp8 --graph (status $?):"; grep -E "ERROR SUMMARY|step 6/|error" "$L/sanitizer_fp8.log" | tail -4
    pack
fi

if [ "$PART" = bench ] || [ "$PART" = all ]; then
    for cfg in "--seq 128 --batch 256" "--seq 512 --batch 32"; do
        n=$(echo "$cfg" | tr -dc '0-9')
        # shellcheck disable=SC2086
        timeout 200 "$NEW" bench --models bert-large $cfg --precision bf16,fp8 --json "$L/ctrain_$n.json" \
            > "$L/ctrain_$n.log" 2>&1
        echo "ctrain bench $cfg (status $?)"; grep -E "^bert-large" "$L/ctrain_$n.log"
        # shellcheck disable=SC2086
        CTRAIN_FP8_FAST_ACCUM=1 timeout 150 "$NEW" bench --models bert-large $cfg --precision fp8 \
            > "$L/ctrain_fastacc_$n.log" 2>&1
        echo "ctrain bench $cfg fp8, CTRAIN_FP8_FAST_ACCUM=1 (status $?)"
        grep -E "^bert-large" "$L/ctrain_fastacc_$n.log"
        # shellcheck disable=SC2086
        timeout 200 python3 scripts/torch_bench.py --models bert-large $cfg --precision bf16,fp8 \
            --json "$L/torch_$n.json" > "$L/torch_$n.log" 2>&1
        echo "torch_bench $cfg (status $?)"; grep -E "^bert-large" "$L/torch_$n.log"
        pack
    done
    "$NEW" report "$L"/ctrain_*.json "$L"/torch_*.json --out "$L/report.md" > "$L/report.log" 2>&1
    sed -n '/^## Throughput/,/^## Energy/p' "$L/report.md" | head -20
    cp "$L/report.md" "$OUT/"
    pack
fi

if [ "$PART" = converge ] || [ "$PART" = all ]; then
    corpus=/usr/share/games/fortunes; [ -d "$corpus" ] || corpus=$PWD/.dev/new/fortunes
    for p in bf16 fp8; do
        CTRAIN=$NEW CORPUS=$corpus timeout 280 sh scripts/bert_fortunes.sh --model bert-small \
            --mlm-steps 3000 --device cuda --precision "$p" --no-scratch --out "$L/fortunes_$p" \
            > "$L/fortunes_$p.log" 2>&1
        echo "bert_fortunes $p (status $?)"; cat "$L/fortunes_$p/summary.txt" 2>/dev/null
        pack
    done
    python3 scripts/plot_log.py "$L/fortunes_bf16/mlm.jsonl" "$L/fortunes_fp8/mlm.jsonl" \
        --label "$L/fortunes_bf16/mlm.jsonl=bf16" --label "$L/fortunes_fp8/mlm.jsonl=fp8" \
        --out "$OUT/fp8_vs_bf16_mlm.png" 2>&1 | tail -1
    python3 scripts/fp8_converge.py "$L/fortunes_bf16" "$L/fortunes_fp8" | tee "$L/converge_check.txt"
    pack
fi
