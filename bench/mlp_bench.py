#!/usr/bin/env python3
"""MLP benchmark: training iter/s of the opcore model vs the
torch.relu baseline, and inference iter/s of MLP [4096, 2048] for every
examples/relu variant vs the baseline. All ratios come from this one run.

    python bench/mlp_bench.py            # full: 4 epochs, 3 rounds, then the report
    python bench/mlp_bench.py --quick    # 1 epoch, 1 round (a smoke run)

Every measurement is a separate process (one process can hold only one ReLU
variant) that runs four models with the same initial weights, differing only
in the ReLU, taking turns every 50 steps on the same batches
(examples/mlp/loop.py run_interleaved):

    opcore       my_ops.Relu.apply: the Neuron tutorial's autograd.Function, calling the
                 opcore operators of the variant under test
    baseline     torch.relu
    pyfunc       TorchReluFunction: the same autograd.Function pattern around
                 PyTorch's own relu kernels: the ceiling for any operator
                 called through that pattern
    baseline_aa  torch.relu again: the A/A control; its ratio to the baseline
                 shows the noise floor of the measurement
    cppref       the Neuron tutorial's own CPU reference: their C++ extension ReLU
                 (the Neuron ReLU tutorial's pytorch/relu.cpp, bench/cpp_relu.py) through the
                 same autograd.Function, compiled with -O3
    cppref_seed  the same, built as the Neuron ReLU tutorial's build.py builds it
                 (cpp_extension.load without extra_cflags: -O0); shown, not
                 a target

Ratios are paired: within one process, a model's ratio to the baseline is
the median over turns of (baseline's time on the turn's chunk / the model's
time on the same chunk). The models' turns on one chunk are adjacent in
time, so a noisy moment hits them alike, and the median drops the turns it
hit unevenly. The iter/s columns are plain throughput (steps / total time).
Variants are measured in rounds (rotated order) and medians over rounds
reported; the ceiling and A/A rows pool every process of their table.

Writes bench/results/mlp_train.json and mlp_inference.json in the report
format (see bench/report.py), then runs bench/report.py unless --no-report.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MLP = os.path.join(REPO, "examples", "mlp")
RESULTS = os.path.join(HERE, "results")
sys.path.insert(0, MLP)

TRAIN_TARGET = 0.97      # opcore training >= 0.97x baseline
INFER_TARGET = 0.99      # multicore inference >= 0.99x baseline
CPPREF_TARGET = 1.0      # opcore >= 1.0x the Neuron tutorial's C++ extension reference model (training, inference)
CEILING_TARGET = 0.97    # opcore training >= 0.97x the ceiling model
MODELS = ("opcore", "baseline", "pyfunc", "baseline_aa", "cppref", "cppref_seed")  # per process, in turn order
CEILING_ROW = "Neuron tutorial's autograd.Function around torch.relu (ceiling)"
AA_ROW = "baseline again (A/A noise control)"
CPPREF_ROW = "Neuron tutorial's C++ extension ReLU through the same autograd.Function (CPU reference, -O3)"
CPPREF_SEED_ROW = "the same, built as the Neuron ReLU tutorial builds it (cpp_extension.load defaults: -O0)"
VARIANT_NAMES = {
    "baseline": "baseline (torch.relu)",
    "elementwise": "element-wise accessor",
    "stream": "streaming accessor",
    "tcm": "TCM accessor",
    "multicore": "TCM + multicore",
}


def median(xs):
    return statistics.median(xs) if xs else float("nan")


class TorchReluFunction(torch.autograd.Function):
    """The Neuron tutorial's autograd.Function pattern around PyTorch's own relu: the
    ceiling for any op called through it. Forward and backward are the
    kernels torch.relu's own autograd uses, so it differs from the baseline
    only by the Python autograd.Function around them (and trains to the same
    weights)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.relu(x)

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return torch.ops.aten.threshold_backward(grad, x, 0)


def worker(mode, variant, epochs, data_dir, threads):
    """One measurement, in its own process: the MODELS (the opcore model
    with `variant`, the torch.relu baseline, the TorchReluFunction ceiling
    and the baseline again) taking turns every 50 steps on the same batches
    (loop.run_interleaved), so all see the same machine. Prints one JSON
    line."""
    import cpp_relu
    import data
    import loop
    import my_ops
    from model import MLP
    if threads:
        torch.set_num_threads(threads)
    my_ops.load(variant)
    cpp_relu.load(os.path.join(os.environ.get("OPCORE_MLP_BUILD", os.path.join(REPO, "build", "mlp")), "cpp_ext"))
    layers = (120, 84) if mode == "train" else (4096, 2048)
    split = "train" if mode == "train" else "test"
    b = data.batches(data_dir or data.DEFAULT_DATA_DIR, split, loop.BATCH_SIZE)
    relus = {"opcore": my_ops.Relu.apply, "baseline": None,
             "pyfunc": TorchReluFunction.apply, "baseline_aa": None, "cppref": cpp_relu.Relu.apply,
             "cppref_seed": cpp_relu.SeedBuildRelu.apply}
    models = {}
    for n in MODELS:
        torch.manual_seed(0)  # the same initial weights for all
        models[n] = MLP(layers=layers, relu=relus[n])
    r = loop.run_interleaved(models, b, epochs=epochs, train=(mode == "train"), progress=False)
    # every model's weights must end equal to the baseline's
    same = {n: all(torch.equal(p, q) for p, q in
                   zip(models[n].parameters(), models["baseline"].parameters()))
            for n in MODELS if n != "baseline"}
    out = {"variant": variant, "mode": mode, "epochs": epochs,
           "build_seconds": my_ops.build_seconds, "build_cached": my_ops.build_cached,
           "identical": all(same.values()), "identical_to_baseline": same}
    out.update((n, r[n]) for n in MODELS)
    if mode == "train":
        tb = data.batches(data_dir or data.DEFAULT_DATA_DIR, "test", loop.BATCH_SIZE)
        for n in MODELS:
            out[n]["accuracy"] = loop.evaluate(models[n], tb)[0]
    print(json.dumps(out))


def run_worker(mode, variant, epochs, args, env):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", mode, variant, "--epochs", str(epochs)]
    if args.data_dir:
        cmd += ["--data-dir", args.data_dir]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def paired_rounds(mode, variants, epochs, n, args, env, log):
    """{variant: [worker result, ...]}, every variant once per round."""
    samples = {v: [] for v in variants}
    for i in range(n):
        k = i % len(variants)
        for v in variants[k:] + variants[:k]:
            res = run_worker(mode, v, epochs, args, env)
            samples[v].append(res)
            log(f"  round {i + 1}/{n} {mode:5s} {v:12s} opcore {res['opcore']['throughput']:9.2f}  "
                f"baseline {res['baseline']['throughput']:9.2f} iter/s  paired vs baseline: "
                f"opcore {paired_ratio(res, 'opcore'):.3f}  ceiling {paired_ratio(res, 'pyfunc'):.3f}  "
                f"A/A {paired_ratio(res, 'baseline_aa'):.3f}  C++ ref {paired_ratio(res, 'cppref'):.3f} "
                f"(the tutorial's build {paired_ratio(res, 'cppref_seed'):.3f})")
    return samples


def paired_ratio(res, name, reference="baseline"):
    """`name`'s speed relative to `reference` in one process: the median
    over turns of reference's turn time / `name`'s time on the same chunk."""
    base, own = res[reference]["turn_seconds"], res[name]["turn_seconds"]
    assert len(base) == len(own) > 0, (len(base), len(own))
    return median([b / t for b, t in zip(base, own)])


def pooled(samples, name):
    """`name` over every process of a table (all variants, all rounds):
    median iter/s, median paired ratio and the ratios' range."""
    rs = [r for v in samples.values() for r in v]
    ratios = [paired_ratio(r, name) for r in rs]
    return dict(iters=median([r[name]["throughput"] for r in rs]), ratio=median(ratios),
                lo=min(ratios), hi=max(ratios), processes=len(rs), last=rs[-1][name])


def summarise(samples):
    """Per variant: median opcore iter/s, median baseline iter/s (from the
    same processes) and the median over rounds of the per-process paired
    ratios (paired_ratio)."""
    out = {}
    for v, rs in samples.items():
        out[v] = dict(opcore=median([r["opcore"]["throughput"] for r in rs]),
                      baseline=median([r["baseline"]["throughput"] for r in rs]),
                      ratio=median([paired_ratio(r, "opcore") for r in rs]),
                      vs_cppref=median([paired_ratio(r, "opcore", "cppref") for r in rs]),
                      vs_ceiling=median([paired_ratio(r, "opcore", "pyfunc") for r in rs]),
                      identical=all(r["identical"] for r in rs),
                      cold_build=rs[0]["build_seconds"] if not rs[0]["build_cached"] else None,
                      last=rs[-1])
    return out


def method_notes(ceiling, aa, rounds, target):
    """The notes' sentences on the paired ratios, the ceiling and the A/A
    control (`ceiling` and `aa` from pooled())."""
    c = ceiling["ratio"]
    return (f"Ratios are paired: within each process, the median over turns of (baseline's time on "
            f"a chunk / the model's time on the same chunk), the models' turns being adjacent in "
            f"time; then the median over {rounds} round(s); iter/s are medians over rounds of "
            f"each run's throughput. The Neuron tutorial's autograd.Function around torch.relu itself "
            f"reaches {c:.3f}x: the ceiling for any operator called through it"
            + (f" (below the {target}x target)" if c < target else "")
            + f". The baseline against an identical copy of itself (A/A) reads {aa['ratio']:.3f}x "
            f"({aa['lo']:.3f}-{aa['hi']:.3f}x over {aa['processes']} process(es)): the noise "
            f"floor. The ceiling and A/A rows pool every process of this table. ")


def main(argv=None):
    import my_ops
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 epoch, 1 round (smoke run)")
    ap.add_argument("--epochs", type=int,
                    help="epochs per run (default: 4 training, 2 inference; 1 with --quick)")
    ap.add_argument("--rounds", type=int, help="rounds per config (default 3; 1 with --quick)")
    ap.add_argument("--variants", default=",".join(my_ops.VARIANTS),
                    help="inference variants (default: all)")
    ap.add_argument("--train-variants", default="elementwise,tcm",
                    help="single-core variants to train with (default elementwise,tcm)")
    ap.add_argument("--skip-train", action="store_true")
    ap.add_argument("--skip-inference", action="store_true")
    ap.add_argument("--data-dir", help="MNIST-format data directory (default: Fashion-MNIST)")
    ap.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's)")
    ap.add_argument("--results", default=RESULTS, help="where the JSON goes (bench/results)")
    ap.add_argument("--no-report", action="store_true", help="don't run bench/report.py")
    ap.add_argument("--worker", nargs=2, metavar=("MODE", "VARIANT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args.worker[0], args.worker[1], args.epochs or 1, args.data_dir, args.threads)
    epochs = args.epochs or (1 if args.quick else 4)
    n = args.rounds or (1 if args.quick else 3)
    variants = [v for v in args.variants.split(",") if v]
    train_variants = [v for v in args.train_variants.split(",") if v]
    for v in variants + train_variants:
        if v not in my_ops.VARIANTS:
            ap.error(f"unknown variant {v!r}")

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    common = ["--epochs", str(epochs)]
    if args.data_dir:
        common += ["--data-dir", args.data_dir]
    if args.threads:
        common += ["--threads", str(args.threads)]
    os.makedirs(args.results, exist_ok=True)
    py = sys.executable
    started = time.strftime("%Y-%m-%d %H:%M:%S")

    with tempfile.TemporaryDirectory(prefix="opcore-mlp-bench-") as build_root:
        # a fresh build directory: the first load of each variant is a cold build
        env = dict(os.environ, OPCORE_MLP_BUILD=build_root)
        env["PYTHONPATH"] = os.pathsep.join(p for p in [os.path.join(REPO, "python"),
                                                        env.get("PYTHONPATH")] if p)

        if not args.skip_train:
            log(f"training: MLP [120, 84], batch 32, {epochs} epoch(s), {n} round(s)")
            samples = paired_rounds("train", train_variants, epochs, n, args, env, log)
            sm = summarise(samples)
            ceiling, aa = pooled(samples, "pyfunc"), pooled(samples, "baseline_aa")
            base = median([v["baseline"] for v in sm.values()])
            rows = [{"model": VARIANT_NAMES["baseline"], "iter/s": base, "vs baseline": 1.0,
                     "final loss": next(iter(sm.values()))["last"]["baseline"]["final_loss"],
                     "test accuracy": next(iter(sm.values()))["last"]["baseline"]["accuracy"]}]
            for v, r in sm.items():
                rows.append({"model": f"opcore ReLU, {VARIANT_NAMES[v]}", "iter/s": r["opcore"],
                             "vs baseline": r["ratio"],
                             "final loss": r["last"]["opcore"]["final_loss"],
                             "test accuracy": r["last"]["opcore"]["accuracy"]})
            cppref, cppseed = pooled(samples, "cppref"), pooled(samples, "cppref_seed")
            for name, c in ((CPPREF_ROW, cppref), (CPPREF_SEED_ROW, cppseed), (CEILING_ROW, ceiling), (AA_ROW, aa)):
                rows.append({"model": name, "iter/s": c["iters"], "vs baseline": c["ratio"],
                             "final loss": c["last"]["final_loss"],
                             "test accuracy": c["last"]["accuracy"]})
            fastest = max(sm, key=lambda v: sm[v]["ratio"])
            ratio = sm[fastest]["ratio"]
            identical = all(r["identical"] for r in sm.values())
            vs_ref, vs_ceil = sm[fastest]["vs_cppref"], sm[fastest]["vs_ceiling"]
            write(args.results, "mlp_train.json", {
                "title": "MLP training: opcore ReLU vs torch.relu",
                "order": 10,
                "rows": rows,
                "chart": {"label": "model", "value": "iter/s", "ylabel": "train iter/s"},
                "target": [{"metric": f"opcore ({VARIANT_NAMES[fastest]}) / baseline iter/s",
                            "min": TRAIN_TARGET, "value": ratio, "met": ratio >= TRAIN_TARGET,
                            "ceiling": ceiling["ratio"],
                            "ceiling_what": "the same autograd.Function around torch.relu"},
                           {"metric": f"MLP training: opcore ({VARIANT_NAMES[fastest]}) / Neuron tutorial's C++ extension "
                                      "reference model, iter/s", "min": CPPREF_TARGET, "value": vs_ref,
                            "met": vs_ref >= CPPREF_TARGET},
                           {"metric": f"MLP training: opcore ({VARIANT_NAMES[fastest]}) / ceiling model "
                                      "(autograd.Function around torch.relu), iter/s", "min": CEILING_TARGET,
                            "value": vs_ceil, "met": vs_ceil >= CEILING_TARGET}],
                "notes": (f"MLP 784 -> [120, 84] -> 10 on the Fashion-MNIST training set (1875 batches "
                          f"of 32), SGD lr 0.01, {epochs} epoch(s); iter/s of the last epoch without "
                          f"its 2 warm-up steps, as in the Neuron tutorial. Each measurement process trains the "
                          f"opcore model, the baseline, the ceiling model, the baseline again and the "
                          f"tutorial's C++ reference (built -O3, and as the tutorial builds it: -O0) "
                          f"together, taking turns every 50 steps, so all see the same machine. "
                          + method_notes(ceiling, aa, n, TRAIN_TARGET)
                          + f"Target: opcore >= {TRAIN_TARGET}x baseline — best variant "
                          f"{VARIANT_NAMES[fastest]}: {ratio:.3f}x "
                          f"({'met' if ratio >= TRAIN_TARGET else 'NOT met'}). Trained weights "
                          f"(opcore and ceiling models) "
                          f"{'identical to the baseline in every run' if identical else 'DIFFER from the baseline'}."),
                "raw": {v: r["last"] for v, r in sm.items()}, "started": started,
            })

        if not args.skip_inference and variants:
            iepochs = args.epochs or (1 if args.quick else 2)
            log(f"inference: MLP [4096, 2048], batch 32, {iepochs} epoch(s), {n} round(s)")
            samples = paired_rounds("infer", variants, iepochs, n, args, env, log)
            sm = summarise(samples)
            ceiling, aa = pooled(samples, "pyfunc"), pooled(samples, "baseline_aa")
            base = median([v["baseline"] for v in sm.values()])
            ew = sm["elementwise"]["ratio"] if "elementwise" in sm else None
            rows = [{"variant": VARIANT_NAMES["baseline"], "iter/s": base, "vs baseline": 1.0}]
            if ew:
                rows[0]["vs element-wise"] = 1.0 / ew
            for v, r in sm.items():
                row = {"variant": VARIANT_NAMES[v], "iter/s": r["opcore"], "vs baseline": r["ratio"]}
                if ew:
                    row["vs element-wise"] = r["ratio"] / ew
                row["cold build, s"] = r["cold_build"]
                rows.append(row)
            rows[0]["cold build, s"] = None
            cppref, cppseed = pooled(samples, "cppref"), pooled(samples, "cppref_seed")
            for name, c in ((CPPREF_ROW, cppref), (CPPREF_SEED_ROW, cppseed), (CEILING_ROW, ceiling), (AA_ROW, aa)):
                rows.append({"variant": name, "iter/s": c["iters"], "vs baseline": c["ratio"],
                             **({"vs element-wise": None} if ew else {}), "cold build, s": None})
            mc = sm["multicore"]["ratio"] if "multicore" in sm else None
            target = None
            if mc is not None:
                vs_ref = sm["multicore"]["vs_cppref"]
                target = [{"metric": "TCM + multicore / baseline iter/s", "min": INFER_TARGET,
                           "value": mc, "met": mc >= INFER_TARGET, "ceiling": ceiling["ratio"],
                            "ceiling_what": "the same autograd.Function around torch.relu"},
                          {"metric": "MLP inference [4096, 2048]: TCM + multicore / Neuron tutorial's C++ extension "
                                     "reference model, iter/s", "min": CPPREF_TARGET, "value": vs_ref,
                           "met": vs_ref >= CPPREF_TARGET}]
            write(args.results, "mlp_inference.json", {
                "title": "MLP [4096, 2048] inference: ReLU variants vs torch.relu",
                "order": 20,
                "rows": rows,
                "chart": {"label": "variant", "value": "iter/s", "ylabel": "inference iter/s"},
                "target": target,
                "notes": (f"Forward passes over the Fashion-MNIST test set (313 batches of 32) with "
                          f"hidden layers [4096, 2048], {iepochs} epoch(s), last epoch without its "
                          f"2 warm-up steps (the Neuron MLP-inference tutorial's measurement). Each variant runs in its own "
                          f"process together with the baseline, the ceiling model, the baseline "
                          f"again and the tutorial's C++ reference (-O3, and the tutorial's -O0 build), taking turns every 50 batches; the baseline's iter/s is the median "
                          f"over all processes. "
                          + method_notes(ceiling, aa, n, INFER_TARGET)
                          + (f"Target: TCM + multicore >= {INFER_TARGET}x baseline — measured "
                             f"{mc:.3f}x ({'met' if mc >= INFER_TARGET else 'NOT met'}). "
                             if mc is not None else "")
                          + "Cold build: the variant's first build in this run (blank when cached)."),
                "raw": {v: r["last"] for v, r in sm.items()}, "started": started,
            })

    if not args.no_report:
        import report
        report.main(["--results", args.results])


def write(results, name, obj):
    """results/name with the machine, the kernel paths and each row's
    page policy: the MLP's tensors (batch 32, at most 784 floats a row)
    are far below either side's huge-page threshold, both sides 4 KiB
    unless the kernel's THP mode says otherwise."""
    import benchlib

    for row in obj.get("rows", []):
        benchlib.tag(row, pages={"opcore": benchlib.page_policy("opcore", MLP_BYTES),
                                 "torch": benchlib.page_policy("torch", MLP_BYTES)})
    obj.setdefault("machine", benchlib.machine())
    obj.setdefault("paths", benchlib.paths())
    path = os.path.join(results, name)
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)
    print(f"wrote {os.path.relpath(path)}", file=sys.stderr)


MLP_BYTES = 32 * 784 * 4  # the largest tensor an MLP step makes: the input batch


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    main()
