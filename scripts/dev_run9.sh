#!/bin/bash
# one GPU (development helper): the new defaults (fused attention for bf16/f16, 4 GiB conv search workspace)
: "${OUT:?}"
L=$OUT/logs; mkdir -p $L
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
B=.dev/ctrain
for t in gpu_transformer_ops gpu_graph gpu_conv2d; do
  timeout 40 .dev/tests/$t > $L/$t.log 2>&1; echo "$t rc=$? $(tail -1 $L/$t.log)"; grep FAIL $L/$t.log | head -3
done
pack
timeout 75 $B bench --models resnet50 --batch 256 --precision fp32,tf32,bf16 --time-limit 4 --json $L/r50.json > $L/r50.log 2>&1; echo "r50 rc=$?"
grep "^resnet50" $L/r50.log | cut -c1-100; pack
for r in none all; do
  timeout 35 $B bench --models bert-large --batch 32 --seq 512 --precision bf16 --recompute $r --time-limit 4 --json $L/bl_$r.json > $L/bl_$r.log 2>&1
  echo "recompute $r rc=$? $(grep '^bert-large' $L/bl_$r.log | cut -c1-100)"
done
python3 -c "
import json
for r in ['none','all']:
    x=json.load(open('$L/bl_'+r+'.json'))['results'][0]
    print(r, x['ms_per_step'], round(x['peak_mem_bytes']/2**30,2), round((x['peak_mem_bytes']-x['state_mem_bytes'])/2**30,2))
"
pack
