"""The native torch kernel (the torch kernel shim, src/torch/boxed_kernel.cc,
registered by src/python/torch_native.c): torch.ops calls the C op without
Python in between. The file runs again with OPCORE_TORCH_NATIVE=0
(test_the_fallback_route): the Python fallback gives the same results.

Every argument and result kind of the op language goes through it and must
give what the Python kernel (the Op object called directly) gives; errors
keep their type (opcore.OpError, with .op and .status) and message.
"""
import os
import subprocess
import threading
import time
import sys
from pathlib import Path

import pytest
import torch

import opcore
from conftest import load_lib
from test_torch import run_threads

KERNELS = Path(__file__).resolve().parent / "native_kernels"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def lib(opcore_build_dir):
    return load_lib(opcore_build_dir, "oc_native_test", KERNELS / "ops.c", KERNELS / "shape.c")


ops = torch.ops.oc_native_test


NATIVE = os.environ.get("OPCORE_TORCH_NATIVE") != "0"
native_only = pytest.mark.skipif(not NATIVE, reason="the fallback route's run: no native kernels to test")


def native(line):
    return "opcore/torch/boxed_kernel.cc" in line


def cpu_kernel(name):
    """Where the op's CPU kernel was registered (torch's dispatch table)."""
    for line in torch._C._dispatch_dump(f"oc_native_test::{name}").splitlines():
        if line.startswith("CPU:"):
            return line
    return ""


def test_registered_natively(lib):
    assert opcore._torch_native.available() is NATIVE
    assert opcore._torch_native.route() == ("native" if NATIVE else "fallback"), opcore._torch_native.route_error()
    for name in ("kitchen", "cat", "check", "sum_mc"):
        assert native(cpu_kernel(name)) is NATIVE, (name, cpu_kernel(name))
    # in-place ops too (an op returning its Tensor(a!) argument: its
    # internal `-> ()` op, under the public op's composite)
    for name in ("_oc_scale_", "fill_all_"):
        assert native(cpu_kernel(name)) is NATIVE, (name, cpu_kernel(name))
    assert cpu_kernel("scale_") == ""
    # the shim does not carry Scalar: that op keeps the Python kernel
    assert not native(cpu_kernel("add_scalar"))
    x = torch.randn(5)
    assert torch.equal(ops.add_scalar(x, 2), x + 2)
    assert torch.equal(ops.add_scalar(x, 0.5), x + 0.5)


KITCHEN_CASES = [
    dict(w=None, dims=[], pair=[1, 2], fs=[], mode="a", dt=torch.float32),
    dict(w=torch.arange(3.0), dims=[4, 5, -6], pair=7, fs=[0.5, -1.25, 3e300], mode="sum", dt=torch.float64,
         maybe_i=-9, maybe_f=2.5, flag=True, maybe_dt=torch.int8, maybe_s="hello"),
    dict(w=torch.ones(2, 2, dtype=torch.float16), dims=[0], pair=[-1, 0], fs=[1.0], mode="xyz",
         dt=torch.int32, maybe_i=0, maybe_f=0.0, flag=False, maybe_dt=torch.bool, maybe_s=""),
    dict(w=None, dims=[1, 2, 3, 4, 5], pair=[3, 3], fs=[float("inf"), float("-inf")], mode="inf",
         dt=torch.bfloat16, maybe_dt=torch.uint8),
]


@pytest.mark.parametrize("case", range(len(KITCHEN_CASES)))
def test_every_argument_type(lib, case):
    kw = KITCHEN_CASES[case]
    x = torch.randn(3, 4) * 10
    native = ops.kitchen(x, **kw)
    python = lib.kitchen(x, **kw)
    assert isinstance(native, tuple) and len(native) == 2
    for a, b in zip(native, python):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert torch.equal(a, b)
    assert native[0].dtype == kw["dt"]
    info = native[1]
    assert info[1] == len(kw["dims"]) and info[14] >= 0
    assert info[19] == float(kw.get("flag", False))
    assert info[22] == float("maybe_s" in kw)


def test_strided_and_empty_inputs(lib):
    x = torch.randn(6, 8)[::2, 1::3]  # a non-contiguous view with an offset
    assert not x.is_contiguous()
    for args in ((x,), (torch.empty(0, 3),), (torch.tensor(2.5),)):
        assert torch.equal(ops.check(*args), lib.check(*args))
        assert torch.equal(ops.check(*args), args[0])


def test_in_place_result_is_the_argument(lib):
    x = torch.arange(6.0)
    y = ops.scale_(x, 3.0)
    assert torch.equal(x, torch.arange(6.0) * 3)
    assert y.data_ptr() == x.data_ptr() and torch.equal(y, x)


@native_only
def test_fresh_results_only(lib):
    """Registered under another torch name returning only the fresh results
    (how opcore.torch defines the functional core of a `-> Tensor(a!)` op)."""
    tlib = torch.library.Library("oc_native_test", "FRAGMENT")
    tlib.define("_fresh_scale_(Tensor(a!) x, float s) -> ()")
    assert opcore._torch_native.register(lib.scale_, torch_name="_fresh_scale_", fresh_only=True)
    assert native(cpu_kernel("_fresh_scale_"))
    x = torch.arange(4.0)
    assert ops._fresh_scale_(x, 2.0) is None
    assert torch.equal(x, torch.arange(4.0) * 2)
    tlib._destroy()


def test_in_place_tensor_list(lib):
    xs = [torch.zeros(2), torch.zeros(3, 2, dtype=torch.float64), torch.zeros(0)]
    assert ops.fill_all_(xs, 1.5) is None
    for t in xs:
        assert torch.all(t == 1.5)


def test_tensor_list(lib):
    xs = [torch.randn(2, 3), torch.arange(4, dtype=torch.int64), torch.randn(1)]
    want = torch.cat([t.float().flatten() for t in xs])
    assert torch.equal(ops.cat(xs), want)


def test_errors_keep_their_type_and_message(lib):
    x = torch.randn(2, 3)
    with pytest.raises(opcore.OpError, match=r"oc_native_test::check.*shape function 'check_shape'.*"
                                             r"asked to fail in the shape function \(x has 2 dims\)") as e:
        ops.check(x, fail_in_shape=True)
    assert e.value.op == "oc_native_test::check" and e.value.status == "OC_EKERNEL"
    with pytest.raises(opcore.OpError, match=r"oc_native_test::check.*kernel 'check'.*asked to fail in the "
                                             r"kernel \(x has 6 elements\)") as e:
        ops.check(x, fail_in_kernel=True)
    assert e.value.status == "OC_EKERNEL"
    with pytest.raises(opcore.OpArgumentError, match=r"argument 1 'x' has dtype torch.complex32, which opcore "
                                                     r"does not support"):
        ops.check(torch.zeros(2, dtype=torch.complex32))
    with pytest.raises(opcore.OpError, match="scale_ takes a contiguous float32 tensor"):
        ops.scale_(torch.zeros(3, dtype=torch.float64), 1.0)
    # a RuntimeError too, as torch's own errors are
    with pytest.raises(RuntimeError, match="asked to fail"):
        ops.check(x, fail_in_kernel=True)
    assert torch.equal(ops.check(x), x)  # and the op goes on working


def test_error_inside_backward_reaches_the_caller(lib):
    """A failure on torch's autograd thread comes back as the same OpError."""
    class Check(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return ops.check(g, fail_in_kernel=True)

    x = torch.randn(4, requires_grad=True)
    with pytest.raises(opcore.OpError, match="asked to fail in the kernel") as e:
        Check.apply(x).sum().backward()
    assert e.value.op == "oc_native_test::check"


def test_threads(lib):
    errors = []

    def work(i):
        try:
            for _ in range(200):
                x = torch.full((7, i + 1), float(i))
                assert torch.equal(ops.check(x), x)
                with pytest.raises(opcore.OpError):
                    ops.check(x, fail_in_kernel=True)
        except Exception as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)

    run_threads(work, 6)
    assert not errors, errors[:3]


def affine_ref(x, y, a, b, neg):
    return (-1 if neg else 1) * (a * x.double() + y.double() + b)


def prepared_made():
    return opcore._C._torch_native_prepared()


def test_prepared_calls(lib):
    """A call repeating the last one's argument metadata and values runs
    through a prepared call (src/torch/boxed_kernel.cc; the native route
    only): same results for new data, and anything that changes the key
    (sizes, strides, dtype, a scalar) takes the usual path."""
    boxed = NATIVE
    x, y = torch.randn(5, 3), torch.randn(5, 3)
    before = prepared_made()
    for _ in range(3):
        torch.testing.assert_close(ops.affine(x, y, 2.0, 1, False).double(), affine_ref(x, y, 2.0, 1, False))
    assert prepared_made() == before + (1 if boxed else 0)
    for i in range(20):  # new data each call: the prepared call's pointers are the call's
        x, y = torch.randn(5, 3), torch.randn(5, 3)
        torch.testing.assert_close(ops.affine(x, y, 2.0, 1, False).double(), affine_ref(x, y, 2.0, 1, False))
    # every part of the key: scalar values, sizes, strides, empty tensors
    cases = [(2.5, 1, False), (2.0, -3, False), (2.0, 1, True)]
    for a, b, neg in cases:
        for _ in range(3):
            torch.testing.assert_close(ops.affine(x, y, a, b, neg).double(), affine_ref(x, y, a, b, neg))
    for shape in [(3, 5), (15,), (1, 15), (0, 3), ()]:
        xs, ys = torch.randn(shape), torch.randn(shape)
        for _ in range(3):
            torch.testing.assert_close(ops.affine(xs, ys, 2.0, 1, False).double(), affine_ref(xs, ys, 2.0, 1, False))
    xt, yt = torch.randn(3, 5).t(), torch.randn(5, 3)  # same sizes as x, other strides
    for _ in range(3):
        torch.testing.assert_close(ops.affine(xt, yt, 2.0, 1, False).double(), affine_ref(xt, yt, 2.0, 1, False))
        torch.testing.assert_close(ops.affine(x, y, 2.0, 1, False).double(), affine_ref(x, y, 2.0, 1, False))
    # errors on the prepared path: the kernel's, and the shape function's for a new key
    x[0, 0] = float("nan")
    with pytest.raises(opcore.OpError, match="x\\[0\\] is NaN"):
        ops.affine(x, y, 2.0, 1, False)
    x[0, 0] = 1.0
    torch.testing.assert_close(ops.affine(x, y, 2.0, 1, False).double(), affine_ref(x, y, 2.0, 1, False))
    with pytest.raises(opcore.OpError, match="float32"):
        ops.affine(x.double(), y.double(), 2.0, 1, False)
    with pytest.raises(opcore.OpError, match="one shape"):
        ops.affine(x, y[:2], 2.0, 1, False)
    # the results are fresh tensors each call, never a reused buffer
    r1, r2 = ops.affine(x, y, 2.0, 1, False), ops.affine(x, y, 2.0, 1, False)
    assert r1.data_ptr() != r2.data_ptr() and torch.equal(r1, r2)


def test_prepared_calls_in_place(lib):
    """In-place ops run through prepared calls too: written in place, version
    counters bumped, the argument returned; a run whose written tensor
    meets another argument takes the usual path (computed as if the input
    had been copied first, or refused for a partial overlap)."""
    boxed = NATIVE
    before = prepared_made()
    for _ in range(5):
        y, x = torch.randn(4, 3), torch.randn(4, 3)
        want, v = y + 0.5 * x, y._version
        assert ops.axpy_(y, x, 0.5) is None
        torch.testing.assert_close(y, want)
        assert y._version > v
        s = torch.randn(6)
        want, p = 3 * s, s.data_ptr()
        r = ops.scale_(s, 3.0)
        assert r.data_ptr() == p and torch.equal(r, s)
        torch.testing.assert_close(s, want)
    assert prepared_made() == before + (2 if boxed else 0)
    y = torch.randn(4, 3)
    want = 1.5 * y
    ops.axpy_(y, y, 0.5)  # the same view read and written: as if read from a copy
    torch.testing.assert_close(y, want)
    buf = torch.randn(13)
    with pytest.raises(opcore.OpError, match="single memory location"):
        ops.axpy_(buf[:12].view(4, 3), buf[1:13].view(4, 3), 0.5)
    y, x = torch.randn(4, 3), torch.randn(4, 3)
    want = y + 0.5 * x
    ops.axpy_(y, x, 0.5)
    torch.testing.assert_close(y, want)


def test_prepared_calls_threads(lib):
    """Threads calling one op at once, each with its own shape: one holds
    the prepared call while it runs, the others take the usual path."""
    errors = []

    def work(i):
        try:
            for k in range(300):
                shape = (i + 1, 3) if k % 7 else (3, i + 2)
                x, y = torch.randn(shape), torch.randn(shape)
                torch.testing.assert_close(ops.affine(x, y, 0.5, i, bool(k % 2)).double(),
                                           affine_ref(x, y, 0.5, i, bool(k % 2)))
        except Exception as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)

    run_threads(work, 6)
    assert not errors, errors[:3]


def test_no_prepared_calls_when_memo_is_off(lib):
    """OC_INFER_MEMO=0: every call asks the shape function, so none is prepared."""
    code = f"""
import torch, opcore
from opcore import custom_op
custom_op.load(name='oc_native_test', compute_srcs=[{str(KERNELS / 'ops.c')!r}],
               shape_srcs=[{str(KERNELS / 'shape.c')!r}])
x = torch.randn(4)
for _ in range(5):
    assert torch.equal(torch.ops.oc_native_test.affine(x, x, 1.0, 0, False), 2 * x)
print(opcore._C._torch_native_prepared())
"""
    env = dict(os.environ, OC_INFER_MEMO="0")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0 and r.stdout.strip() == "0", r.stdout + r.stderr


def test_multicore_small_tensor_runs_on_one_core(lib):
    small = torch.ones(10)
    s, cores = ops.sum_mc(small).tolist()
    assert s == 10 and cores == 1
    big = torch.ones(1 << 16)  # 256 KiB: split over every core
    s, cores = ops.sum_mc(big).tolist()
    pool = int(os.environ.get("OC_NUM_CORES") or len(os.sched_getaffinity(0)))
    assert s == 1 << 16 and cores == pool
    # The shares run on torch's intra-op threads first (its pool is lent):
    # with fewer torch threads than shares, opcore's own workers take them,
    # and the shares and their collective are the same either way.
    threads = torch.get_num_threads()
    try:
        for n in (1, threads):
            torch.set_num_threads(n)
            for lend in (True, False):
                was = opcore._C._torch_native_lend_threads(lend)
                try:
                    assert ops.sum_mc(big).tolist() == [1 << 16, pool], (n, lend)
                finally:
                    opcore._C._torch_native_lend_threads(was)
    finally:
        torch.set_num_threads(threads)


def test_direct_calls_lend_torch_threads_too(lib):
    """A direct call on torch tensors (lib.op(x), and so register_autograd's
    eager path) runs a multicore launch on torch's intra-op threads as
    torch.ops does: shares on a thread that is neither the caller nor one of
    opcore's workers. With lending off, never."""
    if torch.get_num_threads() < 2 or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("lending needs two torch threads and two cores")
    big, tid = torch.ones(1 << 16), threading.get_native_id()

    def lent_once(call):
        for _ in range(400):  # a busy machine may pause lending for a while: retry
            torch.ones(1 << 20).add_(1)  # torch's threads are awake after a torch op
            where = call().tolist()
            assert set(where) <= {-1, 0, 1, 2}, where
            if 2 in where:
                return True
            time.sleep(0.05)
        return False

    assert lent_once(lambda: lib.where_mc(big, tid))
    assert lent_once(lambda: ops.where_mc(big, tid))
    was = opcore._C._torch_native_lend_threads(False)
    try:
        for _ in range(5):
            assert 2 not in lib.where_mc(big, tid).tolist()
    finally:
        opcore._C._torch_native_lend_threads(was)


@pytest.mark.parametrize("name,args", [
    ("cat", ([torch.randn(2, 3), torch.randn(4)],)),
    ("check", (torch.randn(3, 5),)),
    ("sum_mc", (torch.randn(100),)),
])
def test_opcheck(lib, name, args):
    torch.library.opcheck(getattr(ops, name).default, args)


def test_compile_and_export(lib):
    def f(x):
        return ops.check(x * 2) + 1

    x = torch.randn(4, 4)
    compiled = torch.compile(f, fullgraph=True, backend="inductor")
    assert torch.equal(compiled(x), f(x))

    class M(torch.nn.Module):
        def forward(self, x):
            return ops.check(x) * 3

    ep = torch.export.export(M(), (x,))
    assert torch.equal(ep.module()(x), x * 3)


def test_python_kernel_fallback():
    """OPCORE_TORCH_NATIVE=0 keeps the Python kernel; results and errors alike."""
    code = f"""
import torch, opcore
from opcore import custom_op
lib = custom_op.load(name='oc_native_test', compute_srcs=[{str(KERNELS / 'ops.c')!r}],
                     shape_srcs=[{str(KERNELS / 'shape.c')!r}])
dump = torch._C._dispatch_dump('oc_native_test::check')
assert 'boxed_kernel.cc' not in dump, dump
x = torch.randn(3)
assert torch.equal(torch.ops.oc_native_test.check(x), x)
try:
    torch.ops.oc_native_test.check(x, fail_in_kernel=True)
except opcore.OpError as e:
    assert e.status == 'OC_EKERNEL' and 'asked to fail in the kernel' in str(e)
else:
    raise SystemExit('no error')
print('ok')
"""
    env = dict(os.environ, OPCORE_TORCH_NATIVE="0")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


@native_only
def test_drop_takes_the_kernels_out():
    """_torch_native.unregister(library) before an unload: torch has no CPU
    kernel for its ops any more (and a later registration works again)."""
    code = f"""
import torch, opcore
from opcore import custom_op, _torch_native
lib = custom_op.load(name='oc_native_test', compute_srcs=[{str(KERNELS / 'ops.c')!r}],
                     shape_srcs=[{str(KERNELS / 'shape.c')!r}])
x = torch.randn(3)
assert torch.equal(torch.ops.oc_native_test.check(x), x)
_torch_native.unregister('oc_native_test')
assert 'boxed_kernel.cc' not in torch._C._dispatch_dump('oc_native_test::check')
try:
    torch.ops.oc_native_test.check(x)
except NotImplementedError:
    pass
else:
    raise SystemExit('still callable')
assert _torch_native.register(lib.check)
assert torch.equal(torch.ops.oc_native_test.check(x), x)
print('ok')
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


@native_only
def test_the_fallback_route():
    """This file again with OPCORE_TORCH_NATIVE=0: the Python fallback route
    gives the same results and errors."""
    env = dict(os.environ, OPCORE_TORCH_NATIVE="0")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", __file__],
                       cwd=Path(__file__).parent, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
