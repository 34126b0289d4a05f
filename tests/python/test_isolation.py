"""Fault isolation from PyTorch and JAX: every case of
tests/isolation/misbehave.h (exit, _exit, _Exit, quick_exit, abort, a failed
assert, raise(SIGABRT), pthread_exit, thrd_exit, longjmp out of the call,
a 64 MiB stack frame, raise(SIGSEGV), a NULL store, OC_CHECK, a TCM range)
in a single-core kernel, a multicore kernel, a shape function and an
OC_LIBRARY block ends in an exception naming the op (or library), the core
and what happened; the process goes on and the next call of every op works.
A hang fails the test: faulthandler ends the process after a time limit.
"""
import faulthandler
import re
from pathlib import Path

import numpy as np
import pytest

import opcore
from opcore import custom_op

torch = pytest.importorskip("torch")

# (how, status, text) -- tests/isolation/misbehave.h
CASES = [
    (1, "OC_EKERNEL", "called exit(3)"),
    (2, "OC_EKERNEL", "called _exit(4)"),
    (3, "OC_EKERNEL", "called _Exit(5)"),
    (4, "OC_EKERNEL", "called quick_exit(6)"),
    (5, "OC_EKERNEL", "called abort()"),
    (6, "OC_EKERNEL", "assertion failed: how == 1234"),
    (7, "OC_EFAULT", "SIGABRT (Aborted) sent by raise()"),
    (8, "OC_EKERNEL", "called pthread_exit()"),
    (17, "OC_EKERNEL", "called thrd_exit(7)"),
    (14, "OC_EFAULT", "SIGSEGV (Segmentation fault) sent by raise()"),
    (16, "OC_EFAULT", "Segmentation fault at address (nil)"),
    (15, "OC_EKERNEL", "arg is 0, not 42"),
]
KERNEL_ONLY = [
    (10, "OC_EKERNEL", "called longjmp() to a jmp_buf set outside the call"),
    (11, "OC_EKERNEL", "called siglongjmp() to a jmp_buf set outside the call"),
    (13, "OC_ESTACK", "stack overflow"),
    (20, "OC_EKERNEL", "out of range"),
]
FINE, LONGJMP_INSIDE, SET_BUF, LONGJMP_OTHER = 0, 12, 19, 10
LIBS = ["iso", "iso_multi"]


@pytest.fixture(autouse=True, scope="module")
def bounded():
    """No case may hang: past the limit the process ends (and the test fails)."""
    faulthandler.dump_traceback_later(600, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="module")
def iso_libs(load_iso):
    return {"iso": load_iso("iso"),
            "iso_multi": load_iso("iso_multi", multicore=True),
            "iso_debug": load_iso("iso_debug", debug=True)}


X = np.arange(1000, dtype=np.float32) % 17 - 8


def torch_call(lib, how, arg=0):
    return getattr(torch.ops, lib).misbehave(torch.from_numpy(X), how, arg)


def still_works():
    for lib in LIBS:
        assert torch.equal(torch_call(lib, FINE), torch.from_numpy(2 * X))


def expect_torch(lib, how, status, text, where):
    with pytest.raises(opcore.OpError) as ei:
        torch_call(lib, how)
    e = ei.value
    assert not isinstance(e, opcore.OpArgumentError), str(e)
    assert e.status == status, str(e)
    assert e.op == f"{lib}::misbehave"
    msg = str(e)
    assert f"op '{lib}::misbehave'" in msg and where in msg and text in msg, msg
    still_works()


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("how,status,text", CASES + KERNEL_ONLY)
def test_torch_kernel(iso_libs, lib, how, status, text):
    expect_torch(lib, how, status, text, "kernel 'misbehave' on core ")


@pytest.mark.parametrize("how,status,text", CASES)
def test_torch_shape_function(iso_libs, how, status, text):
    if how == 16:  # a store near NULL in a shape function reads as touching meta data
        status, text = "OC_EMETA", "touched tensor data"
    expect_torch("iso", 100 + how, status, text, "shape function 'misbehave_shape'")


def test_torch_longjmp_within_the_call_works(iso_libs):
    for lib in LIBS:
        assert torch.equal(torch_call(lib, LONGJMP_INSIDE), torch.from_numpy(2 * X))
    assert torch.equal(torch_call("iso", 100 + LONGJMP_INSIDE), torch.from_numpy(2 * X))


def test_torch_shape_longjmp_to_a_kernels_buf(iso_libs):
    torch_call("iso", SET_BUF)  # the kernel sets its jmp_buf on its own stack
    expect_torch("iso", 100 + LONGJMP_OTHER, "OC_EKERNEL", "called longjmp() to a jmp_buf set outside the call",
                 "shape function 'misbehave_shape'")


def test_torch_autograd_backward_thread(iso_libs):
    """A faulting kernel on the autograd engine's thread, then a good one."""
    class F(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, how):
            ctx.how = how
            return torch.ops.iso.misbehave(x, FINE, 0)

        @staticmethod
        def backward(ctx, g):
            return torch.ops.iso_multi.misbehave(g.contiguous(), ctx.how, 0), None

    for how, _, text in CASES[:6]:
        x = torch.from_numpy(X.copy()).requires_grad_()
        with pytest.raises(opcore.OpError, match=re.escape(text)):
            F.apply(x, how).sum().backward()
    x = torch.from_numpy(X.copy()).requires_grad_()
    F.apply(x, FINE).sum().backward()
    assert torch.equal(x.grad, torch.full_like(x, 2))


def test_torch_debug_build_catches_overrun(iso_libs):
    x = torch.zeros(10)
    for past in (1, 6, 5000):
        with pytest.raises(opcore.OpError, match=r"op 'iso_debug::overrun'.*wrote past the end of output 0 "
                                                 r"\(float32 \[10\], 40 bytes\)"):
            torch.ops.iso_debug.overrun(x, past)
        still_works()
    assert torch.equal(torch.ops.iso_debug.overrun(x, 0), torch.arange(10, dtype=torch.float32))
    assert "-DOC_DEBUG" in iso_libs["iso_debug"].cflags


def test_torch_debug_build_guards_each_result(iso_libs):
    x = torch.zeros(10)
    for past in (1, 5000):
        with pytest.raises(opcore.OpError, match=r"op 'iso_debug::overrun2'.*wrote past the end of output 1 "):
            torch.ops.iso_debug.overrun2(x, past)
    a, b = torch.ops.iso_debug.overrun2(x, 0)
    assert torch.equal(a, torch.ones(10)) and torch.equal(b, torch.arange(10, dtype=torch.float32))
    # an in-place result is the caller's own tensor, written directly
    y = torch.arange(4, dtype=torch.float32)
    torch.ops.iso_debug.double_(y)
    assert torch.equal(y, torch.tensor([0.0, 2.0, 4.0, 6.0]))


@pytest.mark.parametrize("how,status,text", [c for c in CASES if c[0] not in (3, 17, 14)])
def test_library_block(opcore_build_dir, load_iso, monkeypatch, how, status, text):
    """custom_op.load_library of a library whose OC_LIBRARY block misbehaves."""
    lib = load_iso("iso_reg")  # builds (and loads) with the block behaving
    monkeypatch.setenv("OC_ISO_REGISTER", str(how))
    path = lib.path
    # a fresh copy, so the loader runs the block again
    fresh = Path(opcore_build_dir) / f"iso_reg_{how}.so"
    fresh.write_bytes(Path(path).read_bytes())
    with pytest.raises(opcore.OpError) as ei:
        custom_op.load_library(fresh)
    msg = str(ei.value)
    assert "library 'iso_reg'" in msg and "OC_LIBRARY block" in msg and text in msg, msg
    assert ei.value.status == status
    still_works()


def test_build_with_a_block_that_exits(tmp_path):
    (tmp_path / "k.c").write_text("int unused;\n")
    (tmp_path / "s.c").write_text("#include <stdlib.h>\n#include <opcore/library.h>\n"
                                  "OC_LIBRARY(reg_exit, m) { (void)m; exit(3); }\n")
    with pytest.raises(opcore.BuildError, match=r"library 'reg_exit'.*called exit\(3\)"):
        custom_op.load(name="reg_exit", compute_srcs=[str(tmp_path / "k.c")], shape_srcs=[str(tmp_path / "s.c")],
                       build_directory=str(tmp_path / "b"))


def test_load_library_refuses_damaged_files(iso_libs, tmp_path):
    good = Path(iso_libs["iso"].path).read_bytes()
    empty = tmp_path / "libempty.so"
    empty.write_bytes(b"")
    with pytest.raises(opcore.OpError, match="the file is empty") as ei:
        custom_op.load_library(empty)
    assert not isinstance(ei.value, FileNotFoundError)
    half = tmp_path / "libhalf.so"
    half.write_bytes(good[: len(good) // 2])
    with pytest.raises(opcore.OpError, match="damaged"):
        custom_op.load_library(half)
    flipped = bytearray(good)
    flipped[len(good) // 3] ^= 0x10
    bad = tmp_path / "libflipped.so"
    bad.write_bytes(bytes(flipped))
    with pytest.raises(opcore.OpError, match="checksum"):
        custom_op.load_library(bad)
    still_works()


# ---- JAX --------------------------------------------------------------------

@pytest.fixture(scope="module")
def ojax(iso_libs):
    return pytest.importorskip("opcore.jax")


def jax_call(ojax, lib, how, arg=0):
    return np.asarray(ojax.op(f"{lib}::misbehave")(X, how, arg))


def expect_jax(ojax, lib, how, text, where):
    with pytest.raises(Exception) as ei:
        jax_call(ojax, lib, how)
    msg = str(ei.value)
    assert f"{lib}::misbehave" in msg and where in msg and text in msg, msg
    for other in LIBS:
        np.testing.assert_array_equal(jax_call(ojax, other, FINE), 2 * X)


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("how,status,text", CASES + KERNEL_ONLY)
def test_jax_kernel(ojax, lib, how, status, text):
    expect_jax(ojax, lib, how, text, "kernel 'misbehave' on core ")


@pytest.mark.parametrize("how,status,text", CASES)
def test_jax_shape_function(ojax, how, status, text):
    if how == 16:
        text = "touched tensor data"
    expect_jax(ojax, "iso", 100 + how, text, "shape function 'misbehave_shape'")


def test_jax_debug_build_catches_overrun(ojax):
    f = ojax.op("iso_debug::overrun")
    with pytest.raises(Exception, match=r"iso_debug::overrun.*wrote past the end of output 0"):
        np.asarray(f(np.zeros(10, np.float32), 5000))
    np.testing.assert_array_equal(np.asarray(f(np.zeros(10, np.float32), 0)), np.arange(10, dtype=np.float32))

