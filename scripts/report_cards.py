"""report_cards.py — the "Cards" section of scripts/report.py: one caption per
column of the tables, saying which card and software measured it, and the
torch_bench.py notes (how PyTorch was measured).

A caption's first line is what makes two cards' figures comparable: the GPU
and its memory, the engine and the modes it ran, driver, CUDA runtime,
cuDNN, the board power limit, ECC and the date. Below it, what the machine
record reports about the machine's state when the run started: CPU and
host, persistence mode, the PCIe link (under load where measured, and the
card's maximum when the link runs below it), active NVLink links, the load
average at start and end, other processes on the GPU, its notes and
warnings.
Every machine field may be absent or null in a file (older files, another
engine's): that reads "not reported" ("–" on the first line, left out
below it), never an error.
"""
import os
import re

from report_fmt import DASH
from report_read import GIB, _num, _whole


def _text(m, key):
    v = m.get(key)
    return v if isinstance(v, str) and v else None


def _onoff(m, key):
    v = m.get(key)
    return ("on" if v else "off") if isinstance(v, bool) else None


def _date(s):
    hit = re.match(r"(\d{4}-\d\d-\d\d)T(\d\d:\d\d)", s or "")
    return f"{hit.group(1)} {hit.group(2)} UTC" if hit else (s or DASH)


def _load(v):
    """The 1-minute load average of a [1, 5, 15] array, or None."""
    return _num(v[0]) if isinstance(v, list) and v else None


def _head(c):
    m = c.machine or {}
    gpu = _text(m, "gpu_name") or c.device or (_text(m, "cpu") and "CPU") or DASH
    mem = _num(m.get("gpu_memory_bytes"))
    count = _whole(m.get("gpu_count"))
    what = gpu + (f" {mem / GIB:.0f} GiB" if mem and _text(m, "gpu_name") else "") + \
        (f", {count} on the machine" if count and count > 1 else "")
    if c.is_ctrain:
        rev = _text(m, "ctrain_revision")
        engine = "ctrain" + (f" {rev}" if rev else "") + \
            (f" ({', '.join(c.execs())})" if c.execs() else "")
    else:
        engine = c.engine + (f" ({c.mode})" if c.mode and c.mode not in c.engine.split() else "")
    watts, default = _num(m.get("power_limit_w")), _num(m.get("power_limit_default_w"))
    parts = [what, engine, f"driver {_text(m, 'driver') or DASH}",
             f"CUDA {_text(m, 'cuda_runtime') or DASH}", f"cuDNN {_text(m, 'cudnn') or DASH}",
             f"power limit {DASH if watts is None else f'{watts:.0f} W'}"
             + (f" (default {default:.0f} W)" if watts and default and abs(watts - default) >= 1 else ""),
             f"ECC {_onoff(m, 'ecc_enabled') or DASH}", _date(_text(m, "date"))]
    files = ", ".join(f"`{os.path.basename(f)}`" for f in [c.file] + c.also)
    return f"- **{c.label}** ({files}): " + " · ".join(parts)


def _state(m):
    """What the machine record says about the machine's state, as caption parts."""
    parts = []
    if _text(m, "cpu"):
        parts.append(_text(m, "cpu") + (f", host {_text(m, 'host')}" if _text(m, "host") else ""))
    if _onoff(m, "persistence_mode"):
        parts.append(f"persistence mode {_onoff(m, 'persistence_mode')}")
    link = _pcie(m, "_under_load") or _pcie(m, "")
    if link:
        top = _pcie(m, "_max")
        parts.append(f"PCIe {link}" + (" under load" if _pcie(m, "_under_load") else "")
                     + (f" (the card's max {top})" if top and top != link else ""))
    links = _whole(m.get("nvlink_active_links"))
    if links is not None:
        parts.append(f"NVLink {links} active links")
    a, b = _load(m.get("load_avg_start")), _load(m.get("load_avg_end"))
    if a is not None or b is not None:
        parts.append(f"load average {fmt_load(a)} → {fmt_load(b)}")
    return parts


def _pcie(m, suffix):
    """"gen 5 x16" from pcie_gen<suffix> and pcie_width<suffix>, or None."""
    gen, width = _whole(m.get("pcie_gen" + suffix)), _whole(m.get("pcie_width" + suffix))
    return f"gen {gen or DASH} x{width or DASH}" if gen or width else None


def fmt_load(v):
    return DASH if v is None else f"{v:.2f}"


def _processes(m):
    procs = m.get("other_gpu_processes")
    if not isinstance(procs, list):
        return None
    said = []
    for p in procs:
        if not isinstance(p, dict):
            continue
        name = p.get("name") if isinstance(p.get("name"), str) and p.get("name") else "?"
        pid, gpu, used = _whole(p.get("pid")), _whole(p.get("gpu")), _num(p.get("used_bytes"))
        detail = ", ".join(x for x in (f"pid {pid}" if pid is not None else "",
                                       f"GPU {gpu}" if gpu is not None else "",
                                       f"{used / GIB:.1f} GiB" if used is not None else "") if x)
        said.append(name + (f" ({detail})" if detail else ""))
    return "other processes on the GPU: " + (", ".join(said) if said else "none")


def captions(columns):
    L = ["## Cards", "",
         "_How to read:_ one line per column of the tables below: the card, the engine and the modes "
         "it ran, driver, CUDA runtime, cuDNN, the board power limit, ECC and the date; under it what "
         f"the machine reported about its state, and its warnings. {DASH} = not reported.", ""]
    for c in columns:
        m = c.machine or {}
        L.append(_head(c))
        state = _state(m)
        if state:
            L.append("  - " + " · ".join(state))
        procs = _processes(m)
        if procs:
            L.append("  - " + procs)
        for key, lead in (("notes", "note: "), ("warnings", "**warning:** ")):
            said = m.get(key)
            L += [f"  - {lead}{t}" for t in (said if isinstance(said, list) else [])
                  if isinstance(t, str) and t]
    return L + [""]


def engine_notes(columns):
    """What each column's file says about how it measured (torch_bench.py's notes)."""
    noted = [c for c in columns if c.notes]
    L = ["## Notes", ""] if noted else []
    for c in noted:
        L += [f"**{c.label}**", ""] + [f"- {n}" for n in c.notes] + [""]
    return L
