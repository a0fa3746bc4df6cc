#!/bin/bash
# one H200 session's checks (development helper): every single-GPU test, BERT parity with
# the masked-rows head, fortunes end to end without the held-out texts, the largest batch.
# Usage: OUT=dir bash scripts/dev_run4.sh   (binaries staged under .dev/)
: "${OUT:?}"
L=$OUT/logs; mkdir -p $L
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
t0=$(date +%s)
for t in .dev/tests/gpu_*; do
  n=$(basename $t)
  case $n in gpu_dist|gpu_resnet_parity|gpu_bert_parity) continue;; esac
  s=$(date +%s); timeout 150 $t > $L/$n.log 2>&1; rc=$?
  echo "$n rc=$rc $(( $(date +%s)-s ))s $(tail -1 $L/$n.log)"
done | tee $L/tests_summary.txt
pack
timeout 90 python3 scripts/torch_parity.py bert base 8 128 /tmp/bp > $L/bert_parity.log 2>&1
timeout 60 .dev/tests/gpu_bert_parity /tmp/bp base >> $L/bert_parity.log 2>&1; echo "bert parity rc=$?"
tail -8 $L/bert_parity.log
timeout 90 python3 scripts/torch_parity.py resnet 50 8 224 /tmp/rp > $L/resnet_parity.log 2>&1
timeout 60 .dev/tests/gpu_resnet_parity /tmp/rp 50 >> $L/resnet_parity.log 2>&1; echo "resnet parity rc=$?"
tail -4 $L/resnet_parity.log
pack
echo "elapsed $(( $(date +%s)-t0 ))s"
CTRAIN=.dev/ctrain CORPUS=.dev/fortunes timeout 200 bash scripts/bert_fortunes.sh --model bert-small \
  --mlm-steps 3000 --precision bf16 --out $L/fortunes > $L/fortunes.log 2>&1; echo "fortunes rc=$?"
tail -15 $L/fortunes.log
rm -f $L/fortunes/*.tok $L/fortunes/*.safetensors
pack
echo "elapsed $(( $(date +%s)-t0 ))s"
timeout 150 .dev/ctrain bench --max-batch --models resnet50,bert-large --seq 512 --precision bf16 --batch 64 \
  --json $L/maxb.json > $L/maxb.log 2>&1; echo "maxb rc=$?"; tail -12 $L/maxb.log
pack
echo "elapsed $(( $(date +%s)-t0 ))s"
