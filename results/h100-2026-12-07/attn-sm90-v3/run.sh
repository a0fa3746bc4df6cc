set -u
me=r3; . scripts/device/unpack.sh; . scripts/device/steps.sh
CHECK_VERBOSE=1 timeout 120 .dev/new/tests/gpu_attention_sm90 > $L/sm90.log 2>&1
echo "gpu_attention_sm90 rc $?"; grep -E "FAIL|passed" $L/sm90.log | head -8
for t in gpu_attention_qkv gpu_flash_attn gpu_add_norm; do
  timeout 80 .dev/new/tests/$t > $L/$t.log 2>&1; echo "$t rc $? $(grep -E 'passed' $L/$t.log | tail -1)"; grep FAIL $L/$t.log | head -3
done
timeout 60 .dev/new/wgmma_probe > $L/wgmma.log 2>&1; echo "wgmma_probe rc $?"; tail -1 $L/wgmma.log
for r in 1 2; do for v in old new; do
  timeout 60 .dev/$v/tests/gpu_attention_sm90 --bench sm90 | grep kernel | sed "s/^/$v: /"
done; done 2>&1 | tee $L/old_new.log | cut -c1-130
echo "at $(el) s"
export STEPS_BUDGET=250
for r in 1 2; do for a in cudnn sm90; do
  bb b512_${a}_$r 50 CTRAIN_ATTN=$a $NEW bench --models bert-large --seq 512 --batch 32 --precision fp8 --time-limit 3
done; done
for a in cudnn sm90; do
  bb b128_$a 60 CTRAIN_ATTN=$a $NEW bench --models bert-large --seq 128 --batch 256 --precision fp8 --time-limit 3
done
pack
if [ "$(el)" -lt 300 ]; then
for a in cudnn sm90; do
  CTRAIN_ATTN=$a CTRAIN_TIMELINE=$L/tl_$a.json:8:4 timeout 60 $NEW bench --models bert-large \
    --seq 512 --batch 32 --precision fp8 --steps 14 --time-limit 20 > $L/tl_$a.log 2>&1
  echo "$a rc $?"; grep "bert-large" $L/tl_$a.log | tail -1
done
python3 scripts/timeline_diff.py $L/tl_cudnn.json.txt $L/tl_sm90.json.txt --top 25 > $L/diff.txt 2>&1
python3 scripts/timeline_diff.py $L/tl_cudnn.json.txt $L/tl_sm90.json.txt --by-kind > $L/kind.txt 2>&1
head -45 $L/diff.txt; cat $L/kind.txt
rm -f $L/*.json
fi
CUOBJ=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
$CUOBJ -sass .dev/new/tests/gpu_attention_sm90 > $L/all.sass 2>&1; echo "sass rc $? $(wc -l < $L/all.sass)"
$CUOBJ -sass .dev/old/tests/gpu_attention_sm90 > $L/old.sass 2>&1; echo "sass rc $? $(wc -l < $L/old.sass)"
xz -9 $L/old.sass $L/all.sass
pack
echo "total $(el) s"
