#!/usr/bin/env python3
"""timeline_diff.py — two CTRAIN_TIMELINE summaries side by side: which
kernels take longer in the second run, per step.

  timeline_diff.py A.txt B.txt [--top N]
  timeline_diff.py A.txt [B.txt] --by-kind
  timeline_diff.py --self-test

A and B are the FILE.txt summaries that CTRAIN_TIMELINE writes
(train/bench/timeline.h), e.g. one GPU against rank 0 of two:

  CTRAIN_TIMELINE=/tmp/one.json ctrain train --model bert-large ... --graph
  CTRAIN_TIMELINE=/tmp/two.json ctrain train --gpus 2 --model bert-large ... --graph
  scripts/timeline_diff.py /tmp/one.json.txt /tmp/two.json.rank0.txt

It prints both summaries' head lines (span and busy time per step, per
stream), then every name whose milliseconds per step differ, largest
difference first: ms/step in A and B, the difference, calls per step in
both, and the change of the mean duration of one call (a kernel that runs
as often but slower was slowed by something running beside it; one that
runs more often is new work).

--by-kind adds up the milliseconds per step by kind of work instead (GEMMs,
attention, normalisation, elementwise, the optimizer, communication, ...:
KINDS below, the first pattern that matches a kernel's name), for one
summary or two side by side: where a step's time goes at a glance.
"""
import argparse
import os
import re
import sys
import tempfile

# (kind, pattern on the kernel name); the first match wins, so the narrow
# patterns come before the broad ones (map_kernel<..., ActBwdF> is an activation)
KINDS = [
    ("communication (NCCL)", r"nccl"),
    ("GEMM (cuBLASLt)", r"nvjet|gemm|cutlass|cublas|xmma_gemm"),
    ("convolution (cuDNN)", r"conv|implicit_convolve|xmma|sm90_.*fprop|dgrad|wgrad"),
    ("attention", r"^tc_|^fa_|attn|attention|softmax"),
    ("layer norm", r"^ln_|layer_?norm"),
    ("batch norm", r"bn_|batch_?norm|bnFwd|bnBwd|cudnn"),
    ("activation", r"Act(Fwd|Bwd)F|gelu|relu|tanh"),
    ("dropout", r"dropout"),
    ("optimizer", r"sgd|adam|lamb|lr_fetch|advance_kernel|scaler|unscale"),
    ("embedding", r"^emb_|embedding|gather"),
    ("loss", r"^ce_|cross_entropy|nll"),
    ("bias gradients and sums", r"bias|reduce|sum"),
    ("copies, casts, fills", r"map_kernel|transpose|cast|Copy|memcpy|memset|fill"),
]


def kind_of(name):
    for kind, pat in KINDS:
        if re.search(pat, name):
            return kind
    return "other"


def by_kind(table):
    """{kind: ms per step} of one summary's per-name table."""
    out = {}
    for name, (_, ms, _) in table.items():
        k = kind_of(name)
        out[k] = out.get(k, 0.0) + ms
    return out


def report_kinds(paths, out=sys.stdout):
    """ms per step by kind for one or two summaries; returns [{kind: ms}]."""
    sums = [by_kind(read_summary(p)[1]) for p in paths]
    kinds = sorted(set().union(*sums), key=lambda k: -max(s.get(k, 0.0) for s in sums))
    for i, p in enumerate(paths):
        print(f"{'AB'[i]}: {p}", file=out)
    cols = "".join(f"{'ms ' + 'AB'[i]:>10}" for i in range(len(paths)))
    print(f"{cols}{'B-A ms':>10}  kind" if len(paths) == 2 else f"{cols}  kind", file=out)
    for k in kinds + ["all"]:
        v = [sum(s.values()) if k == "all" else s.get(k, 0.0) for s in sums]
        row = "".join(f"{x:10.3f}" for x in v)
        print(f"{row}{v[1] - v[0]:+10.3f}  {k}" if len(v) == 2 else f"{row}  {k}", file=out)
    return sums


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
        with open(os.devnull, "w") as null:
            sums = report_kinds([pa, pb], null)
        check("by kind: nccl is communication, ln_bwd layer norm",
              kind_of("ncclDevKernel_AllReduce_Sum_f32_RING_LL") == "communication (NCCL)"
              and kind_of("ln_bwd_finish_kernel") == "layer norm", "")
        check("by kind: the GELU backward map is an activation, a plain map a copy",
              kind_of("map_kernel<__nv_bfloat16, __nv_bfloat16, 8, 2, ActBwdF<(ActKind)1> >") == "activation"
              and kind_of("map_kernel<__nv_bfloat16, __nv_bfloat16, 8, 1, ScaleF>") == "copies, casts, fills"
              and kind_of("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT") == "GEMM (cuBLASLt)"
              and kind_of("tc_bwd_dkdv_kernel<__nv_bfloat16, 64>") == "attention", "")
        check("by kind: sums per kind", abs(sums[1].get("communication (NCCL)", 0) - 3.5) < 1e-9
              and abs(sums[0].get("GEMM (cuBLASLt)", 0) - 20.0) < 1e-9
              and abs(sums[0].get("other", 0) - 1.0) < 1e-9, str(sums))
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
    ap.add_argument("--by-kind", action="store_true", help="ms per step by kind of work")
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    if not args.a or (not args.b and not args.by_kind):
        ap.error("give two summaries (FILE.txt of CTRAIN_TIMELINE), one or two with --by-kind, "
                 "or --self-test")
    try:
        if args.by_kind:
            report_kinds([p for p in (args.a, args.b) if p])
        else:
            report(args.a, args.b, args.top)
    except (OSError, ValueError) as e:
        sys.exit(f"timeline_diff: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
