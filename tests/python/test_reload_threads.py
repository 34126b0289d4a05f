"""Reloading and unloading a library while other threads call its ops
through torch.ops (and directly, and through a register_autograd backward):
torch's registration stays and its kernels call the op loaded now, on the
native route (the shim) and the fallback route (OPCORE_TORCH_NATIVE=0).
Every result is the old kernel's right answer, the new kernel's, or
opcore's "was unloaded" OpError; the process lives.

Each case runs in a process of its own with a timeout: a crash or a hang
fails that one test, never the run.
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

from opcore import custom_op  # noqa: E402

# y = x * k and its backward grad * k: k tells which build ran
KERNEL = r"""
#include <opcore/kernel.h>
static oc_tensor *times(const oc_tensor *x, float k) {
    oc_tensor *y = oc_dst_tensor(); const float *a = x->data; float *b = y->data;
    for (int64_t i = 0; i < oc_numel(x); i++) b[i] = a[i] * k;
    return y;
}
oc_tensor *scale(const oc_tensor *x) { return times(x, %(k)d); }
oc_tensor *scale_backward(const oc_tensor *grad) { return times(grad, %(k)d); }
"""
SHAPE = r"""
#include <opcore/library.h>
static oc_tensor *same(const oc_tensor *x) { return oc_empty_like(x); }
OC_LIBRARY(swapme, m) {
    oc_def(m, "scale(Tensor x) -> Tensor", same, "scale");
    oc_def(m, "scale_backward(Tensor grad) -> Tensor", same, "scale_backward");
}
"""
# the same library with a changed schema, one op less and one op more
SHAPE_CHANGED = r"""
#include <opcore/library.h>
static oc_tensor *same(const oc_tensor *x) { return oc_empty_like(x); }
static oc_tensor *same2(const oc_tensor *x, int64_t n) { (void)n; return oc_empty_like(x); }
OC_LIBRARY(swapme, m) {
    oc_def(m, "scale(Tensor x, int n=0) -> Tensor", same2, "scale");
    oc_def(m, "extra(Tensor x) -> Tensor", same, "extra");
}
"""
KERNEL_CHANGED = r"""
#include <opcore/kernel.h>
oc_tensor *scale(const oc_tensor *x, int64_t n) {
    oc_tensor *y = oc_dst_tensor(); const float *a = x->data; float *b = y->data;
    for (int64_t i = 0; i < oc_numel(x); i++) b[i] = a[i] * 5 + (float)n;
    return y;
}
oc_tensor *extra(const oc_tensor *x) {
    oc_tensor *y = oc_dst_tensor(); const float *a = x->data; float *b = y->data;
    for (int64_t i = 0; i < oc_numel(x); i++) b[i] = a[i] - 1;
    return y;
}
"""
UNLOADED = "its library 'swapme' was unloaded"
CASE_TIMEOUT = 240


def _build(d, kernel, shape):
    d.mkdir()
    (d / "k.c").write_text(kernel)
    (d / "s.c").write_text(shape)
    built = custom_op.build("swapme", [str(d / "k.c")], [str(d / "s.c")], build_directory=str(d))
    return str(built[0])


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """Two builds of library swapme: k = 2 and k = 3 (a rebuilt file with a
    changed kernel), and one with a changed schema."""
    root = tmp_path_factory.mktemp("swapme")
    return {"a": _build(root / "a", KERNEL % {"k": 2}, SHAPE),
            "b": _build(root / "b", KERNEL % {"k": 3}, SHAPE),
            "changed": _build(root / "changed", KERNEL_CHANGED, SHAPE_CHANGED)}


def run_py(code, route, timeout=CASE_TIMEOUT):
    env = dict(os.environ, OPCORE_TORCH_NATIVE="1" if route == "native" else "0")
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, env=env)


STRESS = r"""
import json, os, shutil, sys, threading, time
import torch
import opcore
from opcore import custom_op, _torch_native
import opcore.torch

paths, kinds, rounds, route, live = {paths!r}, {kinds!r}, {rounds}, {route!r}, {live!r}

def rebuild(src):
    # what a rebuild does to the loaded file: a new file in its place
    shutil.copyfile(src, live + ".tmp")
    os.replace(live + ".tmp", live)

rebuild(paths[0])
custom_op.load_library(live)
opcore.torch.register_autograd("swapme::scale", "swapme::scale_backward")
stop = threading.Event()
seen = [dict(ok=0, unloaded=0, ks=set(), bad=[]) for _ in kinds]
calls = [0] * len(kinds)

def check(i, y, x):
    k = {{float(v) for v in (y / x).flatten().tolist()}}
    if len(k) != 1 or not k <= {{2.0, 3.0}}:
        seen[i]["bad"].append(f"{{kinds[i]}}: {{sorted(k)}}")
    else:
        seen[i]["ks"] |= k
        seen[i]["ok"] += 1

def worker(i, kind):
    x = torch.arange(1, 65, dtype=torch.float32)
    while not stop.is_set():
        try:
            if kind == "torch":
                check(i, torch.ops.swapme.scale(x), x)
            elif kind == "direct":
                lib = custom_op.loaded_libraries().get("swapme")
                if lib is not None:
                    check(i, lib.scale(x), x)
            else:  # autograd: forward and backward through torch.ops
                xg = x.clone().requires_grad_()
                y = torch.ops.swapme.scale(xg)
                y.backward(torch.ones_like(y))
                check(i, y.detach(), x)
                check(i, xg.grad, torch.ones_like(x))
        except opcore.OpError as e:
            if "was unloaded" not in str(e):
                seen[i]["bad"].append(f"{{kind}}: {{type(e).__name__}}: {{e}}")
            else:
                seen[i]["unloaded"] += 1
        except Exception as e:
            seen[i]["bad"].append(f"{{kind}}: {{type(e).__name__}}: {{e}}")
        calls[i] += 1

def settle():
    # every thread has made a call since: calls straddle each reload
    before = list(calls)
    while any(c <= b for c, b in zip(calls, before)) and all(t.is_alive() for t in threads):
        time.sleep(0.0005)

threads = [threading.Thread(target=worker, args=(i, k)) for i, k in enumerate(kinds)]
for t in threads:
    t.start()
try:
    for r in range(rounds):
        settle()
        if r % 3 == 2:
            custom_op.unload("swapme")
            settle()
        if len(paths) > 1:
            rebuild(paths[(r + 1) % len(paths)])
        custom_op.load_library(live)
    settle()
finally:
    stop.set()
for t in threads:
    t.join()
print(json.dumps([dict(s, ks=sorted(s["ks"])) for s in seen]))
"""


def stress(builds, kinds, route, files, tmp_path, rounds=60):
    paths = [builds[f] for f in files]
    live = str(tmp_path / "libswapme.so")
    code = STRESS.format(paths=paths, kinds=list(kinds), rounds=rounds, route=route, live=live)
    p = run_py(code, route)
    assert p.returncode == 0, f"rc {p.returncode}\n{p.stdout}\n{p.stderr[-4000:]}"
    seen = json.loads(p.stdout.strip().splitlines()[-1])
    for kind, s in zip(kinds, seen):
        assert not s["bad"], s["bad"][:5]
        assert s["ok"] > 0, (kind, s)
    return seen


ROUTES = ["native", "fallback"]


@pytest.mark.parametrize("route", ROUTES)
def test_torch_ops_threads_while_reloading_the_same_file(builds, route, tmp_path):
    if route == "native" and not _native_available():
        pytest.skip("the torch kernel shim is not built (make python)")
    seen = stress(builds, ["torch"] * 4, route, ["a"], tmp_path)
    assert all(s["ks"] == [2.0] for s in seen), seen


@pytest.mark.parametrize("route", ROUTES)
def test_torch_ops_threads_while_reloading_a_rebuilt_kernel(builds, route, tmp_path):
    if route == "native" and not _native_available():
        pytest.skip("the torch kernel shim is not built (make python)")
    seen = stress(builds, ["torch"] * 4, route, ["a", "b"], tmp_path)
    assert {k for s in seen for k in s["ks"]} == {2.0, 3.0}, seen  # both kernels ran


@pytest.mark.parametrize("route", ROUTES)
def test_mixed_threads_while_reloading(builds, route, tmp_path):
    """torch.ops, direct calls and autograd backwards at once."""
    if route == "native" and not _native_available():
        pytest.skip("the torch kernel shim is not built (make python)")
    stress(builds, ["torch", "direct", "autograd", "torch"], route, ["a", "b"], tmp_path)


def _native_available():
    from opcore import _torch_native

    return _torch_native.route_error() is None and _torch_native.available()


@pytest.mark.parametrize("route", ROUTES)
def test_reload_with_a_changed_schema(builds, route, tmp_path):
    """One thread: a changed schema is registered anew (its autograd pairing
    goes), an added op is registered, a removed op raises 'was unloaded';
    loading the old build again brings the old schema back."""
    if route == "native" and not _native_available():
        pytest.skip("the torch kernel shim is not built (make python)")
    live = str(tmp_path / "libswapme.so")
    p = run_py(f"""
        import os, shutil, torch, opcore
        from opcore import custom_op
        import opcore.torch

        def load(src):  # rebuilt in place
            shutil.copyfile(src, {live!r} + ".tmp")
            os.replace({live!r} + ".tmp", {live!r})
            return custom_op.load_library({live!r})

        x = torch.ones(3)
        load({builds['a']!r})
        opcore.torch.register_autograd("swapme::scale", "swapme::scale_backward")
        print(torch.ops.swapme.scale(x).tolist())
        load({builds['changed']!r})
        print(torch.ops.swapme.scale(x, 1).tolist(), torch.ops.swapme.extra(x).tolist())
        try:
            torch.ops.swapme.scale_backward(x)
        except opcore.OpError as e:
            print("removed:", e)
        xg = x.clone().requires_grad_()
        torch.ops.swapme.scale(xg).sum().backward()
        print("grad", xg.grad)  # the pairing went with the old schema: no gradient flows
        load({builds['b']!r})
        print(torch.ops.swapme.scale(x).tolist())
    """, route)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "[2.0, 2.0, 2.0]"
    assert lines[1] == "[6.0, 6.0, 6.0] [0.0, 0.0, 0.0]"
    assert lines[2].startswith("removed:") and UNLOADED in lines[2], lines
    assert lines[3] == "grad None", lines
    assert lines[4] == "[3.0, 3.0, 3.0]", lines
