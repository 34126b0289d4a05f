"""complex64 and complex128 through every path (#21): the examples/complex
rms_norm (JAX's FFI example) against NumPy, exact round trips through the
tests/c/complex_kernels conj kernels, from NumPy, torch (eager,
torch.compile, opcheck), JAX (jit, vmap, grad) and the CLI; and the errors
of unsupported uses."""
import re
import sys

import numpy as np
import pytest

from conftest import CLI, REPO, needs_cli, run_cli

sys.path.insert(0, str(REPO / "examples" / "complex"))
import complex_ops  # noqa: E402

from opcore import custom_op  # noqa: E402

KINDS = REPO / "tests" / "c" / "complex_kernels"
DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
COMPLEX = [np.complex64, np.complex128]


@pytest.fixture(scope="module")
def lib(opcore_build_dir):
    return complex_ops.load(build_directory=str(opcore_build_dir / "complex_ops"))


@pytest.fixture(scope="module")
def kinds(opcore_build_dir):
    return custom_op.loaded_libraries().get("cplx_kinds") or custom_op.load(
        name="cplx_kinds", compute_srcs=[str(KINDS / "kernels.c")], shape_srcs=[str(KINDS / "shape.c")],
        build_directory=str(opcore_build_dir / "cplx_kinds"))


def sample(dtype, shape=(3, 5)):
    """upstream's test input (linspace(-0.5, 0.5)), with an imaginary part for complex"""
    n = int(np.prod(shape))
    x = np.linspace(-0.5, 0.5, n)
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * np.linspace(0.3, -0.4, n)
    return x.astype(dtype).reshape(shape)


def ref(x, eps=1e-5):
    """upstream's rms_norm_ref: the complex square, eps a float32"""
    scale = np.sqrt(np.mean(np.square(x), axis=-1, keepdims=True) + np.float32(eps).astype(x.dtype))
    return x / scale


def ref_jnp(x, eps=1e-5):
    import jax.numpy as jnp

    return x / jnp.sqrt(jnp.mean(jnp.square(x), axis=-1, keepdims=True) + jnp.float32(eps).astype(x.dtype))


def tol(dtype):
    return 1e-4 if dtype in (np.float32, np.complex64) else 1e-12


# ---- NumPy, direct calls --------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_rms_norm(lib, dtype):
    x = sample(dtype)
    y = lib.rms_norm(x)
    assert isinstance(y, np.ndarray) and y.dtype == dtype and y.shape == x.shape
    np.testing.assert_allclose(y, ref(x), rtol=tol(dtype), atol=tol(dtype))
    y2, res = lib.rms_norm_fwd(x, 1e-3)
    assert res.dtype == dtype and res.shape == (3,)
    np.testing.assert_allclose(y2, ref(x, 1e-3), rtol=tol(dtype), atol=tol(dtype))
    g = sample(dtype)[::-1].copy()
    s = res[:, None]
    want = s * g - (x * g).sum(-1, keepdims=True) * s ** 3 / x.shape[-1] * x
    np.testing.assert_allclose(lib.rms_norm_bwd(g, res, x), want, rtol=10 * tol(dtype), atol=10 * tol(dtype))


@pytest.mark.parametrize("dtype", COMPLEX)
def test_numpy_round_trip_exact(kinds, dtype):
    z = sample(dtype, (4, 300))
    if dtype == np.complex128:
        out = kinds.conj_stream(z)  # 16-byte elements through a stream
    else:
        out = kinds.conj_acc(z.ravel()).reshape(z.shape)  # accessors
    assert out.dtype == dtype and np.array_equal(out, np.conj(z))
    b = np.array([2.0, -1.0, 0.5], np.float32)
    a = sample(np.complex64, (2, 3))
    np.testing.assert_array_equal(kinds.mul_iter(a, b), a * b)  # iterator: dtype mix, broadcast


def test_numpy_unsupported(lib, kinds):
    with pytest.raises(Exception, match=r"argument 2 'eps': expected float, got complex \(float, int and Scalar "
                                        r"arguments are real: pass complex values in a complex64/complex128 tensor"):
        lib.rms_norm(sample(np.complex64), 1e-5 + 1j)
    with pytest.raises(Exception, match="x must be float32, float64, complex64 or complex128, got int32"):
        lib.rms_norm(np.zeros((2, 3), np.int32))
    with pytest.raises(Exception, match="oc_accessor: tensor is complex64, accessor asks for float32"):
        kinds.twice_f32(np.zeros(3, np.complex64))
    with pytest.raises(Exception, match=r"argument 1 'x': cannot view this numpy.ndarray .*complex256"):
        lib.rms_norm(np.zeros((2, 3), np.clongdouble))  # no opcore dtype


# ---- torch ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def torch_ops(lib, kinds):
    torch = pytest.importorskip("torch")
    import opcore.torch  # noqa: F401

    return torch


@pytest.mark.parametrize("dtype", DTYPES)
def test_torch_eager_and_compile(torch_ops, dtype):
    torch = torch_ops
    x = torch.from_numpy(sample(dtype))
    y = torch.ops.complex_ops.rms_norm(x)
    assert y.dtype == x.dtype
    np.testing.assert_allclose(y.numpy(), ref(x.numpy()), rtol=tol(dtype), atol=tol(dtype))
    f = torch.compile(lambda t: torch.ops.complex_ops.rms_norm(t) * 2, fullgraph=True)
    np.testing.assert_allclose(f(x).numpy(), 2 * ref(x.numpy()), rtol=tol(dtype), atol=tol(dtype))


@pytest.mark.parametrize("dtype", COMPLEX)
def test_torch_opcheck(torch_ops, dtype):
    torch = torch_ops
    x = torch.from_numpy(sample(dtype))
    y, res = torch.ops.complex_ops.rms_norm_fwd(x)
    for op, args in [(torch.ops.complex_ops.rms_norm.default, (x,)),
                     (torch.ops.complex_ops.rms_norm_fwd.default, (x, 1e-3)),
                     (torch.ops.complex_ops.rms_norm_bwd.default, (y, res, x))]:
        torch.library.opcheck(op, args)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_torch_grad(torch_ops, dtype):
    """torch's complex convention (conjugate Wirtinger) around the JAX-convention kernel"""
    torch = torch_ops
    rms_norm = complex_ops.torch_rms_norm()
    x = torch.from_numpy(sample(dtype)).requires_grad_()
    assert torch.autograd.gradcheck(rms_norm, (x,))
    # against torch's own autograd of the reference
    g = torch.from_numpy(sample(dtype)[::-1].copy())
    (gx,) = torch.autograd.grad(rms_norm(x), x, g)
    (want,) = torch.autograd.grad(x / torch.sqrt((x * x).mean(-1, keepdim=True) + np.float32(1e-5).item()), x, g)
    torch.testing.assert_close(gx, want)


def test_torch_round_trip_and_errors(torch_ops):
    torch = torch_ops
    import opcore

    z = torch.from_numpy(sample(np.complex128, (3, 400)))
    assert torch.equal(torch.ops.cplx_kinds.conj_stream(z), z.conj().resolve_conj())
    zt = torch.from_numpy(sample(np.complex64, (4, 6))).t()  # zt[0]: a strided 1-D view
    assert torch.equal(torch.ops.cplx_kinds.conj_acc(zt[0]), zt[0].conj().resolve_conj())
    assert opcore.torch.to_torch_dtype("complex64") is torch.complex64
    with pytest.raises(opcore.OpArgumentError, match="complex32"):
        torch.ops.complex_ops.rms_norm(torch.zeros(2, 3, dtype=torch.complex32))
    with pytest.raises(opcore.OpError, match="oc_accessor: tensor is complex64, accessor asks for float32"):
        torch.ops.cplx_kinds.twice_f32(torch.zeros(3, dtype=torch.complex64))


# ---- JAX --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def jax_ops(lib, kinds):
    jax = pytest.importorskip("jax")
    import opcore.jax

    return jax, opcore.jax


@pytest.mark.parametrize("dtype", DTYPES)
def test_jax_jit_vmap(jax_ops, dtype):
    jax, ojax = jax_ops
    import jax.numpy as jnp

    with jax.enable_x64(True):
        x = jnp.asarray(sample(dtype))
        assert x.dtype == dtype
        f = ojax.op("complex_ops::rms_norm")
        y = jax.jit(f)(x)
        assert y.dtype == dtype
        np.testing.assert_allclose(np.asarray(y), ref(np.asarray(x)), rtol=tol(dtype), atol=tol(dtype))
        np.testing.assert_allclose(np.asarray(jax.vmap(f)(x)), ref(np.asarray(x)), rtol=tol(dtype),
                                   atol=tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_jax_grad(jax_ops, dtype):
    """upstream's test_grads: check_grads in reverse mode against finite differences"""
    jax, _ = jax_ops
    import jax.numpy as jnp
    from jax.test_util import check_grads

    rms_norm = complex_ops.jax_rms_norm()
    with jax.enable_x64(True):
        x = jnp.asarray(sample(dtype))
        check_grads(rms_norm, (x,), order=1, modes=("rev",))
        check_grads(jax.jit(rms_norm), (x,), order=1, modes=("rev",))
        g = jnp.asarray(sample(dtype)[::-1].copy())
        want = jax.vjp(lambda t: jnp.asarray(ref_jnp(t)), x)[1](g)[0]
        np.testing.assert_allclose(np.asarray(jax.vjp(rms_norm, x)[1](g)[0]), np.asarray(want), rtol=tol(dtype),
                                   atol=tol(dtype))


def test_jax_round_trip_and_errors(jax_ops):
    jax, ojax = jax_ops
    import jax.numpy as jnp

    with jax.enable_x64(True):
        z = jnp.asarray(sample(np.complex128, (3, 400)))
        assert np.array_equal(np.asarray(jax.jit(ojax.op("cplx_kinds::conj_stream"))(z)), np.conj(np.asarray(z)))
        a, b = jnp.asarray(sample(np.complex64, (2, 3))), jnp.asarray([2.0, -1.0, 0.5], jnp.float32)
        np.testing.assert_array_equal(np.asarray(jax.jit(ojax.op("cplx_kinds::mul_iter"))(a, b)),
                                      np.asarray(a) * np.asarray(b))
    with pytest.raises(Exception, match="oc_accessor: tensor is complex64, accessor asks for float32"):
        jax.block_until_ready(jax.jit(ojax.op("cplx_kinds::twice_f32"))(jnp.zeros(3, jnp.complex64)))


# ---- the CLI ----------------------------------------------------------------------------------

def _values(line):
    return np.array([complex(v.strip()) for v in line.strip().strip("[]").split(",")])


@needs_cli
def test_cli_complex_inputs_and_outputs(tmp_path):
    out = tmp_path / "kinds"
    run_cli("build", "--name", "cplx_kinds", "--compute", KINDS / "kernels.c", "--shape", KINDS / "shape.c",
            "-o", out, check=0)
    p = run_cli("run", out / "libcplx_kinds.so", "conj_acc", "-s", "5", "-d", "complex64", "-p", check=0)
    lines = p.stdout.splitlines()
    assert re.search(r"input  x +complex64 \[5\]", p.stdout) and re.search(r"output +complex64 \[5\]", p.stdout)
    vals = [line for line in lines if line.strip().startswith("[")]
    x, y = _values(vals[0]), _values(vals[1])
    assert np.all(x.imag != 0)  # random inputs fill both parts
    np.testing.assert_allclose(y, np.conj(x), rtol=1e-5)

    ex = tmp_path / "complex_ops"
    run_cli("build", "--name", "complex_ops", "--compute", REPO / "examples/complex/rms_norm.c", "--shape",
            REPO / "examples/complex/shape.c", "--multicore", "-o", ex, check=0)
    for fill, z in [("2", 2), ("1-2j", 1 - 2j), ("(0.5+1j)", 0.5 + 1j), ("3j", 3j)]:
        p = run_cli("run", ex / "libcomplex_ops.so", "rms_norm", "-s", "2,3", "-d", "complex128", "--arg",
                    f"x={fill}", "-p", check=0)
        x, y = (_values(v) for v in [line for line in p.stdout.splitlines() if line.strip().startswith("[")])
        np.testing.assert_array_equal(x, np.full(6, z))
        np.testing.assert_allclose(y, ref(np.full((2, 3), z, np.complex128)).ravel(), rtol=1e-5)  # printed %.6g
    p = run_cli("run", ex / "libcomplex_ops.so", "rms_norm", "-d", "complex64", "--arg", "x=1+j", check=2)
    assert "--arg x=1+j: a Tensor argument takes a number to fill it with (complex: 1.5, 2j, 1.5-2j)" in p.stderr
    p = run_cli("run", ex / "libcomplex_ops.so", "rms_norm", "-d", "complex32", check=2)
    assert "complex64, complex128" in p.stderr
