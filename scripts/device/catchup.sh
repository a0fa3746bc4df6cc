#!/bin/bash
# catchup.sh — on one GPU, with binaries built elsewhere (scripts/device/stage.sh):
# the first call of a GPU session after work done without one, in one call and
# in the order that decides most, each step only while time is left:
#   tests     the GPU tests of the code written blind (flash attention's
#             prologue, cross-entropy's vector backward, the column sums'
#             rows in flight; batch norm's kernels,
#             max pooling on channel vectors, the GPU decode feed with one and
#             two decode threads, the FP8 casts and GEMM, the Linear ops,
#             LayerNorm / add_norm, attention, the nvJPEG paths), each
#             program's summary and first failures;
#   decoders  ResNet50 bs 256 bf16 on a generated JPEG folder, --decode gpu
#             (the real-data row against the synthetic one), then where a
#             decode thread's time goes and which stream ends each of the
#             step's waits for data (scripts/timeline_gaps.py);
#   resnet    ResNet50 bs 256 bf16 with CTRAIN_CONV_BN separate, then unit;
#             separate again later in the call (the repeat shows the noise),
#             then tf32;
#   timeline  CUPTI timelines of the same, separate and unit;
#   bert      BERT-large seq 128 bs 256 and seq 512 bs 32, bf16 and fp8 (`ctrain
#             bench`: issue 20's four rows), then
#             bf16 with the MLM logits' rows packed (CTRAIN_LOGITS_PAD=0);
#   converge  fp8 against bf16 convergence (scripts/device/fp8.sh converge,
#             checked by scripts/fp8_converge.py);
#   convbn    gpu_conv_bn (the unit and the cuDNN fused forms; ~9 minutes
#             whole: here what fits);
#   jpeg      jpeg_gpu_probe (nvJPEG alone: RGB, YUV, one and two threads
#             beside a busy GPU);
#   switches  BERT-large bf16 with the LayerNorm / add_norm / GELU-bias
#             switches together;
#   queues    ResNet50 bs 256 and BERT-large seq 128 bs 256 bf16 (synthetic) with
#             CUDA_DEVICE_MAX_CONNECTIONS 8 and 32 (ctrain's default since the
#             GPU decode needed it: does the step itself care?);
#   berttl    BERT-large bf16 seq 128 bs 256's CUPTI timeline (3 steps), its
#             LayerNorm kernels' lines (the vector backward's time a call);
#   sdpa      cuDNN's fused attention (SDPA) on the graph API against ctrain's
#             flash kernels: build/cudnn_sdpa_probe, what cuDNN took, checks, times;
#             then gpu_attention_cudnn (the op on it, CTRAIN_ATTN=cudnn) and
#             BERT-large bf16 seq 128 bs 256 and seq 512 bs 32 with and without it;
#   bnown     batch norm in f32, ours against cuDNN's: gpu_bn_compare's timing
#             table, then ResNet50 bs 256 tf32 and fp32 with CTRAIN_BN=own and
#             without (issue 19's fp32 1.1x and tf32 1.3x).
#
#   D=SECONDS STEPS=LIST OUT=dir bash scripts/device/catchup.sh
#     D         no new step starts after D seconds (default 540: a 10-minute call)
#     STEPS     the steps to run, by name (default: tests decoders resnet
#               timeline bert; the others by name)
#     TESTS     the test programs of `tests` (default: the list above)
#     DECODERS  decoders' CTRAIN_JPEG_DECODERS values (default 2)
#     JPEG_PRIO its CTRAIN_JPEG_PRIORITY values (default 0)
#
# Logs: $OUT/logs.tgz only (the logs are kept outside $OUT so that the 8-file
# limit of a device call never drops the archive; files over 3 MB are left
# out of it). Reads out/new.tar.xz, so the device call carries the ignored
# folder out/.
set -u
S0=$(date +%s)
D=${D:-540}
me=catchup.sh; . scripts/device/unpack.sh
rmdir "$L"; L=/tmp/clogs; rm -rf "$L"; mkdir -p "$L"    # logs outside $OUT: only the tar comes back
pack() { packdir /tmp clogs; }
T=.dev/new/tests
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee "$L/gpu.txt"
STEPS=${STEPS:-tests decoders resnet timeline bert}
want() { case " $STEPS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
el() { echo $(( $(date +%s) - S0 )); }
ok() { [ $(el) -lt "$1" ]; }
run_t() {
    local t=$1 lim=$2 s rc; s=$(date +%s)
    CTRAIN_PLAN_CACHE=off timeout "$lim" stdbuf -oL "$T/$t" "${@:3}" > "$L/$t.log" 2>&1; rc=$?
    echo "$t: rc $rc, $(grep -E '^[0-9]+ passed, [0-9]+ failed' "$L/$t.log" | tail -1)" \
         "($(( $(date +%s) - s )) s)"
    grep -m6 FAIL "$L/$t.log" | cut -c1-240
    pack
}
TESTS=${TESTS:-gpu_flash_attn gpu_softmax gpu_conv2d gpu_linear_act gpu_elementwise \
       gpu_linear_epilogue gpu_add_norm gpu_transformer_ops gpu_linear_fp8 gpu_linear_pad \
       gpu_batchnorm gpu_pool gpu_jpeg_feed gpu_jpeg gpu_fp8 gpu_fp8_gemm gpu_matmul}
for t in $TESTS; do
    want tests || break
    ok $((D - 400)) || { echo "$t: skipped, under 400 s of D=$D left after it"; continue; }
    run_t $t 90
done
echo "tests done at $(el) s"
b() {   # NAME LIMIT ENV... -- ARGS
    local name=$1 lim=$2 envs=(); shift 2
    while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
    ok $D || { echo "$name: no time left"; return; }
    env "${envs[@]}" timeout "$lim" "$NEW" bench "$@" --time-limit 5 \
        --json "$L/$name.json" > "$L/$name.log" 2>&1
    echo "$name (rc $?) at $(el) s:"
    grep -E "^(bert|resnet)|^  real:|real data, decode" "$L/$name.log" | head -6 | cut -c1-240
    pack
}
want decoders && ! ok $((D - 200)) && echo "decoders: skipped, under 200 s of D=$D left"
if want decoders && ok $((D - 200)); then
    python3 scripts/make_image_folder.py /tmp/imf --train 6400 --val 640 --classes 100 --mix \
        > "$L/folder.log" 2>&1
    for pr in ${JPEG_PRIO:-0}; do
        for nd in ${DECODERS:-2}; do
            b decoders${nd}p$pr 90 CTRAIN_JPEG_DECODERS=$nd CTRAIN_JPEG_PRIORITY=$pr -- \
                --models resnet50 --batch 256 --precision bf16 --data /tmp/imf --decode gpu \
                --workers "$(nproc)"
        done
    done
    # where a decode thread's time goes (the feed's closing line; a bench
    # child's messages stay in its own file, so through `ctrain train`)
    if ok $((D - 120)); then
        timeout 90 "$NEW" train --model resnet50 --data /tmp/imf --decode gpu --batch 256 \
            --precision bf16 --graph --steps 60 --log-every 20 --no-eval \
            --workers "$(nproc)" > "$L/decode_times.log" 2>&1
        echo "decode times (rc $?):"
        grep -E "a batch's time on its thread|step 60" "$L/decode_times.log" | cut -c1-400
        pack
    fi
    # what each of the step's waits for data ended on (a CUPTI trace of 8 steps)
    if ok $((D - 90)); then
        CTRAIN_TIMELINE=/tmp/rd.json:20:8 timeout 90 "$NEW" train --model resnet50 --data /tmp/imf \
            --decode gpu --batch 256 --precision bf16 --graph --steps 40 --log-every 20 \
            --no-eval --workers "$(nproc)" > "$L/decode_trace.log" 2>&1
        python3 scripts/timeline_gaps.py /tmp/rd.json > "$L/decode_gaps.txt" 2>&1
        echo "the step's waits (rc $?):"
        head -12 "$L/decode_gaps.txt" | cut -c1-240
        cp /tmp/rd.json.txt "$L/" 2>/dev/null
        pack
    fi
fi
want bert && b bert128 80 X=1 -- --models bert-large --seq 128 --batch 256 --precision bf16,fp8
want bert && b bert512 80 X=1 -- --models bert-large --seq 512 --batch 32 --precision bf16,fp8
# the hardware work queues ctrain sets (32) against CUDA's default 8, on the synthetic steps
for q in 8 32; do
    want queues && b resnet_q$q 60 CUDA_DEVICE_MAX_CONNECTIONS=$q -- --models resnet50 \
        --batch 256 --precision bf16
    want queues && b bert_q$q 60 CUDA_DEVICE_MAX_CONNECTIONS=$q -- --models bert-large \
        --seq 128 --batch 256 --precision bf16
done
want bert && b bert128_packed 60 CTRAIN_LOGITS_PAD=0 -- --models bert-large --seq 128 \
    --batch 256 --precision bf16
if want berttl && ok $((D - 60)); then
    CTRAIN_TIMELINE=/tmp/btl.json:8:3 timeout 90 "$NEW" train --model bert-large --data synthetic \
        --seq 128 --batch 256 --precision bf16 --graph --optim adamw --lr 1e-4 --steps 11 \
        --log-every 5 --no-eval > "$L/berttl.log" 2>&1
    echo "berttl (rc $?):"
    cp /tmp/btl.json.txt "$L/berttl.txt" 2>/dev/null
    grep -E "a step|ln_" "$L/berttl.txt" | head -6 | cut -c1-160
    pack
fi
if want converge && ok $((D - 100)); then
    OUT=$OUT bash scripts/device/fp8.sh converge 2>&1 | grep -v "^name\|^NVIDIA"
    rm -f "$OUT/logs.tgz"; mv "$OUT/logs" "$L/fp8_converge"; pack
fi
if want resnet; then
    b rn_sep 70 CTRAIN_CONV_BN=separate -- --models resnet50 --batch 256 --precision bf16
    b rn_unit 70 CTRAIN_CONV_BN=unit -- --models resnet50 --batch 256 --precision bf16
fi
if want convbn && ok $((D - 110)); then
    CTRAIN_LOG=info run_t gpu_conv_bn 110
    grep -E "SKIP|shapes fused|form [0-9]: fused as|store:" "$L/gpu_conv_bn.log" | head -12
fi
if want jpeg && ok $((D - 100)); then
    timeout 90 .dev/new/jpeg_gpu_probe 1024 256 4 90 > "$L/jpeg_probe.log" 2>&1
    echo "probe rc $?"; grep '"nvjb"' "$L/jpeg_probe.log" | cut -c1-260
    pack
fi
want switches && b sw128 80 CTRAIN_LN_KERNELS=auto CTRAIN_ADD_NORM=fused \
    CTRAIN_LINEAR_ACT_BGRAD=1 -- --models bert-large --seq 128 --batch 256 --precision bf16
if want resnet; then
    b rn_sep2 70 CTRAIN_CONV_BN=separate -- --models resnet50 --batch 256 --precision bf16
    # tf32 (issue 19's 1.3x): the first run searches its plans (~80 s)
    b rn_tf32 130 X=1 -- --models resnet50 --batch 256 --precision tf32
fi
# cuDNN's fused attention through the graph API against ctrain's flash kernels (issue 20's
# attention): what cuDNN takes, the checks, the times (scripts/cudnn_sdpa_probe.c)
if want sdpa && ok $((D - 120)); then
    CUDNN_LOGERR_DBG=1 CUDNN_LOGDEST_DBG=stderr timeout 240 .dev/new/cudnn_sdpa_probe --accum \
        > "$L/sdpa.log" 2> "$L/sdpa_cudnn.log"
    echo "sdpa probe (rc $?):"
    grep -E "FAIL|refused|declined|no plan|passed, |sdpa_probe" "$L/sdpa.log" | head -30 |
        cut -c1-240
    pack
    ok $((D - 200)) && run_t gpu_attention_cudnn 120
    # the op on cuDNN's engines (CTRAIN_ATTN=cudnn, the default) against the fused kernels
    for s in "128 256" "512 32"; do
        set -- $s
        b bert$1_flash 80 CTRAIN_ATTN=flash -- --models bert-large --seq $1 --batch $2 \
            --precision bf16
        b bert$1_cudnn 100 CTRAIN_ATTN=cudnn CTRAIN_LOG=info -- --models bert-large --seq $1 \
            --batch $2 --precision bf16
        grep -m3 -i "cudnn" "$L/bert$1_cudnn.log" | cut -c1-240
    done
fi
# batch norm in f32 (tf32 and fp32 run it unconverted): our kernels, since their rework,
# against cuDNN's generic f32 ones, per call (gpu_bn_compare's timing table) and in the step
if want bnown && ok $((D - 90)); then
    timeout 80 "$T/gpu_bn_compare" --no-check > "$L/bn_compare.log" 2>&1
    echo "bn_compare (rc $?):"
    grep -E "^[0-9]+x[0-9]+x" "$L/bn_compare.log" | head -45 | cut -c1-160
    pack
fi
if want bnown; then
    b rn_tf32_cudnn 130 X=1 -- --models resnet50 --batch 256 --precision tf32
    b rn_tf32_own 100 CTRAIN_BN=own -- --models resnet50 --batch 256 --precision tf32
    b rn_fp32_cudnn 150 X=1 -- --models resnet50 --batch 256 --precision fp32
    b rn_fp32_own 120 CTRAIN_BN=own -- --models resnet50 --batch 256 --precision fp32
fi
for mode in separate unit; do
    want timeline && ok $((D - 60)) || break
    CTRAIN_CONV_BN=$mode CTRAIN_TIMELINE=/tmp/tl_$mode.json:8:3 timeout 80 "$NEW" train \
        --model resnet50 --data synthetic --batch 256 --precision bf16 --graph --steps 12 \
        --log-every 4 --no-eval > "$L/tl_resnet_$mode.log" 2>&1
    echo "timeline $mode (rc $?)"; cp "/tmp/tl_$mode.json.txt" "$L/tl_resnet_$mode.txt"
    head -24 "$L/tl_resnet_$mode.txt" | cut -c1-150
    pack
done
echo "total $(el) s"
pack
