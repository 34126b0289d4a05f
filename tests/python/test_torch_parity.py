"""opcore ops behave as torch's own C++ ops: register_autograd binds a
backward by name or refuses it (never a guess by position), and in-place
(Tensor(a!)) ops on tensors that require grad run as a C++ extension op of
the same schema does (built here with torch.utils.cpp_extension)."""
from pathlib import Path

import pytest
import torch
import torch.utils.cpp_extension

import opcore._torch_native
import opcore.torch as ot
from conftest import load_lib

KERNELS = Path(__file__).parent / "parity_kernels"

@pytest.fixture(scope="module")
def lib(opcore_build_dir):
    return load_lib(opcore_build_dir, "oc_parity", KERNELS / "ops.c", KERNELS / "shape.c")


@pytest.fixture(scope="module")
def cpp_myadd_out():
    # extension-cpp's myadd_out, as its muladd.cpp writes it
    torch.utils.cpp_extension.load_inline("cppref_ext", cpp_sources=[(KERNELS / "cpp_myadd_out.cpp").read_text()],
                                          extra_cflags=["-O3"], is_python_module=False)
    return torch.ops.cppref.myadd_out.default


# ---- in place -------------------------------------------------------------------

def _run(op, ga, gout):
    """What a myadd_out call does to its arguments: an exception's type, or
    (out equals a + b, out.requires_grad, out has a grad_fn)."""
    torch.manual_seed(0)
    a, b = torch.randn(5, requires_grad=ga), torch.randn(5, requires_grad=ga)
    out = torch.randn(5, requires_grad=gout)
    try:
        assert op(a, b, out) is None
    except Exception as e:  # noqa: BLE001 -- compared with the C++ op's
        return type(e)
    return torch.equal(out.detach(), (a + b).detach()), out.requires_grad, out.grad_fn is not None


@pytest.mark.parametrize("ga, gout", [(False, False), (True, False), (False, True), (True, True)],
                         ids=["no-grad", "grad-on-inputs", "grad-on-out", "grad-on-both"])
def test_in_place_op_behaves_as_the_cpp_extension_op(lib, cpp_myadd_out, ga, gout):
    ours = torch.ops.oc_parity.myadd_out.default
    assert _run(ours, ga, gout) == _run(cpp_myadd_out, ga, gout) == (True, gout, False)
    # upstream's TestMyAddOut::test_opcheck_cpu, on both
    for op in (ours, cpp_myadd_out):
        for n in (3, 20):
            torch.library.opcheck(op, (torch.randn(n, requires_grad=ga), torch.randn(n, requires_grad=ga),
                                       torch.randn(n, requires_grad=gout)))


def test_in_place_op_on_a_non_leaf_keeps_its_history(lib, cpp_myadd_out):
    # as for the C++ op, the write is invisible to autograd: out keeps its grad_fn
    for op in (torch.ops.oc_parity.myadd_out.default, cpp_myadd_out):
        w = torch.randn(4, requires_grad=True)
        out = w * 2
        op(torch.ones(4), torch.ones(4), out)
        assert torch.equal(out.detach(), torch.full((4,), 2.0))
        out.sum().backward()
        assert torch.equal(w.grad, torch.full((4,), 2.0))


NATIVE = opcore._torch_native.route() == "native"


def test_in_place_op_bumps_the_version_counter(lib):
    # torch's own in-place ops do; a backward that saved the tensor then raises
    x, z = torch.randn(3, requires_grad=True), torch.randn(3)
    y = x * z  # saves z
    torch.ops.oc_parity.myadd_out(torch.ones(3), torch.ones(3), z)
    assert z._version == 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    a = torch.randn(3)
    torch.ops.oc_parity.myadd_out(torch.ones(3), torch.ones(3), a)
    assert a._version == 1 and torch.equal(a, torch.full((3,), 2.0))


def test_in_place_op_takes_the_native_kernel(lib):
    cpu = [l for l in torch._C._dispatch_dump("oc_parity::myadd_out").splitlines() if l.startswith("CPU:")]
    # the fallback route (OPCORE_TORCH_NATIVE=0): the Python kernel
    assert cpu and ("registered at opcore/torch/boxed_kernel.cc" in cpu[0]) is NATIVE, cpu


def test_in_place_op_under_compile_with_grad_on_inputs(lib):
    def f(a, b):
        out = torch.empty_like(a)
        torch.ops.oc_parity.myadd_out(a, b, out)
        return out * a

    a, b = torch.randn(6, requires_grad=True), torch.randn(6, requires_grad=True)
    got = torch.compile(f, fullgraph=True)(a, b)
    assert torch.allclose(got, (a + b) * a)


# ---- register_autograd binds by name, or refuses ----------------------------------

def _cell_reference(x, h, c):
    new_cell = c + torch.tanh(x + h)
    return torch.tanh(new_cell), new_cell


def _check_cell_grads(op):
    torch.manual_seed(1)
    ins = [torch.randn(4, 3, requires_grad=True) for _ in range(3)]
    ref = [t.detach().clone().requires_grad_() for t in ins]
    w = torch.randn(4, 3), torch.randn(4, 3)
    new_h, new_cell = op(*ins)
    (new_h * w[0] + new_cell * w[1]).sum().backward()
    rh, rc = _cell_reference(*ref)
    (rh * w[0] + rc * w[1]).sum().backward()
    assert torch.allclose(new_h, rh) and torch.allclose(new_cell, rc)
    for got, want in zip(ins, ref):
        assert torch.allclose(got.grad, want.grad, atol=1e-5)


def test_backward_op_bound_by_name_takes_unnamed_results(lib):
    # cell(x, h, c) -> (Tensor, Tensor); cell_backward(grad0, grad1, result0, x, h)
    ot.register_autograd("oc_parity::cell", "oc_parity::cell_backward")
    _check_cell_grads(torch.ops.oc_parity.cell)


def test_backward_op_that_cannot_be_bound_by_name_is_refused(lib):
    with pytest.raises(ValueError) as e:
        ot.register_autograd("oc_parity::cell", "oc_parity::cell_backward_seeds")
    msg = str(e.value)
    assert "'oc_parity::cell'" in msg and "'dh', 'dc' that name nothing of the forward" in msg
    assert "forward inputs: x, h, c; forward results: result0, result1; incoming gradients: grad_result0, " \
           "grad_result1, grad0, grad1" in msg
    assert "positional=True" in msg


def test_positional_binding_only_when_asked(lib):
    ot.register_autograd("oc_parity::cell", "oc_parity::cell_backward_seeds", positional=True)
    _check_cell_grads(torch.ops.oc_parity.cell)


def test_callable_backward_takes_the_forwards_results(lib):
    seen = []

    def backward(grad0, grad1, x, h, c, *, result0):
        seen.append(result0)
        dcell = grad1 + grad0 * (1 - result0 * result0)
        dpre = dcell * (1 - torch.tanh(x + h) ** 2)
        return dpre, dpre, dcell

    ot.register_autograd("oc_parity::cell", backward)
    _check_cell_grads(torch.ops.oc_parity.cell)
    assert seen and seen[0].shape == (4, 3)


def test_callable_backward_with_an_unknown_parameter_is_refused(lib):
    def backward(grad0, grad1, x, h, c, new_h):
        return grad0, grad0, grad1

    with pytest.raises(ValueError, match=r"backward has argument\(s\) 'new_h' that name nothing of the forward; "
                                         r"names available: forward inputs: x, h, c; forward results: result0"):
        ot.register_autograd("oc_parity::cell", backward)
