# LayerNorm's gamma/beta as vectors, GELU's device reciprocal and ex2: tests, then old against new
me=fin.sh; . scripts/device/unpack.sh
T=.dev/new/tests; S0=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
t() { CTRAIN_PLAN_CACHE=off timeout "$2" "$T/$1" > "$OUT/$1.log" 2>&1; echo "$1 rc $? $(tail -1 "$OUT/$1.log") at $(( $(date +%s) - S0 )) s"; grep -m4 FAIL "$OUT/$1.log" | cut -c1-200; }
t gpu_add_norm 40
t gpu_transformer_ops 50
for bin in OLD NEW; do
    timeout 50 "${!bin}" bench --models bert-large --seq 128 --batch 256 --precision bf16,fp8 --time-limit 3 > "$OUT/b_$bin.log" 2>&1
    echo "$bin rc $? at $(( $(date +%s) - S0 )) s"; grep -E "^bert" "$OUT/b_$bin.log"
done
t gpu_linear_fp8 40
t gpu_elementwise 40
t gpu_linear_act 30
