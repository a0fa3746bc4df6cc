"""report_read.py — the reading half of scripts/report.py: bench JSON files in,
one Column per card and engine out.

A file is a "ctrain-bench/1" document (machine, results, ceilings, notes;
train/bench/bench_json.h), or torch_bench.py's older JSON lines (one result a
line). What is not one of them raises NotBenchJSON with the cause; the
caller names the file and stops after checking every file.

A *column* is what the report shows as one column of its tables: one engine
on one card, from one file. ctrain's rows of a file are one column whatever
their mode: the mode string ("eager", "graph", "cpu", "graph dp-x2-bf16",
"graph recompute-all", "max-batch recompute-all", "soak";
train/bench/bench_config.c) is parsed into what it says (Mode), and a result
is filed by it: single-GPU throughput runs per config and execution mode,
data-parallel runs by their GPU count, --max-batch answers, soak summaries,
real-data rows. Another engine (PyTorch eager, PyTorch compile) is a column
per mode. A config is (model, precision, batch, seq, image size, layout,
recompute policy).

Labels: the card's short name ("NVIDIA H200" -> "H200"), "CPU" for a CPU run,
then the engine when it is not ctrain ("H200 PyTorch", "H200 PyTorch
compile"); --label FILE=NAME replaces it; two columns that would still share
a label get their file's name ("H200 (bench_new)"). Only the standard
library is used.
"""
import json
import os
import sys

GIB = 1024.0 ** 3
PREC_ORDER = {"fp32": 0, "tf32": 1, "fp16": 2, "bf16": 3}
EXEC_PREFERENCE = ("graph", "eager", "cpu")     # the row a ctrain column shows for a config


def _num(v):
    """A finite float, or None (absent, null, NaN, not a number)."""
    if isinstance(v, bool) or v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if f == f and f not in (float("inf"), float("-inf")) else None


def _whole(v):
    """A whole number (batch, seq, image size), or None ("12", 12.0: 12; 1.5: None)."""
    f = _num(v)
    return int(f) if f is not None and f == int(f) else None


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
    doc, why = _parse_json(text)
    if isinstance(doc, dict) and "results" in doc:
        machine = _expect(doc, "machine", dict, {})
        ceilings = _expect(doc, "ceilings", list, [])
        notes = [n for n in _expect(doc, "notes", list, []) if isinstance(n, str)]
        gpu = machine.get("gpu_name")
        if gpu is not None and not isinstance(gpu, str):
            raise NotBenchJSON(f'"machine" "gpu_name" is {_kind(gpu)}, not a string')
        return [(_check_record(r, f"result {i + 1}"), machine, ceilings, notes)
                for i, r in enumerate(_expect(doc, "results", list, [])) if isinstance(r, dict)]
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


# ---- What a result is ------------------------------------------------------

def is_real(r):
    """A real-data row: its "data" names a folder (absent: synthetic, older files)."""
    d = r.get("data")
    return bool(d) and d != "synthetic"


def measured(r):
    """The record has a throughput figure or says why it has none."""
    return r is not None and (_num(r.get("samples_per_s")) is not None or bool(r.get("error")))


def failed(r):
    return bool(r.get("error")) and _num(r.get("samples_per_s")) is None


class Mode:
    """What a result's "mode" string says: how the step ran ("graph", "eager",
    "cpu", PyTorch's "compile:max-autotune"), on how many GPUs (dp-xN) with
    which gradient reduce type, the recompute policy, and the bench mode
    ("run", "max-batch", "soak")."""

    def __init__(self, text, gpus_field=None):
        self.exec, self.gpus, self.reduce, self.recompute, self.kind = None, 1, None, None, "run"
        rest = []
        for t in (text or "").split():
            if t in ("eager", "graph", "cpu"):
                self.exec = t
            elif t.startswith("dp-x") and _whole(t[4:].split("-")[0]):
                self.gpus = _whole(t[4:].split("-")[0])
                self.reduce = t[4:].partition("-")[2] or None
            elif t == "recompute-all":
                self.recompute = "all"
            elif t.startswith("recompute-every:"):
                self.recompute = "every:" + t.partition(":")[2]
            elif t in ("max-batch", "soak"):
                self.kind = t
            else:
                rest.append(t)
        if rest:
            self.exec = " ".join(([self.exec] if self.exec else []) + rest)
        g = _whole(gpus_field)
        if g and g > 1:
            self.gpus = g


def short_gpu(name):
    """"NVIDIA H200" -> "H200", "NVIDIA GeForce RTX 4090" -> "RTX 4090"."""
    for p in ("NVIDIA ", "GeForce ", "Tesla ", "Quadro "):
        if name.startswith(p):
            name = name[len(p):]
    return name.strip()


def config_key(r, ignore_layout, recompute=None):
    layout = (r.get("layout") or "").lower() or None
    if ignore_layout or layout == "nhwc":   # NHWC is ctrain's only layout: the default
        layout = None
    return (str(r.get("model", "?")), str(r.get("precision", "?")).lower(), _whole(r.get("batch")),
            _whole(r.get("seq")) or None, _whole(r.get("image_size")) or None, layout, recompute)


def config_sort(k):
    model, prec, batch, seq, img, layout, rec = k
    return (model, PREC_ORDER.get(prec, 9), prec, batch or 0, seq or 0, img or 0, layout or "",
            rec or "")


def config_label(k, batch=True):
    model, prec, b, seq, img, layout, rec = k
    s = f"{model} {prec}" + (f" bs{b}" if batch and b is not None else "")
    if seq:
        s += f" seq{seq}"
    if img and img != 224:
        s += f" {img}px"
    if layout:
        s += f" {layout}"
    if rec:
        s += f" recompute {rec}"
    return s


def without_batch(k):
    return k[:2] + (None,) + k[3:]


class Column:
    """One engine on one card from one file (module docstring)."""

    def __init__(self, file, engine, mode, device, machine, ceilings, notes):
        self.file, self.engine, self.mode, self.device = file, engine, mode, device
        self.machine, self.ceilings, self.notes = machine, ceilings, list(notes)
        self.is_ctrain = engine == "ctrain"
        self.runs = {}       # config -> {exec mode: record}   (one GPU, synthetic data)
        self.real = {}       # config -> [record]             (real-data rows, one per decoder)
        self.dp = {}         # (config, gpus, reduce) -> record
        self.maxb = {}       # config without batch -> {recompute policy: record}
        self.soak = []       # (config, record)
        self.card = ""       # the card's short name
        self.label = ""      # the column's header
        self.also = []       # files folded into this column (recompute-only runs)

    def result(self, k):
        """The record this column shows for config k: the CUDA-graph run when
        a config was measured both ways."""
        by = self.runs.get(k)
        if not by:
            return None
        for e in EXEC_PREFERENCE:
            if e in by:
                return by[e]
        return next(iter(by.values()))

    def records(self):
        """Every record of the column, whatever it measured."""
        for by in list(self.runs.values()) + list(self.maxb.values()):
            yield from by.values()
        yield from self.dp.values()
        yield from (r for _, r in self.soak)
        yield from (r for rs in self.real.values() for r in rs)

    def execs(self):
        return sorted({e for by in self.runs.values() for e in by if e})

    def peer_name(self):
        """PyTorch's engine and mode as a column says them: "PyTorch", "PyTorch compile"."""
        words = self.engine.split()
        if words and words[0].lower() == "pytorch":
            name = "PyTorch" + (" compile" if "compile" in words[1:] else "")
        else:
            name = self.engine
        head, _, tail = (self.mode or "").partition(":")
        if head and head != "eager" and head not in name.split():
            name += f" {head}"
        return name + (f" {tail}" if tail else "")


def _file_add(col, r, path, ignore_layout):
    m = Mode(r.get("mode"), r.get("gpus"))
    k = config_key(r, ignore_layout, m.recompute)
    if is_real(r):
        col.real.setdefault(k, []).append(r)
    elif m.kind == "max-batch":
        col.maxb.setdefault(without_batch(config_key(r, ignore_layout)), {})[m.recompute] = r
    elif m.kind == "soak":
        col.soak.append((k, r))
    elif m.gpus > 1:
        col.dp[(k, m.gpus, m.reduce)] = r
    else:
        by = col.runs.setdefault(k, {})
        old = by.get(m.exec)
        if old is not None:
            keep_old = measured(old) and not failed(old) and failed(r)
            print(f"report: {path}: {config_label(k)} appears twice for {col.engine}"
                  f"{' ' + m.exec if m.exec else ''}; the "
                  + ("earlier (measured) result is kept" if keep_old else "later result is used"),
                  file=sys.stderr)
            if keep_old:
                return
        by[m.exec] = r


def label_map(ap, items):
    """--label FILE=NAME options (repeatable) -> {FILE: NAME}, split at the first
    '=' (a NAME may hold one); anything else is argparse's error."""
    labels = {}
    for item in items:
        if "=" not in item:
            ap.error(f"--label wants FILE=NAME, got {item!r}")
        f, name = item.split("=", 1)
        labels[f] = name
    return labels


def load(paths, labels, ignore_layout):
    """-> [Column] in the order of the files; exits 1 (after naming every
    bad file) when a file is not a bench JSON."""
    columns, index, bad = [], {}, 0
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
            device = r.get("device") or machine.get("gpu_name") or ""
            mode = None if engine == "ctrain" else (r.get("mode") or None)
            key = (path, engine, mode, device)
            if key not in index:
                if not machine and device:
                    machine = {"gpu_name": device, "torch": r.get("torch")}
                index[key] = Column(path, engine, mode, device, machine, ceilings, notes)
                columns.append(index[key])
            _file_add(index[key], r, path, ignore_layout)
    if bad:
        sys.exit(1)
    _label(columns, labels)
    columns = _fold_recompute(columns)
    _label(columns, labels)
    return columns


def _same_machine(a, b):
    """Two columns measured on the same card of the same machine: the GPU
    name, the host and the driver agree (a field either file lacks is not a
    difference)."""
    for k in ("gpu_name", "host", "driver", "cpu"):
        x, y = a.machine.get(k), b.machine.get(k)
        if x and y and x != y:
            return False
    return a.card == b.card


def _fold_recompute(columns):
    """A ctrain file whose every run used a recompute policy (`ctrain bench
    --recompute all`) joins the column of another ctrain file of the same card
    and machine, whatever the order the files were given in, so the recompute
    table and chart can set each run beside the same config without
    recompute. Its runs keep their own keys (the policy is part of a config)
    and its --max-batch answers and notes come along; nothing is overwritten."""
    def only_rec(c):
        return c.is_ctrain and c.runs and all(k[6] for k in c.runs) and not (c.real or c.dp or c.soak)
    hosts = [c for c in columns if c.is_ctrain and any(not k[6] for k in c.runs)]
    out = []
    for c in columns:
        host = next((h for h in hosts if h is not c and h.engine == c.engine and _same_machine(h, c)),
                    None) if only_rec(c) else None
        if host is None:
            out.append(c)
            continue
        for k, by in c.runs.items():
            mine = host.runs.setdefault(k, {})
            for mode, r in by.items():
                mine.setdefault(mode, r)
        for k, by in c.maxb.items():
            mine = host.maxb.setdefault(k, {})
            for pol, r in by.items():
                mine.setdefault(pol, r)
        host.notes += [n for n in c.notes if n not in host.notes]
        host.also.append(c.file)
    return out


def _is_cpu(col):
    return any(Mode(r.get("mode")).exec == "cpu" for r in col.records())


def _stem(c):
    return os.path.splitext(os.path.basename(c.file))[0]


def _label(columns, labels):
    for c in columns:
        if c.device:
            c.card = short_gpu(c.device)
        elif _is_cpu(c):
            c.card = "CPU"
        else:
            c.card = c.engine if c.engine not in ("ctrain", "unknown") else _stem(c)
        given = labels.get(c.file) or labels.get(os.path.basename(c.file))
        if given:
            same_file = [t for t in columns if t.file == c.file]
            c.label = given + (f" {c.peer_name()}" if len(same_file) > 1 and not c.is_ctrain else "")
        elif c.is_ctrain or c.card == c.engine:
            c.label = c.card
        else:
            c.label = f"{c.card} {c.peer_name()}"
    groups = {}
    for c in columns:
        groups.setdefault(c.label, []).append(c)
    for label, group in groups.items():
        if len(group) < 2:
            continue
        stems = [_stem(c) for c in group]
        for i, c in enumerate(group):
            c.label = f"{label} ({stems[i]})" if stems.count(stems[i]) == 1 else f"{label} #{i + 1}"
