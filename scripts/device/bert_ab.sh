#!/bin/bash
# bert_ab.sh — on one GPU, with binaries built elsewhere (scripts/device/stage.sh):
# the BERT-large changes written without a GPU, checked by their tests, then
# measured old against new in one call (out/old.tar.xz: the revision before;
# stage.sh's header says how to build it).
#
#   OUT=dir bash scripts/device/bert_ab.sh [tests|ab|timeline]     (one part a call)
#
#   tests  the kernels written without a GPU first: gpu_flash_attn (the flash
#          kernels' first copies before the mask's maximum), gpu_softmax
#          (cross-entropy's vector backward), gpu_linear_act, gpu_elementwise
#          and gpu_linear_epilogue (the column sums' rows in flight); then
#          gpu_fp8, gpu_fp8_gemm, gpu_linear_fp8, gpu_transformer_ops,
#          gpu_add_norm, and gpu_bert_parity. ~3 minutes.
#   ab     ctrain bench BERT-large --precision bf16,fp8 at seq 128 bs 256, old,
#          new, old, new (the repeat shows the noise), then seq 512 bs 32 old
#          and new: everything since the old revision together (the timeline
#          part tells the kernels apart; docs/kernels.md has each one's
#          prediction). ~8 minutes.
#   timeline  the new binary's CUPTI timeline of the fp8 and bf16 steps at
#          seq 128 bs 256 (CTRAIN_TIMELINE, steps 8 to 10). ~2 minutes.
# The bf16 switches, each alone against the defaults: scripts/device/bert_switches.sh.
# Reads out/new.tar.xz (and out/old.tar.xz), so the device call carries the
# ignored folder out/.
: "${OUT:?set OUT to a folder for the logs}"
PART=${1:-tests}
set -u
me=bert_ab.sh; . scripts/device/unpack.sh   # L, pack, NEW, OLD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$L/gpu.txt"
T=.dev/new/tests
case $PART in
tests)
    for t in gpu_flash_attn gpu_softmax gpu_linear_act gpu_elementwise gpu_linear_epilogue \
             gpu_fp8 gpu_fp8_gemm gpu_linear_fp8 gpu_transformer_ops gpu_add_norm; do
        s=$(date +%s)
        timeout 200 "$T/$t" > "$L/$t.log" 2>&1
        echo "$t: status $?, $(tail -n 1 "$L/$t.log") ($(( $(date +%s) - s )) s)"
        grep -m4 FAIL "$L/$t.log" | cut -c1-220
        pack
    done
    # BERT-base against transformers (strict f32; the FFN now one op_linear_act)
    if timeout 120 python3 scripts/torch_parity.py bert base 8 128 /tmp/ctrain_parity/bert-base \
        > "$L/parity_ref_bert.log" 2>&1; then
        timeout 200 "$T/gpu_bert_parity" /tmp/ctrain_parity/bert-base base > "$L/gpu_bert_parity.log" 2>&1
        echo "gpu_bert_parity: status $?, $(tail -n 1 "$L/gpu_bert_parity.log")"
    else
        echo "gpu_bert_parity: no reference (scripts/torch_parity.py failed: $L/parity_ref_bert.log)"
    fi
    pack ;;
ab)
    [ -x "$OLD" ] || { echo "bert_ab.sh ab: no out/old.tar.xz staged"; exit 2; }
    n=0
    for run in "old 128 256" "new 128 256" "old 128 256" "new 128 256" "old 512 32" "new 512 32"; do
        set -- $run; n=$((n + 1)); B=$PWD/.dev/$1/ctrain
        timeout 120 "$B" bench --models bert-large --seq "$2" --batch "$3" --precision bf16,fp8 \
            --time-limit 5 --json "$L/ab_${n}_$1.json" > "$L/ab_${n}_$1.log" 2>&1
        echo "run $n $1 seq $2 bs $3 (status $?):"
        grep -E '^bert-large' "$L/ab_${n}_$1.log" | head -2
        pack
    done ;;
timeline)
    W=$(mktemp -d)
    for p in fp8 bf16; do
        CTRAIN_TIMELINE=$W/tl_$p.json:8:3 timeout 120 "$NEW" train --model bert-large \
            --data synthetic --seq 128 --batch 256 --precision $p --graph --optim adamw \
            --lr 1e-4 --steps 12 --log-every 4 --no-eval > "$L/tl_$p.log" 2>&1
        echo "timeline $p (status $?)"; cp "$W/tl_$p.json.txt" "$L/tl_$p.txt" 2>/dev/null
        head -24 "$L/tl_$p.txt"
        pack
    done ;;
*) echo "bert_ab.sh: unknown part '$PART' (tests, ab or timeline)"; exit 2 ;;
esac
