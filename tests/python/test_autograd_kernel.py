"""register_autograd's C++ Autograd kernel (src/torch/autograd_kernel.cc):
a forward op and its backward op paired in one node of torch's graph. It
must do what the Python route does and what torch's own nodes do: bind
defaults, optional tensors and integer results, check gradients, keep
saved tensors honest (version counters, a second backward, saved-tensor
hooks), refuse forward-mode AD by name, and work from many threads, under
torch.func, torch.compile and compiled autograd. The behaviour tests run on
both routes (the `lib` fixture: the node, and the fallback route that
OPCORE_TORCH_NATIVE=0 takes)."""
import threading
from pathlib import Path

import pytest
import torch

import opcore._torch_native
import opcore.torch as ot
from conftest import load_lib

KERNELS = Path(__file__).parent / "autograd_kernels"

NODE = opcore._torch_native.route() == "native"
node_only = pytest.mark.skipif(not NODE, reason="the C++ node lives in the torch kernel shim; here the fallback "
                                                "route serves, tested below as route 'python'")
PAIRS = (("oc_agk::scale", "oc_agk::scale_backward"), ("oc_agk::twice_sign", "oc_agk::twice_sign_backward"),
         ("oc_agk::shrink", "oc_agk::shrink_backward"))


@pytest.fixture(scope="module")
def ops(opcore_build_dir):
    return load_lib(opcore_build_dir, "oc_agk", KERNELS / "ops.c", KERNELS / "shape.c")


def _register(monkeypatch, node):
    if not node:
        monkeypatch.setenv("OPCORE_TORCH_NATIVE", "0")
    for fwd, bwd in PAIRS:
        ot.register_autograd(fwd, bwd)
    is_node = torch.ops.oc_agk.scale(torch.ones(1, requires_grad=True), 1.0).grad_fn.name() == \
        "oc_agk::scaleBackward"
    assert is_node is (node and NODE)


@pytest.fixture(params=["node", "python"])
def lib(ops, monkeypatch, request):
    """The library, its ops paired by the C++ node or by the Python route."""
    _register(monkeypatch, request.param == "node")
    return ops


@pytest.fixture
def node_lib(ops, monkeypatch):
    _register(monkeypatch, True)
    return ops


@node_only
def test_the_node_is_the_shims(node_lib):
    x = torch.randn(3, requires_grad=True)
    y = torch.ops.oc_agk.scale(x, 2.0)
    assert y.grad_fn.name() == "oc_agk::scaleBackward"
    assert y.grad_fn.next_functions[0][0] is not None  # x's AccumulateGrad
    dump = torch._C._dispatch_dump("oc_agk::scale")
    assert "registered at opcore/torch/autograd_kernel.cc" in dump


def test_a_default_between_bound_arguments_gets_its_default(lib):
    # scale_backward(grad, beta=3.0, alpha, bias): beta is fed its default,
    # alpha the forward's value; a shift would scale the gradient
    x = torch.randn(5, requires_grad=True)
    g = torch.randn(5)
    torch.ops.oc_agk.scale(x, 0.5).backward(g)
    assert torch.allclose(x.grad, g * 0.5)


def test_an_optional_tensor_input_present_and_absent(lib):
    x, b = torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)
    y = torch.ops.oc_agk.scale(x, 3.0, b)
    assert torch.allclose(y, 3 * x + b)
    y.sum().backward()
    assert torch.equal(b.grad, torch.ones(4)) and torch.allclose(x.grad, torch.full((4,), 3.0))
    x.grad = None
    torch.ops.oc_agk.scale(x, 3.0, None).sum().backward()  # the None input: no edge, its gradient dropped
    assert torch.allclose(x.grad, torch.full((4,), 3.0))


def test_an_integer_result_gets_no_gradient_and_zeros_are_fed_for_it(lib):
    x = torch.tensor([-1.5, 0.0, 2.0], requires_grad=True)
    y, s = torch.ops.oc_agk.twice_sign(x)
    assert s.dtype == torch.int32 and not s.requires_grad and y.requires_grad
    assert torch.equal(s, torch.tensor([-1, 0, 1], dtype=torch.int32))
    y.sum().backward()
    assert torch.equal(x.grad, torch.full((3,), 2.0))


def test_an_unused_result_gets_zeros(lib):
    x = torch.randn(3, requires_grad=True)
    y = torch.ops.oc_agk.scale(x, 1.0, torch.zeros(3, requires_grad=True))
    (y * 0).sum().backward()
    assert torch.equal(x.grad, torch.zeros(3))


def test_a_gradient_of_the_wrong_shape_names_the_op_and_input(lib):
    x = torch.randn(2, 3, requires_grad=True)
    y = torch.ops.oc_agk.shrink(x, 1.0)
    with pytest.raises(RuntimeError, match=r"opcore: backward of oc_agk::shrink returned a gradient for input 'x' "
                                           r"of torch.float32 \[1\], expected torch.float32 \[2, 3\]"):
        y.sum().backward()


def test_a_saved_input_modified_in_place_is_torchs_version_error(lib):
    x = torch.randn(3, requires_grad=True)
    b = torch.randn(3)
    y = torch.ops.oc_agk.twice_sign(x)[0]
    assert torch.equal(y, 2 * x)
    # scale_backward reads bias: it is saved, then written
    z = torch.ops.oc_agk.scale(x, 1.0, b.requires_grad_())
    with torch.no_grad():
        b.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


def test_a_second_backward_needs_retain_graph(lib):
    x, b = torch.randn(3, requires_grad=True), torch.randn(3)
    y = torch.ops.oc_agk.scale(x, 2.0, b).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert torch.allclose(x.grad, torch.full((3,), 4.0))
    y2 = torch.ops.oc_agk.scale(x, 2.0, b).sum()
    y2.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y2.backward()


@node_only
def test_saved_tensor_hooks_see_what_the_node_saves(node_lib):
    packed = []

    def pack(t):
        packed.append(t.shape)
        return t

    x, b = torch.randn(2, 2, requires_grad=True), torch.randn(2, 2)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = torch.ops.oc_agk.scale(x, 1.0, b)
    assert packed == [torch.Size([2, 2])]  # bias: the one tensor the backward reads
    y.sum().backward()


@node_only
def test_forward_mode_ad_is_refused_by_name(node_lib):
    import torch.autograd.forward_ad as fwAD

    with fwAD.dual_level():
        x = fwAD.make_dual(torch.randn(3), torch.randn(3))
        with pytest.raises(RuntimeError, match="oc_agk::scale has no forward-mode derivative"):
            torch.ops.oc_agk.scale(x, 2.0)


def test_no_grad_and_inputs_without_grad_make_no_node(lib):
    x = torch.randn(3, requires_grad=True)
    with torch.no_grad():
        assert torch.ops.oc_agk.scale(x, 2.0).grad_fn is None
    assert torch.ops.oc_agk.scale(x.detach(), 2.0).grad_fn is None


def test_double_backward_goes_through_the_backward_ops_autograd(lib):
    # scale_backward has no autograd of its own: torch's fallback warns and
    # the second-order gradient is not connected (as for a C++ op)
    x = torch.randn(3, requires_grad=True)
    (g,) = torch.autograd.grad(torch.ops.oc_agk.scale(x, 2.0).sum(), x, create_graph=True)
    assert torch.allclose(g, torch.full((3,), 2.0))


@node_only
def test_torch_func_grad_and_vjp(node_lib):
    # (the Python route's autograd.Function has no setup_context: functorch
    # refuses it, as it does any such Function)
    x = torch.randn(4)
    g = torch.func.grad(lambda t: torch.ops.oc_agk.scale(t, 1.5).sum())(x)
    assert torch.allclose(g, torch.full((4,), 1.5))
    _, vjp = torch.func.vjp(lambda t: torch.ops.oc_agk.scale(t, -2.0), x)
    assert torch.allclose(vjp(torch.ones(4))[0], torch.full((4,), -2.0))


def test_torch_compile_differentiates_through_the_node(lib):
    def f(x, b):
        return torch.ops.oc_agk.scale(x, 2.0, b).sin().sum()

    x, b = torch.randn(5, requires_grad=True), torch.randn(5, requires_grad=True)
    f(x, b).backward()
    want = x.grad.clone(), b.grad.clone()
    x.grad = b.grad = None
    torch.compile(f, fullgraph=True)(x, b).backward()
    assert torch.allclose(x.grad, want[0]) and torch.allclose(b.grad, want[1])


def test_opcheck_with_inputs_that_require_grad(lib):
    for args in ((torch.randn(3, 4, requires_grad=True), 2.0),
                 (torch.randn(3, 4, requires_grad=True), 0.5, torch.randn(3, 4, requires_grad=True)),
                 (torch.randn(4, 3).t().requires_grad_(), 1.0),
                 (torch.randn(1, 4).expand(3, 4).requires_grad_(), 1.0),
                 (torch.randn(0, 4, requires_grad=True), 1.0)):
        torch.library.opcheck(torch.ops.oc_agk.scale.default, args)


def test_threads_each_get_their_own_graph(lib):
    errors = []

    def work(k):
        try:
            for _ in range(200):
                x = torch.randn(8, requires_grad=True)
                torch.ops.oc_agk.scale(x, float(k)).sum().backward()
                assert torch.allclose(x.grad, torch.full((8,), float(k)))
        except Exception as e:  # noqa: BLE001 -- reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


@node_only
def test_re_registering_replaces_the_kernel_and_old_graphs_still_run(node_lib):
    x = torch.randn(3, requires_grad=True)
    old = torch.ops.oc_agk.scale(x, 2.0)
    ot.register_autograd("oc_agk::scale", lambda grad, x, bias: (grad * 7, None))  # a Python callable
    new = torch.ops.oc_agk.scale(x, 2.0)
    assert new.grad_fn.name() != "oc_agk::scaleBackward"
    new.sum().backward()
    assert torch.allclose(x.grad, torch.full((3,), 7.0))
    x.grad = None
    old.sum().backward()  # the node made before keeps its binding
    assert torch.allclose(x.grad, torch.full((3,), 2.0))
    ot.register_autograd("oc_agk::scale", "oc_agk::scale_backward")
    assert torch.ops.oc_agk.scale(x, 2.0).grad_fn.name() == "oc_agk::scaleBackward"


def test_compiled_autograd_traces_the_pairing(lib):
    # the node's backward becomes one opaque call in compiled autograd's
    # graph (as torch's C++ custom Functions); the Python route is traced
    import torch._dynamo.compiled_autograd as compiled_autograd

    torch._dynamo.reset()
    x, b = torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)

    def step():
        y = torch.ops.oc_agk.scale(x, 2.0, b).sin()
        z, _ = torch.ops.oc_agk.twice_sign(x)
        return (y * z).sum()

    step().backward()
    want = x.grad.clone(), b.grad.clone()
    for _ in range(2):  # the second step runs the cached graph
        x.grad = b.grad = None
        with compiled_autograd._enable(torch.compile(backend="eager")):
            step().backward()
        assert torch.allclose(x.grad, want[0]) and torch.allclose(b.grad, want[1])


def _scale_back(grad, x, bias, alpha):
    return grad * alpha, (grad if bias is not None else None)


def _python_frames(fn):
    """fn()'s result and the names of the Python functions it entered."""
    import sys
    seen = []

    def prof(frame, event, arg):
        if event == "call":
            seen.append(frame.f_code.co_name)
    sys.setprofile(prof)
    try:
        out = fn()
    finally:
        sys.setprofile(None)
    return out, seen


@pytest.mark.parametrize("route", ["native", "python"])
def test_a_python_backward_leaves_calls_without_grad_out_of_python(ops, monkeypatch, route):
    """A Python backward: torch.library's Python Autograd kernel records the
    graph; on the native route the shim's kernel in front of it runs the
    calls that need none without entering Python."""
    if route == "python":
        monkeypatch.setenv("OPCORE_TORCH_NATIVE", "0")
    ot.register_autograd("oc_agk::scale", _scale_back)
    scale = torch.ops.oc_agk.scale
    x = torch.randn(5)
    y, seen = _python_frames(lambda: scale(x, 3.0))
    torch.testing.assert_close(y, x * 3.0)
    assert ("autograd_impl" in seen) is not (route == "native" and NODE), seen
    xg, b = torch.randn(5, requires_grad=True), torch.randn(5, requires_grad=True)
    y, seen = _python_frames(lambda: scale(xg, 2.0, b))
    assert "autograd_impl" in seen and y.grad_fn is not None
    y.sum().backward()
    torch.testing.assert_close(xg.grad, torch.full_like(xg, 2.0))
    torch.testing.assert_close(b.grad, torch.ones_like(b))
    with torch.no_grad():
        assert scale(xg, 2.0).grad_fn is None
    assert scale(xg.detach(), 2.0).grad_fn is None
    torch.library.opcheck(scale, (torch.randn(3, requires_grad=True), 2.0))
    ot.register_autograd("oc_agk::scale", "oc_agk::scale_backward")  # as the other tests expect
