"""report_tables.py — the tables of scripts/report.py, one per question a
reader brings, each with the cards as columns (report_fmt.card_table): how
fast (samples/s, with PyTorch beside ctrain and their ratio per card), how
steady a step is (p50 / p99), how much energy a sample costs, how close to
the card's peak (MFU), what power, heat and clocks it ran at, how much memory
(peak, recompute's trade, the largest batch), what CUDA graphs bring, what
several GPUs bring, what a long run did (soak), what a million samples cost
(--price), and the matmul ceilings measured. The card captions (driver,
CUDA, cuDNN, power limit, ECC, date, warnings) are report_cards.py. Real
data (`ctrain bench --data DIR`) keeps a block per card: its rows are per
decoder, not per config alone.

Keys are configs (report_read.config_key); a column is a report_read.Column.
"""
from report_fmt import (DASH, Notes, card_table, error_cell, fmt, fmt_gib, fmt_ratio, fmt_sps,
                        fmt_usd, joules_per_sample, md_table, mfu_of, per_watt, section, sps,
                        window_rate)
from report_read import Mode, _num, config_label, config_sort, failed


def _left(k):
    model, prec, batch, seq, img, layout, rec = k
    name = model + (f" ({layout})" if layout else "") + (f" (recompute {rec})" if rec else "")
    return [name, prec, DASH if batch is None else batch, seq or img or DASH]


LEFT = ["model", "precision", "batch", "seq / image"]


def _config(k):
    return [config_label(k)]


def _keys(columns, where="runs"):
    return sorted({k for c in columns for k in getattr(c, where)}, key=config_sort)


def throughput(columns, refs, base):
    """samples/s per config; the PyTorch columns of a card beside its ctrain
    column with "ctrain/PyTorch" (refs: ctrain column -> the card's PyTorch
    column); with a baseline column, each other column over it."""
    errors, model_notes = Notes(""), Notes("n")

    def cell(c):
        def f(k):
            r = c.result(k)
            if r is None or (_num(r.get("samples_per_s")) is None and not r.get("error")):
                return None
            text = error_cell(r, errors) if failed(r) else fmt_sps(_num(r.get("samples_per_s")))
            note = r.get("model_note")
            if isinstance(note, str) and note:
                text += " " + model_notes.mark(f"{c.label}, {config_label(k)}: {note}")
            return text
        return f

    def ratio(a, b):
        return lambda k: fmt_ratio(sps(a.result(k)), sps(b.result(k)))

    cols = []
    for i, c in enumerate(columns):
        cols.append((c.label, cell(c)))
        if i + 1 < len(columns) and columns[i + 1].card == c.card:
            continue
        for t in (t for t in columns if t.card == c.card and t in refs and refs[t] is not base):
            solo = sum(1 for x in refs if x.card == c.card) == 1 and t.label == t.card
            cols.append((f"{t.card + ' ctrain' if solo else t.label}/{refs[t].peer_name()}",
                         ratio(t, refs[t])))
    if base is not None:
        cols += [(f"{c.label}/{base.label}", ratio(c, base)) for c in columns if c is not base]
    how = ("median samples/s over the timed steps after warm-up, higher is better; one column per "
           "card (ctrain's CUDA-graph run where a config was measured eager too); "
           "ctrain/PyTorch = ctrain's samples/s over PyTorch's on the same card"
           + (f"; X/{base.label} = X's samples/s over {base.label}'s" if base else "")
           + f"; OOM = out of memory; {DASH} = not measured.")
    return section("Throughput (samples/s)", how,
                   card_table(_keys(columns), LEFT, _left, cols), errors.lines(), model_notes.lines())


def per_config(columns, fn):
    """A table of one figure per config and card: fn(column, config, record)
    -> the cell, called for the records that measured something."""
    def cell(c):
        def f(k):
            r = c.result(k)
            return None if r is None or failed(r) else fn(c, k, r)
        return f
    return card_table(_keys(columns), ["config"], _config, [(c.label, cell(c)) for c in columns])


def step_time(columns):
    if not any(_num(r.get("step_ms_p99")) is not None for c in columns for r in c.records()):
        return []

    def f(c, k, r):
        p50 = _num(r.get("step_ms_p50"))
        p50 = p50 if p50 is not None else _num(r.get("ms_per_step"))
        p99 = _num(r.get("step_ms_p99"))
        return None if p50 is None and p99 is None else f"{fmt(p50, '.1f')} / {fmt(p99, '.1f')}"
    return section("Step time (ms, p50 / p99)",
                   "milliseconds per optimizer step, the median and the 99th percentile of the timed "
                   "steps; a p99 far above the p50 means stalls (data, host, clocks).",
                   per_config(columns, f))


def energy(columns):
    def f(c, k, r):
        j, pw = joules_per_sample(r), per_watt(r)
        return None if j is None else f"{j:#.3g} ({fmt(pw, '.2f')})".replace('. (', ' (')
    return section("Energy (J/sample, samples/s per W)",
                   "joules per training sample = average board power / samples/s, lower is better; in "
                   "brackets samples/s per watt, higher is better (NVML's power over the timed steps).",
                   per_config(columns, f))


def mfu(columns):
    derived = []

    def f(c, k, r):
        m, d = mfu_of(c, k, r, columns)
        ceil = _num(r.get("mfu_measured_ceiling"))
        if m is None and ceil is None:
            return None
        derived.append(d)
        return (fmt(None if m is None else m * 100, ".1f", "%") + ("*" if d else "") + " / "
                + fmt(None if ceil is None else ceil * 100, ".1f", "%"))
    table = per_config(columns, f)
    foot = ["\\* computed by this report from the FLOPs per sample and the peak TFLOP/s that a "
            "ctrain result on the same card and precision reported.", ""] if any(derived) else []
    return section("MFU (% of the card's peak / % of its measured matmul)",
                   "model FLOPs per sample × samples/s over the card's dense datasheet peak for that "
                   "precision, then over the matmul ceiling measured in the same run (what the card "
                   "really reaches on one large matmul); higher is better.", table, foot)


def power(columns):
    def f(c, k, r):
        w, t, mhz = (_num(r.get(x)) for x in ("power_avg_w", "temp_max_c", "sm_clock_avg_mhz"))
        if w is None and t is None and mhz is None:
            return None
        thr = r.get("throttle")
        return (f"{fmt(w, '.0f', ' W')} · {fmt(t, '.0f', ' °C')} · {fmt(mhz, '.0f', ' MHz')}"
                + (f" · {thr}" if thr and thr != "none" else ""))
    return section("Power, temperature, clock",
                   "average board power · highest temperature · average SM clock over the timed steps, "
                   "then the throttle reasons NVML reported (none shown: none seen).",
                   per_config(columns, f))


def memory(columns):
    def f(c, k, r):
        v = _num(r.get("peak_mem_bytes"))
        return None if v is None else fmt_gib(v)
    L = section("Peak memory (GiB)",
                "the most memory the engine held in tensors during a step (ctrain's pool peak; "
                "PyTorch's max_memory_allocated), lower leaves room for a larger batch.",
                per_config(columns, f))
    return L + recompute(columns) + max_batch(columns)


def recompute(columns):
    """Configs measured without and with a recompute policy: memory saved, time paid."""
    keys = sorted({k for c in columns for k in c.runs if k[6] and k[:6] + (None,) in c.runs},
                  key=config_sort)

    def cell(c):
        def f(k):
            a, b = c.result(k[:6] + (None,)), c.result(k)
            ma, mb = (None if r is None else _num(r.get("peak_mem_bytes")) for r in (a, b))
            sa, sb = sps(a), sps(b)
            if ma is None or mb is None or not sa or not sb:
                return None
            return f"{fmt_gib(ma)} → {fmt_gib(mb)} GiB, {100 * (sb / sa - 1):+.0f}% samples/s"
        return f
    return section("Recompute: memory saved, time paid",
                   "peak GiB without → with the recompute policy, and how much samples/s changed "
                   "(recompute re-runs each segment's forward in backward).",
                   card_table(keys, ["config"], _config, [(c.label, cell(c)) for c in columns]))


def max_batch(columns):
    keys = sorted({k for c in columns for k in c.maxb}, key=config_sort)

    def one(r):
        if r is None:
            return DASH
        b = _num(r.get("batch"))
        if str(r.get("error") or "").startswith("not supported"):
            return "n/a"
        return "none fits" if r.get("error") or b is None else f"{b:,.0f}"

    def cell(c):
        def f(k):
            by = c.maxb.get(k)
            if not by:
                return None
            return f"{one(by.get(None))} / {one(next((r for p, r in by.items() if p), None))}"
        return f
    return section("Largest batch",
                   "the largest batch that trains (`ctrain bench --max-batch`), without / with "
                   "recompute of every layer.",
                   card_table(keys, ["config"], lambda k: [config_label(k, batch=False)],
                              [(c.label, cell(c)) for c in columns]))


def graphs(columns):
    def cell(c):
        def f(k):
            by = c.runs.get(k) or {}
            e, g = sps(by.get("eager")), sps(by.get("graph"))
            return None if not e or not g else f"{fmt_sps(e)} → {fmt_sps(g)} ({g / e:.2f}×)"
        return f
    return section("Eager vs CUDA graphs",
                   "ctrain's samples/s with the step launched op by op (eager) → captured once and "
                   "replayed as CUDA graphs, and the speed-up.",
                   card_table(_keys(columns), ["config"], _config,
                              [(c.label, cell(c)) for c in columns if c.is_ctrain]))


def scaling(columns):
    keys = sorted({(k, n, red) for c in columns for k, n, red in c.dp},
                  key=lambda x: (config_sort(x[0]), x[1], x[2] or ""))

    errors = Notes("s")

    def cell(c):
        def f(key):
            k, n, red = key
            r = c.dp.get(key)
            if r is None:
                return None
            if failed(r):
                return error_cell(r, errors)
            per = sps(r)
            one = sps((c.runs.get(k) or {}).get(Mode(r.get("mode")).exec)) or sps(c.result(k))
            return f"{fmt_sps(per * n)} ({100 * per / one:.1f}%)" if per and one else fmt_sps(
                None if per is None else per * n)
        return f
    return section("Multi-GPU scaling",
                   "samples/s of all N GPUs together (data parallel, the same batch per GPU), and in "
                   "brackets the scaling efficiency = that / (N × one GPU's samples/s in the same run).",
                   card_table(keys, ["config", "GPUs"],
                              lambda x: [config_label(x[0]) + (f", {x[2]} reduce" if x[2] else ""), x[1]],
                              [(c.label, cell(c)) for c in columns]), errors.lines())


def soak(columns):
    """One column per card and soak run, the measures as rows."""
    runs = [(c, k, r.get("soak")) for c in columns for k, r in c.soak if isinstance(r.get("soak"), dict)]
    if not runs:
        return []
    one_each = len({id(c) for c, _, _ in runs}) == len(runs)
    header = ["", *[c.label if one_each else f"{c.label}: {config_label(k)}" for c, k, _ in runs]]

    def thr(s):
        if "throttling_seen" not in s:
            return DASH
        return (s.get("throttle") or "yes") if s.get("throttling_seen") else "none"
    rows = [("config", lambda k, s: config_label(k)),
            ("duration", lambda k, s: fmt(_num(s.get("duration_s")), ".0f", " s")),
            ("memory fluctuation", lambda k, s: fmt(_num(s.get("mem_fluctuation_pct")), ".2f", "%")),
            ("throughput drift", lambda k, s: fmt(_num(s.get("throughput_drift_pct")), "+.2f", "%")),
            ("samples/s (mean)", lambda k, s: fmt_sps(_num(s.get("samples_per_s_mean")))),
            ("max temperature", lambda k, s: fmt(_num(s.get("temp_max_c")), ".0f", " °C")),
            ("lowest SM clock", lambda k, s: fmt(_num(s.get("sm_clock_min_mhz")), ".0f", " MHz")),
            ("throttling", lambda k, s: thr(s)),
            ("non-finite losses", lambda k, s: fmt(_num(s.get("nonfinite_loss")), ".0f")),
            ("CUDA error", lambda k, s: s.get("cuda_error") or "none")]
    cells = [[name] + [f(k, s) for _, k, s in runs] for name, f in rows]
    table = md_table(header, [row for row in cells if any(x != DASH for x in row[1:])], 1)
    return section("Soak (long run)",
                   "memory fluctuation = (max - min) / min of the memory in use; throughput drift = "
                   "the last 10% of the run's samples/s against the first 10%; both near 0 on a "
                   "stable card.", table)


def cost(columns, prices):
    """prices: {column: US$ per hour}."""
    if not prices:
        return []

    def cell(c):
        return lambda k: None if not sps(c.result(k)) else fmt_usd(prices[c] * 1e6 / (3600 * sps(c.result(k))))
    how = ", ".join(dict.fromkeys(f"{c.card} ${p:g}/h" for c, p in prices.items()))
    return section("Cost (US$ per million samples)",
                   f"the card's price per hour / (samples/s × 3600) × 10⁶, lower is better; prices "
                   f"given: {how}.",
                   card_table(_keys(columns), ["config"], _config,
                              [(c.label, cell(c)) for c in columns if c in prices]))


def ceilings(columns):
    names = []
    for c in columns:
        for x in c.ceilings:
            if isinstance(x, dict) and isinstance(x.get("name"), str) and x["name"] not in names:
                names.append(x["name"])

    def cell(c):
        by = {x.get("name"): _num(x.get("tflops")) for x in c.ceilings if isinstance(x, dict)}
        return lambda n: None if by.get(n) is None else f"{by[n]:.1f}"
    return section("Measured matmul ceilings (TFLOP/s)",
                   "one large matmul per precision timed in the same run: what the card really reaches, "
                   "the denominator of the second MFU figure.",
                   card_table(names, ["matmul"], lambda n: [n], [(c.label, cell(c)) for c in columns]))


def real_data(columns):
    """One block per column with real-data rows (one row per config and
    decoder), then the errors they name."""
    L, errors = [], Notes("r")
    for c in columns:
        if not c.real:
            continue
        if not L:
            L += ["## Real data", "",
                  "_How to read:_ each config's synthetic row beside its real-data rows (`ctrain bench "
                  "--data DIR`), measured in the same run with the same warm-up and timed window. "
                  "samples/s is the mean over the timed window (all samples over its time: a data "
                  "stall counts); real % = real / synthetic; data wait = time the step waited for a "
                  "batch over the window; decode = images delivered per second of the window, capacity "
                  "= what the decoder could sustain (images per busy second × its threads or engines). "
                  f"{DASH} = not reported.", ""]
        folders = sorted({str(r.get("data")) for rs in c.real.values() for r in rs})
        execs = sorted({Mode(r.get("mode")).exec or "" for rs in c.real.values() for r in rs} - {""})
        L += [f"### {' '.join([c.engine] + execs)} on {c.label}", "",
              "data: " + ", ".join(f"`{f}`" for f in folders), ""]
        rows = []
        for k in sorted(c.real, key=config_sort):
            syn = window_rate(c.result(k))
            for r in c.real[k]:
                decode = str(r.get("decode") or DASH) + (f" → {r['decoder']}" if r.get("decoder") else "")
                if failed(r):
                    rows.append([config_label(k), decode, fmt_sps(syn), error_cell(r, errors)] + [DASH] * 5)
                    continue
                real, wait = window_rate(r), _num(r.get("data_wait_fraction"))
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
    return L + errors.lines()
