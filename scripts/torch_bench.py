#!/usr/bin/env python3
"""torch_bench.py — PyTorch's side of `ctrain bench`: the same suite, measured
the same way, written as the same JSON ("ctrain-bench/1"), so that
`ctrain report ctrain.json torch.json` puts the two side by side.

  torch_bench.py [--quick] [--models L] [--precision L] [--batch L] [--seq L]
                 [--steps N] [--warmup N] [--time-limit S] [--image-size S]
                 [--compile [--compile-mode M]] [--nchw] [--device cuda:N]
                 [--profile PREFIX] [--json FILE]
  torch_bench.py --dry-run [suite options] [--json FILE]   no torch needed
  torch_bench.py --self-test [--json FILE]                 no torch needed

Suite (train/bench/bench.c, mirrored here; every flag narrows it):
  ResNet50 224x224  batch 32, 64, 256             fp32, tf32, fp16, bf16
  BERT-base         batch 32, seq 128             fp32, tf32, fp16, bf16
  BERT-large        batch 24, 32 x seq 128, 512   fp32, tf32, fp16, bf16
--quick: ResNet50 batch 64 and 256, BERT-large batch 32 seq 128, in bf16 and
tf32, 3 warm-up and 10 timed steps. Otherwise 5 warm-up and 20 timed steps;
timing goes on until 2 s have passed (NVML's power is a ~1 s running
average) and stops after --time-limit (15 s) once 5 steps are done.

How it measures (as ctrain does, train/bench/bench_run.c):
  - Every config runs in its own forked process (the parent never touches
    CUDA; a first "probe" child reads the machine and measures the matmul
    ceilings), so an out-of-memory config becomes a row with error "out of
    memory" and the suite goes on, and no config inherits another's
    allocator cache, cuDNN plans or fragmentation (so no empty_cache is
    needed between configs).
  - Synthetic data made once on the GPU; `warmup` untimed steps (cuDNN
    autotuning with cudnn.benchmark = True, torch.compile's compilation);
    then timed steps, each between two CUDA events recorded on the stream
    (N steps, N + 1 events, one host sync after the last), so a step's time
    includes any gap where the GPU waited for the host. The figure is the
    median step (min and max kept); samples/s = batch / median.
  - Peak memory: torch.cuda.max_memory_allocated() over the timed steps
    (reset after warm-up): bytes in live tensors of PyTorch's caching
    allocator, the counterpart of ctrain's pool high-water mark.
    peak_mem_reserved_bytes adds max_memory_reserved() (what the allocator
    holds from cudaMalloc).
  - Power, temperature, SM clock and throttle reasons: NVML read through
    ctypes (libnvidia-ml.so.1; pynvml is not needed) every 50 ms over the
    timed steps, summarised as ctrain's sampler does (train/bench/nvml.c): power
    average and peak, energy (trapezoid), temperature average and max, SM
    clock average and min, slowdown reasons seen. The readings are taken by
    the parent process (it holds no CUDA context), so no sampling thread
    competes with the measured process for Python's GIL. Without NVML those
    figures are absent, never 0.
  - FLOPs per sample: ctrain's formulas (models/resnet.c
    resnet_flops_per_image x 3, models/bert.c bert_train_flops_per_seq),
    mirrored below; `ctrain bench --list` writes ctrain's values and the CPU
    test suite checks that --dry-run writes the same ones. MFU = FLOPs per
    sample x samples/s over the datasheet dense peak (read from
    train/bench/peaks.c) and over the matmul ceiling measured in this run
    (torch.mm: fp16 and bf16 8192^3, fp32 and tf32 4096^3, 3 warm-up runs,
    median of 10).
Precision: fp32 = TF32 off for matmul and cuDNN; tf32 = both on; fp16 =
autocast fp16 + GradScaler; bf16 = autocast bf16 (TF32 off in both); fp8 =
bf16 with the BERT encoder's Linear layers as Transformer Engine te.Linear
under te.fp8_autocast (delayed scaling, HYBRID: E4M3 forward, E5M2 backward,
amax history 16, as ctrain's): where transformer_engine is not installed, or
for a model without such layers, the row says "not supported: ..." and
nothing runs.
Models and optimizers (as ctrain bench trains them):
  - ResNets: torchvision resnetN(num_classes=1000), channels_last (NHWC,
    PyTorch's fast path and ctrain's layout) unless --nchw; cross-entropy;
    SGD lr 0.1, momentum 0.9, weight decay 1e-4 on every parameter.
  - BERT: transformers BertForMaskedLM built from a BertConfig (no download;
    vocab 30522, 512 positions, dropout 0.1, LayerNorm eps 1e-12), SDPA
    attention; the MLM head on the labelled rows only (--mlm-head all: on
    every position, transformers' stock forward), cross-entropy over the 15%
    labelled ones ([CLS] ids [SEP], no padding: no attention mask is
    passed); AdamW lr 1e-4, betas (0.9, 0.999), eps 1e-6, weight decay 0.01
    on weights and embeddings, none on biases and LayerNorm.
  - The optimizers use PyTorch's fused implementation (fused=True; foreach
    if fused is refused): PyTorch's fast path, and with GradScaler it needs
    no host sync. The notes in the JSON say what was used.
--compile wraps the model and its loss in torch.compile (engine "pytorch
<version> compile", mode "compile"); the compilation happens in warm-up.

--dry-run writes the suite's configs (steps, warm-up, FLOPs per sample)
without measuring; --self-test runs the whole parent machinery (fork, pipe,
NVML summary, JSON, table, OOM and crash rows) with fake children whose
figures are made up and marked so (engine "self-test (fake figures)").
"""
import argparse
import contextlib
import ctypes
import datetime
import json
import math
import os
import re
import select
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import warnings

SCHEMA = "ctrain-bench/1"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CONFIG_LIMIT_S = 900.0       # a config's child is killed after this long (train/bench/bench_session.c)
PROBE_LIMIT_S = 300.0
NVML_PERIOD_S = 0.05         # ctrain samples every 50 ms
GIB = 1024.0 ** 3

# ---- The suite (train/bench/bench.c) ----------------------------------------------

GPU_MODELS = ["resnet50", "bert-base", "bert-large"]
QUICK_MODELS = ["resnet50", "bert-large"]
GPU_PRECS = ["fp32", "tf32", "fp16", "bf16"]
QUICK_PRECS = ["bf16", "tf32"]
RESNET_LAYERS = {18: (2, 2, 2, 2), 34: (3, 4, 6, 3), 50: (3, 4, 6, 3), 101: (3, 4, 23, 3),
                 152: (3, 8, 36, 3)}
BERT_SIZES = {  # layers, hidden, heads, intermediate (models/bert.c)
    "bert-tiny": (2, 128, 2, 512), "bert-mini": (4, 256, 4, 1024),
    "bert-small": (4, 512, 8, 2048), "bert-medium": (8, 512, 8, 2048),
    "bert-base": (12, 768, 12, 3072), "bert-large": (24, 1024, 16, 4096),
}
BERT_VOCAB = 30522
KNOWN_MODELS = ", ".join([f"resnet{d}" for d in sorted(RESNET_LAYERS)] + list(BERT_SIZES))


def resnet_depth(name):
    """resnet_depth_from_name: 18, 34, 50, 101, 152, else 0."""
    m = re.fullmatch(r"resnet([1-9]\d*)", name)
    return int(m.group(1)) if m and int(m.group(1)) in RESNET_LAYERS else 0


def model_defaults(model, quick):
    """(batches, seqs) of a model in the GPU suite (bench.c model_defaults)."""
    if model == "resnet50" and not quick:
        return [32, 64, 256], []
    if model.startswith("resnet"):
        return [64, 256], []
    if model == "bert-large" and not quick:
        return [24, 32], [128, 512]
    if model.startswith("bert"):
        return [32], [128]
    return [64], []


def build_suite(a):
    """The configs, in ctrain's order: model, precision, seq, batch."""
    models = a.models or (QUICK_MODELS if a.quick else GPU_MODELS)
    precs = a.precision or (QUICK_PRECS if a.quick else GPU_PRECS)
    warmup = a.warmup if a.warmup is not None else (3 if a.quick else 5)
    steps = a.steps if a.steps is not None else (10 if a.quick else 20)
    out = []
    for m in models:
        b, sq = model_defaults(m, a.quick)
        bert = m.startswith("bert")
        if a.batch:
            b = list(a.batch)
        if bert and a.seq:
            sq = list(a.seq)
        if not bert:
            sq = [0]
        # the full suite adds DLE's BERT-large batch at seq 128 (bench.c)
        dle = m == "bert-large" and not a.quick and not a.batch and not a.seq
        for p in precs:
            for s in sq:
                for batch in b + ([256] if dle and s == 128 else []):
                    out.append({
                        "model": m, "precision": p, "batch": batch, "seq": s,
                        "image_size": a.image_size if not bert else 0,
                        "layout": None if bert else ("nchw" if a.nchw else "nhwc"),
                        "warmup": warmup, "steps": steps, "min_steps": 5, "min_time_s": 2.0,
                        "time_limit_s": float(a.time_limit), "device_id": a.device_id,
                        "compile": a.compile, "compile_mode": a.compile_mode,
                        "mlm_head": a.mlm_head, "profile": a.profile,
                        "deterministic": a.deterministic,
                    })
    return out


def config_label(c):
    extra = f" seq {c['seq']}" if c["seq"] else (
        f" {c['image_size']}px" if c["image_size"] and c["image_size"] != 224 else "")
    lay = " nchw" if c.get("layout") == "nchw" else ""
    det = " deterministic" if c.get("deterministic") else ""
    return f"{c['model']} {c['precision']} bs {c['batch']}{extra}{lay}{det}"


def timed_cap(c):
    return 2000 if c["min_time_s"] > 0 and c["steps"] < 2000 else c["steps"]


def timed_more(c, n, elapsed):
    """Another timed step after n? (bench_run.c timed_more)"""
    min_steps = min(c["min_steps"], c["steps"])
    if n >= min_steps and c["time_limit_s"] > 0 and elapsed > c["time_limit_s"]:
        return False
    return n < c["steps"] or (n < timed_cap(c) and elapsed < c["min_time_s"])


# ---- FLOPs per trained sample (models/resnet.c, models/bert.c) --------------

def resnet_flops_per_image(depth, size, width=64, classes=1000, in_channels=3):
    """Forward multiply-adds x 2 of the convolutions and the classifier."""
    layers = RESNET_LAYERS.get(depth)
    if not layers:
        return 0.0
    bottleneck = depth >= 50
    expansion = 4 if bottleneck else 1
    hw = [size, size]

    def conv(cin, cout, k, s, pad, dims=hw):
        dims[0] = (dims[0] + 2 * pad - k) // s + 1
        dims[1] = (dims[1] + 2 * pad - k) // s + 1
        return 2.0 * dims[0] * dims[1] * float(cout) * cin * k * k

    f = conv(in_channels, width, 7, 2, 3)
    hw[0] = (hw[0] + 2 - 3) // 2 + 1
    hw[1] = (hw[1] + 2 - 3) // 2 + 1
    inplanes = width
    for stage in range(4):
        planes = width << stage
        for j in range(layers[stage]):
            s = 2 if (j == 0 and stage > 0) else 1
            before = list(hw)
            if bottleneck:
                f += conv(inplanes, planes, 1, 1, 0)
                f += conv(planes, planes, 3, s, 1)
                f += conv(planes, planes * 4, 1, 1, 0)
            else:
                f += conv(inplanes, planes, 3, s, 1)
                f += conv(planes, planes, 3, 1, 1)
            if j == 0 and (s != 1 or inplanes != planes * expansion):
                f += conv(inplanes, planes * expansion, 1, s, 0, before)
            inplanes = planes * expansion
    return f + 2.0 * inplanes * classes


def mlm_max_masked(T, mask_prob=0.15):
    """data/mlm.c: the masked-row slots a sequence (the most the masker picks)."""
    k = int(mask_prob * T + 0.5)
    return min(T, max(1, k))


def bert_train_flops_per_seq(model, T, vocab=BERT_VOCAB):
    """6 x (encoder matmul parameters x tokens + MLM head matmul parameters x
    masked-row slots) plus attention (models/bert.c: the head is counted on
    the rows it runs on, as Google's BERT does with max_predictions_per_seq)."""
    L, D, _, I = (float(v) for v in BERT_SIZES[model])
    V = float(vocab)
    per_token = L * (4 * D * D + 2 * D * I)
    per_head_row = D * D + V * D
    attn = L * 2.0 * 2.0 * T * D
    return 6.0 * (T * per_token + mlm_max_masked(T) * per_head_row) + 3.0 * T * attn


def config_flops(c):
    d = resnet_depth(c["model"])
    if d:
        return 3.0 * resnet_flops_per_image(d, c["image_size"] or 224)
    if c["model"] in BERT_SIZES:
        return bert_train_flops_per_seq(c["model"], c["seq"])
    return None


# ---- Datasheet peaks: read from train/bench/peaks.c (one table for both engines) --

PEAK_PRECS = ["fp32", "tf32", "fp16", "bf16", "fp8"]
_peaks = None


def load_peaks(path=os.path.join(ROOT, "train", "bench", "peaks.c")):
    """[(card, words, unless, {prec: tflops or nan})] in the C table's order;
    [] when the file is missing or its table cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return []
    m = re.search(r"PEAKS\[\]\s*=\s*\{(.*?)\n\};", text, re.S)
    if not m:
        return []
    body = re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S)
    entries = []
    rx = re.compile(r'\{\s*"([^"]*)"\s*,\s*\{([^}]*)\}\s*,\s*\{([^}]*)\}\s*,\s*\{([^}]*)\}', re.S)
    for card, words, unless, nums in rx.findall(body):
        vals = []
        for v in nums.split(","):
            v = v.strip()
            vals.append(float("nan") if v == "NA" else float(v))
        if len(vals) != len(PEAK_PRECS):
            continue
        entries.append((card, re.findall(r'"([^"]*)"', words), re.findall(r'"([^"]*)"', unless),
                        dict(zip(PEAK_PRECS, vals))))
    return entries


def _has_word(s, word):
    return re.search(r"(?<![A-Za-z0-9])" + re.escape(word) + r"(?![A-Za-z0-9])", s, re.I) is not None


def peak_entry(device_name):
    global _peaks
    if _peaks is None:
        _peaks = load_peaks()
    if not device_name:
        return None
    for e in _peaks:
        if all(_has_word(device_name, w) for w in e[1]) and not any(_has_word(device_name, w) for w in e[2]):
            return e
    return None


def peak_tflops(device_name, precision):
    """peaks.c peaks_tflops: NaN-free float or None."""
    e = peak_entry(device_name)
    if not e or precision not in e[3]:
        return None
    t = e[3][precision]
    if precision == "tf32" and math.isnan(t):
        t = e[3]["fp32"]        # no TF32 on the card: "tf32" runs fp32 math
    return None if math.isnan(t) else t


# ---- NVML through ctypes (train/bench/nvml.c) -------------------------------------

THROTTLE_NAMES = [(0x1, "gpu_idle"), (0x2, "app_clocks_setting"), (0x4, "sw_power_cap"),
                  (0x8, "hw_slowdown"), (0x10, "sync_boost"), (0x20, "sw_thermal"),
                  (0x40, "hw_thermal"), (0x80, "hw_power_brake"), (0x100, "display_clocks_setting")]
THROTTLE_SLOWDOWN_MASK = 0x4 | 0x8 | 0x10 | 0x20 | 0x40 | 0x80


def throttle_names(reasons):
    if reasons is None or reasons < 0:
        return ""
    names, known = [], 0
    for bit, name in THROTTLE_NAMES:
        known |= bit
        if reasons & bit:
            names.append(name)
    if reasons & ~known:
        names.append(f"other_0x{reasons & ~known:x}")
    return ",".join(names) or "none"


class Nvml:
    """libnvidia-ml.so.1 via ctypes. Never raises: ok is False and reason says
    why when it cannot be used; readings then are None ("not measured")."""

    def __init__(self, path=None):
        self.ok, self.reason, self.lib = False, "", None
        path = path or os.environ.get("CTRAIN_NVML_LIB") or "libnvidia-ml.so.1"
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            self.reason = (f"cannot load {path} ({e}): no NVIDIA driver here? power, temperature "
                           "and clocks are not reported")
            return
        for name in ("nvmlInit_v2", "nvmlShutdown", "nvmlDeviceGetHandleByIndex_v2"):
            if not hasattr(lib, name):
                self.reason = f"{path} has no {name}: not NVIDIA's NVML, or one too old"
                return
        self.lib = lib
        self._fn = {}
        vp, ui, ull = ctypes.c_void_p, ctypes.c_uint, ctypes.c_ulonglong
        P = ctypes.POINTER
        sigs = {
            "nvmlErrorString": ([ctypes.c_int], ctypes.c_char_p),
            "nvmlSystemGetDriverVersion": ([ctypes.c_char_p, ui], ctypes.c_int),
            "nvmlDeviceGetHandleByIndex_v2": ([ui, P(vp)], ctypes.c_int),
            "nvmlDeviceGetHandleByPciBusId_v2": ([ctypes.c_char_p, P(vp)], ctypes.c_int),
            "nvmlDeviceGetHandleByUUID": ([ctypes.c_char_p, P(vp)], ctypes.c_int),
            "nvmlDeviceGetPowerUsage": ([vp, P(ui)], ctypes.c_int),
            "nvmlDeviceGetTemperature": ([vp, ctypes.c_int, P(ui)], ctypes.c_int),
            "nvmlDeviceGetClockInfo": ([vp, ctypes.c_int, P(ui)], ctypes.c_int),
            "nvmlDeviceGetCurrentClocksEventReasons": ([vp, P(ull)], ctypes.c_int),
            "nvmlDeviceGetCurrentClocksThrottleReasons": ([vp, P(ull)], ctypes.c_int),
        }
        for name, (args, res) in sigs.items():
            f = getattr(lib, name, None)
            if f is not None:
                f.argtypes, f.restype = args, res
                self._fn[name] = f
        # renamed in driver 535; the old name stays as an alias
        self._fn.setdefault("reasons", self._fn.get("nvmlDeviceGetCurrentClocksEventReasons")
                            or self._fn.get("nvmlDeviceGetCurrentClocksThrottleReasons"))
        rc = lib.nvmlInit_v2()
        if rc != 0:
            self.reason = f"nvmlInit failed: {self.error(rc)} (is the NVIDIA driver loaded?)"
            return
        self.ok = True

    def error(self, rc):
        f = self._fn.get("nvmlErrorString") if self.lib else None
        if f:
            s = f(rc)
            if s:
                return s.decode(errors="replace")
        return f"NVML error {rc}"

    def driver_version(self):
        f = self._fn.get("nvmlSystemGetDriverVersion") if self.ok else None
        buf = ctypes.create_string_buffer(80)
        return buf.value.decode() if f and f(buf, 80) == 0 else ""

    def open(self, uuid=None, pci_bus_id=None, index=None):
        """A device handle by UUID, else PCI bus id, else NVML index; None."""
        if not self.ok:
            return None
        h = ctypes.c_void_p()
        tries = []
        if uuid and "nvmlDeviceGetHandleByUUID" in self._fn:
            tries.append(("uuid " + uuid, lambda: self._fn["nvmlDeviceGetHandleByUUID"](uuid.encode(), ctypes.byref(h))))
        if pci_bus_id and "nvmlDeviceGetHandleByPciBusId_v2" in self._fn:
            tries.append(("PCI bus id " + pci_bus_id,
                          lambda: self._fn["nvmlDeviceGetHandleByPciBusId_v2"](pci_bus_id.encode(), ctypes.byref(h))))
        if index is not None:
            tries.append((f"index {index}", lambda: self._fn["nvmlDeviceGetHandleByIndex_v2"](index, ctypes.byref(h))))
        why = []
        for what, call in tries:
            rc = call()
            if rc == 0:
                return h
            why.append(f"{what}: {self.error(rc)}")
        self.reason = "no NVML device (" + "; ".join(why or ["no key"]) + ")"
        return None

    def sample(self, h):
        """{power_w, temp_c, sm_clock_mhz, throttle}; a field None when its call failed."""
        s = {"power_w": None, "temp_c": None, "sm_clock_mhz": None, "throttle": None}
        if not self.ok or h is None:
            return s
        u = ctypes.c_uint()
        f = self._fn.get("nvmlDeviceGetPowerUsage")
        if f and f(h, ctypes.byref(u)) == 0:
            s["power_w"] = u.value / 1000.0
        f = self._fn.get("nvmlDeviceGetTemperature")
        if f and f(h, 0, ctypes.byref(u)) == 0:          # NVML_TEMPERATURE_GPU
            s["temp_c"] = float(u.value)
        f = self._fn.get("nvmlDeviceGetClockInfo")
        if f and f(h, 1, ctypes.byref(u)) == 0:          # NVML_CLOCK_SM
            s["sm_clock_mhz"] = float(u.value)
        r = ctypes.c_ulonglong()
        f = self._fn.get("reasons")
        if f and f(h, ctypes.byref(r)) == 0:
            s["throttle"] = int(r.value)
        return s


class NvmlSampler:
    """Readings of one timed region and their summary (nvml.c's sampler:
    a reading at start, every period, one at stop). `read` returns a sample
    dict; the parent calls tick() from its wait loop."""

    def __init__(self, read, period_s=NVML_PERIOD_S):
        self.read, self.period = read, period_s
        self.running, self.readings, self.next_t, self.t0 = False, [], 0.0, 0.0

    def _take(self, now):
        s = dict(self.read())
        s["t_s"] = now - self.t0
        self.readings.append(s)

    def start(self):
        self.t0 = time.monotonic()
        self.readings, self.running = [], True
        self._take(self.t0)
        self.next_t = self.t0 + self.period

    def tick(self):
        now = time.monotonic()
        if self.running and now >= self.next_t:
            self._take(now)
            # a slow read: do not try to catch up
            self.next_t = self.next_t + self.period if self.next_t + self.period > now else now + self.period

    def stop(self):
        if self.running:
            self._take(time.monotonic())
            self.running = False

    def timeout(self):
        return max(0.0, self.next_t - time.monotonic()) if self.running else None

    def summary(self):
        """The row's NVML fields (absent ones left out) — nvml_sampler_summary."""
        out = {}
        if not self.readings:
            return out
        p = [(r["t_s"], r["power_w"]) for r in self.readings if _finite(r.get("power_w"))]
        if p:
            out["power_avg_w"] = sum(v for _, v in p) / len(p)
            out["power_peak_w"] = max(v for _, v in p)
            if len(p) > 1:
                e = 0.0
                for (t0, v0), (t1, v1) in zip(p, p[1:]):
                    if t1 > t0:
                        e += 0.5 * (v0 + v1) * (t1 - t0)
                out["energy_j"] = e
        t = [r["temp_c"] for r in self.readings if _finite(r.get("temp_c"))]
        if t:
            out["temp_avg_c"] = sum(t) / len(t)
            out["temp_max_c"] = max(t)
        c = [r["sm_clock_mhz"] for r in self.readings if _finite(r.get("sm_clock_mhz"))]
        if c:
            out["sm_clock_avg_mhz"] = sum(c) / len(c)
            out["sm_clock_min_mhz"] = min(c)
        th = [r["throttle"] for r in self.readings if isinstance(r.get("throttle"), int) and r["throttle"] >= 0]
        if th:
            seen = 0
            for v in th:
                seen |= v
            out["throttle"] = throttle_names(seen & THROTTLE_SLOWDOWN_MASK)
        return out


# ---- JSON (the schema of train/bench/bench_json.h) --------------------------------

RESULT_KEYS = [  # ctrain's order; peak_mem_reserved_bytes is this script's own
    "engine", "mode", "model", "precision", "batch", "seq", "image_size", "layout", "steps",
    "warmup", "samples_per_s", "samples_per_s_min", "samples_per_s_max", "ms_per_step",
    "peak_mem_bytes", "peak_mem_reserved_bytes", "flops_per_sample", "peak_tflops", "mfu_peak",
    "ceiling_tflops", "mfu_measured_ceiling", "power_avg_w", "power_peak_w", "energy_j",
    "temp_avg_c", "temp_max_c", "sm_clock_avg_mhz", "sm_clock_min_mhz", "throttle",
    "samples_per_s_per_w", "final_loss", "error"]
STR_KEYS = {"engine", "mode", "model", "precision", "layout", "throttle", "error"}
INT_KEYS = {"batch", "seq", "image_size", "steps", "warmup"}
MEASURED_KEYS = set(RESULT_KEYS) - STR_KEYS - INT_KEYS - {"flops_per_sample"} | {"throttle"}
MACHINE_KEYS = ["gpu_name", "gpu_memory_bytes", "gpu_count", "driver", "cuda_runtime", "cudnn",
                "cublas", "cpu", "host", "ctrain_revision", "date", "torch", "torchvision",
                "transformers"]


def _finite(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def present(k, v):
    """The schema's rule: an unmeasured figure is absent — never 0 or null."""
    if v is None:
        return False
    if isinstance(v, str):
        return v != ""
    if k in INT_KEYS or k == "gpu_memory_bytes" or k == "gpu_count":
        return isinstance(v, int) and v >= 0
    return _finite(v)


def clean(d, keys):
    return {k: d[k] for k in keys if k in d and present(k, d[k])}


def write_doc(path, doc):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def validate_doc(doc):
    """Problems with a ctrain-bench/1 document, as strings ([] when fine)."""
    bad = []
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        return [f"schema is not {SCHEMA}"]
    if not isinstance(doc.get("machine"), dict):
        bad.append("machine is not an object")
    else:
        for k, v in doc["machine"].items():
            if not present(k, v):
                bad.append(f"machine.{k} = {v!r}: unknown figures must be absent")
    if not isinstance(doc.get("results"), list):
        return bad + ["results is not a list"]
    for i, r in enumerate(doc["results"]):
        where = f"results[{i}]"
        if not isinstance(r, dict):
            bad.append(f"{where} is not an object")
            continue
        for k, v in r.items():
            if k not in RESULT_KEYS:
                bad.append(f"{where}.{k}: not a field of {SCHEMA}")
            elif k in STR_KEYS and not (isinstance(v, str) and v):
                bad.append(f"{where}.{k} = {v!r}: want a non-empty string")
            elif k in INT_KEYS and not (isinstance(v, int) and not isinstance(v, bool) and v >= 0):
                bad.append(f"{where}.{k} = {v!r}: want a whole number >= 0")
            elif k not in STR_KEYS and k not in INT_KEYS and not _finite(v):
                bad.append(f"{where}.{k} = {v!r}: want a finite number")
        for k in ("engine", "model", "precision", "batch"):
            if k not in r:
                bad.append(f"{where}: {k} missing")
        if "error" in r:
            extra = sorted(k for k in r if k in MEASURED_KEYS and k != "error")
            if extra:
                bad.append(f"{where}: an error row carries figures {extra}")
        elif "samples_per_s" in r:
            lo, mid, hi = r.get("samples_per_s_min"), r["samples_per_s"], r.get("samples_per_s_max")
            if not (mid > 0 and _finite(lo) and _finite(hi) and lo <= mid <= hi):
                bad.append(f"{where}: samples/s min {lo} median {mid} max {hi} out of order")
            for k, fk in (("mfu_peak", "peak_tflops"), ("mfu_measured_ceiling", "ceiling_tflops")):
                if k in r:
                    want = r.get("flops_per_sample", float("nan")) * mid / (r.get(fk, float("nan")) * 1e12)
                    if not abs(r[k] - want) <= 1e-9 * max(1.0, abs(want)):
                        bad.append(f"{where}.{k} = {r[k]} is not flops x samples/s / {fk} ({want})")
    for i, c in enumerate(doc.get("ceilings") or []):
        if not (isinstance(c, dict) and isinstance(c.get("name"), str) and _finite(c.get("tflops"))
                and c["tflops"] > 0):
            bad.append(f"ceilings[{i}] = {c!r}: want name, precision and tflops > 0")
    if "notes" in doc and not (isinstance(doc["notes"], list) and all(isinstance(n, str) for n in doc["notes"])):
        bad.append("notes is not a list of strings")
    return bad


# ---- Child processes: fork, a pipe of JSON lines, the output in a file -------

def emit(out, event, **fields):
    out.write(json.dumps(dict(event=event, **fields)) + "\n")
    out.flush()


def is_oom_text(t):
    """bench_child.c bench_text_is_oom, plus PyTorch's own wording."""
    t = t or ""
    return any(s in t for s in ("out of memory", "ALLOC_FAILED", "cudaErrorMemoryAllocation",
                                "OutOfMemoryError"))


def describe_exception(e):
    if is_oom_text(type(e).__name__) or is_oom_text(str(e)):
        return "out of memory"
    first = (str(e).strip().splitlines() or [""])[0]
    return f"{type(e).__name__}: {first}"[:250]


class ChildExit:
    def __init__(self):
        self.status, self.sig, self.timed_out, self.elapsed_s, self.output = None, None, False, 0.0, ""

    def reason(self, error_line=None):
        """bench_child.c bench_exit_reason."""
        if self.timed_out:
            return f"timed out after {self.elapsed_s:.0f} s"
        if error_line:      # what the child said went wrong (an exception, out of memory)
            return error_line
        if self.sig is not None:
            if self.sig == signal.SIGKILL:
                return "killed (signal 9): the system may have run out of host memory"
            return f"crashed: signal {self.sig} ({signal.strsignal(self.sig)})"
        if is_oom_text(self.output):
            return "out of memory"
        last = [ln for ln in self.output.splitlines() if ln.strip()]
        tail = f": {last[-1].strip()[:200]}" if last else ""
        return f"exited with status {self.status}{tail}"


def _child_prologue():
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:   # a killed parent takes its child along
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))   # PR_SET_PDEATHSIG
    except Exception:
        pass
    if os.getppid() == 1:
        os._exit(4)


def _child_body(target, arg, fd):
    """Run CHILDREN[target](out, arg) with JSON lines to fd; the exit code."""
    try:
        out = os.fdopen(fd, "w", buffering=1)
        CHILDREN[target](out, arg)
        out.flush()
        return 0
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 1
    except BaseException:
        traceback.print_exc()
        return 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            pass


def child_main(argv):
    """`torch_bench.py --child TARGET FD ARG_JSON`: a spawned child."""
    _child_prologue()
    return _child_body(argv[0], json.loads(argv[2]), int(argv[1]))


def run_child(target, arg, limit_s, on_line, on_tick=None, wait_hint=None, spawn=False):
    """Start a child running CHILDREN[target](out, arg): forked from this
    process, or with spawn a fresh interpreter (`--child`). Its stdout and
    stderr go to a temporary file, its JSON lines to the pipe `out`. Here
    call on_line(dict) for each line as it arrives and on_tick() at least
    every 250 ms (sooner when wait_hint() asks), until the child ends or runs
    past limit_s (then it is killed). Returns a ChildExit."""
    r, w = os.pipe()
    tmp = tempfile.TemporaryFile(prefix="torch-bench-")
    sys.stdout.flush()
    sys.stderr.flush()
    t0 = time.monotonic()
    proc, pid = None, None
    if spawn:
        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", target, str(w),
                                 json.dumps(arg)], stdin=subprocess.DEVNULL, stdout=tmp, stderr=tmp,
                                pass_fds=(w,), close_fds=True)
        pid = proc.pid
    else:
        pid = os.fork()
        if pid == 0:   # the child
            code = 1
            try:
                os.close(r)
                os.dup2(tmp.fileno(), 1)
                os.dup2(tmp.fileno(), 2)
                _child_prologue()
                code = _child_body(target, arg, w)
            finally:
                os._exit(code)
    os.close(w)
    ex = ChildExit()
    buf = b""
    try:
        while True:
            timeout = 0.25
            hint = wait_hint() if wait_hint else None
            if hint is not None:
                timeout = min(timeout, hint)
            ready, _, _ = select.select([r], [], [], timeout)
            if ready:
                chunk = os.read(r, 1 << 16)
                if not chunk:
                    break
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for ln in lines:
                    if not ln.strip():
                        continue
                    try:
                        obj = json.loads(ln)
                    except ValueError:
                        continue
                    if isinstance(obj, dict):
                        on_line(obj)
            if on_tick:
                on_tick()
            if limit_s and time.monotonic() - t0 > limit_s:
                os.kill(pid, signal.SIGKILL)
                ex.timed_out = True
                break
    except BaseException:
        os.kill(pid, signal.SIGKILL)
        proc.wait() if proc else os.waitpid(pid, 0)
        raise
    finally:
        os.close(r)
    if proc:
        rc = proc.wait()
        ex.status, ex.sig = (rc, None) if rc >= 0 else (None, -rc)
    else:
        _, st = os.waitpid(pid, 0)
        if os.WIFEXITED(st):
            ex.status = os.WEXITSTATUS(st)
        elif os.WIFSIGNALED(st):
            ex.sig = os.WTERMSIG(st)
    ex.elapsed_s = time.monotonic() - t0
    tmp.seek(0, os.SEEK_END)
    size = tmp.tell()
    tmp.seek(max(0, size - 4096))
    ex.output = tmp.read().decode(errors="replace")
    tmp.close()
    return ex


def cuda_driver_initialized():
    """True when this process has initialized the CUDA driver (cuInit): a
    forked child could then not use CUDA. libcuda not loaded: False."""
    try:
        lib = ctypes.CDLL("libcuda.so.1", mode=getattr(os, "RTLD_NOLOAD", 4) | os.RTLD_LAZY)
    except OSError:
        return False
    n = ctypes.c_int()
    return lib.cuDeviceGetCount(ctypes.byref(n)) != 3    # CUDA_ERROR_NOT_INITIALIZED


# ---- What the children run: PyTorch -----------------------------------------

def set_tf32(torch, on):
    """TF32 for matmul (cuBLAS) and cuDNN, on or off. The legacy switches
    (allow_tf32) when this PyTorch has them, else fp32_precision; one API
    only, since PyTorch refuses to mix them."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.backends.cuda.matmul.allow_tf32 = on
            torch.backends.cudnn.allow_tf32 = on
        return "allow_tf32"
    except Exception:
        torch.backends.cuda.matmul.fp32_precision = "tf32" if on else "ieee"
        torch.backends.cudnn.fp32_precision = "tf32" if on else "ieee"
        return "fp32_precision"


def tf32_state(torch):
    """What the TF32 switches say now, for the notes."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return (f"matmul allow_tf32={torch.backends.cuda.matmul.allow_tf32}, "
                    f"cudnn allow_tf32={torch.backends.cudnn.allow_tf32}")
    except Exception:
        try:
            return (f"matmul {torch.backends.cuda.matmul.fp32_precision}, "
                    f"cudnn {torch.backends.cudnn.fp32_precision}")
        except Exception as e:
            return f"unreadable ({type(e).__name__})"


def fmt_version(v, major_unit):
    return f"{v // major_unit}.{(v % major_unit) // 100}.{v % 100}"


def cublaslt_version():
    """cublasLtGetVersion of the cuBLASLt already loaded in this process."""
    for name in ("libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11"):
        try:
            lib = ctypes.CDLL(name, mode=getattr(os, "RTLD_NOLOAD", 4) | os.RTLD_LAZY)
        except OSError:
            continue
        f = getattr(lib, "cublasLtGetVersion", None)
        if f:
            f.restype = ctypes.c_size_t
            return fmt_version(int(f()), 10000)
    return ""


def torch_probe_child(out, a):
    import torch
    dev_id = a["device_id"]
    n = torch.cuda.device_count()
    if n == 0 or not torch.cuda.is_available():
        emit(out, "machine", cuda_devices=0, no_gpu_reason="no CUDA device visible to PyTorch")
        return
    if dev_id >= n:
        emit(out, "machine", cuda_devices=n, no_gpu_reason=f"cuda:{dev_id} does not exist ({n} devices)")
        return
    torch.cuda.set_device(dev_id)
    p = torch.cuda.get_device_properties(dev_id)
    m = {"gpu_name": torch.cuda.get_device_name(dev_id), "gpu_memory_bytes": int(p.total_memory),
         "gpu_count": n, "cuda_runtime": torch.version.cuda or ""}
    v = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    if v:
        m["cudnn"] = fmt_version(v, 10000 if v >= 90000 else 1000)
    keys = {"device_index": dev_id}
    vis = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if vis:   # NVML numbers every device; CUDA only the visible ones
        keys["device_index"] = int(vis[dev_id]) if dev_id < len(vis) and vis[dev_id].isdigit() else None
    uuid = getattr(p, "uuid", None)
    if uuid is not None:
        u = str(uuid)
        keys["uuid"] = u if u.startswith(("GPU-", "MIG-")) else "GPU-" + u
    if all(hasattr(p, k) for k in ("pci_domain_id", "pci_bus_id", "pci_device_id")):
        keys["pci_bus_id"] = f"{p.pci_domain_id:04x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0"
    emit(out, "machine", cuda_devices=n, **m, **keys)
    if a["ceilings"]:
        reps, warm = 10, 3
        g = torch.Generator(device="cuda").manual_seed(1)
        for prec, dt, size, tf32 in (("fp16", torch.float16, 8192, False), ("bf16", torch.bfloat16, 8192, False),
                                     ("fp32", torch.float32, 4096, False), ("tf32", torch.float32, 4096, True)):
            set_tf32(torch, tf32)
            x = (torch.rand(size, size, device="cuda", generator=g) * 2 - 1).to(dt)
            y = (torch.rand(size, size, device="cuda", generator=g) * 2 - 1).to(dt)
            c = torch.empty(size, size, device="cuda", dtype=dt)   # C in the input type, as ctrain
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(reps + 1)]
            for r in range(-warm, reps):
                if r == 0:
                    ev[0].record()
                torch.mm(x, y, out=c)
                if r >= 0:
                    ev[r + 1].record()
            ev[reps].synchronize()
            ms = statistics.median(ev[i].elapsed_time(ev[i + 1]) for i in range(reps))
            emit(out, "ceiling", name=f"matmul {prec} {size}^3", precision=prec,
                 tflops=2.0 * size ** 3 / (ms * 1e-3) / 1e12, ms=ms, reps=reps)
            del x, y, c
        set_tf32(torch, False)
    emit(out, "machine", cublas=cublaslt_version())


def build_resnet(torch, c, dev):
    import torch.nn.functional as F
    import torchvision
    depth = resnet_depth(c["model"])
    with torch.device(dev):   # parameters made and initialised on the GPU
        net = getattr(torchvision.models, f"resnet{depth}")(weights=None, num_classes=1000)
    fmt = torch.contiguous_format if c["layout"] == "nchw" else torch.channels_last
    net = net.to(dev).to(memory_format=fmt).train()

    class WithLoss(torch.nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, x, y):
            return F.cross_entropy(self.net(x), y)

    g = torch.Generator(device=dev).manual_seed(42)
    S, B = c["image_size"], c["batch"]
    x = torch.randn(B, 3, S, S, device=dev, generator=g).contiguous(memory_format=fmt)
    y = torch.randint(0, 1000, (B,), device=dev, generator=g)
    mod = WithLoss(net)
    opt, impl = make_optimizer(torch, "sgd", [{"params": list(net.parameters())}], lr=0.1, momentum=0.9,
                               weight_decay=1e-4)
    notes = [f"ResNets: torchvision resnet{depth}(num_classes=1000), "
             f"{'NCHW' if c['layout'] == 'nchw' else 'channels_last (NHWC)'}, cudnn.benchmark on; "
             f"SGD lr 0.1 momentum 0.9 weight decay 1e-4 on every parameter ({impl})"]
    return mod, (x, y), opt, notes


def build_bert(torch, c, dev):
    from transformers import BertConfig, BertForMaskedLM
    L, D, H, I = BERT_SIZES[c["model"]]
    cfg = BertConfig(vocab_size=BERT_VOCAB, hidden_size=D, num_hidden_layers=L, num_attention_heads=H,
                     intermediate_size=I, max_position_embeddings=512, type_vocab_size=2,
                     hidden_act="gelu", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                     layer_norm_eps=1e-12, initializer_range=0.02)
    with torch.device(dev):   # parameters made and initialised on the GPU (fast)
        try:
            model = BertForMaskedLM._from_config(cfg, attn_implementation="sdpa")
        except Exception:   # another transformers: its default (sdpa where supported)
            model = BertForMaskedLM(cfg)
    model = model.to(dev).train()
    attn = getattr(model.config, "_attn_implementation", None) or "default"
    if c["precision"] == "fp8":
        te_swap_linears(torch, model.bert.encoder)

    class WithLoss(torch.nn.Module):
        """transformers' stock forward: the head on every token (--mlm-head all)."""
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, ids, tt, labels):
            return self.m(input_ids=ids, token_type_ids=tt, labels=labels).loss

    class MaskedHead(torch.nn.Module):
        """The head on the labelled rows only (--mlm-head masked): the encoder's
        output rows at the labelled positions (a fixed index list: the synthetic
        labels never change, so no per-step host sync), then the same head and
        cross-entropy; loss and gradients equal the stock forward's."""
        def __init__(self, m, labels):
            super().__init__()
            self.m = m
            flat = labels.reshape(-1)
            self.register_buffer("rows", (flat != -100).nonzero().squeeze(1), persistent=False)
            self.register_buffer("target", flat[self.rows].clone(), persistent=False)

        def forward(self, ids, tt, labels):
            h = self.m.bert(input_ids=ids, token_type_ids=tt).last_hidden_state
            h = h.reshape(-1, h.shape[-1]).index_select(0, self.rows)
            logits = self.m.cls(h)
            return torch.nn.functional.cross_entropy(logits.float(), self.target)

    # ctrain's synthetic batch (data/mlm.c): [CLS] random ids [SEP], no padding;
    # round(15%) of the inner positions labelled, of those 80% -> [MASK], 10% random
    B, T = c["batch"], c["seq"]
    g = torch.Generator(device=dev).manual_seed(42)
    ids = torch.randint(104, BERT_VOCAB, (B, T), device=dev, generator=g)
    ids[:, 0], ids[:, -1] = 101, 102
    labels = torch.full((B, T), -100, device=dev, dtype=torch.long)
    inner = T - 2
    if inner > 0:
        k = min(inner, max(1, int(0.15 * inner + 0.5)))
        pos = torch.rand(B, inner, device=dev, generator=g).argsort(dim=1)[:, :k] + 1
        labels.scatter_(1, pos, ids.gather(1, pos))
        u = torch.rand(B, k, device=dev, generator=g)
        rnd = torch.randint(104, BERT_VOCAB, (B, k), device=dev, generator=g)
        new = torch.where(u < 0.8, torch.full_like(rnd, 103), torch.where(u < 0.9, rnd, ids.gather(1, pos)))
        ids.scatter_(1, pos, new)
    tt = torch.zeros_like(ids)
    decay = [p for _, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for _, p in model.named_parameters() if p.ndim < 2]
    opt, impl = make_optimizer(torch, "adamw", [{"params": decay, "weight_decay": 0.01},
                                                {"params": no_decay, "weight_decay": 0.0}],
                               lr=1e-4, betas=(0.9, 0.999), eps=1e-6)
    notes = [f"BERT: transformers BertForMaskedLM from a BertConfig (no download), dropout 0.1, "
             f"attention implementation {attn}, "
             f"{'MLM head on every position' if c.get('mlm_head') == 'all' else 'MLM head on the labelled rows only (gathered)'}"
             f", loss over the 15% labelled; AdamW lr 1e-4 betas (0.9, 0.999) eps 1e-6, weight decay 0.01 on weights and "
             f"embeddings, none on biases and LayerNorm ({impl})"]
    wrapped = WithLoss(model) if c.get("mlm_head") == "all" else MaskedHead(model, labels)
    return wrapped, (ids, tt, labels), opt, notes


def te_swap_linears(torch, module):
    """--precision fp8: every nn.Linear under module (BERT's encoder: query,
    key, value, attention output, the two FFN layers, as ctrain's fp8) becomes
    a Transformer Engine te.Linear with the same weights."""
    import transformer_engine.pytorch as te
    for name, child in list(module.named_children()):
        if isinstance(child, torch.nn.Linear):
            new = te.Linear(child.in_features, child.out_features, bias=child.bias is not None,
                            params_dtype=child.weight.dtype, device=child.weight.device)
            with torch.no_grad():
                new.weight.copy_(child.weight)
                if child.bias is not None:
                    new.bias.copy_(child.bias)
            setattr(module, name, new)
        else:
            te_swap_linears(torch, child)


def te_fp8_context():
    """te.fp8_autocast with ctrain's recipe (ops/fp8.h): delayed scaling, E4M3
    forward / E5M2 backward, amax history 16, the history's max, margin 0."""
    import transformer_engine.pytorch as te
    from transformer_engine.common.recipe import DelayedScaling, Format
    recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16, amax_compute_algo="max",
                            margin=0)
    return te.fp8_autocast(enabled=True, fp8_recipe=recipe)


def fp8_unsupported(model):
    """Why this PyTorch cannot train model in FP8 here ("" when it can)."""
    if not model.startswith("bert"):
        return f"not supported: {model} has no FP8 Linear layers (BERT's encoder has)"
    import importlib.util
    if importlib.util.find_spec("transformer_engine") is None:
        return ("not supported: Transformer Engine (transformer_engine) is not installed here; "
                "PyTorch has no FP8 training path without it")
    return ""


def make_optimizer(torch, kind, groups, **kw):
    cls = torch.optim.SGD if kind == "sgd" else torch.optim.AdamW
    for impl in ("fused", "foreach"):
        try:
            return cls(groups, **kw, **{impl: True}), f"torch.optim.{cls.__name__}({impl}=True)"
        except (TypeError, RuntimeError, ValueError):
            continue
    return cls(groups, **kw), f"torch.optim.{cls.__name__}"


def make_train_step(torch, fwd, inputs, opt, prec):
    """One training step as a closure returning the loss: autocast for fp16 /
    bf16, GradScaler for fp16, then the optimizer and zero_grad (also used by
    scripts/torch_ddp_bench.py, with fwd a DistributedDataParallel)."""
    amp = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp8": torch.bfloat16}.get(prec)
    scaler = torch.amp.GradScaler("cuda") if prec == "fp16" else None

    def step():
        with torch.autocast("cuda", dtype=amp) if amp is not None else contextlib.nullcontext(), \
                te_fp8_context() if prec == "fp8" else contextlib.nullcontext():
            loss = fwd(*inputs)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        opt.zero_grad(set_to_none=True)
        return loss
    return step


def torch_config_child(out, c):
    import torch
    emit(out, "progress", phase="build", step=0, of=0)
    dev = torch.device("cuda", c["device_id"])
    torch.cuda.set_device(dev)
    prec = c["precision"]
    api = set_tf32(torch, prec == "tf32")
    torch.backends.cudnn.benchmark = True
    # --deterministic: cuDNN's deterministic algorithms only, the rule
    # ctrain's convolution backward follows by default
    torch.backends.cudnn.deterministic = bool(c.get("deterministic"))
    torch.manual_seed(42)
    build = build_resnet if resnet_depth(c["model"]) else build_bert
    mod, inputs, opt, notes = build(torch, c, dev)
    fwd = mod
    if c["compile"]:
        fwd = torch.compile(mod, mode=c["compile_mode"]) if c["compile_mode"] else torch.compile(mod)
    step = make_train_step(torch, fwd, inputs, opt, prec)

    loss = None
    for i in range(c["warmup"]):
        loss = step()
        emit(out, "progress", phase="warmup", step=i + 1, of=c["warmup"])
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats(dev)
    cap = timed_cap(c)
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(cap + 1)]
    emit(out, "nvml", on=True)
    n, t0 = 0, time.monotonic()
    ev[0].record()
    while timed_more(c, n, time.monotonic() - t0):
        loss = step()
        n += 1
        ev[n].record()
        emit(out, "progress", phase="timed", step=n, of=c["steps"])
    ev[n].synchronize()
    emit(out, "nvml", on=False)
    if c.get("profile"):
        profile_steps(torch, step, c)
    t = sorted(ev[i].elapsed_time(ev[i + 1]) * 1e-3 for i in range(n))
    med = statistics.median(t)
    notes.append(f"precision {prec}: " + {
        "fp32": "TF32 off for matmul and cuDNN", "tf32": "TF32 on for matmul and cuDNN",
        "fp16": "torch.autocast float16 + torch.amp.GradScaler, TF32 off",
        "bf16": "torch.autocast bfloat16, TF32 off",
        "fp8": "torch.autocast bfloat16 and the encoder's Linear layers as Transformer Engine te.Linear "
               "under te.fp8_autocast (DelayedScaling HYBRID, amax history 16, max, margin 0), TF32 off"
        }[prec] + f" (set through {api}; read back: "
        + tf32_state(torch) + ")")
    emit(out, "result", steps=n, warmup=c["warmup"], samples_per_s=c["batch"] / med,
         samples_per_s_min=c["batch"] / t[-1], samples_per_s_max=c["batch"] / t[0], ms_per_step=med * 1e3,
         peak_mem_bytes=float(torch.cuda.max_memory_allocated(dev)),
         peak_mem_reserved_bytes=float(torch.cuda.max_memory_reserved(dev)),
         final_loss=float(loss.detach().float().item()), notes=notes)


def profile_steps(torch, step, c, steps=5):
    """--profile PREFIX: 5 more steps under torch.profiler (after the timed
    ones, so they change no figure); the GPU time of every kernel, summed
    over those steps, goes to PREFIX-<config>.txt, the counterpart of
    ctrain's CTRAIN_TIMELINE summary (train/bench/timeline.h)."""
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    tag = config_label(c).replace(" ", "_").replace("/", "-")
    path = f"{c['profile']}-{tag}.txt"
    try:
        table = prof.key_averages().table(sort_by="self_device_time_total", row_limit=60, max_name_column_width=90)
    except (AttributeError, KeyError):
        table = prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=60, max_name_column_width=90)
    with open(path, "w") as f:
        f.write(f"# {config_label(c)}: kernels over {steps} steps (torch.profiler)\n{table}\n")


def guarded(child):
    """Run a config child; an exception becomes an "error" line (OOM named)."""
    def run(out, arg):
        try:
            child(out, arg)
        except BaseException as e:
            emit(out, "error", error=describe_exception(e))
            traceback.print_exc()
            raise SystemExit(1)
    return run


class TorchBackend:
    name = "pytorch"
    probe, config = "probe", "config"

    def __init__(self, a, cfgs):
        self.a = a
        # Import the libraries once here, so that the forked children inherit
        # them, without initializing CUDA (a forked child could not use it):
        # PyTorch's NVML-based device check while importing.
        saved = os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK")
        os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
        try:
            import torch
        except ImportError as e:
            fail(f"cannot import torch ({e})", "install PyTorch (pip install torch torchvision transformers)")
        self.versions = {"torch": torch.__version__}
        libs = []
        if any(resnet_depth(c["model"]) for c in cfgs):
            libs.append(("torchvision", "torchvision.models"))
        if any(c["model"] in BERT_SIZES for c in cfgs):
            libs.append(("transformers", "transformers.models.bert.modeling_bert"))
        for lib, sub in libs:
            try:
                mod = __import__(lib)
                __import__(sub)
                self.versions[lib] = getattr(mod, "__version__", "")
            except Exception as e:   # the children will report it per config
                print(f"torch_bench: cannot import {sub} ({e})", file=sys.stderr)
        if saved is None:
            os.environ.pop("PYTORCH_NVML_BASED_CUDA_CHECK", None)
        else:
            os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = saved
        self.spawn = a.spawn or cuda_driver_initialized()
        if self.spawn and not a.spawn:
            print("torch_bench: importing the libraries initialized the CUDA driver in this process: every "
                  "config runs in a fresh interpreter instead of a fork (slower to start, measured the same)",
                  file=sys.stderr)
        self.engine = f"pytorch {torch.__version__}" + (" compile" if a.compile else "")
        self.mode = ("compile" + (f":{a.compile_mode}" if a.compile_mode else "")) if a.compile else "eager"

    def nvml(self):
        return Nvml()


# ---- The self-test's fakes (no torch, no GPU; every figure made up) ----------

class FakeNvml:
    """Readings that ramp; the temperature read always fails (absent, not 0)."""

    def __init__(self):
        self.ok, self.reason, self.i, self.log = True, "", 0, []

    def driver_version(self):
        return "000.00 (self-test)"

    def open(self, **kw):
        return "fake-handle"

    def sample(self, h):
        self.i += 1
        s = {"power_w": 300.0 + 10 * (self.i % 5), "temp_c": None, "sm_clock_mhz": 1980.0 - 15 * (self.i % 2),
             "throttle": 0x1 | (0x4 if self.i % 3 == 0 else 0)}
        self.log.append(s)
        return s


def fake_probe_child(out, a):
    emit(out, "machine", cuda_devices=1, gpu_name="NVIDIA H200", gpu_memory_bytes=150 * 1024 ** 3, gpu_count=1,
         cuda_runtime="0.0", cudnn="0.0.0", device_index=0)
    for prec, size, tf in (("fp16", 8192, 700.0), ("bf16", 8192, 710.0), ("fp32", 4096, 50.0), ("tf32", 4096, 350.0)):
        emit(out, "ceiling", name=f"matmul {prec} {size}^3", precision=prec, tflops=tf,
             ms=2.0 * size ** 3 / (tf * 1e12) * 1e3, reps=10)


def fake_config_child(out, c):
    what = c.get("fake", "measure")
    emit(out, "progress", phase="build", step=0, of=0)
    if what == "oom":
        raise RuntimeError("CUDA out of memory. Tried to allocate 9.00 GiB (self-test)")
    if what == "hang":
        time.sleep(60)
    if what == "crash":
        import resource
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))   # no core file
        os.kill(os.getpid(), signal.SIGSEGV)
    for i in range(c["warmup"]):
        emit(out, "progress", phase="warmup", step=i + 1, of=c["warmup"])
    emit(out, "nvml", on=True)
    t = [0.100, 0.110, 0.100, 0.120, 0.105]
    for i in range(len(t)):
        time.sleep(0.06)
        emit(out, "progress", phase="timed", step=i + 1, of=len(t))
    emit(out, "nvml", on=False)
    med = statistics.median(t)
    print("some library chatter on stdout: it goes to the child's file, not the table")
    emit(out, "result", steps=len(t), warmup=c["warmup"], samples_per_s=c["batch"] / med,
         samples_per_s_min=c["batch"] / max(t), samples_per_s_max=c["batch"] / min(t), ms_per_step=med * 1e3,
         peak_mem_bytes=float(c["batch"] * 2 ** 24), peak_mem_reserved_bytes=float(c["batch"] * 2 ** 25),
         final_loss=6.9, notes=["self-test: a fake child; every figure in this file is made up"])


class SelfTestBackend:
    name = "self-test"
    probe, config = "fake-probe", "fake-config"

    def __init__(self, a, spawn=False):
        self.a = a
        self.spawn = spawn
        self.versions = {"torch": "0.0 (self-test)"}
        self.engine = "self-test (fake figures, not PyTorch)"
        self.mode = "eager"
        self.fake_nvml = FakeNvml()

    def nvml(self):
        return self.fake_nvml


CHILDREN = {"probe": torch_probe_child, "config": guarded(torch_config_child),
            "fake-probe": fake_probe_child, "fake-config": guarded(fake_config_child)}


# ---- The parent's session ----------------------------------------------------

def fail(msg, hint=None):
    print(f"torch_bench: {msg}", file=sys.stderr)
    if hint:
        print(f"hint: {hint}", file=sys.stderr)
    sys.exit(1)


def read_cpu():
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return f"{line.split(':', 1)[1].strip()} ({os.cpu_count()} logical CPUs)"
    except OSError:
        pass
    return ""


def git_revision():
    try:
        r = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"], capture_output=True,
                           text=True, timeout=10)
        return r.stdout.strip() if r.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def fmt_time(s):
    s = int(s + 0.5)
    return f"{s // 3600}h{s // 60 % 60:02d}m{s % 60:02d}s" if s >= 3600 else (
        f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s")


def cell(v, fmt):
    return "-" if not _finite(v) else format(v, fmt)


def table_header():
    print(f"{'model':<11} {'prec':<4} {'batch':>5} {'seq':>4} {'samples/s':>9} {'(min .. max)':>19} "
          f"{'ms/step':>8} {'peak GiB':>8} {'MFU%':>5} {'ceil%':>5} {'power W':>7} {'samp/s/W':>8} "
          f"{'temp':>5} {'wall s':>6}")


def table_row(r, wall):
    seq = str(r["seq"]) if r.get("seq") else "-"
    head = f"{r['model']:<11} {r['precision']:<4} {r['batch']:>5} {seq:>4} "
    if r.get("error"):
        print(head + r["error"] + (f"  ({wall:.0f} s)" if _finite(wall) else ""), flush=True)
        return
    sps = r.get("samples_per_s")
    small = _finite(sps) and sps < 100
    mm = "-"
    if _finite(r.get("samples_per_s_min")):
        f = ".2f" if small else ".0f"
        mm = f"({r['samples_per_s_min']:{f}} .. {r['samples_per_s_max']:{f}})"
    gib = r["peak_mem_bytes"] / GIB if _finite(r.get("peak_mem_bytes")) else None
    eff = r.get("samples_per_s_per_w")
    print(f"{head}{cell(sps, '.2f' if small else '.1f'):>9} {mm:>19} {cell(r.get('ms_per_step'), '.2f'):>8} "
          f"{cell(gib, '.3f' if gib is not None and gib < 1 else '.2f'):>8} "
          f"{cell(100 * r['mfu_peak'] if 'mfu_peak' in r else None, '.1f'):>5} "
          f"{cell(100 * r['mfu_measured_ceiling'] if 'mfu_measured_ceiling' in r else None, '.1f'):>5} "
          f"{cell(r.get('power_avg_w'), '.0f'):>7} "
          f"{cell(eff, '.3f' if _finite(eff) and eff < 1 else '.2f'):>8} "
          f"{cell(r.get('temp_max_c'), '.0f'):>5} {cell(wall, '.0f'):>6}", flush=True)


class Session:
    def __init__(self, a, backend, command):
        self.a, self.b, self.command = a, backend, command
        self.tty = sys.stdout.isatty()
        self.t0 = time.monotonic()
        self.machine = {"cpu": read_cpu(), "host": socket.gethostname(), "ctrain_revision": git_revision(),
                        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
        self.machine.update(backend.versions)
        self.ceilings, self.ceiling_ms, self.results, self.notes = [], [], [], []
        self.nvml, self.nvml_dev, self.nvml_reason = None, None, ""
        self.probe = {}

    def note(self, text):
        if text and text not in self.notes:
            self.notes.append(text)

    def doc(self):
        return {"schema": SCHEMA, "command": self.command, "machine": clean(self.machine, MACHINE_KEYS),
                "results": [clean(r, RESULT_KEYS) for r in self.results],
                "ceilings": [dict(c) for c in self.ceilings], "notes": list(self.notes)}

    def write_json(self):
        if not self.a.json:
            return
        try:
            write_doc(self.a.json, self.doc())
        except OSError as e:
            print(f"torch_bench: cannot write {self.a.json}: {e.strerror}\n"
                  "hint: check that the folder exists and is writable", file=sys.stderr)

    # -- the probe
    def run_probe(self):
        if self.tty:
            print("torch_bench: probing the machine and measuring the matmul ceilings ...", end="", flush=True)

        def on_line(o):
            ev = o.pop("event", None)
            if ev == "machine":
                self.probe.update(o)
                for k in MACHINE_KEYS:
                    if k in o and present(k, o[k]):
                        self.machine[k] = o[k]
            elif ev == "ceiling" and _finite(o.get("tflops")):
                self.ceilings.append({"name": o.get("name"), "precision": o.get("precision"),
                                      "tflops": o["tflops"]})
                self.ceiling_ms.append(o.get("ms"))
        ex = run_child(self.b.probe, {"device_id": self.a.device_id, "ceilings": True}, PROBE_LIMIT_S, on_line,
                       spawn=self.b.spawn)
        if self.tty:
            print("\r\033[K", end="", flush=True)
        if ex.status != 0:
            print(f"torch_bench: the machine probe failed ({ex.reason()}); continuing with what it reported",
                  file=sys.stderr)
        if not self.probe.get("cuda_devices"):
            fail(f"no GPU to measure on ({self.probe.get('no_gpu_reason') or ex.reason()})",
                 "torch_bench runs the GPU suite; --dry-run lists it without a GPU")
        nv = self.b.nvml()
        if nv.ok:
            self.nvml_dev = nv.open(uuid=self.probe.get("uuid"), pci_bus_id=self.probe.get("pci_bus_id"),
                                    index=self.probe.get("device_index"))
            drv = nv.driver_version()
            if drv:
                self.machine["driver"] = drv
        self.nvml = nv if nv.ok and self.nvml_dev is not None else None
        self.nvml_reason = "" if self.nvml else nv.reason

    # -- the header
    def header(self, cfgs):
        m = self.machine
        mem = m.get("gpu_memory_bytes", 0) / GIB
        print(f"torch_bench ({self.b.engine}) on {m.get('gpu_name', 'an unknown GPU')} ({mem:.1f} GiB), driver "
              f"{m.get('driver', 'unknown')}, CUDA {m.get('cuda_runtime', '?')}, cuDNN {m.get('cudnn', '?')}, "
              f"cuBLASLt {m.get('cublas', '?')}" + (f", ctrain {m['ctrain_revision']}" if m.get("ctrain_revision") else ""))
        how = (f"torch.compile (mode {self.a.compile_mode or 'default'}; compiled during warm-up)" if self.a.compile
               else "eager")
        print(f"settings: synthetic data on the device; {how}; ResNets {'NCHW' if self.a.nchw else 'channels_last (NHWC)'}"
              "; fused optimizers; cudnn.benchmark on; one process per config ("
              + ("a fresh interpreter" if self.b.spawn else "forked") + ")")
        if self.nvml:
            print("NVML: power, temperature and SM clock sampled every 50 ms over the timed steps "
                  "(ctypes, from the parent process)")
        else:
            print(f"NVML: not available ({self.nvml_reason or 'unknown reason'}): power, temperature and "
                  "clocks not measured")
        if not load_peaks():
            print(f"peaks: no table at {os.path.join(ROOT, 'train', 'bench', 'peaks.c')} (run the script from its "
                  "ctrain checkout): MFU% is absent, ceil% (over the measured matmul) remains")
        elif peak_tflops(m.get("gpu_name"), "bf16") is None:
            print(f"peaks: '{m.get('gpu_name')}' is not in the peak table (train/bench/peaks.c): MFU% is absent, "
                  "ceil% (over the measured matmul) remains")
        if cfgs:
            c = cfgs[0]
            print(f"method: {c['warmup']} warm-up step{'s' * (c['warmup'] != 1)}, then the median of "
                  f"{c['steps']} timed step{'s' * (c['steps'] != 1)}, more until {c['min_time_s']:.0f} s have "
                  f"passed (NVML averages power over ~1 s); timing stops after {c['time_limit_s']:.0f} s once "
                  f"{min(c['min_steps'], c['steps'])} are done; each step between two CUDA events")
        if self.ceilings:
            parts = [f"{c['name'][7:]} {c['tflops']:.1f} TFLOP/s ({ms:.3f} ms)" if _finite(ms)
                     else f"{c['name'][7:]} {c['tflops']:.1f} TFLOP/s" for c, ms in zip(self.ceilings, self.ceiling_ms)]
            print("matmul ceilings (torch.mm, median of 10): " + ", ".join(parts))
        else:
            print("matmul ceilings: not measured (the probe failed)")
        sys.stdout.flush()

    # -- one config
    def run_config(self, c, prefix):
        label = config_label(c)
        row = {"engine": self.b.engine, "mode": self.b.mode, "model": c["model"], "precision": c["precision"],
               "batch": c["batch"], "seq": c["seq"] or None, "image_size": c["image_size"] or None,
               "layout": c["layout"], "warmup": c["warmup"]}
        st = {"phase": "", "step": 0, "of": 0, "result": None, "error": None, "t0": time.monotonic(), "drawn": 0.0}
        nv = self.nvml
        sampler = NvmlSampler(lambda: nv.sample(self.nvml_dev)) if nv else None

        def draw(force=False):
            now = time.monotonic()
            if not self.tty or (not force and now - st["drawn"] < 0.25):
                return
            st["drawn"] = now
            ph = st["phase"]
            what = {"build": "building the model", "warmup": f"warm-up {st['step']}/{st['of']}"}.get(ph, "starting")
            if ph == "timed":
                what = f"timed step {st['step']}" + (f"/{st['of']}" if st["step"] <= st["of"] else "")
            print(f"\r\033[K{prefix} {label}: {what}  {fmt_time(now - st['t0'])} (total {fmt_time(now - self.t0)})",
                  end="", flush=True)

        def on_line(o):
            ev = o.get("event")
            if ev == "progress":
                st["phase"], st["step"], st["of"] = o.get("phase", ""), o.get("step", 0), o.get("of", 0)
            elif ev == "nvml" and sampler:
                sampler.start() if o.get("on") else sampler.stop()
            elif ev == "result":
                st["result"] = o
            elif ev == "error":
                st["error"] = o.get("error")

        def on_tick():
            if sampler:
                sampler.tick()
            draw()

        why = fp8_unsupported(c["model"]) if c["precision"] == "fp8" else ""
        if why:   # an answer about this engine here, like out of memory: nothing runs
            row.pop("warmup")
            row["error"] = why
            return row, 0.0
        draw(True)
        ex = run_child(self.b.config, c, CONFIG_LIMIT_S, on_line, on_tick, sampler.timeout if sampler else None,
                       spawn=self.b.spawn)
        if sampler:
            sampler.stop()
        if self.tty:
            print("\r\033[K", end="", flush=True)
        res = st["result"]
        if res is None:
            row.pop("warmup")
            row["error"] = ex.reason(st["error"])
            return row, ex.elapsed_s
        if ex.status != 0:
            print(f"note: {label}: the process failed after measuring ({ex.reason(st['error'])}); its figures are kept",
                  file=sys.stderr)
        for n in res.pop("notes", []) or []:
            self.note(n)
        for k in ("steps", "warmup"):
            if isinstance(res.get(k), int):
                row[k] = res[k]
        for k in ("samples_per_s", "samples_per_s_min", "samples_per_s_max", "ms_per_step", "peak_mem_bytes",
                  "peak_mem_reserved_bytes", "final_loss"):
            if _finite(res.get(k)):
                row[k] = float(res[k])
        if sampler:
            row.update(sampler.summary())
        self.derive(row, c)
        return row, ex.elapsed_s

    def derive(self, row, c):
        """bench_session.c bench_row_derive."""
        sps = row.get("samples_per_s")
        if row.get("error") or not _finite(sps):
            return
        f = config_flops(c)
        if f and f > 0:
            row["flops_per_sample"] = f
        peak = peak_tflops(self.machine.get("gpu_name"), c["precision"])
        if peak and f:
            row["peak_tflops"] = peak
            row["mfu_peak"] = f * sps / (peak * 1e12)
        for ce in self.ceilings:
            if ce["precision"] == c["precision"]:
                row["ceiling_tflops"] = ce["tflops"]
        if f and _finite(row.get("ceiling_tflops")) and row["ceiling_tflops"] > 0:
            row["mfu_measured_ceiling"] = f * sps / (row["ceiling_tflops"] * 1e12)
        if _finite(row.get("power_avg_w")) and row["power_avg_w"] > 0:
            row["samples_per_s_per_w"] = sps / row["power_avg_w"]


def session_notes(s, backend):
    how = f"torch.compile (mode {s.a.compile_mode or 'default'})" if s.a.compile else "PyTorch eager"
    where = "process (a fresh interpreter)" if backend.spawn else "forked process"
    s.note(f"engine: {how}; each config in its own {where}; synthetic data on the device; warm-up, then "
           "each timed step between two CUDA events; median step")
    s.note("peak_mem_bytes: torch.cuda.max_memory_allocated() over the timed steps (reset after warm-up) — "
           "bytes in live tensors of the caching allocator, the counterpart of ctrain's pool high-water mark; "
           "peak_mem_reserved_bytes: max_memory_reserved()")
    s.note("power, temperature, SM clock: NVML (ctypes) every 50 ms over the timed steps, read by the parent "
           "process" if s.nvml else f"power, temperature, SM clock: not measured ({s.nvml_reason})")
    s.note("flops_per_sample: ctrain's formulas (models/resnet.c x 3, models/bert.c); peaks: train/bench/peaks.c; "
           "ceilings: torch.mm, C in the input type, median of 10")
    if backend.name == "self-test":
        s.note("SELF-TEST: fake children and fake NVML readings; every figure in this file is made up")


def run_suite(a, backend, cfgs, command):
    s = Session(a, backend, command)
    s.run_probe()
    s.header(cfgs)
    session_notes(s, backend)
    table_header()
    failed = 0
    try:
        for i, c in enumerate(cfgs):
            row, wall = s.run_config(c, f"[{i + 1}/{len(cfgs)}]")
            s.results.append(row)
            table_row(row, wall)
            failed += bool(row.get("error"))
            s.write_json()
    except KeyboardInterrupt:
        if s.tty:
            print("\r\033[K", end="")
        print(f"interrupted after {len(s.results)} of {len(cfgs)} configs")
        s.write_json()
        if a.json:
            print(f"wrote {a.json}")
        return 130, s
    for b in validate_doc(s.doc()):   # a bug of this script, if ever
        print(f"torch_bench: warning: the JSON breaks {SCHEMA}: {b}", file=sys.stderr)
    print(f"{len(cfgs)} config{'s' * (len(cfgs) != 1)} in {fmt_time(time.monotonic() - s.t0)}"
          + (f", {failed} with an error (the error column says which)" if failed else ""))
    if a.json:
        print(f"wrote {a.json}")
    return 0, s


def dry_run(a, cfgs, command):
    engine = "pytorch " + installed_version("torch") + (" compile" if a.compile else "")
    print(f"torch_bench --dry-run: {len(cfgs)} config{'s' * (len(cfgs) != 1)}, nothing is measured "
          f"(engine \"{engine}\")")
    print(f"{'config':<40} {'warmup':>6} {'steps':>6} {'GFLOP/sample':>16}")
    rows = []
    for c in cfgs:
        f = config_flops(c)
        print(f"{config_label(c):<40} {c['warmup']:>6} {c['steps']:>6} {f / 1e9:>16.4f}")
        rows.append({"engine": engine, "mode": "compile" if a.compile else "eager", "model": c["model"],
                     "precision": c["precision"], "batch": c["batch"], "seq": c["seq"] or None,
                     "image_size": c["image_size"] or None, "layout": c["layout"], "steps": c["steps"],
                     "warmup": c["warmup"], "flops_per_sample": f})
    doc = {"schema": SCHEMA, "command": command, "machine": {},
           "results": [clean(r, RESULT_KEYS) for r in rows], "ceilings": [],
           "notes": ["dry run: the configs torch_bench.py would run; nothing was measured"]}
    bad = validate_doc(doc)
    for b in bad:
        print(f"torch_bench: dry run: {b}", file=sys.stderr)
    if a.json:
        write_doc(a.json, doc)
        print(f"wrote {a.json}")
    return 1 if bad else 0


def installed_version(dist):
    try:
        from importlib.metadata import version
        return version(dist)
    except Exception:
        return "(not installed)"


# ---- --self-test --------------------------------------------------------------

def self_test(a, command):
    """The parent machinery end to end with fake children; checks what it wrote."""
    checks = [0, 0]

    def check(name, ok, detail=""):
        checks[0 if ok else 1] += 1
        if not ok:
            print(f"  FAIL {name}: {detail}")

    # pure functions first
    # ctrain's own figures (`ctrain bench --list`); tests/test_bench.c compares every config
    check("flops.resnet50", 3 * resnet_flops_per_image(50, 224) == 24535105536, "ResNet50 FLOPs changed")
    check("flops.bert", bert_train_flops_per_seq("bert-base", 128) == 69781257216,
          f"{bert_train_flops_per_seq('bert-base', 128)}")
    check("peaks.table", len(load_peaks()) >= 20, f"{len(load_peaks())} entries read from train/bench/peaks.c")
    check("peaks.h200", peak_tflops("NVIDIA H200", "bf16") == 989.4, str(peak_tflops("NVIDIA H200", "bf16")))
    check("peaks.gh200", peak_entry("NVIDIA GH200 480GB")[0] == "GH200", "GH200 matched another rule")
    check("peaks.a100_tf32", peak_tflops("NVIDIA A100-SXM4-80GB", "tf32") == 156.0, "")
    check("peaks.v100_tf32_is_fp32", peak_tflops("Tesla V100-SXM2-16GB", "tf32") == 15.7, "")
    check("peaks.unknown", peak_tflops("NVIDIA Imaginary 9000", "bf16") is None, "")
    check("peaks.3090ti", peak_entry("NVIDIA GeForce RTX 3090 Ti") is None, "the 3090 rule took a 3090 Ti")
    nv = Nvml("/nonexistent/libnvidia-ml.so.1")
    check("nvml.missing", not nv.ok and "cannot load" in nv.reason and nv.sample(None)["power_w"] is None,
          nv.reason)
    check("throttle.names", throttle_names(0x5) == "gpu_idle,sw_power_cap" and throttle_names(0) == "none", "")
    smp = NvmlSampler(lambda: {"power_w": None, "temp_c": None, "sm_clock_mhz": None, "throttle": None})
    smp.start()
    smp.stop()
    check("sampler.nothing_read", smp.summary() == {}, str(smp.summary()))
    import importlib.util
    te = importlib.util.find_spec("transformer_engine") is not None
    why = fp8_unsupported("bert-large")
    check("fp8.resnet_refused", fp8_unsupported("resnet50").startswith("not supported: resnet50 has no FP8"),
          fp8_unsupported("resnet50"))
    check("fp8.bert_needs_te", why == "" if te else why.startswith("not supported: Transformer Engine"), why)

    # the suite: the quick one, with one OOM and one crashing config
    backend = SelfTestBackend(a)
    cfgs = cfgs_for_self_test(a)
    rc, s = run_suite(a, backend, cfgs, command)
    check("suite.rc", rc == 0, f"rc {rc}")
    doc = s.doc()
    if a.json:
        with open(a.json, encoding="utf-8") as f:
            doc = json.load(f)
    bad = validate_doc(doc)
    check("schema", not bad, "; ".join(bad[:5]))
    res = doc["results"]
    check("rows", len(res) == len(cfgs), f"{len(res)} rows for {len(cfgs)} configs")
    byfake = {}
    for c, r in zip(cfgs, res):
        byfake.setdefault(c.get("fake", "measure"), (c, r))   # the first of each kind
    oom, crash = byfake.get("oom", ({}, {}))[1], byfake.get("crash", ({}, {}))[1]
    okc, ok = byfake.get("measure", ({}, {}))
    check("oom.row", oom.get("error") == "out of memory" and "samples_per_s" not in oom and "warmup" not in oom,
          str(oom))
    check("crash.row", str(crash.get("error", "")).startswith("crashed: signal 11"), str(crash.get("error")))
    check("measured.sps", abs(ok.get("samples_per_s", 0) - ok.get("batch", 0) / 0.105) < 1e-6, str(ok))
    check("measured.minmax", abs(ok.get("samples_per_s_min", 0) - ok.get("batch", 0) / 0.12) < 1e-6
          and abs(ok.get("samples_per_s_max", 0) - ok.get("batch", 0) / 0.1) < 1e-6, "")
    check("measured.mfu", abs(ok.get("mfu_peak", 0) - ok.get("flops_per_sample", 0) * ok.get("samples_per_s", 0)
                              / (989.4e12 if ok.get("precision") in ("bf16", "fp16") else 494.7e12)) < 1e-12, "")
    check("measured.engine", ok.get("engine", "").startswith("self-test"), ok.get("engine", ""))
    check("measured.power", 300 <= ok.get("power_avg_w", 0) <= 340 and ok.get("power_peak_w", 0) <= 340
          and ok.get("energy_j", 0) > 0, str({k: ok.get(k) for k in ("power_avg_w", "power_peak_w", "energy_j")}))
    check("measured.per_watt", abs(ok.get("samples_per_s_per_w", 0) - ok.get("samples_per_s", 0)
                                   / ok.get("power_avg_w", 1)) < 1e-9, "")
    check("measured.temp_absent", "temp_avg_c" not in ok and "temp_max_c" not in ok,
          "a temperature that was never read is in the row")
    check("measured.throttle", ok.get("throttle") in ("sw_power_cap", "none"), str(ok.get("throttle")))
    check("measured.clock", 1965 <= ok.get("sm_clock_min_mhz", 0) <= ok.get("sm_clock_avg_mhz", 0) <= 1980, "")
    check("measured.flops", okc and ok.get("flops_per_sample") == config_flops(okc), "")
    check("measured.layout", ok.get("layout") == "nhwc" and ok.get("image_size") == 224 and "seq" not in ok, str(ok))
    check("machine", doc["machine"].get("gpu_name") == "NVIDIA H200" and "driver" in doc["machine"], str(doc["machine"]))
    check("ceilings", len(doc.get("ceilings", [])) == 4, str(doc.get("ceilings")))
    check("notes.fake", any("SELF-TEST" in n for n in doc.get("notes", [])), "the file does not say it is fake")

    # a spawned child (fresh interpreter), and the watchdog
    got = []
    ex = run_child("fake-probe", {}, 60, got.append, spawn=True)
    check("spawn.child", ex.status == 0 and any(o.get("event") == "ceiling" for o in got), ex.reason())
    c = dict(cfgs[0], fake="hang")
    ex = run_child("fake-config", c, 1.0, lambda o: None)
    check("watchdog", ex.timed_out and ex.reason("ignored").startswith("timed out after"), ex.reason())
    ex = run_child("fake-config", dict(cfgs[0], fake="oom"), 60, got.append, spawn=True)
    check("spawn.oom", ex.status == 1 and ex.reason(got[-1].get("error")) == "out of memory", ex.reason())
    print(f"self-test: {checks[0]} passed, {checks[1]} failed")
    return 1 if checks[1] else 0


def cfgs_for_self_test(a):
    """The quick suite with tf32 ResNet50 bs 256 running out of memory and
    tf32 BERT-large crashing (fake children: no torch)."""
    q = argparse.Namespace(**vars(a))
    q.quick, q.models, q.precision, q.batch, q.seq = True, None, None, None, None
    q.steps, q.warmup = None, None
    cfgs = build_suite(q)
    for c in cfgs:
        if c["precision"] == "tf32" and c["model"] == "resnet50" and c["batch"] == 256:
            c["fake"] = "oom"
        elif c["precision"] == "tf32" and c["model"].startswith("bert"):
            c["fake"] = "crash"
    return cfgs


# ---- Options -------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="torch_bench.py", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="PyTorch's side of `ctrain bench`: the same suite, the same measurement, the same JSON "
                    "(ctrain-bench/1). Default suite: ResNet50 bs 32,64,256; BERT-base bs 32 seq 128; "
                    "BERT-large bs 24,32 seq 128,512 and bs 256 seq 128 (DLE's); each in fp32, tf32, fp16 and bf16.",
        epilog="The module docstring (head -75 scripts/torch_bench.py) says how it measures.")

    def lst(kind, lo=None, hi=None):
        def parse(v):
            items = [x for x in v.split(",") if x]
            if not items or len(items) > 16:
                raise argparse.ArgumentTypeError("want 1 to 16 comma-separated values")
            if kind is int:
                try:
                    out = [int(x) for x in items]
                except ValueError:
                    raise argparse.ArgumentTypeError(f"'{v}' is not a list of whole numbers")
                for x in out:
                    if not lo <= x <= hi:
                        raise argparse.ArgumentTypeError(f"{x} is not in {lo}..{hi}")
                return out
            return [x.lower() if kind == "prec" else x for x in items]
        return parse

    def bounded(lo, hi):
        def parse(v):
            try:
                x = int(v)
            except ValueError:
                raise argparse.ArgumentTypeError(f"'{v}' is not a whole number")
            if not lo <= x <= hi:
                raise argparse.ArgumentTypeError(f"{x} is not in {lo}..{hi}")
            return x
        return parse

    ap.add_argument("--models", type=lst(str), help="comma list: resnet18..152, bert-tiny..bert-large")
    ap.add_argument("--precision", type=lst("prec"), help="comma list of fp32, tf32, fp16, bf16, fp8 "
                    "(fp8: BERT through Transformer Engine, where it is installed)")
    ap.add_argument("--batch", type=lst(int, 1, 1 << 30), help="batch sizes (replace each model's defaults)")
    ap.add_argument("--seq", type=lst(int, 2, 512), help="BERT sequence lengths (replace the defaults)")
    ap.add_argument("--quick", action="store_true",
                    help="ResNet50 bs 64,256 and BERT-large bs 32 seq 128 in bf16 and tf32, 3 warm-up + 10 steps")
    ap.add_argument("--steps", type=bounded(1, 100000), help="timed steps per config (default 20; --quick 10)")
    ap.add_argument("--warmup", type=bounded(0, 100000), help="untimed steps first (default 5; --quick 3)")
    ap.add_argument("--time-limit", type=bounded(0, 86400), default=15,
                    help="stop timing a config after S seconds, once 5 steps are done (default 15)")
    ap.add_argument("--image-size", type=bounded(8, 4096), default=224, help="ResNet input side (default 224)")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model and its loss")
    ap.add_argument("--compile-mode", default=None, help="torch.compile mode (default, reduce-overhead, "
                    "max-autotune, ...); implies --compile")
    lay = ap.add_mutually_exclusive_group()
    lay.add_argument("--channels-last", dest="nchw", action="store_false",
                     help="ResNets in channels_last / NHWC (the default: PyTorch's fast path, ctrain's layout)")
    lay.add_argument("--nchw", dest="nchw", action="store_true", help="ResNets in NCHW")
    ap.add_argument("--deterministic", action="store_true",
                    help="cudnn.deterministic = True (ctrain's default rule for the convolution "
                         "backward; PyTorch's default lets cuDNN pick non-deterministic "
                         "algorithms)")
    ap.add_argument("--mlm-head", choices=["masked", "all"], default="masked",
                    help="BERT: the prediction head on the labelled rows only (default; what "
                         "ctrain, Google's and NVIDIA's BERT do: same loss and gradients) or "
                         "on every token (transformers' stock forward)")
    ap.add_argument("--device", default="cuda", help="cuda or cuda:N (default cuda = cuda:0)")
    ap.add_argument("--profile", metavar="PREFIX", help="after each config's timed steps, 5 steps under "
                    "torch.profiler; the kernel table goes to PREFIX-<config>.txt")
    ap.add_argument("--json", metavar="FILE", help="the results as JSON (schema ctrain-bench/1; ctrain report reads it)")
    ap.add_argument("--spawn", action="store_true", help="start every config in a fresh interpreter instead of a "
                    "fork (chosen by itself when importing initialized CUDA)")
    ap.add_argument("--dry-run", action="store_true", help="list the configs and write them, unmeasured (no torch needed)")
    ap.add_argument("--self-test", action="store_true", help="check this script without torch or a GPU (fake children)")
    ap.set_defaults(nchw=False)
    a = ap.parse_args(argv)
    for m in a.models or []:
        if not (resnet_depth(m) or m in BERT_SIZES):
            extra = " (mlp is ctrain's CPU-suite model)" if m == "mlp" else ""
            ap.error(f"--models: unknown model '{m}'{extra}; known: {KNOWN_MODELS}")
    for p in a.precision or []:
        if p not in PEAK_PRECS:
            ap.error(f"--precision: '{p}' is not fp32, tf32, fp16, bf16 or fp8")
    m = re.fullmatch(r"cuda(?::(\d+))?", a.device)
    if not m:
        ap.error(f"--device: '{a.device}' is not cuda or cuda:N")
    a.device_id = int(m.group(1) or 0)
    if a.compile_mode:
        a.compile = True
    if a.dry_run and a.self_test:
        ap.error("--dry-run and --self-test: choose one")
    return a


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child_main(argv[1:])
    a = parse_args(argv)
    command = "torch_bench.py " + " ".join(f"'{x}'" if " " in x else x for x in argv)
    if a.json:   # fail now, not after an hour of measuring
        existed = os.path.exists(a.json)
        try:
            open(a.json, "a").close()
        except OSError as e:
            fail(f"cannot write {a.json}: {e.strerror}", "check that the folder exists and is writable")
        if not existed:
            os.unlink(a.json)
    if a.self_test:
        return self_test(a, command)
    cfgs = build_suite(a)
    if a.dry_run:
        return dry_run(a, cfgs, command)
    rc, _ = run_suite(a, TorchBackend(a, cfgs), cfgs, command)
    return rc


if __name__ == "__main__":
    sys.exit(main())
