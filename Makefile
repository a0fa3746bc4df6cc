# ctrain — one Makefile.
#   make            build build/ctrain and the test programs
#   make test       build, then run the CPU tests, the layering check
#                   (scripts/check_layers.py) and the self-tests of the fp8
#                   convergence checker and the timeline's gap finder
#                   (scripts/fp8_converge.py, timeline_gaps.py); ends with "N passed, N failed"
#   make test-gpu   build, then run the GPU tests (needs a CUDA device) and the
#                   tokenizer parity with transformers (scripts/tokenizer_parity.py)
#   make install PREFIX=DIR   build/ctrain to DIR/bin, scripts to DIR/share/ctrain
#   make CUDA=0     CPU-only build, even where nvcc, cuDNN and cuBLAS exist
#   make ARCH=90    build GPU code for one architecture only (faster dev builds)
#   make fuzz, make fuzz-replay, make asan
#                   the sanitizer builds: libFuzzer harnesses of the parsers,
#                   their corpus replayed, tests under ASan + UBSan (see below)
# The CUDA backend is built when nvcc, cuDNN, cuBLAS and NCCL are found (NCCL:
# multi-GPU data parallel, train/parallel/dist.h; the CPU-only build needs none of them).

CC        ?= cc
CUDA_HOME ?= /usr/local/cuda
NVCC      ?= $(shell command -v nvcc 2>/dev/null || ([ -x $(CUDA_HOME)/bin/nvcc ] && echo $(CUDA_HOME)/bin/nvcc))
BUILD     ?= build
# sm_80 A100, sm_86 A6000/3090, sm_89 4090/L40S, sm_90 H100/H200
ARCH      ?= 80 86 89 90

CUDNN_H   := $(firstword $(wildcard $(CUDA_HOME)/include/cudnn.h /usr/include/cudnn.h /usr/include/x86_64-linux-gnu/cudnn.h))
CUBLAS_H  := $(firstword $(wildcard $(CUDA_HOME)/include/cublasLt.h /usr/include/cublasLt.h))
NCCL_H    := $(firstword $(wildcard $(CUDA_HOME)/include/nccl.h /usr/include/nccl.h))
ifeq ($(origin CUDA),undefined)
  CUDA := $(if $(and $(NVCC),$(CUDNN_H),$(CUBLAS_H),$(NCCL_H)),1,0)
endif

CFLAGS   ?= -O2 -g
# -ffp-contract=off: the CPU references round every product and sum as
# written (no fused multiply-adds, whatever the compiler and target), as the
# CUDA kernels that pin their roundings do (ops/batchnorm.cu bn_pre)
CFLAGS   += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fopenmp -MMD -MP -I. -ffp-contract=off
# libjpeg statically: the GPU machine has libjpeg.so.8, not the .so.62 this build links against
LDLIBS   := -l:libjpeg.a -l:libstb.a -lz -lm -lpthread -ldl -fopenmp

C_SRCS   := $(wildcard engine/*.c ops/*.c models/*.c data/*.c train/*/*.c)
MAIN_SRC := train/cli/main.c
LIB_C    := $(filter-out $(MAIN_SRC),$(C_SRCS))
CU_SRCS  :=
ifeq ($(CUDA),1)
  CU_SRCS  := $(wildcard engine/*.cu ops/*.cu train/*/*.cu)
  CFLAGS   += -DCTRAIN_CUDA -I$(CUDA_HOME)/include
  NVFLAGS  := -O3 -std=c++17 -DCTRAIN_CUDA -I. -MMD -MP -lineinfo \
              -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror,-fPIC \
              $(foreach a,$(ARCH),-gencode=arch=compute_$(a),code=sm_$(a))
  LDLIBS   += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 \
              -lcudnn -lcublasLt -lcublas -lnccl -lcudart -lstdc++
endif

LIB_OBJS := $(LIB_C:%.c=$(BUILD)/obj/%.o) $(CU_SRCS:%.cu=$(BUILD)/obj/%.cu.o)
LIB      := $(BUILD)/libctrain.a
BIN      := $(BUILD)/ctrain

TEST_CPU_SRCS := $(wildcard tests/test_*.c)
TEST_GPU_SRCS := $(if $(filter 1,$(CUDA)),$(wildcard tests/gpu_*.c),)
TEST_CPU_BINS := $(TEST_CPU_SRCS:tests/%.c=$(BUILD)/tests/%)
# White-box tests of CUDA-build code that run on the CPU: the file under
# test is included whole and cuDNN / CUDA are mocked (tests/mock_*.c; built
# from the source alone, not against the library)
TEST_CPU_BINS += $(if $(filter 1,$(CUDA)),$(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/mock_*.c)),)
TEST_GPU_BINS := $(TEST_GPU_SRCS:tests/%.c=$(BUILD)/tests/%)
# The probes (measurements, not tests): one CPU core's decode + resample of a
# training image (scripts/image_cpu_probe.c), the GPU image path's throughput
# (scripts/jpeg_gpu_probe.c), which fused convolution graphs cuDNN runs
# (scripts/cudnn_fusion_probe.c), cuDNN's fused attention against ctrain's
# (scripts/cudnn_sdpa_probe.c), cuBLASLt's algorithms beyond its heuristic's
# first (scripts/gemm_algo_probe.c) and the strided convolutions' data gradient
# as stride-1 phases (scripts/cudnn_dgrad_probe.c), a 1 x 1 convolution of our own
# with the batch norm's passes folded in against cuBLAS's (scripts/conv1x1_bn_probe.cu),
# and what cuDNN's fused batch norm keeps in its reserve space (scripts/bn_reserve_probe.c).
# Hopper's wgmma from C++ (scripts/wgmma_probe.cu) is built for sm_90a, when 90 is in ARCH.
PROBE_BINS    := $(BUILD)/image_cpu_probe \
                 $(if $(filter 1,$(CUDA)),$(BUILD)/jpeg_gpu_probe $(BUILD)/cudnn_fusion_probe \
                 $(BUILD)/cudnn_sdpa_probe $(BUILD)/gemm_algo_probe $(BUILD)/cudnn_dgrad_probe \
                 $(BUILD)/conv1x1_bn_probe $(BUILD)/bn_reserve_probe \
                 $(if $(filter 90,$(ARCH)),$(BUILD)/wgmma_probe,),)

.PHONY: all test test-gpu clean info-build run-mlp bench install uninstall
all: $(BIN) $(TEST_CPU_BINS) $(TEST_GPU_BINS) $(PROBE_BINS)

info-build:
	@echo "CUDA=$(CUDA) NVCC=$(NVCC) cuDNN=$(CUDNN_H) cuBLASLt=$(CUBLAS_H) NCCL=$(NCCL_H) ARCH=$(ARCH)"

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# ptxas's "Potential Performance Loss" notes (C75xx: wgmma serialized for want of
# registers, and the like) are infos, not warnings, so -Werror lets them pass; a
# kernel that compiles to one fails the build here instead of running at half speed.
$(BUILD)/obj/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c $< -o $@ 2> $@.log || { cat $@.log >&2; exit 1; }
	@cat $@.log >&2; if grep -q 'Potential Performance Loss' $@.log; then \
	    rm -f $@; echo "$<: ptxas reports a performance loss (above)" >&2; exit 1; fi

# The wgmma attention kernels (ops/attention_sm90*.cu) need Hopper's sm_90a code where
# 90 is in ARCH; CTRAIN_SM90A tells attention_sm90_supports that it is there.
comma := ,
ifneq ($(filter 90,$(ARCH)),)
$(BUILD)/obj/ops/attention_sm90.cu.o $(BUILD)/obj/ops/attention_sm90_bwd.cu.o: \
    NVFLAGS := $(subst compute_90$(comma)code=sm_90,compute_90a$(comma)code=sm_90a,$(NVFLAGS)) \
               -DCTRAIN_SM90A
endif

# The CPU image resampler's loops vectorise at -O3 only (gcc 12), its clamps
# only without FP-trap semantics (nothing here traps on floating point)
$(BUILD)/obj/data/resample.o: CFLAGS += -O3 -fno-trapping-math

# The git revision goes into the bench's JSON (train/bench/bench_json.c); its object
# is rebuilt whenever the revision changes, so a binary never reports another.
GIT_REV := $(shell git describe --always --dirty 2>/dev/null)
$(BUILD)/obj/train/bench/bench_json.o: CFLAGS += -DCTRAIN_GIT_REVISION='"$(GIT_REV)"'
$(BUILD)/obj/train/bench/bench_json.o: $(BUILD)/revision.stamp
$(BUILD)/revision.stamp: FORCE
	@mkdir -p $(BUILD); echo '$(GIT_REV)' | cmp -s - $@ || echo '$(GIT_REV)' > $@
.PHONY: FORCE
FORCE:

$(LIB): $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BIN): $(BUILD)/obj/$(MAIN_SRC:.c=.o) $(LIB)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(LIB) -o $@ $(LDLIBS)

$(BUILD)/tests/mock_%: tests/mock_%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< -o $@ -lm

$(BUILD)/conv1x1_bn_probe: scripts/conv1x1_bn_probe.cu $(LIB)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c $< -o $@.o
	$(CC) $(CFLAGS) $@.o $(LIB) -o $@ $(LDLIBS)

$(BUILD)/wgmma_probe: scripts/wgmma_probe.cu
	@mkdir -p $(dir $@)
	$(NVCC) -O3 -std=c++17 -I. -lineinfo -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror \
	    -gencode=arch=compute_90a,code=sm_90a $< -o $@

$(BUILD)/image_cpu_probe $(BUILD)/jpeg_gpu_probe $(BUILD)/cudnn_fusion_probe \
$(BUILD)/cudnn_sdpa_probe $(BUILD)/gemm_algo_probe $(BUILD)/cudnn_dgrad_probe \
$(BUILD)/bn_reserve_probe: $(BUILD)/%: \
    scripts/%.c $(LIB)
	$(CC) $(CFLAGS) $< $(LIB) -o $@ $(LDLIBS)

test: $(BIN) $(TEST_CPU_BINS)
	@CTRAIN_BIN='$(BIN)' CTRAIN_SCRIPTS='$(CURDIR)/scripts' sh tests/run.sh $(TEST_CPU_BINS) \
	    scripts/check_layers.py scripts/fp8_converge.py scripts/timeline_gaps.py \
	    tests/install_check.sh

test-gpu: $(BIN) $(TEST_GPU_BINS)
	@if [ "$(CUDA)" != 1 ]; then echo "make test-gpu: this build has no CUDA backend (nvcc, cuDNN, cuBLAS or NCCL missing, or CUDA=0)"; exit 1; fi
	@python3 scripts/torch_parity.py resnet 50 8 224 $(BUILD)/parity/resnet50 || \
	    echo "make test-gpu: could not write the PyTorch reference (python3 with torch, torchvision, safetensors needed); the parity test will fail"
	@python3 scripts/torch_parity.py bert base 8 128 $(BUILD)/parity/bert-base || \
	    echo "make test-gpu: could not write the transformers reference; the BERT parity test will fail"
	@CTRAIN_PLAN_CACHE=off CTRAIN_PARITY_DIR=$(BUILD)/parity/resnet50 CTRAIN_BERT_PARITY_DIR=$(BUILD)/parity/bert-base \
	    CTRAIN_BIN=$(BIN) sh tests/run.sh $(TEST_GPU_BINS) scripts/tokenizer_parity.py

# make install PREFIX=DIR (default /usr/local; DESTDIR for packaging): the
# binary in DIR/bin, the Python tools `ctrain report` and the PyTorch
# comparisons use in DIR/share/ctrain/scripts (where an installed ctrain
# looks for them). make uninstall PREFIX=DIR removes exactly those files.
PREFIX ?= /usr/local
SHARE_SCRIPTS := $(wildcard scripts/*.py)
install: $(BIN)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/ctrain/scripts
	install -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/ctrain
	install -m 644 $(SHARE_SCRIPTS) $(DESTDIR)$(PREFIX)/share/ctrain/scripts/

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/ctrain
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/share/ctrain/scripts/,$(notdir $(SHARE_SCRIPTS)))
	-rmdir $(DESTDIR)$(PREFIX)/share/ctrain/scripts $(DESTDIR)$(PREFIX)/share/ctrain 2>/dev/null

# The quick start's main job: install what is missing, build, train.
# The main job: the card's training throughput report (ctrain bench --help);
# BENCH_ARGS narrows it, e.g. make bench BENCH_ARGS="--quick --json quick.json".
BENCH_ARGS ?= --json ctrain_bench.json
bench:
	@bash scripts/setup.sh
	@$(MAKE) --no-print-directory $(BIN)
	$(BIN) bench $(BENCH_ARGS)

run-mlp:
	@bash scripts/setup.sh
	@$(MAKE) --no-print-directory $(BIN)
	$(BIN) train --model mlp --data fashion-mnist --epochs 1

clean:
	rm -rf $(BUILD)

# ---- sanitizer builds (tests/fuzz/README.md) --------------------------------
#   make fuzz         the libFuzzer harnesses build-fuzz/fuzz_NAME (tests/fuzz/fuzz_NAME.c):
#                     clang -fsanitize=fuzzer,address,undefined over a CPU-only library
#                     built with clang -fsanitize=fuzzer-no-link,address,undefined
#   make fuzz-replay  each harness once over tests/fuzz/corpus/fuzz_NAME/ and
#                     tests/fuzz/crashes/fuzz_NAME/ without libFuzzer (tests/fuzz/replay.c):
#                     clang with ASan + UBSan, else $(CC) with them, else plain $(CC);
#                     ends with "N passed, N failed", one per harness
#   make fuzz-corpus  write the seed corpus tests/fuzz/corpus/ again (tests/fuzz/make_corpus.c)
#   make asan         the library, build-asan/ctrain and the ASAN_TESTS below under ASan +
#                     UBSan (CPU-only, build-asan), then runs those tests
# Each runs this Makefile again with its own CC, BUILD and CFLAGS; CFLAGS comes
# from the environment so that the flags above are still added to it.
SAN_FLAGS  := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined \
              -fno-omit-frame-pointer
FUZZ_CC    ?= clang
FUZZ_NAMES := $(patsubst tests/fuzz/%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
# the driver: libFuzzer (fuzzer) or tests/fuzz/replay.c (replay)
FUZZ_MAIN  ?= fuzzer
FUZZ_MAIN_OBJ := $(if $(filter replay,$(FUZZ_MAIN)),$(BUILD)/obj/tests/fuzz/replay.o)
FUZZ_LINK  := $(if $(filter fuzzer,$(FUZZ_MAIN)),-fsanitize=fuzzer)
# the CPU tests make asan runs: the parsers, loaders and checkpoints, and the
# environment parsers (about 15 s under ASan on 2 cores). Left out as too slow
# under ASan: test_resume (2 minutes: some 30 runs of build-asan/ctrain),
# test_cli (over 15 minutes: some 200 runs), test_bench; and the op and model
# tests, which read no file a user gives (test_autograd's out-of-memory case
# also needs ASAN_OPTIONS=allocator_may_return_null=1).
ASAN_TESTS := test_wordpiece test_mlm test_loader test_checkpoint test_imagefolder \
              test_data_mnist test_dist_env test_settings test_error test_text_shards \
              test_safetensors test_image_decode test_image_refuse test_plan_store
.PHONY: fuzz fuzz-bins fuzz-replay fuzz-corpus asan
fuzz:
	@command -v $(FUZZ_CC) >/dev/null 2>&1 || { echo "make fuzz: $(FUZZ_CC) not found;" \
	    "libFuzzer comes with clang (apt-get install clang), or set FUZZ_CC"; exit 1; }
	@CFLAGS='$(SAN_FLAGS) -fsanitize=fuzzer-no-link' $(MAKE) --no-print-directory \
	    CC=$(FUZZ_CC) CUDA=0 BUILD=build-fuzz FUZZ_MAIN=fuzzer fuzz-bins

fuzz-bins: $(FUZZ_NAMES:%=$(BUILD)/%)
# the harnesses' objects are kept (make would delete them as intermediate)
.SECONDARY: $(patsubst tests/fuzz/%.c,$(BUILD)/obj/tests/fuzz/%.o,$(wildcard tests/fuzz/*.c))

$(BUILD)/fuzz_%: $(BUILD)/obj/tests/fuzz/fuzz_%.o $(FUZZ_MAIN_OBJ) $(LIB)
	$(CC) $(CFLAGS) $(FUZZ_LINK) $(FUZZ_LDFLAGS) $^ -o $@ $(LDLIBS)

# train_options_parse ends the process on a bad flag; the harness catches that
# (tests/fuzz/fuzz_options.c)
$(BUILD)/fuzz_options: FUZZ_LDFLAGS := -Wl,--wrap=ct_fatal_hint

fuzz-replay:
	@probe='int main(void) { return 0; }'; \
	if command -v $(FUZZ_CC) >/dev/null 2>&1 && echo "$$probe" | \
	        $(FUZZ_CC) -x c - -fopenmp $(SAN_FLAGS) -o /dev/null 2>/dev/null; then \
	    cc=$(FUZZ_CC); flags='$(SAN_FLAGS)'; \
	elif echo "$$probe" | $(CC) -x c - -fopenmp $(SAN_FLAGS) -o /dev/null 2>/dev/null; then \
	    cc=$(CC); flags='$(SAN_FLAGS)'; \
	else \
	    cc=$(CC); flags='-O1 -g'; echo "fuzz-replay: no sanitizers with $(CC): a plain build"; \
	fi; \
	CFLAGS="$$flags" $(MAKE) --no-print-directory CC=$$cc CUDA=0 \
	    BUILD=build-fuzz-replay/$$(basename $$cc) FUZZ_MAIN=replay fuzz-bins && \
	sh tests/fuzz/replay.sh build-fuzz-replay/$$(basename $$cc) $(FUZZ_NAMES)

fuzz-corpus:
	@CFLAGS='-O1 -g' $(MAKE) --no-print-directory CUDA=0 BUILD=build-fuzz-replay/corpus \
	    build-fuzz-replay/corpus/make_corpus
	build-fuzz-replay/corpus/make_corpus tests/fuzz/corpus tests/fuzz/crashes

$(BUILD)/make_corpus: $(BUILD)/obj/tests/fuzz/make_corpus.o $(LIB)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

asan:
	@CFLAGS='$(SAN_FLAGS)' $(MAKE) --no-print-directory CUDA=0 BUILD=build-asan \
	    build-asan/ctrain $(ASAN_TESTS:%=build-asan/tests/%)
	@CTRAIN_BIN=build-asan/ctrain sh tests/run.sh $(ASAN_TESTS:%=build-asan/tests/%)

-include $(shell find $(BUILD)/obj $(BUILD)/tests -name '*.d' 2>/dev/null) \
    $(wildcard $(BUILD)/image_cpu_probe.d $(BUILD)/jpeg_gpu_probe.d $(BUILD)/cudnn_fusion_probe.d \
    $(BUILD)/cudnn_sdpa_probe.d $(BUILD)/gemm_algo_probe.d $(BUILD)/cudnn_dgrad_probe.d \
    $(BUILD)/bn_reserve_probe.d \
    $(BUILD)/conv1x1_bn_probe.d)
