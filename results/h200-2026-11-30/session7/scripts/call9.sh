#!/bin/bash
# session 7, call 9 (nvidia-h200-x2): the embedding backward's sums split
# into light ids (a block per id) and heavy ids (the column-tile slices)
# - gpu_transformer_ops (the embedding cases: CPU reference, determinism,
#   compact = dense bit for bit)
# - bench --gpus 2 bert-large: new, the previous build (out/dev_old.tar.xz), new
: "${OUT:?}"
L=$OUT/logs; mkdir -p $L; pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
mkdir -p .dev .dev_old && tar xJf out/dev.tar.xz -C .dev && tar xJf out/dev_old.tar.xz -C .dev_old
timeout 100 .dev/tests/gpu_transformer_ops > $L/gpu_transformer_ops.log 2>&1
echo "gpu_transformer_ops rc=$? $(tail -1 $L/gpu_transformer_ops.log)"; grep -m6 FAIL $L/gpu_transformer_ops.log | cut -c1-200
pack
k() { n=$1; b=$2; timeout 60 $b bench --gpus 2 --models bert-large --time-limit 3 \
        --json $L/k_$n.json > $L/k_$n.log 2>&1
      echo "$n: $(grep -E "^bert-large .*%" $L/k_$n.log)"; }
k new .dev/ctrain; pack
k old .dev_old/ctrain; pack
k new_b .dev/ctrain; pack
