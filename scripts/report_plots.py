"""report_plots.py — the charts of scripts/report.py (--plots DIR), PNG and SVG,
each a size a screen shows whole (at most ~1,500 px wide):

  DIR/MODEL.png         one per model: samples/s, a panel per batch (and seq
                        or image size), the precisions along x, a bar per
                        card (PyTorch hatched beside ctrain); one y axis per
                        model, logarithmic when its bars differ more than 8×
                        (fp32 beside bf16), never one axis across models
  DIR/MODEL_batch.png   where a model was measured at several batches:
                        samples/s against the batch, a panel per precision, a
                        line per card
  DIR/recompute.png     where recompute results exist: peak memory and
                        samples/s without and with recompute, and the largest
                        batch without and with it (--max-batch)

matplotlib is imported here only. Without it the report is written without
charts, and missing_note() says what to install for which Python.
"""
import math
import os
import re
import sys

from report_fmt import fmt_sps, sps
from report_read import GIB, PREC_ORDER, _num, config_label, config_sort, failed, measured

LOG_ABOVE = 8.0          # a figure's largest bar over its smallest: log axis above this
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf",
           "#7f7f7f", "#bcbd22"]


def missing_note():
    py = sys.executable or "python3"
    return (f"plots not written: matplotlib is not installed for {py}. Fix: install the Debian "
            f"package python3-matplotlib (sudo apt-get install python3-matplotlib) or pip install "
            f"matplotlib for {py} ({py} -m pip install matplotlib). The tables are written without "
            "the charts.")


def _file_name(model):
    return re.sub(r"[^A-Za-z0-9._-]+", "_", model) or "model"


class Charts:
    """The figures of one report: one color per column throughout."""

    def __init__(self, plt, Patch, ticker, columns, plot_dir):
        self.plt, self.Patch, self.ticker = plt, Patch, ticker
        self.columns, self.dir = columns, plot_dir
        self.made = []
        self.color = {c: PALETTE[i % len(PALETTE)] for i, c in enumerate(columns)}

    def save(self, fig, name, title):
        png = os.path.join(self.dir, name + ".png")
        fig.savefig(png, dpi=110)
        fig.savefig(os.path.join(self.dir, name + ".svg"))
        self.plt.close(fig)
        self.made.append((title, png))

    def grid(self, n, w=4.6, h=3.4):
        ncols = 2 if n == 4 else min(3, n)
        nrows = math.ceil(n / ncols)
        fig, axes = self.plt.subplots(nrows, ncols, figsize=(max(5.6, w * ncols), h * nrows + 0.9),
                                      squeeze=False, sharey=True)
        for ax in axes.flat[n:]:
            ax.remove()
        return fig, list(axes.flat[:n])

    def bar_style(self, c):
        return dict(facecolor=self.color[c], hatch=None if c.is_ctrain else "//",
                    edgecolor="white" if c.is_ctrain else "black", linewidth=0.4)

    def y_axis(self, axes, values):
        """Logarithmic when the figure's values differ more than LOG_ABOVE×
        (ticks at 1, 2, 5 × 10^n, written as plain numbers); set before
        drawing, so no bar or line is clipped at 0."""
        log = bool(values) and max(values) / max(min(values), 1e-12) > LOG_ABOVE
        if log:
            t = self.ticker
            for ax in axes:
                ax.set_yscale("log")
                ax.yaxis.set_major_locator(t.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
                ax.yaxis.set_major_formatter(t.FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
                ax.yaxis.set_minor_formatter(t.NullFormatter())
        return log

    def finish(self, fig, axes, title, log, handles):
        """Grid, axis floor, title, and one legend below the panels (handles:
        {label: artist})."""
        for ax in axes:
            ax.grid(axis="y", alpha=0.3, which="both")
            ax.margins(y=0.12)
            if not log:
                ax.set_ylim(bottom=0)
                ax.yaxis.set_major_formatter(self.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
        fig.suptitle(title, fontsize=11)
        fig.legend(list(handles.values()), list(handles.keys()), loc="lower center",
                   ncol=min(len(handles), 4), fontsize=8, frameon=False)
        fig.tight_layout(rect=(0, 0.07 if len(handles) <= 4 else 0.12, 1, 0.95))

    # ---- one figure per model: bars per precision, a bar per card

    def model(self, model, keys):
        shapes = sorted({k[2:6] for k in keys}, key=lambda s: (s[0] or 0, s[1] or 0, s[2] or 0, s[3] or ""))
        series = [c for c in self.columns if any(measured(c.result(k)) for k in keys)]
        if not series:
            return
        fig, axes = self.grid(len(shapes))
        log = self.y_axis(axes, [sps(c.result(k)) for c in series for k in keys if sps(c.result(k))])
        # a group per precision: the cards that have that config, side by side
        # (bars of one width across the figure, so panels compare)
        groups = {k: [c for c in series if measured(c.result(k))] for k in keys}
        width = min(0.35, 0.8 / max(len(g) for g in groups.values()))
        for ax, shape in zip(axes, shapes):
            ks = sorted((k for k in keys if k[2:6] == shape), key=lambda k: (PREC_ORDER.get(k[1], 9), k[1]))
            many = sum(len(groups[k]) for k in ks) > 8
            for j, k in enumerate(ks):
                for i, c in enumerate(groups[k]):
                    r, x = c.result(k), j + (i - (len(groups[k]) - 1) / 2) * width
                    if failed(r):
                        err = "OOM" if "out of memory" in str(r["error"]).lower() else "error"
                        ax.annotate(err, (x, 0.02), xycoords=("data", "axes fraction"), rotation=90,
                                    ha="center", va="bottom", fontsize=8, color=self.color[c])
                        continue
                    bars = ax.bar([x], [sps(r)], width, log=log, **self.bar_style(c))
                    ax.bar_label(bars, labels=[fmt_sps(sps(r))], fontsize=6.5, padding=1,
                                 rotation=90 if many else 0)
            precs = [k[1] for k in ks]
            ax.set_xlim(-0.5, len(precs) - 0.5)
            ax.set_xticks(range(len(precs)))
            ax.set_xticklabels(precs)
            batch, seq, img, layout = shape
            ax.set_title(", ".join(x for x in (f"batch {batch}" if batch else "",
                                               f"seq {seq}" if seq else "",
                                               f"{img}px" if img and img != 224 else "",
                                               layout or "") if x), fontsize=9)
        axes[0].set_ylabel("samples/s")
        self.finish(fig, axes, f"{model}: training throughput (samples/s, higher is better)"
                    + (", log scale" if log else ""), log,
                    {c.label: self.Patch(label=c.label, **self.bar_style(c)) for c in series})
        self.save(fig, _file_name(model), f"{model}: samples/s per precision and card")

    # ---- samples/s against the batch, where several batches were measured

    def batch_curve(self, model, keys):
        curves = {}   # precision -> {(column, shape without batch): [(batch, samples/s)]}
        for c in self.columns:
            for k in keys:
                v = sps(c.result(k))
                if v and k[2]:
                    curves.setdefault(k[1], {}).setdefault((c, k[3:6]), []).append((k[2], v))
        curves = {p: {s: sorted(pts) for s, pts in by.items() if len(pts) > 1}
                  for p, by in curves.items()}
        precs = sorted((p for p in curves if curves[p]), key=lambda p: (PREC_ORDER.get(p, 9), p))
        if not precs:
            return
        fig, axes = self.grid(len(precs), 4.4, 3.2)
        log = self.y_axis(axes, [v for p in precs for pts in curves[p].values() for _, v in pts])
        styles = ["-", "--", ":", "-."]
        for ax, p in zip(axes, precs):
            shapes = sorted({s for _, s in curves[p]}, key=lambda s: tuple(x or 0 for x in s[:2]))
            batches = set()
            for (c, shape), pts in curves[p].items():
                label = c.label + (f", seq {shape[0]}" if shape[0] and len(shapes) > 1 else "") + \
                    (f", {shape[1]}px" if shape[1] and len(shapes) > 1 else "")
                ax.plot([b for b, _ in pts], [v for _, v in pts], marker="o", markersize=4,
                        color=self.color[c], linestyle=styles[shapes.index(shape) % len(styles)],
                        label=label)
                batches |= {b for b, _ in pts}
            ax.set_xscale("log", base=2)
            ax.set_xticks(sorted(batches))
            ax.set_xticklabels([str(b) for b in sorted(batches)], fontsize=8)
            ax.minorticks_off()
            ax.set_xlabel("batch")
            ax.set_title(p, fontsize=9)
        axes[0].set_ylabel("samples/s")
        lines = {}
        for ax in axes:
            for h, lbl in zip(*ax.get_legend_handles_labels()):
                lines.setdefault(lbl, h)
        self.finish(fig, axes, f"{model}: samples/s against the batch" + (", log scale" if log else ""),
                    log, lines)
        self.save(fig, _file_name(model) + "_batch", f"{model}: samples/s against the batch")

    # ---- recompute: memory saved, time paid; the largest batch

    def recompute(self):
        pairs = []   # (label, [without, with]) per panel
        mem, speed, batch = [], [], []
        for c in self.columns:
            for k in sorted(c.runs, key=config_sort):
                if not k[6]:
                    continue
                a, b = c.result(k[:6] + (None,)), c.result(k)
                name = f"{c.label}\n{config_label(k[:6] + (None,))}"
                ma, mb = (None if r is None else _num(r.get("peak_mem_bytes")) for r in (a, b))
                if ma and mb:
                    mem.append((name, ma / GIB, mb / GIB, k[6]))
                if sps(a) and sps(b):
                    speed.append((name, sps(a), sps(b), k[6]))
            for k, by in sorted(c.maxb.items(), key=lambda x: config_sort(x[0])):
                rec = next(((p, r) for p, r in by.items() if p), None)
                nb = by.get(None)
                if nb is None or rec is None:
                    continue
                vals = [None if r.get("error") else _num(r.get("batch")) for r in (nb, rec[1])]
                if all(vals):
                    batch.append((f"{c.label}\n{config_label(k, batch=False)}", *vals, rec[0]))
        panels = [(t, y, d) for t, y, d in (("peak memory", "GiB", mem), ("throughput", "samples/s", speed),
                                            ("largest batch (--max-batch)", "batch", batch)) if d]
        if not panels:
            return
        n = max(len(d) for _, _, d in panels)
        fig, axes = self.plt.subplots(1, len(panels), figsize=(min(15.0, len(panels) * (1.6 + 1.3 * n)), 4.6),
                                      squeeze=False)
        for ax, (title, unit, data) in zip(axes[0], panels):
            xs = range(len(data))
            for off, idx, label, color in ((-0.2, 1, "no recompute", "#7f7f7f"),
                                          (0.2, 2, "recompute", "#1f77b4")):
                bars = ax.bar([x + off for x in xs], [d[idx] for d in data], 0.4, label=label, color=color)
                ax.bar_label(bars, labels=[fmt_sps(d[idx]) if unit != "GiB" else f"{d[idx]:.1f}"
                                           for d in data], fontsize=7, padding=1)
            ax.set_xticks(list(xs))
            ax.set_xticklabels([d[0] + (f"\n({d[3]})" if d[3] != "all" else "") for d in data], fontsize=7)
            ax.set_ylabel(unit)
            ax.set_title(title, fontsize=9)
            ax.grid(axis="y", alpha=0.3)
            ax.margins(y=0.12)
        fig.legend(*axes[0][0].get_legend_handles_labels(), loc="lower center", ncol=2, fontsize=8,
                   frameon=False)
        fig.suptitle("Recompute (gradient checkpointing): memory saved, time paid", fontsize=11)
        fig.tight_layout(rect=(0, 0.06, 1, 0.94))
        self.save(fig, "recompute", "recompute: memory, samples/s and the largest batch")


def make_plots(columns, plot_dir):
    """-> (note or None, [(title, png path)])."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib import ticker
        from matplotlib.patches import Patch
    except ImportError:
        return missing_note(), []
    os.makedirs(plot_dir, exist_ok=True)
    ch = Charts(plt, Patch, ticker, columns, plot_dir)
    keys = sorted({k for c in columns for k in c.runs if not k[6]}, key=config_sort)
    for model in sorted({k[0] for k in keys}):
        mk = [k for k in keys if k[0] == model]
        ch.model(model, mk)
        ch.batch_curve(model, mk)
    ch.recompute()
    return None, ch.made
