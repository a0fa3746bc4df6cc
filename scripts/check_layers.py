#!/usr/bin/env python3
"""check_layers.py — the layering rules of docs/design.md, checked on the code.

The source tree is a stack of layers; an arrow (an #include, or a call of a
function that another file defines) may only point to a lower layer:

    6  train/cli        the ctrain command: options, subcommands
    5  train/bench      the benchmark, soak, NVML, timeline, report
    4  train/loop       run builder, trainer, step, CUDA graphs, eval
    3  train/optim  train/feed  train/parallel  train/io      leaves the loop uses
    2  models
    1  ops  data
    0  engine

Within one folder files may use each other, but not in a circle. A file and
its header are one node ("ops/gelu" = gelu.c + gelu.cu + gelu.h), so a
module's CPU and CUDA halves are one room.

Usage:
    scripts/check_layers.py            self-test, then check the tree (ends "N passed, N failed")
    scripts/check_layers.py --graph    also print every arrow between folders
    scripts/check_layers.py --self-test
Exit status 0 when every rule holds.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LAYERS = {
    "engine": 0,
    "ops": 1, "data": 1,
    "models": 2,
    "train/optim": 3, "train/feed": 3, "train/parallel": 3, "train/io": 3,
    "train/loop": 4,
    "train/bench": 5,
    "train/cli": 6,
}
SOURCE_EXT = (".c", ".h", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# A definition: a line starting in column 0 with a return type and a name,
# the parameter list, and the body's brace (same line or a later one).
DEFINITION = re.compile(
    r'^(?!static\b|typedef\b|struct\b|enum\b|union\b|#)(?:extern\s+"C"\s+)?'
    r'[A-Za-z_][\w\s\*]*?\b([A-Za-z_]\w*)\s*\(([^;{}]*)\)\s*\{', re.M)
CALL = re.compile(r'\b([A-Za-z_]\w*)\s*\(')


def strip_comments_and_strings(text):
    """Blank out comments and string/char literals, keeping line structure."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * max(0, j - i - 2) + (c if j - i >= 2 else ""))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def folder_of(path):
    best = None
    for f in LAYERS:
        if path.startswith(f + "/") and (best is None or len(f) > len(best)):
            best = f
    return best


def node_of(path):
    return os.path.splitext(path)[0]


def read_tree(root):
    """{relative path: text} for every source file under the layered folders."""
    files = {}
    for top in ("engine", "ops", "data", "models", "train"):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if name.endswith(SOURCE_EXT):
                    full = os.path.join(dirpath, name)
                    rel = os.path.relpath(full, root).replace(os.sep, "/")
                    with open(full, encoding="utf-8", errors="replace") as fh:
                        files[rel] = fh.read()
    return files


def arrows(files):
    """{(node_a, node_b): set of reasons}: includes and cross-file calls."""
    edges = {}

    def add(a, b, why):
        if a != b:
            edges.setdefault((a, b), set()).add(why)

    clean = {p: strip_comments_and_strings(t) for p, t in files.items()}
    for p, text in files.items():
        for m in INCLUDE.finditer(text):
            inc = m.group(1)
            cand = os.path.normpath(os.path.join(os.path.dirname(p), inc)).replace(os.sep, "/")
            if cand not in files:
                cand = os.path.normpath(inc).replace(os.sep, "/")
            if cand in files:
                add(node_of(p), node_of(cand), "includes " + cand)
    # Functions defined once in the tree (a name defined in two nodes, e.g. a
    # CPU stub and its CUDA twin in different modules, names no single file).
    defined = {}
    for p, text in clean.items():
        if not p.endswith((".c", ".cu")):
            continue
        for m in DEFINITION.finditer(text):
            name = m.group(1)
            if name in ("if", "for", "while", "switch", "return", "sizeof"):
                continue
            defined.setdefault(name, set()).add(node_of(p))
    unique = {k: next(iter(v)) for k, v in defined.items() if len(v) == 1}
    for p, text in clean.items():
        if not p.endswith((".c", ".cu")):
            continue
        me = node_of(p)
        for m in CALL.finditer(text):
            target = unique.get(m.group(1))
            if target and target != me:
                add(me, target, "calls " + m.group(1))
    return edges


def circles(edges):
    """Strongly connected components of more than one node (Tarjan)."""
    graph = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        work = [(v, iter(sorted(graph[v])))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    advanced = True
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def check(files, show_graph=False, say=print):
    """Returns (passed, failed); says each rule's outcome (say=print)."""
    edges = arrows(files)
    passed = failed = 0
    upward = []
    between = {}
    for (a, b), why in sorted(edges.items()):
        fa, fb = folder_of(a), folder_of(b)
        if fa is None or fb is None or fa == fb:
            continue
        between.setdefault((fa, fb), []).append((a, b, sorted(why)))
        if LAYERS[fa] <= LAYERS[fb]:
            upward.append((a, b, sorted(why)))
    for fa, fb in sorted(between):
        ok = LAYERS[fa] > LAYERS[fb]
        if show_graph:
            say(f"  {'ok ' if ok else 'UP '} {fa} -> {fb} ({len(between[(fa, fb)])} arrows)")
    if upward:
        failed += 1
        say(f"FAIL layers: {len(upward)} arrow(s) run back up or sideways:")
        for a, b, why in upward:
            say(f"  {a} -> {b}: {', '.join(why[:4])}")
    else:
        passed += 1
        say(f"ok   layers: {sum(len(v) for v in between.values())} arrows between folders, all downward")
    circ = circles(edges)
    if circ:
        failed += 1
        say(f"FAIL circles: {len(circ)} circle(s) of files:")
        for c in circ:
            say("  " + " <-> ".join(c))
    else:
        passed += 1
        say(f"ok   circles: none among {len({n for e in edges for n in e})} files")
    eng = [(a, b) for (a, b) in edges if folder_of(a) == "engine" and folder_of(b) != "engine"]
    if eng:
        failed += 1
        say("FAIL engine: engine/ uses " + ", ".join(sorted({b for _, b in eng})))
    else:
        passed += 1
        say("ok   engine: uses nothing outside engine/")
    return passed, failed


def self_test():
    tree = {
        "engine/ctx.h": "int ctx_init(void);\n",
        "engine/ctx.c": '#include "ctx.h"\nint ctx_init(void)\n{\n    return 0;\n}\n',
        "ops/gelu.h": '#include "engine/ctx.h"\n',
        "ops/gelu.c": '#include "gelu.h"\nint gelu_cpu(int x)\n{\n    return ctx_init() + x; /* gelu_cuda( */\n}\n',
        "ops/gelu.cu": '#include "gelu.h"\nextern "C" int gelu_cuda(int x)\n{\n    return x;\n}\n',
        "models/mlp.c": '#include "ops/gelu.h"\nint mlp_forward(int x)\n{\n    return gelu_cpu(x);\n}\n',
    }
    passed = failed = 0

    def expect(name, cond):
        nonlocal passed, failed
        if cond:
            passed += 1
        else:
            failed += 1
            print("FAIL self-test " + name)

    e = arrows(tree)
    expect("include arrow", ("ops/gelu", "engine/ctx") in e)
    expect("call arrow", ("models/mlp", "ops/gelu") in e)
    expect("comment is no call", all("gelu_cuda" not in w for ws in e.values() for w in ws))
    expect("module is one node", ("ops/gelu", "ops/gelu") not in e)
    quiet = lambda *a: None
    p, f = check(tree, say=quiet)
    expect("clean tree passes", f == 0 and p == 3)
    bad = dict(tree)
    bad["engine/ctx.c"] = '#include "ctx.h"\n#include "ops/gelu.h"\nint ctx_init(void)\n{\n    return 0;\n}\n'
    p, f = check(bad, say=quiet)
    expect("upward include fails", f == 3)  # layers, the circle it makes, engine
    loop = dict(tree)
    loop["models/a.c"] = "int a_f(void)\n{\n    return b_f();\n}\n"
    loop["models/b.c"] = "int b_f(void)\n{\n    return a_f();\n}\n"
    expect("circle found", circles(arrows(loop)) == [["models/a", "models/b"]])
    expect("strip keeps lines", strip_comments_and_strings("a /* x\ny */ b").count("\n") == 1)
    return passed, failed


def main():
    """The self-test (on a small made-up tree), then the real tree."""
    sp, sf = self_test()
    if "--self-test" in sys.argv:
        print(f"{sp} passed, {sf} failed")
        sys.exit(0 if sf == 0 else 1)
    print(f"ok   self-test: {sp} checks of the checker" if sf == 0 else f"FAIL self-test: {sf} of {sp + sf}")
    p, f = check(read_tree(ROOT), show_graph="--graph" in sys.argv)
    print(f"{p + sp} passed, {f + sf} failed")
    sys.exit(0 if f + sf == 0 else 1)


if __name__ == "__main__":
    main()
