#!/usr/bin/env python3
"""circles.py - files of one folder that call each other in a circle.

    tools/circles.py [--max N] [--allow FOLDER ...] [--none FOLDER ...] [--verbose] [ROOT]

Reads the product's C files (ROOT: the source tree, default .), finds each
function's definition (at the start of a line, its body's brace on the next
one: the house style), and draws an arrow from file A to file B of the same
folder when A calls a function that B alone defines. A circle is a set of
files each reachable from every other by those arrows (a strongly connected
component). Prints every circle of more than one file, largest first, with
--verbose the arrows inside each; fails (exit 1) when one has more than N
files (default 3) in a folder not allowed, or any circle at all in a
folder given with --none (the engine's: a shard's step is layered, its
effects carried out by the files above the step). make check runs it with
the folders docs/DESIGN.md names.
"""
import argparse
import collections
import os
import re
import sys

FOLDERS = ["base", "model", "math", "gpu", "storage", "net", "ctrl", "metrics", "rdma",
           "client", "engine", "server", "coord", "cli"]
DEF = re.compile(r"^(?!static\s+inline)[A-Za-z_][\w \t\*]*?\b([A-Za-z_]\w*)\s*\([^;]*$")


def strip(src):
    src = re.sub(r"/\*.*?\*/", "", src, flags=re.S)
    src = re.sub(r"//[^\n]*", "", src)
    return re.sub(r'"(\\.|[^"\\])*"', '""', src)


def definitions(path):
    lines = strip(open(path, encoding="utf-8").read()).split("\n")
    out = set()
    for i, line in enumerate(lines):
        m = DEF.match(line)
        if not m:
            continue
        # the signature may run over lines; the body's brace starts a line
        for k in range(i + 1, min(i + 8, len(lines))):
            if lines[k].startswith("{"):
                out.add(m.group(1))
                break
            if lines[k].rstrip().endswith(";") or not lines[k].strip():
                break
    return out


def graph(root):
    defs = collections.defaultdict(set)
    files = []
    for f in FOLDERS:
        d = os.path.join(root, f)
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            if name.endswith(".c"):
                p = f + "/" + name
                files.append(p)
                for fn in definitions(os.path.join(root, p)):
                    defs[fn].add(p)
    edges = collections.defaultdict(set)
    for p in files:
        src = strip(open(os.path.join(root, p), encoding="utf-8").read())
        for fn in set(re.findall(r"\b([A-Za-z_]\w*)\s*\(", src)):
            owners = defs.get(fn, ())
            if len(owners) == 1:
                (q,) = owners
                if q != p and q.split("/")[0] == p.split("/")[0]:
                    edges[p].add(q)
    return files, edges


def circles(files, edges):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in files:
        if v not in index:
            visit(v)
    return sorted(out, key=lambda c: (-len(c), c))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max", type=int, default=3)
    ap.add_argument("--allow", action="append", default=[])
    ap.add_argument("--none", action="append", default=[])
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("root", nargs="?", default=".")
    a = ap.parse_args()
    files, edges = graph(a.root)
    bad = 0
    for comp in circles(files, edges):
        folder = comp[0].split("/")[0]
        over = (len(comp) > a.max and folder not in a.allow) or folder in a.none
        bad += over
        print("%s%d files: %s" % ("OVER: " if over else "", len(comp), " ".join(comp)))
        if a.verbose:
            for f in comp:
                print("    %s -> %s" % (f, " ".join(sorted(x for x in edges[f] if x in comp))))
    if bad:
        print("circles.py: %d circle(s) of more than %d files outside %s, or in %s" %
              (bad, a.max, ", ".join(a.allow) or "any allowed folder",
               ", ".join(a.none) or "no folder kept without any"), file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
