#!/usr/bin/env python3
"""Start-up of a JAX-only program: opcore against jax.ffi directly.

Each sample is a fresh Python process that imports jax, loads one op
library and calls the op once under jit (the first call compiles):

  * opcore: `import opcore.jax`, custom_op.load of the ReLU (its build is
    cached: the load checks the cache), opcore.jax.op(...)(x);
  * jax.ffi: ctypes.CDLL of a prebuilt C++ XLA FFI handler doing the same
    loop, jax.ffi.register_ffi_target, jax.ffi.ffi_call(...)(x).

The two programs alternate (paired rounds); the ratio is the median of the
per-round ratios. Each opcore run also checks that torch was never imported
(no torch tax). Writes bench/results/jax_import.json.

    python bench/jax_import_bench.py [--rounds R]
"""
import argparse
import os
import platform
import subprocess
import sys
import tempfile
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import benchlib  # noqa: E402

REPO = os.path.dirname(HERE)

OPCORE_PROGRAM = textwrap.dedent("""
    import sys, time
    t0 = time.perf_counter()
    import jax, jax.numpy as jnp
    import opcore.jax
    from opcore import custom_op
    custom_op.load(name="jax_import_bench", compute_srcs=[{kernel!r}], shape_srcs=[{shape!r}],
                   build_directory={build!r})
    relu = opcore.jax.op("jax_import_bench::relu_forward")
    jax.jit(relu)(jnp.ones(4)).block_until_ready()
    assert "torch" not in sys.modules, "a JAX-only opcore program imported torch"
    print(time.perf_counter() - t0)
""")

FFI_PROGRAM = textwrap.dedent("""
    import sys, time
    t0 = time.perf_counter()
    import ctypes
    import jax, jax.numpy as jnp
    lib = ctypes.CDLL({so!r})
    jax.ffi.register_ffi_target("jax_import_bench_relu", jax.ffi.pycapsule(lib.CppRelu), platform="cpu")
    relu = lambda x: jax.ffi.ffi_call("jax_import_bench_relu", jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
    jax.jit(relu)(jnp.ones(4)).block_until_ready()
    print(time.perf_counter() - t0)
""")


def run(program, env):
    """Seconds a fresh process takes from its first statement to the
    result (interpreter start-up itself excluded: it is the same for both)."""
    r = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, check=True)
    return float(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--results", default=benchlib.RESULTS)
    args = ap.parse_args()

    import jax

    import jax_ffi_bench

    env = dict(os.environ)
    env.pop("OPCORE_NO_TORCH", None)  # opcore must not import torch by itself
    with tempfile.TemporaryDirectory(prefix="opcore-jax-import-") as root:
        so = os.path.join(root, "librelu_ffi.so")
        src = os.path.join(root, "relu_ffi.cc")
        with open(src, "w") as f:
            f.write(jax_ffi_bench.CPP_HANDLER)
        subprocess.run([os.environ.get("CXX", "c++"), "-std=c++17", "-O3", "-shared", "-fPIC", "-isystem",
                        jax.ffi.include_dir(), src, "-o", so], check=True)
        shape = os.path.join(root, "shape.c")
        with open(os.path.join(REPO, "examples", "relu", "shape.c")) as f:
            text = f.read().replace("OC_LIBRARY(my_ops,", "OC_LIBRARY(jax_import_bench,")
        with open(shape, "w") as f:
            f.write(text)
        oc = OPCORE_PROGRAM.format(kernel=os.path.join(HERE, "kernels", "relu_raw.c"), shape=shape,
                                   build=os.path.join(root, "build"))
        ffi = FFI_PROGRAM.format(so=so)
        run(oc, env), run(ffi, env)  # builds the library and the handler; warms the file cache
        samples = {"opcore": [], "jax.ffi": []}
        for r in range(args.rounds):
            order = [("opcore", oc), ("jax.ffi", ffi)]
            for name, prog in order if r % 2 == 0 else order[::-1]:
                samples[name].append(run(prog, env))
    ratio = benchlib.paired_ratio(samples, "opcore", "jax.ffi")
    rows = [{"program": name, "seconds": benchlib.median(s), "vs jax.ffi": benchlib.paired_ratio(samples, name, "jax.ffi")}
            for name, s in samples.items()]
    benchlib.write("jax_import.json", results=args.results, obj={
        "title": "JAX: start-up of a JAX-only program that loads one op library",
        "order": 52,
        "rows": rows,
        "target": [{"metric": "import jax + load one library + first jitted call: opcore / jax.ffi", "max": 1.1,
                    "value": ratio, "met": ratio <= 1.1}],
        "notes": (f"Fresh processes, {args.rounds} alternating rounds, medians; from the program's first statement "
                  "to the first result (the interpreter's own start-up excluded). opcore's library build is cached; "
                  "the opcore program asserts torch was never imported. "
                  f"jax {jax.__version__}, {platform.machine()}, {os.cpu_count()} CPUs."),
    })
    for r in rows:
        print(f"{r['program']:8} {r['seconds']:.3f} s  {r['vs jax.ffi']:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
