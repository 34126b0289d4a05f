"""The notebook edit loop (#12): edit a kernel, load again, and the new
code runs in the same process -- in direct calls, torch.ops, compiled
graphs and opcore.jax; unload() removes a library; the C registry keeps
old op pointers valid."""
import pytest

torch = pytest.importorskip("torch")

import numpy as np  # noqa: E402

import opcore  # noqa: E402
from opcore import custom_op  # noqa: E402

SHAPE = r"""
#include <opcore/library.h>
static oc_tensor *same(const oc_tensor *x) { return oc_empty_like(x); }
OC_LIBRARY(reload_ops, m) { oc_def(m, "bump(Tensor x) -> Tensor", same, "bump"); }
"""
KERNEL = r"""
#include <opcore/kernel.h>
oc_tensor *bump(const oc_tensor *x) {
    oc_tensor *y = oc_dst_tensor(); const float *a = x->data; float *b = y->data;
    for (int64_t i = 0; i < oc_numel(x); i++) b[i] = a[i] + %d;
    return y;
}
"""


def load(tmp_path, k):
    (tmp_path / "k.c").write_text(KERNEL % k)
    (tmp_path / "s.c").write_text(SHAPE)
    return custom_op.load(name="reload_ops", compute_srcs=[str(tmp_path / "k.c")],
                          shape_srcs=[str(tmp_path / "s.c")], build_directory=str(tmp_path))


def test_edit_rebuild_reload_unload(tmp_path):
    x = torch.zeros(3)
    lib1 = load(tmp_path, 1)
    compiled = torch.compile(lambda t: torch.ops.reload_ops.bump(t) * 2, fullgraph=True)
    assert torch.equal(torch.ops.reload_ops.bump(x), x + 1)
    assert torch.equal(compiled(x), (x + 1) * 2)

    lib2 = load(tmp_path, 5)  # the edited kernel
    assert not lib2.cached and lib2 is not lib1
    assert torch.equal(torch.ops.reload_ops.bump(x), x + 5)
    assert torch.equal(lib2.bump(x), x + 5)
    assert torch.equal(compiled(x), (x + 5) * 2)  # compiled graphs re-trace
    assert torch.equal(lib1.bump(x), x + 1)  # an old Op object still runs its own code safely
    assert load(tmp_path, 5).cached  # unchanged: no rebuild, same library

    custom_op.unload("reload_ops")
    assert "reload_ops" not in custom_op.loaded_libraries()
    with pytest.raises(opcore.OpError, match="library 'reload_ops' was unloaded"):
        torch.ops.reload_ops.bump(x)  # torch keeps the name until it is loaded again
    with pytest.raises(KeyError, match="no op library 'reload_ops' is loaded"):
        custom_op.unload("reload_ops")

    lib3 = load(tmp_path, 5)  # loaded again after unload: the current code
    assert torch.equal(torch.ops.reload_ops.bump(x), x + 5)
    lib4 = load(tmp_path, 7)
    assert np.array_equal(lib4.bump(np.zeros(2, np.float32)), np.full(2, 7, np.float32))
    assert torch.equal(torch.ops.reload_ops.bump(x), x + 7)
    del lib3
    custom_op.unload("reload_ops")


def test_jax_sees_the_reloaded_kernel(tmp_path):
    jax = pytest.importorskip("jax")
    import opcore.jax

    load(tmp_path, 2)
    f = jax.jit(lambda t: opcore.jax.op("reload_ops::bump")(t))
    assert np.array_equal(np.asarray(f(np.zeros(2, np.float32))), [2, 2])
    load(tmp_path, 9)
    g = jax.jit(lambda t: opcore.jax.op("reload_ops::bump")(t) + 0)  # a new trace
    assert np.array_equal(np.asarray(g(np.zeros(2, np.float32))), [9, 9])
    # the compiled program calls the op by name: it runs the new kernel too
    assert np.array_equal(np.asarray(f(np.zeros(2, np.float32))), [9, 9])
    custom_op.unload("reload_ops")
