#!/usr/bin/env python3
"""MLP benchmark (issue 6): training iter/s of the opcore model vs the
torch.relu baseline, and inference iter/s of MLP [4096, 2048] for every
examples/relu variant vs the baseline. All ratios come from this one run.

    python bench/mlp_bench.py            # full: 4 epochs, 3 rounds, then the report
    python bench/mlp_bench.py --quick    # 1 epoch, 1 round (a smoke run)

Every measurement is a separate process (examples/mlp/train*.py and
inference.py with --json), because one process can hold only one ReLU
variant. Configurations are run in rounds, each round visiting all of them
(rotated order), and the median over rounds is reported, so a noisy moment on
the machine hits baseline and opcore alike.

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

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MLP = os.path.join(REPO, "examples", "mlp")
RESULTS = os.path.join(HERE, "results")
sys.path.insert(0, MLP)

TRAIN_TARGET = 0.97      # opcore training >= 0.97x baseline
INFER_TARGET = 0.99      # multicore inference >= 0.99x baseline
VARIANT_NAMES = {
    "baseline": "baseline (torch.relu)",
    "elementwise": "element-wise accessor",
    "stream": "streaming accessor",
    "tcm": "TCM accessor",
    "multicore": "TCM + multicore",
}


def run_json(cmd, env):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    try:
        t0 = time.perf_counter()
        r = subprocess.run(cmd + ["--json", out, "--no-progress"], capture_output=True,
                           text=True, env=env, cwd=MLP)
        wall = time.perf_counter() - t0
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
        with open(out) as f:
            res = json.load(f)
        res["wall_seconds"] = wall
        return res
    finally:
        os.unlink(out)


def rounds(configs, n, env, log):
    """Run every config once per round, rotating the order; returns
    {name: [result, ...]}."""
    samples = {name: [] for name, _ in configs}
    for i in range(n):
        k = i % len(configs)
        for name, cmd in configs[k:] + configs[:k]:
            res = run_json(cmd, env)
            samples[name].append(res)
            log(f"  round {i + 1}/{n} {name:12s} {res['throughput']:10.2f} iter/s")
    return samples


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def best(samples):
    """The fastest round: other load on the machine only ever slows a run
    down, so the best round is the least disturbed estimate; ratios use it."""
    return max(r["throughput"] for r in samples)


def med(samples):
    return median([r["throughput"] for r in samples])


def main(argv=None):
    import my_ops
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 epoch, 1 round (smoke run)")
    ap.add_argument("--epochs", type=int, help="epochs per run (default 4; 1 with --quick)")
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
    args = ap.parse_args(argv)
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
            configs = [("baseline", [py, "train_cpu.py"] + common)]
            configs += [(v, [py, "train.py", "--variant", v] + common) for v in train_variants]
            s = rounds(configs, n, env, log)
            base = best(s["baseline"])
            rows = []
            for name, _ in configs:
                tp = best(s[name])
                label = VARIANT_NAMES[name] if name == "baseline" else f"opcore ReLU, {VARIANT_NAMES[name]}"
                rows.append({"model": label, "iter/s": tp, "median iter/s": med(s[name]),
                             "vs baseline": tp / base,
                             "final loss": s[name][-1]["final_loss"],
                             "test accuracy": s[name][-1]["accuracy"]})
            fastest = max(train_variants, key=lambda v: best(s[v]))
            ratio = best(s[fastest]) / base
            losses_equal = all(r["final_loss"] == b["final_loss"]
                               for v in train_variants for r, b in zip(s[v], s["baseline"]))
            write(args.results, "mlp_train.json", {
                "title": "MLP training: opcore ReLU vs torch.relu",
                "order": 10,
                "rows": rows,
                "chart": {"label": "model", "value": "iter/s", "ylabel": "train iter/s"},
                "target": {"metric": f"opcore ({VARIANT_NAMES[fastest]}) / baseline iter/s",
                           "min": TRAIN_TARGET, "value": ratio, "met": ratio >= TRAIN_TARGET},
                "notes": (f"MLP 784 -> [120, 84] -> 10 on the Fashion-MNIST training set, batch 32, "
                          f"SGD lr 0.01, {epochs} epoch(s); iter/s of the last epoch without its "
                          f"2 warm-up steps (as in the seeds); iter/s is the best of {n} round(s) "
                          f"(the ratios use it), the median is shown beside it. "
                          f"Target: opcore >= {TRAIN_TARGET}x baseline — measured {ratio:.3f}x with "
                          f"the {VARIANT_NAMES[fastest]} kernel "
                          f"({'met' if ratio >= TRAIN_TARGET else 'NOT met'}). Final losses "
                          f"{'identical to the baseline' if losses_equal else 'DIFFER from the baseline'} "
                          f"in every round."),
                "raw": s, "started": started,
            })

        if not args.skip_inference and variants:
            log(f"inference: MLP [4096, 2048], batch 32, {epochs} epoch(s), {n} round(s)")
            configs = [("baseline", [py, "inference.py", "--variant", "baseline"] + common)]
            configs += [(v, [py, "inference.py", "--variant", v] + common) for v in variants]
            s = rounds(configs, n, env, log)
            base = best(s["baseline"])
            ew = best(s["elementwise"]) if "elementwise" in s else None
            rows = []
            for name, _ in configs:
                tp = best(s[name])
                row = {"variant": VARIANT_NAMES.get(name, name), "iter/s": tp,
                       "median iter/s": med(s[name]), "vs baseline": tp / base}
                if ew:
                    row["vs element-wise"] = tp / ew
                cold = s[name][0].get("build_seconds")
                row["cold build, s"] = cold if cold is not None else "-"
                rows.append(row)
            mc = best(s["multicore"]) / base if "multicore" in s else None
            target = None
            if mc is not None:
                target = {"metric": "TCM + multicore / baseline iter/s", "min": INFER_TARGET,
                          "value": mc, "met": mc >= INFER_TARGET}
            write(args.results, "mlp_inference.json", {
                "title": "MLP [4096, 2048] inference: ReLU variants vs torch.relu",
                "order": 20,
                "rows": rows,
                "chart": {"label": "variant", "value": "iter/s", "ylabel": "inference iter/s"},
                "target": target,
                "notes": (f"Forward passes over the Fashion-MNIST test set (313 batches of 32) with "
                          f"hidden layers [4096, 2048], {epochs} epoch(s), last epoch without its "
                          f"2 warm-up steps (seed 001's measurement); best of {n} round(s), median beside it. "
                          f"Every variant's output is checked equal to torch.relu's before timing. "
                          + (f"Target: TCM + multicore >= {INFER_TARGET}x baseline — measured "
                             f"{mc:.3f}x ({'met' if mc >= INFER_TARGET else 'NOT met'}). "
                             if mc is not None else "")
                          + "Cold build: the first build of the variant's library in this run."),
                "raw": s, "started": started,
            })

    if not args.no_report:
        import report
        report.main(["--results", args.results])


def write(results, name, obj):
    path = os.path.join(results, name)
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)
    print(f"wrote {os.path.relpath(path)}", file=sys.stderr)


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    main()
