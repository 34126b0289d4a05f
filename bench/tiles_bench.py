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

    python bench/tiles_bench.py [--rounds R] [--quick]
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys

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

    def run(op, cands, flops, nbytes, ref, rounds, reps=1):
        s = benchlib.interleaved(cands, rounds, reps, warmup=1)
        for name in cands:
            t = benchlib.median(s[name])
            row = {"op": op, "threads": args.threads, "implementation": name, "ms": t * 1e3}
            if flops:
                row["GFLOP/s"] = flops / t / 1e9
            if nbytes:
                row["GB/s"] = nbytes / t / 1e9
            for r in ref:
                row[f"vs {r}"] = benchlib.paired_ratio(s, r, name)
            rows.append(row)
        return s

    if args.thp:
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
        2 * Mb * K * N, 0, ["torch.matmul"], max(2, args.rounds // 2))

    B, H, S, D = args.attn
    q, k, v = rnd(B, H, S, D), rnd(B, H, S, D), rnd(B, H, S, D)
    torch.testing.assert_close(T.flash_attention(q, k, v, True),
                               F.scaled_dot_product_attention(q, k, v, is_causal=True), rtol=1e-4, atol=1e-4)
    run("flash attention causal b%d h%d s%d d%d" % (B, H, S, D),
        {"tiles::flash_attention": lambda: T.flash_attention(q, k, v, True),
         "F.scaled_dot_product_attention": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)},
        2 * B * H * S * S * D, 0, ["F.scaled_dot_product_attention"], 2 * args.rounds)  # half a second a call

    norms(args, T, rnd, run, rows, load)


def norms(args, T, rnd, run, rows, load):
    """rmsnorm, layer_norm, softmax against torch eager and torch.compile.
    With --thp torch's own allocator also asks for huge pages
    (THP_MEM_ALLOC_ENABLE=1, set by the parent), as opcore does for a fresh
    result of several MiB: then only the kernels differ."""
    import torch
    import torch.nn.functional as F
    tag = " [torch THP on]" if args.thp else ""
    R, C = args.rows_cols
    x, w, bias = rnd(R, C), rnd(C), rnd(C)
    nb = 2 * R * C * 4
    norms = {
        "rmsnorm": (lambda: T.rmsnorm(x, w, 1e-6), lambda x, w: F.rms_norm(x, [C], w, 1e-6)),
        "layer_norm": (lambda: T.layer_norm(x, w, bias, 1e-5),
                       lambda x, w: F.layer_norm(x, [C], w, bias, 1e-5)),
        "softmax": (lambda: T.softmax(x), lambda x, w: torch.softmax(x, -1)),
    }
    for op, (mine, eager) in norms.items():
        comp = torch.compile(eager)
        comp(x, w)
        got = mine()
        torch.testing.assert_close(got[0] if isinstance(got, tuple) else got, eager(x, w), rtol=1e-4, atol=1e-4)
        cands = {f"tiles::{op}": mine, "torch eager": lambda: eager(x, w), "torch.compile": lambda: comp(x, w)}
        if args.thp:  # the floor of any op reading x once into a fresh result: a copy
            cands[FLOOR] = x.clone
        run("%s [%d, %d]%s" % (op, R, C, tag), cands,
            0, nb, ["torch eager", "torch.compile"], 3 * args.rounds, reps=3)  # tens of ms: 45 calls each
    print(json.dumps({"rows": rows, "load": [load, os.getloadavg()[0]]}))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="small shapes (a smoke run)")
    p.add_argument("--threads", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--thp", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--results", default=os.path.join(HERE, "results"))
    args = p.parse_args()
    if args.quick:
        args.mnk, args.bf16_rows, args.attn, args.rows_cols = (512, 256, 384), 64, (1, 2, 512, 64), (256, 1024)
    else:
        args.mnk, args.bf16_rows, args.attn, args.rows_cols = (4096, 1024, 2048), 512, (1, 8, 4096, 128), (4096, 8192)
    if args.threads:
        return child(args)
    import benchlib

    rows, loads = [], []
    for threads, thp in [(t, thp) for t in sorted({1, os.cpu_count() or 1}) for thp in (False, True)]:
        cmd = [sys.executable, __file__, "--threads", str(threads), "--rounds", str(args.rounds)]
        cmd += (["--quick"] if args.quick else []) + (["--thp"] if thp else [])
        env = {**os.environ, "OC_NUM_CORES": str(threads)}
        if thp:
            env["THP_MEM_ALLOC_ENABLE"] = "1"
        out = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if out.returncode:
            sys.exit(out.stderr[-3000:])
        res = json.loads(out.stdout.strip().splitlines()[-1])
        rows += res["rows"]
        if not thp:
            loads.append((threads, res["load"]))
    targets = []

    def ratio(op_prefix, threads, impl, ref, thp=False):
        for r in rows:
            if (r["op"].startswith(op_prefix) and r["threads"] == threads and r["implementation"] == impl
                    and r["op"].endswith("[torch THP on]") == thp):
                return r.get(f"vs {ref}")
        return None

    for threads in sorted({1, os.cpu_count() or 1}):
        for op, impl, ref, want in [("matmul f32", "tiles::matmul", "torch.matmul", 0.95),
                                    ("matmul bf16", "tiles::matmul", "torch.matmul", 0.9),
                                    ("flash attention", "tiles::flash_attention", "F.scaled_dot_product_attention", 1.0),
                                    ("rmsnorm", "tiles::rmsnorm", "torch eager", 1.0),
                                    ("rmsnorm", "tiles::rmsnorm", "torch.compile", 1.0),
                                    ("layer_norm", "tiles::layer_norm", "torch eager", 1.0),
                                    ("layer_norm", "tiles::layer_norm", "torch.compile", 1.0),
                                    ("softmax", "tiles::softmax", "torch eager", 1.0),
                                    ("softmax", "tiles::softmax", "torch.compile", 1.0)]:
            v = ratio(op, threads, impl, ref)
            if v is None:
                continue
            t = {"metric": f"{op}, {threads} thread(s): {impl} speed vs {ref}", "min": want, "value": v,
                 "met": v >= want}
            if op == "matmul f32" and threads == 1:
                t["ceiling"] = ratio(op, 1, "BLIS bli_sgemm (direct)", ref)
                t["ceiling_what"] = "BLIS called directly on the same shape"
            targets.append(t)
            v = ratio(op, threads, impl, ref, thp=True) if op in ("rmsnorm", "layer_norm", "softmax") else None
            if v is not None:
                targets.append({"metric": f"{op}, {threads} thread(s), torch with THP_MEM_ALLOC_ENABLE=1: "
                                f"{impl} speed vs {ref}", "min": want, "value": v, "met": v >= want,
                                "ceiling": ratio(op, threads, FLOOR, ref, thp=True),
                                "ceiling_what": "a copy of x into a fresh result (torch's clone)"})
    notes = ("Speed ratios are medians of paired interleaved ratios (torch time / opcore time). "
             "1-minute load average at the start and end of each process: "
             + ", ".join(f"{t} thread(s): {a:.1f} -> {b:.1f}" for t, (a, b) in loads)
             + " (other work shares this machine's cores). bfloat16 runs on a " + str(args.bf16_rows)
             + "-row A: torch's bfloat16 matmul on this CPU (no AVX512-BF16) runs at well under 1 GFLOP/s. "
             "A fresh [4096, 8192] float32 result is 128 MiB: its first touch costs a page fault per 4 KiB "
             "(about 90 ms here, more than any of these kernels). opcore advises transparent huge pages for "
             "a fresh result of 4 MiB or more (one fault per 2 MiB; OC_HUGEPAGE_OUTPUTS=0 turns it off); "
             "torch does so only with THP_MEM_ALLOC_ENABLE=1. The rows marked [torch THP on] run torch that "
             "way, in a process of their own: there only the kernels differ.")
    benchlib.write("tiles.json", results=args.results, obj={
        "title": "Tile layer (examples/tiles) vs PyTorch", "order": 45, "rows": rows, "notes": notes,
        "columns": ["op", "threads", "implementation", "ms", "GFLOP/s", "GB/s", "vs torch.matmul",
                    "vs F.scaled_dot_product_attention", "vs torch eager", "vs torch.compile"],
        "target": targets})
    for r in rows:
        print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()})
    for t in targets:
        print(("MET   " if t["met"] else "SHORT ") + t["metric"], round(t["value"], 3))


if __name__ == "__main__":
    main()
