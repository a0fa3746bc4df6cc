#!/usr/bin/env python3
"""report.py — merge benchmark runs of one or several cards into one markdown
report, a table per question with the cards as columns, and charts.

  report.py A.json B.json ... [--out report.md] [--plots DIR]
            [--label FILE=NAME] [--price CARD=USD_PER_HOUR] [--baseline FILE|LABEL|ENGINE]
            [--ignore-layout] [--title T]

Inputs: files of schema "ctrain-bench/1" (machine, results, ceilings,
notes), written by `ctrain bench --json` (any mode: the suite, --graph both,
--gpus N, --max-batch, --soak, --data DIR) and by scripts/torch_bench.py
--json, and the older JSON-lines files of torch_bench.py. Any number of
each, from any number of cards.

Columns (scripts/report_read.py): one per engine and card and file, named by
the card ("NVIDIA H200" -> "H200"); PyTorch's file of a card is its own
column ("H200 PyTorch"), and the card gets a ratio column "H200
ctrain/PyTorch". --label FILE=NAME renames a file's column; two files of the
same card and engine are told apart by their file names. A caption per
column (report_cards.py) gives the GPU, driver, CUDA runtime, cuDNN, power
limit, ECC, date, and the machine's warnings.

Tables (report_tables.py), each only when some column has its figures: one
row per config (model, precision, batch, seq or image size): samples/s,
step time p50 / p99, J per sample and samples/s per W, MFU against the
datasheet peak and the measured matmul ceiling, power / temperature /
clock, peak memory, recompute's trade, the largest batch (--max-batch),
eager against CUDA graphs, real data against synthetic, multi-GPU scaling,
the soak summary, US$ per million samples (--price CARD=USD_PER_HOUR, CARD a
column label or a card's short name; repeatable), the measured ceilings.
--baseline FILE or LABEL adds a ratio column X/BASELINE for every other
column of the throughput table; --baseline ENGINE ("pytorch", "pytorch
compile") picks the per-card PyTorch column the ctrain/PyTorch ratios are
taken against (default: its eager run).

A figure that was not measured is "–", never 0. A file that is not a bench
JSON (not UTF-8, not JSON, no results, a field of the wrong type) is named
with the cause, and the report stops with status 1 after checking every
file: no traceback, no half-merged table.

Charts (report_plots.py, --plots DIR, PNG and SVG): DIR/MODEL.png,
DIR/MODEL_batch.png, DIR/recompute.png. matplotlib is imported only then;
without it the tables are still written and the report says what to install
for which Python (`ctrain report` looks for a python3 with matplotlib first:
python3 on PATH, then /usr/bin/python3). Only the standard library is
needed otherwise.
"""
import argparse
import os
import sys

from report_cards import captions, engine_notes
from report_fmt import DASH
from report_plots import make_plots
from report_read import _num, label_map, load
from report_tables import (ceilings, cost, energy, graphs, memory, mfu, power, real_data, scaling,
                           soak, step_time, throughput)


def _engine_matches(c, want):
    w = want.lower()
    return (c.engine.lower() == w or (c.engine.split() or [""])[0].lower() == w
            or c.peer_name().lower() == w)


def pick_baseline(columns, want):
    """-> (baseline column or None, engine name picking the per-card peer or None)."""
    if not want:
        return None, None
    for c in columns:   # a file: its ctrain column first
        same = os.path.exists(want) and os.path.exists(c.file) and os.path.samefile(want, c.file)
        if same or os.path.basename(c.file) == want:
            return sorted((t for t in columns if t.file == c.file), key=lambda t: not t.is_ctrain)[0], None
    for c in columns:
        if c.label.lower() == want.lower():
            return c, None
    hits = [c for c in columns if _engine_matches(c, want)]
    if hits and all(c.is_ctrain for c in hits):
        return hits[0], None
    if hits:
        return None, want
    sys.exit(f"report: --baseline {want!r} matches no file, column or engine; columns: "
             + ", ".join(repr(c.label) for c in columns))


def peer_references(columns, engine):
    """ctrain column -> the PyTorch (or other engine's) column of the same card
    its ratio is taken against: the one --baseline ENGINE names, else the
    card's eager run, else its first."""
    refs = {}
    for c in columns:
        if not c.is_ctrain:
            continue
        peers = [p for p in columns if not p.is_ctrain and p.card == c.card
                 and (engine is None or _engine_matches(p, engine))]
        peers.sort(key=lambda p: (p.mode or "eager") != "eager")
        if peers:
            refs[c] = peers[0]
    return refs


def card_order(columns):
    """The columns grouped by card, in the order the cards first appear: a
    card's ctrain columns, then its other engines."""
    first = {}
    for i, c in enumerate(columns):
        first.setdefault(c.card, i)
    return sorted(columns, key=lambda c: (first[c.card], not c.is_ctrain, columns.index(c)))


def parse_prices(items, columns, ap):
    prices = {}
    for item in items:
        card, _, usd = item.partition("=")
        v = _num(usd)
        if not card or v is None or v <= 0:
            ap.error(f"--price wants CARD=USD_PER_HOUR (a positive number), got {item!r}")
        hits = [c for c in columns if card.lower() in (c.label.lower(), c.card.lower())]
        if not hits:
            sys.exit(f"report: --price {card}: no column is labelled {card}; columns: "
                     + ", ".join(repr(c.label) for c in columns))
        for c in hits:
            prices[c] = v
    return prices


# The questions a report answers when its files hold the measurement, and how
# to measure each: a table the files cannot fill is listed, not left out silently.
MEASURE = (
    ("Step time (ms, p50 / p99)", "`ctrain bench` (files written before p50/p99 were recorded lack it)"),
    ("Energy (J/sample, samples/s per W)", "`ctrain bench` on a GPU whose driver reports power (NVML)"),
    ("MFU (% of the card's peak / % of its measured matmul)", "`ctrain bench` on a GPU"),
    ("Power, temperature, clock", "`ctrain bench` on a GPU whose driver reports them (NVML)"),
    ("Peak memory (GiB)", "`ctrain bench`"),
    ("Recompute: memory saved, time paid", "`ctrain bench --recompute all` on configs of a "
     "`ctrain bench` file of the same card, both files given"),
    ("Largest batch", "`ctrain bench --max-batch`"),
    ("Eager vs CUDA graphs", "`ctrain bench --graph both`"),
    ("Real data", "`ctrain bench --data DIR` (an ImageFolder of JPEGs)"),
    ("Multi-GPU scaling", "`ctrain bench --gpus N` on a machine with N GPUs"),
    ("Soak (long run)", "`ctrain bench --soak 10m`"),
    ("Cost (US$ per million samples)", "`ctrain report ... --price CARD=USD_PER_HOUR`"),
    ("Measured matmul ceilings (TFLOP/s)", "`ctrain bench` on a GPU"),
)


def not_measured(lines, columns):
    """The questions no table answers, with the command that measures each,
    and the ctrain/PyTorch ratio when no file is PyTorch's."""
    have = {x[3:] for x in lines if x.startswith("## ")}
    missing = [f"- {t}: {how}" for t, how in MEASURE if t not in have]
    if not any(not c.is_ctrain for c in columns):
        missing.append("- ctrain/PyTorch on the same card: `python3 scripts/torch_bench.py --json "
                       "FILE` on that card, the file given with ctrain's")
    if not missing:
        return []
    return ["## Not measured in these files", "",
            "_How to read:_ what this report would show with more measurements, and the command "
            "that makes each.", ""] + missing + [""]


def build_report(columns, refs, base, prices, plot_note, plot_files, out_dir, title):
    L = [f"# {title}", "",
         "One table per question, one column per card (engine and file); a row per config. "
         f"{DASH} = not measured (never 0). Each table says how to read it.", ""]
    L += captions(columns)
    for part in (throughput(columns, refs, base), step_time(columns), energy(columns), mfu(columns),
                 power(columns), memory(columns), graphs(columns), real_data(columns),
                 scaling(columns), soak(columns), cost(columns, prices), ceilings(columns),
                 engine_notes(columns)):
        L += part
    L += not_measured(L, columns)
    if plot_note:
        L += [f"_{plot_note}_", ""]
    for name, path in plot_files:
        L += [f"![{name}]({os.path.relpath(path, out_dir)})", ""]
    return "\n".join(L)


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Merge ctrain bench JSON and torch_bench.py JSON files of one or several cards "
                    "into one markdown report (a table per question, the cards as columns) and charts.",
        epilog="A figure that was not measured is shown as '–', never as 0.")
    ap.add_argument("files", nargs="+", help="ctrain bench --json files, torch_bench.py .json/.jsonl files")
    ap.add_argument("--out", help="markdown file to write (default: stdout)")
    ap.add_argument("--plots", metavar="DIR", help="write PNG and SVG charts into DIR")
    ap.add_argument("--label", action="append", default=[], metavar="FILE=NAME",
                    help="name the column(s) of FILE (repeatable)")
    ap.add_argument("--price", action="append", default=[], metavar="CARD=USD_PER_HOUR",
                    help="the card's price per hour: adds US$ per million samples (repeatable)")
    ap.add_argument("--baseline", metavar="FILE|LABEL|ENGINE",
                    help="a column every other is divided by, or the engine (pytorch, pytorch compile) "
                         "of the per-card ctrain/PyTorch ratios")
    ap.add_argument("--ignore-layout", action="store_true",
                    help="put NCHW and NHWC results of a config in the same row")
    ap.add_argument("--title", default="ctrain benchmark report")
    a = ap.parse_args(argv)

    columns = load(a.files, label_map(ap, a.label), a.ignore_layout)
    if not columns:
        sys.exit("report: no results in " + ", ".join(a.files))
    columns = card_order(columns)
    base, engine = pick_baseline(columns, a.baseline)
    refs = peer_references(columns, engine)
    prices = parse_prices(a.price, columns, ap)

    out_dir = os.path.dirname(os.path.abspath(a.out)) if a.out else os.getcwd()
    note, plots = None, []
    if a.plots:
        try:
            note, plots = make_plots(columns, a.plots)
        except OSError as e:
            sys.exit(f"report: cannot write the plots into {a.plots}: {e.strerror}")
        if note:
            print(f"report: {note}", file=sys.stderr)
    text = build_report(columns, refs, base, prices, note, plots, out_dir, a.title)
    if a.out:
        try:
            if os.path.dirname(a.out):
                os.makedirs(os.path.dirname(a.out), exist_ok=True)
            with open(a.out, "w", encoding="utf-8") as f:
                f.write(text + "\n")
        except OSError as e:
            sys.exit(f"report: cannot write {a.out}: {e.strerror}")
        print(f"report: wrote {a.out} ({len(columns)} columns"
              + (f", {len(plots)} charts in {a.plots}" if plots else "") + ")", file=sys.stderr)
    else:
        sys.stdout.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
