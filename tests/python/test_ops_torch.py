"""The op language from PyTorch (#10): the examples/ops library (several
results, Tensor[], Tensor?, int[2], in-place lists, a cross-core reduction)
eager, with autograd, under torch.compile (also dynamic=True), torch.export
(a Dim, saved and loaded in a new process) and opcheck; register_autograd's
binding; in-place ops; misuse errors."""
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from torch.library import opcheck  # noqa: E402

import opcore  # noqa: E402
import opcore._torch_native  # noqa: E402
import opcore.torch as ot  # noqa: E402
from opcore import custom_op  # noqa: E402
from conftest import REPO  # noqa: E402

sys.path.insert(0, str(REPO / "examples" / "ops"))
sys.path.insert(0, str(REPO / "examples" / "mlp"))
import nn_ops  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module")
def ops(opcore_build_dir):
    nn_ops.load(build_directory=str(opcore_build_dir / "nn_ops"))
    return torch.ops.nn_ops


def samples():
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    return {
        "layer_norm": ((r(6, 10), [10], r(10), r(10)), {}),
        "layer_norm_nobias": ((r(2, 3, 8), [3, 8]), {"eps": 1e-3}),
        "concat": (([r(2, 3), r(2, 5), r(2, 1)], 1), {}),
        "avg_pool2d": ((r(2, 3, 9, 8), [3, 2], [2, 1], [1, 0]), {}),
        "avg_pool2d_int": ((r(1, 2, 6, 6), 2, 2), {}),
        "linear": ((r(4, 10), r(3, 10), r(3)), {}),
        "linear_nobias": ((r(4, 10), r(3, 10)), {}),
        "global_sum": ((r(1000),), {}),
    }


def reference(name, args, kwargs):
    if name.startswith("layer_norm"):
        x, shape, *wb = args
        return F.layer_norm(x, shape, *wb, **kwargs)
    if name == "concat":
        return torch.cat(*args)
    if name.startswith("avg_pool2d"):
        return F.avg_pool2d(*args)
    if name.startswith("linear"):
        return F.linear(*args)
    return args[0].sum()


def op_of(ops, name):
    return getattr(ops, name.replace("_nobias", "").replace("_int", ""))


@pytest.mark.parametrize("name", list(samples()))
def test_eager_matches_torch(ops, name):
    args, kwargs = samples()[name]
    got = op_of(ops, name)(*args, **kwargs)
    if name.startswith("layer_norm"):
        out, mean, rstd = got
        x, shape = args[0], args[1]
        flat = x.reshape(-1, int(torch.tensor(shape).prod()))
        assert torch.allclose(mean.reshape(-1), flat.mean(1), atol=1e-6)
        assert mean.shape == x.shape[: x.dim() - len(shape)]
        got = out
    assert torch.allclose(got, reference(name, args, kwargs), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", list(samples()))
def test_opcheck(ops, name):
    args, kwargs = samples()[name]
    opcheck(op_of(ops, name).default, args, kwargs)


def test_opcheck_in_place(ops):
    params = [torch.randn(3), torch.randn(2, 2)]
    args = (params, [torch.zeros(3), torch.zeros(2, 2)], [torch.randn(3), torch.randn(2, 2)], 0.1, 0.9)
    opcheck(ops.sgd_momentum_.default, args)


@pytest.mark.parametrize("name", ["layer_norm", "layer_norm_nobias", "avg_pool2d", "linear", "linear_nobias",
                                  "global_sum", "concat"])
def test_autograd_matches_torch(ops, name):
    args, kwargs = samples()[name]

    def grads(fn):
        leaves = [a.clone().requires_grad_() if isinstance(a, torch.Tensor) else
                  [t.clone().requires_grad_() for t in a] if isinstance(a, list) and isinstance(a[0], torch.Tensor)
                  else a for a in args]
        out = fn(*leaves, **kwargs)
        out = out[0] if isinstance(out, tuple) else out
        (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum().backward()
        flat = []
        for a in leaves:
            flat += [a] if isinstance(a, torch.Tensor) else a if isinstance(a, list) and isinstance(a[0], torch.Tensor) else []
        return out.detach(), [t.grad for t in flat]

    got, got_grads = grads(op_of(ops, name))
    want, want_grads = grads(lambda *a, **k: reference(name, a, k))
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-5)
    for g, w in zip(got_grads, want_grads):
        assert torch.allclose(g, w, atol=1e-4, rtol=1e-4)


def test_compile_fullgraph_forward_backward(ops):
    w, b = torch.randn(10), torch.randn(10)
    lw = torch.randn(3, 10)

    def model(x):
        y = ops.layer_norm(x, [10], w, b)[0]
        return ops.global_sum(ops.linear(y, lw))

    def reference_model(x):
        return F.linear(F.layer_norm(x, [10], w, b), lw).sum()

    x1, x2 = torch.randn(6, 10, requires_grad=True), None
    x2 = x1.detach().clone().requires_grad_()
    out = torch.compile(model, fullgraph=True)(x1)
    out.backward()
    ref = reference_model(x2)
    ref.backward()
    assert torch.allclose(out, ref, atol=1e-4)
    assert torch.allclose(x1.grad, x2.grad, atol=1e-4)


def count_graphs(model, sizes, dynamic=True):
    compiled = []

    def backend(gm, example_inputs):
        compiled.append(gm)
        return gm.forward

    torch._dynamo.reset()
    f = torch.compile(model, backend=backend, fullgraph=True, dynamic=dynamic)
    for b in sizes:
        f(torch.randn(b, 32))
    return len(compiled)


def test_dynamic_compile_does_not_recompile(ops, relu_libs):
    """10 batch sizes: no more graphs than the same model with torch.relu."""
    sizes = [3, 5, 8, 13, 17, 21, 30, 33, 40, 64]
    w, b = torch.randn(16, 32), torch.randn(16)
    relu = relu_libs["tcm"].name
    baseline = count_graphs(lambda x: F.linear(torch.relu(x), w, b), sizes)
    shape_preserving = count_graphs(lambda x: F.linear(getattr(torch.ops, relu).relu_forward(x), w, b), sizes)
    sizes_and_constants = count_graphs(
        lambda x: ops.global_sum(ops.linear(ops.layer_norm(x, [32])[0], w, b)), sizes)

    def arithmetic(x):  # avg_pool2d's and concat's sizes go through oc_dim_*
        y = ops.avg_pool2d(x.reshape(x.shape[0], 2, 4, 4), [2, 2], [1, 1])
        return ops.concat([y.reshape(y.shape[0], -1), x], 1)

    with_dims = count_graphs(arithmetic, sizes)
    assert shape_preserving <= baseline
    assert sizes_and_constants <= baseline
    assert with_dims <= baseline
    # and the results are right at another size
    x = torch.randn(11, 32)
    got = torch.compile(arithmetic, fullgraph=True, dynamic=True)(x)
    want = torch.cat([F.avg_pool2d(x.reshape(11, 2, 4, 4), 2, 1).reshape(11, -1), x], 1)
    assert torch.allclose(got, want, atol=1e-6)


EXPORT_SCRIPT = textwrap.dedent("""
    import sys, torch
    sys.path.insert(0, {ops_dir!r})
    import nn_ops
    nn_ops.load(build_directory={build!r})
    ops = torch.ops.nn_ops

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            g = torch.Generator().manual_seed(0)
            self.w = torch.nn.Parameter(torch.randn(16, 32, generator=g))
            self.b = torch.nn.Parameter(torch.randn(16, generator=g))
        def forward(self, x):
            y = ops.layer_norm(x, [32])[0]
            z = ops.avg_pool2d(y.reshape(y.shape[0], 2, 4, 4), [2, 2])
            return ops.concat([ops.linear(y, self.w, self.b), z.reshape(z.shape[0], -1)], 1)

    if sys.argv[1] == "save":
        B = torch.export.Dim("B", min=2, max=4096)
        ep = torch.export.export(M(), (torch.randn(4, 32),), dynamic_shapes={{"x": {{0: B}}}})
        torch.export.save(ep, {pt2!r})
    else:
        ep = torch.export.load({pt2!r})
        for b in (2, 9, 300):
            x = torch.randn(b, 32)
            got = ep.module()(x)
            assert got.shape == (b, 16 + 18), got.shape
            assert torch.allclose(got, M()(x), atol=1e-5)
        print("OK")
""")


def test_export_with_dim_saved_and_loaded_in_a_new_process(ops, opcore_build_dir, tmp_path):
    script = tmp_path / "export.py"
    script.write_text(EXPORT_SCRIPT.format(ops_dir=str(REPO / "examples" / "ops"),
                                           build=str(opcore_build_dir / "nn_ops"), pt2=str(tmp_path / "m.pt2")))
    for step in ("save", "load"):
        p = subprocess.run([sys.executable, str(script), step], capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip().endswith("OK")


def load_sources(tmp_path, name, compute, shape):
    """Build and load library `name` from the C texts of its kernels and shape functions."""
    (tmp_path / "k.c").write_text(compute)
    (tmp_path / "s.c").write_text(shape)
    custom_op.load(name=name, compute_srcs=[str(tmp_path / "k.c")], shape_srcs=[str(tmp_path / "s.c")],
                   build_directory=str(tmp_path))


# ---- register_autograd's binding ----------------------------------------------

SOFTMAX_COMPUTE = r"""
#include <math.h>
#include <opcore/kernel.h>
oc_tensor *softmax_t(const oc_tensor *x, double temperature) {
    oc_tensor *y = oc_dst_tensor(); int64_t n = oc_numel(x); const float *xd = x->data; float *yd = y->data;
    double m = -INFINITY, s = 0;
    for (int64_t i = 0; i < n; i++) m = xd[i] > m ? xd[i] : m;
    for (int64_t i = 0; i < n; i++) s += exp((xd[i] - m) / temperature);
    for (int64_t i = 0; i < n; i++) yd[i] = (float)(exp((xd[i] - m) / temperature) / s);
    return y;
}
oc_tensor *softmax_t_backward(const oc_tensor *grad, const oc_tensor *result, double temperature) {
    oc_tensor *gx = oc_dst_tensor(); int64_t n = oc_numel(grad); const float *g = grad->data, *y = result->data;
    double dot = 0;
    for (int64_t i = 0; i < n; i++) dot += g[i] * y[i];
    for (int64_t i = 0; i < n; i++) ((float *)gx->data)[i] = (float)(y[i] * (g[i] - dot) / temperature);
    return gx;
}
"""
SOFTMAX_SHAPE = r"""
#include <opcore/library.h>
static oc_tensor *same(const oc_tensor *x, double t) { (void)t; return oc_empty_like(x); }
static oc_tensor *same_bwd(const oc_tensor *g, const oc_tensor *r, double t) { (void)r; (void)t; return oc_empty_like(g); }
OC_LIBRARY(softmax_ops, m) {
    oc_def(m, "softmax_t(Tensor x, float temperature=1.0) -> Tensor result", same, "softmax_t");
    oc_def(m, "softmax_t_backward(Tensor grad, Tensor result, float temperature=1.0) -> Tensor", same_bwd,
           "softmax_t_backward");
}
"""


def test_register_autograd_passes_the_forwards_non_tensor_arguments(tmp_path):
    load_sources(tmp_path, "softmax_ops", SOFTMAX_COMPUTE, SOFTMAX_SHAPE)
    ot.register_autograd("softmax_ops::softmax_t", "softmax_ops::softmax_t_backward")
    x = torch.randn(20, requires_grad=True)
    xr = x.detach().clone().requires_grad_()
    w = torch.randn(20)
    (torch.ops.softmax_ops.softmax_t(x, 0.5) * w).sum().backward()
    (torch.softmax(xr / 0.5, 0) * w).sum().backward()
    assert torch.allclose(x.grad, xr.grad, atol=1e-5)  # with the schema default (1.0) it would be off by 2x


def test_register_autograd_checks_gradient_shapes(ops, opcore_build_dir):
    # a backward giving a wrongly shaped gradient is an error naming the input
    torch.library.define("oc_test_grad::ident", "(Tensor x) -> Tensor")
    torch.library.impl("oc_test_grad::ident", "CPU")(lambda x: x.clone())
    torch.library.register_fake("oc_test_grad::ident")(lambda x: torch.empty_like(x))
    ot.register_autograd("oc_test_grad::ident", lambda grad, x: grad.t())
    x = torch.randn(4, 5, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"gradient for input 'x' of torch.float32 \[5, 4\], expected torch.float32 \[4, 5\]"):
        torch.ops.oc_test_grad.ident(x).sum().backward()


def test_register_autograd_refuses_a_backward_missing_a_gradient():
    # forward(x, y) with a backward giving one gradient: y's would be lost
    # (and bound by position, x's might be y's): refused, naming y
    torch.library.define("oc_test_refuse::mul2", "(Tensor x, Tensor y, Tensor? bias=None) -> Tensor")
    torch.library.define("oc_test_refuse::mul2_backward", "(Tensor grad, Tensor x, Tensor y) -> Tensor")
    torch.library.define("oc_test_refuse::mul2_backward_named", "(Tensor grad, Tensor y) -> Tensor grad_x")
    for bwd in ("mul2_backward", "mul2_backward_named"):
        with pytest.raises(ValueError, match=rf"register_autograd\('oc_test_refuse::mul2'\): backward "
                                             rf"'oc_test_refuse::{bwd}' returns 1 gradient\(s\) for the "
                                             r"forward's tensor inputs x, y, bias: no gradient for 'y'"):
            ot.register_autograd("oc_test_refuse::mul2", f"oc_test_refuse::{bwd}")
    # an optional input may go without one; two results cover x and y
    torch.library.define("oc_test_refuse::mul2_backward_both", "(Tensor grad, Tensor x, Tensor y) -> (Tensor, Tensor)")
    ot.register_autograd("oc_test_refuse::mul2", "oc_test_refuse::mul2_backward_both")


def test_register_autograd_refuses_a_name_that_binds_ambiguously():
    # `result` names the forward's second input and its (unnamed) result;
    # `grad` its first input and the incoming gradient
    torch.library.define("oc_test_refuse::pick", "(Tensor grad, Tensor result) -> Tensor")
    torch.library.define("oc_test_refuse::pick_backward_r", "(Tensor grad0, Tensor result) -> (Tensor, Tensor)")
    torch.library.define("oc_test_refuse::pick_backward_g", "(Tensor grad) -> (Tensor, Tensor)")
    for bwd, name, what in (("pick_backward_r", "result", "forward input #2 and forward result #1"),
                            ("pick_backward_g", "grad", "forward input #1 and the incoming gradient of result #1")):
        with pytest.raises(ValueError, match=rf"backward 'oc_test_refuse::{bwd}' argument '{name}' binds "
                                             rf"ambiguously, to {what}: rename"):
            ot.register_autograd("oc_test_refuse::pick", f"oc_test_refuse::{bwd}")


SCALE_COMPUTE = r"""
#include <opcore/kernel.h>
/* y = x * factor; x contiguous first (autograd's gradients may be expanded) */
static oc_tensor *times(const oc_tensor *x, double factor) {
    const float *xd = oc_to_dtype(x, OC_FLOAT32)->data;
    oc_tensor *y = oc_dst_tensor(); float *yd = y->data;
    for (int64_t i = 0, n = oc_numel(x); i < n; i++) yd[i] = (float)(xd[i] * factor);
    return y;
}
oc_tensor *scale(const oc_tensor *x, double factor) { return times(x, factor); }
oc_tensor *scale_backward(const oc_tensor *grad, double factor) { return times(grad, factor); }
"""
SCALE_SHAPE = r"""
#include <opcore/library.h>
static oc_tensor *same(const oc_tensor *x, double f) { (void)f; return oc_empty_like(x); }
OC_LIBRARY(scale_ops, m) {
    oc_def(m, "scale(Tensor x, float factor) -> Tensor", same, "scale");
    oc_def(m, "scale_backward(Tensor grad, float factor) -> Tensor", same, "scale_backward");
}
"""


def test_register_autograd_double_backward_goes_through_the_backward_ops_autograd(tmp_path):
    # With create_graph=True the backward op runs with grad on: its own
    # autograd kernel must see it (the fast path's direct C call would not)
    load_sources(tmp_path, "scale_ops", SCALE_COMPUTE, SCALE_SHAPE)
    ot.register_autograd("scale_ops::scale", "scale_ops::scale_backward")
    # (a callable: bound by name, the op's own `grad` argument would be taken
    # for the forward input of that name)
    ot.register_autograd("scale_ops::scale_backward",
                         lambda gg, grad, factor: torch.ops.scale_ops.scale(gg, factor))
    x = torch.randn(6, requires_grad=True)
    v = torch.randn(6, requires_grad=True)
    y = torch.ops.scale_ops.scale(x, 3.0)
    gx, = torch.autograd.grad(y, x, grad_outputs=v, create_graph=True)
    assert torch.allclose(gx, v * 3.0)
    assert gx.requires_grad
    gx.sum().backward()
    assert torch.allclose(v.grad, torch.full((6,), 3.0))
    # and the plain backward (grad off inside it) still gives the same first derivative
    x2 = x.detach().requires_grad_()
    torch.ops.scale_ops.scale(x2, 3.0).sum().backward()
    assert torch.equal(x2.grad, torch.full((6,), 3.0))


# ---- in place -------------------------------------------------------------------

def test_fused_sgd_matches_torch_optim_sgd_step_for_step(ops):
    import loop
    from model import MLP
    import data

    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(32, 784, generator=g), torch.randint(0, 10, (32,), generator=g)) for _ in range(30)]
    results = {}
    for optimizer in ("torch", "opcore"):
        torch.manual_seed(0)
        model = MLP()
        r = loop.train(model, batches, epochs=1, record_losses=True, progress=False, momentum=0.9,
                       optimizer=optimizer)
        results[optimizer] = (torch.stack(r["losses"]), [p.detach().clone() for p in model.parameters()])
    assert torch.equal(results["torch"][0], results["opcore"][0])
    for a, b in zip(results["torch"][1], results["opcore"][1]):
        assert torch.equal(a, b)
    del data


def test_in_place_under_compile_and_export(ops):
    def step(params, grads):
        bufs = [torch.zeros_like(p) for p in params]
        ops.sgd_momentum_(params, bufs, grads, 0.1, 0.9)
        return params[0] * 1, bufs[1] * 1

    params = [torch.randn(5), torch.randn(3, 2)]
    grads = [torch.randn(5), torch.randn(3, 2)]
    eager_params = [p.clone() for p in params]
    want = step(eager_params, grads)
    got = torch.compile(step, fullgraph=True)([p.clone() for p in params], grads)
    assert all(torch.equal(a, b) for a, b in zip(got, want))

    class Step(torch.nn.Module):
        def forward(self, p, g):
            p = p.clone()
            buf = torch.zeros_like(p)
            ops.sgd_momentum_([p], [buf], [g], 0.5)
            return p

    ep = torch.export.export(Step(), (params[0], grads[0]))
    assert torch.equal(ep.module()(params[0], grads[0]), params[0] - 0.5 * grads[0])


ALIAS_COMPUTE = r"""
#include <opcore/kernel.h>
void scale_(oc_tensor *x, double s) { float *d = x->data; for (int64_t i = 0; i < oc_numel(x); i++) d[i] *= (float)s; }
void scale_count_(oc_tensor *x, double s) { scale_(x, s); *(int64_t *)oc_dst_tensor_at(1)->data = oc_numel(x); }
"""
ALIAS_SHAPE = r"""
#include <opcore/library.h>
static void count_shape(oc_tensor *x, double s) { (void)x; (void)s; oc_set_result(1, oc_empty(OC_INT64, 0, NULL)); }
OC_LIBRARY(alias_ops, m) {
    oc_def(m, "scale_(Tensor(a!) x, float s) -> Tensor(a!)", NULL, "scale_");
    oc_def(m, "scale_count_(Tensor(a!) x, float s) -> (Tensor(a!), Tensor n)", count_shape, "scale_count_");
}
"""


@pytest.fixture(scope="module")
def alias_ops(opcore_build_dir):
    d = opcore_build_dir / "alias_ops"
    d.mkdir(exist_ok=True)
    (d / "k.c").write_text(ALIAS_COMPUTE)
    (d / "s.c").write_text(ALIAS_SHAPE)
    custom_op.load(name="alias_ops", compute_srcs=[str(d / "k.c")], shape_srcs=[str(d / "s.c")], build_directory=str(d))
    return torch.ops.alias_ops


def test_op_returning_its_mutated_argument(alias_ops):
    x = torch.ones(4)
    y = alias_ops.scale_(x, 3.0)
    assert y is x and torch.equal(x, torch.full((4,), 3.0))
    y, n = alias_ops.scale_count_(x, 2.0)
    assert y is x and n.item() == 4 and x[0].item() == 6.0

    def f(x):
        y = x + 1
        z = alias_ops.scale_(y, 2.0)
        w, n = alias_ops.scale_count_(z, 0.5)
        return w * 3 + n

    x = torch.randn(6)
    assert torch.allclose(torch.compile(f, fullgraph=True)(x), f(x))
    opcheck(alias_ops.scale_.default, (torch.randn(3), 2.0))


def test_in_place_on_a_tensor_that_needs_grad_runs_as_a_cpp_op_does(ops, alias_ops):
    # torch's autograd fallback runs a C++ op of the same schema on tensors
    # that require grad (leaves too); so do opcore's in-place ops, bumping
    # the version counters of what they write, Tensor(a!)[] items included
    # (on both routes: the fallback's Python kernel is a direct call, which bumps them too)
    bumped = 1
    w = torch.randn(3, requires_grad=True)
    p = w * 1
    ops.sgd_momentum_([p], [torch.zeros(3)], [torch.ones(3)], 0.1)
    assert p._version == bumped and torch.allclose(p, w - 0.1)
    q = w * 1
    assert alias_ops.scale_(q, 2.0) is q and torch.allclose(q, w * 2) and q._version == bumped
    with torch.no_grad():  # optimizer steps run under no_grad
        ops.sgd_momentum_([w], [torch.zeros(3)], [torch.ones(3)], 0.1)
    assert w._version == bumped


# ---- misuse -----------------------------------------------------------------------

def test_misuse_errors_name_the_op_and_argument(ops):
    x = torch.randn(1, 1, 4, 4)
    with pytest.raises(opcore.OpArgumentError, match=r"op 'nn_ops::avg_pool2d': argument 2 'kernel_size': "
                                                     r"expected 2 ints \(int\[2\]\), got a list of 3"):
        ops.avg_pool2d(x, [2, 2, 2])
    with pytest.raises(opcore.OpArgumentError, match=r"'nn_ops::linear': argument 1 'x': expected Tensor, got None"):
        opcore.custom_op.loaded_libraries()["nn_ops"].linear(None, torch.randn(3, 4))
    with pytest.raises(opcore.OpArgumentError, match=r"'nn_ops::concat': argument 2 'dim': 18446744073709551616 "
                                                     r"does not fit in a 64-bit int"):
        opcore.custom_op.loaded_libraries()["nn_ops"].concat([x], 2 ** 64)
    with pytest.raises(opcore.OpError, match=r"normalized_shape\[0\] is 5 but x's dim 3 is 4"):
        ops.layer_norm(x, [5])


MISUSE_COMPUTE = r"""
#include <opcore/kernel.h>
void two(const oc_tensor *x) { (void)x; }
void three(const oc_tensor *x) { (void)x; oc_dst_tensor_at(3); }
oc_tensor *flat(const oc_tensor *x) { (void)x; return oc_dst_tensor(); }
"""
MISUSE_SHAPE = r"""
#include <opcore/library.h>
static void one_of_two(const oc_tensor *x) { oc_set_result(0, oc_empty_like(x)); }
static void both(const oc_tensor *x) { oc_set_result(0, oc_empty_like(x)); oc_set_result(1, oc_empty_like(x)); }
static oc_tensor *flat_shape(const oc_tensor *x) { return oc_empty(x->dtype, OC_SHAPE(x->sizes[0] * 2 + x->sizes[1])); }
OC_LIBRARY(misuse_ops, m) {
    oc_def(m, "two(Tensor x) -> (Tensor a, Tensor b)", one_of_two, "two");
    oc_def(m, "three(Tensor x) -> (Tensor a, Tensor b)", both, "three");
    oc_def(m, "flat(Tensor x) -> Tensor", flat_shape, "flat");
}
"""


def test_shape_and_kernel_misuse(tmp_path):
    load_sources(tmp_path, "misuse_ops", MISUSE_COMPUTE, MISUSE_SHAPE)
    with pytest.raises(opcore.OpError, match="shape function 'one_of_two' did not describe result 1 'b'"):
        torch.ops.misuse_ops.two(torch.randn(3))
    with pytest.raises(opcore.OpError, match=r"kernel 'three' on core 0: oc_dst_tensor_at\(3\): the op has 2 results"):
        torch.ops.misuse_ops.three(torch.randn(3))
    # eager: plain arithmetic is fine; under a dynamic-shape tracer it is a clear error
    assert torch.ops.misuse_ops.flat(torch.randn(3, 4)).shape == (10,)
    torch._dynamo.reset()
    with pytest.raises(Exception, match="C arithmetic opcore cannot follow; compute it with the oc_dim_"):
        torch.compile(lambda x: torch.ops.misuse_ops.flat(x), fullgraph=True, dynamic=True)(torch.randn(5, 4))


def test_cross_core_reduction_at_every_core_count(ops, opcore_build_dir):
    """global_sum (oc_all_sum) and layer_norm at OC_NUM_CORES = 1 .. 2 x CPUs:
    the same results in every process."""
    script = textwrap.dedent(f"""
        import sys, torch
        sys.path.insert(0, {str(REPO / "examples" / "ops")!r})
        import nn_ops
        nn_ops.load(build_directory={str(opcore_build_dir / "nn_ops")!r})
        g = torch.Generator().manual_seed(0)
        x = torch.randn(100003, generator=g)
        s = torch.ops.nn_ops.global_sum(x)
        out = torch.ops.nn_ops.layer_norm(x[:98000].reshape(-1, 7), [7])[0]
        print(repr(s.item()), float(out.abs().sum()))
    """)
    results = set()
    for cores in range(1, 2 * (os.cpu_count() or 1) + 1):
        p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                           env={**os.environ, "OC_NUM_CORES": str(cores)})
        assert p.returncode == 0, p.stderr[-2000:]
        total, ln = p.stdout.split()
        assert abs(float(total) - float(torch.randn(100003, generator=torch.Generator().manual_seed(0)).double().sum())) < 1e-2
        results.add(ln)
    assert len(results) == 1  # layer norm rows do not depend on the split


def test_layer_norm_model_trains_like_torch(ops):
    """examples/ops/torch_demo.py: linear + layer_norm + linear with the
    fused SGD, against the same model in torch ops with torch.optim.SGD."""
    import torch_demo

    losses, acc = torch_demo.main(["--steps", "60", "--every", "1000"])
    first, last = losses[0], losses[-1]
    assert abs(first[0] - first[1]) < 1e-5
    assert last[0] < first[0] - 0.5  # it learns
    for mine, ref in losses:
        assert abs(mine - ref) <= 2e-3 * max(1.0, abs(ref))
    assert abs(acc[0] - acc[1]) <= 0.01 and acc[0] > 0.5
