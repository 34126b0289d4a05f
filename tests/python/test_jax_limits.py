"""A JAX op whose shape function answers a result too large for XLA (its
byte count beyond int64: XLA aborts the process on such a shape) is refused
in the shape path with opcore's error naming the op and the result: under
jax.eval_shape, eagerly and jitted, each in a process of its own (an abort
must fail the test, not end the run); the next call works."""
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("jax")
pytest.importorskip("opcore.jax")

HERE = Path(__file__).resolve().parent

CHILD = """
import sys
sys.path.insert(0, {here!r})
import jax, numpy as np
import jax_libs
import opcore, opcore.jax as ojax
jax_libs.jax_kinds()
f = ojax.op("jax_kinds::repeat_rows_plain")
x = np.ones((2, 4), np.float32)
run = {{"eval_shape": lambda t: jax.eval_shape(lambda x: f(x, t), x),
        "eager": lambda t: f(x, t),
        "jit": lambda t: jax.jit(lambda x: f(x, t))(x)}}[{how!r}]
try:
    run({times})
    print("ACCEPTED")
except opcore.OpError as e:
    print("REFUSED", e)
got = run(3)  # the next call works
print("NEXT", tuple(got.shape))
"""


@pytest.mark.parametrize("how", ["eval_shape", "eager", "jit"])
def test_result_beyond_int64_bytes_is_refused_naming_the_op(how):
    # 2 rows * 2**58: 2**59 rows of 4 float32, 2**61 elements (2**63 bytes)
    code = textwrap.dedent(CHILD.format(here=str(HERE), how=how, times=2**58))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert "REFUSED" in p.stdout, out
    assert "op 'jax_kinds::repeat_rows_plain'" in p.stdout, out
    assert "NEXT (6, 4)" in p.stdout, out
    assert "result 0: its shape function answered sizes [576460752303423488, 4] of float32" in p.stdout
    assert "more bytes than int64 can count" in p.stdout


def test_largest_result_that_fits_passes_the_shape_path():
    """The check counts bytes exactly (only the shape is asked for: no
    memory holds such a result)."""
    import jax
    import numpy as np
    import jax_libs
    import opcore.jax as ojax

    jax_libs.jax_kinds()
    f = ojax.op("jax_kinds::repeat_rows_plain")
    x = np.ones((1, 4), np.float32)
    # 2**59 - 1 rows of 4 float32: 2**63 - 16 bytes, the most that fits
    s = jax.eval_shape(lambda x: f(x, 2**59 - 1), x)
    assert s.shape == (2**59 - 1, 4)


@pytest.mark.parametrize("grid, why", [(2**64, "at most 2\\*\\*63 - 1"), ((1, 2**63), "at most 2\\*\\*63 - 1"),
                                       (-2**64, "at least 1")])
def test_grid_beyond_int64_names_the_op_and_the_grid(grid, why):
    import jax_libs
    import opcore.jax as ojax

    jax_libs.jax_kinds()
    with pytest.raises(ValueError, match=rf"op 'jax_kinds::scale': axis \d of the launch grid is -?\d+; "
                                         rf"every axis needs {why}"):
        ojax.op("jax_kinds::scale", grid=grid)
