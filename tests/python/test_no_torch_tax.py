"""A JAX- or NumPy-only program never imports torch (issue 21: no torch
tax): `import opcore`, `import opcore.jax`, custom_op.load and calls from
JAX leave torch out of sys.modules; a program that imports torch (before or
after loading) still finds torch.ops.<lib>. Each case runs in a fresh
process: this one has torch imported already."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import RELU, renamed_shape_source


def run(tmp_path, namespace, body, env=None):
    """Run `body` in a fresh Python after loading the ReLU as `namespace`
    (built in tmp_path); its last stdout line is returned."""
    shape = renamed_shape_source(tmp_path, namespace)
    prog = textwrap.dedent(f"""
        import sys
        import opcore
        from opcore import custom_op
        lib = custom_op.load(name={namespace!r}, compute_srcs=[{str(RELU / "elementwise" / "relu.c")!r}],
                             shape_srcs=[{str(shape)!r}], build_directory={str(tmp_path / "build")!r})
    """) + textwrap.dedent(body)
    full_env = {k: v for k, v in os.environ.items() if k != "OPCORE_NO_TORCH"}
    full_env.update(env or {})
    r = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=300, env=full_env)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return r.stdout.strip().splitlines()[-1]


def test_a_jax_program_never_imports_torch(tmp_path):
    out = run(tmp_path, "notorch_jax", """
        import jax, jax.numpy as jnp, numpy as np
        import opcore.jax
        relu = opcore.jax.op("notorch_jax::relu_forward")
        y = jax.jit(lambda x: relu(x) * 2)(jnp.asarray([[-1.0, 2.0]], jnp.float32))
        np.testing.assert_array_equal(np.asarray(y), [[0.0, 4.0]])
        g = jax.grad(lambda x: opcore.jax.with_vjp(relu, "notorch_jax::relu_backward")(x).sum())(
            jnp.asarray([[-1.0, 2.0]], jnp.float32))
        np.testing.assert_array_equal(np.asarray(g), [[0.0, 1.0]])
        print(sorted(m for m in sys.modules if m == "torch" or m.startswith("torch.")))
    """)
    assert out == "[]"


def test_a_numpy_call_never_imports_torch(tmp_path):
    out = run(tmp_path, "notorch_np", """
        import numpy as np
        y = lib.relu_forward(np.asarray([[-1.0, 3.0]], np.float32))
        assert isinstance(y, np.ndarray) and y.tolist() == [[0.0, 3.0]], y
        print("torch" in sys.modules)
    """)
    assert out == "False"


def test_torch_imported_after_loading_finds_the_ops(tmp_path):
    out = run(tmp_path, "notorch_late", """
        assert "torch" not in sys.modules
        import torch
        y = torch.ops.notorch_late.relu_forward(torch.tensor([[-1.0, 5.0]]))
        z = lib.relu_forward(torch.tensor([[-2.0, 1.0]]))  # the C op itself, given a torch tensor
        assert isinstance(z, torch.Tensor) and z.tolist() == [[0.0, 1.0]], z
        print(y.tolist())
    """)
    assert out == "[[0.0, 5.0]]"


def test_torch_imported_before_loading_finds_the_ops(tmp_path):
    shape = renamed_shape_source(tmp_path, "notorch_early")
    prog = textwrap.dedent(f"""
        import torch
        from opcore import custom_op
        custom_op.load(name="notorch_early", compute_srcs=[{str(RELU / "elementwise" / "relu.c")!r}],
                       shape_srcs=[{str(shape)!r}], build_directory={str(tmp_path / "build")!r})
        print(torch.ops.notorch_early.relu_forward(torch.tensor([[-1.0, 5.0]])).tolist())
    """)
    r = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[[0.0, 5.0]]"


def test_opcore_no_torch_keeps_the_ops_out_of_torch(tmp_path):
    out = run(tmp_path, "notorch_off", """
        import torch
        print(hasattr(torch.ops.notorch_off, "relu_forward"))
    """, env={"OPCORE_NO_TORCH": "1"})
    assert out == "False"


def test_the_environment_variables_are_all_documented():
    """docs/environment.md names every OPCORE_* / OC_* variable the sources,
    tests, benchmarks and examples read."""
    import re

    repo = Path(__file__).resolve().parents[2]
    doc = (repo / "docs" / "environment.md").read_text()
    read = set()
    files = [repo / "setup.py", *[p for d in ("src", "python", "tests", "bench", "examples", "scripts")
                                  for ext in ("c", "py") for p in (repo / d).rglob(f"*.{ext}")]]
    pattern = re.compile(r'(?:getenv|env_size|environ\.get|environ\[)\(?\s*"((?:OPCORE|OC)_[A-Z0-9_]+)"')
    for p in files:
        read |= set(pattern.findall(p.read_text(errors="replace")))
    assert read, "found no variable: the patterns no longer match the sources"
    missing = sorted(v for v in read if f"`{v}`" not in doc)
    assert not missing, f"docs/environment.md does not document {missing}"
