"""Tests for the MLP tutorial (examples/mlp): the IDX reader, the opcore
model's exact agreement with the torch.relu baseline, test-set accuracy, and
data-parallel training with torch.distributed (gloo, 2 processes).

The checks that load the opcore ReLU run in a subprocess (this file run as a
script: `python test_mlp.py exact|ddp ...`), because every examples/relu
variant registers the library `my_ops` and a process can hold only one.
"""
import gzip
import hashlib
import json
import os
import socket
import struct
import subprocess
import sys

import numpy as np
import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
MLP_DIR = os.path.join(REPO, "examples", "mlp")
sys.path.insert(0, MLP_DIR)

import data  # noqa: E402
import loop  # noqa: E402
from model import MLP  # noqa: E402


def _find_mnist_t10k():
    for d in (os.environ.get("OPCORE_MNIST_T10K"),
              os.path.join(os.path.dirname(REPO), "shared", "data", "mnist-t10k"),
              "/work/shared/data/mnist-t10k"):
        if d and os.path.isfile(os.path.join(d, "t10k-images-idx3-ubyte.gz")):
            return d
    return None


MNIST_T10K = _find_mnist_t10k()
FASHION = data.DEFAULT_DATA_DIR if os.path.isfile(
    os.path.join(data.DEFAULT_DATA_DIR, "train-images-idx3-ubyte.gz")) else None
need_mnist = pytest.mark.skipif(MNIST_T10K is None, reason="real MNIST t10k not found")
need_fashion = pytest.mark.skipif(FASHION is None,
                                  reason="Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)")


def _opcore_ready():
    try:
        import opcore.custom_op  # noqa: F401
    except Exception:
        return False
    return os.path.isfile(os.path.join(REPO, "examples", "relu", "shape.c"))


need_opcore = pytest.mark.skipif(not _opcore_ready(),
                                 reason="opcore package or examples/relu not available")


# ---- IDX reader -------------------------------------------------------------

def idx_bytes(arr, code=0x08):
    arr = np.asarray(arr)
    dt = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}[code]
    head = bytes([0, 0, code, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape)
    return head + arr.astype(dt).tobytes()


def write_split(d, split="test", n=5, gz=True, images=None, labels=None):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8) if images is None else images
    labels = rng.integers(0, 10, n, dtype=np.uint8) if labels is None else labels
    stem = "t10k" if split == "test" else "train"
    for kind, arr in (("images-idx3", images), ("labels-idx1", labels)):
        b = idx_bytes(arr)
        name = f"{stem}-{kind}-ubyte" + (".gz" if gz else "")
        with open(os.path.join(d, name), "wb") as f:
            f.write(gzip.compress(b) if gz else b)
    return images, labels


@need_mnist
def test_real_mnist_t10k():
    gz = os.path.join(MNIST_T10K, "t10k-images-idx3-ubyte.gz")
    with open(gz, "rb") as f:
        assert hashlib.md5(f.read()).hexdigest() == "9fb629c4189551a2d022fa330f9573f3"
    images, labels = data.load_split(MNIST_T10K, "test")
    assert images.shape == (10000, 28, 28) and images.dtype == np.uint8
    assert labels.shape == (10000,) and labels.dtype == np.uint8
    assert set(np.unique(labels).tolist()) == set(range(10))
    assert np.bincount(labels).tolist() == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    assert images.max() == 255 and images.min() == 0
    # the raw reader agrees with the gzip reader
    assert np.array_equal(data.read_idx(gz), images)


@need_mnist
def test_real_mnist_without_train_split_names_the_missing_file():
    with pytest.raises(data.DatasetError, match="missing train-images-idx3-ubyte"):
        data.load_split(MNIST_T10K, "train")


@need_fashion
def test_fashion_mnist_default():
    im, lb = data.load_split(split="train")
    assert im.shape == (60000, 28, 28) and lb.shape == (60000,)
    assert np.bincount(lb).tolist() == [6000] * 10


@pytest.mark.parametrize("gz", [True, False])
def test_roundtrip_gzip_and_raw(tmp_path, gz):
    images, labels = write_split(str(tmp_path), gz=gz)
    im, lb = data.load_split(str(tmp_path), "test")
    assert np.array_equal(im, images) and np.array_equal(lb, labels)


def test_gzip_recognised_by_content_not_name(tmp_path):
    p = tmp_path / "t10k-labels-idx1-ubyte"  # gzip data, no .gz suffix
    p.write_bytes(gzip.compress(idx_bytes(np.arange(10, dtype=np.uint8))))
    assert data.read_idx(str(p)).tolist() == list(range(10))


def test_dotted_mnist_names(tmp_path):
    images, labels = write_split(str(tmp_path), gz=False)
    for k in ("images-idx3", "labels-idx1"):
        os.rename(tmp_path / f"t10k-{k}-ubyte", tmp_path / f"t10k-{k.replace('-', '.')}-ubyte")
    im, _ = data.load_split(str(tmp_path), "test")
    assert np.array_equal(im, images)


@pytest.mark.parametrize("code", [0x09, 0x0B, 0x0C, 0x0D, 0x0E])
def test_other_element_types(tmp_path, code):
    arr = np.arange(24).reshape(2, 3, 4)
    p = tmp_path / "x.idx"
    p.write_bytes(idx_bytes(arr, code))
    out = data.read_idx(str(p))
    assert out.shape == (2, 3, 4) and np.array_equal(out, arr)
    assert out.dtype.isnative


def _corrupt(tmp_path, blob, gz=False):
    p = tmp_path / "t10k-images-idx3-ubyte"
    p.write_bytes(gzip.compress(blob) if gz else blob)
    return str(p)


@pytest.mark.parametrize("blob, message", [
    (b"\x00\x00", "shorter than the 4-byte header"),
    (b"\x12\x34\x08\x03" + b"\0" * 12, "bad magic number 0x12340803"),
    (b"\x00\x00\x42\x01\x00\x00\x00\x01x", "unknown IDX element type 0x42"),
    (b"\x00\x00\x08\x00", "0 dimensions"),
    (b"\x00\x00\x08\x03\x00\x00", "truncated IDX header"),
    (idx_bytes(np.zeros((2, 28, 28), np.uint8))[:-5], r"truncated: header says uint8 \[2, 28, 28\]"),
    (idx_bytes(np.zeros((2, 28, 28), np.uint8)) + b"xx", "has trailing bytes"),
])
def test_corrupt_files_name_file_and_problem(tmp_path, blob, message):
    p = _corrupt(tmp_path, blob)
    with pytest.raises(data.DatasetError, match=message) as e:
        data.read_idx(p)
    assert p in str(e.value)


def test_truncated_gzip(tmp_path):
    good = gzip.compress(idx_bytes(np.zeros((3, 28, 28), np.uint8)))
    p = _corrupt(tmp_path, b"")
    open(p, "wb").write(good[: len(good) // 2])
    with pytest.raises(data.DatasetError, match="corrupt gzip data") as e:
        data.read_idx(p)
    assert p in str(e.value)


def test_missing_file(tmp_path):
    with pytest.raises(data.DatasetError, match="no such file"):
        data.read_idx(str(tmp_path / "nope"))
    (tmp_path / "t10k-images-idx3-ubyte.gz").write_bytes(
        gzip.compress(idx_bytes(np.zeros((1, 28, 28), np.uint8))))
    with pytest.raises(data.DatasetError, match="missing t10k-labels-idx1-ubyte.gz"):
        data.load_split(str(tmp_path), "test")


def test_missing_default_dir_says_what_to_install(tmp_path, monkeypatch):
    fake = str(tmp_path / "fashion-mnist")
    monkeypatch.setattr(data, "DEFAULT_DATA_DIR", fake)
    with pytest.raises(data.DatasetError, match=r"sudo apt-get install dataset-fashion-mnist"):
        data.load_split(fake, "train")
    with pytest.raises(data.DatasetError, match="no such directory"):
        data.load_split(str(tmp_path / "elsewhere"), "train")


def test_semantic_checks(tmp_path):
    d = str(tmp_path)
    write_split(d, images=np.zeros((4, 28, 28), np.uint8), labels=np.zeros(3, np.uint8))
    with pytest.raises(data.DatasetError, match="3 labels but .* has 4 images"):
        data.load_split(d, "test")
    write_split(d, images=np.zeros((2, 28, 28), np.uint8), labels=np.array([1, 12], np.uint8))
    with pytest.raises(data.DatasetError, match="label 12 out of range"):
        data.load_split(d, "test")
    write_split(d, images=np.zeros((2, 32, 32), np.uint8), labels=np.zeros(2, np.uint8))
    with pytest.raises(data.DatasetError, match=r"expected uint8 images \[N, 28, 28\]"):
        data.load_split(d, "test")


def test_script_reports_missing_data_without_traceback(tmp_path):
    r = subprocess.run([sys.executable, os.path.join(MLP_DIR, "train_cpu.py"),
                        "--data-dir", str(tmp_path), "--epochs", "1"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "error:" in r.stderr and "missing train-images-idx3-ubyte" in r.stderr
    assert "Traceback" not in r.stderr


def test_batches(tmp_path):
    images, labels = write_split(str(tmp_path), n=70)
    b = data.batches(str(tmp_path), "test", batch_size=32)
    shapes = [(x.shape, y.shape) for x, y in b]
    assert len(b) == 3 and shapes[-1] == (torch.Size([6, 784]), torch.Size([6]))
    x, y = next(iter(b))
    assert x.dtype == torch.float32 and y.dtype == torch.int64
    assert torch.allclose(x[0], torch.from_numpy(images[0].reshape(-1) / 255.0).float())


# ---- the model and the training loop ---------------------------------------

# The control: the seeds' autograd.Function pattern around torch's own relu
# kernels (the bench's ceiling model). It exercises the autograd.Function
# path of the equality tests without opcore.
sys.path.insert(0, os.path.join(REPO, "bench"))
from mlp_bench import TorchReluFunction  # noqa: E402


def synthetic_batches(n=32 * 12, seed=1):
    g = torch.Generator().manual_seed(seed)
    b = data.Batches.__new__(data.Batches)
    b.x = torch.rand(n, 784, generator=g)
    b.y = torch.randint(0, 10, (n,), generator=g)
    b.batch_size = 32
    return b


def train_losses(relu, batches, steps, seed=0, layers=(120, 84)):
    torch.manual_seed(seed)
    model = MLP(layers=layers, relu=relu)
    r = loop.train(model, batches, epochs=2, max_steps=steps, progress=False, record_losses=True)
    return model, r


def test_model_shapes():
    m = MLP()
    out = m(torch.rand(5, 784))
    assert out.shape == (5, 10)
    assert torch.allclose(out.exp().sum(1), torch.ones(5))
    assert [p.shape for p in m.parameters()] == [
        (120, 784), (120,), (84, 120), (84,), (10, 84), (10,)]
    big = MLP(layers=(4096, 2048))
    assert big.fc2.weight.shape == (2048, 4096)


def test_equal_losses_control_autograd_function():
    b = synthetic_batches()
    m1, r1 = train_losses(None, b, 10)
    m2, r2 = train_losses(TorchReluFunction.apply, b, 10)
    assert len(r1["losses"]) == 20
    for i, (a, c) in enumerate(zip(r1["losses"], r2["losses"])):
        assert torch.equal(a, c), f"step {i}: {a.item()} != {c.item()}"
    for p, q in zip(m1.parameters(), m2.parameters()):
        assert torch.equal(p, q)
    acc, correct, total = loop.evaluate(m1, b)
    assert total == len(b.y) and 0 <= correct <= total and acc == correct / total


def test_training_learns_and_reports():
    b = synthetic_batches()
    # make the labels learnable: a function of the input
    b.y = (b.x[:, :10].argmax(1)).long()
    torch.manual_seed(0)
    r = loop.train(MLP(), b, epochs=3, lr=0.2, max_steps=12, progress=False, record_losses=True)
    assert r["throughput"] > 0 and r["steps"] == 36 and len(r["losses"]) == 36
    first, last = sum(r["losses"][:12]) / 12, sum(r["losses"][-12:]) / 12
    assert last < first, (first, last)


def test_interleaved_equals_separate_runs():
    b = synthetic_batches(n=32 * 7)
    torch.manual_seed(0)
    models = {"a": MLP(), "b": MLP(relu=TorchReluFunction.apply)}
    torch.manual_seed(0)
    models["b"].load_state_dict(models["a"].state_dict())
    r = loop.run_interleaved(models, b, epochs=2, block=3, progress=False)
    m, alone = train_losses(None, b, 7)
    assert r["a"]["final_loss"] == r["b"]["final_loss"] == float(alone["losses"][-1])
    assert r["a"]["steps"] == r["b"]["steps"] == 14 and r["a"]["throughput"] > 0
    for p, q in zip(m.parameters(), models["b"].parameters()):
        assert torch.equal(p, q)
    r = loop.run_interleaved({"x": MLP(layers=(16, 8))}, b, epochs=1, train=False, progress=False)
    assert r["x"]["final_loss"] is None and r["x"]["throughput"] > 0


@pytest.mark.parametrize("train,warmup,turns", [(True, 2, 3), (False, 2, 3), (True, 4, 2)])
def test_interleaved_turn_seconds(train, warmup, turns):
    # 7 batches in turns of 3: chunks [0:3] [3:6] [6:7]; with warmup 4 the
    # first chunk has no timed step and is left out
    b = synthetic_batches(n=32 * 7)
    models = {n: MLP(layers=(16, 8)) for n in ("a", "b", "c")}
    r = loop.run_interleaved(models, b, epochs=2, block=3, warmup=warmup, train=train,
                             progress=False)
    for n in models:
        ts = r[n]["turn_seconds"]
        assert len(ts) == turns and all(t > 0 for t in ts)
        # the throughput is the last epoch's timed steps over these turns' sum
        assert r[n]["throughput"] == pytest.approx((7 - warmup) / sum(ts), rel=1e-12)
        assert r[n]["steps"] == 14


def test_infer_loop():
    b = synthetic_batches(n=32 * 5)
    r = loop.infer(MLP(layers=(64, 32)), b, epochs=1, progress=False)
    assert r["throughput"] > 0 and r["steps"] == 5


def test_progress_bar_draws(capsys):
    p = loop.Progress(3, "x", enabled=True)
    for _ in range(3):
        p.update(1, "loss 1.0")
    p.close()
    err = capsys.readouterr().err
    assert "3/3" in err and "#" in err


# ---- the opcore ReLU, in subprocesses ---------------------------------------

def _run_self(*args, timeout=600):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.join(REPO, "python"), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, os.path.abspath(__file__), *args],
                       capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO)
    assert r.returncode == 0, f"{args} failed:\n{r.stdout}\n{r.stderr}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def _exact_main(variant, steps, data_dir):
    """Train baseline and opcore with the same seed on the same batches;
    report whether every step's loss and the final weights are equal."""
    if variant == "control":
        relu = TorchReluFunction.apply
    else:
        import my_ops
        my_ops.load(variant)
        relu = my_ops.Relu.apply
    torch.set_num_threads(1)
    if data_dir:
        b = data.batches(data_dir, "train", 32, limit=32 * steps)
        tb = data.batches(data_dir, "test", 32, limit=2000)
    else:
        b, tb = synthetic_batches(32 * steps), synthetic_batches(320, seed=2)
    m1, r1 = train_losses(None, b, steps)
    m2, r2 = train_losses(relu, b, steps)
    mismatch = [i for i, (a, c) in enumerate(zip(r1["losses"], r2["losses"])) if not torch.equal(a, c)]
    params_equal = all(torch.equal(p, q) for p, q in zip(m1.parameters(), m2.parameters()))
    acc1, acc2 = loop.evaluate(m1, tb)[0], loop.evaluate(m2, tb)[0]
    print(json.dumps(dict(steps=len(r1["losses"]), mismatch=mismatch, params_equal=params_equal,
                          losses=[float(x) for x in r2["losses"]], acc_base=acc1, acc_opcore=acc2)))


def test_exact_subprocess_control():
    r = _run_self("exact", "control", "8", "")
    assert r["steps"] == 16 and r["mismatch"] == [] and r["params_equal"]


@need_opcore
@pytest.mark.parametrize("variant", ["elementwise", "multicore"])
def test_opcore_loss_equals_baseline_every_step(variant):
    r = _run_self("exact", variant, "30", FASHION or "")
    assert r["steps"] == 60
    assert r["mismatch"] == [], f"losses differ at steps {r['mismatch']}"
    assert r["params_equal"]
    assert r["acc_opcore"] == r["acc_base"] and 0.0 <= r["acc_opcore"] <= 1.0
    if FASHION:
        assert r["acc_opcore"] > 0.15  # 60 steps of SGD on 960 images already beat chance (0.1)


# ---- scale-out: torch.distributed, gloo, 2 processes ------------------------

def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ddp_worker(rank, world, port, variant, steps, out):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.set_num_threads(1)
    if variant == "control":
        relu = TorchReluFunction.apply
    else:
        import my_ops
        my_ops.load(variant)
        relu = my_ops.Relu.apply
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=world)
    try:
        torch.manual_seed(0)
        model = DDP(MLP(relu=relu))
        init = [p.detach().clone() for p in model.parameters()]
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        loss_fn = torch.nn.NLLLoss()
        # each rank trains on its own data: only the gradient all-reduce
        # keeps the replicas equal
        b = synthetic_batches(32 * steps, seed=100 + rank)
        losses = []
        for x, y in b:
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
        flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        gathered = [torch.empty_like(flat) for _ in range(world)]
        dist.all_gather(gathered, flat)
        moved = any(not torch.equal(p, q) for p, q in zip(init, model.parameters()))
        if rank == 0:
            with open(out, "w") as f:
                json.dump(dict(identical=all(torch.equal(gathered[0], g) for g in gathered[1:]),
                               moved=moved, losses=losses, world=world), f)
        dist.barrier()  # both ranks done before either tears the connections down
    finally:
        # DDP's reducer and the collectives' results can still be referenced
        # by gloo's work objects; release them while the group is alive, or
        # gloo's threads may abort the process at teardown (a PyTorch race
        # seen with and without opcore ops).
        model = opt = gathered = None  # noqa: F841
        import gc
        gc.collect()
        dist.destroy_process_group()
    # Done and torn down: leave without interpreter finalization, where
    # gloo's threads can still abort the process (pytorch#179291). Only on
    # success: an exception above propagates and fails the test.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _ddp_main(variant, steps, out):
    import torch.multiprocessing as mp
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    mp.spawn(_ddp_worker, args=(2, _free_port(), variant, int(steps), out), nprocs=2, join=True)
    with open(out) as f:
        print(f.read())


@pytest.mark.parametrize("variant", ["control", pytest.param("elementwise", marks=need_opcore)])
def test_ddp_two_processes_gloo(tmp_path, variant):
    r = _run_self("ddp", variant, "5", str(tmp_path / "ddp.json"), timeout=300)
    assert r["world"] == 2 and r["identical"] and r["moved"]
    assert len(r["losses"]) == 5


if __name__ == "__main__":
    mode, *rest = sys.argv[1:]
    {"exact": lambda v, s, d: _exact_main(v, int(s), d), "ddp": _ddp_main}[mode](*rest)
