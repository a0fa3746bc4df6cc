#!/usr/bin/env python3
"""report.py — merge benchmark runs into one markdown report with plots.

  report.py A.json B.jsonl ... [--baseline ENGINE_OR_LABEL_OR_FILE]
            [--out report.md] [--plots DIR] [--label FILE=NAME] [--ignore-layout]

Inputs: files of schema "ctrain-bench/1" (machine, results, ceilings,
notes), written by `ctrain bench --json` and by scripts/torch_bench.py
--json (engine "pytorch <version>", "+ compile" when compiled), and the
older JSON-lines files of torch_bench.py (one result per line, same field
names). Any number of each: several cards, engines, modes (eager / compile /
graph).

A *source* is one engine + mode on one card (from one file). Results are
grouped by config (model, precision, batch, seq or image size, and layout
unless --ignore-layout); the table has, per source, samples/s, peak memory
and MFU, and for every source but the baseline its throughput ratio against
the baseline. The baseline is the first source unless --baseline names a file,
a source label or an engine ("pytorch" picks its first source, whatever
its version; an eager one first).

A file that is none of these (not UTF-8, not JSON, no results, a field of
the wrong type) is named with the cause, and the report stops with status 1
after checking every file: no traceback, no half-merged table.

A figure that was not measured is shown as "–", never as 0. MFU is the
source's own `mfu_peak` when it has one; otherwise (PyTorch) it is computed
from the config's FLOPs per sample and the peak TFLOP/s of the same card and
precision, both taken from a ctrain result, and marked with *.

Real data (ctrain bench --data DIR): a result whose "data" is a folder rather
than "synthetic" (or absent) is a real-data row. It stays out of the main
table; a "Real data" section has one block per source (engine, mode, card),
one row per config and decoder: the synthetic and the real samples/s of that
config (each the mean over its timed window, samples_per_s_mean, so a stall
counts; the median where a file has no mean), real / synthetic in %, the
data-wait %, the decoder's delivered img/s and its capacity, the CPU
fallbacks, and what decoded. Figures a feed did not report are "–".

Plots (PNG and SVG, with --plots DIR): throughput per config, throughput per
watt where power was measured, peak memory. matplotlib is imported only
then; without it the report is written without plots and says so.
Only the standard library is needed otherwise.
"""
import argparse
import json
import os
import sys

GIB = 1024.0 ** 3
PREC_ORDER = {"fp32": 0, "tf32": 1, "fp16": 2, "bf16": 3}


# ---- Reading ---------------------------------------------------------------

def _num(v):
    """A finite float, or None (absent, null, NaN, not a number)."""
    if isinstance(v, bool) or v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if f == f and f not in (float("inf"), float("-inf")) else None


class NotBenchJSON(Exception):
    """A file that is not what ctrain bench --json (or torch_bench.py) writes;
    the message says why."""


def _kind(v):
    """The JSON name of a value's type, for messages."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true/false"
    if isinstance(v, (int, float)):
        return "a number"
    if isinstance(v, str):
        return "a string"
    return "an array" if isinstance(v, list) else "an object"


# Fields the report uses as text (names, grouping keys); numbers go through _num.
TEXT_FIELDS = ("engine", "mode", "device", "model", "precision", "layout", "torch", "throttle",
               "data", "decode", "decoder")


def _check_record(r, where):
    for k in TEXT_FIELDS:
        v = r.get(k)
        if v is not None and not isinstance(v, str):
            raise NotBenchJSON(f'{where}: "{k}" is {_kind(v)}, not a string')
    return r


def _expect(doc, key, kind, default):
    v = doc.get(key)
    if v is None:
        return default
    if not isinstance(v, kind):
        raise NotBenchJSON(f'"{key}" is {_kind(v)}, not '
                           + ("an object" if kind is dict else "an array"))
    return v


def _parse_json(text):
    """-> (value, None) or (None, the reason it is not JSON)."""
    try:
        return json.loads(text), None
    except json.JSONDecodeError as e:
        return None, f"JSON error at line {e.lineno} column {e.colno}: {e.msg}"
    except RecursionError:
        return None, "JSON nested too deeply"
    except ValueError as e:    # e.g. an integer of more than 4300 digits
        return None, "JSON error: " + str(e).split(";")[0]


def _whole(v):
    """A whole number (batch, seq, image size), or None ("12", 12.0: 12; 1.5: None)."""
    f = _num(v)
    return int(f) if f is not None and f == int(f) else None


def read_file(path):
    """-> list of (record, machine, ceilings, notes) from one input file.
    Raises NotBenchJSON when the file is not a bench result file, OSError
    when it cannot be read."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise NotBenchJSON(f"not UTF-8 text: byte 0x{raw[e.start]:02x} at offset {e.start}")
    if not text.strip():
        raise NotBenchJSON("the file is empty")
    out = []
    doc, why = _parse_json(text)
    if isinstance(doc, dict) and "results" in doc:
        machine = _expect(doc, "machine", dict, {})
        ceilings = _expect(doc, "ceilings", list, [])
        notes = [n for n in _expect(doc, "notes", list, []) if isinstance(n, str)]
        gpu = machine.get("gpu_name")
        if gpu is not None and not isinstance(gpu, str):
            raise NotBenchJSON(f'"machine" "gpu_name" is {_kind(gpu)}, not a string')
        for i, r in enumerate(_expect(doc, "results", list, [])):
            if isinstance(r, dict):
                out.append((_check_record(r, f"result {i + 1}"), machine, ceilings, notes))
        return out
    if isinstance(doc, dict):
        doc = [doc]
    if isinstance(doc, list):
        recs = [_check_record(r, f"item {i + 1}") for i, r in enumerate(doc)
                if isinstance(r, dict) and "model" in r]
        if not recs:
            raise NotBenchJSON("JSON without results: neither a \"results\" array nor objects with "
                               "a \"model\"")
    elif doc is not None:
        raise NotBenchJSON(f"JSON {_kind(doc)}, not an object")
    else:   # JSON lines (torch_bench.py's older files), or not JSON at all
        recs, parsed, skipped = [], 0, []
        for n, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if not line:
                continue
            r, line_why = _parse_json(line)
            if line_why:
                skipped.append(f"report: {path}:{n}: not JSON ({line_why}); line skipped")
                continue
            parsed += 1
            if isinstance(r, dict) and "model" in r:   # skip non-result events
                recs.append(_check_record(r, f"line {n}"))
        if not parsed:   # no line is JSON: the file is not JSON lines either
            raise NotBenchJSON(why)
        for msg in skipped:
            print(msg, file=sys.stderr)
        if not recs:
            raise NotBenchJSON("JSON lines without results (no line has a \"model\")")
    return [(r, {}, [], []) for r in fill_in(recs)]


def fill_in(recs):
    """torch_bench.py's out-of-memory lines carry only engine, model,
    precision, batch and error. Take what is missing from the nearest line
    before it (else after it) of the same run: mode, device and torch from the
    same engine; seq, image_size and layout from the same engine and model
    (one torch_bench.py invocation has one mode, one device and one --seq)."""
    out = []
    for i, r in enumerate(recs):
        r = dict(r)
        order = list(range(i - 1, -1, -1)) + list(range(i + 1, len(recs)))
        for key, per_model in (("mode", False), ("device", False), ("torch", False),
                               ("seq", True), ("image_size", True), ("layout", True)):
            if r.get(key) is not None:
                continue
            for j in order:
                o = recs[j]
                if o.get("engine") != r.get("engine") or (per_model and o.get("model") != r.get("model")):
                    continue
                if o.get(key) is not None:
                    r[key] = o[key]
                    break
        out.append(r)
    return out


def is_real(r):
    """A real-data row: its "data" names a folder (absent: synthetic, older files)."""
    d = r.get("data")
    return bool(d) and d != "synthetic"


def short_device(name):
    for p in ("NVIDIA GeForce ", "NVIDIA ", "Tesla "):
        if name.startswith(p):
            return name[len(p):]
    return name


class Source:
    def __init__(self, file, engine, mode, device, machine, ceilings, notes=()):
        self.file, self.engine, self.mode, self.device = file, engine, mode, device
        self.machine, self.ceilings, self.notes = machine, ceilings, list(notes)
        self.results = {}          # config key -> record (synthetic data)
        self.real = {}             # config key -> [records] (real-data rows, one per decoder)
        self.label = ""


def config_key(r, ignore_layout):
    layout = (r.get("layout") or "").lower() or None
    if ignore_layout or layout == "nhwc":   # NHWC is ctrain's only layout: the default
        layout = None
    return (str(r.get("model", "?")), str(r.get("precision", "?")).lower(), _whole(r.get("batch")),
            _whole(r.get("seq")) or None, _whole(r.get("image_size")) or None, layout)


def config_sort(k):
    model, prec, batch, seq, img, layout = k
    return (model, PREC_ORDER.get(prec, 9), prec, batch or 0, seq or 0, img or 0, layout or "")


def config_label(k):
    model, prec, batch, seq, img, layout = k
    s = f"{model} {prec} bs{batch}"
    if seq:
        s += f" seq{seq}"
    if img and img != 224:
        s += f" {img}px"
    if layout:
        s += f" {layout}"
    return s


def load(paths, labels, ignore_layout):
    sources = []
    index = {}
    bad = 0
    for path in paths:
        try:
            rows = read_file(path)
        except OSError as e:
            sys.exit(f"report: cannot read {path}: {e.strerror}")
        except NotBenchJSON as e:   # said for every such file, then the report stops
            print(f"report: {path}: not a bench JSON ({e}): pass the JSON that ctrain bench "
                  "--json wrote", file=sys.stderr)
            bad += 1
            continue
        if not rows:
            print(f"report: {path}: no results found", file=sys.stderr)
        for r, machine, ceilings, notes in rows:
            engine = str(r.get("engine") or "unknown")
            mode = r.get("mode") or None
            device = r.get("device") or machine.get("gpu_name") or ""
            key = (path, engine, mode, device)
            if key not in index:
                if engine == "pytorch" and not machine:
                    machine = {"gpu_name": device, "torch": r.get("torch")}
                index[key] = Source(path, engine, mode, device, machine, ceilings, notes)
                sources.append(index[key])
            src = index[key]
            ck = config_key(r, ignore_layout)
            if is_real(r):
                src.real.setdefault(ck, []).append(r)
                continue
            old = src.results.get(ck)
            if old is not None:
                ok_old, ok_new = _num(old.get("samples_per_s")), _num(r.get("samples_per_s"))
                print(f"report: {path}: {config_label(ck)} appears twice for {src.engine}"
                      f"{' ' + mode if mode else ''}; the "
                      + ("earlier (measured) result is kept" if ok_old and not ok_new
                         else "later result is used"), file=sys.stderr)
                if ok_old and not ok_new:
                    continue
            src.results[ck] = r
    # Labels: engine (mode) [@ card when cards differ] [file when still ambiguous].
    devices = {s.device for s in sources}
    for s in sources:
        base = labels.get(s.file) or labels.get(os.path.basename(s.file))
        if not base:
            base = s.engine + mode_suffix(s.engine, s.mode)
            if len(devices) > 1 and s.device:
                base += f" @ {short_device(s.device)}"
        elif s.mode and sum(1 for t in sources if t.file == s.file) > 1:
            base += f" {s.mode}"
        s.label = base
    if bad:
        sys.exit(1)
    seen = {}
    for s in sources:
        seen.setdefault(s.label, []).append(s)
    for label, group in seen.items():
        if len(group) > 1:
            for s in group:
                s.label = f"{label} [{os.path.splitext(os.path.basename(s.file))[0]}]"
    return sources


def mode_suffix(engine, mode):
    """" eager", or nothing when the engine names the mode already
    ("pytorch 2.11.0 compile" + "compile"; "compile:max-autotune" -> " max-autotune")."""
    if not mode:
        return ""
    head, _, tail = mode.partition(":")
    if head in engine.split():
        return f" {tail}" if tail else ""
    return f" {mode}"


def pick_baseline(sources, want):
    if not want:
        return sources[0]
    for s in sources:   # a file
        if os.path.exists(want) and os.path.exists(s.file) and os.path.samefile(want, s.file):
            return s
    for s in sources:
        if os.path.basename(s.file) == want or s.label.lower() == want.lower():
            return s
    by_engine = [s for s in sources if s.engine.lower() == want.lower()
                 or (s.engine.split() or [""])[0].lower() == want.lower()]
    if by_engine:
        eager = [s for s in by_engine if (s.mode or "eager") == "eager"]
        return (eager or by_engine)[0]
    sys.exit(f"report: --baseline {want!r} matches no file, source or engine; sources: "
             + ", ".join(repr(s.label) for s in sources))


# ---- Derived figures -------------------------------------------------------

def flops_for(key, sources):
    """FLOPs per sample of a config: a model property (model, seq, image size)."""
    model, _, _, seq, img, _ = key
    for s in sources:
        for k, r in s.results.items():
            if k[0] == model and k[3] == seq and k[4] == img and _num(r.get("flops_per_sample")):
                return _num(r.get("flops_per_sample"))
    return None


def peak_for(device, precision, sources):
    for s in sources:
        if s.device != device:
            continue
        for k, r in s.results.items():
            if k[1] == precision and _num(r.get("peak_tflops")):
                return _num(r.get("peak_tflops"))
    return None


def mfu_of(src, key, r, sources):
    """(fraction, derived?) or (None, False)."""
    m = _num(r.get("mfu_peak"))
    if m is not None:
        return m, False
    sps = _num(r.get("samples_per_s"))
    flops = flops_for(key, sources)
    peak = peak_for(src.device, key[1], sources)
    if sps is None or flops is None or peak is None:
        return None, False
    return flops * sps / (peak * 1e12), True


def per_watt(r):
    v = _num(r.get("samples_per_s_per_w"))
    if v is None and _num(r.get("samples_per_s")) and _num(r.get("power_avg_w")):
        v = _num(r["samples_per_s"]) / _num(r["power_avg_w"])
    return v


# ---- Formatting ------------------------------------------------------------

DASH = "–"


def fmt_sps(v):
    if v is None:
        return DASH
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def fmt_gib(v):
    return DASH if v is None else f"{v / GIB:.1f}"


def fmt(v, spec, suffix=""):
    return DASH if v is None else format(v, spec) + suffix


def error_cell(r, notes):
    err = str(r.get("error"))
    if "out of memory" in err.lower():
        return "OOM"
    if err not in notes:
        notes.append(err)
    return f"error [{notes.index(err) + 1}]"


def md_table(header, rows, left):
    """The first `left` columns left-aligned (names), the rest right (figures)."""
    out = ["| " + " | ".join(header) + " |",
           "|" + "|".join("---" if i < left else "--:" for i in range(len(header))) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def build_report(sources, base, configs, plot_note, plot_files, out_dir, title):
    L = [f"# {title}", ""]
    L.append(f"Baseline for the ratios: **{base.label}**. Throughput is the median over the timed "
             "steps after warm-up; memory is the peak GiB the engine allocated; MFU is model FLOPs "
             "per sample × samples/s over the card's dense datasheet peak for that precision. "
             f"{DASH} = not measured.")
    L.append("")
    header = ["model", "precision", "batch", "seq / image"]
    for s in sources:
        header += [f"{s.label} samples/s", "GiB", "MFU"]
        if s is not base:
            header.append(f"× {base.label}")
    rows, notes, derived = [], [], False
    for k in configs:
        model, prec, batch, seq, img, layout = k
        row = [model + (f" ({layout})" if layout else ""), prec, DASH if batch is None else batch,
               seq or img or DASH]
        b = base.results.get(k)
        b_sps = _num(b.get("samples_per_s")) if b else None
        for s in sources:
            r = s.results.get(k)
            if r is None:
                row += [DASH, DASH, DASH]
            elif r.get("error") and _num(r.get("samples_per_s")) is None:
                row += [error_cell(r, notes), DASH, DASH]
            else:
                m, d = mfu_of(s, k, r, sources)
                derived |= d
                row += [fmt_sps(_num(r.get("samples_per_s"))), fmt_gib(_num(r.get("peak_mem_bytes"))),
                        DASH if m is None else f"{m * 100:.1f}%" + ("*" if d else "")]
            if s is not base:
                sps = _num(r.get("samples_per_s")) if r else None
                row.append(f"{sps / b_sps:.2f}×" if sps and b_sps else DASH)
        rows.append(row)
    L.append(md_table(header, rows, 4))
    L.append("")
    if derived:
        L.append("\\* MFU computed by this report from the FLOPs per sample and the peak TFLOP/s "
                 "that a ctrain result on the same card and precision reported.")
        L.append("")
    for i, e in enumerate(notes, 1):
        L.append(f"[{i}] {e}")
    if notes:
        L.append("")

    L += real_data_section(sources)

    # Details: everything else a result measured, one row per config and source.
    cols = [("ms/step", lambda s, k, r: fmt(_num(r.get("ms_per_step")), ".2f")),
            ("reserved GiB", lambda s, k, r: fmt_gib(_num(r.get("peak_mem_reserved_bytes")))),
            ("samples/s min–max", lambda s, k, r: (
                f"{fmt_sps(_num(r.get('samples_per_s_min')))}–{fmt_sps(_num(r.get('samples_per_s_max')))}"
                if _num(r.get("samples_per_s_min")) is not None else DASH)),
            ("MFU vs measured ceiling", lambda s, k, r: fmt(
                None if _num(r.get("mfu_measured_ceiling")) is None
                else _num(r.get("mfu_measured_ceiling")) * 100, ".1f", "%")),
            ("power avg / peak W", lambda s, k, r: (
                f"{_num(r.get('power_avg_w')):.0f} / {fmt(_num(r.get('power_peak_w')), '.0f')}"
                if _num(r.get("power_avg_w")) is not None else DASH)),
            ("samples/s/W", lambda s, k, r: fmt(per_watt(r), ".2f")),
            ("temp max °C", lambda s, k, r: fmt(_num(r.get("temp_max_c")), ".0f")),
            ("SM clock avg MHz", lambda s, k, r: fmt(_num(r.get("sm_clock_avg_mhz")), ".0f")),
            ("throttling", lambda s, k, r: r.get("throttle") or DASH),
            ("final loss", lambda s, k, r: fmt(_num(r.get("final_loss")), ".4g"))]
    drows = []
    for k in configs:
        for s in sources:
            r = s.results.get(k)
            if r is None or (r.get("error") and _num(r.get("samples_per_s")) is None):
                continue
            cells = [f(s, k, r) for _, f in cols]
            if any(c != DASH for c in cells):
                drows.append([config_label(k), s.label] + cells)
    keep = [i for i in range(len(cols)) if any(row[2 + i] != DASH for row in drows)]
    if drows and keep:
        L += ["## Details", ""]
        L.append(md_table(["config", "source"] + [cols[i][0] for i in keep],
                          [row[:2] + [row[2 + i] for i in keep] for row in drows], 2))
        L.append("")

    # Soak summaries.
    srows = []
    for k in configs:
        for s in sources:
            r = s.results.get(k)
            sk = r.get("soak") if r else None
            if not isinstance(sk, dict):
                continue
            thr = DASH if "throttling_seen" not in sk else (
                (sk.get("throttle") or "yes") if sk.get("throttling_seen") else "none")
            srows.append([config_label(k), s.label, fmt(_num(sk.get("duration_s")), ".0f"),
                          fmt(_num(sk.get("mem_fluctuation_pct")), ".2f", "%"),
                          fmt(_num(sk.get("throughput_drift_pct")), "+.2f", "%"), thr,
                          sk.get("nonfinite_loss", DASH), sk.get("cuda_error") or "none"])
    if srows:
        L += ["## Soak", ""]
        L.append(md_table(["config", "source", "duration s", "memory fluctuation",
                           "throughput drift", "throttling", "non-finite losses", "CUDA error"],
                          srows, 2))
        L.append("")

    # Ceilings measured in the runs.
    crows = [[s.label, c.get("name", "?"), fmt(_num(c.get("tflops")), ".1f")]
             for s in sources for c in s.ceilings if isinstance(c, dict)]
    if crows:
        L += ["## Measured ceilings", ""]
        L.append(md_table(["source", "what", "TFLOP/s"], crows, 2))
        L.append("")

    # Machines.
    mrows = []
    for s in sources:
        m = s.machine or {}
        mem = _num(m.get("gpu_memory_bytes"))
        mrows.append([s.label, m.get("gpu_name") or s.device or DASH,
                      DASH if mem is None else f"{mem / GIB:.0f}",
                      m.get("driver") or DASH, m.get("cuda_runtime") or DASH,
                      m.get("cudnn") or DASH, m.get("cublas") or DASH,
                      m.get("torch") or DASH, m.get("ctrain_revision") or DASH,
                      m.get("date") or DASH, os.path.basename(s.file)])
    L += ["## Machines", ""]
    L.append(md_table(["source", "GPU", "GiB", "driver", "CUDA", "cuDNN", "cuBLAS", "torch",
                       "ctrain revision", "date", "file"], mrows, 11))
    L.append("")

    # What each source says about how it measured (torch_bench.py's notes).
    noted = [s for s in sources if s.notes]
    if noted:
        L += ["## Notes", ""]
        for s in noted:
            L.append(f"**{s.label}**")
            L.append("")
            L += [f"- {n}" for n in s.notes]
            L.append("")

    if plot_note:
        L += [f"_{plot_note}_", ""]
    for name, path in plot_files:
        L += [f"![{name}]({os.path.relpath(path, out_dir)})", ""]
    return "\n".join(L)


def window_rate(r):
    """samples/s over the timed window (stalls count); the median where absent."""
    if r is None or (r.get("error") and _num(r.get("samples_per_s")) is None):
        return None
    v = _num(r.get("samples_per_s_mean"))
    return v if v is not None else _num(r.get("samples_per_s"))


def real_data_section(sources):
    """Markdown lines: one block per source with real-data rows (one row per
    config and decoder), then the errors they name; or nothing."""
    L, notes = [], []
    for s in sources:
        if not s.real:
            continue
        if not L:
            L += ["## Real data", "",
                  "Each config's synthetic row beside its real-data rows (`ctrain bench --data DIR`), "
                  "measured in the same run with the same warm-up and timed window. samples/s is the "
                  "mean over the timed window (all samples over its time: a data stall counts); real % "
                  "= real / synthetic; data wait = time the step waited for a batch over the window; "
                  "decode = images delivered per second of the window, capacity = what the decoder "
                  f"could sustain (images per busy second × its threads or engines). {DASH} = not "
                  "reported.", ""]
        where = short_device(s.device) if s.device else "CPU"
        folders = sorted({str(r.get("data")) for rs in s.real.values() for r in rs})
        L += [f"### {s.label}" + ("" if where in s.label else f" on {where}"), "",
              "data: " + ", ".join(f"`{f}`" for f in folders), ""]
        rows = []
        for k in sorted(s.real, key=config_sort):
            syn = window_rate(s.results.get(k))
            for r in s.real[k]:
                decode = str(r.get("decode") or DASH)
                if r.get("decoder"):
                    decode += f" → {r['decoder']}"
                if r.get("error") and _num(r.get("samples_per_s")) is None:
                    cell = error_cell(r, notes).replace("error [", "error [r")   # not the main table's [n]
                    rows.append([config_label(k), decode, fmt_sps(syn), cell]
                                + [DASH] * 5)
                    continue
                real = window_rate(r)
                wait = _num(r.get("data_wait_fraction"))
                rows.append([config_label(k), decode, fmt_sps(syn), fmt_sps(real),
                             f"{100 * real / syn:.1f}%" if real and syn else DASH,
                             DASH if wait is None else f"{100 * wait:.1f}%",
                             fmt_sps(_num(r.get("decode_images_per_s"))),
                             fmt_sps(_num(r.get("decode_capacity_images_per_s"))),
                             fmt(_num(r.get("cpu_fallback")), ".0f")])
        L.append(md_table(["config", "decode → decoder", "synthetic samples/s", "real samples/s",
                           "real %", "data wait", "decode img/s", "capacity img/s", "CPU fallbacks"],
                          rows, 2))
        L.append("")
    for i, e in enumerate(notes, 1):
        L.append(f"[r{i}] {e}")
    if notes:
        L.append("")
    return L


# ---- Plots -----------------------------------------------------------------

def make_plots(sources, configs, plot_dir):
    """-> (note or None, [(title, png path)])."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "Plots skipped: matplotlib is not installed (pip install matplotlib).", []
    os.makedirs(plot_dir, exist_ok=True)
    made = []

    def grouped(name, title, ylabel, value, label_fmt, mark_errors=False):
        # Only configs and sources with at least one measured value; an absent
        # value gets no bar (never a zero-height one).
        keys = [k for k in configs
                if any(s.results.get(k) and value(s.results[k]) is not None for s in sources)]
        series = [s for s in sources if any(s.results.get(k) and value(s.results[k]) is not None
                                            for k in keys)]
        if not keys or not series:
            return
        n = len(series)
        width = 0.8 / n
        fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(keys) * max(1, n) / 2 + 3), 4.8))
        for i, s in enumerate(series):
            xs, ys, errs = [], [], []
            for j, k in enumerate(keys):
                r = s.results.get(k)
                v = value(r) if r else None
                x = j + (i - (n - 1) / 2) * width
                if v is not None:
                    xs.append(x)
                    ys.append(v)
                elif mark_errors and r and r.get("error"):
                    errs.append((x, "OOM" if "out of memory" in str(r["error"]).lower() else "error"))
            bars = ax.bar(xs, ys, width, label=s.label)
            ax.bar_label(bars, labels=[label_fmt(v) for v in ys], fontsize=7, padding=1)
            for x, text in errs:
                ax.text(x, 0, text, rotation=90, ha="center", va="bottom", fontsize=7, color="0.4")
        ax.set_xticks(range(len(keys)))
        ax.set_xticklabels([config_label(k) for k in keys], rotation=30, ha="right", fontsize=8)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
        ax.margins(y=0.1)
        ax.legend(fontsize=8)
        fig.tight_layout()
        png = os.path.join(plot_dir, name + ".png")
        fig.savefig(png, dpi=150)
        fig.savefig(os.path.join(plot_dir, name + ".svg"))
        plt.close(fig)
        made.append((title, png))

    grouped("throughput", "Training throughput (median samples/s)", "samples/s",
            lambda r: _num(r.get("samples_per_s")), fmt_sps, mark_errors=True)
    grouped("throughput_per_watt", "Throughput per watt (average board power)", "samples/s per W",
            per_watt, lambda v: f"{v:.2f}")
    grouped("peak_memory", "Peak memory", "GiB",
            lambda r: None if _num(r.get("peak_mem_bytes")) is None
            else _num(r.get("peak_mem_bytes")) / GIB, lambda v: f"{v:.1f}")
    return None, made


# ---- Main ------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Merge ctrain bench JSON and torch_bench.py JSON lines into one markdown "
                    "table (ratios against a baseline) and plots.",
        epilog="A figure that was not measured is shown as '–', never as 0.")
    ap.add_argument("files", nargs="+", help="ctrain bench --json files, torch_bench.py .jsonl files")
    ap.add_argument("--baseline", help="file, source label or engine the ratios are against "
                    "(default: the first source)")
    ap.add_argument("--out", help="markdown file to write (default: stdout)")
    ap.add_argument("--plots", metavar="DIR", help="write PNG and SVG plots into DIR")
    ap.add_argument("--label", action="append", default=[], metavar="FILE=NAME",
                    help="name the source(s) of FILE in the report (repeatable)")
    ap.add_argument("--ignore-layout", action="store_true",
                    help="put NCHW and NHWC results of a config in the same row")
    ap.add_argument("--title", default="ctrain benchmark report")
    a = ap.parse_args(argv)

    labels = {}
    for item in a.label:
        if "=" not in item:
            ap.error(f"--label wants FILE=NAME, got {item!r}")
        f, name = item.split("=", 1)
        labels[f] = name
    sources = load(a.files, labels, a.ignore_layout)
    if not sources:
        sys.exit("report: no results in " + ", ".join(a.files))
    base = pick_baseline(sources, a.baseline)
    configs = sorted({k for s in sources for k in s.results}, key=config_sort)

    out_dir = os.path.dirname(os.path.abspath(a.out)) if a.out else os.getcwd()
    note, plots = None, []
    if a.plots:
        try:
            note, plots = make_plots(sources, configs, a.plots)
        except OSError as e:
            sys.exit(f"report: cannot write the plots into {a.plots}: {e.strerror}")
        if note:
            print(f"report: {note}", file=sys.stderr)
    text = build_report(sources, base, configs, note, plots, out_dir, a.title)
    if a.out:
        try:
            if os.path.dirname(a.out):
                os.makedirs(os.path.dirname(a.out), exist_ok=True)
            with open(a.out, "w", encoding="utf-8") as f:
                f.write(text + "\n")
        except OSError as e:
            sys.exit(f"report: cannot write {a.out}: {e.strerror}")
        print(f"report: wrote {a.out} ({len(configs)} configs, {len(sources)} sources"
              + (f", {len(plots)} plots in {a.plots}" if plots else "") + ")", file=sys.stderr)
    else:
        sys.stdout.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
