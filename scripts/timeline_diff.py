#!/usr/bin/env python3
"""timeline_diff.py — two CTRAIN_TIMELINE summaries side by side: which
kernels take longer in the second run, per step.

  timeline_diff.py A.txt B.txt [--top N]
  timeline_diff.py --self-test

A and B are the FILE.txt summaries that CTRAIN_TIMELINE writes
(train/timeline.h), e.g. one GPU against rank 0 of two:

  CTRAIN_TIMELINE=/tmp/one.json ctrain train --model bert-large ... --graph
  CTRAIN_TIMELINE=/tmp/two.json ctrain train --gpus 2 --model bert-large ... --graph
  scripts/timeline_diff.py /tmp/one.json.txt /tmp/two.json.rank0.txt

It prints both summaries' head lines (span and busy time per step, per
stream), then every name whose milliseconds per step differ, largest
difference first: ms/step in A and B, the difference, calls per step in
both, and the change of the mean duration of one call (a kernel that runs
as often but slower was slowed by something running beside it; one that
runs more often is new work).
"""
import argparse
import os
import sys
import tempfile


def read_summary(path):
    """(head lines, {name: (calls_per_step, ms_per_step, mean_us)})."""
    head, table, part = [], {}, "head"
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("name\tcalls_per_step"):
                part = "table"
            elif part == "head" and line.lstrip().startswith("ms/step"):
                part = "top"   # the per-name rows: the table below has them all
            elif part == "head":
                head.append(line)
            elif part == "table":
                parts = line.split("\t")
                if len(parts) == 4:
                    table[parts[0]] = tuple(float(x) for x in parts[1:])
    if part != "table":
        raise ValueError(f"{path}: no per-name table (is it a CTRAIN_TIMELINE summary?)")
    return head, table


def diff(a, b, top):
    """Rows (name, ms_a, ms_b, delta, calls_a, calls_b, mean_a, mean_b), largest |delta| first."""
    rows = []
    for name in set(a) | set(b):
        ca, ma, ua = a.get(name, (0.0, 0.0, 0.0))
        cb, mb, ub = b.get(name, (0.0, 0.0, 0.0))
        if abs(mb - ma) < 1e-6:
            continue
        rows.append((name, ma, mb, mb - ma, ca, cb, ua, ub))
    rows.sort(key=lambda r: -abs(r[3]))
    return rows[:top]


def report(pa, pb, top, out=sys.stdout):
    ha, ta = read_summary(pa)
    hb, tb = read_summary(pb)
    print(f"A: {pa}", file=out)
    for line in ha:
        print("   " + line, file=out)
    print(f"B: {pb}", file=out)
    for line in hb:
        print("   " + line, file=out)
    total_a, total_b = sum(v[1] for v in ta.values()), sum(v[1] for v in tb.values())
    print(f"all events: {total_a:.3f} -> {total_b:.3f} ms/step ({total_b - total_a:+.3f})", file=out)
    print(f"{'A ms':>9} {'B ms':>9} {'B-A ms':>9} {'calls A':>8} {'calls B':>8} {'mean us A':>10} "
          f"{'mean us B':>10}  name", file=out)
    rows = diff(ta, tb, top)
    for name, ma, mb, d, ca, cb, ua, ub in rows:
        print(f"{ma:9.3f} {mb:9.3f} {d:+9.3f} {ca:8.1f} {cb:8.1f} {ua:10.2f} {ub:10.2f}  {name}", file=out)
    return rows


def self_test():
    ok = fail = 0

    def check(name, cond, detail=""):
        nonlocal ok, fail
        if cond:
            ok += 1
        else:
            fail += 1
            print(f"  FAIL {name} {detail}")

    body = ("ctrain timeline, rank 0, steps 10 to 14 (out of memory: records dropped)\n"
            "timeline: 10 events over 5 steps, 33.000 ms a step (window 165.000 ms)\n"
            "  stream      busy ms/step   events/step\n"
            "  7                 30.000           2.0\n"
            "  any stream busy 30.000 ms/step; two or more streams at once 0.000 ms/step\n"
            "  ms/step   calls     mean us   share   name\n"
            "     20.000      10.0   2000.00  66.7%  gemm\n"
            "# per name, tab-separated (scripts/timeline_diff.py)\n"
            "name\tcalls_per_step\tms_per_step\tmean_us\n")
    with tempfile.TemporaryDirectory() as d:
        pa, pb = os.path.join(d, "a.txt"), os.path.join(d, "b.txt")
        with open(pa, "w") as f:
            f.write(body + "gemm\t10.000\t20.000000\t2000.000\nln\t5.000\t1.000000\t200.000\n")
        with open(pb, "w") as f:
            f.write(body + "gemm\t10.000\t22.000000\t2200.000\nln\t5.000\t1.000000\t200.000\n"
                    "nccl allreduce\t14.000\t3.500000\t250.000\n")
        head, _ = read_summary(pa)
        check("head: the first line (its warning) kept, the per-name rows left out",
              len(head) == 5 and "records dropped" in head[0] and not any("gemm" in h for h in head),
              str(head))
        with open(os.devnull, "w") as null:
            rows = report(pa, pb, 10, null)
        check("the new kernel first", rows and rows[0][0] == "nccl allreduce", str(rows))
        check("gemm slower by 2 ms, same calls", any(r[0] == "gemm" and abs(r[3] - 2.0) < 1e-9
                                                      and r[4] == r[5] for r in rows), str(rows))
        check("an unchanged kernel left out", all(r[0] != "ln" for r in rows), str(rows))
        with open(pa, "w") as f:
            f.write("not a summary\n")
        try:
            read_summary(pa)
            check("a file without the table is refused", False)
        except ValueError as e:
            check("a file without the table is refused", "no per-name table" in str(e), str(e))
    print(f"{ok} passed, {fail} failed")
    return 0 if fail == 0 else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a", nargs="?")
    ap.add_argument("b", nargs="?")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    if not args.a or not args.b:
        ap.error("give two summaries (FILE.txt of CTRAIN_TIMELINE), or --self-test")
    try:
        report(args.a, args.b, args.top)
    except (OSError, ValueError) as e:
        sys.exit(f"timeline_diff: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
