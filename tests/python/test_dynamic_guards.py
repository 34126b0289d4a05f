"""Dynamic shapes never silently wrong (issue #20 item 5, issue #24 item 7).

- An equality check between sizes in a shape function (oc_same_shape,
  OC_CHECK(a->sizes[0] == b->sizes[0])) is recorded as a relation torch
  understands (torch._check(s0 == s1)) instead of specializing: torch.export
  with one Dim shared by both inputs works, saved and reloaded in a new
  process; torch.compile(dynamic=True) compiles once for every size.
- A check that cannot be expressed symbolically (n % 4 == 0) guards under
  torch.compile (right answer at every size) and fails torch.export with a
  Dim with a message that says so and what to do.
- A result size that depends on a size through a C branch or a plain C min
  is an error naming the op and the helper to use (oc_dim_if_gt,
  oc_dim_min), at every size; written with the helpers, eager, compiled,
  exported and jax.export results agree at every size 1..9.
"""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import opcore
from conftest import load_texts

torch = pytest.importorskip("torch")

COMPUTE = r"""
#include <opcore/kernel.h>

oc_tensor *add_same(const oc_tensor *a, const oc_tensor *b)
{
    oc_tensor *o = oc_dst_tensor();
    for (int64_t i = 0; i < oc_numel(a); i++)
        ((float *)o->data)[i] = *(const float *)oc_flat_ptr(a, i) + *(const float *)oc_flat_ptr(b, i);
    return o;
}

/* [n, p] and [n, q] side by side: [n, p + q] */
oc_tensor *cat_cols(const oc_tensor *a, const oc_tensor *b)
{
    oc_tensor *o = oc_dst_tensor();
    float *d = o->data;
    int64_t p = a->sizes[1], q = b->sizes[1];
    for (int64_t r = 0; r < a->sizes[0]; r++) {
        for (int64_t c = 0; c < p; c++) d[r * (p + q) + c] = *(const float *)oc_flat_ptr(a, r * p + c);
        for (int64_t c = 0; c < q; c++) d[r * (p + q) + p + c] = *(const float *)oc_flat_ptr(b, r * q + c);
    }
    return o;
}

/* every element: x's size, so values depend on the size too */
oc_tensor *fill_n(const oc_tensor *x)
{
    oc_tensor *o = oc_dst_tensor();
    for (int64_t i = 0; i < oc_numel(o); i++) ((float *)o->data)[i] = (float)x->sizes[0];
    return o;
}
"""

SHAPE = r"""
#include <opcore/check.h>
#include <opcore/dim.h>
#include <opcore/library.h>

static oc_tensor *add_same_shape(const oc_tensor *a, const oc_tensor *b)
{
    OC_CHECK(oc_same_shape(a, b), "a and b must have the same shape");
    return oc_empty_like(a);
}

static oc_tensor *cat_cols_shape(const oc_tensor *a, const oc_tensor *b)
{
    OC_CHECK(a->ndim == 2 && b->ndim == 2 && a->sizes[0] == b->sizes[0], "a and b need the same rows");
    return oc_empty(OC_FLOAT32, OC_SHAPE(a->sizes[0], oc_dim_add(a->sizes[1], b->sizes[1])));
}

/* a check no relation between sizes expresses */
static oc_tensor *mod4_shape(const oc_tensor *x)
{
    OC_CHECK(x->sizes[0] % 4 == 0, "x's size must be a multiple of 4");
    return oc_empty_like(x);
}

/* the hostile cases: a C branch and a plain C min on a size */
static oc_tensor *branch_shape(const oc_tensor *x)
{
    int64_t n = x->sizes[0];
    return oc_empty(OC_FLOAT32, OC_SHAPE(n > 4 ? 4 : 3));
}

static oc_tensor *cmin_shape(const oc_tensor *x)
{
    int64_t n = x->sizes[0];
    return oc_empty(OC_FLOAT32, OC_SHAPE(n < 6 ? n : 6));
}

/* ... and the same written with the helpers */
static oc_tensor *branch_dim_shape(const oc_tensor *x)
{
    return oc_empty(OC_FLOAT32, OC_SHAPE(oc_dim_if_gt(x->sizes[0], 4, 4, 3)));
}

static oc_tensor *min_dim_shape(const oc_tensor *x)
{
    return oc_empty(OC_FLOAT32, OC_SHAPE(oc_dim_min(x->sizes[0], 6)));
}

/* equal to n at every probe size: still traced as the min it is */
static oc_tensor *far_min_shape(const oc_tensor *x)
{
    return oc_empty(OC_FLOAT32, OC_SHAPE(oc_dim_min(x->sizes[0], 30000)));
}

OC_LIBRARY(dyn_guard, m)
{
    oc_def(m, "add_same(Tensor a, Tensor b) -> Tensor", add_same_shape, "add_same");
    oc_def(m, "cat_cols(Tensor a, Tensor b) -> Tensor", cat_cols_shape, "cat_cols");
    oc_def(m, "mod4(Tensor x) -> Tensor", mod4_shape, "fill_n");
    oc_def(m, "branch(Tensor x) -> Tensor", branch_shape, "fill_n");
    oc_def(m, "cmin(Tensor x) -> Tensor", cmin_shape, "fill_n");
    oc_def(m, "branch_dim(Tensor x) -> Tensor", branch_dim_shape, "fill_n");
    oc_def(m, "min_dim(Tensor x) -> Tensor", min_dim_shape, "fill_n");
    oc_def(m, "far_min(Tensor x) -> Tensor", far_min_shape, "fill_n");
}
"""

SIZES = range(1, 10)
CASE_TIMEOUT = 240


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return load_texts(tmp_path_factory.mktemp("dyn_guard"), "dyn_guard", COMPUTE, SHAPE)


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _op(name):
    return getattr(torch.ops.dyn_guard, name)


def _counting_backend():
    """A torch.compile backend that counts the graphs it compiles."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward
    return backend, graphs


class AddSame(torch.nn.Module):
    def forward(self, a, b):
        return torch.ops.dyn_guard.add_same(a, b)


def _export_shared(lib):
    n = torch.export.Dim("n")
    return torch.export.export(AddSame(), (torch.randn(4), torch.randn(4)),
                               dynamic_shapes={"a": {0: n}, "b": {0: n}})


# ---- #20.5: an equality check is a relation, not a specialization ----------------------


def test_export_with_one_dim_shared_by_two_inputs_of_an_equality_check(lib):
    ep = _export_shared(lib)
    for n in range(2, 10):
        a, b = torch.randn(n), torch.randn(n)
        assert torch.equal(ep.module()(a, b), a + b)


def test_exported_equality_check_saved_and_run_in_a_new_process(lib, tmp_path):
    path = tmp_path / "add_same.pt2"
    torch.export.save(_export_shared(lib), str(path))
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import torch
        from opcore import custom_op
        custom_op.load_library({lib.path!r})
        ep = torch.export.load({str(path)!r})
        for n in (2, 3, 7, 100):
            a, b = torch.randn(n), torch.randn(n)
            assert torch.equal(ep.module()(a, b), a + b), n
        try:
            ep.module()(torch.randn(3), torch.randn(5))
        except Exception as e:
            print("REFUSED", type(e).__name__)
        print("RAN")
    """)], capture_output=True, text=True, timeout=CASE_TIMEOUT)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "RAN" in p.stdout and "REFUSED" in p.stdout, p.stdout + p.stderr[-3000:]


def test_compile_dynamic_with_distinct_symbols_records_the_equality_once(lib, monkeypatch):
    # without duck shaping every input size is its own symbol: the equality
    # a.size(0) == b.size(0) must come from the shape function's check
    monkeypatch.setattr(torch.fx.experimental._config, "use_duck_shape", False)
    backend, graphs = _counting_backend()
    f = torch.compile(lambda a, b: _op("cat_cols")(a, b) * 2, backend=backend, dynamic=True, fullgraph=True)
    for n in range(2, 10):
        a, b = torch.randn(n, 3), torch.randn(n, 5)
        assert torch.equal(f(a, b), torch.cat([a, b], 1) * 2)
    assert len(graphs) == 1


def test_compiled_equality_check_still_refuses_mismatched_sizes(lib):
    f = torch.compile(lambda a, b: _op("add_same")(a, b), dynamic=True, fullgraph=True)
    assert torch.equal(f(torch.ones(3), torch.ones(3)), torch.full((3,), 2.0))
    with pytest.raises(Exception, match="a and b must have the same shape"):
        f(torch.ones(3), torch.ones(5))


def test_check_that_is_no_relation_fails_export_saying_what_to_do(lib):
    class Mod4(torch.nn.Module):
        def forward(self, x):
            return torch.ops.dyn_guard.mod4(x)

    with pytest.raises(opcore.OpError) as ei:
        torch.export.export(Mod4(), (torch.randn(8),), dynamic_shapes={"x": {0: torch.export.Dim("n")}})
    msg = str(ei.value)
    for want in ("op 'dyn_guard::mod4'", "x.size(0)", "cannot be expressed symbolically", "multiple of 4",
                 "Dim.STATIC"):
        assert want in msg, (want, msg)


def test_check_that_is_no_relation_fails_a_mark_dynamic_compile_saying_what_to_do(lib):
    x = torch.randn(8)
    torch._dynamo.mark_dynamic(x, 0)
    with pytest.raises(Exception) as ei:
        torch.compile(lambda x: _op("mod4")(x), fullgraph=True)(x)
    for want in ("op 'dyn_guard::mod4'", "cannot be expressed symbolically", "mark_dynamic"):
        assert want in str(ei.value), (want, str(ei.value))


def test_check_that_is_no_relation_guards_under_compile(lib):
    f = torch.compile(lambda x: _op("mod4")(x), dynamic=True, fullgraph=True)
    for n in (4, 8, 12, 4):
        assert torch.equal(f(torch.randn(n)), torch.full((n,), float(n)))
    with pytest.raises(Exception, match="multiple of 4"):
        f(torch.randn(6))


# ---- #24.7: a branch or a plain C min on a size: an error, or the helpers -------------


@pytest.mark.parametrize("name, helper", [("branch", "oc_dim_if_gt"), ("cmin", "oc_dim_min")])
@pytest.mark.parametrize("n", SIZES[1:])  # torch specializes size 1 itself
def test_untraceable_size_is_an_error_naming_the_op_under_compile(lib, name, helper, n):
    torch._dynamo.reset()
    f = torch.compile(lambda x: _op(name)(x), dynamic=True, fullgraph=True)
    with pytest.raises(Exception) as ei:
        f(torch.randn(n))
    msg = str(ei.value)
    for want in (f"dyn_guard::{name}", "C arithmetic opcore cannot follow", helper):
        assert want in msg, (want, msg)


@pytest.mark.parametrize("name, helper", [("branch", "oc_dim_if_gt"), ("cmin", "oc_dim_min")])
def test_untraceable_size_is_an_error_naming_the_op_under_export(lib, name, helper):
    class M(torch.nn.Module):
        def forward(self, x):
            return _op(name)(x)

    for n in (3, 7):
        with pytest.raises(Exception) as ei:
            torch.export.export(M(), (torch.randn(n),), dynamic_shapes={"x": {0: torch.export.Dim("n")}})
        assert f"dyn_guard::{name}" in str(ei.value) and helper in str(ei.value)


def _want(name, n):
    size = {"branch_dim": 4 if n > 4 else 3, "min_dim": min(n, 6), "branch": 4 if n > 4 else 3,
            "cmin": min(n, 6)}[name]
    return torch.full((size,), float(n))


@pytest.mark.parametrize("name", ["branch", "cmin", "branch_dim", "min_dim"])
def test_eager_answers_at_every_size(lib, name):
    for n in SIZES:
        assert torch.equal(_op(name)(torch.randn(n)), _want(name, n))


@pytest.mark.parametrize("name", ["branch_dim", "min_dim"])
@pytest.mark.parametrize("first", [3, 7])
def test_helpers_compiled_equal_eager_at_every_size(lib, name, first):
    backend, graphs = _counting_backend()
    f = torch.compile(lambda x: _op(name)(x), backend=backend, dynamic=True, fullgraph=True)
    for n in [first, *SIZES]:
        x = torch.randn(n)
        assert torch.equal(f(x), _op(name)(x)), n
        assert torch.equal(f(x), _want(name, n)), n
    assert len(graphs) <= 2  # one symbolic graph (and size 1, which torch specializes)


@pytest.mark.parametrize("name", ["branch_dim", "min_dim"])
@pytest.mark.parametrize("first", [3, 7])
def test_helpers_exported_equal_eager_at_every_size(lib, name, first):
    class M(torch.nn.Module):
        def forward(self, x):
            return _op(name)(x)

    ep = torch.export.export(M(), (torch.randn(first),), dynamic_shapes={"x": {0: torch.export.Dim("n")}})
    for n in SIZES[1:]:
        assert torch.equal(ep.module()(torch.randn(n)), _want(name, n)), n


def test_min_with_a_bound_beyond_the_probes_stays_a_min(lib):
    backend, graphs = _counting_backend()
    f = torch.compile(lambda x: _op("far_min")(x), backend=backend, dynamic=True, fullgraph=True)
    for n in (7, 40000, 29999, 30001):
        assert f(torch.randn(n)).shape == (min(n, 30000),), n
    assert len(graphs) == 1


@pytest.mark.parametrize("name", ["branch_dim", "min_dim"])
def test_helpers_under_jax_export_and_jit_equal_eager_at_every_size(lib, name):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    from opcore import jax as ocjax

    op = ocjax.op(f"dyn_guard::{name}")
    b, = jax.export.symbolic_shape("b")
    exp = ocjax.export(op)(jax.ShapeDtypeStruct((b,), jnp.float32))
    for n in SIZES:
        x = jnp.ones(n)
        want = _want(name, n).numpy()
        np.testing.assert_array_equal(np.asarray(op(x)), want)
        np.testing.assert_array_equal(np.asarray(jax.jit(op)(x)), want)
        np.testing.assert_array_equal(np.asarray(exp.call(x)), want)


@pytest.mark.parametrize("name, helper", [("branch", "oc_dim_if_gt"), ("cmin", "oc_dim_min")])
def test_untraceable_size_is_an_error_naming_the_op_under_jax_export(lib, name, helper):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    from opcore import jax as ocjax

    b, = jax.export.symbolic_shape("b")
    with pytest.raises(opcore.OpError) as ei:
        ocjax.export(ocjax.op(f"dyn_guard::{name}"))(jax.ShapeDtypeStruct((b,), jnp.float32))
    assert f"dyn_guard::{name}" in str(ei.value) and helper in str(ei.value)
