#!/usr/bin/env python3
"""opcore in JAX against a C++ XLA FFI handler doing the same loop.

The peer a JAX user would write instead: a C++ handler against jaxlib's
xla/ffi/api/ffi.h (a float32 ReLU loop), registered with
jax.ffi.register_ffi_target and called through jax.ffi.ffi_call. Both are
jitted, called on the same inputs, interleaved round by round; medians of
per-round paired ratios. Writes bench/results/jax_ffi.json.

    python bench/jax_ffi_bench.py [--rounds R] [--calls N]
"""
import argparse
import ctypes
import json
import os
import platform
import subprocess
import sys
import tempfile
import textwrap

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import benchlib  # noqa: E402

REPO = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")

CPP_HANDLER = textwrap.dedent("""
    #include <cmath>
    #include <string_view>
    #include "xla/ffi/api/ffi.h"

    namespace ffi = xla::ffi;

    static ffi::Error ReluImpl(ffi::Buffer<ffi::F32> x, ffi::ResultBuffer<ffi::F32> y) {
        const float* s = x.typed_data();
        float* d = y->typed_data();
        for (size_t i = 0, n = x.element_count(); i < n; i++) d[i] = s[i] > 0.0f ? s[i] : 0.0f;
        return ffi::Error::Success();
    }

    XLA_FFI_DEFINE_HANDLER_SYMBOL(CppRelu, ReluImpl,
                                  ffi::Ffi::Bind().Arg<ffi::Buffer<ffi::F32>>().Ret<ffi::Buffer<ffi::F32>>());

    // RMS norm over the last axis, as JAX's FFI tutorial writes it (a float
    // attribute `eps`, rows of the last axis, one running sum).
    static ffi::Error RmsNormImpl(float eps, ffi::Buffer<ffi::F32> x, ffi::ResultBuffer<ffi::F32> y) {
        auto dims = x.dimensions();
        if (dims.size() == 0) return ffi::Error::InvalidArgument("RmsNorm input must be an array");
        int64_t n = dims.back(), total = x.element_count();
        const float* s = x.typed_data();
        float* d = y->typed_data();
        for (int64_t r = 0; r < total; r += n) {
            float sm = 0.0f;
            for (int64_t i = 0; i < n; i++) sm += s[r + i] * s[r + i];
            float scale = 1.0f / std::sqrt(sm / float(n) + eps);
            for (int64_t i = 0; i < n; i++) d[r + i] = s[r + i] * scale;
        }
        return ffi::Error::Success();
    }

    XLA_FFI_DEFINE_HANDLER_SYMBOL(CppRmsNorm, RmsNormImpl,
                                  ffi::Ffi::Bind().Attr<float>("eps").Arg<ffi::Buffer<ffi::F32>>()
                                                  .Ret<ffi::Buffer<ffi::F32>>());

    // The ceiling row: a handler that does nothing, called with the
    // attributes opcore's custom call carries (the op's name, eps as f64).
    static ffi::Error EmptyImpl(std::string_view op, double eps, ffi::Buffer<ffi::F32> x,
                                ffi::ResultBuffer<ffi::F32> y) {
        (void)op, (void)eps, (void)x, (void)y;
        return ffi::Error::Success();
    }

    XLA_FFI_DEFINE_HANDLER_SYMBOL(CppEmpty, EmptyImpl,
                                  ffi::Ffi::Bind().Attr<std::string_view>("op").Attr<double>("eps")
                                                  .Arg<ffi::Buffer<ffi::F32>>().Ret<ffi::Buffer<ffi::F32>>());
""")

def build_cpp(jax, root):
    src, so = os.path.join(root, "relu_ffi.cc"), os.path.join(root, "librelu_ffi.so")
    with open(src, "w") as f:
        f.write(CPP_HANDLER)
    cxx = os.environ.get("CXX", "c++")
    march = os.environ.get("OPCORE_MARCH", "native")  # as opcore's kernels (valgrind: both below AVX-512)
    subprocess.run([cxx, "-std=c++17", "-O3", f"-march={march}", "-shared", "-fPIC", "-isystem", jax.ffi.include_dir(),
                    src, "-o", so], check=True)
    lib = ctypes.CDLL(so)
    jax.ffi.register_ffi_target("oc_bench_cpp_relu", jax.ffi.pycapsule(lib.CppRelu), platform="cpu")
    jax.ffi.register_ffi_target("oc_bench_cpp_rms_norm", jax.ffi.pycapsule(lib.CppRmsNorm), platform="cpu")
    jax.ffi.register_ffi_target("oc_bench_cpp_empty", jax.ffi.pycapsule(lib.CppEmpty), platform="cpu")
    return lib


def build_opcore(root):
    """The same loop as an opcore op (bench/kernels/relu_raw.c), jax_ffi_bench::relu_forward."""
    benchlib.load_renamed(root, "jax_ffi_bench", os.path.join(REPO, "examples", "relu", "shape.c"),
                          [os.path.join(HERE, "kernels", "relu_raw.c")], "my_ops")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--sizes", default="1,4096,1048576")
    ap.add_argument("--results", default=RESULTS)
    args = ap.parse_args()

    import jax
    import jax.numpy as jnp
    import opcore.jax as ojax

    with tempfile.TemporaryDirectory(prefix="opcore-jax-ffi-") as root:
        keep = build_cpp(jax, root)  # noqa: F841 (the handler's library stays loaded)
        build_opcore(root)
        oc_relu = ojax.op("jax_ffi_bench::relu_forward")

        def cpp_relu(x):
            return jax.ffi.ffi_call("oc_bench_cpp_relu", jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

        CPP, OC, JNP = "C++ XLA FFI handler", "opcore (opcore.jax)", "jnp.maximum(x, 0)"
        fns = {CPP: jax.jit(cpp_relu), OC: jax.jit(lambda x: oc_relu(x)), JNP: jax.jit(lambda x: jnp.maximum(x, 0))}
        rows, targets = [], []
        for n in (int(s) for s in args.sizes.split(",")):
            x = jnp.asarray(np.random.default_rng(0).standard_normal(n, dtype=np.float32))
            want = np.maximum(np.asarray(x), 0)
            for name, f in fns.items():
                np.testing.assert_array_equal(np.asarray(f(x)), want, err_msg=name)
            calls = max(10, args.calls // max(1, n // 4096))
            s = benchlib.interleaved({name: (lambda f=f: f(x).block_until_ready()) for name, f in fns.items()},
                                   args.rounds, calls)
            for name in fns:
                rows.append({"elements": n, "implementation": name, "us per call": benchlib.median(s[name]) * 1e6,
                             "vs C++ FFI handler": benchlib.paired_ratio(s, name, CPP)})
            if n == 1:
                r = benchlib.paired_ratio(s, OC, CPP)
                targets.append({"metric": "JAX, 1-element op under jit: opcore / C++ XLA FFI handler", "max": 1.0,
                                "value": r, "met": r <= 1.0})
        rms_rows, rms_targets = rms_norm_rows(jax, jnp, args)
        rows += rms_rows
        targets += rms_targets
    benchlib.write("jax_ffi.json", results=args.results, obj={
        "title": "JAX: opcore op vs a C++ XLA FFI handler (float32 ReLU under jit)",
        "order": 51,
        "rows": rows,
        "columns": ["case", "elements", "implementation", "us per call", "vs C++ FFI handler"],
        "target": targets,
        "notes": (f"Each call is a jitted function blocking on its result; medians of {args.rounds} interleaved "
                  "rounds, ratios paired per round. The C++ handler is the loop a JAX user writes against "
                  "xla/ffi/api/ffi.h (XLA_FFI_DEFINE_HANDLER_SYMBOL, compiled -O3 -march=native); opcore's is "
                  "the same loop as an opcore kernel (bench/kernels/relu_raw.c), through opcore's one C FFI handler. "
                  "rms_norm: JAX's FFI tutorial handler (a float32 attribute eps, one running sum per row, -O3) "
                  "against examples/jax_ffi/rms_norm; the chain is 100 dependent calls on a 1-element array inside "
                  "one jitted function (per-call cost inside a graph). The ceiling row is a C++ handler that "
                  "does nothing, given the attributes opcore's custom call carries (the op's name, eps as f64): "
                  "XLA's own cost of such a call, below which no handler that reads them can go. "
                  f"jax {jax.__version__}, {platform.machine()}, {os.cpu_count()} CPUs."),
    })
    for r in rows:
        print(f"{r.get('case', 'relu'):18} {r['elements']:>9} {r['implementation']:24} {r['us per call']:9.2f} us  "
              f"{r['vs C++ FFI handler']:.2f}x")


CHAIN = 100


def rms_norm_rows(jax, jnp, args):
    """rms_norm: 100 chained 1-element calls in one jit, one 1-element call
    under jit, and [4096, 4096] float32 (against jnp too)."""
    import opcore.jax as ojax
    from opcore import custom_op

    src = os.path.join(REPO, "examples", "jax_ffi", "rms_norm")
    custom_op.load(name="jax_ffi_rms_norm", compute_srcs=[os.path.join(src, "rms_norm.c")],
                   shape_srcs=[os.path.join(src, "shape.c")])
    oc_rms = ojax.op("jax_ffi_rms_norm::rms_norm")

    def cpp_rms(x, eps=1e-5):
        return jax.ffi.ffi_call("oc_bench_cpp_rms_norm", jax.ShapeDtypeStruct(x.shape, x.dtype))(x, eps=np.float32(eps))

    def empty(x, eps=1e-5):
        return jax.ffi.ffi_call("oc_bench_cpp_empty", jax.ShapeDtypeStruct(x.shape, x.dtype))(
            x, op="jax_ffi_rms_norm::rms_norm", eps=np.float64(eps))

    def jnp_rms(x, eps=1e-5):
        return x / jnp.sqrt(jnp.mean(jnp.square(x), axis=-1, keepdims=True) + eps)

    def chain(f):
        def run(x):
            for _ in range(CHAIN):
                x = f(x) + 1.0  # dependent calls; + 1 keeps each input nonzero
            return x
        return jax.jit(run)

    CPP, OC, JNP = "C++ XLA FFI handler", "opcore (opcore.jax)", "jnp"
    EMPTY = "ceiling: empty C++ handler with opcore's attributes"
    rows, targets = [], []
    cases = [("100 chained calls", 1, chain, (CPP, OC, EMPTY)),
             ("one call", 1, jax.jit, (CPP, OC, JNP, EMPTY)),
             ("one call", 4096 * 4096, jax.jit, (CPP, OC, JNP))]
    impls = {CPP: cpp_rms, OC: lambda x: oc_rms(x, eps=1e-5), JNP: jnp_rms, EMPTY: empty}
    for case, n, wrap, names in cases:
        shape = (n,) if n == 1 else (4096, 4096)
        x = jnp.asarray(np.random.default_rng(1).standard_normal(shape, dtype=np.float32))
        fns = {name: wrap(impls[name]) for name in names}
        want = np.asarray(fns[CPP](x))
        for name, f in fns.items():
            if name == EMPTY:
                continue  # computes nothing
            np.testing.assert_allclose(np.asarray(f(x)), want, rtol=2e-5, atol=2e-5, err_msg=name)
        calls = max(5, args.calls // (CHAIN if wrap is chain else max(1, n // 4096)))
        s = benchlib.interleaved({name: (lambda f=f: f(x).block_until_ready()) for name, f in fns.items()},
                                 args.rounds, calls)
        per = CHAIN if wrap is chain else 1
        for name in names:
            rows.append({"case": f"rms_norm, {case}", "elements": n, "implementation": name,
                         "us per call": benchlib.median(s[name]) * 1e6 / per,
                         "vs C++ FFI handler": benchlib.paired_ratio(s, name, CPP)})
        r = benchlib.paired_ratio(s, OC, CPP)
        what = {("100 chained calls", 1): "JAX, 100 chained 1-element rms_norm calls in one jit",
                ("one call", 1): "JAX, 1-element rms_norm under jit",
                ("one call", 4096 * 4096): "JAX, rms_norm [4096, 4096] float32"}[(case, n)]
        targets.append({"metric": f"{what}: opcore / C++ XLA FFI handler", "max": 1.0, "value": r, "met": r <= 1.0})
    return rows, targets


if __name__ == "__main__":
    sys.exit(main())
