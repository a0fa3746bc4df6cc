me=sw; . scripts/device/unpack.sh
T=.dev/new/tests
timeout 60 $T/gpu_fp8_gemm > $L/gpu_fp8_gemm.log 2>&1; echo "gpu_fp8_gemm: $(tail -1 $L/gpu_fp8_gemm.log)"; grep FAIL $L/gpu_fp8_gemm.log | head -5
W=$(mktemp -d)
for p in "fp8 1" "fp8 0" "bf16 1"; do
    set -- $p; s=$(date +%s)
    CTRAIN_FP8_CAST_VEC=$2 CTRAIN_TIMELINE=$W/tl_$1_$2.json:8:3 timeout 90 "$NEW" train --model bert-large --data synthetic --seq 128 --batch 256 \
        --precision $1 --graph --optim adamw --lr 1e-4 --steps 12 --log-every 4 --no-eval > $L/tl_$1_$2.log 2>&1
    echo "timeline $1 vec=$2 (status $?, $(( $(date +%s) - s )) s)"; cp $W/tl_$1_$2.json.txt $L/ 2>/dev/null; grep -E "samples/s" $L/tl_$1_$2.log | tail -1 | tr '\r' '\n' | tail -1
done
pack
n=0
for sw in "0 row composed" "1 row composed" "0 vec fused" "1 vec fused"; do
    set -- $sw; n=$((n + 1))
    s=$(date +%s)
    CTRAIN_LINEAR_BGRAD=$1 CTRAIN_LN_KERNELS=$2 CTRAIN_ADD_NORM=$3 timeout 80 "$NEW" bench \
        --models bert-large --batch 32,256 --seq 128 --precision bf16 --time-limit 6 \
        --json "$L/bench_$n.json" > "$L/bench_$n.log" 2>&1
    echo "CTRAIN_LINEAR_BGRAD=$1 CTRAIN_LN_KERNELS=$2 CTRAIN_ADD_NORM=$3 (run $n, status $?, $(( $(date +%s) - s )) s):"
    grep -E "^bert-large" "$L/bench_$n.log" | head -3
    pack
done
