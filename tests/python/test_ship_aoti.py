"""An exported model carries its opcore ops: torch.export of a model calling
torch.ops.my_ops.relu_forward, compiled by AOTInductor
(torch._inductor.aoti_compile_and_package) into a .pt2 package in one
process, loaded (torch._inductor.aoti_load_package) and run in a fresh
process that first loads the op library: the same result as eager.

The compiled model calls the op through PyTorch's dispatcher, so the
process running it must have the op registered: opcore.load_library (or
import of a package built with opcore.setuptools) before the model is
called. A C++ program with no Python (AOTInductor's AOTIModelPackageLoader)
has the torch kernel shim register them (oc_torch_shim_register_library):
tests/python/aoti_host/host.cc, built here against the installed torch."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

COMPILE = r"""
import sys, torch, opcore
lib = opcore.load("relu", [sys.argv[1] + "/examples/relu/elementwise/relu.c"],
                  [sys.argv[1] + "/examples/relu/shape.c"], build_directory=sys.argv[2] + "/lib")
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 4)
    def forward(self, x):
        return torch.ops.my_ops.relu_forward(self.lin(x)) * 2
torch.manual_seed(0)
m, x = M().eval(), torch.randn(3, 8)
ep = torch.export.export(m, (x,))
assert "torch.ops.my_ops.relu_forward.default" in ep.graph_module.code, ep.graph_module.code
torch._inductor.aoti_compile_and_package(ep, package_path=sys.argv[2] + "/model.pt2")
torch.save({"x": x, "y": m(x)}, sys.argv[2] + "/io.pt")
"""

RUN = r"""
import sys, torch, opcore
opcore.load_library(sys.argv[1] + "/lib/librelu.so")   # registers torch.ops.my_ops.*
model = torch._inductor.aoti_load_package(sys.argv[1] + "/model.pt2")
io = torch.load(sys.argv[1] + "/io.pt")
y = model(io["x"])
torch.testing.assert_close(y, io["y"])
assert (y >= 0).all() and (y == 0).any()
print("ok")
"""


def _py(code, *args):
    p = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, timeout=1200)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-6000:]
    return p.stdout


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    d = tmp_path_factory.mktemp("aoti")
    _py(COMPILE, REPO, d)
    return d


def test_aoti_package_runs_in_a_fresh_process(package):
    assert _py(RUN, package).strip().endswith("ok")


def test_aoti_package_without_the_op_library_fails_clearly(package):
    """Without the library loaded the op is missing: the loader names it."""
    code = RUN.replace('opcore.load_library(sys.argv[1] + "/lib/librelu.so")', "")
    p = subprocess.run([sys.executable, "-c", code, str(package)], capture_output=True, text=True, timeout=1200)
    assert p.returncode != 0 and "Could not find schema for my_ops::relu_forward" in p.stderr, p.stderr[-3000:]


PRINT = r"""
import sys, torch, opcore
opcore.load_library(sys.argv[1] + "/lib/librelu.so")
model = torch._inductor.aoti_load_package(sys.argv[1] + "/model.pt2")
x = torch.arange(24, dtype=torch.float32).reshape(3, 8) / 10 - 1  # host.cc's input
for v in model(x).flatten().tolist():
    print(v)
"""


def test_a_cpp_host_without_python_runs_the_package(package, tmp_path):
    """tests/python/aoti_host/host.cc: libopcore loads the op library, the
    torch kernel shim registers its ops with torch's dispatcher, and torch's
    AOTIModelPackageLoader runs the package; the same values as in Python."""
    import torch
    import opcore
    from opcore import _torch_native

    shim = _torch_native._find_shim()  # make python built it for this torch
    tdir = Path(torch.__file__).resolve().parent
    libopcore = Path(opcore.__file__).resolve().parent / "lib" / "libopcore.so.0"
    exe = tmp_path / "host"
    cmd = [os.environ.get("CXX", "c++"), "-std=c++20", "-O1",
           f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}", "-I", str(REPO / "include"),
           "-isystem", str(tdir / "include"), "-isystem", str(tdir / "include" / "torch" / "csrc" / "api" / "include"),
           str(REPO / "tests" / "python" / "aoti_host" / "host.cc"), "-o", str(exe), str(libopcore),
           "-L", str(tdir / "lib"), "-ltorch", "-ltorch_cpu", "-lc10", "-ldl",
           f"-Wl,-rpath,{tdir / 'lib'}", f"-Wl,-rpath,{libopcore.parent}"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    r = subprocess.run([str(exe), str(package / "lib" / "librelu.so"), str(shim), str(package / "model.pt2")],
                       capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
    got = [float(v) for v in r.stdout.split()]
    want = [float(v) for v in _py(PRINT, package).split()]
    assert len(got) == len(want) == 12 and any(v == 0 for v in got), (got, want)
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want))
