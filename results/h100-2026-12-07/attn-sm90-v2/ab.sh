set -u
me=ab; . scripts/device/unpack.sh; . scripts/device/steps.sh
export STEPS_BUDGET=300
for r in 1 2; do
for a in "CTRAIN_ATTN=cudnn" "CTRAIN_ATTN=sm90 CTRAIN_ATTN_SAVE_MASK=1"; do
  n=$(echo $a | tr -dc 'a-z0-9' | cut -c1-20)
  bb b512_${n}_$r 70 $a $NEW bench --models bert-large --seq 512 --batch 32 --precision fp8 --time-limit 4
done; done
for a in "CTRAIN_ATTN=cudnn" "CTRAIN_ATTN=sm90 CTRAIN_ATTN_SAVE_MASK=1"; do
  n=$(echo $a | tr -dc 'a-z0-9' | cut -c1-20)
  bb b128_$n 90 $a $NEW bench --models bert-large --seq 128 --batch 256 --precision fp8 --time-limit 4
done
echo "total $(el) s"
