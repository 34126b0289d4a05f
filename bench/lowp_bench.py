#!/usr/bin/env python3
"""Low-precision linear layers (opcore/tile.h's oc_tile_linear) against
PyTorch at decode and prefill shapes, 1 and 2 threads:

- int8 dynamic quantised linear, M = 1, 16, 256, K = N = 4096, on weights
  prepacked once (lowp_pack_i8, outside the timed loop, as fbgemm packs
  at construction), against torch's dynamic quantised Linear (torch.ao,
  the fbgemm engine) and the unpacked int8 weights (OC_W_I8); x quantised
  per row in 8 bits, and in 7 as torch's dynamic Linear quantises it on
  x86 (reduce_range): the equal-terms row the target is judged on; with
  --isa avx2, from 16 rows of x, also the instructions both sides' AVX2
  kernels take per 32 products run alone on registers for as many
  products (lowp_i8_mix): the rate no such kernel passes;
- int8 oc_tile_matmul, 16 x 4096 x 4096 into int32 (b transposed),
  against torch._int_mm (the same exact product) and fbgemm's Linear;
- float32 GEMV 1 x 4096 x 4096 against torch.matmul (F.linear) and against
  two copies of the weight's bytes at the same thread count: C memcpy,
  each core copying its share (lowp_copy, bench/kernels/lowp_linear.c:
  the memory-bandwidth floor the targets are judged against) and torch's
  copy_ into a preallocated tensor (for reference); and a read of them
  alone with the GEMV's loads and prefetches (lowp_widen of float32
  weights: an add where the GEMV has its FMA with x, no result to write;
  the GEMV's ceiling, the rate a thread count reads them at);
- bfloat16 / float16 weight GEMV against float32 torch.matmul, three ways:
  weights in the cache (each block of calls after three untimed calls of
  its own: a layer called again and again), weights beyond the cache
  (several copies of each weight called in turn, 256 MiB or more of each
  kind: what a decoder's layers see), both beside the same weights read
  and widened alone (lowp_widen: the GEMV's ceiling); and, not judged,
  blocks taking turns with torch's as the other rows do, each call also
  timed alone. A 1x4096x4096 layer's weights (64 MiB float32, 32 MiB
  half) stay in a large last-level cache between calls of the same
  layer, but only after a few passes: after a block of the other side's
  calls each side's first calls read its weights back from memory (the
  last row's per-call columns), so that row times the cache's refill of
  two footprints (64 and 32 MiB) as much as either kernel;
- bfloat16 weights at prefill shapes, M = 64 and 256, K = N = 4096 (AMX-BF16
  where the CPU has AMX) against torch.matmul in bfloat16 (oneDNN) and
  float32;
- Q8_0 / Q4_0 GEMV (GGML blocks, as they are and packed once 8 rows a
  group by oc_weights_pack) against copies of the quantised bytes (C
  memcpy split across the cores, as above, and torch's copy_);
- group-wise int8 and uint4 (scale and zero point per group of 32 / 128)
  GEMV against copies of the quantised bytes (with their scales and zero
  points; the same two kinds) and float32 torch.matmul; uint4 also beside
  the same weights read and widened alone (lowp_widen_u4: its ceiling).

With --isa avx2 the bench's own kernels (copies, ceilings) are built
without AVX-512 or AVX-VNNI (build/bench/lowp-avx2), as the tile layer
runs.

"Bandwidth" is the weight bytes read over the time; a copy's bandwidth is
the bytes copied over the time (it reads and writes them). Each thread
count runs in its own process (OC_NUM_CORES is read when the engine
starts). Timing: benchlib's interleaved rounds; speed ratios are medians
of paired ratios (the reference's time over opcore's: above 1 is faster).
In those rounds each candidate always follows the same one, so a block
after another's weights would refill its own every time: every row but
the float32 GEMV's (its candidates read the same tensor) and the
half-weight rows beyond the cache or in turn gives each block three
untimed calls of the candidate's own first.

Writes bench/results/lowp.json (bench/report.py format).

    python bench/lowp_bench.py [--rounds R] [--quick] [--only float,half,prefill,q,group,int8]
                               [--pages 4k|huge]

--rounds (default 7) sets the prefill and oc_tile_matmul rows' rounds;
the GEMV, quantised GEMV and int8 linear rows run at least 15. The full
run takes about two minutes here (--isa avx2 about three; the int8
section alone about a minute); --only picks sections, for a shorter run.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
# the read bandwidth ceiling of a GEMV: one pass over the weight bytes, nothing written
READ = "read of the weight bytes alone (lowp_widen, the GEMV's loads)"
# the floors the bandwidth targets are judged against: C memcpy of the same bytes, each core
# copying its share (lowp_copy); torch's copy_ into a preallocated tensor, for reference
MEMCPY = "memcpy of the weight bytes (C, split across the cores)"
QMEMCPY = "memcpy of the quantised bytes (C, split across the cores)"
# the ceiling of a half-weight GEMV that widens in registers: the same reads and widening alone
WIDEN = "read and widening of the half weights alone (lowp_widen)"
# weights beyond the cache: at least this many bytes of each kind, called in turn
BEYOND = 256 << 20
# weights in the cache: the untimed calls before each timed block. After a block of the other
# side's calls, a side's first call here ran 1.1-2.1x its later ones and its third up to 1.3x
# (both sides, 1 and 2 threads): the last-level cache keeps a weight's lines after a few passes
SETTLE = 3
# rounds of the 1x4096x4096 float and half-weight GEMV rows at least (a few seconds each): their
# targets sit near parity (float32) or near 2x (half), where a host's noise moves one round by 10%;
# the quantised GEMV and int8 rows too (on AVX2 the int8 rows sit within a few percent of the
# instructions' own rate on both sides, and a 2-thread Q4_0 GEMV read 0.32-0.46 ms in four runs)
GEMV_ROUNDS = 15
# the int8 dynamic linear with x in 7 bits, as torch's dynamic quantised Linear quantises it on
# x86 (reduce_range=True: fbgemm's vpmaddubsw pairs then never saturate on CPUs without VNNI)
X7 = "opcore int8 prepacked, x in 7 bits as fbgemm's"
# the ceiling of a uint4 group GEMV that widens in registers: the same reads and widening alone
U4WIDEN = "read and widening of the uint4 weights alone (lowp_widen_u4)"
# on AVX2 (--isa avx2) the int8 rows from 16 rows of x are bound by their multiplies: this row
# runs the instructions both fbgemm's AVX2 kernel and opcore's use for every 32 products alone,
# on registers, for as many products (lowp_i8_mix): the rate no kernel built on them can pass
MIX = "AVX2 int8 instructions alone (vpmaddubsw, vpmaddwd, vpaddd on registers, same products)"
# the per-call columns of the rows that time each call of a block alone
CALL_COLS = ["1st call ms", "2nd call ms", "3rd call ms", "later calls ms"]
W = {"float32": 0, "bfloat16": 1, "float16": 2, "q8_0": 3, "q4_0": 4, "int8": 5, "int8-group": 6,
     "uint4-group": 7, "int8-packed": 8, "q8_0-packed": 9, "q4_0-packed": 10}


def load_ops():
    import torch

    import benchlib
    from opcore import custom_op
    k = os.path.join(HERE, "kernels")
    # the bench's own kernels (copies, ceilings) on the instructions the tile layer is held to:
    # with OC_TILE_ISA=avx2 (--isa avx2) built without AVX-512 or AVX-VNNI, as on a CPU
    # without them
    avx2 = benchlib.forced_avx2()
    custom_op.loaded_libraries().get("lowp") or custom_op.load(
        name="lowp", compute_srcs=[os.path.join(k, "lowp_linear.c")],
        shape_srcs=[os.path.join(k, "lowp_shape.c")],
        extra_cflags=benchlib.AVX2_CFLAGS if avx2 else None,
        build_directory=os.path.join(REPO, "build", "bench", "lowp-avx2" if avx2 else "lowp"))
    return torch.ops.lowp


def cpu_line():
    model = "unknown CPU"
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model == "unknown CPU":
                    model = line.split(":", 1)[1].strip()
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    isa = [f for f in ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16",
                       "avx_vnni", "amx_int8") if f in flags]
    return model, isa


def child(args):
    import torch
    import torch.nn.functional as F

    import benchlib
    import opcore.torch  # noqa: F401

    torch.set_num_threads(args.threads)
    T = load_ops()
    g = torch.Generator().manual_seed(0)
    K = N = args.kn
    rows = []
    load = os.getloadavg()[0]
    none = torch.zeros(1)

    def run(op, cands, nbytes, refs, rounds, reps, warm=0, per_call=False):
        # warm: untimed calls of the same candidate before each timed block; per_call: each
        # call timed on its own as well, the medians of a block's first calls and of the rest
        calls = {} if per_call else None
        s = benchlib.interleaved(cands, rounds, reps, warmup=1 if warm else 2,
                                 block_warmup=warm, calls=calls)
        for name in cands:
            t = benchlib.median(s[name])
            row = {"op": op, "threads": args.threads, "implementation": name, "ms": t * 1e3}
            for i, col in enumerate(CALL_COLS[:-1] if calls else ()):
                row[col] = benchlib.median(calls[name][i]) * 1e3
            if calls:
                row[CALL_COLS[-1]] = benchlib.median(
                    [c for rest in calls[name][len(CALL_COLS) - 1:] for c in rest]) * 1e3
            if nbytes.get(name):
                row["GB/s"] = nbytes[name] / t / 1e9
            for r in refs:
                if r != name:
                    row[f"vs {r}"] = benchlib.paired_ratio(s, r, name)
            # every operand is a torch tensor (the copies' destinations too)
            benchlib.tag(row, pages={c: benchlib.page_policy("torch", nbytes.get(c) or w.nbytes)
                                     for c in cands})
            rows.append(row)

    w = torch.randn(N, K, generator=g) * 0.02
    x1 = torch.randn(1, K, generator=g)
    ref1 = F.linear(x1, w)
    lin = T.lowp_linear

    def want(section):
        return not args.only or section in args.only.split(",")

    # float32 GEMV, and copies of the same bytes (C memcpy, torch's copy_)
    wcopy, wmc = torch.empty_like(w), torch.empty_like(w)
    T.lowp_copy(w, wmc)
    assert torch.equal(wmc, w), "lowp_copy did not copy the bytes"
    y = lin(x1, w, none, W["float32"])
    torch.testing.assert_close(y, ref1, rtol=1e-4, atol=1e-4)
    want("float") and run(f"GEMV float32 1x{K}x{N}",
        {"opcore float32": lambda: lin(x1, w, none, 0), "torch.matmul": lambda: F.linear(x1, w),
         MEMCPY: lambda: T.lowp_copy(w, wmc),
         "copy of the weight bytes": lambda: wcopy.copy_(w), READ: lambda: T.lowp_widen(w)},
        {"opcore float32": w.nbytes, "torch.matmul": w.nbytes, MEMCPY: w.nbytes,
         "copy of the weight bytes": w.nbytes, READ: w.nbytes},
        ["torch.matmul", MEMCPY, "copy of the weight bytes", READ], max(args.rounds, GEMV_ROUNDS),
        args.reps)

    # bfloat16 / float16 weights against float32 torch
    for dt, name in ((torch.bfloat16, "bfloat16"), (torch.float16, "float16"))[:2 * want("half")]:
        wl = w.to(dt)
        y = lin(x1, wl, none, W[name])
        torch.testing.assert_close(y, F.linear(x1, wl.float()), rtol=1e-3, atol=1e-3)
        cands = {f"opcore {name}": lambda wl=wl, name=name: lin(x1, wl, none, W[name]),
                 "torch.matmul float32": lambda: F.linear(x1, w)}
        nbytes = {f"opcore {name}": wl.nbytes, "torch.matmul float32": w.nbytes}
        rounds = max(args.rounds, GEMV_ROUNDS)
        run(f"GEMV {name} weights 1x{K}x{N}, weights in the cache (each block after "
            f"{SETTLE} untimed calls of its own)",
            {**cands, WIDEN: lambda wl=wl: T.lowp_widen(wl)}, {**nbytes, WIDEN: wl.nbytes},
            ["torch.matmul float32", WIDEN], rounds, args.reps, warm=SETTLE)
        run(f"GEMV {name} weights 1x{K}x{N}, blocks in turn with torch's, each call also "
            "timed alone", cands, nbytes, ["torch.matmul float32"], rounds, args.reps,
            per_call=True)
        # weights beyond the cache: copies called in turn, as a decoder's layers are
        nf, nh = (max(2, -(-BEYOND // t.nbytes)) for t in (w, wl))
        fs, hs = [w.clone() for _ in range(nf)], [wl.clone() for _ in range(nh)]
        run(f"GEMV {name} weights 1x{K}x{N}, weights beyond the cache ({nh} copies of the "
            f"{name} weights, {nf} of the float32 ones, called in turn)",
            {f"opcore {name}": _in_turn(hs, lambda wl, name=name: lin(x1, wl, none, W[name])),
             "torch.matmul float32": _in_turn(fs, lambda wf: F.linear(x1, wf)),
             WIDEN: _in_turn(hs, T.lowp_widen)},
            {**nbytes, WIDEN: wl.nbytes}, ["torch.matmul float32", WIDEN], rounds, args.reps)
        del fs, hs

    # bfloat16 weights at prefill shapes (AMX-BF16 where there is AMX): against torch's
    # bfloat16 matmul (oneDNN, AMX where present) and a float32 F.linear
    wb = w.to(torch.bfloat16)
    for m in (64, 256)[:2 * want("prefill")]:
        x = torch.randn(m, K, generator=g)
        xb = x.to(torch.bfloat16)
        y = lin(x, wb, none, W["bfloat16"])
        ref = F.linear(x.double(), wb.double()).float()
        err = ((y - ref).norm() / ref.norm()).item()
        assert err < 4e-3, f"bfloat16 prefill relative error {err}"
        run(f"bfloat16 weights {m}x{K}x{N}",
            {"opcore bfloat16": lambda x=x: lin(x, wb, none, W["bfloat16"]),
             "torch.matmul bfloat16": lambda xb=xb: F.linear(xb, wb),
             "torch.matmul float32": lambda x=x: F.linear(x, w)},
            {}, ["torch.matmul bfloat16", "torch.matmul float32"], args.rounds,
            max(1, args.reps // (4 if m >= 256 else 1)), warm=SETTLE)

    # Q8_0 / Q4_0: against a copy of the quantised bytes
    for name, tol in (("q8_0", 0.02), ("q4_0", 0.15))[:2 * want("q")]:
        wq = T.lowp_quantize(w, W[name])
        qcopy, qmc = torch.empty_like(wq), torch.empty_like(wq)
        y = lin(x1, wq, none, W[name])
        err = ((y - ref1).norm() / ref1.norm()).item()
        assert err < tol, f"{name} GEMV relative error {err}"
        # the same blocks packed once, 8 rows a group (oc_weights_pack), as llama.cpp repacks
        wqp = T.lowp_pack_q(wq, W[name])
        assert torch.equal(T.lowp_linear_packed(x1, wqp, N), y)
        run(f"GEMV {name} 1x{K}x{N}",
            {f"opcore {name}": lambda wq=wq, name=name: lin(x1, wq, none, W[name]),
             f"opcore {name} packed": lambda wqp=wqp: T.lowp_linear_packed(x1, wqp, N),
             QMEMCPY: lambda qmc=qmc, wq=wq: T.lowp_copy(wq, qmc),
             "copy of the quantised bytes": lambda qcopy=qcopy, wq=wq: qcopy.copy_(wq),
             "torch.matmul float32": lambda: F.linear(x1, w)},
            {f"opcore {name}": wq.nbytes, f"opcore {name} packed": wq.nbytes,
             QMEMCPY: wq.nbytes, "copy of the quantised bytes": wq.nbytes},
            [QMEMCPY, "copy of the quantised bytes", "torch.matmul float32"],
            max(args.rounds, GEMV_ROUNDS), args.reps, warm=SETTLE)

    # group-wise int8 / uint4 weights: against a copy of their bytes (scales, zeros included)
    groups = (("uint4", 32), ("uint4", 128), ("int8", 32), ("int8", 128))
    for name, group in groups[:4 * want("group")]:
        if name == "uint4":
            wq, ws_, wz = T.lowp_quantize_u4(w, group)
            kind, tol = 7, 0.15
        else:
            b = w.reshape(N, K // group, group)
            ws_ = (b.abs().amax(-1) / 127).contiguous()
            wq = torch.round(b / ws_[..., None]).to(torch.int8).reshape(N, K)
            wz, kind, tol = none, 6, 0.02
        y = T.lowp_linear_g(x1, wq, ws_, wz, kind, group)
        err = ((y - ref1).norm() / ref1.norm()).item()
        assert err < tol, f"{name} group {group} GEMV relative error {err}"
        parts = [wq, ws_] + ([wz] if kind == 7 else [])
        copies = [torch.empty_like(t) for t in parts]
        nbytes = sum(t.nbytes for t in parts)
        # memcpy of as many bytes, as one buffer
        flat = torch.cat([t.reshape(-1).view(torch.uint8) for t in parts])
        flat2 = torch.empty_like(flat)

        def copy_all(copies=copies, parts=parts):
            for c, t in zip(copies, parts):
                c.copy_(t)
        # uint4: beside the same weights read and widened alone (the GEMV's ceiling)
        widen = {U4WIDEN: lambda wq=wq, ws_=ws_, wz=wz, group=group:
                 T.lowp_widen_u4(wq, ws_, wz, group)} if kind == 7 else {}
        run(f"GEMV {name} group {group} 1x{K}x{N}",
            {f"opcore {name} group {group}":
             lambda wq=wq, ws_=ws_, wz=wz, kind=kind, group=group:
             T.lowp_linear_g(x1, wq, ws_, wz, kind, group),
             QMEMCPY: lambda flat=flat, flat2=flat2: T.lowp_copy(flat, flat2),
             "copy of the quantised bytes": copy_all,
             "torch.matmul float32": lambda: F.linear(x1, w), **widen},
            {f"opcore {name} group {group}": nbytes, QMEMCPY: nbytes,
             "copy of the quantised bytes": nbytes, **{c: nbytes for c in widen}},
            [QMEMCPY, "copy of the quantised bytes", "torch.matmul float32", *widen],
            max(args.rounds, GEMV_ROUNDS), args.reps, warm=SETTLE)

    # int8 dynamic quantisation against torch.ao's dynamic Linear (fbgemm)
    torch.backends.quantized.engine = "fbgemm"
    fl = torch.nn.Linear(K, N, bias=False)
    with torch.no_grad():
        fl.weight.copy_(w)
    qlin = torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(fl), {torch.nn.Linear},
                                                   dtype=torch.qint8)
    ws = w.abs().amax(1) / 127
    wi8 = torch.round(w / ws[:, None]).clamp(-127, 127).to(torch.int8)
    # packed once, outside the timed loop, as fbgemm packs at construction
    wp = T.lowp_pack_i8(wi8, ws) if want("int8") else None
    # lowp_i8_mix's sink: an element per core, 64 KiB in all so the engine splits the launch
    # across the cores (it runs a launch of fewer bytes as one share: OC_MIN_SPLIT_BYTES)
    avx2, sink = benchlib.forced_avx2(), torch.zeros(16384, dtype=torch.int32)
    for m in args.int8_m[:3 * want("int8")]:
        x = torch.randn(m, K, generator=g)
        y = T.lowp_linear_packed(x, wp, N)
        assert torch.equal(y, lin(x, wi8, ws, W["int8"])), "prepacked and unpacked int8 differ"
        ref = F.linear(x, w)
        err = ((y - ref).norm() / ref.norm()).item()
        assert err < 0.03, f"int8 linear relative error {err}"
        mix = {MIX: lambda m=m: T.lowp_i8_mix(m, K, N, sink)} if avx2 and m >= 16 else {}
        cands = {X7: lambda x=x: T.lowp_linear_packed_x7(x, wp, N),
                 "opcore int8 prepacked": lambda x=x: T.lowp_linear_packed(x, wp, N),
                 "opcore int8 unpacked": lambda x=x: lin(x, wi8, ws, W["int8"]),
                 "torch.ao dynamic Linear (fbgemm)": lambda x=x: qlin(x),
                 "torch.matmul float32": lambda x=x: F.linear(x, w), **mix}
        with torch.no_grad():
            op = f"int8 dynamic linear {m}x{K}x{N}"
            # each block after SETTLE untimed calls of its own: in a cyclic order each
            # candidate follows the same one, and the one after torch.matmul's 64 MiB (or
            # another's weights) would refill its weights in every block
            run(op, cands, {}, ["torch.ao dynamic Linear (fbgemm)", "torch.matmul float32",
                                "opcore int8 unpacked", *mix], max(args.rounds, GEMV_ROUNDS),
                max(1, args.reps // (4 if m >= 256 else 1)), warm=SETTLE)
            for r in rows:  # each side's error against the float32 product of the same weights
                if r["op"] == op and r["implementation"] not in ("torch.matmul float32", MIX):
                    got = cands[r["implementation"]]()
                    r["rel. error"] = ((got - ref).norm() / ref.norm()).item()
    # oc_tile_matmul with int8 a and b and an int32 c (b transposed: w's n x k rows)
    if want("int8"):
        a8 = torch.randint(-128, 128, (16, K), generator=g, dtype=torch.int8)
        x16 = torch.randn(16, K, generator=g)
        # the exact product: float64 holds every sum of 4096 int8 products exactly
        exact = (a8.double() @ wi8.double().T).to(torch.int32)
        assert torch.equal(T.lowp_matmul_i8(a8, wi8), exact), "int8 matmul is not exact"
        with torch.no_grad():
            op = f"int8 oc_tile_matmul 16x{K}x{N} (int32 c = a b^T)"
            run(op, {"opcore oc_tile_matmul int8": lambda: T.lowp_matmul_i8(a8, wi8),
                     "torch._int_mm": lambda: torch._int_mm(a8, wi8.T),
                     "torch.ao dynamic Linear (fbgemm)": lambda: qlin(x16)},
                {}, ["torch._int_mm", "torch.ao dynamic Linear (fbgemm)"], args.rounds, args.reps,
                warm=SETTLE)
        # torch._int_mm is not exact everywhere: oneDNN's AVX2 kernels (no VNNI) saturate pairs
        # of products in 16 bits, so each run says whether it was
        for r in rows:
            if r["op"] == op and r["implementation"] != "torch.ao dynamic Linear (fbgemm)":
                r["exact"] = "yes" if r["implementation"].startswith("opcore") else (
                    "yes" if torch.equal(torch._int_mm(a8, wi8.T), exact) else "no")
    paths = {}
    for t, mm in (("float32", 1), ("bfloat16", 1), ("bfloat16", 64), ("q8_0", 1), ("q4_0", 1),
                  ("q8_0-packed", 1), ("q4_0-packed", 1), ("q4_0-packed", 64),
                  ("int8", 1), ("int8", 256), ("int8-packed", 1), ("int8-packed", 16),
                  ("uint4-group", 1), ("int8-group", 1)):
        paths[f"{t} m={mm}"] = path_of(t, mm)
    paths["int8 oc_tile_matmul 16xKxN"] = matmul_path_of(16, N, K)
    print(json.dumps({"rows": rows, "load": [load, os.getloadavg()[0]], "paths": paths}))


def _in_turn(tensors, fn):
    """A callable that calls fn on the next of tensors each time."""
    state = {"i": 0}

    def call():
        state["i"] = (state["i"] + 1) % len(tensors)
        return fn(tensors[state["i"]])
    return call


def path_of(wtype, m):
    import ctypes

    import opcore
    # already loaded: the same one
    lib = ctypes.CDLL(os.path.join(opcore.lib_dir(), "libopcore.so.0"))
    f = lib.oc_tile_linear_path
    f.restype, f.argtypes = ctypes.c_char_p, [ctypes.c_int, ctypes.c_int64]
    return f(W[wtype], m).decode()


def matmul_path_of(m, n, k):
    import ctypes

    import opcore
    lib = ctypes.CDLL(os.path.join(opcore.lib_dir(), "libopcore.so.0"))
    f = lib.oc_tile_matmul_path_shape
    f.restype = ctypes.c_char_p
    f.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    return f(4, m, n, k, 2).decode()  # OC_INT8 (dtype.h), OC_TILE_TRANS_B


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--quick", action="store_true", help="K = N = 1024 (a smoke run)")
    p.add_argument("--only", default="",
                   help="comma-separated sections: float, half, prefill, q, group, int8")
    p.add_argument("--threads", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--results", default=os.path.join(HERE, "results"))
    p.add_argument("--pages", choices=("4k", "huge"), default="4k",
                   help="4k: torch's default allocations (the weights on 4 KiB pages unless the "
                   "kernel's THP mode is 'always'); huge: every tensor of 2 MiB or more on huge "
                   "pages, both sides (THP_MEM_ALLOC_ENABLE=1), written to lowp_huge.json")
    p.add_argument("--isa", choices=("best", "avx2"), default="best",
                   help="avx2: every library on both sides limited to AVX2 (opcore's tile "
                   "layer, torch's ATen, oneDNN, MKL, fbgemm), as on a CPU without AVX-512 or "
                   "VNNI; written to lowp_avx2.json")
    args = p.parse_args()
    args.kn = 1024 if args.quick else 4096
    args.int8_m = (1, 16, 256)
    if args.threads:
        return child(args)
    import benchlib

    rows, loads, paths = [], [], {}
    for threads in (1, 2):
        cmd = [sys.executable, __file__, "--threads", str(threads), "--rounds", str(args.rounds),
               "--reps", str(args.reps), "--only", args.only] + (["--quick"] if args.quick else [])
        env = {**(benchlib.policy_env("huge") if args.pages == "huge" else os.environ),
               "OC_NUM_CORES": str(threads), **(benchlib.AVX2_ENV if args.isa == "avx2" else {})}
        out = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if out.returncode:
            sys.exit(out.stderr[-3000:])
        res = json.loads(out.stdout.strip().splitlines()[-1])
        rows += res["rows"]
        loads.append((threads, res["load"]))
        paths = res["paths"] or paths

    def val(op_prefix, threads, impl, col):
        for r in rows:
            if (r["op"].startswith(op_prefix) and r["threads"] == threads
                    and r["implementation"] == impl):
                return r.get(col)
        return None

    K = args.kn
    targets = []

    def target(metric, lo, v, **more):
        if v is not None:  # None: a section left out with --only
            targets.append({"metric": metric, "min": lo, "value": v, "met": v >= lo, **more})

    def over(a, b):
        return a / b if a is not None and b else None

    def fmt_ratio(v):
        return "-" if v is None else f"{v:.2f}x"

    for threads in (1, 2):
        for m in args.int8_m:
            v, v8 = (val(f"int8 dynamic linear {m}x", threads, c,
                         "vs torch.ao dynamic Linear (fbgemm)")
                     for c in (X7, "opcore int8 prepacked"))
            mix = val(f"int8 dynamic linear {m}x", threads, MIX,
                      "vs torch.ao dynamic Linear (fbgemm)")
            target(f"int8 dynamic linear M={m} K=N={K}, {threads} thread(s), x in 7 bits as "
                   f"fbgemm's: speed vs torch.ao dynamic Linear (fbgemm) (x in 8 bits: "
                   f"{fmt_ratio(v8)})", 1.0, v,
                   **({"ceiling": mix, "ceiling_what": "the AVX2 instructions both kernels use "
                       "for every 32 products, alone on registers for the same products "
                       "(lowp_i8_mix)"} if mix else {}))
        v = val("GEMV float32", threads, "opcore float32", "vs torch.matmul")
        target(f"float32 GEMV 1x{K}x{K}, {threads} thread(s): speed vs torch.matmul", 1.0, v,
               ceiling=val("GEMV float32", threads, READ, "vs torch.matmul"),
               ceiling_what="a read of the weight bytes alone with the GEMV's loads and "
               "prefetches (lowp_widen: an add for the FMA, no x)")
        bw, cp, tc = (val("GEMV float32", threads, i, "GB/s")
                      for i in ("opcore float32", MEMCPY, "copy of the weight bytes"))
        target(f"float32 GEMV, {threads} thread(s): weight bytes / time over C memcpy's bandwidth "
               f"(over torch copy_'s: {fmt_ratio(over(bw, tc))})", 0.8, over(bw, cp))
        for name in ("bfloat16", "float16"):
            op = f"GEMV {name} weights 1x{K}x{K}"
            v = val(f"{op}, weights in", threads, f"opcore {name}", "vs torch.matmul float32")
            target(f"{name} weight GEMV, {threads} thread(s), weights in the cache: speed vs "
                   "float32 torch.matmul", 1.8, v,
                   ceiling=val(f"{op}, weights in", threads, WIDEN, "vs torch.matmul float32"),
                   ceiling_what="the same weights read and widened alone (lowp_widen) against "
                   "the same torch calls")
            v = val(f"{op}, weights beyond", threads, f"opcore {name}", "vs torch.matmul float32")
            target(f"{name} weight GEMV, {threads} thread(s), weights beyond the cache (a "
                   "decoder's layers): speed vs float32 torch.matmul", 1.8, v,
                   ceiling=val(f"{op}, weights beyond", threads, WIDEN, "vs torch.matmul float32"),
                   ceiling_what="the same weights read and widened alone (lowp_widen: the "
                   "GEMV's loads and widening instructions, no x, no multiply) against the "
                   "same torch calls")
        for name in ("q8_0", "q4_0", "q8_0 packed", "q4_0 packed", "uint4 group 32",
                     "uint4 group 128", "int8 group 32", "int8 group 128"):
            op = f"GEMV {name.replace(' packed', '')}"  # packed: a row of the same run
            bw, cp, tc = (val(op, threads, i, "GB/s")
                          for i in (f"opcore {name}", QMEMCPY, "copy of the quantised bytes"))
            wb = val(op, threads, U4WIDEN, "GB/s")
            target(f"{name} GEMV, {threads} thread(s): quantised bytes / time over C memcpy's "
                   f"bandwidth (over torch copy_'s: {fmt_ratio(over(bw, tc))})", 0.8, over(bw, cp),
                   **({"ceiling": over(wb, cp), "ceiling_what": "the same weights read and "
                       "widened alone (lowp_widen_u4: the GEMV's loads and widening, no x), "
                       "over the same memcpy"} if wb else {}))
    model, isa = cpu_line()
    notes = (f"CPU: {model}; instruction sets: {', '.join(isa)}. Paths taken: "
             + "; ".join(f"{k}: {v}" for k, v in paths.items())
             + ". Speed ratios are medians of paired interleaved ratios (reference time / "
             "opcore time); "
             "each block of calls after three untimed calls of the candidate's own (its weights "
             "back in the cache as far as they fit), but in the float32 GEMV row (its candidates "
             "read the same tensor) and the half-weight rows beyond the cache and in turn. "
             "1-minute load average at the start and end of each process: "
             + ", ".join(f"{t} thread(s): {a:.1f} -> {b:.1f}" for t, (a, b) in loads)
             + " (other work shares this machine's cores). A copy's GB/s counts the bytes copied "
             "once (it reads and writes them); a GEMV only reads its weights. The bandwidth "
             "targets are judged against C memcpy of the same bytes split across the same "
             "number of cores (lowp_copy); torch's copy_ is shown beside it. A 1x4096x4096 "
             "layer's weights (64 MiB float32, 32 MiB half, 34 / 18 MiB Q8_0 / Q4_0) can stay in a "
             "large last-level cache between calls, where a copy's 2x the bytes (source and "
             "destination) do not: the rows 'weights beyond the cache' call several copies of each "
             "weight in turn, as a decoder's layers are. The half-weight targets are judged on two "
             "rows: weights in the cache, each block of calls after three untimed calls of its own "
             "(both sides), and weights beyond the cache. The third half-weight row, blocks taking "
             "turns with torch's as the other rows do, is shown and not judged: its per-call "
             "columns show each side's first calls after the other's block reading its weights back"
             " from memory, slower than its later calls, so that row times the last-level cache's "
             "refill of two footprints (64 and 32 MiB) as much as either kernel. The half-weight "
             "rows in and beyond the cache also time a read of the same weights with the GEMV's "
             "widening alone (lowp_widen: the same loads, vcvtph2ps for float16, a shift and a mask"
             " for bfloat16, an add where the GEMV has its FMA with x): the ceiling of a GEMV that "
             "widens half weights in registers (see docs/gemm_library.md for the variants "
             "tried).")
    huge = args.pages == "huge"
    notes += (" The uint4 group rows also time the same weights read and widened alone "
              "(lowp_widen_u4: the GEMV's loads and widening, an add for its FMA with x): the "
              "ceiling of a GEMV that widens uint4 in registers.")
    if args.isa == "avx2":
        notes += (" Every library on both sides limited to AVX2, as on a CPU without AVX-512 or "
                  "VNNI: " + ", ".join(f"{k}={v}" for k, v in benchlib.AVX2_ENV.items())
                  + "; the bench's own kernels (copies, ceilings) built without AVX-512 or "
                  "AVX-VNNI. From 16 rows of x the int8 rows also time the instructions both "
                  "sides' AVX2 kernels take per 32 products (vpmaddubsw, vpmaddwd by 1, vpaddd) "
                  "alone, in inline asm on registers, for as many products split across the same "
                  "cores (lowp_i8_mix): the rate no kernel built on them passes, and the int8 "
                  "targets' ceiling.")
    if huge:
        notes += (" Every tensor of 2 MiB or more (weights, copies, results) on huge pages, both "
                  "sides (torch's allocator asked: THP_MEM_ALLOC_ENABLE=1).")
    avx2 = args.isa == "avx2"
    benchlib.write("lowp_huge.json" if huge else "lowp_avx2.json" if avx2 else "lowp.json",
                   results=args.results, obj={
        "title": "Low-precision linear layers (tile layer) vs PyTorch"
                 + (", weights on huge pages" if huge else "")
                 + (", every library limited to AVX2" if avx2 else ""),
        "order": 46 + huge + 0.5 * avx2, "rows": rows,
        "notes": notes, "columns": ["op", "threads", "implementation", "ms", "GB/s",
                                    "vs torch.matmul",
                                    "vs copy of the weight bytes", "vs torch.matmul float32",
                                    "vs copy of the quantised bytes", f"vs {MEMCPY}",
                                    f"vs {QMEMCPY}",
                                    f"vs {WIDEN}", f"vs {U4WIDEN}",
                                    "vs torch.ao dynamic Linear (fbgemm)",
                                    "vs torch.matmul bfloat16", "vs opcore int8 unpacked",
                                    "vs torch._int_mm", f"vs {READ}", f"vs {MIX}", "exact",
                                    "rel. error"] + CALL_COLS,
        "target": targets})
    for r in rows:
        print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()})
    for t in targets:
        print(t)


if __name__ == "__main__":
    main()
