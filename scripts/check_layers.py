#!/usr/bin/env python3
"""Check that the C runtime's layers call only downward (docs/architecture.md).

Each folder of src/ is a layer; LAYERS below lists them bottom first. A file
may include a header of its own folder or of a lower layer, never of a higher
one or of another folder on its level. With --objects (the build's object
folder), the same rule is checked on calls: a symbol an object uses and
another object defines is an edge, found with `nm`. Both kinds of edge then
make one graph of files (x.c and x.h are one node), and no circle of files
may span two folders. Inside one folder, a circle of calls between files is
allowed only in the folders of INSIDE_CIRCLES_OK (includes are not counted
there: one header may declare the functions of several files).

Exit 0 and print a summary when the layering holds; exit 1 naming each
offending file, include or call otherwise.
"""
import argparse
import collections
import os
import re
import subprocess
import sys

# Bottom first; folders on one level (a tuple) may not use each other.
LAYERS = [
    ("core",),                  # status, dtypes, tensors, the call context (oc_ctx)
    ("profiler",),              # the sink: hooks the layers above call; calls only core
    ("engine",),                # cores, kernel stacks, faults, the pool, TCM
    ("library",),               # loading libraries, schemas, the op registry
    ("kernel",),                # what a kernel calls: context, accessors, streams, iterator
    ("ops", "tile"),            # opcore's own tensor ops and the tile layer, on the kernel API
    ("host",),                  # the call path: binding, shape inference, running
    ("build",),                 # the build tool (opcore build, the cache)
    ("cli", "python", "jax"),   # front ends: the CLI, Python, JAX
]
# A folder whose other headers are its own: from outside, only these.
FACADES = {"profiler": {"profiler/hooks.h"}}
# Folders that stay one unit of mutually calling files (see docs/architecture.md).
INSIDE_CIRCLES_OK = {"engine"}

RANK = {folder: i for i, level in enumerate(LAYERS) for folder in level}
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder_of(path):
    return path.split("/", 1)[0]


def node_of(path):
    return os.path.splitext(path)[0]


def may_use(src, dst_path):
    """None if src's folder may use dst_path, else why not."""
    a, b = folder_of(src), folder_of(dst_path)
    if a == b:
        return None
    if a not in RANK or b not in RANK:
        return f"folder '{a if a not in RANK else b}' is not in check_layers.py's LAYERS"
    if RANK[b] > RANK[a]:
        return f"{a} may not use {b} ({b} is a higher layer)"
    if RANK[b] == RANK[a]:
        return f"{a} may not use {b} (one level: neither uses the other)"
    if b in FACADES and dst_path not in FACADES[b] and not dst_path.endswith(".c"):
        return f"from outside {b}, only {', '.join(sorted(FACADES[b]))} may be included"
    return None


def source_files(src):
    for root, _, files in os.walk(src):
        for f in sorted(files):
            if f.endswith((".c", ".h", ".cc")):
                yield os.path.relpath(os.path.join(root, f), src)


def include_edges(src):
    """(file, included header) for every internal include, relative to src/."""
    for rel in source_files(src):
        with open(os.path.join(src, rel), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        for inc in INCLUDE_RE.findall(text):
            here = os.path.normpath(os.path.join(os.path.dirname(rel), inc))
            if os.path.exists(os.path.join(src, here)):
                yield rel, here
            elif os.path.exists(os.path.join(src, inc)):
                yield rel, inc
            # else: a public header (include/opcore), a system or generated one


def call_edges(objdir):
    """(file, file, symbol): the first uses a global the second defines."""
    defs, uses = {}, collections.defaultdict(set)
    for root, _, files in os.walk(objdir):
        for f in sorted(files):
            if not f.endswith(".o"):
                continue
            obj = os.path.join(root, f)
            rel = os.path.relpath(obj, objdir)[:-2] + ".c"
            out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
            for line in out.splitlines():
                parts = line.split()
                if len(parts) == 3 and parts[1] in "TDBRVWGS":
                    defs[parts[2]] = rel
                elif len(parts) == 2 and parts[0] == "U":
                    uses[rel].add(parts[1])
    for user, syms in sorted(uses.items()):
        for sym in sorted(syms):
            owner = defs.get(sym)
            if owner and owner != user:
                yield user, owner, sym


def circles(graph):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(max(10000, 4 * len(graph)))

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
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

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", default="src", help="the source tree (default: src)")
    ap.add_argument("--objects", help="the build's object folder (build/obj): check calls too")
    args = ap.parse_args()

    errors, graph, call_graph = [], collections.defaultdict(set), collections.defaultdict(set)
    includes = list(include_edges(args.src))
    for rel, hdr in includes:
        why = may_use(rel, hdr)
        if why:
            errors.append(f"src/{rel}: #include \"{hdr}\": {why}")
        if node_of(rel) != node_of(hdr):
            graph[node_of(rel)].add(node_of(hdr))
    calls = list(call_edges(args.objects)) if args.objects else []
    for user, owner, sym in calls:
        why = may_use(user, owner)
        if why:
            errors.append(f"src/{user}: calls {sym} (src/{owner}): {why}")
        graph[node_of(user)].add(node_of(owner))
        call_graph[user].add(owner)

    for comp in circles(graph):
        if len({folder_of(n) for n in comp}) > 1:
            errors.append("circle of files across folders: " + ", ".join(comp))
    inside = []
    for comp in circles(call_graph):
        folder = folder_of(comp[0])
        if len({folder_of(n) for n in comp}) > 1:
            continue  # reported above
        if folder not in INSIDE_CIRCLES_OK:
            errors.append(f"circle of calls between files of {folder}/ (allowed only in "
                          f"{', '.join(sorted(INSIDE_CIRCLES_OK))}/): " + ", ".join(comp))
        else:
            inside.append(f"{folder}/ ({len(comp)} files)")

    if errors:
        for e in errors:
            print("check-layers: " + e, file=sys.stderr)
        print(f"check-layers: FAILED, {len(errors)} offence(s); the order is "
              + " < ".join("/".join(level) for level in LAYERS) + " (docs/architecture.md)",
              file=sys.stderr)
        return 1
    print(f"check-layers: ok: {len(includes)} internal includes"
          + (f", {len(calls)} calls between files" if args.objects else "")
          + " follow " + " < ".join("/".join(level) for level in LAYERS)
          + "; no circle of files across folders"
          + (f"; one-unit folders: {', '.join(inside)}" if inside else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
