"""The BLIS configuration the tile matmul runs (src/tile/matmul.c): BLIS's
own choice, except that opcore hands BLIS its AVX-512 configuration ('skx',
for products of 48 rows of c or more) where BLIS took 'haswell' on an Intel
CPU with AVX-512 F/DQ/BW/VL and AVX512-BF16 or AMX; OC_TILE_ISA below avx512 and BLIS_ARCH_TYPE keep BLIS's
choice. Each case runs in a fresh process (the choice is made once), and
multiplies there a product BLIS takes (a dim over libxsmm's 256)."""
import os
import re
import subprocess
import sys

import pytest

CHILD = r"""
import ctypes, os, sys
import numpy as np
import opcore
lib = ctypes.CDLL(os.path.join(opcore.lib_dir(), "libopcore.so.0"))
lib.oc_tile_matmul_path.restype = ctypes.c_char_p
path = lib.oc_tile_matmul_path(0).decode()  # OC_FLOAT32
import torch, opcore.torch
sys.path.insert(0, sys.argv[1])
import tiles_ops
tiles_ops.load(build_directory=sys.argv[2])
g = torch.Generator().manual_seed(0)
a, b = torch.randn(300, 70, generator=g), torch.randn(70, 280, generator=g)
c = torch.ops.tiles.matmul(a, b)
ref = (a.double() @ b.double()).float()
err = float((c - ref).abs().max())
print(path)
print("maxerr", err)
"""

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _config(tmp_path, **env):
    e = {k: v for k, v in os.environ.items() if k not in ("OC_TILE_ISA", "BLIS_ARCH_TYPE")}
    e.update(env)
    out = subprocess.run([sys.executable, "-c", CHILD, os.path.join(REPO, "examples", "tiles"),
                          str(tmp_path / "tiles")], env=e, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    path, err = out.stdout.strip().splitlines()[-2:]
    assert float(err.split()[1]) < 1e-3, err
    m = re.search(r"BLIS \S+ sgemm, configuration '([^']+)'", path)
    assert m, path
    return m.group(1)


def _flags():
    with open("/proc/cpuinfo") as f:
        text = f.read()
    vendor = re.search(r"^vendor_id\s*:\s*(\S+)", text, re.M)
    flags = re.search(r"^flags\s*:(.*)$", text, re.M)
    return (vendor.group(1) if vendor else ""), set(flags.group(1).split() if flags else ())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/cpuinfo")
def test_blis_configuration(tmp_path):
    own = _config(tmp_path, OC_TILE_ISA="avx2")  # BLIS's own choice
    best = _config(tmp_path)
    vendor, f = _flags()
    handed = (vendor == "GenuineIntel" and {"avx512f", "avx512dq", "avx512bw", "avx512vl"} <= f
              and bool({"avx512_bf16", "amx_tile"} & f))
    if own == "haswell" and handed:
        assert best == "skx"
    else:
        assert best == own
    if {"avx2", "fma"} <= f:  # BLIS's own setting wins: 3 is its haswell configuration's id
        assert _config(tmp_path, BLIS_ARCH_TYPE="3") == "haswell"
