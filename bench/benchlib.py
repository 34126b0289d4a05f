"""What the Python benchmarks share: interleaved, paired timing; opcore
libraries built under their own namespace; writing a result file.

Timing:

Candidates take turns round by round on the same machine moment; each
round gives every candidate's time and every candidate's ratio to a
reference measured in that same round. Reported figures are medians over
rounds: of the times, and of the paired ratios (a noisy moment hits the
candidates of one round alike, and the median drops the rounds it hit
unevenly).
"""
import json
import os
import statistics
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")


def interleaved(fns, rounds, reps, warmup=None, clock=time.perf_counter):
    """fns: {name: callable()} (each call is one repetition). Returns
    {name: [seconds per repetition, one per round]}."""
    samples = {name: [] for name in fns}
    for fn in fns.values():
        for _ in range(warmup if warmup is not None else max(1, reps // 10)):
            fn()
    names = list(fns)
    for r in range(rounds):
        # rotate the order, so no candidate always runs first in a round
        k = r % len(names)
        for name in names[k:] + names[:k]:
            fn = fns[name]
            t0 = clock()
            for _ in range(reps):
                fn()
            samples[name].append((clock() - t0) / reps)
    return samples


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def paired_ratio(samples, name, reference):
    """Median over rounds of (name's time / reference's time)."""
    return median([a / b for a, b in zip(samples[name], samples[reference])])


def medians(samples):
    return {name: median(ts) for name, ts in samples.items()}


def load_renamed(build_root, namespace, shape_src, compute_srcs, old_namespace, multicore=False, cflags=()):
    """Build and load an opcore library whose shape source registers
    `old_namespace`, under `namespace` instead (a process holds one library
    per name). Returns torch.ops.<namespace>."""
    import torch

    from opcore import custom_op
    d = os.path.join(build_root, namespace)
    os.makedirs(d, exist_ok=True)
    shape = os.path.join(d, "shape.c")
    with open(shape_src) as f:
        text = f.read().replace(f"OC_LIBRARY({old_namespace},", f"OC_LIBRARY({namespace},")
    with open(shape, "w") as f:
        f.write(text)
    custom_op.load(name=namespace, compute_srcs=list(compute_srcs), shape_srcs=[shape], build_directory=d,
                   multicore=multicore, extra_cflags=list(cflags))
    return getattr(torch.ops, namespace)


def write(name, obj, results=RESULTS):
    """Write a bench/report.py section to results/name."""
    os.makedirs(results, exist_ok=True)
    path = os.path.join(results, name)
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)
    print(f"wrote {os.path.relpath(path, REPO)}")
