#!/usr/bin/env python3
"""Broadcast add written with opcore's iterator vs torch.add.

    python bench/iter_bench.py [--rounds 15] [--reps 3] [--size 4096] [--quick]

out = x + row for a [4096, 4096] float32 x and a [4096] row, x and row
laid out as a kernel author meets them: dense, x transposed, x sliced out of
a wider tensor, the row sliced (stride 2). The opcore op is the iterator
kernel below (the pattern of docs/tutorial_2_performance.md); torch's is
torch.add(x, row). Both allocate their result per call in the same layout:
torch.add gives a transposed x a transposed result, so the opcore side
allocates with torch.empty_like(x) (which keeps x's layout) and calls the
op's out form, badd_into(x, row, out), through torch.ops.

Two settings: single core (torch.set_num_threads(1), an opcore single-core
op) and multicore (torch.set_num_threads(N), an opcore --multicore op, N =
opcore's engine cores). Candidates are interleaved (bench/benchlib.py):
each round times `reps` calls of each, in rotating order; the ratio is the median over
rounds of (torch's time / opcore's time) in the same round. Also shown: both
writing into a fresh row-major result (torch.add(..., out=torch.empty(...))
against the op's own badd(x, row), whose results are row-major), where a
transposed x costs both a transpose.

Both sides' fresh results are on huge pages: the bench runs itself with
THP_MEM_ALLOC_ENABLE=1, so torch's allocator asks for them as opcore does
for the results it hands a kernel (the 'contiguous out' pair would else
compare opcore on huge pages with torch on 4 KiB pages).

Writes bench/results/iter.json (the report format of bench/report.py).
"""
import argparse
import os
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

import benchlib  # noqa: E402

KERNEL = r"""
#include <opcore/kernel.h>

/* out = x + y with broadcasting, any strides: the iterator's pattern. */
static void add_into(oc_tensor *out, const oc_tensor *x, const oc_tensor *y)
{
    OC_CHECK(x->dtype == OC_FLOAT32 && y->dtype == OC_FLOAT32, "float32 only");
    oc_iter it;
    oc_iter_init(&it, 1, OC_TENSORS(out, x, y), 0);
    oc_iter_share(&it);
    while (oc_iter_next(&it)) {
        float *o = it.ptr[0];
        const float *a = it.ptr[1], *b = it.ptr[2];
        const int64_t n = it.len, so = it.stride[0], sa = it.stride[1], sb = it.stride[2];
        if (oc_iter_contiguous(&it)) {
            for (int64_t i = 0; i < n; i++) o[i] = a[i] + b[i];
        } else if (so == 1 && sa == 1 && sb == 0) {
            const float c = b[0];
            for (int64_t i = 0; i < n; i++) o[i] = a[i] + c;
        } else {
            for (int64_t i = 0; i < n; i++) o[i * so] = a[i * sa] + b[i * sb];
        }
    }
}

/* a new (row-major) result */
oc_tensor *badd(const oc_tensor *x, const oc_tensor *y)
{
    add_into(oc_dst_tensor(), x, y);
    return oc_dst_tensor();
}

/* into the caller's tensor, in whatever layout the caller chose */
void badd_into(const oc_tensor *x, const oc_tensor *y, oc_tensor *out) { add_into(out, x, y); }
"""

SHAPE = r"""
#include <opcore/library.h>

static oc_tensor *badd_shape(const oc_tensor *x, const oc_tensor *y)
{
    return oc_empty_broadcast(x->dtype, OC_TENSORS(x, y));
}

static void badd_into_shape(const oc_tensor *x, const oc_tensor *y, oc_tensor *out)
{
    oc_tensor *want = oc_empty_broadcast(x->dtype, OC_TENSORS(x, y));
    OC_CHECK(oc_same_shape(out, want), "out must have the broadcast shape of x and y");
}

OC_LIBRARY(iter_bench, m) {
    /* .strided: the iterator takes the caller's views as they are (without it, opcore hands
     * the kernel dense row-major copies of a transposed or sliced tensor, and copies a
     * strided out back after the kernel) */
    oc_def(m, "badd(Tensor x, Tensor y) -> Tensor", badd_shape, "badd", .strided = true);
    oc_def(m, "badd_into(Tensor x, Tensor y, Tensor(a!) out) -> ()", badd_into_shape, "badd_into",
           .strided = true);
}
"""


def build(workdir):
    """torch.ops of the kernel above as a single-core and a multicore op library."""
    k, s = os.path.join(workdir, "badd.c"), os.path.join(workdir, "shape.c")
    for path, text in ((k, KERNEL), (s, SHAPE)):
        with open(path, "w") as f:
            f.write(text)
    return {"single": benchlib.load_renamed(workdir, "iter_bench_sc", s, [k], "iter_bench"),
            "multi": benchlib.load_renamed(workdir, "iter_bench_mc", s, [k], "iter_bench", multicore=True)}


def cases(size):
    g = torch.Generator().manual_seed(0)
    base = torch.randn(size, size, generator=g)
    wide = torch.randn(size, size + 128, generator=g)
    row = torch.randn(size, generator=g)
    row2 = torch.randn(2 * size, generator=g)
    return [
        ("dense x, dense row", base, row),
        ("x transposed, dense row", base.t(), row),
        ("x transposed, row sliced", base.t(), row2[::2]),
        ("x sliced, row sliced", wide[:, 64:64 + size], row2[::2]),
    ]


def opcore_add(ops, x, row):
    """x + row the way torch.add lays its result out: in x's layout when x
    is dense (empty_like preserves it), else row-major."""
    out = torch.empty_like(x)
    ops.badd_into(x, row, out)
    return out


def measure(ops, x, row, rounds, reps):
    size = x.shape
    cand = {
        "torch.add": lambda: torch.add(x, row),
        "torch.add, contiguous out": lambda: torch.add(x, row, out=torch.empty(size)),
        "opcore": lambda: opcore_add(ops, x, row),
        "opcore, contiguous out": lambda: ops.badd(x, row),
    }
    # one warm-up call each (page-ins, first-call costs)
    s = benchlib.interleaved(cand, rounds, reps, warmup=1)
    return (benchlib.medians(s), benchlib.paired_ratio(s, "torch.add", "opcore"),
            benchlib.paired_ratio(s, "torch.add, contiguous out", "opcore, contiguous out"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--quick", action="store_true", help="5 rounds of 2 calls")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "iter.json"))
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.reps = 5, 2
    if os.environ.get("THP_MEM_ALLOC_ENABLE") != "1":  # both sides on huge pages (see above)
        os.execve(sys.executable, [sys.executable, *sys.argv], benchlib.policy_env("huge"))
    benchlib.banner()
    nbytes = args.size * args.size * 4
    pages = {side: benchlib.page_policy(side, nbytes) for side in ("opcore", "torch")}
    path = {"opcore": benchlib.native_path(), "torch": benchlib.torch_path()}
    ncores = int(os.environ.get("OC_NUM_CORES") or len(os.sched_getaffinity(0)))
    load0 = os.getloadavg()[0]
    work = tempfile.mkdtemp(prefix="opcore-iter-bench-")
    ops = build(work)
    rows, worst, worst_same = [], {}, {}
    for setting, threads in (("single", 1), ("multi", ncores)):
        torch.set_num_threads(threads)
        op = ops[setting]
        for label, x, row in cases(args.size):
            got, want = opcore_add(op, x, row), torch.add(x, row)
            assert got.stride() == want.stride() and torch.equal(got, want), f"{label}: wrong result or layout"
            assert torch.equal(op.badd(x, row), want), f"{label}: wrong result"
            med, ratio, ratio_same = measure(op, x, row, args.rounds, args.reps)
            bytes_moved = x.numel() * 4 * 2 + row.numel() * 4
            rows.append(benchlib.tag({
                "setting": f"{setting} core" + ("" if setting == "single" else f" ({threads})"),
                "case": label,
                "torch.add ms": round(med["torch.add"] * 1e3, 2),
                "opcore ms": round(med["opcore"] * 1e3, 2),
                "opcore GB/s": round(bytes_moved / med["opcore"] / 1e9, 2),
                "vs torch.add": round(ratio, 3),
                "vs torch.add contiguous out": round(ratio_same, 3),
            }, pages=pages, path=path))
            worst[setting] = min(worst.get(setting, 9.0), ratio)
            worst_same[setting] = min(worst_same.get(setting, 9.0), ratio_same)
            print(f"{rows[-1]['setting']:>16} | {label:<26} | torch {rows[-1]['torch.add ms']:8.2f} ms | "
                  f"opcore {rows[-1]['opcore ms']:8.2f} ms | vs torch.add {ratio:.3f}x | "
                  f"vs contiguous out {ratio_same:.3f}x", flush=True)
    load1 = os.getloadavg()[0]
    notes = (f"out = x + row, x [{args.size}, {args.size}] float32, row [{args.size}]; the opcore op is an "
             f"iterator kernel (bench/iter_bench.py) called through torch.ops, output allocated per call on "
             f"both sides. Ratios: median over {args.rounds} interleaved rounds of {args.reps} calls of "
             f"(torch's time / opcore's time) in the same round; > 1 means opcore is faster. "
             f"The opcore side allocates with torch.empty_like(x) and calls badd_into(x, row, out), so its "
             f"result has torch.add's layout. 'contiguous out': torch.add(x, row, out=torch.empty(...)) "
             f"against the op's badd(x, row), both writing row-major results "
             f"(torch.add itself gives a transposed x a transposed result). Multicore: torch.set_num_threads"
             f"({ncores}) and an opcore --multicore op on {ncores} engine cores. Both sides' fresh "
             f"results on huge pages (torch with THP_MEM_ALLOC_ENABLE=1). Load average "
             f"{load0:.2f} before, {load1:.2f} after (other work on the machine makes timings noisy).")
    result = {
        "title": "Broadcast add with opcore's iterator vs torch.add",
        "order": 45,
        "rows": rows,
        "notes": notes,
        "target": [{"metric": f"iterator broadcast add / torch.add, worst case, {s} core",
                    "min": 0.9, "value": round(worst[s], 3), "met": worst[s] >= 0.9}
                   for s in ("single", "multi")] +
                  [{"metric": f"same work (transposed x: torch.add into a contiguous out), worst case, {s} core",
                    "min": 0.9, "value": round(worst_same[s], 3), "met": worst_same[s] >= 0.9}
                   for s in ("single", "multi")],
        "load": [load0, load1],
    }
    benchlib.write(os.path.basename(args.out), result, results=os.path.dirname(os.path.abspath(args.out)))
    print(f"worst ratio: single {worst['single']:.3f}x, multi {worst['multi']:.3f}x "
          f"(target >= 0.9); same work: single {worst_same['single']:.3f}x, multi {worst_same['multi']:.3f}x; "
          f"load {load0:.2f} -> {load1:.2f}; wrote {args.out}")


if __name__ == "__main__":
    main()
