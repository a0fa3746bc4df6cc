# ncu (--set full) on the BERT-large seq 128 bs 256 kernels left above their floors:
# the add_norm backward (ln_bwd_vec), the attention kernels (bf16), the GELU / dGELU FP8 casts (fp8)
me=ncu.sh; . scripts/device/unpack.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$L/gpu.txt"
t0=$(date +%s)
A="train --model bert-large --data synthetic --seq 128 --batch 256 --optim adamw --lr 1e-4 --steps 1 --log-every 1 --no-eval"
prof() {   # name count regex precision
    timeout 150 ncu --clock-control none --set full -k "regex:$3" -c "$2" "$NEW" $A --precision "$4" > "$L/ncu_$1.txt" 2>&1
    echo "$1 rc $? at $(( $(date +%s) - t0 )) s"
    grep -E "^  [a-z_].*\(|Duration  |Compute \(SM\) Throughput|DRAM Throughput|Registers Per|Achieved Occupancy|Executed Ipc Active" "$L/ncu_$1.txt" | cut -c1-150
    pack
}
prof bwd 4 "ln_bwd_vec|tc_bwd_dq|tc_bwd_dkdv" bf16
prof fwd 3 "tc_fwd|ln_fwd_vec" bf16
prof gelu 1 "fp8_cast_transpose_vec_kernel<__nv_bfloat16, .*1>" fp8
prof dgelu 1 "fp8_cast_transpose_vec_kernel<__nv_bfloat16, .*2>" fp8
echo "total $(( $(date +%s) - t0 )) s"
