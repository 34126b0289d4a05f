"""examples/llm: prefill and greedy-decode tokens/s of the Llama-architecture
decoder on opcore ops, against PyTorch eager (float32, bfloat16), torch.compile,
torch's int8 weight-only linear and llama.cpp (llama-cpp-python) on the same
weights in GGUF, at 1 and 2 threads, in the same run.

    python bench/llm_bench.py                          # SmolLM-135M's shapes
    python bench/llm_bench.py --config tinyllama-1.1b  # TinyLlama-1.1B's shapes, Q8_0 and Q4_0
    python bench/llm_bench.py --quick                  # fewer tokens and rounds, no
                                                       # torch.compile / int8 peers
    python bench/llm_bench.py --isa avx2 --llama-path DIR
                                                       # every side held to AVX2, llama.cpp
                                                       # from an AVX2-only build in DIR

Each thread count runs in its own process (opcore's engine cores and torch's
threads are set before the first op). Within it, the candidates of one weight
format take turns round by round; figures are medians over rounds, ratios are
medians of per-round ratios. The ceiling row is memcpy of the model's weight
bytes at the same thread count: decode reads every weight once per token.
llama.cpp comes from bench/requirements-llm.txt (built from source there);
without it its rows are missing and the output says so.

--isa avx2 measures the CPUs without AVX-512 or VNNI on one that has them:
opcore's tile layer, torch, oneDNN, MKL and fbgemm through their own
switches (benchlib.AVX2_ENV), examples/llm's ops built with -mno-avx512f
-mno-avxvnni, and llama.cpp from a build made for AVX2 alone, which
--llama-path names (the bench refuses a llama.cpp that reports AVX-512,
AVX-VNNI or AMX kernels):

    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON \
      -DGGML_F16C=ON -DGGML_BMI2=ON" pip install --no-deps --no-binary llama-cpp-python \
      --target DIR llama-cpp-python==0.3.36 diskcache

(bench/run.sh builds it once into build/bench/llama-avx2.)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "examples", "llm"))

import benchlib  # noqa: E402


def machine():
    if hasattr(benchlib, "machine"):
        return benchlib.machine()
    cpu, flags = "unknown", set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name") and cpu == "unknown":
                cpu = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    names = [("avx2", "AVX2"), ("fma", "FMA"), ("f16c", "F16C"), ("avx512f", "AVX-512F"),
             ("avx512bw", "AVX-512BW"), ("avx512_vnni", "AVX-512VNNI"),
             ("avx512_bf16", "AVX-512BF16"),
             ("avx512_fp16", "AVX-512FP16"), ("avx_vnni", "AVX-VNNI"), ("amx_tile", "AMX")]
    return {"cpu": cpu, "isa": [n for f, n in names if f in flags],
            "cores": len(os.sched_getaffinity(0))}


def weight_bytes(cfg, fmt):
    """Bytes of the weights a decode step reads (matrices in fmt, norms f32;
    the embedding is a lookup of one row)."""
    per = {"float32": 4.0, "bfloat16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32}[fmt]
    mats = cfg.n_params() - cfg.vocab * cfg.dim - (2 * cfg.n_layers + 1) * cfg.dim
    return mats * per + (2 * cfg.n_layers + 1) * cfg.dim * 4


# ---- one process: one thread count ---------------------------------------------------

# what llama.cpp's system line names when a build has kernels beyond AVX2
BEYOND_AVX2 = ("AVX512", "AVX_VNNI", "AMX")


def llama_cpp_info():
    """llama.cpp's own line on the CPU features its kernels use."""
    import llama_cpp
    return llama_cpp.llama_print_system_info().decode(errors="replace").strip()


def llama_repack(avx2):
    """Whether llama.cpp repacks its weights (extra buffer types, its
    default): not on AVX-512 + AMX, where Q8_0's decode crashed in it
    (llama-cpp-python 0.3.36 still), so plain ggml-cpu kernels there; yes in
    the AVX2 build. LLM_BENCH_LLAMA_REPACK=0 / 1 overrides."""
    return os.environ.get("LLM_BENCH_LLAMA_REPACK", "1" if avx2 else "0") == "1"


def llama_cpp_peer(path, threads, n_ctx, n_batch, avx2):
    import llama_cpp
    import numpy as np
    from llama_cpp import Llama

    if avx2:
        used = [f for f in BEYOND_AVX2 if f in llama_cpp_info()]
        if used:
            raise RuntimeError(f"this llama.cpp build has {'/'.join(used)} kernels; --isa avx2 "
                               "needs one built for AVX2 alone (see --llama-path)")
    if not llama_repack(avx2):
        default = llama_cpp.llama_model_default_params

        def params():
            p = default()
            p.use_extra_bufts = False
            return p
        llama_cpp.llama_model_default_params = params
        import llama_cpp.llama as module
        module.llama_cpp.llama_model_default_params = params

    llm = Llama(model_path=path, n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads,
                n_batch=n_batch, n_ubatch=n_batch, verbose=False, logits_all=False)

    class Peer:
        def reset(self):
            llm.reset()  # the next eval drops the cache past position 0

        def forward(self, tokens):
            llm.eval(list(tokens))  # the last token's logits (logits_all=False keeps no copy)
            return np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))

    return Peer()


def time_run(m, prompt, n_decode):
    """(seconds for the prompt, seconds for n_decode greedy steps, tokens)."""
    import numpy as np

    m.reset()
    t0 = time.perf_counter()
    logits = m.forward(prompt)
    t1 = time.perf_counter()
    toks = []
    for _ in range(n_decode):
        toks.append(int(np.argmax(np.asarray(logits))))
        logits = m.forward([toks[-1]])
    return t1 - t0, time.perf_counter() - t1, toks


def ops_cflags(avx2):
    """The llm ops' compiler flags: the default -march=native, less AVX-512
    and AVX-VNNI under --isa avx2."""
    return ["-march=native"] + (benchlib.AVX2_CFLAGS if avx2 else [])


def load_llm(args):
    """The llm op library, for --isa avx2 built as for a CPU without AVX-512
    or AVX-VNNI, in a directory of its own."""
    import model

    if args.isa == "avx2":
        return model.load_library(
            build_directory=os.path.join(REPO, "build", "bench", "llm-avx2"),
            extra_cflags=benchlib.AVX2_CFLAGS)
    return model.load_library()


def child(args):
    import numpy as np
    import torch

    import model

    torch.set_num_threads(args.threads)
    load_llm(args)
    cfg = model.CONFIGS[args.config]
    wdir = args.weights_dir
    weights = model.load_weights(model.weights_file(cfg, wdir))
    rng = np.random.default_rng(1)
    prompt = [1] + [int(t) for t in rng.integers(3, cfg.vocab, args.prompt - 1)]
    n_ctx = args.prompt + args.decode + 8
    have_llama = True
    try:
        import llama_cpp  # noqa: F401
    except ImportError as e:
        have_llama = False
        print(f"llama.cpp peer missing ({e}): pip install -r bench/requirements-llm.txt",
              file=sys.stderr)
    out = {"threads": args.threads, "groups": [], "torch": benchlib.torch_path(),
           "llama.cpp": llama_cpp_info() if have_llama else None}
    for fmt in args.formats:
        cands = {"opcore": lambda: model.OpcoreLlama(cfg, weights, fmt, max_seq=n_ctx)}
        if fmt in ("float32", "bfloat16"):
            cands["torch eager"] = lambda: model.TorchLlama(cfg, weights, fmt, max_seq=n_ctx)
            if fmt in args.compile_formats:
                def compiled():
                    m = model.TorchLlama(cfg, weights, fmt, max_seq=n_ctx)
                    m.step_fn = torch.compile(m.step, dynamic=True)
                    return m
                cands["torch.compile"] = compiled
        if fmt == "q8_0" and not args.quick:
            cands["torch int8 weight-only"] = lambda: model.TorchLlama(cfg, weights, "int8",
                                                                       max_seq=n_ctx)
        if have_llama and not args.no_llama:
            g = os.path.join(wdir, f"{cfg.name}-seed0-{fmt}.gguf")
            if not os.path.exists(g):
                model.export_gguf(cfg, weights, g, fmt)
            cands["llama.cpp"] = lambda g=g: llama_cpp_peer(g, args.threads, n_ctx, args.prompt,
                                                            args.isa == "avx2")
        models, errors = {}, {}
        for name, make in cands.items():
            try:
                models[name] = make()
                time_run(models[name], prompt, 2)  # warm-up (and compile)
            except Exception as e:  # a peer that does not run here is reported, not fatal
                models.pop(name, None)
                errors[name] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
                print(f"[{fmt} t={args.threads}] {name} did not run: {errors[name]}",
                      file=sys.stderr)
        samples = {n: {"prefill": [], "decode": [], "tokens": None} for n in models}
        names = list(models)
        for r in range(args.rounds):
            k = r % len(names)
            for name in names[k:] + names[:k]:
                tp, td, toks = time_run(models[name], prompt, args.decode)
                samples[name]["prefill"].append(tp)
                samples[name]["decode"].append(td)
                samples[name]["tokens"] = toks
        # ceiling: memcpy of the bytes a decode step reads, at this thread count
        nb = int(min(weight_bytes(cfg, fmt), 2 << 30))
        src, dst = torch.empty(nb, dtype=torch.uint8).fill_(1), torch.empty(nb, dtype=torch.uint8)
        cp = []
        for _ in range(5):
            t0 = time.perf_counter()
            dst.copy_(src)
            cp.append(time.perf_counter() - t0)
        del src, dst
        gbs = nb / statistics.median(cp) / 1e9
        out["groups"].append({"format": fmt, "samples": samples, "errors": errors,
                              "memcpy_GBps": gbs, "weight_bytes": weight_bytes(cfg, fmt)})
        print(f"[{fmt} t={args.threads}] " + ", ".join(
            f"{n}: decode {args.decode / statistics.median(s['decode']):.1f} tok/s, "
            f"prefill {args.prompt / statistics.median(s['prefill']):.1f} tok/s"
            for n, s in samples.items()),
            file=sys.stderr, flush=True)
        del models
    json.dump(out, sys.stdout)


# ---- the parent: one child per thread count, then the table -------------------------

def summarise(args, results):
    import model

    cfg = model.CONFIGS[args.config]
    rows, notes = [], []
    for res in results:
        t = res["threads"]
        for g in res["groups"]:
            fmt, s = g["format"], g["samples"]
            ceiling = g["memcpy_GBps"] * 1e9 / g["weight_bytes"]
            for name, v in s.items():
                row = {"model": cfg.name, "format": fmt, "threads": t, "implementation": name,
                       "decode tok/s": args.decode / statistics.median(v["decode"]),
                       "prefill tok/s": args.prompt / statistics.median(v["prefill"])}
                if name == "opcore":
                    for peer in ("llama.cpp", "torch.compile", "torch eager"):
                        if peer in s:
                            row[f"decode vs {peer}"] = statistics.median(
                                [b / a for a, b in zip(v["decode"], s[peer]["decode"])])
                            row[f"prefill vs {peer}"] = statistics.median(
                                [b / a for a, b in zip(v["prefill"], s[peer]["prefill"])])
                    row["decode vs memcpy ceiling"] = row["decode tok/s"] / ceiling
                rows.append(row)
            rows.append({"model": cfg.name, "format": fmt, "threads": t,
                         "implementation": f"ceiling: memcpy {g['weight_bytes'] / 1e6:.0f} MB",
                         "decode tok/s": ceiling, "memcpy GB/s": g["memcpy_GBps"]})
            for name, err in g["errors"].items():
                notes.append(f"{fmt}, {t} thread(s): {name} did not run ({err})")
            if "opcore" in s and "torch eager" in s and fmt == "float32":
                same = s["opcore"]["tokens"] == s["torch eager"]["tokens"]
                notes.append(f"float32, {t} thread(s): greedy tokens equal torch eager's: {same}")
    targets = []
    for r in rows:
        if r["implementation"] != "opcore":
            continue
        f, t = r["format"], r["threads"]
        ceil = next(c for c in rows if c["format"] == f and c["threads"] == t
                    and c["implementation"].startswith("ceiling"))
        want = [("decode", "llama.cpp", 1.0)] if f in ("q8_0", "q4_0") else []
        want += [("prefill", "llama.cpp", 0.9)] if f in ("q8_0", "q4_0") else []
        want += [("decode", "torch.compile", 1.0)] if f == "bfloat16" else []
        for what, peer, lo in want:
            v = r.get(f"{what} vs {peer}")
            if v is None:
                continue
            tg = {"metric": f"{cfg.name} {f}, {t} thread(s): {what} tok/s vs {peer}", "min": lo,
                  "value": v, "met": v >= lo}
            peer_row = next(c for c in rows if c["format"] == f and c["threads"] == t
                            and c["implementation"] == peer)
            if what == "decode":
                tg["ceiling"] = ceil["decode tok/s"] / peer_row["decode tok/s"]
                tg["ceiling_what"] = "memcpy of the weight bytes a decode step reads"
            targets.append(tg)
    cols = ["model", "format", "threads", "implementation", "decode tok/s", "prefill tok/s",
            "decode vs llama.cpp", "prefill vs llama.cpp", "decode vs torch.compile",
            "prefill vs torch.compile", "decode vs memcpy ceiling"]
    title = (f"Llama-architecture decoder (examples/llm, {cfg.name} shapes): "
             f"{args.prompt}-token prefill, {args.decode} decode steps")
    if len(args.formats) == 1:
        title += f" \u2014 {args.formats[0]}"
        if args.compile_formats:
            title += " with the torch.compile peer"
    avx2 = args.isa == "avx2"
    if avx2:
        title += ", every library limited to AVX2"
    res = results[0]
    notes.append(f"paths: opcore's ops built {' '.join(ops_cflags(avx2))}, its tile layer "
                 + ("held to AVX2 (OC_TILE_ISA=avx2)" if avx2 else "on the CPU's best path")
                 + f"; torch: {res.get('torch')}"
                 + (" (" + ", ".join(f"{k}={v}" for k, v in benchlib.AVX2_ENV.items()
                                     if k != "OC_TILE_ISA") + ")" if avx2 else "")
                 + (f"; llama.cpp: {res['llama.cpp']}; "
                    + ("its weights repacked (its default)" if llama_repack(avx2)
                       else "its weight repacking off (it crashed with AVX-512 + AMX; "
                            "LLM_BENCH_LLAMA_REPACK=1 turns it on)")
                    if res.get("llama.cpp") else ""))
    return {"title": title,
            "order": (49 if cfg.name == "tinyllama-1.1b" else 48 if " with" in title else 47)
            + 0.25 * avx2,
            "columns": cols, "rows": rows,
            "notes": notes, "target": targets, "machine": machine()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="smollm-135m")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--formats", default=None,
                   help="default: float32,bfloat16,q8_0,q4_0 (SmolLM-135M), q8_0,q4_0 "
                        "(TinyLlama-1.1B: its float32 weights alone are 4.4 GB)")
    p.add_argument("--prompt", type=int, default=None, help="prompt tokens (64; quick: 32)")
    p.add_argument("--decode", type=int, default=None, help="decode steps (32; quick: 8)")
    p.add_argument("--rounds", type=int, default=None, help="interleaved rounds (3; quick: 2)")
    p.add_argument("--compile-formats", default=None,
                   help="formats with a torch.compile peer (float32,bfloat16; '' for none: "
                        "compiling takes minutes; quick: none)")
    p.add_argument("--quick", action="store_true",
                   default=os.environ.get("LLM_BENCH_QUICK", "0") == "1",
                   help="fewer tokens and rounds, no torch.compile or torch int8 peer "
                        "(LLM_BENCH_QUICK=1)")
    p.add_argument("--no-llama", action="store_true", help="leave llama.cpp out")
    p.add_argument("--isa", choices=("best", "avx2"), default="best",
                   help="avx2: every side held to AVX2, as on a CPU without AVX-512 or VNNI "
                        "(written to llm_avx2.json, llm_tinyllama_avx2.json)")
    p.add_argument("--llama-path", default=None,
                   help="a directory holding the llama_cpp package to use (pip install "
                        "--target DIR), searched first")
    p.add_argument("--weights-dir", default=os.path.join(
        os.environ.get("OPCORE_CACHE_DIR", os.path.expanduser("~/.cache/opcore")), "llm-bench"))
    p.add_argument("--out", default=None,
                   help="results file (llm.json; llm_tinyllama.json for TinyLlama-1.1B)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    q = args.quick
    if args.formats is None:
        args.formats = "q8_0,q4_0" if args.config == "tinyllama-1.1b" else \
            "float32,bfloat16,q8_0,q4_0"
    args.prompt = args.prompt or (32 if q else 64)
    args.decode = args.decode or (8 if q else 32)
    args.rounds = args.rounds or (2 if q else 3)
    if args.compile_formats is None:
        args.compile_formats = "" if q else "float32,bfloat16"
    args.formats = args.formats.split(",")
    if args.out is None:
        args.out = "llm_tinyllama" if args.config == "tinyllama-1.1b" else "llm"
        args.out += "_avx2.json" if args.isa == "avx2" else ".json"
    if args.llama_path:
        sys.path.insert(0, os.path.abspath(args.llama_path))
    args.compile_formats = [f for f in args.compile_formats.split(",") if f]
    if args.child:
        args.threads = int(args.threads)
        return child(args)
    t0, load0 = time.time(), os.getloadavg()[0]
    m = machine()
    print(f"machine: {m['cpu']}; {' '.join(m['isa'])}; {m['cores']} usable cores")
    avx2 = args.isa == "avx2"
    print(f"opcore kernels: {' '.join(ops_cflags(avx2))}"
          + (", tile layer OC_TILE_ISA=avx2" if avx2 else "")
          + f"; load: {os.getloadavg()[0]:.1f}")
    import model

    load_llm(args)
    model.weights_file(model.CONFIGS[args.config], args.weights_dir)
    results = []
    for t in [int(x) for x in args.threads.split(",")]:
        env = dict(os.environ, OC_NUM_CORES=str(t), OMP_NUM_THREADS=str(t),
                   **(benchlib.AVX2_ENV if avx2 else {}))
        # torch.compile's own cache: a shared /tmp one can be half-written by another process
        env.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(args.weights_dir, "inductor"))
        cmd = [sys.executable, __file__, "--child", "--threads", str(t), "--config", args.config,
               "--formats", ",".join(args.formats), "--prompt", str(args.prompt),
               "--decode", str(args.decode), "--rounds", str(args.rounds),
               "--weights-dir", args.weights_dir]
        cmd += ["--compile-formats", ",".join(args.compile_formats)]
        cmd += ["--no-llama"] * args.no_llama + ["--quick"] * args.quick + ["--isa", args.isa]
        cmd += ["--llama-path", args.llama_path] if args.llama_path else []
        r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, check=True)
        results.append(json.loads(r.stdout))
    sec = summarise(args, results)
    sec["notes"].append(f"load average {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the "
                        f"end; {time.time() - t0:.0f} s in all"
                        + (" (--quick)" if args.quick else ""))
    for row in sec["rows"]:
        print("  ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                        for k, v in row.items()))
    for n in sec["notes"]:
        print("note:", n)
    benchlib.write(args.out, sec)


if __name__ == "__main__":
    main()
