#!/bin/bash
# interface.sh — on one GPU, with binaries built elsewhere (scripts/device/stage.sh):
# the everyday interface where only a GPU machine can check it (logs under $OUT).
#
#   OUT=dir bash scripts/device/interface.sh [files|bench|evalevery|all]   (default all)
#
#   files  BERT-small masked LM on the fortunes package with --graph, --eval-every
#          and a --save-every training checkpoint; `ctrain export` of it,
#          `ctrain eval --json`, `ctrain export --hf` opened by transformers
#          (scripts/hf_load_check.py: from_pretrained, no weight missing or
#          unused, a forward on a tokenized line); a ResNet18's --save loaded by
#          torchvision with strict=True. ~2 minutes.
#   bench  `ctrain bench --quick --json` while another process (a PyTorch
#          matmul loop) holds the GPU: the machine record's ECC, power limit,
#          persistence, PCIe and NVLink fields, the other process listed and
#          the warning it should raise, the load average at start and end.
#          ~3 minutes.
#   evalevery  --eval-every under --graph changes no training step: BERT-tiny
#          masked LM (bf16 and fp8) and ResNet18 on a small JPEG folder, each
#          run with and without --eval-every 20, the logged losses compared
#          (they must be equal). ~2 minutes.
#
# Reads out/new.tar.xz, so the device call carries the ignored folder out/.
: "${OUT:?set OUT to a folder for the logs}"
PART=${1:-all}
set -u
me=interface.sh; . scripts/device/unpack.sh   # L, pack, NEW
R=$PWD
F=$R/.dev/new/fortunes; [ -d /usr/share/games/fortunes ] && F=/usr/share/games/fortunes
W=$(mktemp -d)

if [ "$PART" = files ] || [ "$PART" = all ]; then
    (
        set -x
        cd "$W" || exit 1
        "$NEW" vocab --corpus "$F" --size 8000 --out vocab.txt --exclude-held-out
        "$NEW" shard --corpus "$F" --vocab vocab.txt --out f.tok --exclude-held-out
        "$NEW" train --model bert-small --data mlm:f.tok --vocab vocab.txt --seq 128 --batch 64 \
            --optim adamw --lr 5e-4 --warmup 100 --schedule linear --steps 600 --precision bf16 --graph \
            --log bert.jsonl --log-every 100 --eval-every 300 --save-every 300 --save bert.ckpt
        "$NEW" export bert.ckpt bert.safetensors
        "$NEW" eval --model bert-small --data mlm:f.tok --vocab vocab.txt --seq 128 --load bert.safetensors \
            --precision bf16 --json ev.json
        cat ev.json
        "$NEW" export --hf hf bert.safetensors --vocab vocab.txt
        python3 "$R/scripts/hf_load_check.py" hf
        "$NEW" train --model resnet18 --data synthetic --batch 32 --steps 5 --classes 10 --precision bf16 \
            --save r18.safetensors --no-eval
        python3 -c "
import torch, torchvision
from safetensors.torch import load_file
m = torchvision.models.resnet18(num_classes=10)
print('torchvision strict load:', m.load_state_dict(load_file('r18.safetensors'), strict=True))"
        cp bert.jsonl ev.json "$L/"
    ) > "$L/files.log" 2>&1
    echo "files (status $?)"
    tr '\r' '\n' < "$L/files.log" | grep -E "^step [0-9]+: |held-out|hf_load_check|strict load|error|hint" | tail -20
    pack
fi

if [ "$PART" = bench ] || [ "$PART" = all ]; then
    python3 -c "
import torch, time
x = torch.randn(4096, 4096, device='cuda'); t = time.time()
while time.time() - t < 300: y = x @ x; torch.cuda.synchronize(); time.sleep(0.05)" &
    TP=$!
    sleep 8
    timeout 280 "$NEW" bench --quick --json "$L/bench_quick.json" > "$L/bench_quick.log" 2>&1
    echo "bench --quick (status $?)"
    kill "$TP" 2>/dev/null
    grep -E "warning|note" "$L/bench_quick.log" | head -10
    python3 -c "
import json, sys
m = json.load(open(sys.argv[1]))['machine']
print(json.dumps(m, indent=1)[:4000])" "$L/bench_quick.json"
    cp "$L/bench_quick.json" "$OUT/"
    pack
fi
if [ "$PART" = evalevery ] || [ "$PART" = all ]; then
    (
        cd "$W" || exit 1
        python3 "$R/scripts/make_image_folder.py" imf --train 640 --val 128 --classes 10
        "$NEW" vocab --corpus "$F" --size 8000 --out vocab.txt --exclude-held-out
        "$NEW" shard --corpus "$F" --vocab vocab.txt --out f.tok --exclude-held-out
        run() {   # name, then the flags; once plain, once with --eval-every 20
            n=$1; shift
            "$NEW" train "$@" --graph --steps 60 --log-every 10 --log "$n.a.jsonl" > "$n.a.log" 2>&1
            "$NEW" train "$@" --graph --steps 60 --log-every 10 --eval-every 20 --log "$n.b.jsonl" \
                > "$n.b.log" 2>&1
            python3 - "$n.a.jsonl" "$n.b.jsonl" <<'PY'
import json, sys
def losses(p):
    return [(r["step"], r["loss"]) for r in map(json.loads, open(p)) if r.get("event") == "step"]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
evals = sum(1 for r in map(json.loads, open(sys.argv[2])) if r.get("event") == "eval")
print(f"{sys.argv[1][:-8]}: {len(a)} step records, equal with --eval-every: {a == b and len(a) > 0}, "
      f"{evals} eval records")
PY
        }
        for p in bf16 fp8; do
            run "bert_$p" --model bert-tiny --data mlm:f.tok --vocab vocab.txt --seq 128 --batch 32 \
                --optim adamw --lr 5e-4 --precision "$p"
        done
        run resnet18 --model resnet18 --data imf --image-size 64 --batch 32 --precision bf16
        cp ./*.log ./*.jsonl "$L/" 2>/dev/null
    ) > "$L/evalevery.log" 2>&1
    echo "evalevery (status $?)"; grep -E "step records|error|hint" "$L/evalevery.log" | tail -8
    pack
fi
rm -rf "$W"
