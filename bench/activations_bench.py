#!/usr/bin/env python3
"""Plain C loops at machine speed: SiLU and a row softmax on float32
[4096, 4096], written as plain loops (examples/activations) and built with
opcore's default flags, against torch eager, torch.compile and the same
loops built with -ffast-math.

The -ffast-math build runs in a child process: GCC (before 13) links
crtfastmath.o into a -ffast-math shared library, and loading it flushes
denormals for the whole process (torch included). The child measures it
paired with torch eager; the default build's speed relative to it is the
ratio of the two paired ratios.

Writes bench/results/activations.json (bench/report.py format).

    python bench/activations_bench.py [--rows N] [--rounds R]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import benchlib  # noqa: E402

REPO = os.path.dirname(HERE)
ACT = os.path.join(REPO, "examples", "activations")
RESULTS = os.path.join(HERE, "results")
OPS = ("silu", "softmax")


def load(build_root, namespace, cflags=()):
    return benchlib.load_renamed(build_root, namespace, os.path.join(ACT, "shape.c"),
                                 [os.path.join(ACT, "activations.c")], "act_ops", cflags=cflags)


def torch_fn(name):
    return torch.nn.functional.silu if name == "silu" else (lambda t: torch.softmax(t, dim=-1))


def check(name, got, want):
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)  # a sanity check: tests/python/test_vecmath.py is the exact one


def fast_child(args):
    """-ffast-math loops, paired with torch eager; prints JSON."""
    with tempfile.TemporaryDirectory(prefix="opcore-act-fast-") as root:
        fast = load(root, "act_ops_fast", ["-ffast-math"])
        x = torch.randn(args.rows, args.cols) * 4
        out = {}
        for name in OPS:
            check(name, getattr(fast, name)(x), torch_fn(name)(x))
            s = benchlib.interleaved({"eager": lambda: torch_fn(name)(x), "fast": lambda: getattr(fast, name)(x)},
                                   args.rounds, args.reps, warmup=2)
            out[name] = {"fast_s": benchlib.median(s["fast"]), "eager_s": benchlib.median(s["eager"]),
                         "fast_vs_eager": benchlib.paired_ratio(s, "eager", "fast")}
    print(json.dumps(out))


# Every candidate allocates its [4096, 4096] result per call, and the first
# writes to a fresh 64 MB buffer page-fault (glibc maps it anew each time):
# this row, allocation and first touch alone, is the floor under the
# candidates. opcore advises its fresh results as huge pages (one fault per
# 2 MiB instead of 4 KiB: docs/engine.md); torch does so only with
# THP_MEM_ALLOC_ENABLE=1. The kernels are compared with both sides on huge
# pages, and with both on 4 KiB pages, each in its own process; the gain of
# opcore's huge-page results over torch's defaults is a row of its own.
FLOOR = "floor: a fresh result's allocation and first touch (torch.empty_like(x).fill_)"
FLOOR_WHAT = "the floor row: a fresh result's allocation and first touch, on the same pages"
OC = "opcore plain loop, default flags"
PAGES = {"huge": "both on huge pages", "4k": "both on 4 KiB pages",
         "gain": "opcore's huge-page results vs torch's 4 KiB pages"}


def measure(args):
    """One page policy (this process's environment): every candidate,
    interleaved; prints JSON {op: {"ms": {...}, "vs eager": {...}, ...}}."""
    with tempfile.TemporaryDirectory(prefix="opcore-act-") as root:
        ops = load(root, "act_ops")
        x = torch.randn(args.rows, args.cols) * 4
        out = {}
        for name in OPS:
            eager = torch_fn(name)
            cands = {"torch eager": lambda: eager(x), OC: lambda: getattr(ops, name)(x)}
            if args.policy != "gain":
                compiled = torch.compile(eager, fullgraph=True)
                cands["torch.compile"] = lambda: compiled(x)
                cands[FLOOR] = lambda: torch.empty_like(x).fill_(1.0)
                if name == "softmax":
                    plain = "opcore, reductions as plain s += y[j] loops"
                    cands[plain] = lambda: ops.softmax_plain(x)
            for cand, fn in cands.items():
                if cand != FLOOR:
                    check(name, fn(), eager(x))
            s = benchlib.interleaved(cands, args.rounds, args.reps, warmup=2)
            out[name] = {c: {"ms": benchlib.median(s[c]) * 1e3,
                             "vs eager": benchlib.paired_ratio(s, "torch eager", c),
                             "vs compile": (benchlib.paired_ratio(s, "torch.compile", c)
                                            if "torch.compile" in s else None)} for c in cands}
    print(json.dumps(out))


def child(cmd, policy, what):
    p = subprocess.run(cmd, capture_output=True, text=True, env=benchlib.policy_env(policy))
    if p.returncode != 0:
        raise SystemExit(f"the {what} child ({policy}) failed:\n{p.stdout}{p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--results", default=RESULTS)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--policy", choices=benchlib.POLICIES, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return fast_child(args)
    if args.policy:
        return measure(args)

    benchlib.banner()
    base = [sys.executable, os.path.abspath(__file__), "--rows", str(args.rows), "--cols",
            str(args.cols), "--rounds", str(args.rounds), "--reps", str(args.reps)]
    nbytes = args.rows * args.cols * 4
    got = {pol: child(base + ["--policy", pol], pol, "measuring") for pol in benchlib.POLICIES}
    fast = child(base + ["--child"], "huge", "-ffast-math")
    path = {"opcore": benchlib.native_path(), "torch": benchlib.torch_path()}
    rows, targets = [], []
    for name in OPS:
        for pol in benchlib.POLICIES:
            env = benchlib.policy_env(pol)
            pages = {"opcore": benchlib.page_policy("opcore", nbytes, env),
                     "torch": benchlib.page_policy("torch", nbytes, env)}
            for cand, m in got[pol][name].items():
                if pol == "gain" and cand != OC:
                    continue
                label = cand if pol != "gain" else f"{cand}: the huge-page output gain"
                rows.append(benchlib.tag({"op": name, "implementation": label,
                                          "ms": m["ms"], "speed vs torch eager": m["vs eager"],
                                          "speed vs torch.compile": m["vs compile"]},
                                         pages=pages, path=path, gain=pol == "gain"))
            if pol == "gain":
                continue
            m, floor = got[pol][name][OC], got[pol][name][FLOOR]
            for peer, key in (("torch eager", "vs eager"), ("torch.compile", "vs compile")):
                targets.append({"metric": f"{name}, plain C loop at default flags, {PAGES[pol]}: "
                                          f"speed vs {peer}", "min": 1.0, "value": m[key],
                                "met": m[key] >= 1.0, "ceiling": floor[key],
                                "ceiling_what": FLOOR_WHAT})
        f = fast[name]
        vs_fast = got["huge"][name][OC]["vs eager"] / f["fast_vs_eager"]
        pages = {"opcore": benchlib.page_policy("opcore", nbytes, benchlib.policy_env("huge")),
                 "torch": benchlib.page_policy("torch", nbytes, benchlib.policy_env("huge"))}
        rows.append(benchlib.tag({"op": name,
                                  "implementation": "opcore plain loop, -ffast-math (own process)",
                                  "ms": f["fast_s"] * 1e3, "speed vs torch eager": f["fast_vs_eager"]},
                                 pages=pages, path=path))
        targets.append({"metric": f"{name}, default flags / -ffast-math (speed, via torch eager)",
                        "min": 0.95, "value": vs_fast, "met": vs_fast >= 0.95})
    benchlib.write("activations.json", results=args.results, obj={
        "title": f"Plain C loops: SiLU and row softmax, float32 [{args.rows}, {args.cols}]",
        "order": 45,
        "rows": rows,
        "columns": ["op", "pages", "implementation", "ms", "speed vs torch eager",
                    "speed vs torch.compile", "path"],
        "target": targets,
        "notes": ("examples/activations: SiLU `y = x / (1 + expf(-x))` and softmax over the last dim "
                  "(oc_max_f32, an expf loop, oc_sum_f32, a scaling loop), multicore, plain loops over the "
                  "tensors' memory, called through torch.ops. Default flags: -O3 -march=native "
                  "-fno-math-errno -fno-trapping-math, with opcore/vecmath.h's libmvec declarations "
                  "(docs/build.md). 'speed vs X' = X's time / this time, median of per-round paired "
                  f"ratios over {args.rounds} interleaved rounds of {args.reps} calls; torch uses "
                  f"{torch.get_num_threads()} threads, opcore every engine core. Each page policy runs "
                  "in its own process: both sides on huge pages (torch with THP_MEM_ALLOC_ENABLE=1), "
                  "both on 4 KiB pages (opcore with OC_HUGEPAGE_OUTPUTS=0), and the defaults (opcore "
                  "advises its fresh results of 4 MiB or more as huge pages, torch does not): that last "
                  "row is the huge-page output gain, not the kernels'. The floor row allocates and "
                  "first-touches a fresh result and computes nothing. The -ffast-math build runs in its "
                  "own process (crtfastmath would flush denormals here), both sides on huge pages, "
                  "paired there with torch eager."),
        "raw": {"fast_child": fast, "policies": got},
    })
    for r in rows:
        print(f"{r['op']:8} {r['pages'][:20]:20} {r['implementation'][:48]:48} {r['ms']:8.2f} ms  "
              f"{r['speed vs torch eager']:.2f}x eager")
    for t in targets:
        print(f"target: {t['metric']}: {t['value']:.3f} ({'met' if t['met'] else 'NOT met'})")

if __name__ == "__main__":
    sys.exit(main())
