"""report_fmt.py — how scripts/report.py writes figures and tables, and the
figures it derives from a result (MFU where PyTorch's file lacks it, samples/s
per watt, joules per sample).

Every table of the report has a few name columns on the left (the config)
and one column per card on the right; `card_table` builds it from one
function per column and drops the columns and rows that hold no figure at
all, so a table shows only what some card measured. A figure that was not
measured is "–", never 0.
"""
from report_read import GIB, _num, failed

DASH = "–"


def fmt_sps(v):
    if v is None:
        return DASH
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def fmt_gib(v):
    return DASH if v is None else f"{v / GIB:.1f}"


def fmt(v, spec, suffix=""):
    return DASH if v is None else format(v, spec) + suffix


def fmt_ratio(a, b):
    return f"{a / b:.2f}×" if a and b else None


def fmt_usd(v):
    return f"${v:,.0f}" if v >= 100 else f"${v:.2f}" if v >= 1 else f"${v:.3f}"


class Notes:
    """Numbered footnotes of one table: the same text gets the same number."""

    def __init__(self, prefix):
        self.prefix, self.items = prefix, []

    def mark(self, text):
        if text not in self.items:
            self.items.append(text)
        return f"[{self.prefix}{self.items.index(text) + 1}]"

    def lines(self):
        return [f"[{self.prefix}{i}] {t}" for i, t in enumerate(self.items, 1)] + \
            ([""] if self.items else [])


def error_cell(r, notes):
    err = str(r.get("error"))
    if err.startswith("not supported"):   # the card or model cannot run it: an answer, not a failure
        return "n/a " + notes.mark(err)
    return "OOM" if "out of memory" in err.lower() else "error " + notes.mark(err)


def md_table(header, rows, left):
    """The first `left` columns left-aligned (names), the rest right (figures)."""
    out = ["| " + " | ".join(header) + " |",
           "|" + "|".join("---" if i < left else "--:" for i in range(len(header))) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def card_table(keys, left_header, left_cells, columns):
    """A markdown table, or "" when no cell holds a figure. columns:
    [(header, fn(key) -> text, or None when not measured)]; left_cells(key)
    -> the name cells. Columns and rows without one figure are left out."""
    grid = [[fn(k) for _, fn in columns] for k in keys]
    keep = [j for j in range(len(columns)) if any(row[j] is not None for row in grid)]
    rows = [left_cells(k) + [DASH if row[j] is None else row[j] for j in keep]
            for k, row in zip(keys, grid) if any(row[j] is not None for j in keep)]
    if not rows:
        return ""
    return md_table(left_header + [columns[j][0] for j in keep], rows, len(left_header))


def section(title, howto, table, *after):
    """Markdown lines of one question: heading, how to read it, the table, notes."""
    if not table:
        return []
    L = [f"## {title}", "", f"_How to read:_ {howto}", "", table, ""]
    for a in after:
        L += a
    return L


# ---- Derived figures -------------------------------------------------------

def flops_for(key, columns):
    """FLOPs per sample of a config: a model property (model, seq, image size)."""
    for c in columns:
        for k in c.runs:
            if k[0] == key[0] and k[3] == key[3] and k[4] == key[4]:
                v = _num((c.result(k) or {}).get("flops_per_sample"))
                if v:
                    return v
    return None


def peak_for(device, precision, columns):
    for c in columns:
        if c.device != device:
            continue
        for k in c.runs:
            v = _num((c.result(k) or {}).get("peak_tflops"))
            if k[1] == precision and v:
                return v
    return None


def mfu_of(col, key, r, columns):
    """(fraction, derived?) or (None, False). Derived: computed here from the
    FLOPs per sample and the peak a ctrain result on the same card reported."""
    m = _num(r.get("mfu_peak"))
    if m is not None:
        return m, False
    sps = _num(r.get("samples_per_s"))
    flops = flops_for(key, columns)
    peak = peak_for(col.device, key[1], columns)
    if sps is None or flops is None or peak is None:
        return None, False
    return flops * sps / (peak * 1e12), True


def sps(r):
    """samples/s of a record that measured it, else None."""
    return None if r is None or failed(r) else _num(r.get("samples_per_s"))


def per_watt(r):
    if r is None:
        return None
    v = _num(r.get("samples_per_s_per_w"))
    if v is None and sps(r) and _num(r.get("power_avg_w")):
        v = sps(r) / _num(r["power_avg_w"])
    return v


def joules_per_sample(r):
    """J/sample = average power / samples/s (energy_j over the timed samples
    says the same where the file has no power)."""
    s, w = sps(r), _num(r.get("power_avg_w")) if r else None
    if s and w:
        return w / s
    pw = per_watt(r)
    return 1.0 / pw if pw else None


def window_rate(r):
    """samples/s over the timed window (stalls count); the median where absent."""
    if r is None or failed(r):
        return None
    v = _num(r.get("samples_per_s_mean"))
    return v if v is not None else _num(r.get("samples_per_s"))
