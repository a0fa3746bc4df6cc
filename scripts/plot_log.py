#!/usr/bin/env python3
"""plot_log.py — curves of one or several `ctrain train --log` files: loss,
learning rate and samples/s against the step, one line per run, one PNG (and
an SVG beside it).

  plot_log.py RUN.jsonl [RUN2.jsonl ...] [--out curves.png] [--label FILE=NAME]

A log is JSON lines (train/io/jsonlog.h): a "config" record (model, precision,
batch, ...), "step" records (step, loss, lr, samples_per_s, ...), after a
--resume a "resume" record and the steps that follow, "eval" records (one per
--eval-every N steps, and the final one). Held-out losses are drawn as crosses
on the loss panel. Each run is labelled "model precision bs B" from its config (or the
file name; --label FILE=NAME overrides); the final evaluation, when there is
one, goes into the legend. Lines that are not JSON objects are named and
skipped, not fatal: a log cut short by a crash still plots.

Needs matplotlib (Debian: python3-matplotlib); without it the script says
which package to install for which Python and exits 2.
"""
import argparse
import json
import os
import sys

from report_read import label_map


def read_log(path):
    """(config dict, [step records], the last eval dict or None, [eval records],
    [bad line numbers])."""
    config, steps, ev, evals, bad = {}, [], None, [], []
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                bad.append(n)
                continue
            if not isinstance(rec, dict):
                bad.append(n)
                continue
            kind = rec.get("event")
            if kind == "config" and not config:
                config = rec
            elif kind == "step" and isinstance(rec.get("step"), (int, float)):
                steps.append(rec)
            elif kind == "eval":
                ev = rec
                evals.append(rec)
    # a resumed run repeats no step, but keep the last record of a step if one does
    by_step = {}
    for r in steps:
        by_step[r["step"]] = r
    finals = [e for e in evals if e.get("final", 1)]   # older logs have no "final": theirs is the end's
    ev = finals[-1] if finals else ev
    return config, [by_step[k] for k in sorted(by_step)], ev, evals, bad


def run_label(path, config, labels):
    if path in labels:
        return labels[path]
    if os.path.basename(path) in labels:
        return labels[os.path.basename(path)]
    if config.get("model"):
        parts = [config["model"], config.get("precision", ""),
                 f"bs {config['batch']}" if config.get("batch") else ""]
        return " ".join(p for p in parts if p)
    return os.path.basename(path)


def series(steps, key):
    xs, ys = [], []
    for r in steps:
        v = r.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v:
            xs.append(r["step"])
            ys.append(v)
    return xs, ys


def plot(runs, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    panels = [("loss", "training loss (as logged)", "log"),
              ("lr", "learning rate", "linear"),
              ("samples_per_s", "samples/s", "linear")]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for ax, (key, title, scale) in zip(axes, panels):
        drawn = 0
        for label, steps, ev, evals in runs:
            xs, ys = series(steps, key)
            if not xs:
                continue
            name = label
            if key == "loss" and ev and isinstance(ev.get("test_acc"), (int, float)):
                name += f" (test {100 * ev['test_acc']:.2f}%)"
            line, = ax.plot(xs, ys, marker="o" if len(xs) < 30 else None, markersize=3, label=name)
            ex, ey = series(evals, "test_loss")
            if key == "loss" and ex:
                ax.plot(ex, ey, "x--", color=line.get_color(), markersize=6, linewidth=0.8,
                        label=f"{label}: held-out loss")
            drawn += 1
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step")
        if scale == "log" and drawn and all(y > 0 for _, s, _, e in runs
                                           for y in series(s, key)[1] + series(e, "test_loss")[1]):
            ax.set_yscale("log")
            fmt = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}")
            ax.yaxis.set_major_formatter(fmt)
            ax.yaxis.set_minor_formatter(fmt)
        ax.grid(alpha=0.3)
        if drawn == 0:
            ax.text(0.5, 0.5, "not logged", ha="center", va="center", transform=ax.transAxes)
    handles, names = axes[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, names, loc="lower center", ncol=min(3, len(handles)), fontsize=9,
                   frameon=False)
    fig.tight_layout(rect=(0, 0.1 if handles else 0, 1, 1))
    fig.savefig(out, dpi=100)
    fig.savefig(os.path.splitext(out)[0] + ".svg")
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="plot_log.py", description="loss, lr and samples/s "
                                 "curves of ctrain train --log files")
    ap.add_argument("logs", nargs="+", help="JSON-lines files written by ctrain train --log")
    ap.add_argument("--out", default="curves.png", help="the PNG to write (an SVG beside it)")
    ap.add_argument("--label", action="append", default=[], metavar="FILE=NAME",
                    help="the legend name of a file (repeatable)")
    a = ap.parse_args(argv)
    labels = label_map(ap, a.label)
    runs, status = [], 0
    for path in a.logs:
        try:
            config, steps, ev, evals, bad = read_log(path)
        except OSError as e:
            print(f"plot_log.py: cannot read {path}: {e.strerror}", file=sys.stderr)
            status = 1
            continue
        if bad:
            print(f"plot_log.py: {path}: skipped {len(bad)} line(s) that are not JSON objects "
                  f"(first: line {bad[0]})", file=sys.stderr)
        if not steps:
            print(f"plot_log.py: {path} has no step records (was it written with --log?)",
                  file=sys.stderr)
            status = 1
            continue
        runs.append((run_label(path, config, labels), steps, ev, evals))
    if not runs:
        return status or 1
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print(f"plot_log.py: matplotlib is not installed for {sys.executable}. Fix: install the "
              f"Debian package python3-matplotlib (sudo apt-get install python3-matplotlib) or "
              f"{sys.executable} -m pip install matplotlib", file=sys.stderr)
        return 2
    plot(runs, a.out)
    print(f"plot_log.py: wrote {a.out} and {os.path.splitext(a.out)[0]}.svg "
          f"({len(runs)} run{'s' if len(runs) != 1 else ''})")
    return status


if __name__ == "__main__":
    sys.exit(main())
