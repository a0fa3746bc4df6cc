#!/usr/bin/env python3
"""timeline_phases.py — where each step of a CTRAIN_TIMELINE trace goes, by
phase: forward, backward, and the tail after backward (what a data-parallel
step waits for once backward's compute is done: the last all-reduces, the
update), with what runs in that tail.

  timeline_phases.py TRACE [TRACE ...]
  timeline_phases.py --self-test

TRACE is the Chrome trace CTRAIN_TIMELINE writes (train/bench/timeline.h): FILE,
or FILE.rankR with several GPUs (not the FILE.txt summary), e.g.

  CTRAIN_TIMELINE=/tmp/two.json:20:5 ctrain train --gpus 2 --model bert-large ... --graph
  scripts/timeline_phases.py /tmp/two.json.rank0

Phases of one step (the medians over the trace's steps are printed):
  step       first kernel's start to last kernel's end
  forward    step start to the first loss-backward kernel (a name with
             "ce_bwd": the cross-entropy's backward starts backward)
  backward   from there to the end of the last compute kernel: any kernel
             that is not communication (NCCL), the optimizer, a copy, cast
             or fill, the sparse lookup's row adds, or the step's
             bookkeeping (RNG offset, learning rate, grad scaler)
  tail       end of backward to the end of the step; within it, the time
             NCCL runs, the time the optimizer runs (overlapping or not),
             and the rest (other kernels, gaps)
Steps are found by the trace's first kernel: each step starts where a run
of kernels with that name begins (the forward's first kernel, such as the
embedding lookup, repeats once a step). A FILE.txt summary beside the trace
gives the expected number of steps; when the first kernel's runs do not
match it (a copy or an NCCL kernel of the step before the window opens the
trace, or a name that runs twice a step), the first compute kernel among
the trace's first hundred whose runs do match marks the steps instead (a
heuristic: check that the phases add up to the step); a mismatch left is
reported.
"""
import json
import os
import re
import statistics
import sys
import tempfile

NCCL = re.compile(r"nccl", re.I)
OPTIM = re.compile(r"sgd_|adam|lamb|optim", re.I)
COPY = re.compile(r"^memset|^memcpy|CopyF|fill|rows_add", re.I)
# a step's bookkeeping: the graph's RNG offset, the learning rate, the scaler
BOOK = re.compile(r"advance_kernel|lr_fetch|scaler|found_inf|unscale", re.I)
LOSS_BWD = re.compile(r"ce_bwd")


def load(path):
    with open(path) as f:
        d = json.load(f)
    ev = d["traceEvents"] if isinstance(d, dict) else d
    ks = [(float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0.0)), e.get("name", ""))
          for e in ev if e.get("ph") == "X"]
    ks.sort()
    return ks


def run_starts(ks, name):
    """Indices where a run of kernels called name begins."""
    return [i for i, k in enumerate(ks) if k[2] == name and (i == 0 or ks[i - 1][2] != name)]


def is_compute(name):
    return not (NCCL.search(name) or OPTIM.search(name) or COPY.search(name)
                or BOOK.search(name))


def split_steps(ks, want=None):
    """Lists of kernels, one per step (see the top of the file). With want
    (the expected step count) and the first kernel's runs not matching it
    (a copy or NCCL kernel of the previous step opening the trace, or a name
    that runs twice a step), the first compute kernel among the trace's
    first hundred whose runs number want marks the steps instead."""
    if not ks:
        return []
    starts = run_starts(ks, ks[0][2])
    if want is not None and len(starts) != want:
        seen = []
        for k in ks[:100]:
            if k[2] in seen or not is_compute(k[2]):
                continue
            seen.append(k[2])
            s = run_starts(ks, k[2])
            if len(s) == want:
                starts = s
                break
    # kernels before the first mark belong to the step before the window: left out
    return [ks[a:b] for a, b in zip(starts, starts[1:] + [len(ks)])]


def busy(intervals, lo, hi):
    """Microseconds of [lo, hi] covered by the union of the intervals."""
    iv = sorted((max(a, lo), min(b, hi)) for a, b in intervals if b > lo and a < hi)
    total, cur_a, cur_b = 0.0, None, None
    for a, b in iv:
        if cur_b is None or a > cur_b:
            if cur_b is not None:
                total += cur_b - cur_a
            cur_a, cur_b = a, b
        else:
            cur_b = max(cur_b, b)
    if cur_b is not None:
        total += cur_b - cur_a
    return total


def phases(step):
    """Milliseconds of one step's phases (a dict)."""
    t0 = step[0][0]
    t_end = max(k[1] for k in step)
    loss = [k[0] for k in step if LOSS_BWD.search(k[2])]
    t_bwd = min(loss) if loss else t0
    compute = [k[1] for k in step if is_compute(k[2])]
    t_bwd_end = max(compute) if compute else t_end
    nccl = [(a, b) for a, b, n in step if NCCL.search(n)]
    opt = [(a, b) for a, b, n in step if OPTIM.search(n)]
    tail = t_end - t_bwd_end
    tn, to = busy(nccl, t_bwd_end, t_end), busy(opt, t_bwd_end, t_end)
    both = busy(nccl + opt, t_bwd_end, t_end)
    return {"step": (t_end - t0) / 1e3, "forward": (t_bwd - t0) / 1e3,
            "backward": (t_bwd_end - t_bwd) / 1e3, "tail": tail / 1e3,
            "tail NCCL": tn / 1e3, "tail optimizer": to / 1e3,
            "tail other": (tail - both) / 1e3,
            "NCCL in backward": busy(nccl, t_bwd, t_bwd_end) / 1e3}


def expected_steps(path):
    """The step count of the FILE.txt summary beside the trace, or None."""
    txt = path + ".txt"
    if not os.path.exists(txt):
        return None
    with open(txt) as f:
        for line in f:
            m = re.search(r"over (\d+) steps", line)
            if m:
                return int(m.group(1))
    return None


def report(path, out=sys.stdout):
    want = expected_steps(path)
    steps = split_steps(load(path), want)
    if want is not None and len(steps) != want:
        out.write("%s: found %d steps by the kernels' names, the summary says %d: "
                  "the phases may be wrong\n" % (path, len(steps), want))
    rows = [phases(s) for s in steps]
    if not rows:
        out.write("%s: no kernels\n" % path)
        return None
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    out.write("%s: %d steps, medians in ms\n" % (path, len(rows)))
    for k, v in med.items():
        out.write("  %-18s %8.3f\n" % (k, v))
    return med


def report_of(trace, steps):
    """report() of a made-up trace, written with its summary to a temporary folder."""
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "t.json")
        with open(p, "w") as f:
            json.dump({"traceEvents": trace}, f)
        with open(p + ".txt", "w") as f:
            f.write("timeline: %d events over %d steps\n" % (len(trace), steps))
        with open(os.devnull, "w") as null:
            return report(p, null)


def self_test():
    """Two made-up steps with known phases."""
    failed = passed = 0

    def ev(name, ts, dur, tid=1):
        return {"name": name, "ph": "X", "ts": ts, "dur": dur, "pid": 0, "tid": tid}

    trace = []
    for s in range(2):
        b = s * 10000.0
        trace += [ev("emb_fwd_kernel", b, 100), ev("emb_fwd_kernel", b + 100, 100),
                  ev("nvjet_gemm_fwd", b + 300, 2700),          # forward to 3000
                  ev("ce_bwd_kernel", b + 3000, 100),           # backward from 3000
                  ev("nvjet_gemm_bwd", b + 3100, 4900),         # compute until 8000
                  ev("ncclDevKernel_AllReduce", b + 5000, 2000, 2),   # 2000 inside backward
                  ev("ncclDevKernel_AllReduce", b + 8000, 600, 2),    # 600 in the tail
                  ev("sgd_kernel", b + 8400, 1000),             # 8400-9400: 200 with NCCL
                  ev("advance_kernel", b + 9400, 50),           # bookkeeping, not compute
                  ev("memset", b + 9450, 50)]                   # step ends at 9500
    med = report_of(trace, 2)
    want = {"step": 9.5, "forward": 3.0, "backward": 5.0, "tail": 1.5, "tail NCCL": 0.6,
            "tail optimizer": 1.0, "tail other": 0.1, "NCCL in backward": 2.0}
    # the same steps opened by a copy that also runs mid-step: the marks come
    # from the first compute kernel instead, which gives the same forward,
    # backward and NCCL/optimizer times (the next step's opening copy then
    # counts in a step's end, so its length and "tail other" differ)
    trace2 = []
    for e in trace:
        if e["name"] == "emb_fwd_kernel" and e["ts"] % 10000.0 == 0:
            trace2.append(ev("memset", e["ts"] - 50, 40))
        if e["name"] == "ce_bwd_kernel":
            trace2.append(ev("memset", e["ts"] - 20, 10))
        trace2.append(e)
    med2 = report_of(trace2, 2)
    same = ("forward", "backward", "tail NCCL", "tail optimizer", "NCCL in backward")
    ok = med2 is not None and all(abs(med2[k] - want[k]) < 1e-9 for k in same)
    print("  %s steps marked by the first compute kernel: %s" % ("ok  " if ok else "FAIL", med2))
    passed += ok
    failed += not ok
    for k, v in want.items():
        ok = med is not None and abs(med[k] - v) < 1e-9
        print("  %s %s: %s (want %s)" % ("ok  " if ok else "FAIL", k,
                                          None if med is None else med[k], v))
        passed += ok
        failed += not ok
    print("%d passed, %d failed" % (passed, failed))
    return failed == 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return 0 if self_test() else 1
    if len(argv) < 2 or argv[1].startswith("-"):
        sys.stderr.write(__doc__)
        return 2
    for p in argv[1:]:
        report(p)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
