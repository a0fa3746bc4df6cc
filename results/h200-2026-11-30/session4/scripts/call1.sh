#!/bin/bash
# session 4 call 1 (x2): tokenizer parity, A/B single GPU, 2-GPU scaling f32 vs bf16 reduce
: "${OUT:?}"; L=$OUT/logs; mkdir -p $L; pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
mkdir -p .dev && tar xJf out/dev.tar.xz -C .dev
B=.dev/ctrain
nvidia-smi > $L/nvidia-smi.txt; nvidia-smi topo -m >> $L/nvidia-smi.txt
python3 -c "import transformers,torch;print('transformers',transformers.__version__,'torch',torch.__version__)" > $L/versions.txt 2>&1
timeout 200 python3 scripts/tokenizer_parity.py --ctrain $B --corpus .dev/fortunes > $L/tokenizer_parity.log 2>&1
echo "tokenizer rc=$? $(tail -1 $L/tokenizer_parity.log)"; pack
for r in bf16 f32; do
  timeout 150 $B bench --gpus 2 --grad-reduce $r --json $L/scaling_$r.json > $L/scaling_$r.log 2>&1
  echo "grad-reduce $r rc=$?"; grep -A4 "^scaling" $L/scaling_$r.log; pack
done
echo "== A/B, BERT-large bf16 bs 32: saved dropout bits, bias epilogue"
for v in "BASE=1 X=1" "MASK=1 CTRAIN_ATTN_SAVE_MASK=1" "EPI=1 CTRAIN_LINEAR_EPILOGUE=1"; do
  tag=${v%%=*}
  env $v CUDA_VISIBLE_DEVICES=0 timeout 60 $B bench --models bert-large --batch 32 --seq 128,512 --precision bf16 \
    --time-limit 5 --json $L/ab_$tag.json > $L/ab_$tag.log 2>&1
  echo "$tag rc=$?"; grep "^bert-large" $L/ab_$tag.log | cut -c1-110; pack
done
