#!/usr/bin/env python3
"""Instructions per custom call inside a jitted graph: opcore against a C++
XLA FFI handler, counted (not timed), split by where they run.

The graph is jax_ffi_bench's chain: 100 dependent 1-element rms_norm calls
(JAX's FFI tutorial handler, -O3, against examples/jax_ffi/rms_norm). Each
side runs under callgrind, collecting only inside XLA's custom-call thunk
(`xla::cpu::CustomCallThunk::Execute`), twice (a few and many runs of the
graph): the difference divided by the extra calls is the steady-state cost
of one call, free of start-up and first-call work, and of the machine's
load. Instructions are attributed to the object they run in: XLA's own
machinery (jaxlib, libstdc++: the same code for both, plus the per-call-site
state lookup opcore's handler asks for), libc and ld.so (called by all of
them), the handler, libopcore (the runtime), the kernel.

    python bench/jax_call_instructions.py [--runs 3,13] [--cache]

Writes bench/results/jax_call_instructions.json. Needs valgrind (a few
minutes: XLA runs under callgrind).

--cache adds what a single call from Python costs in cache misses: one
1-element ReLU per jitted function called from a Python loop (as
jax_ffi_bench's one-call rows), the whole process under callgrind's cache
simulation (its L1 and last-level caches; Python's and JAX's own work
between the calls evicts what a call touched before), 300 and 1300 calls,
the difference per call; misses counted in the handler's objects
(libopcore, opcore's handler, the kernel; the C++ handler's library).
About ten more minutes.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import benchlib  # noqa: E402

REPO = os.path.dirname(HERE)
CHAIN = 100


def child(which, runs):
    import numpy as np
    import jax
    import jax.numpy as jnp
    import jax_ffi_bench as jb
    import opcore.jax as ojax
    from opcore import custom_op

    root = tempfile.mkdtemp(prefix="opcore-jax-insn-")
    keep = jb.build_cpp(jax, root)  # noqa: F841 (stays loaded)
    src = os.path.join(REPO, "examples", "jax_ffi", "rms_norm")
    custom_op.load(name="jax_ffi_rms_norm", compute_srcs=[os.path.join(src, "rms_norm.c")],
                   shape_srcs=[os.path.join(src, "shape.c")])
    oc_rms = ojax.op("jax_ffi_rms_norm::rms_norm")

    def cpp_rms(x):
        return jax.ffi.ffi_call("oc_bench_cpp_rms_norm", jax.ShapeDtypeStruct(x.shape, x.dtype))(
            x, eps=np.float32(1e-5))

    one = cpp_rms if which == "cpp" else (lambda x: oc_rms(x, eps=1e-5))

    def run(x):
        for _ in range(CHAIN):
            x = one(x) + 1.0
        return x

    f = jax.jit(run)
    x = jnp.ones((1,), jnp.float32)
    for _ in range(runs):
        f(x).block_until_ready()


def child_one_call(which, calls):
    """`calls` single calls of a jitted 1-element ReLU from Python."""
    import jax
    import jax.numpy as jnp
    import jax_ffi_bench as jb
    import opcore.jax as ojax

    root = tempfile.mkdtemp(prefix="opcore-jax-cache-")
    keep = jb.build_cpp(jax, root)  # noqa: F841 (stays loaded)
    jb.build_opcore(root)  # both sides load it (and torch, through benchlib): the same process image
    oc_relu = ojax.op("jax_ffi_bench::relu_forward")
    cpp = jax.jit(lambda x: jax.ffi.ffi_call("oc_bench_cpp_relu", jax.ShapeDtypeStruct(x.shape, x.dtype))(x))
    f = cpp if which == "cpp" else jax.jit(lambda x: oc_relu(x))
    x = jnp.ones(1, jnp.float32)
    for _ in range(100 + calls):
        f(x).block_until_ready()


ONE_CALL = "one call from Python: "
CACHE_NOTE = (" The one-call rows count events, not instructions only: Ir instructions, I1mr and D1mr / D1mw "
              "first-level instruction and data misses (reads / writes), ILmr / DLmr / DLmw last-level misses, "
              "per call, in the handler's objects only (libopcore, opcore's handler and the kernel; the C++ "
              "handler's library), under callgrind's cache simulation of the whole process, 300 and 1300 "
              "calls of a jitted 1-element ReLU from Python.")
CACHE_EVENTS = ["Ir", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw"]
HANDLER_OBJECTS = ("libopcore", "opcore_jax_ffi", "libjax_ffi_bench", "librelu_ffi")


def callgrind(child_args, events, *options):
    """Run this script with `child_args` under callgrind (`options`); yield
    ([count per event], function, object) for each function it saw."""
    out = tempfile.NamedTemporaryFile(prefix="opcore-cg-", delete=False).name
    # valgrind cannot decode AVX-512: the kernels it runs target AVX2 (as make test-valgrind's)
    env = dict(os.environ, OPCORE_MARCH=os.environ.get("OPCORE_MARCH", "x86-64-v3"))
    subprocess.run(["valgrind", "--tool=callgrind", *options, f"--callgrind-out-file={out}", sys.executable,
                    os.path.abspath(__file__), *child_args],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    text = subprocess.run(["callgrind_annotate", "--threshold=100", "--show=" + ",".join(events), out],
                          check=True, capture_output=True, text=True).stdout
    os.unlink(out)
    num = r"\s*(?:([\d,]+) \([^)]*\)|\.)"  # a count with its share, or "." for none
    pat = re.compile("^" + num * len(events) + r"\s+(\S.*?)\s*(\[(.*)\])?$")
    for line in text.splitlines():
        m = pat.match(line)
        if m and "PROGRAM TOTALS" not in line:
            counts = [int((m.group(i + 1) or "0").replace(",", "")) for i in range(len(events))]
            yield counts, m.group(len(events) + 1), m.group(len(events) + 3) or ""


def cache_counted(which, calls):
    """{event: count} in the handler's objects, whole process, `calls` calls."""
    got = dict.fromkeys(CACHE_EVENTS, 0)
    for counts, _, obj in callgrind(["--child-one-call", which, str(calls)], CACHE_EVENTS, "--cache-sim=yes"):
        if any(o in obj for o in HANDLER_OBJECTS):
            for ev, n in zip(CACHE_EVENTS, counts):
                got[ev] += n
    return got


def cache_rows(lo=300, hi=1300):
    from concurrent.futures import ThreadPoolExecutor
    jobs = [(w, n) for w in ("cpp", "oc") for n in (lo, hi)]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        res = dict(zip(jobs, pool.map(lambda j: cache_counted(*j), jobs)))
    rows = []
    for which, name in (("cpp", "C++ XLA FFI handler"), ("oc", "opcore (opcore.jax)")):
        for ev in CACHE_EVENTS:
            rows.append({"implementation": name, "where": f"{ONE_CALL}{ev} in the handler's objects",
                         "instructions per call": round((res[which, hi][ev] - res[which, lo][ev]) / (hi - lo), 1)})
    return rows


def where(obj):
    if "libopcore" in obj:
        return "libopcore (runtime)"
    if "opcore_jax_ffi" in obj:
        return "handler"
    if "librelu_ffi" in obj:
        return "handler"  # the C++ handler and its kernel share one object: split below by function
    if "libjax_ffi_rms_norm" in obj:
        return "kernel"
    if "libc.so" in obj or "ld-linux" in obj:
        return "libc, ld.so (XLA's, the handler's and libopcore's calls)"
    return "XLA (jaxlib, libstdc++)"


def counted(which, runs):
    """Instructions inside the custom-call thunk, by place, for `runs` runs."""
    places = {}
    for (n,), fn, obj in callgrind(["--child", which, str(runs)], ["Ir"], "--collect-atstart=no",
                                   "--toggle-collect=xla::cpu::CustomCallThunk::Execute*"):
        place = where(obj)
        if "librelu_ffi" in obj and "RmsNormImpl" in fn:
            place = "kernel"
        places[place] = places.get(place, 0) + n
    return places


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", default="3,13", help="graph runs of the short and the long count")
    ap.add_argument("--cache", action="store_true", help="also count cache misses of one call from Python")
    ap.add_argument("--cache-only", action="store_true",
                    help="count only those, replacing them in an existing results file")
    ap.add_argument("--child", nargs=2, metavar=("WHICH", "RUNS"), help=argparse.SUPPRESS)
    ap.add_argument("--child-one-call", nargs=2, metavar=("WHICH", "CALLS"), help=argparse.SUPPRESS)
    ap.add_argument("--results", default=os.path.join(HERE, "results"))
    args = ap.parse_args()
    if args.child:
        return child(args.child[0], int(args.child[1]))
    if args.child_one_call:
        return child_one_call(args.child_one_call[0], int(args.child_one_call[1]))
    if args.cache_only:
        path = os.path.join(args.results, "jax_call_instructions.json")
        with open(path) as f:
            obj = json.load(f)
        obj["rows"] = [r for r in obj["rows"] if not r["where"].startswith(ONE_CALL)] + cache_rows()
        obj["notes"] = obj["notes"].split(CACHE_NOTE)[0] + CACHE_NOTE
        return benchlib.write("jax_call_instructions.json", results=args.results, obj=obj)
    lo, hi = (int(r) for r in args.runs.split(","))
    calls = (hi - lo) * CHAIN
    rows, per = [], {}
    for which, name in (("cpp", "C++ XLA FFI handler"), ("oc", "opcore (opcore.jax)")):
        a, b = counted(which, lo), counted(which, hi)
        per[which] = {k: (b.get(k, 0) - a.get(k, 0)) / calls for k in set(a) | set(b)}
        total = sum(per[which].values())
        for place, n in sorted(per[which].items()):
            rows.append({"implementation": name, "where": place, "instructions per call": round(n, 1)})
        rows.append({"implementation": name, "where": "total", "instructions per call": round(total, 1)})
    cpp_total, oc_total = sum(per["cpp"].values()), sum(per["oc"].values())
    runtime = per["oc"].get("libopcore (runtime)", 0)
    ceiling = (oc_total - runtime) / cpp_total
    rows.append({"implementation": "opcore / C++", "where": "total", "instructions per call":
                 round(oc_total / cpp_total, 3)})
    rows.append({"implementation": "opcore / C++ without libopcore's runtime (ceiling)", "where": "total",
                 "instructions per call": round(ceiling, 3)})
    notes = ""
    if args.cache:
        rows += cache_rows()
        notes = CACHE_NOTE
    benchlib.write("jax_call_instructions.json", results=args.results, obj={
        "title": "JAX: instructions per custom call in a jitted chain (callgrind), by where they run",
        "order": 52,
        "rows": rows,
        "columns": ["implementation", "where", "instructions per call"],
        "notes": (f"100 dependent 1-element rms_norm calls per graph run; callgrind inside "
                  f"xla::cpu::CustomCallThunk::Execute only, {lo} and {hi} graph runs, the difference divided by "
                  f"{calls} calls. The ceiling row is opcore's count with libopcore's own instructions taken "
                  "out (the handler, XLA's part and the kernel kept): what a zero-cost runtime would reach.")
        + notes,
    })
    for r in rows:
        print(f"{r['implementation']:52} {r['where']:30} {r['instructions per call']:>9}")


if __name__ == "__main__":
    main()
