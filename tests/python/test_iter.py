"""The iterator (opcore/iter.h) and broadcasting (oc_empty_broadcast) from
PyTorch: an op written with them (iter_kernels/badd.c: out = x + alpha * y)
against torch on random ranks 0..5, zero-size dims, zero strides (expand),
transposes, slices and broadcasting, in several dtypes; multicore shares on
every engine size 1..4 (OC_NUM_CORES, one process each). Negative strides,
which torch tensors cannot have, are covered by tests/c/test_iter.c."""
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from conftest import renamed_shape_source

REPO = Path(__file__).resolve().parents[2]
KERNELS = Path(__file__).resolve().parent / "iter_kernels"
DTYPES = (torch.float32, torch.float64, torch.int32, torch.int64, torch.bfloat16, torch.float16)


def build_iter_ops(out_dir, namespace, multicore):
    """Build iter_kernels/ as library `namespace`; returns the .so path."""
    from opcore import custom_op

    shape = renamed_shape_source(out_dir, namespace, KERNELS / "shape.c", "iter_ops")
    path, _, _ = custom_op.build(namespace, [str(KERNELS / "badd.c")], [str(shape)], build_directory=str(out_dir),
                                 multicore=multicore)
    return path


def random_case(rng, dtype):
    """x, y of a random rank, layout and broadcast, filled with small values."""
    nd = rng.randrange(6)
    shape = [rng.choice((0, 1, 2, 3, 5, 7)) if rng.random() < 0.15 else rng.choice((1, 2, 3, 4, 6, 9))
             for _ in range(nd)]
    if rng.random() < 0.2 and nd >= 2:  # big enough to tile a transposed view
        shape[-1], shape[-2] = 300, 140

    def make(sizes):
        # a random layout: make a tensor in a permuted order, maybe sliced, view it back
        perm = list(range(len(sizes)))
        rng.shuffle(perm)
        step = [2 if rng.random() < 0.2 else 1 for _ in sizes]
        base_sizes = [sizes[p] * step[p] for p in perm]
        base = torch.randint(-8, 9, base_sizes).to(dtype)
        inv = [perm.index(d) for d in range(len(sizes))]
        t = base.permute(*inv) if sizes else base
        return t[tuple(slice(None, None, s) for s in step)] if sizes else t

    x = make(shape)
    ynd = rng.randrange(nd + 1)
    yshape = [1 if rng.random() < 0.3 else s for s in shape[nd - ynd:]]
    y = make(yshape)
    if ynd and rng.random() < 0.3:  # an expanded (stride 0) dim
        d = rng.randrange(ynd)
        if yshape[d] == 1:
            y = y.expand(*[shape[nd - ynd + d] if i == d else yshape[i] for i in range(ynd)])
    return x, y


def expected(x, y, alpha):
    return (x.double() + alpha * y.double()).to(x.dtype) if x.dtype.is_floating_point else x + alpha * y


@pytest.fixture(scope="module")
def iter_ops(opcore_build_dir):
    from opcore import custom_op

    custom_op.load_library(build_iter_ops(opcore_build_dir / "iter_ops", "iter_ops", False))
    return torch.ops.iter_ops


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_random_layouts_match_torch(iter_ops, dtype):
    rng = random.Random(str(dtype))
    alpha = 2 if not dtype.is_floating_point else 0.5
    for _ in range(60):
        x, y = random_case(rng, dtype)
        got = iter_ops.badd(x, y, alpha)
        want = expected(x, y, alpha)
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, msg=lambda m: f"{m}\nx {tuple(x.shape)} {x.stride()}, "
                                                          f"y {tuple(y.shape)} {y.stride()}")


def test_rank_0_and_zero_size(iter_ops):
    s = torch.tensor(3.0)
    torch.testing.assert_close(iter_ops.badd(s, torch.tensor(2.0), 1.0), torch.tensor(5.0))
    assert iter_ops.badd(torch.randn(4, 3), s, 1.0).shape == (4, 3)
    z = iter_ops.badd(torch.randn(3, 0, 2), torch.randn(2), 1.0)
    assert z.shape == (3, 0, 2)


def test_broadcast_error_names_both_shapes(iter_ops):
    with pytest.raises(Exception, match=r"tensor 0 of shape \[4, 3\] and tensor 1 of shape \[5\] do not "
                                        r"broadcast: dim -1 is 3 vs 5"):
        iter_ops.badd(torch.randn(4, 3), torch.randn(5), 1.0)


def test_under_torch_compile(iter_ops):
    f = torch.compile(lambda x, y: iter_ops.badd(x, y, 1.0) * 2, fullgraph=True)
    x, y = torch.randn(6, 5), torch.randn(5)
    torch.testing.assert_close(f(x, y), (x + y) * 2)


CORES_CHECK = textwrap.dedent("""
    import random, sys, torch
    sys.path.insert(0, {tests!r})
    from opcore import custom_op
    from test_iter import random_case, expected
    lib = custom_op.load_library({path!r})
    assert lib.multicore
    rng = random.Random({seed})
    for dtype in (torch.float32, torch.bfloat16, torch.int32):
        for _ in range(40):
            x, y = random_case(rng, dtype)
            torch.testing.assert_close(torch.ops.iter_ops_mc.badd(x, y, 2), expected(x, y, 2))
    x = torch.randn(301, 67).t()          # tiled: shares cut inside tiles
    y = torch.randn(602)[::2]
    torch.testing.assert_close(torch.ops.iter_ops_mc.badd(x, y, 2), expected(x, y, 2))
    print("ok", {cores})
""")


@pytest.mark.parametrize("cores", [1, 2, 3, 4])
def test_multicore_shares(opcore_build_dir, cores):
    path = build_iter_ops(opcore_build_dir / "iter_ops_mc", "iter_ops_mc", True)
    env = dict(os.environ, OC_NUM_CORES=str(cores), PYTHONPATH=str(REPO / "python"))
    script = CORES_CHECK.format(tests=str(Path(__file__).resolve().parent), path=path, seed=cores, cores=cores)
    p = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.strip() == f"ok {cores}"
