"""opcore.torch's switch between its torch-internals fast path and public
torch.library APIs only (opcore/_torch_internals.py): both routes give the
same values and gradients, and each is the route taken. The whole torch
suite also runs with the switch on (`make test-python`, second run with
OPCORE_TORCH_PUBLIC_API=1)."""
import pytest

torch = pytest.importorskip("torch")

import opcore.torch as ot  # noqa: E402
from opcore import _torch_internals  # noqa: E402


@pytest.fixture(params=[False, True], ids=["internals", "public"])
def public(request):
    before = _torch_internals.use_public_api()
    _torch_internals.use_public_api(request.param)
    yield request.param
    _torch_internals.use_public_api(before)


def test_switch_follows_the_environment(monkeypatch):
    import importlib

    for value, want in (("1", True), ("0", False), ("", False)):
        monkeypatch.setenv("OPCORE_TORCH_PUBLIC_API", value)
        assert importlib.reload(_torch_internals).use_public_api() is want
    monkeypatch.undo()
    importlib.reload(_torch_internals)


def test_both_routes_differentiate_alike(relu_libs, public):
    op = ot.register_autograd("my_ops_multicore::relu_forward", "my_ops_multicore::relu_backward")
    x = torch.randn(6, 5, requires_grad=True)
    g = torch.randn(6, 5)
    y = op(x)
    assert torch.equal(y, torch.relu(x.detach()))
    y.backward(g)
    assert torch.equal(x.grad, g * (x.detach() > 0))
    # the route taken: the shim's C++ node (src/torch/autograd_kernel.cc),
    # or torch.library's autograd.Function
    route = y.grad_fn.name()
    assert (route == "my_ops_multicore::relu_forwardBackward") is (not public), route
    with torch.no_grad():
        assert torch.equal(op(x), torch.relu(x.detach()))
