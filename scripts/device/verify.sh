#!/bin/bash
# verify.sh — on one GPU, with binaries built elsewhere (scripts/device/stage.sh):
# the single-GPU test programs of `make test-gpu`, and `ctrain bench --quick` of
# the new binary and an old one side by side, logs under $OUT.
#
#   OUT=dir bash scripts/device/verify.sh [tests|bench|all]      (default all)
#
#   tests  the PyTorch references (scripts/torch_parity.py, when python3 has
#          torch, torchvision, transformers), then every gpu_* program but
#          gpu_dist (2 GPUs: scripts/device/dist2.sh), then
#          scripts/tokenizer_parity.py; each program's last line and the
#          total "N passed, N failed" (counted as tests/run.sh counts them).
#          ~5 minutes on an H200, gpu_bn_compare the longest.
#   bench  ctrain bench --quick of new, old, new again (when out/old.tar.xz
#          was staged: the repeat shows the noise), then ctrain report with
#          the old run as the baseline. ~3 minutes.
#
# Reads out/new.tar.xz (and out/old.tar.xz), so the device call carries the
# ignored folder out/. Exit status 1 when a test failed.
: "${OUT:?set OUT to a folder for the logs}"
PART=${1:-all}
set -u
me=verify.sh; . scripts/device/unpack.sh   # L, pack, NEW, OLD
nvidia-smi -L > "$L/gpus.txt" 2>&1; cat "$L/gpus.txt"
fail=0

if [ "$PART" != bench ]; then
    pass=0; nfail=0
    # one program: its log, its summary line, added to the totals
    t() {
        local name=$1; shift
        local s; s=$(date +%s)
        timeout 400 "$@" > "$L/$name.log" 2>&1; local rc=$?
        local line; line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$L/$name.log" | tail -n 1)
        if [ -z "$line" ]; then echo "$name: FAIL (status $rc, no summary)"; nfail=$((nfail + 1)); return; fi
        local p=${line%% *} f; f=$(echo "$line" | cut -d' ' -f3)
        [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
        pass=$((pass + p)); nfail=$((nfail + f))
        echo "$name: $line ($(( $(date +%s) - s )) s)"; grep -m3 FAIL "$L/$name.log" | cut -c1-200
    }
    timeout 120 python3 scripts/torch_parity.py resnet 50 8 224 /tmp/ctrain_parity/resnet50 > "$L/parity_ref_resnet.log" 2>&1 ||
        echo "(no PyTorch reference for ResNet50: gpu_resnet_parity will fail; $L/parity_ref_resnet.log)"
    timeout 120 python3 scripts/torch_parity.py bert base 8 128 /tmp/ctrain_parity/bert-base > "$L/parity_ref_bert.log" 2>&1 ||
        echo "(no transformers reference for BERT-base: gpu_bert_parity will fail; $L/parity_ref_bert.log)"
    export CTRAIN_PARITY_DIR=/tmp/ctrain_parity/resnet50 CTRAIN_BERT_PARITY_DIR=/tmp/ctrain_parity/bert-base CTRAIN_BIN=$NEW
    for p in .dev/new/tests/gpu_*; do
        n=$(basename "$p"); [ "$n" = gpu_dist ] && continue
        t "$n" "$p"
    done
    corpus=/usr/share/games/fortunes; [ -d "$corpus" ] || corpus=.dev/new/fortunes
    t tokenizer_parity python3 scripts/tokenizer_parity.py --ctrain "$NEW" --corpus "$corpus"
    echo "$pass passed, $nfail failed" | tee "$L/tests_total.txt"
    [ "$nfail" -eq 0 ] || fail=1
    pack
fi

if [ "$PART" != tests ]; then
    b() { timeout 150 "$2" bench --quick --json "$L/bench_$1.json" > "$L/bench_$1.log" 2>&1
          echo "== bench --quick, $1 (status $?)"; grep -E '^(resnet50|bert-large) ' "$L/bench_$1.log" | cut -c1-100; }
    b new "$NEW"; pack
    if [ -x "$OLD" ]; then
        b old "$OLD"; pack
        b new_b "$NEW"; pack
        "$NEW" report "$L/bench_old.json" "$L/bench_new.json" "$L/bench_new_b.json" \
            --label "$L/bench_old.json=old" --label "$L/bench_new.json=new" --label "$L/bench_new_b.json=new again" \
            --baseline old --out "$L/bench_report.md" > "$L/bench_report.log" 2>&1
        sed -n '/^| model/,/^$/p' "$L/bench_report.md"
    fi
    pack
fi
exit $fail
