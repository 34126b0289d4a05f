"""examples/ddp/train.py under `torchrun --nproc-per-node 2`: the MLP with
the opcore ReLU trained data-parallel (gloo, DDP), replicas identical at the
end, OC_NUM_CORES set per rank to CPUs / ranks.

Uses Fashion-MNIST when installed (the example's default), else a small
synthetic MNIST-format data set, so the example always runs.
"""
import gzip
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "ddp" / "train.py"
FASHION = Path("/usr/share/datasets/fashion-mnist")


def _write_idx(path, arr):
    head = bytes([0, 0, 0x08, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape)
    path.write_bytes(gzip.compress(head + arr.astype(np.uint8).tobytes()))


def _data_dir(tmp_path):
    if (FASHION / "train-images-idx3-ubyte.gz").is_file():
        return FASHION
    d = tmp_path / "data"
    d.mkdir()
    rng = np.random.default_rng(0)
    for stem, n in (("train", 2048), ("t10k", 256)):
        _write_idx(d / f"{stem}-images-idx3-ubyte.gz", rng.integers(0, 256, (n, 28, 28)))
        _write_idx(d / f"{stem}-labels-idx1-ubyte.gz", rng.integers(0, 10, n))
    return d


@pytest.mark.parametrize("variant", ["elementwise", "multicore"])
def test_ddp_example_under_torchrun(tmp_path, variant):
    out = tmp_path / "ddp.json"
    env = {k: v for k, v in os.environ.items() if k != "OC_NUM_CORES"}
    env.update(OPCORE_MLP_BUILD=str(tmp_path / "build"), GLOO_SOCKET_IFNAME="lo")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           str(EXAMPLE), "--variant", variant, "--max-steps", "40", "--no-progress",
           "--data-dir", str(_data_dir(tmp_path)), "--json", str(out)]
    try:
        p = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"torchrun timed out after 300 s: {' '.join(cmd)}\n{e.stdout}\n{e.stderr}")
    assert p.returncode == 0, f"exit {p.returncode}: {' '.join(cmd)}\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}"
    assert "Replicas identical: yes" in p.stdout, p.stdout
    r = json.loads(out.read_text())
    assert r["world"] == 2 and r["identical"] and r["steps"] == 40
    # CPUs / 2 ranks, at least 1: what the example recommends and sets
    assert r["oc_num_cores"] == max(1, len(os.sched_getaffinity(0)) // 2)
    assert r["torch_threads"] == r["oc_num_cores"]
    # each rank trained on its own shard: the same weights, different last losses
    assert len(r["final_losses"]) == 2 and all(np.isfinite(r["final_losses"]))
    assert r["final_losses"][0] != r["final_losses"][1]


def test_ddp_example_outside_torchrun_says_how_to_run_it():
    p = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=120,
                       env={k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")})
    assert p.returncode != 0 and "run this under torchrun" in p.stderr
