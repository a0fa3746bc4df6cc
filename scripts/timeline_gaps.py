#!/usr/bin/env python3
"""timeline_gaps.py — where the step's stream stood idle in a CTRAIN_TIMELINE
trace, and what ended just before it went on: the work it was waiting for.

  timeline_gaps.py TRACE.json [--min-ms 0.3] [--top 40]
  timeline_gaps.py              self-test on a made-up trace (make test runs it;
                                ends "N passed, N failed")

TRACE.json is the Chrome trace CTRAIN_TIMELINE writes (train/bench/timeline.h),
e.g. ResNet-50 on a JPEG folder with the GPU decode:

  CTRAIN_TIMELINE=/tmp/rd.json:20:8 ctrain train --model resnet50 --data DIR \\
      --decode gpu --batch 256 --precision bf16 --graph --steps 40 --no-eval
  scripts/timeline_gaps.py /tmp/rd.json

The step's stream is the one busiest over the window. For each gap in it
longer than --min-ms: when it began, how long it lasted, the names of the
work on either side, and the last record on any other stream that ended
within 200 us before the step's stream went on (or 20 us after: CUPTI's
clocks per engine are that close): on the GPU decode path, the decode of
the next batch (nvJPEG's copies and kernels, the resample kernel) when the
step waited for data. Then the total idle time, and the resample /
normalise kernels of the decode threads with their start times, one per
batch: their spacing is the pace the decoders delivered at.

Not a profiler: CUPTI records kernels, copies and memsets, not the JPEG
engines' own work, and a gap can end for a reason on the host (a late
launch) that no record shows; "released by -" says so.
"""
import argparse
import collections
import json
import sys


def load(path):
    with open(path) as f:
        d = json.load(f)
    ev = d["traceEvents"] if isinstance(d, dict) else d
    return [e for e in ev if e.get("ph") == "X" and "dur" in e]


def analyse(ev, min_us):
    """(step stream id, gaps, decode kernels); each gap (end of the record
    before, the record after, idle us, the releasing record or None)."""
    ev = [e for e in ev if e.get("ph") == "X" and "dur" in e]
    by = collections.defaultdict(list)
    for e in ev:
        by[e.get("tid")].append(e)
    main = max(by, key=lambda t: sum(x["dur"] for x in by[t]))
    m = sorted(by[main], key=lambda e: e["ts"])
    others = sorted((e for e in ev if e.get("tid") != main), key=lambda e: e["ts"] + e["dur"])
    gaps = []
    for a, b in zip(m, m[1:]):
        idle = b["ts"] - (a["ts"] + a["dur"])
        if idle <= min_us:
            continue
        end = b["ts"]
        near = [o for o in others if end - 200 <= o["ts"] + o["dur"] <= end + 20]
        gaps.append((a, b, idle, near[-1] if near else None))
    dec = sorted((e for e in ev if "resample" in e["name"] or "normalize" in e["name"]),
                 key=lambda e: e["ts"])
    return main, m, gaps, dec


def report(ev, min_ms, top, out=sys.stdout):
    main, m, gaps, dec = analyse(ev, min_ms * 1e3)
    t0 = m[0]["ts"]
    span = (m[-1]["ts"] + m[-1]["dur"] - t0) / 1e3
    idle = sum(g[2] for g in gaps) / 1e3
    print("step stream %s: %d records over %.1f ms; %d gaps over %.2f ms, %.2f ms idle (%.1f%%)"
          % (main, len(m), span, len(gaps), min_ms, idle, 100.0 * idle / span if span else 0),
          file=out)
    for a, b, g, rel in gaps[:top]:
        why = "-"
        if rel:
            why = "%s on stream %s (ended %+.0f us)" % (rel["name"][:48], rel.get("tid"),
                                                      rel["ts"] + rel["dur"] - b["ts"])
        print("  at %9.2f ms idle %6.2f ms  after %-28s before %-28s released by %s"
              % ((a["ts"] + a["dur"] - t0) / 1e3, g / 1e3, a["name"][:28], b["name"][:28], why),
              file=out)
    if dec:
        print("decode threads' resample / normalise kernels:", file=out)
        for e in dec[:2 * top]:
            print("  %-32s stream %-4s at %9.2f ms for %.3f ms"
                  % (e["name"][:32], e.get("tid"), (e["ts"] - t0) / 1e3, e["dur"] / 1e3), file=out)
    return main, gaps


def self_test():
    ev = [  # the step's stream (1): busy, idle 2 ms, busy; stream 2's copy ends 10 us before
        {"name": "conv", "ph": "X", "ts": 0.0, "dur": 1000.0, "tid": 1},
        {"name": "bn", "ph": "X", "ts": 1000.0, "dur": 4000.0, "tid": 1},
        {"name": "memcpy DtoD", "ph": "X", "ts": 7000.0, "dur": 100.0, "tid": 1},
        {"name": "memcpy HtoD", "ph": "X", "ts": 6000.0, "dur": 990.0, "tid": 2},
        {"name": "resample_kernel<float, false>", "ph": "X", "ts": 100.0, "dur": 50.0, "tid": 3},
        {"name": "meta", "ph": "M", "tid": 9},
    ]
    import io
    buf = io.StringIO()
    main, gaps = report(ev, 0.3, 10, buf)
    text = buf.getvalue()
    ok = (main == 1 and len(gaps) == 1 and abs(gaps[0][2] - 2000.0) < 1e-6
          and gaps[0][3]["name"] == "memcpy HtoD" and "released by memcpy HtoD on stream 2"
          in text and "resample_kernel" in text)
    print(text, end="")
    print("  %s timeline_gaps.self_test: one 2 ms gap, released by stream 2's copy"
          % ("ok  " if ok else "FAIL"))
    print("%d passed, %d failed" % (1 if ok else 0, 0 if ok else 1))
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace", nargs="?")
    ap.add_argument("--min-ms", type=float, default=0.3)
    ap.add_argument("--top", type=int, default=40)
    a = ap.parse_args()
    if not a.trace:
        return self_test()
    try:
        ev = load(a.trace)
    except (OSError, ValueError, KeyError) as e:
        print("timeline_gaps.py: cannot read %s: %s" % (a.trace, e), file=sys.stderr)
        print("hint: pass the JSON file CTRAIN_TIMELINE wrote (not FILE.txt)", file=sys.stderr)
        return 2
    if not ev:
        print("timeline_gaps.py: %s holds no records" % a.trace, file=sys.stderr)
        return 2
    report(ev, a.min_ms, a.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
