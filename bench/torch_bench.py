#!/usr/bin/env python3
"""opcore in PyTorch against the operators a user would write instead, in
one run (candidates interleaved, medians of paired ratios).

1. Per call, 1x1 float32 ReLU:
   - torch.relu;
   - a C++ extension op (TORCH_LIBRARY, raw loop into torch::empty_like),
     through torch.ops; and the Neuron tutorial's own C++ op (torch::zeros + accessors);
   - a Python torch.library.custom_op;
   - opcore through torch.ops: the native kernel (the torch kernel shim),
     and the fallback route (OPCORE_TORCH_NATIVE=0: the Python kernel);
   - opcore called directly (lib.relu_forward(x), output allocated) vs an
     apache-tvm-ffi function called on torch tensors with a
     torch.empty_like output (when tvm_ffi is installed).
2. Forward + backward of a [32, 120] ReLU (the MLP's first layer): the
   Neuron tutorial's autograd.Function around the C++ extension ops, the same Function
   around the opcore ops, opcore.torch.register_autograd (native and
   fallback routes), the C++ op with
   a C++ torch::autograd::Function, and the Function around torch.relu.
3. Cold build time of the C++ extension vs opcore's build of the same op.

Writes bench/results/torch.json and torch_autograd.json (bench/report.py
format).

    python bench/torch_bench.py [--calls N] [--rounds R] [--skip-build]
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import textwrap
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import cpp_relu  # noqa: E402
import benchlib  # noqa: E402
from opcore import _torch_native, custom_op  # noqa: E402
import opcore.torch as ot  # noqa: E402

REPO = os.path.dirname(HERE)
RELU = os.path.join(REPO, "examples", "relu")
RESULTS = os.path.join(HERE, "results")

TVM_RELU = textwrap.dedent("""
    #include <tvm/ffi/container/tensor.h>
    #include <tvm/ffi/function.h>

    void relu(tvm::ffi::TensorView x, tvm::ffi::TensorView y) {
        const float* s = static_cast<const float*>(x.data_ptr());
        float* d = static_cast<float*>(y.data_ptr());
        for (int64_t i = 0, n = x.numel(); i < n; i++) d[i] = s[i] > 0.0f ? s[i] : 0.0f;
    }
""")


def renamed_shape(dst_dir, namespace):
    text = open(os.path.join(RELU, "shape.c")).read().replace("OC_LIBRARY(my_ops,", f"OC_LIBRARY({namespace},")
    path = os.path.join(dst_dir, f"shape_{namespace}.c")
    with open(path, "w") as f:
        f.write(text)
    return path


def build_cpp_extension(tmp):
    t0 = time.perf_counter()
    cpp_relu.load(os.path.join(tmp, "cpp_ext"), seed_build=False)
    return time.perf_counter() - t0


def build_opcore(tmp, tag, namespace, variant, force=True):
    """Build examples/relu/<variant> (or, for "raw", bench/kernels/relu_raw.c)."""
    d = os.path.join(tmp, f"opcore_{tag}")
    os.makedirs(d, exist_ok=True)
    shape = renamed_shape(d, namespace)
    compute = os.path.join(HERE, "kernels", "relu_raw.c") if variant == "raw" else os.path.join(RELU, variant, "relu.c")
    t0 = time.perf_counter()
    path, cached, _ = custom_op.build(f"relu_{tag}", [compute], [shape], build_directory=d, force=force)
    seconds = time.perf_counter() - t0
    assert not cached
    return path, seconds


def on_fallback(fn, *args):
    """fn(*args) with registrations on the fallback route (OPCORE_TORCH_NATIVE=0)."""
    saved = os.environ.get("OPCORE_TORCH_NATIVE")
    os.environ["OPCORE_TORCH_NATIVE"] = "0"
    try:
        return fn(*args)
    finally:
        if saved is None:
            del os.environ["OPCORE_TORCH_NATIVE"]
        else:
            os.environ["OPCORE_TORCH_NATIVE"] = saved


def tvm_relu(tmp):
    """The apache-tvm-ffi function, or None without tvm_ffi."""
    try:
        import tvm_ffi.cpp
    except ImportError:
        return None
    mod = tvm_ffi.cpp.load_inline("oc_bench_tvm_relu", cpp_sources=TVM_RELU, functions=["relu"],
                                  build_directory=os.path.join(tmp, "tvm"))
    return mod.relu


def python_custom_op():
    @torch.library.custom_op("oc_bench_py::relu", mutates_args=())
    def relu(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)

    @relu.register_fake
    def _(x):
        return torch.empty_like(x)

    return torch.ops.oc_bench_py.relu


class Function(torch.autograd.Function):
    """The Neuron tutorial's autograd.Function (the Neuron ReLU tutorial's my_ops.py) around a forward
    and a backward op set per subclass."""
    fwd = bwd = None

    @classmethod
    def forward(cls, ctx, x):
        ctx.save_for_backward(x)
        return cls.fwd(x)

    @classmethod
    def backward(cls, ctx, grad):
        x, = ctx.saved_tensors
        return cls.bwd(grad, x)


def function_around(name, fwd, bwd):
    return type(name, (Function,), {"fwd": staticmethod(fwd), "bwd": staticmethod(bwd)}).apply


def per_call(args, fns):
    x = torch.randn(1, 1)
    calls = {name: (lambda f=fn: f(x)) for name, fn in fns.items()}
    samples = benchlib.interleaved(calls, args.rounds, args.calls, clock=time.thread_time)
    wall = benchlib.interleaved(calls, max(3, args.rounds // 3), args.calls)
    return samples, wall


def autograd_rows(args, fns):
    x0 = torch.randn(32, 120)

    def step(apply):
        def run():
            x = x0.detach().requires_grad_()
            apply(x).sum().backward()
        return run

    calls = {name: step(fn) for name, fn in fns.items()}
    samples = benchlib.interleaved(calls, args.rounds, max(200, args.calls // 10), clock=time.thread_time)
    return samples


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=5000, help="calls per timed round")
    ap.add_argument("--rounds", type=int, default=21, help="timed rounds")
    ap.add_argument("--skip-build", action="store_true", help="skip the cold build comparison")
    ap.add_argument("--results", default=RESULTS)
    args = ap.parse_args()
    torch.set_num_threads(1)

    tmp = tempfile.mkdtemp(prefix="opcore_torch_bench_")
    try:
        cpp_build_s = build_cpp_extension(tmp)
        opcore_builds = [] if args.skip_build else \
            [build_opcore(tmp, f"ew{i}", f"bench_ew{i}", "elementwise")[1] for i in range(3)]
        # the raw loop the peers run (bench/kernels/relu_raw.c), and the tutorial's TCM kernel
        path_raw, _ = build_opcore(tmp, "raw", "bench_raw", "raw")
        path_tcm, _ = build_opcore(tmp, "tcm", "bench_tcm", "tcm")
        path_py, _ = build_opcore(tmp, "raw_py", "bench_raw_py", "raw")
        path_fb, _ = build_opcore(tmp, "raw_fb", "bench_raw_fb", "raw")
        path_ag, _ = build_opcore(tmp, "raw_ag", "bench_raw_ag", "raw")
        path_floor, _ = build_opcore(tmp, "raw_floor", "bench_raw_floor", "raw")
        lib = custom_op.load_library(path_raw)
        lib_tcm = custom_op.load_library(path_tcm)
        custom_op.load_library(path_ag)
        custom_op.load_library(path_floor)
        on_fallback(custom_op.load_library, path_py)
        on_fallback(custom_op.load_library, path_fb)
        native = _torch_native.route()  # "native" (the shim) or "fallback" (none for this torch)
        tvm = tvm_relu(tmp)
        stable = cpp_relu.load_stable(os.path.join(tmp, "cpp_ext"))
        pyop = python_custom_op()

        # ---- 1. per call -------------------------------------------------------
        CPP, SEED = "C++ extension op, raw loop into empty_like (torch.ops)", "Neuron tutorial's C++ op (torch.ops)"
        OC, OC_PY = "opcore (torch.ops, native kernel)", "opcore (torch.ops, fallback route: Python kernel)"
        OC_DIRECT, TVM = "opcore direct: lib.relu_forward(x)", "apache-tvm-ffi direct, torch.empty_like output"
        STABLE = "C++ extension op on torch's stable C ABI (torch.ops)"
        fns = {"torch.relu": torch.relu, CPP: torch.ops.cpp_ops.relu_fast,
               SEED: torch.ops.cpp_ops.relu_forward, STABLE: stable,
               "Python torch.library.custom_op (torch.ops)": pyop,
               OC: torch.ops.bench_raw.relu_forward,
               OC_PY: torch.ops.bench_raw_py.relu_forward,
               OC_DIRECT: lib.relu_forward,
               "opcore TCM kernel (torch.ops)": torch.ops.bench_tcm.relu_forward,
               "opcore TCM kernel direct": lib_tcm.relu_forward}
        if tvm is not None:
            def tvm_call(x):
                y = torch.empty_like(x)
                tvm(x, y)
                return y
            fns[TVM] = tvm_call
        x = torch.randn(1, 1)
        for name, fn in fns.items():  # same answers first
            assert torch.equal(fn(x), torch.relu(x)), name
        samples, wall = per_call(args, fns)

        # ---- 2. forward + backward ------------------------------------------------
        FN_CPP, FN_OC = "Neuron tutorial's autograd.Function around C++ extension ops", \
            "Neuron tutorial's autograd.Function around opcore ops"
        REG, CEIL = "opcore.torch.register_autograd", "autograd.Function around torch.relu (ceiling)"
        REG_FB = "opcore.torch.register_autograd, fallback route (torch.library.register_autograd)"
        FLOOR = "Python Autograd kernel that only calls the Function around opcore ops (a Python route's floor)"
        CPP_AG = "C++ extension op with a C++ torch::autograd::Function"
        # on a copy of the library: an autograd kernel would sit in front of every call of the op
        ot.register_autograd("bench_raw_ag::relu_forward", "bench_raw_ag::relu_backward")
        on_fallback(ot.register_autograd, "bench_raw_fb::relu_forward", "bench_raw_fb::relu_backward")
        fn_oc = function_around("FnOc", torch.ops.bench_raw.relu_forward, torch.ops.bench_raw.relu_backward)
        # register_autograd puts the shim's C++ kernel at the op's Autograd
        # key; a Python kernel there (its fallback where the shim is not in
        # use) can at least call the Function: that cost is a Python route's floor
        floor_lib = torch.library.Library("bench_raw_floor", "IMPL")
        floor_lib.impl("relu_forward", lambda x: fn_oc(x), "Autograd")
        afns = {FN_CPP: function_around("FnCpp", torch.ops.cpp_ops.relu_fast, torch.ops.cpp_ops.relu_fast_backward),
                FN_OC: fn_oc,
                REG: torch.ops.bench_raw_ag.relu_forward,
                REG_FB: torch.ops.bench_raw_fb.relu_forward,
                CPP_AG: torch.ops.cpp_ops.relu_fast_ag,
                FLOOR: torch.ops.bench_raw_floor.relu_forward,
                CEIL: function_around("FnTorch", torch.relu,
                                      lambda g, x: torch.ops.aten.threshold_backward(g, x, 0))}
        xg = torch.randn(32, 120)
        for name, fn in afns.items():  # same gradients first
            a = xg.clone().requires_grad_()
            fn(a).sum().backward()
            assert torch.equal(a.grad, (xg > 0).float()), name
        asamples = autograd_rows(args, afns)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    us = {k: v * 1e6 for k, v in benchlib.medians(samples).items()}
    wall_us = {k: v * 1e6 for k, v in benchlib.medians(wall).items()}
    rows = [{"op (1x1 float32 ReLU)": n, "us per call (CPU)": us[n],
             "vs C++ extension": benchlib.paired_ratio(samples, n, CPP),
             "vs torch.relu": benchlib.paired_ratio(samples, n, "torch.relu"), "us per call (wall)": wall_us[n]}
            for n in fns]
    ratio_ops = benchlib.paired_ratio(samples, OC, CPP)
    ratio_direct = benchlib.paired_ratio(samples, OC_DIRECT, TVM) if tvm is not None else None
    # the same loop as a boxed kernel on the stable C ABI, for comparison
    ceiling_ops = benchlib.paired_ratio(samples, STABLE, CPP)
    targets = [{"metric": "1x1 op through torch.ops: opcore / C++ extension op (CPU time)", "max": 1.1,
                "value": ratio_ops, "met": ratio_ops <= 1.1, "ceiling": ceiling_ops,
                "ceiling_what": "the C++ op's loop as a boxed kernel on torch's stable C ABI"}]
    if ratio_direct is not None:
        targets.append({"metric": "direct call, output allocated: opcore / apache-tvm-ffi (CPU time)",
                        "max": 1.1, "value": ratio_direct, "met": ratio_direct <= 1.1})
    if opcore_builds:
        opcore_build_s = statistics.median(opcore_builds)
        speedup = cpp_build_s / opcore_build_s
        rows.append({"op (1x1 float32 ReLU)": "cold build: C++ extension (cpp_extension.load)",
                     "build s": cpp_build_s})
        rows.append({"op (1x1 float32 ReLU)": "cold build: opcore (custom_op.build, force)",
                     "build s": opcore_build_s, "build speedup x": speedup})
        targets.append({"metric": "cold build speedup vs cpp_extension.load (>= 20x)", "min": 20,
                        "value": round(speedup, 1), "met": speedup >= 20})
    benchlib.write("torch.json", results=args.results, obj={
        "title": "PyTorch: opcore vs the ops a user would write instead (per call, 1x1 ReLU; cold build)",
        "order": 40,
        "columns": ["op (1x1 float32 ReLU)", "us per call (CPU)", "vs C++ extension", "vs torch.relu",
                    "us per call (wall)", "build s", "build speedup x"],
        "rows": rows,
        "target": targets,
        "notes": (f"Medians of {args.rounds} rounds x {args.calls} calls, candidates interleaved (order rotated "
                  "each round); 'vs' columns are medians of per-round paired ratios of the calling thread's CPU "
                  "time (time.thread_time: robust on a shared machine); wall = perf_counter, fewer rounds. "
                  "torch.set_num_threads(1). The C++ extension op is TORCH_LIBRARY with a raw loop into "
                  "torch::empty_like; the tutorial's op is the Neuron ReLU tutorial's relu.cpp (torch::zeros + accessors); both "
                  "built by cpp_extension.load with extra_cflags=['-O3'] (it adds no optimisation flag of its "
                  "own: the Neuron ReLU tutorial's recipe compiles at -O0). The stable-C-ABI op is the same loop written against "
                  "libtorch's stable ABI (STABLE_TORCH_LIBRARY, torch::stable::empty_like). opcore "
                  "runs the same raw loop (bench/kernels/relu_raw.c) into the output torch allocates (the "
                  "tutorial's TCM kernel, examples/relu/tcm, in its own rows); the native kernel is "
                  f"registered as a boxed C++ kernel of torch's dispatcher (opcore's shim, src/torch/boxed_kernel.cc; "
                  f"route here: {native}); the fallback route's row is a copy of the library registered with "
                  "OPCORE_TORCH_NATIVE=0 (the Op object as a Python kernel). The apache-tvm-ffi "
                  "function is called on torch tensors with a torch.empty_like output allocated in Python"
                  + ("" if tvm is not None else " (not installed: row missing)") + ". "
                  f"torch {torch.__version__}, Python {platform.python_version()}, {os.cpu_count()} CPUs."),
        "raw": {"cpu_s": samples, "wall_s": wall, "opcore_builds_s": opcore_builds, "cpp_build_s": cpp_build_s},
    })

    aus = {k: v * 1e6 for k, v in benchlib.medians(asamples).items()}
    arows = [{"forward + backward, [32, 120] ReLU": n, "us per step (CPU)": aus[n],
              "vs Function around C++ ext": benchlib.paired_ratio(asamples, n, FN_CPP),
              "vs Function around opcore": benchlib.paired_ratio(asamples, n, FN_OC)} for n in afns]
    r_fn = benchlib.paired_ratio(asamples, FN_OC, FN_CPP)
    r_reg = benchlib.paired_ratio(asamples, REG, FN_OC)
    benchlib.write("torch_autograd.json", results=args.results, obj={
        "title": "PyTorch autograd: forward + backward of a [32, 120] ReLU",
        "order": 41,
        "rows": arows,
        "target": [{"metric": "Neuron tutorial's autograd.Function: around opcore ops / around C++ extension ops",
                    "max": 1.0, "value": r_fn, "met": r_fn <= 1.0},
                   {"metric": "register_autograd / Neuron tutorial's autograd.Function around opcore ops", "max": 0.85,
                    "value": r_reg, "met": r_reg <= 0.85}],
        "notes": (f"One step: a fresh leaf x.requires_grad_(), y = relu(x), y.sum().backward(). Medians of "
                  f"{args.rounds} interleaved rounds, ratios paired per round (CPU time of the calling "
                  "thread). The C++ extension ops are the raw-loop ones of the table above; opcore's the same "
                  "loop (bench/kernels/relu_raw.c) through torch.ops (native kernel). register_autograd pairs "
                  "the two ops in a C++ autograd node (src/torch/autograd_kernel.cc); its peer in C++ is "
                  "relu_fast with a torch::autograd::Function as its Autograd kernel. A Python route's floor: "
                  "an Autograd-key kernel registered from Python (torch.library) whose whole body calls the "
                  "Neuron tutorial's Function around the opcore ops, the least any Python-registered autograd kernel pays "
                  "; register_autograd's fallback route (OPCORE_TORCH_NATIVE=0, or no shim for this torch) is "
                  "torch.library.register_autograd around the Python kernel, in its own row)."),
        "raw": {"cpu_s": asamples},
    })

    print(f"\nper call, 1x1 ReLU (CPU us, paired vs C++ extension):")
    for r in rows[:len(fns)]:
        print(f"  {r['op (1x1 float32 ReLU)']:52} {r['us per call (CPU)']:7.2f} us  "
              f"{r['vs C++ extension']:6.2f}x  (wall {r['us per call (wall)']:.2f} us)")
    print(f"forward + backward [32, 120] (register_autograd / the C++ op with a C++ autograd::Function: "
          f"{benchlib.paired_ratio(asamples, REG, CPP_AG):.3f}x):")
    for r in arows:
        print(f"  {r['forward + backward, [32, 120] ReLU']:52} {r['us per step (CPU)']:7.2f} us  "
              f"{r['vs Function around C++ ext']:6.2f}x C++ Function  {r['vs Function around opcore']:6.2f}x "
              "opcore Function")
    for t in targets + [{"metric": "Function opcore/C++", "value": r_fn, "max": 1.0, "met": r_fn <= 1.0},
                        {"metric": "register_autograd/Function", "value": r_reg, "max": 0.85,
                         "met": r_reg <= 0.85}]:
        print(f"target: {t['metric']}: {t['value']:.3f} ({'met' if t['met'] else 'NOT met'})")



if __name__ == "__main__":
    sys.exit(main())
