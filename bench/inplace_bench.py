"""Per call of an in-place op through torch.ops: extension-cpp's
`myadd_out(Tensor a, Tensor b, Tensor(a!) out) -> ()` as an opcore op
(bench/kernels/myadd_out.c, the native kernel) vs the same loop as a C++
extension op (torch.utils.cpp_extension.load_inline, -O3), and through the
fallback route (OPCORE_TORCH_NATIVE=0: the Python kernel). Paired,
interleaved medians (benchlib); prints the machine's load average.

    python bench/inplace_bench.py [--rounds N] [--reps N] [--cpu]
"""
import argparse
import os
import tempfile
import time

import torch
import torch.utils.cpp_extension

import benchlib
import opcore.torch  # noqa: F401 -- registers loaded libraries with torch
from opcore import _torch_native

# the C++ extension op: extension-cpp's muladd.cpp loop, as the tests compare with
CPP = os.path.join(benchlib.REPO, "tests", "python", "parity_kernels", "cpp_myadd_out.cpp")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=41)
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--cpu", action="store_true",
                    help="time the calling thread's CPU time (time.thread_time: steadier on a loaded machine)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        kernels = os.path.join(benchlib.HERE, "kernels")
        def load(namespace):
            return benchlib.load_renamed(tmp, namespace, os.path.join(kernels, "myadd_out_shape.c"),
                                         [os.path.join(kernels, "myadd_out.c")], "bench_inplace").myadd_out.default

        ours = load("bench_inplace")
        # the fallback route: the Python kernel
        os.environ["OPCORE_TORCH_NATIVE"] = "0"
        try:
            python_kernel = load("bench_inplace_py")
        finally:
            del os.environ["OPCORE_TORCH_NATIVE"]
        print(f"route: {_torch_native.route()} ({_torch_native.route_error() or 'the shim'})")
        with open(CPP) as f:
            torch.utils.cpp_extension.load_inline("cppref_ext", cpp_sources=[f.read()], extra_cflags=["-O3"],
                                                  is_python_module=False)
        cpp = torch.ops.cppref.myadd_out.default
        print(f"load average before: {os.getloadavg()}")
        for n in (1, 1000):
            for grad in (False, True):
                a, b = torch.randn(n, requires_grad=grad), torch.randn(n, requires_grad=grad)
                out = torch.empty(n)
                fns = {"C++": lambda: cpp(a, b, out), "opcore": lambda: ours(a, b, out),
                       "opcore, fallback route": lambda: python_kernel(a, b, out)}
                s = benchlib.interleaved(fns, args.rounds, args.reps,
                                         clock=time.thread_time if args.cpu else time.perf_counter)
                m = benchlib.medians(s)
                print(f"myadd_out, {n} elements, inputs requiring grad: {grad}: " +
                      ", ".join(f"{k} {m[k] * 1e6:.2f} us ({benchlib.paired_ratio(s, k, 'C++'):.2f}x)" for k in fns))
        print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
