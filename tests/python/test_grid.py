"""The launch grid from Python: the op's own grid and a per-call grid
(op[2, 2] on the direct-call op, grid= / op[grid] in opcore.jax), through
torch eager, torch.compile and jax.jit; uneven grids ([7], [1, 1], [3]) on
the engine's cores; errors naming the op. And seed 003 as its document
writes it: a grid set by the shape function from the input sizes."""
import itertools
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, load_lib, needs_cli, run_cli

KERNELS = Path(__file__).resolve().parent / "grid_kernels"
N = 4096  # float32 per row: every call's tensors reach the engine's 64 KiB split threshold


@pytest.fixture(scope="module")
def lib(opcore_build_dir):
    return load_lib(opcore_build_dir, "grid_py", KERNELS / "marks.c", KERNELS / "shape.c")


def expected(grid):
    """The output of marks on `grid`: one row per instance, row-major."""
    rows = [list(p) + [0] * (3 - len(grid)) + [1] for p in itertools.product(*(range(n) for n in grid))]
    return np.array(rows, dtype=np.int64)


def x_for(grid, lib_module=np):
    return lib_module.ones((int(np.prod(grid)), N), dtype=lib_module.float32)


@pytest.mark.parametrize("grid", [(2, 2), (7,), (1, 1), (3,), (1,), (2, 3, 4)])
def test_direct_call_with_a_grid(lib, grid):
    out = lib.marks[grid](x_for(grid))
    np.testing.assert_array_equal(out, expected(grid))


def test_grid_spellings_and_default(lib):
    np.testing.assert_array_equal(lib.marks(x_for((2, 2))), expected((2, 2)))  # .grid = {2, 2}
    np.testing.assert_array_equal(lib.marks[2, 3](x_for((2, 3))), expected((2, 3)))
    np.testing.assert_array_equal(lib.marks[5](x_for((5,))), expected((5,)))
    assert lib.marks[2, 3].grid == (2, 3) and lib.marks.grid is None
    assert "grid_py::marks(2, 3)" in repr(lib.marks[2, 3])


def test_bad_grids_name_the_op(lib):
    with pytest.raises(ValueError, match=r"grid_py::marks.*axis 1 of the launch grid is 0"):
        lib.marks[2, 0]
    with pytest.raises(ValueError, match=r"grid_py::marks.*1 to 3 axes, got 4"):
        lib.marks[1, 1, 1, 1]
    with pytest.raises(TypeError, match=r"grid_py::marks.*must be an int, got str"):
        lib.marks["2"]
    # a grid larger than the output: the kernel's own check, as an error naming the op
    with pytest.raises(Exception, match=r"grid_py::marks.*instance 4 of a grid"):
        lib.marks[5](x_for((4,)))


@needs_cli
def test_cli_run_with_a_grid(lib):
    p = run_cli("run", lib.path, "marks", "--shape", f"7,{N}", "--grid", "7", "--print", check=0)
    assert "int64 [7, 4]" in p.stdout
    # each row: (i, 0, 0, 1); the printed values of the output are its rows in order
    out = p.stdout.split("output", 1)[1]
    assert "6, 0, 0, 1" in out.replace("\n", " ")
    p = run_cli("run", lib.path, "marks", "--shape", f"4,{N}", "--grid", "2,0", check=1)
    assert "grid_py::marks" in p.stderr and "axis 1 of the launch grid is 0" in p.stderr
    p = run_cli("run", lib.path, "marks", "--grid", "1,2,3,4", check=2)
    assert "--grid '1,2,3,4' is not 1 to 3 sizes" in p.stderr


def test_collectives_are_refused_in_a_grid(lib):
    with pytest.raises(Exception, match=r"grid_py::barrier.*oc_barrier is not allowed in a grid launch"):
        lib.barrier(np.ones((3, N), np.float32))


def test_torch_eager_and_compile(lib):
    torch = pytest.importorskip("torch")
    marks = torch.ops.grid_py.marks
    x = torch.ones(4, N)
    np.testing.assert_array_equal(marks(x).numpy(), expected((2, 2)))
    compiled = torch.compile(lambda x: marks(x) + 0, fullgraph=True)
    np.testing.assert_array_equal(compiled(x).numpy(), expected((2, 2)))
    # the direct-call op with a grid takes torch tensors too
    np.testing.assert_array_equal(lib.marks[7](torch.ones(7, N)).numpy(), expected((7,)))


@pytest.mark.parametrize("grid", [(7,), (1, 1), (3,), (2, 2)])
def test_jax_jit_with_a_grid(lib, grid):
    jax = pytest.importorskip("jax")
    import opcore.jax as ojax

    x = x_for(grid, jax.numpy)
    out = jax.jit(ojax.op("grid_py::marks", grid=grid))(x)
    np.testing.assert_array_equal(np.asarray(out), expected(grid))
    out = jax.jit(ojax.op("grid_py::marks")[grid])(x)
    np.testing.assert_array_equal(np.asarray(out), expected(grid))


def test_jax_default_grid_and_errors(lib):
    jax = pytest.importorskip("jax")
    import opcore.jax as ojax

    out = jax.jit(ojax.op("grid_py::marks"))(x_for((2, 2), jax.numpy))
    np.testing.assert_array_equal(np.asarray(out), expected((2, 2)))
    with pytest.raises(ValueError, match=r"grid_py::marks.*axis 0 of the launch grid is 0"):
        ojax.op("grid_py::marks", grid=(0,))
    with pytest.raises(ValueError, match=r"grid_py::marks.*1 to 3 axes, got 4"):
        ojax.op("grid_py::marks")[1, 2, 3, 4]


# ---------------------------------------------------------------------------
# seed 003: the grid comes from the shape function (one program per 128x512 tile)

def test_seed003_kernel_reads_the_grid():
    src = (REPO / "examples" / "seed003" / "add.c").read_text()
    assert "oc_program_id(0)" in src and "oc_program_id(1)" in src
    assert "oc_cpu_id" not in src and "oc_cpu_count" not in src  # no folding by hand
    assert "OC_SET_GRID" in (REPO / "examples" / "seed003" / "shape.c").read_text()


@pytest.mark.parametrize("shape", [(256, 1024), (300, 1100), (1, 5), (129, 513), (2, 3, 1000)])
def test_seed003_torch_any_shape(seed003, shape):
    torch = pytest.importorskip("torch")
    add = torch.ops.add_ops.tensor_add
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(shape, generator=g), torch.randn(shape, generator=g)
    torch.testing.assert_close(add(a, b), a + b)
    torch.testing.assert_close(torch.compile(lambda a, b: a * b * add(a, b), fullgraph=True)(a, b), a * b * (a + b))


def test_seed003_results_torch_and_jax(seed003):
    a, b = seed003.inputs()
    ref = seed003.reference(a, b)
    for name, got in {**seed003.torch_results(a, b), **seed003.jax_results(a, b)}.items():
        want = ref["out" if name.startswith("out") else name.replace("_with_vjp", "")]
        assert seed003.max_rel_err(got, want) < 1e-5, name


def test_seed003_jax_with_a_grid_override(seed003):
    jax = pytest.importorskip("jax")
    import opcore.jax as ojax

    a, b = seed003.inputs(2)
    add = ojax.op(seed003.QUALNAME)
    np.testing.assert_allclose(jax.jit(add)(a, b), a + b, rtol=1e-6)
    # the grid the shape function would set, given explicitly
    np.testing.assert_allclose(jax.jit(add[2, 2])(a, b), a + b, rtol=1e-6)


# ---------------------------------------------------------------------------
# the profiler: grid instances on the core lanes, their program ids, balance

def test_profiler_shows_grid_instances(lib, tmp_path, monkeypatch):
    profiler = pytest.importorskip("opcore.profiler")
    from test_profiler_support import load_trace

    monkeypatch.setenv("OPCORE_PROFILE_QUIET", "1")
    monkeypatch.setenv("OPCORE_MEMBW_GBPS", "20")
    x = x_for((3, 2))
    with profiler.profile(str(tmp_path), run_name="grid") as p:
        for _ in range(3):
            lib.marks[3, 2](x)
    tr = load_trace(p)
    ncores = tr["otherData"]["engine_cores"]
    mine = [e for e in tr["traceEvents"] if e["ph"] == "X" and e.get("cat") == "kernel"
            and e["name"] == "grid_py::marks"]
    assert len(mine) == 3 * 6
    # every instance, on an engine core's lane, with its program id
    programs = sorted(tuple(e["args"]["program"]) for e in mine)
    assert programs == sorted(list(itertools.product(range(3), range(2))) * 3)
    assert all(0 <= e["args"]["core"] < ncores and e["args"]["ncores"] == 6 for e in mine)
    op = {o["op"]: o for o in p.summary["ops"]}["grid_py::marks"]
    assert op["balance"] >= 1.0 and op["kernels"] == 18
    assert "balance" in open(p.html_path).read()
