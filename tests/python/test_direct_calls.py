"""Direct calls (lib.op(x)) on torch tensors agree with torch.ops: lazy
views (conjugate and negative bits) are resolved on the way in and, for
written arguments, on the way back; written tensors count an in-place
change (autograd's version counter); a launch grid beyond int64 is refused
naming the op."""
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
import opcore.torch  # noqa: E402,F401 (registers torch with opcore)

from conftest import load_lib  # noqa: E402

KERNELS = Path(__file__).resolve().parent / "view_kernels"


@pytest.fixture(scope="module")
def lib(opcore_build_dir):
    return load_lib(opcore_build_dir, "oc_views", KERNELS / "ops.c", KERNELS / "shape.c")


def routes(lib, name):
    return [("direct", getattr(lib, name)), ("torch.ops", getattr(torch.ops.oc_views, name))]


def lazy_views(b):
    """(name, a lazy view of b or of its parts, its values resolved)."""
    return [("conj", b.conj(), b.conj().resolve_conj()),
            ("conj().imag (negative bit)", b.conj().imag, -b.imag),
            ("_neg_view", torch._neg_view(b.real), -b.real),
            ("conj, strided", b[::2].conj(), b[::2].conj().resolve_conj())]


B = [1 + 2j, 3 - 4j, -5 + 6j, 7 + 0.5j]


@pytest.mark.parametrize("route", ["direct", "torch.ops"])
def test_lazy_views_are_read_as_their_values(lib, route):
    call = dict(routes(lib, "copy"))[route]
    b = torch.tensor(B, dtype=torch.complex64)
    for name, view, want in lazy_views(b):
        assert view.is_conj() or view.is_neg(), name
        got = call(view)
        assert not got.is_conj() and not got.is_neg(), name
        assert torch.equal(got, want), (name, got, want)


@pytest.mark.parametrize("route", ["direct", "torch.ops"])
def test_written_lazy_views_are_written_as_views(lib, route):
    """bump_ adds 1 (1j for complex): through a conjugate view the base
    loses 1j; through a negated view of its imaginary (real) parts, the
    base's imaginary (real) parts lose 1."""
    call = dict(routes(lib, "bump_"))[route]
    b = torch.tensor(B, dtype=torch.complex64)
    for make, want in [(lambda c: c.conj(), b - 1j), (lambda c: c.conj().imag, b - 1j),
                       (lambda c: torch._neg_view(c.real), b - 1)]:
        base = b.clone()
        view = make(base)
        assert view.is_conj() or view.is_neg()
        out = call(view)
        assert out is view
        assert torch.equal(base, want), (base, want)
        if route == "torch.ops":  # an op returning nothing: torch's fallback has no result to read
            base = b.clone()
            assert torch.ops.oc_views.bump_void_(make(base)) is None
            assert torch.equal(base, want), (base, want)
    c, d = b.clone(), b.clone()
    bump_all = dict(routes(lib, "bump_all_"))[route]
    bump_all([c.conj(), d.conj().imag, torch.zeros(2)])
    assert torch.equal(c, b - 1j) and torch.equal(d, b - 1j)


@pytest.mark.parametrize("route", ["direct", "torch.ops"])
def test_written_tensor_saved_for_backward_fails_backward(lib, route):
    """sigmoid saves its result for backward: writing it in place between
    forward and backward must make backward refuse, not use new values."""
    call = dict(routes(lib, "bump_"))[route]
    x = torch.randn(8, requires_grad=True)
    y = x.sigmoid()
    v = y._version
    with torch.no_grad():
        call(y)
    assert y._version > v
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_written_list_items_count_a_change(lib):
    a, b = torch.zeros(3), torch.zeros(2)
    va, vb = a._version, b._version
    lib.bump_all_([a, b])
    assert torch.equal(a, torch.ones(3)) and torch.equal(b, torch.ones(2))
    assert a._version > va and b._version > vb


def test_read_only_arguments_keep_their_version(lib):
    x = torch.randn(4)
    v = x._version
    lib.copy(x)
    assert x._version == v


@pytest.mark.parametrize("grid, why", [(2**64, "at most 2\\*\\*63 - 1"), ((2, 2**70), "at most 2\\*\\*63 - 1"),
                                       (-2**64, "at least 1"), (0, "at least 1")])
def test_grid_beyond_int64_names_the_op_and_the_grid(lib, grid, why):
    with pytest.raises(ValueError, match=rf"op 'oc_views::copy': axis \d of the launch grid is -?\d+; "
                                         rf"every axis needs {why}"):
        lib.copy[grid]
    assert torch.equal(lib.copy[1](torch.ones(2)), torch.ones(2))  # the next call works
