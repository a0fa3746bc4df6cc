me=p2; . scripts/device/unpack.sh; . scripts/device/steps.sh
export STEPS_BUDGET=230
R="--models resnet50 --time-limit 3"
for i in 1 2; do
bb b64_off$i 150 CTRAIN_WGRAD_BRANCH=0 $NEW bench $R --batch 64 --precision bf16
bb b64_on$i 50 CTRAIN_WGRAD_BRANCH=1 $NEW bench $R --batch 64 --precision bf16
bb b256_off$i 60 CTRAIN_WGRAD_BRANCH=0 $NEW bench $R --batch 256 --precision bf16
bb b256_on$i 60 CTRAIN_WGRAD_BRANCH=1 $NEW bench $R --batch 256 --precision bf16
done
echo total $(el)
