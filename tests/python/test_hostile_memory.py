"""What a hostile user tries against the call path's memory and devices
(issue 24, items 1, 3 and 4): written tensors that overlap an input or
themselves (expand, as_strided), in-place ops on immutable arrays (JAX, a
read-only NumPy array, a read-only memmap), tensors on mixed devices.

One behaviour per test, each in its own Python process with a timeout (a
crash or a hang fails the test, never the run). The library is built once
here; each child loads it from the build cache. The C host API's cases are
tests/c/test_layout.c.
"""
import os
import subprocess
import sys
import textwrap

import pytest

from opcore import custom_op

CASE_TIMEOUT = 240  # seconds for one child

KERNELS = r"""
#include <opcore/kernel.h>

/* every kernel reads and writes ->data as dense float32 */
void add_(oc_tensor *x, const oc_tensor *y)
{
    float *d = x->data;
    const float *s = y->data;
    int64_t lo, hi;
    oc_core_range(oc_numel(x), 1, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) d[i] += s[i];
}

void add_mc_(oc_tensor *x, const oc_tensor *y) { add_(x, y); }

void rev_into(const oc_tensor *x, oc_tensor *out)
{
    const float *s = x->data;
    float *d = out->data;
    int64_t n = oc_numel(x);
    for (int64_t i = 0; i < n; i++) d[i] = s[n - 1 - i];
}

oc_tensor *add(const oc_tensor *x, const oc_tensor *y)
{
    float *d = oc_dst_tensor()->data;
    const float *a = x->data, *b = y->data;
    for (int64_t i = 0; i < oc_numel(x); i++) d[i] = a[i] + b[i];
    return oc_dst_tensor();
}

oc_tensor *total(oc_tensor_list xs)
{
    float acc = 0;
    for (int64_t k = 0; k < xs.count; k++)
        for (int64_t i = 0; i < oc_numel(&xs.items[k]); i++) acc += ((const float *)xs.items[k].data)[i];
    *(float *)oc_dst_tensor()->data = acc;
    return oc_dst_tensor();
}
"""

SHAPES = r"""
#include <opcore/library.h>

static oc_tensor *same(const oc_tensor *x, const oc_tensor *y) { (void)y; return oc_empty_like(x); }
static oc_tensor *scalar(oc_tensor_list xs) { (void)xs; return oc_empty(OC_FLOAT32, 0, NULL); }

OC_LIBRARY(hmem, m)
{
    oc_def(m, "add_(Tensor(a!) x, Tensor y) -> ()", NULL, "add_");
    oc_def(m, "add_mc_(Tensor(a!) x, Tensor y) -> ()", NULL, "add_mc_", .multicore = true);
    oc_def(m, "rev_into(Tensor x, *, Tensor(a!) out) -> ()", NULL, "rev_into");
    oc_def(m, "add(Tensor x, Tensor y) -> Tensor", same, "add");
    oc_def(m, "total(Tensor[] xs) -> Tensor", scalar, "total");
}
"""

OVERLAP = "some elements of the input tensor 'x' (argument 1) and the written-to tensor 'out' (argument 2) " \
          "refer to a single memory location"
INTERNAL = "more than one element of the written-to tensor 'x' (argument 1) refers to a single memory location"
READ_ONLY = "argument 1 'x': is written in place (Tensor(a!)) but the tensor given is read-only"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile_memory")
    (d / "kernels.c").write_text(KERNELS)
    (d / "shape.c").write_text(SHAPES)
    kw = dict(compute_srcs=[str(d / "kernels.c")], shape_srcs=[str(d / "shape.c")], build_directory=str(d / "build"))
    custom_op.build("hmem", kw["compute_srcs"], kw["shape_srcs"], build_directory=kw["build_directory"])
    return kw, d


def case(built, body, env=None):
    """Run `body` in a fresh Python that has loaded the library as `lib`
    (and imported numpy as np, torch, opcore.torch); it must print OK."""
    kw, d = built
    prelude = f"""
        import numpy as np, torch
        import opcore, opcore.torch
        from opcore import custom_op
        lib = custom_op.load(name="hmem", **{kw!r})

        def refused(fn, *needles):
            try:
                fn()
            except Exception as e:
                msg = str(e)
                missing = [n for n in needles if n not in msg]
                assert not missing, f"message lacks {{missing}}: {{msg}}"
                return msg
            raise AssertionError("not refused")
    """
    code = textwrap.dedent(prelude) + textwrap.dedent(body) + "\nprint('OK')\n"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=CASE_TIMEOUT,
                       cwd=d, env=dict(os.environ, **(env or {})))
    assert p.returncode == 0 and "OK" in p.stdout, f"exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"


# ---- item 1: overlap ---------------------------------------------------------------


def test_torch_out_is_the_input_computed_as_if_copied(built):
    case(built, """
        x = torch.arange(6.0)
        torch.ops.hmem.rev_into(x, out=x)
        assert x.tolist() == [5, 4, 3, 2, 1, 0], x
    """)


def test_torch_out_partly_overlapping_the_input_refused(built):
    case(built, """
        x = torch.arange(6.0)
        refused(lambda: torch.ops.hmem.rev_into(x[:4], out=x[2:]), "hmem::rev_into", "unsupported operation",
                %r)
        assert x.tolist() == [0, 1, 2, 3, 4, 5]
    """ % OVERLAP)


def test_torch_python_kernel_partial_overlap_refused(built):
    case(built, """
        x = torch.arange(6.0)
        refused(lambda: torch.ops.hmem.rev_into(x[:4], out=x[2:]), "hmem::rev_into", %r)
        assert x.tolist() == [0, 1, 2, 3, 4, 5]
    """ % OVERLAP, env={"OPCORE_TORCH_NATIVE": "0"})


def test_torch_expanded_in_place_target_refused(built):
    case(built, """
        x = torch.ones(1)
        refused(lambda: torch.ops.hmem.add_(x.expand(3), torch.ones(3)), "hmem::add_", %r, "clone()")
        assert x.tolist() == [1.0]
    """ % INTERNAL)


def test_torch_as_strided_in_place_target_refused(built):
    case(built, """
        x = torch.zeros(5)
        refused(lambda: torch.ops.hmem.add_(x.as_strided((3, 3), (1, 1)), torch.ones(3, 3)), "hmem::add_",
                %r)
        assert x.tolist() == [0.0] * 5
    """ % INTERNAL)


def test_torch_multicore_expanded_in_place_target_refused(built):
    case(built, """
        x = torch.ones(1)
        refused(lambda: torch.ops.hmem.add_mc_(x.expand(64), torch.ones(64)), "hmem::add_mc_", %r)
        assert x.tolist() == [1.0]
    """ % INTERNAL)


def test_torch_in_place_on_a_strided_view_is_written_back(built):
    case(built, """
        x = torch.zeros(8)
        torch.ops.hmem.add_(x[::2], torch.arange(4.0))
        assert x.tolist() == [0, 0, 1, 0, 2, 0, 3, 0], x
    """)


def test_torch_compile_out_is_the_input(built):
    case(built, """
        @torch.compile(backend="eager", fullgraph=True)
        def f(x):
            torch.ops.hmem.rev_into(x, out=x)
            return x + 0
        assert f(torch.arange(6.0)).tolist() == [5, 4, 3, 2, 1, 0]
    """)


def test_direct_call_partial_overlap_refused(built):
    case(built, """
        x = torch.arange(6.0)
        refused(lambda: lib.rev_into(x[:4], out=x[2:]), "hmem::rev_into", %r)
    """ % OVERLAP)


def test_numpy_out_is_the_input_computed_as_if_copied(built):
    case(built, """
        x = np.arange(6, dtype=np.float32)
        lib.rev_into(x, out=x)
        assert x.tolist() == [5, 4, 3, 2, 1, 0], x
    """)


def test_numpy_as_strided_in_place_target_refused(built):
    case(built, """
        x = np.zeros(3, np.float32)
        v = np.lib.stride_tricks.as_strided(x, (3, 3), (4, 4))
        refused(lambda: lib.add_(v, np.ones((3, 3), np.float32)), "hmem::add_", %r)
        assert x.tolist() == [0, 0, 0]
    """ % INTERNAL)


def test_jax_in_place_op_on_one_array_twice_is_functional(built):
    case(built, """
        import jax.numpy as jnp
        from opcore import jax as ocjax
        x = jnp.arange(4.0, dtype=jnp.float32)
        assert ocjax.op("hmem::add_")(x, x).tolist() == [0, 2, 4, 6]
        assert x.tolist() == [0, 1, 2, 3]
    """)


# ---- item 3: immutable inputs ----------------------------------------------------------


def test_direct_in_place_call_on_a_jax_array_refused(built):
    case(built, """
        import jax.numpy as jnp
        x = jnp.arange(4.0, dtype=jnp.float32)
        refused(lambda: lib.add_(x, np.ones(4, np.float32)), "hmem::add_", %r, "JAX", "opcore.jax.op()")
        assert x.tolist() == [0, 1, 2, 3]
    """ % READ_ONLY)


def test_direct_in_place_call_on_a_read_only_numpy_array_refused(built):
    case(built, """
        x = np.arange(4, dtype=np.float32)
        x.flags.writeable = False
        refused(lambda: lib.add_(x, np.ones(4, np.float32)), "hmem::add_", %r, "writable copy")
        assert x.tolist() == [0, 1, 2, 3]
    """ % READ_ONLY)


def test_direct_in_place_call_on_a_read_only_memmap_refused(built):
    case(built, """
        np.arange(4, dtype=np.float32).tofile("mm.bin")
        mm = np.memmap("mm.bin", dtype=np.float32, mode="r")
        refused(lambda: lib.add_(mm, np.ones(4, np.float32)), "hmem::add_", %r, "memmap")
        assert np.fromfile("mm.bin", np.float32).tolist() == [0, 1, 2, 3]
    """ % READ_ONLY)


# ---- item 4: devices ---------------------------------------------------------------------


def test_cpu_and_meta_tensors_refused_naming_both(built):
    case(built, """
        refused(lambda: torch.ops.hmem.add(torch.ones(3), torch.ones(3, device="meta")), "hmem::add",
                "expected all tensors to be on the same device", "'x' (argument 1) is on cpu",
                "'y' (argument 2) is on meta")
    """)


def test_tensor_list_mixing_cpu_and_meta_refused(built):
    case(built, """
        refused(lambda: torch.ops.hmem.total([torch.ones(3), torch.ones(3, device="meta")]), "hmem::total",
                "'xs' (argument 1, item 0) is on cpu", "'xs' (argument 1, item 1) is on meta")
    """)


def test_in_place_target_on_meta_with_a_cpu_input_refused(built):
    case(built, """
        refused(lambda: torch.ops.hmem.add_(torch.ones(3, device="meta"), torch.ones(3)), "hmem::add_",
                "'x' (argument 1) is on meta", "'y' (argument 2) is on cpu")
    """)


def test_all_meta_tensors_get_shapes_only(built):
    case(built, """
        y = torch.ops.hmem.add(torch.ones(3, device="meta"), torch.ones(3, device="meta"))
        assert y.device.type == "meta" and y.shape == (3,)
    """)


def test_direct_call_with_a_meta_tensor_refused(built):
    case(built, """
        refused(lambda: lib.add(torch.ones(3), torch.ones(3, device="meta")), "hmem::add",
                "argument 2 'y' is on device 'meta'")
    """)
