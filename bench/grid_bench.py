#!/usr/bin/env python3
"""The engine under load: launch grids and stalls next to torch's threads.

Part 1, stalls: the Neuron framework tutorial's add (examples/seed003, float32 [256, 1024], a
[2, 2] grid) through torch.ops with torch at its default threads, each call
right after a torch element-wise op (so torch's intra-op threads have just
run), with opcore's multicore shares lent to torch's threads and not lent;
for reference the direct call (lib.tensor_add, lent as torch.ops is since
direct calls on torch tensors lend too) and torch's own a + b. Per-call latency p50 / p90 / p99 over >= 2,000 calls each, the
candidates interleaved round by round. Then "right after a torch matmul vs
back to back" for both lending settings.

Part 2, grids: grid_bench::work (bench/kernels/grid) on grids [1, 1],
[2, 2], [7] (4 units each) and a causal flash-attention-shaped [b, h,
q-blocks] grid whose block q costs q + 1 units. Throughput against the
ideal: the sum of the instances' single-core times (each instance called
as a [1] grid of its own, one after the other, interleaved with the grid
launches so both see the same load) divided by the engine's cores (or the
instances, if fewer), over the grid launch's median time (1.0: perfect
balance, no overhead); latency p50 / p90 / p99.

Both parts run idle and under a background load the bench makes itself:
one busy-loop process per CPU, each bounded in time and stopped when the
part ends. Writes bench/results/grid.json (bench/report.py format).

    python bench/grid_bench.py [--calls N] [--grid-calls N] [--no-load]
"""
import argparse
import contextlib
import importlib.util
import os
import subprocess
import sys
import tempfile
import time

# Grid launches of a few bytes must still use every core (the bench's work
# kernel has tiny tensors and heavy compute); read when the engine starts.
os.environ.setdefault("OC_MIN_SPLIT_BYTES", "0")

import numpy as np  # noqa: E402
import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import benchlib  # noqa: E402
from opcore import _C, custom_op  # noqa: E402

REPO = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")
FLASH = (2, 4, 8)  # [b, h, q-blocks]
CEILING = "one thread, no waits: 3 x numpy.add of the same arrays"


@contextlib.contextmanager
def background_load(on, seconds=600):
    """One busy-loop process per CPU (each ends by itself after `seconds`),
    stopped when the block ends."""
    procs = []
    if on:
        loop = f"import time\nd = time.time() + {seconds}\nwhile time.time() < d: pass\n"
        procs = [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(os.cpu_count() or 1)]
        time.sleep(0.5)  # let them start spinning
    try:
        yield
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()


def percentiles(ns):
    a = np.asarray(ns, dtype=np.float64) / 1e3
    return {"p50 us": float(np.percentile(a, 50)), "p90 us": float(np.percentile(a, 90)),
            "p99 us": float(np.percentile(a, 99))}


def timed_calls(cands, rounds, per_round, before=None):
    """cands: {name: (setup, fn)}; each round runs every candidate's
    `per_round` calls (setup first), `before()` untimed before each call.
    Returns {name: [ns per call]}."""
    out = {name: [] for name in cands}
    names = list(cands)
    clock = time.perf_counter_ns
    for name in names:  # warm-up
        setup, fn = cands[name]
        setup()
        for _ in range(20):
            fn()
    for r in range(rounds):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            setup, fn = cands[name]
            setup()
            ts = out[name]
            for _ in range(per_round):
                if before is not None:
                    before()
                t0 = clock()
                fn()
                ts.append(clock() - t0)
    return out


def load_seed003(build_root):
    spec = importlib.util.spec_from_file_location("seed003", os.path.join(REPO, "examples", "seed003", "seed003.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.load(os.path.join(build_root, "seed003"))
    return mod


def stalls(cond, calls, after_rounds, lib_add):
    add = torch.ops.add_ops.tensor_add
    a, b = torch.randn(256, 1024), torch.randn(256, 1024)
    tmp = torch.empty_like(a)
    mm_a, mm_b = torch.randn(128, 128), torch.randn(128, 128)
    lend = lambda on: (lambda: _C._torch_native_lend_threads(on))  # noqa: E731
    none = lambda: None  # noqa: E731
    an, bn, on = a.numpy(), b.numpy(), tmp.numpy().copy()
    cands = {
        "torch.ops, shares lent to torch's threads": (lend(True), lambda: add(a, b)),
        "torch.ops, lending off": (lend(False), lambda: add(a, b)),
        "direct call lib.tensor_add": (lend(True), lambda: lib_add(a, b)),
        "torch a + b": (none, lambda: torch.add(a, b)),
        # The ceiling: a call of about the same length on one thread, which
        # waits on no other thread; what the OS does to it, it does to all.
        CEILING: (none, lambda: (np.add(an, bn, out=on), np.add(an, bn, out=on), np.add(an, bn, out=on))),
    }
    rounds = 10
    between = timed_calls(cands, rounds, -(-calls // rounds), before=lambda: torch.mul(a, b, out=tmp))
    rows = [{"condition": cond, "case": name + " (between torch ops)", "calls": len(ts), **percentiles(ts)}
            for name, ts in between.items()]

    # right after a torch matmul vs back to back, each lending setting
    ratios = {}
    numpy3 = cands[CEILING][1]
    for on in (True, False, None):
        setting = "lent" if on else "lending off" if on is not None else CEILING
        call = (lambda: add(a, b)) if on is not None else numpy3
        setup = lend(on) if on is not None else none
        pair = {"back to back": (setup, call), "after matmul": (setup, call)}
        per_round = {k: [] for k in pair}
        for r in range(after_rounds):
            bb = timed_calls({"back to back": pair["back to back"]}, 1, 100)["back to back"]
            am = timed_calls({"after matmul": pair["after matmul"]}, 1, 100,
                             before=lambda: torch.mm(mm_a, mm_b))["after matmul"]
            per_round["back to back"].append(benchlib.median(bb))
            per_round["after matmul"].append(benchlib.median(am))
        ratio = benchlib.paired_ratio(per_round, "after matmul", "back to back")
        ratios[setting] = ratio
        what = f"torch.ops ({setting})" if on is not None else setting
        rows.append({"condition": cond, "case": f"{what}: right after a torch matmul / back to back",
                     "ratio": ratio, "p50 us": benchlib.median(per_round["after matmul"]) / 1e3})
    _C._torch_native_lend_threads(False)  # the caller restores the default
    p50 = {name: percentiles(ts)["p50 us"] for name, ts in between.items()}
    p99 = {name: percentiles(ts)["p99 us"] for name, ts in between.items()}
    return rows, p50, p99, ratios


def grids(cond, work, ncores, grid_calls):
    cases = [("[1, 1]", (1, 1), [4]), ("[2, 2]", (2, 2), [4] * 4), ("[7]", (7,), [4] * 7),
             (f"causal flash [b, h, q-blocks] = {list(FLASH)}", FLASH,
              [q + 1 for _ in range(FLASH[0] * FLASH[1]) for q in range(FLASH[2])])]
    one = work[1]
    checksum = {c: float(one(torch.tensor([c], dtype=torch.int64))[0]) for _, _, us in cases for c in us}
    rows, flash_ratio = [], None
    for label, grid, units in cases:
        u = torch.tensor(units, dtype=torch.int64)
        singles = [torch.tensor([c], dtype=torch.int64) for c in units]
        op = work[grid]
        assert op(u).tolist() == [checksum[c] for c in units], f"grid {label}: wrong checksums"

        def serial():
            """Every instance as a single-core call of its own, one after the other."""
            for x in singles:
                one(x)
        # interleaved: the grid's launches and the serial passes see the same machine moments
        ts = timed_calls({"grid": (lambda: None, lambda: op(u)), "serial": (lambda: None, serial)}, 5,
                         -(-grid_calls // 5))
        ideal = benchlib.median(ts["serial"]) / min(ncores, len(units))
        p = percentiles(ts["grid"])
        ratio = ideal / 1e3 / p["p50 us"]
        if grid == FLASH:
            flash_ratio = ratio
        rows.append({"condition": cond, "case": f"grid {label}", "calls": len(ts["grid"]), **p,
                     "ideal us": ideal / 1e3, "throughput / ideal": ratio})
    return rows, flash_ratio


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=2000, help="calls per candidate for the percentiles")
    ap.add_argument("--after-rounds", type=int, default=10)
    ap.add_argument("--grid-calls", type=int, default=500)
    ap.add_argument("--no-load", action="store_true", help="idle only")
    ap.add_argument("--results", default=RESULTS)
    args = ap.parse_args()

    ncores = int(os.environ.get("OC_NUM_CORES") or len(os.sched_getaffinity(0)))
    rows, targets = [], []
    with tempfile.TemporaryDirectory(prefix="opcore-grid-bench-") as root:
        seed = load_seed003(root)
        default_lent = _C._torch_native_lend_threads(True)  # the default, read once ops are registered
        _C._torch_native_lend_threads(default_lent)
        lib_add = _C.find_op(seed.QUALNAME)
        wd = os.path.join(root, "grid_bench")
        work = custom_op.load(name="grid_bench", compute_srcs=[os.path.join(HERE, "kernels", "grid", "work.c")],
                              shape_srcs=[os.path.join(HERE, "kernels", "grid", "shape.c")],
                              build_directory=wd).work
        for cond in ("idle",) + (() if args.no_load else ("loaded",)):
            with background_load(cond == "loaded"):
                load_avg = os.getloadavg()[0]
                srows, p50, p99, ratios = stalls(cond, args.calls, args.after_rounds, lib_add)
                grows, flash = grids(cond, work, ncores, args.grid_calls)
            print(f"-- {cond} (1-min load average {load_avg:.1f})")
            for r in srows + grows:
                print("  " + ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items()
                                       if k != "condition"))
            rows += srows + grows
            lent, off = "torch.ops, shares lent to torch's threads", "torch.ops, lending off"
            dflt = lent if default_lent else off
            targets += [
                {"metric": f"{cond}: torch.ops p50 (default lending setting) / lending off", "max": 1.1,
                 "value": p50[dflt] / p50[off], "met": p50[dflt] / p50[off] <= 1.1},
                {"metric": f"{cond}: torch.ops p99 / its own p50 (default setting)", "max": 2.0,
                 "value": p99[dflt] / p50[dflt], "met": p99[dflt] / p50[dflt] <= 2.0,
                 "ceiling": p99[CEILING] / p50[CEILING], "ceiling_what": CEILING + ", p99 / p50"},
                {"metric": f"{cond}: multicore op right after a torch matmul / back to back (default setting)",
                 "max": 1.05, "value": ratios["lent" if dflt == lent else "lending off"],
                 "met": ratios["lent" if dflt == lent else "lending off"] <= 1.05,
                 "ceiling": ratios[CEILING], "ceiling_what": CEILING + ", after a matmul / back to back"},
                {"metric": f"{cond}: causal flash grid throughput / ideal", "min": 0.9, "value": flash,
                 "met": flash >= 0.9},
            ]
            _C._torch_native_lend_threads(default_lent)  # restore the default for the next condition
    benchlib.write("grid.json", results=args.results, obj={
        "title": "Launch grids and stalls next to torch's threads",
        "order": 48,
        "columns": ["condition", "case", "calls", "p50 us", "p90 us", "p99 us", "ratio", "ideal us",
                    "throughput / ideal"],
        "rows": rows,
        "target": targets,
        "notes": (f"{ncores} engine cores, torch at {torch.get_num_threads()} threads. 'loaded': one busy-loop "
                  f"process per CPU ({os.cpu_count()}) started by the bench. Stall rows: the Neuron framework tutorial's add "
                  "[256, 1024] float32, each call right after a torch.mul of the same tensors; candidates "
                  "interleaved over 10 rounds. Grid rows: ideal = sum of single-core instance times (each "
                  "instance a call of its own, timed interleaved with the launches) / min(cores, instances)."),
    })


if __name__ == "__main__":
    main()
