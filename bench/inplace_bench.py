"""Per call of an in-place op through torch.ops: extension-cpp's
`myadd_out(Tensor a, Tensor b, Tensor(a!) out) -> ()` as an opcore op
(bench/kernels/myadd_out.c, the native kernel) vs the same loop as a C++
extension op (torch.utils.cpp_extension.load_inline, -O3), and through the Python
kernel (the fallback of torches without the stable C ABI). The ceiling of
opcore's route is measured in the same run: the torch kernel shim's boxed
kernel (src/torch/boxed_kernel.cc) registered with an empty body (a C
function that returns at once), i.e. what reading torch's argument stack
costs before opcore does anything. Paired, interleaved medians (benchlib);
prints the machine's load average.

    python bench/inplace_bench.py [--rounds N] [--reps N] [--cpu]
"""
import argparse
import ctypes
import os
import subprocess
import tempfile
import time

import torch
import torch.utils.cpp_extension

import benchlib
import opcore.torch  # noqa: F401 -- registers loaded libraries with torch
from opcore import _torch_native

# the C++ extension op: extension-cpp's muladd.cpp loop, as the tests compare with
CPP = os.path.join(benchlib.REPO, "tests", "python", "parity_kernels", "cpp_myadd_out.cpp")


EMPTY = "shim with an empty body (ceiling)"


def empty_shim_op(tmp):
    """torch op bench_inplace_empty::myadd_out: the shim's boxed kernel with
    a C body that does nothing (the route's fixed cost), or None where the
    shim is not in use."""
    if _torch_native.route() != "boxed":
        return None
    src, so = os.path.join(tmp, "empty_run.c"), os.path.join(tmp, "libempty_run.so")
    with open(src, "w") as f:
        f.write("#include <stdint.h>\n"
                "void empty_run(void *rec, uint64_t *stack, const void *views) { (void)rec, (void)stack, (void)views; }\n")
    subprocess.check_call([os.environ.get("CC", "cc"), "-O2", "-shared", "-fPIC", src, "-o", so])
    shim, body = ctypes.CDLL(str(_torch_native._find_or_build_shim())), ctypes.CDLL(so)
    global _empty_lib  # the definition must outlive the registration
    _empty_lib = torch.library.Library("bench_inplace_empty", "DEF")
    _empty_lib.define("myadd_out(Tensor a, Tensor b, Tensor(a!) out) -> ()")
    kinds, optional = (ctypes.c_int32 * 3)(0, 0, 0), (ctypes.c_int32 * 3)(0, 0, 0)
    reg, err = ctypes.c_void_p(), ctypes.create_string_buffer(256)
    if shim.oc_torch_boxed_impl(b"bench_inplace_empty", b"myadd_out", ctypes.cast(body.empty_run, ctypes.c_void_p),
                                None, kinds, optional, 3, 0, ctypes.byref(reg), err, 256):
        raise RuntimeError(err.value.decode())
    return torch.ops.bench_inplace_empty.myadd_out.default


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
        # the Python kernel: torches without the stable C ABI (and every
        # in-place op before they took the native kernel)
        saved, _torch_native._ready = _torch_native._ready, False
        try:
            python_kernel = load("bench_inplace_py")
        finally:
            _torch_native._ready = saved
        with open(CPP) as f:
            torch.utils.cpp_extension.load_inline("cppref_ext", cpp_sources=[f.read()], extra_cflags=["-O3"],
                                                  is_python_module=False)
        cpp = torch.ops.cppref.myadd_out.default
        empty = empty_shim_op(tmp)
        print(f"load average before: {os.getloadavg()}")
        for n in (1, 1000):
            for grad in (False, True):
                a, b = torch.randn(n, requires_grad=grad), torch.randn(n, requires_grad=grad)
                out = torch.empty(n)
                fns = {"C++": lambda: cpp(a, b, out), "opcore": lambda: ours(a, b, out),
                       "opcore, Python kernel": lambda: python_kernel(a, b, out)}
                if empty is not None:
                    fns[EMPTY] = lambda: empty(a, b, out)
                s = benchlib.interleaved(fns, args.rounds, args.reps,
                                         clock=time.thread_time if args.cpu else time.perf_counter)
                m = benchlib.medians(s)
                print(f"myadd_out, {n} elements, inputs requiring grad: {grad}: " +
                      ", ".join(f"{k} {m[k] * 1e6:.2f} us ({benchlib.paired_ratio(s, k, 'C++'):.2f}x)" for k in fns))
        print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
