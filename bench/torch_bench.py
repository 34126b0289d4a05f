#!/usr/bin/env python3
"""opcore vs PyTorch C++ extensions, through torch.ops, in one run.

1. Per-call time of a ReLU on a 1-element float32 tensor called through
   torch.ops: opcore (the seeds' element-wise kernel, examples/relu/
   elementwise, and the TCM kernel) vs torch.relu vs a PyTorch C++
   extension ReLU (the seeds' CPU path: torch::zeros + accessors, built
   here with torch.utils.cpp_extension.load into a temp dir).
2. Cold build time of that C++ extension vs opcore's build of the same
   operator (forced rebuild, fresh directories).

Writes bench/results/torch.json (bench/report.py format) and prints a table.

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
import torch.utils.cpp_extension as cpp_extension

from opcore import custom_op

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
RELU = os.path.join(REPO, "examples", "relu")
RESULTS = os.path.join(HERE, "results", "torch.json")

CPP_RELU = textwrap.dedent("""
    #include <torch/extension.h>

    // The seeds' CPU ReLU (seed 000), registered with TORCH_LIBRARY.
    torch::Tensor relu_forward(const torch::Tensor& t_in) {
        torch::Tensor t_out = torch::zeros(t_in.sizes(), torch::kFloat);
        auto t_in_acc = t_in.accessor<float, 2>();
        auto t_out_acc = t_out.accessor<float, 2>();
        auto sizes = t_in.sizes();
        for (int64_t i = 0; i < sizes[0]; i++)
            for (int64_t j = 0; j < sizes[1]; j++)
                t_out_acc[i][j] = t_in_acc[i][j] > 0.0 ? t_in_acc[i][j] : 0.0;
        return t_out;
    }

    torch::Tensor relu_backward(const torch::Tensor& t_grad, const torch::Tensor& t_in) {
        torch::Tensor t_out = torch::zeros(t_in.sizes(), torch::kFloat);
        auto t_in_acc = t_in.accessor<float, 2>();
        auto t_grad_acc = t_grad.accessor<float, 2>();
        auto t_out_acc = t_out.accessor<float, 2>();
        auto sizes = t_in.sizes();
        for (int64_t i = 0; i < sizes[0]; i++)
            for (int64_t j = 0; j < sizes[1]; j++)
                t_out_acc[i][j] = t_in_acc[i][j] > 0.0 ? t_grad_acc[i][j] : 0.0;
        return t_out;
    }

    TORCH_LIBRARY(cpp_ops, m) {
        m.def("relu_forward", &relu_forward);
        m.def("relu_backward", &relu_backward);
    }
""")


def renamed_shape(dst_dir, namespace):
    text = open(os.path.join(RELU, "shape.c")).read().replace("OC_LIBRARY(my_ops,", f"OC_LIBRARY({namespace},")
    path = os.path.join(dst_dir, f"shape_{namespace}.c")
    with open(path, "w") as f:
        f.write(text)
    return path


def build_cpp_extension(tmp):
    d = os.path.join(tmp, "cpp_ext")
    os.makedirs(d)
    src = os.path.join(d, "relu.cpp")
    with open(src, "w") as f:
        f.write(CPP_RELU)
    t0 = time.perf_counter()
    cpp_extension.load(name="librelu_cpp", sources=[src], is_python_module=False, build_directory=d,
                       verbose=False)
    return time.perf_counter() - t0


def build_opcore(tmp, tag, namespace, variant, force=True):
    d = os.path.join(tmp, f"opcore_{tag}")
    os.makedirs(d, exist_ok=True)
    shape = renamed_shape(d, namespace)
    t0 = time.perf_counter()
    path, cached, _ = custom_op.build(f"relu_{tag}", [os.path.join(RELU, variant, "relu.c")], [shape],
                                      build_directory=d, force=force)
    seconds = time.perf_counter() - t0
    assert not cached
    return path, seconds


def per_call_us(fns, x, calls, rounds):
    """{name: (median wall us, median CPU us)} per call; rounds interleave the
    candidates so that a noisy neighbour hits them all alike. CPU time is the
    calling thread's (time.thread_time): on a shared machine it leaves out
    the time other processes take the CPU away."""
    wall = {name: [] for name in fns}
    cpu = {name: [] for name in fns}
    for name, fn in fns.items():
        for _ in range(2000):
            fn(x)
    for _ in range(rounds):
        for name, fn in fns.items():
            c0, t0 = time.thread_time(), time.perf_counter()
            for _ in range(calls):
                fn(x)
            t1, c1 = time.perf_counter(), time.thread_time()
            wall[name].append((t1 - t0) / calls * 1e6)
            cpu[name].append((c1 - c0) / calls * 1e6)
    med = {name: (statistics.median(wall[name]), statistics.median(cpu[name])) for name in fns}
    return med, {"wall_us": wall, "cpu_us": cpu}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=20000, help="calls per timed round")
    ap.add_argument("--rounds", type=int, default=15, help="timed rounds per candidate")
    ap.add_argument("--skip-build", action="store_true", help="skip the C++ extension's cold build timing "
                    "(it still has to be built once for the per-call numbers)")
    ap.add_argument("--out", default=RESULTS)
    args = ap.parse_args()
    torch.set_num_threads(1)

    tmp = tempfile.mkdtemp(prefix="opcore_torch_bench_")
    try:
        # --- builds (cold) ---
        cpp_build_s = build_cpp_extension(tmp)
        opcore_builds = [build_opcore(tmp, f"ew{i}", f"bench_ew{i}", "elementwise")[1] for i in range(3)]
        opcore_build_s = statistics.median(opcore_builds)
        path_ew, _ = build_opcore(tmp, "elementwise", "bench_elementwise", "elementwise")
        path_tcm, _ = build_opcore(tmp, "tcm", "bench_tcm", "tcm")
        custom_op.load_library(path_ew)
        custom_op.load_library(path_tcm)

        # --- per call ---
        x = torch.randn(1, 1)
        fns = {
            "torch.relu": torch.relu,
            "C++ extension (torch.ops)": torch.ops.cpp_ops.relu_forward,
            "opcore elementwise (torch.ops)": torch.ops.bench_elementwise.relu_forward,
            "opcore tcm (torch.ops)": torch.ops.bench_tcm.relu_forward,
        }
        for name, fn in fns.items():  # same answers first
            assert torch.equal(fn(x), torch.relu(x)), name
        med, samples = per_call_us(fns, x, args.calls, args.rounds)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    CPP, EW, TCM = "C++ extension (torch.ops)", "opcore elementwise (torch.ops)", "opcore tcm (torch.ops)"
    cpp_wall, cpp_cpu = med[CPP]
    relu_wall, relu_cpu = med["torch.relu"]
    rows = []
    for name, (w, c) in med.items():
        rows.append({"op (1-element float32 ReLU)": name, "us per call (CPU)": round(c, 3),
                     "vs C++ extension (CPU)": round(c / cpp_cpu, 3), "us per call (wall)": round(w, 3),
                     "vs C++ extension (wall)": round(w / cpp_wall, 3), "vs torch.relu (CPU)": round(c / relu_cpu, 3)})
    rows.append({"op (1-element float32 ReLU)": "cold build: C++ extension (cpp_extension.load)",
                 "build s": round(cpp_build_s, 3)})
    rows.append({"op (1-element float32 ReLU)": "cold build: opcore (custom_op.build, force)",
                 "build s": round(opcore_build_s, 3), "build speedup x": round(cpp_build_s / opcore_build_s, 1)})
    best = min((EW, TCM), key=lambda k: med[k][1])
    ratio = med[best][1] / cpp_cpu
    ratio_wall = med[best][0] / cpp_wall
    ratio_ew = med[EW][1] / cpp_cpu
    speedup = cpp_build_s / opcore_build_s
    result = {
        "title": "PyTorch: opcore op vs C++ extension through torch.ops (per call, cold build)",
        "order": 40,
        "columns": ["op (1-element float32 ReLU)", "us per call (CPU)", "vs C++ extension (CPU)",
                    "us per call (wall)", "vs C++ extension (wall)", "vs torch.relu (CPU)", "build s",
                    "build speedup x"],
        "rows": rows,
        "notes": (f"Per call: median of {args.rounds} rounds x {args.calls} calls on a 1x1 float32 tensor, "
                  "candidates interleaved, torch.set_num_threads(1); CPU = the calling thread's CPU time "
                  "(time.thread_time, robust on a shared machine), wall = perf_counter. The C++ extension is "
                  "the seeds' CPU ReLU (torch::zeros + accessors, TORCH_LIBRARY) built with "
                  "torch.utils.cpp_extension.load; 'opcore elementwise' is examples/relu/elementwise (the same "
                  "algorithm: the kernel makes its own zeros tensor, which the runtime copies into the output), "
                  "'opcore tcm' the TCM kernel writing straight into the torch-allocated output. Cold build: "
                  f"fresh directories; opcore is the median of {len(opcore_builds)} forced builds of shape.c + "
                  f"elementwise/relu.c. torch {torch.__version__}, Python {platform.python_version()}, "
                  f"{os.cpu_count()} CPUs."),
        "target": [
            {"metric": f"per-call time, best opcore kernel ({best.split(' (')[0]}) / C++ extension, CPU time "
                       "(<= 1.5)", "max": 1.5, "value": round(ratio, 3), "met": ratio <= 1.5},
            {"metric": "cold build speedup vs cpp_extension.load (>= 20x)", "min": 20, "value": round(speedup, 1),
             "met": speedup >= 20},
        ],
        "raw": {"per_call_samples": samples, "opcore_builds_s": opcore_builds, "cpp_build_s": cpp_build_s},
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)

    print(f"\n{result['title']}\n")
    print(f"{'op':34} {'CPU us':>8} {'vs C++':>8} {'wall us':>8} {'vs C++':>8} {'vs torch.relu':>14}")
    for name, (w, c) in med.items():
        print(f"{name:34} {c:8.2f} {c / cpp_cpu:7.2f}x {w:8.2f} {w / cpp_wall:7.2f}x {c / relu_cpu:13.2f}x")
    print(f"\ncold build: C++ extension {cpp_build_s:.2f} s, opcore {opcore_build_s:.3f} s "
          f"(opcore {speedup:.0f}x faster)")
    print(f"targets: per-call {best}: {ratio:.2f}x CPU, {ratio_wall:.2f}x wall (<= 1.5: "
          f"{'met' if ratio <= 1.5 else 'NOT met'}); elementwise {ratio_ew:.2f}x CPU; "
          f"build speedup {speedup:.0f}x (>= 20x: {'met' if speedup >= 20 else 'NOT met'})")
    print(f"wrote {os.path.relpath(args.out, REPO)}")


if __name__ == "__main__":
    sys.exit(main())
