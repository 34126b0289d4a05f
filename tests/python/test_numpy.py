"""Direct calls with any __dlpack__ array (#12): NumPy in, NumPy out; JAX
in, JAX out; zero copy for inputs (in-place ops write the caller's arrays);
read-only arrays; and opcore without torch at all."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "examples" / "ops"))
import nn_ops  # noqa: E402

import opcore  # noqa: E402


@pytest.fixture(scope="module")
def lib(opcore_build_dir):
    return nn_ops.load(build_directory=str(opcore_build_dir / "nn_ops"))


def test_numpy_in_numpy_out(lib):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 10)).astype(np.float32)
    out, mean, rstd = lib.layer_norm(x, [10])
    assert isinstance(out, np.ndarray) and out.dtype == np.float32 and out.shape == (6, 10)
    assert np.allclose(mean, x.mean(1), atol=1e-6)
    assert np.allclose(out, (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5), atol=1e-5)
    cat = lib.concat([x[:, :3], x[:, 3:]], 1)  # strided views, zero copy
    assert np.array_equal(cat, x)
    assert np.array_equal(lib.concat([x.T, x.T], 0), np.concatenate([x.T, x.T], 0))
    s = lib.global_sum(x)
    assert isinstance(s, np.ndarray) and s.shape == () and abs(float(s) - float(x.sum())) < 1e-4


def test_in_place_writes_the_callers_arrays(lib):
    params = [np.ones(5, np.float32), np.full((2, 3), 2.0, np.float32)]
    bufs = [np.zeros(5, np.float32), np.zeros((2, 3), np.float32)]
    grads = [np.ones(5, np.float32), np.ones((2, 3), np.float32)]
    ids = [p.__array_interface__["data"][0] for p in params]
    assert lib.sgd_momentum_(params, bufs, grads, 0.5, 0.9) is None
    assert np.array_equal(params[0], np.full(5, 0.5, np.float32))
    assert np.array_equal(bufs[1], np.ones((2, 3), np.float32))
    assert [p.__array_interface__["data"][0] for p in params] == ids  # the same memory: zero copy


def test_read_only_arrays(lib):
    ro = np.broadcast_to(np.float32(2.0), (7,))  # read-only, stride 0
    assert float(lib.global_sum(ro)) == 14.0
    with pytest.raises(opcore.OpArgumentError, match="item 0: is written in place .* read-only"):
        lib.sgd_momentum_([ro], [np.zeros(7, np.float32)], [np.ones(7, np.float32)], 0.1)


def test_jax_in_jax_out(lib):
    jnp = pytest.importorskip("jax.numpy")
    x = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
    y = lib.linear(x, jnp.ones((2, 4), jnp.float32))
    assert type(y).__module__.startswith("jax")
    assert np.array_equal(np.asarray(y), np.asarray(x).sum(1, keepdims=True).repeat(2, 1))


def test_errors_name_the_op(lib):
    with pytest.raises(opcore.OpError, match="x must be float32, got int32"):
        lib.global_sum(np.ones(3, np.int32))
    with pytest.raises(opcore.OpArgumentError, match="argument 1 'x': expected a Tensor .*got str"):
        lib.global_sum("nope")


def test_without_torch(opcore_build_dir):
    """A process where torch cannot be imported: opcore and NumPy only."""
    script = textwrap.dedent(f"""
        import sys
        sys.modules["torch"] = None          # importing torch now fails
        sys.path.insert(0, {str(REPO / "examples" / "ops")!r})
        import numpy as np, opcore, nn_ops
        lib = nn_ops.load(build_directory={str(opcore_build_dir / "nn_ops")!r})
        y = lib.avg_pool2d(np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4), [2, 2], [2, 2])
        assert isinstance(y, np.ndarray) and y.ravel().tolist() == [2.5, 4.5, 10.5, 12.5], y
        assert "torch" not in [m for m in sys.modules if sys.modules[m] is not None]
        print("OK")
    """)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(REPO / "tests" / "python")})
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == "OK"
