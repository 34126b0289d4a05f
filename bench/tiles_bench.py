#!/usr/bin/env python3
"""The tile layer (examples/tiles) against PyTorch: matmul float32 and
bfloat16, causal flash attention, rmsnorm / layer_norm / softmax, with one
thread and with all cores (torch with as many threads), plus BLIS called
directly on the matmul's shape (the ceiling: tiles::matmul is one BLIS
call per core).

Each thread count runs in its own process (OC_NUM_CORES is read when the
engine starts). Timing: benchlib's interleaved rounds; ratios are medians
of paired ratios (speed = torch time / tiles time: above 1 is faster).
The machine's load (1-minute load average) is recorded beside them.

Writes bench/results/tiles.json (bench/report.py format).

    python bench/tiles_bench.py [--rounds R] [--quick] [--norms-only] [--ops softmax,...]
                                [--counts 1,2]

A short run of the norm and small-shape rows (about 4 minutes on 2 cores):
    python bench/tiles_bench.py --norms-only --rounds 2
one op at one thread count: --norms-only --ops softmax --counts 1; one shape:
--norm-shapes 32x4096 (with --results elsewhere: a partial run rewrites tiles.json).
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "examples", "tiles"))
FLOOR = "x.clone() (one read, one fresh write: the floor)"
BLIS_SO = "/usr/lib/x86_64-linux-gnu/blis-serial/libblis.so.4"


def blis_sgemm():
    """bli_sgemm from the system's serial BLIS (the library libopcore links
    statically), for C = A B on row-major float32 torch tensors."""
    lib = ctypes.CDLL(BLIS_SO)
    f = lib.bli_sgemm
    i, p = ctypes.c_long, ctypes.c_void_p
    f.argtypes = [ctypes.c_int, ctypes.c_int, i, i, i, p, p, i, i, p, i, i, p, p, i, i]
    one, zero = ctypes.c_float(1.0), ctypes.c_float(0.0)
    NOTRANS = 0  # BLIS_NO_TRANSPOSE

    def call(a, b, c):
        m, k = a.shape
        n = b.shape[1]
        f(NOTRANS, NOTRANS, m, n, k, ctypes.addressof(one), a.data_ptr(), k, 1, b.data_ptr(), n, 1,
          ctypes.addressof(zero), c.data_ptr(), n, 1)
    return call


def child(args):
    import torch
    import torch.nn.functional as F

    import benchlib
    import opcore.torch  # noqa: F401
    import tiles_ops

    torch.set_num_threads(args.threads)
    tiles_ops.load(build_directory=os.path.join(REPO, "build", "bench", "tiles"))
    T = torch.ops.tiles
    g = torch.Generator().manual_seed(0)
    rnd = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    rows = []
    load = os.getloadavg()[0]

    def run(op, cands, flops, nbytes, ref, rounds, reps=1, pages=None, clock=None):
        s = benchlib.interleaved(cands, rounds, reps, warmup=1, clock=clock or time.perf_counter)
        for name in cands:
            t = benchlib.median(s[name])
            row = {"op": op, "threads": args.threads, "implementation": name, "ms": t * 1e3}
            if pages:  # the page policy of each candidate's result (bench/report.py checks it)
                row.update(pages)
            if flops:
                row["GFLOP/s"] = flops / t / 1e9
            if nbytes:
                row["GB/s"] = nbytes / t / 1e9
            for r in ref:
                row[f"vs {r}"] = benchlib.paired_ratio(s, r, name)
            rows.append(row)
        return s

    if args.small_only:
        small(T, rnd, run, args.rounds)
        print(json.dumps({"rows": rows, "load": [load, os.getloadavg()[0]]}))
        return
    if args.thp or args.norms_only:
        return norms(args, T, rnd, run, rows, load)
    M, K, N = args.mnk
    a, b = rnd(M, K), rnd(K, N)
    c = torch.empty(M, N)
    torch.testing.assert_close(T.matmul(a, b), a @ b, rtol=1e-3, atol=1e-3)
    cands = {"tiles::matmul": lambda: T.matmul(a, b), "torch.matmul": lambda: torch.matmul(a, b)}
    if args.threads == 1:
        blis = blis_sgemm()
        cands["BLIS bli_sgemm (direct)"] = lambda: blis(a, b, c)
    run("matmul f32 %dx%dx%d" % (M, K, N), cands, 2 * M * K * N, 0, ["torch.matmul"], args.rounds)

    Mb = args.bf16_rows
    ab, bb = a[:Mb].bfloat16(), b.bfloat16()
    run("matmul bf16 %dx%dx%d" % (Mb, K, N),
        {"tiles::matmul": lambda: T.matmul(ab, bb), "torch.matmul": lambda: torch.matmul(ab, bb)},
        2 * Mb * K * N, 0, ["torch.matmul"], 3 * args.rounds, reps=5)  # a few ms a call

    B, H, S, D = args.attn
    q, k, v = rnd(B, H, S, D), rnd(B, H, S, D), rnd(B, H, S, D)
    torch.testing.assert_close(T.flash_attention(q, k, v, True),
                               F.scaled_dot_product_attention(q, k, v, is_causal=True), rtol=1e-4, atol=1e-4)
    run("flash attention causal b%d h%d s%d d%d" % (B, H, S, D),
        {"tiles::flash_attention": lambda: T.flash_attention(q, k, v, True),
         "F.scaled_dot_product_attention": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)},
        2 * B * H * S * S * D, 0, ["F.scaled_dot_product_attention"], 2 * args.rounds)  # half a second a call

    norms(args, T, rnd, run, rows, load)


def pages_of(nbytes, thp):
    """Each side's pages for a fresh result of nbytes: opcore advises huge
    pages from 4 MiB (OC_HUGEPAGE_OUTPUTS=0: never), torch's allocator from
    2 MiB with THP_MEM_ALLOC_ENABLE=1; the copy is torch's."""
    mine = "huge" if nbytes >= 4 << 20 and os.environ.get("OC_HUGEPAGE_OUTPUTS", "1") != "0" else "4k"
    theirs = "huge" if thp and nbytes >= 2 << 20 else "4k"
    return mine, theirs


def norms(args, T, rnd, run, rows, load):
    """rmsnorm, layer_norm, softmax against torch eager and torch.compile,
    each row on equal terms: with --thp torch's own allocator also asks for
    huge pages (THP_MEM_ALLOC_ENABLE=1, set by the parent), as opcore does
    for a fresh result of several MiB, so only the kernels differ (and the
    copy of the same bytes, the floor, runs beside them). Without it the
    large shape's rows measure the huge-page output gain (opcore huge,
    torch 4 KiB), labelled so; the small shape's results are under 2 MiB
    (4 KiB pages on both sides) and run once, in the --thp process."""
    if args.thp:
        small(T, rnd, run, args.rounds)
    for R, C in args.norm_shapes:
        mine, theirs = pages_of(R * C * 4, args.thp)
        if not args.thp and mine == theirs:
            continue
        norm_rows(args, T, rnd, run, R, C, mine, theirs, rows)
    print(json.dumps({"rows": rows, "load": [load, os.getloadavg()[0]]}))


SMALL = [(2, 5), (8, 64)]
OPS = ("softmax", "rmsnorm", "layer_norm", "matmul")  # --ops narrows the norm and small rows
CPP_EXT = "C++ extension op (torch.ops)"

# The same math as a C++ extension author writes it (TORCH_LIBRARY, plain
# loops into a fresh tensor, -O3): through torch.ops, the route tiles:: ops
# take, so its time over torch eager's is the ceiling a user's own
# alternative reaches on these shapes.
CPP_SMALL = """
#include <torch/extension.h>
#include <cmath>

torch::Tensor softmax(const torch::Tensor& x) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat && x.is_contiguous() && x.dim() >= 1,
                "cpp_small::softmax: contiguous float32");
    torch::Tensor y = torch::empty_like(x);
    const int64_t d = x.size(-1), rows = d ? x.numel() / d : 0;
    const float* s = x.data_ptr<float>();
    float* o = y.data_ptr<float>();
    for (int64_t r = 0; r < rows; r++, s += d, o += d) {
        float m = -INFINITY, sum = 0.0f;
        for (int64_t j = 0; j < d; j++) m = s[j] > m ? s[j] : m;
        for (int64_t j = 0; j < d; j++) sum += o[j] = std::exp(s[j] - m);
        const float inv = 1.0f / sum;
        for (int64_t j = 0; j < d; j++) o[j] *= inv;
    }
    return y;
}

torch::Tensor matmul(const torch::Tensor& a, const torch::Tensor& b) {
    TORCH_CHECK(a.scalar_type() == torch::kFloat && b.scalar_type() == torch::kFloat &&
                a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0) && a.is_contiguous() &&
                b.is_contiguous(),
                "cpp_small::matmul: contiguous float32 [m, k] x [k, n]");
    const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
    torch::Tensor c = torch::empty({m, n}, a.options());
    const float *pa = a.data_ptr<float>(), *pb = b.data_ptr<float>();
    float* pc = c.data_ptr<float>();
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < n; j++) pc[i * n + j] = 0.0f;
        for (int64_t p = 0; p < k; p++)
            for (int64_t j = 0; j < n; j++) pc[i * n + j] += pa[i * k + p] * pb[p * n + j];
    }
    return c;
}

TORCH_LIBRARY(cpp_small, m) {
    m.def("softmax(Tensor x) -> Tensor");
    m.def("matmul(Tensor a, Tensor b) -> Tensor");
}
TORCH_LIBRARY_IMPL(cpp_small, CPU, m) {
    m.impl("softmax", softmax);
    m.impl("matmul", matmul);
}
"""


def cpp_small_ops():
    """torch.ops.cpp_small (softmax, matmul), built once (ninja caches it)."""
    import torch

    import cpp_relu
    if not hasattr(torch.ops.cpp_small, "softmax"):
        where = os.path.join(REPO, "build", "bench", "cpp_small")
        cpp_relu._build(where, "libcpp_small", CPP_SMALL, ["-O3"])
    return torch.ops.cpp_small


def small(T, rnd, run, rounds):
    """The fixed cost of a tile-layer op: tiles:: ops through torch.ops (the
    call users write) on tiny inputs against the same op in torch eager, on
    the calling thread's CPU time (microseconds a call: the machine's other
    work would otherwise dominate wall time). softmax and matmul also run
    as a C++ extension op through torch.ops (CPP_SMALL): the same route's
    cost with a user's own kernel."""
    import torch
    import torch.nn.functional as F
    cpp = cpp_small_ops() if {"softmax", "matmul"} & set(OPS) else None
    for R, C in SMALL:
        x, w, b, m = rnd(R, C), rnd(C), rnd(C), rnd(C, R)
        ops = {"softmax": (lambda: T.softmax(x), lambda: torch.softmax(x, -1)),
               "rmsnorm": (lambda: T.rmsnorm(x, w, 1e-6), lambda: F.rms_norm(x, [C], w, 1e-6)),
               "layer_norm": (lambda: T.layer_norm(x, w, b, 1e-5), lambda: F.layer_norm(x, [C], w, b, 1e-5)),
               "matmul": (lambda: T.matmul(x, m), lambda: torch.matmul(x, m))}
        ext = {"softmax": lambda: cpp.softmax(x), "matmul": lambda: cpp.matmul(x, m)}
        for op, (fn, eager) in ops.items():
            if op not in OPS:
                continue
            cands = {f"tiles::{op}": fn, "torch eager": eager}
            if op in ext:
                torch.testing.assert_close(ext[op](), eager(), rtol=1e-5, atol=1e-5)
                cands[CPP_EXT] = ext[op]
            run(f"small: {op} [{R}, {C}]", cands, 0, 0, ["torch eager"], 3 * rounds, reps=1000,
                clock=time.thread_time)


# At [32, 4096] (in cache: a copy of the bytes takes microseconds) each norm row also runs the
# fastest kernels of its kind through the same call path (bench/kernels/norm_floor.c): the
# ceiling of its speed against torch's copy.
ONE_PASS = ("one-pass rmsnorm in plain C via opcore "
            "(the floor of a norm that takes its own statistics)")
SCALE = "x * w in plain C via opcore (a norm whose statistics came with x)"
EXP_ONLY = "the tile layer's exp alone via opcore (the floor of a softmax)"
OC_COPY = "memcpy of the rows via opcore (a copy through the same call path)"
CEILING = {"rmsnorm": ONE_PASS, "layer_norm": ONE_PASS, "softmax": EXP_ONLY}


def floor_ops():
    """torch.ops.norm_floor (bench/kernels/norm_floor.c), built once."""
    import torch
    from opcore import custom_op

    k = os.path.join(HERE, "kernels")
    custom_op.loaded_libraries().get("norm_floor") or custom_op.load(
        name="norm_floor", compute_srcs=[os.path.join(k, "norm_floor.c")],
        shape_srcs=[os.path.join(k, "norm_floor_shape.c")], multicore=True,
        build_directory=os.path.join(REPO, "build", "bench", "norm_floor"))
    return torch.ops.norm_floor


def floor_cands(op, x, w):
    """The floor rows of op's [32, 4096] rows, each checked against torch."""
    import torch
    import torch.nn.functional as F

    fl = floor_ops()
    cands = {OC_COPY: lambda: fl.copy(x)}
    if op == "softmax":
        cands[EXP_ONLY] = lambda: fl.exp_rows(x)
        torch.testing.assert_close(fl.exp_rows(x), x.exp(), rtol=1e-5, atol=1e-6)
    else:
        cands[ONE_PASS] = lambda: fl.one_pass(x, w, 1e-6)
        cands[SCALE] = lambda: fl.scale(x, w)
        torch.testing.assert_close(fl.one_pass(x, w, 1e-6), F.rms_norm(x, [x.shape[-1]], w, 1e-6),
                                   rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(fl.copy(x), x, rtol=0, atol=0)
    return cands


def norm_rows(args, T, rnd, run, R, C, mine, theirs, rows):
    import torch
    import torch.nn.functional as F
    gain = mine != theirs
    tag = " [huge-page gain: opcore huge, torch 4k]" if gain else f" [both {mine} pages]"
    x, w, bias = rnd(R, C), rnd(C), rnd(C)
    nb = 2 * R * C * 4
    norms = {
        "rmsnorm": (lambda: T.rmsnorm(x, w, 1e-6), lambda x, w: F.rms_norm(x, [C], w, 1e-6)),
        "layer_norm": (lambda: T.layer_norm(x, w, bias, 1e-5),
                       lambda x, w: F.layer_norm(x, [C], w, bias, 1e-5)),
        "softmax": (lambda: T.softmax(x), lambda x, w: torch.softmax(x, -1)),
    }
    for op, (fn, eager) in norms.items():
        if op not in OPS:
            continue
        comp = torch.compile(eager)
        comp(x, w)
        got = fn()
        torch.testing.assert_close(got[0] if isinstance(got, tuple) else got, eager(x, w), rtol=1e-4, atol=1e-4)
        cands = {f"tiles::{op}": fn, "torch eager": lambda: eager(x, w), "torch.compile": lambda: comp(x, w)}
        if not gain:  # the floor of any op reading x once into a fresh result: a copy
            cands[FLOOR] = x.clone
        if not gain and R * C < 1 << 22:  # in cache: the floors of the ratio to the copy
            cands.update(floor_cands(op, x, w))
        pages = {"_pages": {n: mine if n.startswith("tiles::") else theirs for n in cands}, "pages":
                 f"opcore {mine}, torch {theirs}" if gain else f"both {mine}"}
        if gain:
            pages["_pages_gain"] = True
        # tens of ms a call at [4096, 8192]: 3 calls a round; microseconds at [32, 4096]: 300
        reps = 3 if R * C >= 1 << 22 else 300
        refs = ["torch eager", "torch.compile"] + ([] if gain else [FLOOR])
        run("%s [%d, %d]%s" % (op, R, C, tag), cands, 0, nb, refs, 3 * args.rounds, reps=reps, pages=pages)


def bf16_note():
    """What the bfloat16 matmul row compares on this CPU."""
    import benchlib
    have = set(benchlib.isa())
    if "AMX" in have:
        return ("tiles::matmul runs AMX-BF16 (tdpbf16ps on b packed in panels, exact products, "
                "float32 sums), torch's bfloat16 matmul oneDNN's AMX kernels.")
    if "AVX-512BF16" in have:
        return ("torch's bfloat16 matmul runs oneDNN's AVX512-BF16 kernels; tiles::matmul widens "
                "to float32 for BLIS (its vdpbf16ps kernel was slower at this shape).")
    return ("torch's bfloat16 matmul on this CPU (no AVX512-BF16, no AMX) runs at well under "
            "1 GFLOP/s; tiles::matmul widens to float32 for BLIS.")


def main():
    global OPS
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="small shapes (a smoke run)")
    p.add_argument("--norms-only", action="store_true", help="only the rmsnorm, layer_norm and softmax rows")
    p.add_argument("--small-only", action="store_true",
                   help="only the small-shape rows (a few seconds a thread count)")
    p.add_argument("--ops", default=",".join(OPS), help="norm / small-shape ops to run (comma-separated)")
    p.add_argument("--counts", default="", help="thread counts to run, e.g. 1,2 (default 1, 2 and all)")
    p.add_argument("--norm-shapes", default="", dest="norm_shapes_arg",
                   help="norm shapes to run, e.g. 32x4096 (default [4096, 8192] and [32, 4096])")
    p.add_argument("--threads", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--thp", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--results", default=os.path.join(HERE, "results"))
    args = p.parse_args()
    OPS = tuple(o for o in args.ops.split(",") if o)
    if args.quick:
        args.mnk, args.bf16_rows, args.attn = (512, 256, 384), 64, (1, 2, 512, 64)
        args.norm_shapes = [(256, 1024), (32, 4096)]
    else:
        args.mnk, args.bf16_rows, args.attn = (4096, 1024, 2048), 512, (1, 8, 4096, 128)
        args.norm_shapes = [(4096, 8192), (32, 4096)]
    if args.norm_shapes_arg:
        args.norm_shapes = [tuple(int(v) for v in sh.split("x"))
                            for sh in args.norm_shapes_arg.split(",")]
    if args.threads:
        return child(args)
    import benchlib

    rows, loads = [], []
    cpus = os.cpu_count() or 1
    counts = sorted({t for t in (1, 2, cpus) if t <= cpus})
    if args.counts:
        counts = sorted({int(t) for t in args.counts.split(",")})
    thps = (True,) if args.small_only else (False, True)  # the small rows run in the THP process
    for threads, thp in [(t, thp) for t in counts for thp in thps]:
        cmd = [sys.executable, __file__, "--threads", str(threads), "--rounds", str(args.rounds)]
        cmd += ["--quick"] if args.quick else []
        cmd += ["--thp"] if thp else []
        cmd += ["--norms-only"] if args.norms_only else []
        cmd += ["--small-only"] if args.small_only else []
        cmd += ["--ops", args.ops]
        cmd += ["--norm-shapes", ",".join("%dx%d" % sh for sh in args.norm_shapes)]
        env = {**os.environ, "OC_NUM_CORES": str(threads)}
        if thp:
            env["THP_MEM_ALLOC_ENABLE"] = "1"
        out = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if out.returncode:
            sys.exit(out.stderr[-3000:])
        res = json.loads(out.stdout.strip().splitlines()[-1])
        rows += res["rows"]
        loads.append((threads, thp, res["load"]))
    targets = []

    def row(op_prefix, threads, impl, gain=False):
        for r in rows:
            if (r["op"].startswith(op_prefix) and r["threads"] == threads and r["implementation"] == impl
                    and bool(r.get("_pages_gain")) == gain):
                return r
        return {}

    def ratio(op_prefix, threads, impl, ref, gain=False):
        return row(op_prefix, threads, impl, gain).get(f"vs {ref}")

    for threads in counts:
        for op, impl, ref, want in [("matmul f32", "tiles::matmul", "torch.matmul", 0.95),
                                    ("matmul bf16", "tiles::matmul", "torch.matmul", 0.9),
                                    ("flash attention", "tiles::flash_attention", "F.scaled_dot_product_attention", 1.0)]:
            v = ratio(op, threads, impl, ref)
            if v is None:
                continue
            t = {"metric": f"{op}, {threads} thread(s): {impl} speed vs {ref}", "min": want, "value": v,
                 "met": v >= want}
            if op == "matmul f32" and threads == 1:
                t["ceiling"] = ratio(op, 1, "BLIS bli_sgemm (direct)", ref)
                t["ceiling_what"] = "BLIS called directly on the same shape"
            targets.append(t)
        for op in ("softmax", "rmsnorm", "layer_norm", "matmul"):
            for R, C in SMALL:  # at most 1.5x torch eager's time: speed >= 1 / 1.5
                v = ratio(f"small: {op} [{R}, {C}]", threads, f"tiles::{op}", "torch eager")
                if v is not None:
                    t = {"metric": f"small: {op} [{R}, {C}], {threads} thread(s), through "
                         f"torch.ops: tiles::{op} speed vs torch eager (CPU time)",
                         "min": round(1 / 1.5, 3), "value": v, "met": v >= 1 / 1.5}
                    c = ratio(f"small: {op} [{R}, {C}]", threads, CPP_EXT, "torch eager")
                    if c is not None:
                        t["ceiling"] = c
                        t["ceiling_what"] = "the same math as a C++ extension op through torch.ops"
                    targets.append(t)
        # the norms on equal pages: >= 1.0x eager and compile, and within 0.85x of the copy
        for op in ("rmsnorm", "layer_norm", "softmax"):
            for R, C in args.norm_shapes:
                name, impl = f"{op} [{R}, {C}]", f"tiles::{op}"
                for ref, want in (("torch eager", 1.0), ("torch.compile", 1.0), (FLOOR, 0.85)):
                    v = ratio(name, threads, impl, ref)
                    if v is None:
                        continue
                    pages = row(name, threads, impl).get("pages", "")
                    t = {"metric": f"{name}, {threads} thread(s), {pages} pages: {impl} speed vs "
                         f"{'the copy of the same bytes' if ref == FLOOR else ref}",
                         "min": want, "value": v, "met": v >= want}
                    if ref != FLOOR:
                        t["ceiling"] = ratio(name, threads, FLOOR, ref)
                        t["ceiling_what"] = "a copy of x into a fresh result (torch's clone)"
                    elif ratio(name, threads, CEILING[op], ref) is not None:
                        t["ceiling"] = ratio(name, threads, CEILING[op], ref)
                        t["ceiling_what"] = CEILING[op]
                    targets.append(t)
    notes = ("Speed ratios are medians of paired interleaved ratios (torch time / opcore time). "
             "1-minute load average at the start and end of each process: "
             + ", ".join(f"{t} thread(s){' (torch THP)' if h else ''}: {a:.1f} -> {b:.1f}"
                         for t, h, (a, b) in loads)
             + " (other work shares this machine's cores). bfloat16 runs on a " + str(args.bf16_rows)
             + "-row A: " + bf16_note() + " "
             "Each norm row names the pages of both sides' results. A fresh [4096, 8192] float32 result "
             "is 128 MiB: its first touch costs a page fault per 4 KiB (about 90 ms here, more than any "
             "of these kernels). opcore advises transparent huge pages for a fresh result of 4 MiB or "
             "more (one fault per 2 MiB; OC_HUGEPAGE_OUTPUTS=0 turns it off); torch does so only with "
             "THP_MEM_ALLOC_ENABLE=1. The headline rows run torch that way, in processes of their own, "
             "so both sides' results are on huge pages and only the kernels differ; the rows marked "
             "[huge-page gain] run torch on 4 KiB pages and measure what opcore's huge-page results "
             "give a user on top. [32, 4096] results (512 KiB) are on 4 KiB pages on both sides. "
             "At [32, 4096] each op's rows also hold the fastest kernels of its kind through "
             "the same call path (bench/kernels/norm_floor.c, plain C, each core its rows): a "
             "memcpy of the rows; for rmsnorm and layer_norm a one-pass rmsnorm (each row read "
             "once from L2, its sum of squares in four independent 16-lane sums, then scaled "
             "from L1: no norm that takes its own statistics does less) and x * w (a norm whose "
             "statistics came with x, taken by the op that wrote it); for softmax the exp alone. "
             "The one-pass rmsnorm's and the exp's speed against the copy are the ceiling of the "
             "copy target (its 'vs x.clone()' column).")
    benchlib.write("tiles.json", results=args.results, obj={
        "title": "Tile layer (examples/tiles) vs PyTorch", "order": 45, "rows": rows, "notes": notes,
        "columns": ["op", "threads", "implementation", "pages", "ms", "GFLOP/s", "GB/s", "vs torch.matmul",
                    "vs F.scaled_dot_product_attention", "vs torch eager", "vs torch.compile", f"vs {FLOOR}"],
        "target": targets})
    for r in rows:
        print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items() if not k.startswith("_")})
    for t in targets:
        print(("MET   " if t["met"] else "SHORT ") + t["metric"], round(t["value"], 3))


if __name__ == "__main__":
    main()
