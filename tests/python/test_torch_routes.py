"""opcore.torch's two routes: the torch kernel shim (native) and the Python
fallback on public torch.library APIs only, which OPCORE_TORCH_NATIVE=0
forces and which serves at once, with one line saying how to build the
shim, when the shim for this torch is not there. Both give the same values
and gradients, and each is the route taken. The torch suite also runs with
OPCORE_TORCH_NATIVE=0 (`make test-python`, second run)."""
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import opcore.torch as ot  # noqa: E402
from opcore import _torch_native  # noqa: E402

NATIVE = os.environ.get("OPCORE_TORCH_NATIVE") != "0"


@pytest.fixture(params=[False, True], ids=["native", "fallback"])
def fallback(request, monkeypatch):
    if request.param:
        monkeypatch.setenv("OPCORE_TORCH_NATIVE", "0")
    return request.param or not NATIVE


def test_switch_follows_the_environment(monkeypatch):
    for value, want in (("0", "fallback"), ("1", "native" if NATIVE else "fallback")):
        monkeypatch.setenv("OPCORE_TORCH_NATIVE", value)
        if NATIVE or value == "0":
            assert _torch_native.route() == want, _torch_native.route_error()


def test_both_routes_differentiate_alike(relu_libs, fallback):
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
    assert (route == "my_ops_multicore::relu_forwardBackward") is (not fallback), route
    with torch.no_grad():
        assert torch.equal(op(x), torch.relu(x.detach()))


def test_a_missing_shim_falls_back_at_once_with_a_note(tmp_path):
    """A torch the shim was not built for: the fallback serves, stderr says
    in one line how to build the shim, and nothing is compiled on import
    (the compiler named by CXX would leave a mark)."""
    mark = tmp_path / "compiled"
    cxx = tmp_path / "cxx"
    cxx.write_text(f"#!/bin/sh\ntouch {mark}\nexit 1\n")
    cxx.chmod(0o755)
    code = ("import torch\n"
            "torch.__version__ = '0.0.0+nosuchbuild'  # a torch no shim was built for\n"
            "import opcore.torch, opcore._torch_native as t\n"
            "print(t.route())\n")
    env = dict(os.environ, CXX=str(cxx), OPCORE_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("OPCORE_TORCH_NATIVE", None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0 and r.stdout.strip() == "fallback", r.stdout + r.stderr
    notes = [line for line in r.stderr.splitlines() if line.startswith("opcore:")]
    assert len(notes) == 1 and "python -m opcore build-torch-shim" in notes[0], r.stderr
    assert "0.0.0+nosuchbuild" in notes[0]
    assert not mark.exists()


def test_the_build_command_names_the_shim():
    """`python -m opcore build-torch-shim DIR` builds the shim for this torch
    into DIR; one already there (make python's) is kept as is."""
    if _torch_native.route_error() is not None:
        pytest.skip(f"no shim for this torch here: {_torch_native.route_error()}")
    r = subprocess.run([sys.executable, "-m", "opcore", "build-torch-shim", str(_torch_native.PREBUILT_DIR)],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().endswith(_torch_native.shim_name()), r.stdout
