#!/usr/bin/env python3
"""Does a multicore opcore op right after a torch matmul run as fast as
back to back?

After a parallel region, torch's intra-op (OpenMP) threads keep spinning on
their cores for a while, waiting for the next region. An opcore multicore
op launched then would wake opcore's workers onto those same cores; called
from torch, it runs its shares on torch's spinning threads instead
(oc_engine_set_thread_helpers, src/python/torch_native.c) when lending is
on (_torch_native_lend_threads; on by default, paused after a launch
torch's join held up, see docs/engine.md). This measures one
multicore ReLU (examples/relu/multicore, through torch.ops), interleaved:

    back to back          op, op, op, ...          (the op's own time)
    after a matmul        mm, op, mm, op, ...      (the op's time alone)
    on opcore's workers   the same two, torch's threads not lent
    single-core           the TCM ReLU on one core (the floor to beat)
    torch.relu            after the same matmul

The matmul is small, so that it does not evict the op's input from the
caches (that would slow any op after it). Reports the op's time after a
matmul / back to back. Writes bench/results/multicore_after_matmul.json
(bench/report.py format).

    python bench/multicore_after_matmul.py [--rows N] [--mm N] [--rounds R]
"""
import argparse
import json
import os
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import benchlib  # noqa: E402
from opcore import _C  # noqa: E402

REPO = os.path.dirname(HERE)
RELU = os.path.join(REPO, "examples", "relu")
RESULTS = os.path.join(HERE, "results")


def load(root, variant, namespace, multicore):
    ops = benchlib.load_renamed(root, namespace, os.path.join(RELU, "shape.c"),
                                [os.path.join(RELU, variant, "relu.c")], "my_ops", multicore=multicore)
    return ops.relu_forward


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=128, help="ReLU input rows of 1024 floats (default 512 KiB)")
    ap.add_argument("--mm", type=int, default=128,
                    help="matmul size n (n x n @ n x n; small, so that it does not evict the op's input)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--results", default=RESULTS)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="opcore-mc-mm-") as root:
        mc = load(root, "multicore", "mc_after_mm", True)
        tcm = load(root, "tcm", "tcm_after_mm", False)
        x = torch.randn(args.rows, 1024)
        a, b = torch.randn(args.mm, args.mm), torch.randn(args.mm, args.mm)
        assert torch.equal(mc(x), torch.relu(x)) and torch.equal(tcm(x), torch.relu(x))
        op_time = {}

        def timed(name, fn, before=None):
            """One repetition: `before` (untimed), then fn timed into op_time[name]."""
            def run():
                if before is not None:
                    before()
                t0 = time.perf_counter()
                fn(x)
                op_time.setdefault(name, []).append(time.perf_counter() - t0)
            return run

        mm = lambda: torch.mm(a, b)  # noqa: E731

        def lending(on, fn):
            """fn with the shares lent to torch's threads (on) or on opcore's workers only
            (lending is off by default: docs/engine.md)."""
            def run(t):
                was = _C._torch_native_lend_threads(on)
                try:
                    return fn(t)
                finally:
                    _C._torch_native_lend_threads(was)
            return run

        lent = lambda fn: lending(True, fn)  # noqa: E731
        own_pool = lambda fn: lending(False, fn)  # noqa: E731

        cands = {name: timed(name, fn, before) for name, fn, before in (
            ("multicore, back to back", lent(mc), None),
            ("multicore, right after a torch matmul", lent(mc), mm),
            ("multicore on opcore's workers only, back to back", own_pool(mc), None),
            ("multicore on opcore's workers only, right after a torch matmul", own_pool(mc), mm),
            ("single-core TCM, back to back", tcm, None),
            ("single-core TCM, right after a torch matmul", tcm, mm),
            ("torch.relu, right after a torch matmul", torch.relu, mm))}
        benchlib.interleaved(cands, args.rounds, args.reps, warmup=5)
        # per round: the median op time of that round's repetitions (after the 5 warm-up ones)
        per_round = {name: [benchlib.median(ts[5 + i * args.reps:5 + (i + 1) * args.reps])
                            for i in range(args.rounds)] for name, ts in op_time.items()}

    base = "multicore, back to back"
    rows = [{"ReLU, float32 [%d, 1024]" % args.rows: name, "us": benchlib.median(ts) * 1e6,
             "vs multicore back to back": benchlib.paired_ratio(per_round, name, base)}
            for name, ts in per_round.items()]
    after = benchlib.paired_ratio(per_round, "multicore, right after a torch matmul", base)
    single = benchlib.paired_ratio(per_round, "single-core TCM, back to back", base)
    benchlib.write("multicore_after_matmul.json", results=args.results, obj={
        "title": "Multicore op right after a torch matmul",
        "order": 47,
        "rows": rows,
        "target": {"metric": "multicore op time right after a torch matmul / back to back (as fast: 1.0)",
                   "max": 1.0, "value": after, "met": after <= 1.0},
        "notes": (f"The op's own time (perf_counter around the call), median over {args.reps} "
                  f"repetitions per round, then of per-round paired ratios over {args.rounds} interleaved "
                  f"rounds. Matmul: torch.mm of two [{args.mm}, {args.mm}] float32 matrices on "
                  f"{torch.get_num_threads()} torch threads, just before the op (untimed). The single-core "
                  f"TCM ReLU takes {single:.2f}x the multicore op's time back to back."),
        "raw": {"per_round_s": per_round},
    })
    for r in rows:
        print(f"{r['ReLU, float32 [%d, 1024]' % args.rows]:48} {r['us']:9.1f} us  "
              f"{r['vs multicore back to back']:.2f}x")



if __name__ == "__main__":
    sys.exit(main())
