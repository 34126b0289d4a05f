#!/usr/bin/env python3
"""The profiler's two performance targets, measured in one run:

(a) profiler off: the per-call time of a tiny opcore op (ReLU of a 1x1
    tensor, single core, C host API) changes by at most 1% against a
    libopcore built with the profiler hooks compiled out
    (-DOC_PROFILER_COMPILED_OUT, in build-noprof/). The two C programs
    (bench/profiler_overhead.c, one per library) run alternately, in
    pairs whose order flips each time; each run keeps its fastest batch;
    the ratio is the median over pairs.
(b) profiler on at trace level: the MLP training loop of examples/mlp
    (MLP 784-120-84-10 with the opcore ReLU, SGD, batch 32) slows by at
    most 5%. Segments of steps alternate between no profile and a trace
    profile (the loop is the same code in both: step markers and the named
    blocks model_build / loss_backward / optimizer_step); the ratio is the
    median over adjacent pairs of segments of the per-step time with the
    profile over that without. Writing the
    files at the end of each profile happens after the loop and is
    reported apart.

    python bench/profiler_bench.py [--pairs 40] [--steps 600] [--segment 10]

Needs `make lib python` done; builds the two C programs itself. Writes
bench/results/profiler.json (see bench/report.py).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MLP_DIR = os.path.join(REPO, "examples", "mlp")
sys.path.insert(0, HERE)
import benchlib  # noqa: E402
OFF_MAX = 1.01
ON_MAX = 1.05


def build_programs():
    """Build the op-call loop against both libraries; returns their paths."""
    make = ["make", "-s", "-C", REPO]
    subprocess.run(make + ["lib", "build/bench/profiler_overhead"], check=True)
    subprocess.run(make + ["BUILD=build-noprof", "EXTRA_CFLAGS=-DOC_PROFILER_COMPILED_OUT",
                           "build-noprof/bench/profiler_overhead"], check=True)
    return (os.path.join(REPO, "build", "bench", "profiler_overhead"),
            os.path.join(REPO, "build-noprof", "bench", "profiler_overhead"))


def bench_off(pairs, batches, calls, tmp):
    hooks, compiled_out = build_programs()
    runs = {"hooks_off": [], "compiled_out": []}
    medians = {"hooks_off": [], "compiled_out": []}
    ratios = []

    def one(exe, key):
        out = subprocess.run([exe, os.path.join(tmp, key), str(batches), str(calls)], cwd=REPO,
                             check=True, capture_output=True, text=True).stdout
        r = json.loads(out)
        assert r["variant"] == key, (exe, r["variant"])
        # the fastest batch: the one least disturbed by other jobs on a shared machine
        best = min(r["ns_per_call"])
        runs[key].append(best)
        medians[key].append(statistics.median(r["ns_per_call"]))
        return best

    one(hooks, "hooks_off")  # builds the op library (cached after), warms the caches
    one(compiled_out, "compiled_out")
    for d in (runs, medians):
        d["hooks_off"].clear()
        d["compiled_out"].clear()
    for i in range(pairs):
        if i % 2 == 0:
            a = one(hooks, "hooks_off")
            b = one(compiled_out, "compiled_out")
        else:
            b = one(compiled_out, "compiled_out")
            a = one(hooks, "hooks_off")
        ratios.append(a / b)
    return runs, medians, ratios


def bench_on(steps, segment, tmp):
    sys.path.insert(0, MLP_DIR)
    import torch
    import my_ops
    import loop
    from model import MLP
    import opcore.profiler as prof

    os.environ.setdefault("OPCORE_PROFILE_QUIET", "1")
    torch.manual_seed(loop.SEED)
    torch.set_num_threads(1)
    my_ops.load(my_ops.DEFAULT_VARIANT)
    model = MLP(relu=my_ops.Relu.apply)
    optimizer = torch.optim.SGD(model.parameters(), lr=loop.LR)
    loss_fn = torch.nn.NLLLoss()
    g = torch.Generator().manual_seed(loop.SEED)
    batches = [(torch.randn(loop.BATCH_SIZE, 28 * 28, generator=g),
                torch.randint(0, 10, (loop.BATCH_SIZE,), generator=g)) for _ in range(50)]
    state = {"step": 0}

    def run(n):
        t0 = time.perf_counter()
        for _ in range(n):
            i = state["step"]
            state["step"] += 1
            x, y = batches[i % len(batches)]
            prof.step(i)
            optimizer.zero_grad()
            with prof.trace("model_build"):
                loss = loss_fn(model(x), y)
            with prof.trace("loss_backward"):
                loss.backward()
            with prof.trace("optimizer_step"):
                optimizer.step()
        return (time.perf_counter() - t0) / n

    logdir = os.path.join(tmp, "logs")
    run(segment)  # warm up
    with prof.profile(logdir=logdir, run_name="warmup"):
        run(segment)
    off, on, export, ratios = [], [], [], []
    events = None
    for k in range(max(1, steps // segment)):
        for mode in (("off", "on") if k % 2 == 0 else ("on", "off")):
            if mode == "off":
                off.append(run(segment))
            else:
                p = prof.profile(logdir=logdir, profile_type="trace", run_name=f"seg{k}").start()
                on.append(run(segment))
                t0 = time.perf_counter()
                p.stop()
                export.append(time.perf_counter() - t0)
                events = p.summary
        ratios.append(on[-1] / off[-1])
    # what one profiled segment recorded (the last one)
    rec = dict(ops={o["op"]: o["calls"] for o in events["ops"]},
               blocks={b["name"]: b["count"] for b in events["blocks"]}, steps=events["steps"])
    return off, on, export, ratios, rec


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=40, help="(a) pairs of C runs")
    ap.add_argument("--batches", type=int, default=30, help="(a) timed batches per C run")
    ap.add_argument("--calls", type=int, default=4000, help="(a) op calls per batch")
    ap.add_argument("--steps", type=int, default=600, help="(b) training steps per mode")
    ap.add_argument("--segment", type=int, default=10, help="(b) steps per segment")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "profiler.json"))
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="opcore-profbench-") as tmp:
        print(f"(a) op call, profiler off vs hooks compiled out: {args.pairs} interleaved pairs", flush=True)
        runs, medians, ratios = bench_off(args.pairs, args.batches, args.calls, tmp)
        print(f"(b) MLP training, trace profile vs none: {args.steps} steps each, interleaved", flush=True)
        off, on, export, on_ratios, rec = bench_on(args.steps, args.segment, tmp)

    hooks_ns = statistics.median(runs["hooks_off"])
    out_ns = statistics.median(runs["compiled_out"])
    off_ratio = statistics.median(ratios)
    off_ms, on_ms = statistics.median(off) * 1e3, statistics.median(on) * 1e3
    on_ratio = statistics.median(on_ratios)
    export_ms = statistics.median(export) * 1e3
    rows = [
        {"case": "tiny op call, hooks compiled out", "per call": f"{out_ns:.0f} ns", "vs baseline": 1.0},
        {"case": "tiny op call, profiler off", "per call": f"{hooks_ns:.0f} ns", "vs baseline": round(off_ratio, 4)},
        {"case": "MLP train step, no profile", "per call": f"{off_ms * 1e3:.0f} us", "vs baseline": 1.0},
        {"case": "MLP train step, trace profile", "per call": f"{on_ms * 1e3:.0f} us", "vs baseline": round(on_ratio, 4)},
    ]
    notes = (
        f"(a) {args.pairs} pairs of runs of bench/profiler_overhead.c (ReLU of a 1x1 float tensor through "
        f"oc_op_call, single core), one linked to libopcore and one to a libopcore built with "
        f"-DOC_PROFILER_COMPILED_OUT; each run times {args.batches} batches of {args.calls} calls and "
        f"keeps its fastest batch (the least disturbed by other jobs); 'per call' is the median over runs, "
        f"'vs baseline' the median of the per-pair ratios (with each run's median batch instead: "
        f"{statistics.median(medians['hooks_off']) / statistics.median(medians['compiled_out']):.4f}). "
        f"(b) the examples/mlp model (784-120-84-10, opcore ReLU 'elementwise', batch 32, SGD, 1 torch "
        f"thread), segments of {args.segment} steps alternating between no profile and a trace-level "
        f"profile, {len(off)} segments each; 'per call' is the median time per step, 'vs baseline' the "
        f"median of the ratios of adjacent segments (ratio of the medians: {on_ms / off_ms:.4f}). Each profiled segment recorded "
        f"{rec['steps']} steps, op calls {rec['ops']}, blocks {rec['blocks']}. Writing a profile's files "
        f"after the loop (trace, xplane, summary, HTML) took {export_ms:.0f} ms median per "
        f"{args.segment}-step profile, outside the timed loop. Shared, noisy machine: medians of "
        f"interleaved runs. Noise-free cross-check (valgrind --tool=callgrind on the two C programs, by hand, "
        f"not in this run): the hooks cost 13 instructions per call out of about 9,200 (0.14%)."
    )
    result = {
        "title": "Profiler overhead",
        "rows": rows,
        "columns": ["case", "per call", "vs baseline"],
        "notes": notes,
        "order": 60,
        "target": [
            {"metric": "profiler off: tiny op per-call time vs hooks compiled out", "max": OFF_MAX,
             "value": round(off_ratio, 4), "met": bool(off_ratio <= OFF_MAX)},
            {"metric": "profiler on (trace): MLP training step time vs off", "max": ON_MAX,
             "value": round(on_ratio, 4), "met": bool(on_ratio <= ON_MAX)},
        ],
        "raw": {"hooks_off_ns": runs["hooks_off"], "compiled_out_ns": runs["compiled_out"],
                "hooks_off_median_ns": medians["hooks_off"], "compiled_out_median_ns": medians["compiled_out"],
                "pair_ratios": ratios, "train_pair_ratios": on_ratios, "train_off_s_per_step": off, "train_on_s_per_step": on,
                "export_s": export},
    }
    for r in rows:
        print(f"  {r['case']:<36} {r['per call']:>10}  {r['vs baseline']:.4f}x")
    for t in result["target"]:
        print(f"  target {t['metric']}: {t['value']:.4f} (max {t['max']}) {'met' if t['met'] else 'NOT met'}")
    benchlib.write(os.path.basename(args.out), result, os.path.dirname(args.out))
    return result


if __name__ == "__main__":
    main()
