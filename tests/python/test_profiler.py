"""opcore.profiler (issue 5): profile a torch training loop that uses an
opcore op, then check every output — the gzipped Chrome trace, the XSpace
read back by xprof's own conversion code, the summary, and the HTML report
rendered by headless Chromium."""
import gzip
import importlib.util
import json
import os
import shutil
import subprocess
import threading

import pytest

torch = pytest.importorskip("torch")
opcore = pytest.importorskip("opcore")
custom_op = pytest.importorskip("opcore.custom_op")
profiler = pytest.importorskip("opcore.profiler")
from opcore import _C  # noqa: E402

if not hasattr(_C, "profiler_start"):
    pytest.skip("opcore._C has no profiler methods (oc_py_profiler_methods not wired)",
                allow_module_level=True)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# examples/profiler/demo.py (seed 004's demo), by path: examples/mlp has a demo.py too
_spec = importlib.util.spec_from_file_location("profiler_demo", os.path.join(REPO, "examples", "profiler", "demo.py"))
demo = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(demo)
FWD = "my_ops::relu_forward"
BWD = "my_ops::relu_backward"


@pytest.fixture(autouse=True)
def _quiet_and_fixed_bw(monkeypatch):
    monkeypatch.setenv("OPCORE_PROFILE_QUIET", "1")
    monkeypatch.setenv("OPCORE_MEMBW_GBPS", "20")


@pytest.fixture(scope="module")
def relu_ops(tmp_path_factory):
    try:  # another test module may have loaded a my_ops ReLU already
        torch.ops.my_ops.relu_forward
    except (AttributeError, RuntimeError):
        demo.load_relu(multicore=True, build_directory=str(tmp_path_factory.mktemp("relu_build")))
    return torch.ops.my_ops


# The seed 004 demo's own ReLU (forward and backward are opcore ops).
Relu = demo.Relu


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 256)
        self.fc2 = torch.nn.Linear(256, 10)

    def forward(self, x):
        return torch.log_softmax(self.fc2(Relu.apply(self.fc1(x))), dim=1)


STEPS = 5


def train(steps=STEPS):
    torch.manual_seed(0)
    with profiler.trace("model_setup"):
        model = MLP()
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(steps):
        profiler.step(step)
        x = torch.randn(32, 64)
        y = torch.randint(0, 10, (32,))
        opt.zero_grad()
        with profiler.trace("model_build"):
            loss = torch.nn.functional.nll_loss(model(x), y)
        with profiler.trace("loss_backward"):
            loss.backward()
        with profiler.trace("optimizer_step"):
            opt.step()


@pytest.fixture(scope="module")
def torch_profile(relu_ops, tmp_path_factory):
    logdir = tmp_path_factory.mktemp("logs")
    mp = pytest.MonkeyPatch()
    mp.setenv("OPCORE_PROFILE_QUIET", "1")
    mp.setenv("OPCORE_MEMBW_GBPS", "20")
    try:
        with profiler.profile(logdir=str(logdir), run_name="torch") as p:
            assert profiler.enabled()
            train()
    finally:
        mp.undo()
    assert not profiler.enabled()
    return p


def load_trace(p):
    with gzip.open(p.trace_path, "rt", encoding="utf-8") as f:
        return json.load(f)


def test_outputs_exist(torch_profile):
    p = torch_profile
    assert p.run_name == "torch"
    assert p.run_dir == os.path.join(p.logdir, "plugins", "profile", "torch")
    for path in (p.trace_path, p.xplane_path, p.summary_json_path, p.summary_csv_path, p.html_path):
        assert os.path.getsize(path) > 0, path
    assert os.path.dirname(p.xplane_path) == p.run_dir
    assert p.xplane_path.endswith(".xplane.pb")


def test_chrome_trace_has_every_core_steps_and_blocks(torch_profile):
    tr = load_trace(torch_profile)
    ev = tr["traceEvents"]
    ncores = tr["otherData"]["engine_cores"]
    assert ncores >= 1
    names = {(e["pid"], e.get("tid")): e["args"]["name"] for e in ev
             if e["ph"] == "M" and e["name"] == "thread_name"}
    core_tracks = {k: v for k, v in names.items() if v.startswith("core ")}
    assert sorted(core_tracks.values())[:ncores] == sorted(f"core {i}" for i in range(ncores))
    kernels = [e for e in ev if e["ph"] == "X" and e.get("cat") == "kernel"]
    # every forward and backward ReLU ran on every core
    for op in (FWD, BWD):
        mine = [e for e in kernels if e["name"] == op]
        cores = {e["args"]["core"] for e in mine}
        assert cores == set(range(mine[0]["args"]["ncores"])), (op, cores)
        assert sum(1 for e in kernels if e["name"] == op and e["args"]["core"] == 0) == STEPS
    k = next(e for e in kernels if e["name"] == FWD)
    assert k["args"]["bytes_in"] > 0 and k["args"]["bytes_out"] > 0
    calls = [e for e in ev if e.get("cat") == "call" and e["name"] == FWD]
    assert len(calls) == STEPS
    blocks = {e["name"] for e in ev if e.get("cat") == "block"}
    assert {"model_setup", "model_build", "loss_backward", "optimizer_step"} <= blocks
    steps = sorted(e["args"]["step"] for e in ev if e["ph"] == "X" and e.get("cat") == "step")
    assert steps == list(range(STEPS))
    # nesting: the forward call lies inside a model_build block on the same thread
    mb = [e for e in ev if e.get("cat") == "block" and e["name"] == "model_build"]
    c = calls[0]
    assert any(b["tid"] == c["tid"] and b["ts"] <= c["ts"] and c["ts"] + c["dur"] <= b["ts"] + b["dur"] + 1e-3
               for b in mb)
    # the backward ReLU runs on autograd's thread, inside loss_backward on the main thread
    bwd_call = next(e for e in ev if e.get("cat") == "call" and e["name"] == BWD)
    lb = [b for b in ev if b.get("cat") == "block" and b["name"] == "loss_backward"]
    assert any(b["ts"] <= bwd_call["ts"] <= b["ts"] + b["dur"] for b in lb)


def test_summary(torch_profile):
    s = torch_profile.summary
    assert s["membw_gbps"] == 20.0
    ops = {o["op"]: o for o in s["ops"]}
    for op in (FWD, BWD):
        o = ops[op]
        assert o["calls"] == STEPS
        assert o["min_us"] <= o["mean_us"] <= o["max_us"]
        assert len(o["core_ms"]) == s["engine_cores"]
        assert all(t > 0 for t in o["core_ms"][:o["ncores"]])
        assert o["balance"] >= 1.0
        assert o["bytes"] > 0 and o["gbps"] > 0
        assert abs(o["membw_fraction"] - o["gbps"] / 20.0) < 1e-3
    # forward reads x and writes y: 32*256 floats each per step
    assert ops[FWD]["bytes"] >= STEPS * 32 * 256 * 4
    blocks = {b["name"]: b for b in s["blocks"]}
    assert blocks["loss_backward"]["count"] == STEPS
    assert s["steps"] == STEPS
    with open(torch_profile.summary_csv_path) as f:
        header = f.readline().strip().split(",")
        rows = [line.split(",") for line in f]
    assert header[:3] == ["op", "calls", "total_ms"]
    assert {r[0] for r in rows} >= {FWD, BWD}


def test_xprof_reads_the_xplane(torch_profile):
    raw_to_tool_data = pytest.importorskip("xprof.convert.raw_to_tool_data")
    path = torch_profile.xplane_path
    assert "trace_viewer" in ",".join(raw_to_tool_data.xspace_to_tool_names([path]))
    data, content_type = raw_to_tool_data.xspace_to_tool_data([path], "trace_viewer", {})
    assert content_type == "application/json"
    tv = json.loads(data)
    ev = tv["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e["name"] == "process_name"}
    assert "/host:CPU" in procs.values() and "/device:CUSTOM:0" in procs.values()
    engine = next(pid for pid, n in procs.items() if n == "/device:CUSTOM:0")
    threads = {e["tid"]: e["args"]["name"] for e in ev
               if e.get("ph") == "M" and e["name"] == "thread_name" and e["pid"] == engine}
    ncores = torch_profile.summary["engine_cores"]
    assert sorted(threads.values()) == sorted(f"core {i}" for i in range(ncores))
    assert ncores >= 1
    spans = [e for e in ev if e.get("ph") == "X"]
    fwd = [e for e in spans if e["pid"] == engine and e["name"] == FWD]
    assert len(fwd) == STEPS * int(fwd[0]["args"]["ncores"])
    assert int(fwd[0]["args"]["bytes_in"]) > 0
    names = {e["name"] for e in spans}
    assert {BWD, "model_build", "loss_backward", "optimizer_step", "step 0"} <= names
    # the other tools do not choke on it either
    for tool in ("overview_page", "framework_op_stats"):
        raw_to_tool_data.xspace_to_tool_data([path], tool, {})


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def test_html_report_renders_in_headless_chromium(torch_profile, tmp_path):
    exe = _chromium()
    if not exe:
        pytest.skip("no chromium")
    html = torch_profile.html_path
    with open(html, encoding="utf-8") as f:
        text = f.read()
    assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in text
    r = subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         f"--user-data-dir={tmp_path / 'chrome'}", "--dump-dom", "file://" + os.path.abspath(html)],
        capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    dom = r.stdout
    assert FWD in dom and BWD in dom
    assert "core 0" in dom
    assert "<svg" in dom and "<rect" in dom
    assert 'data-ready="1"' in dom  # the report's script ran without error
    assert "loss_backward" in dom


def test_operator_level_and_ms_duration(relu_ops, tmp_path):
    x = torch.randn(1000)
    with profiler.profile(logdir=str(tmp_path), profile_type="operator") as p:
        for _ in range(3):
            torch.ops.my_ops.relu_forward(x)
    cats = {e.get("cat") for e in load_trace(p)["traceEvents"]}
    assert {"kernel", "call"} <= cats
    assert not cats & {"shape", "alloc", "dispatch", "wait"}
    assert p.run_name  # a timestamp

    import time
    with profiler.profile(logdir=str(tmp_path), ms_duration=50, run_name="short") as p:
        torch.ops.my_ops.relu_forward(x)
        time.sleep(0.15)
        assert not profiler.enabled()
        with profiler.trace("too_late"):
            torch.ops.my_ops.relu_forward(x)
    s = p.summary
    assert s["duration_ms"] <= 50.001
    assert {o["op"]: o for o in s["ops"]}[FWD]["calls"] == 1
    assert "too_late" not in {b["name"] for b in s["blocks"]}


def test_trace_as_decorator_and_in_threads(relu_ops, tmp_path):
    @profiler.trace("worker_block")
    def work():
        torch.ops.my_ops.relu_forward(torch.randn(4096))

    with profiler.profile(logdir=str(tmp_path), run_name="threads") as p:
        ts = [threading.Thread(target=work, name=f"w{i}") for i in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    ev = load_trace(p)["traceEvents"]
    blocks = [e for e in ev if e.get("cat") == "block" and e["name"] == "worker_block"]
    assert len(blocks) == 4 and len({b["tid"] for b in blocks}) == 4
    assert {o["op"]: o for o in p.summary["ops"]}[FWD]["calls"] == 4


def test_errors(tmp_path):
    with pytest.raises(ValueError):
        profiler.profile(profile_type="nope")
    with pytest.raises(ValueError):
        profiler.profile(ms_duration=-5)
    with pytest.raises(ValueError, match="run_name"):
        profiler.profile(logdir=str(tmp_path), run_name="a/b").start()
    with profiler.profile(logdir=str(tmp_path)):
        with pytest.raises(RuntimeError, match="already running"):
            profiler.profile(logdir=str(tmp_path)).start()
    with pytest.raises(ValueError, match="no open block"):
        _C.profiler_end()
    assert profiler.membw_gbps() == 20.0


def test_jax_ops_are_recorded(relu_ops, tmp_path):
    jax = pytest.importorskip("jax")
    ojax = pytest.importorskip("opcore.jax")
    import numpy as np
    relu = ojax.op(FWD)
    f = jax.jit(lambda x: relu(x) * 2)
    x = np.random.default_rng(0).standard_normal((64, 256), dtype=np.float32)
    f(x).block_until_ready()  # compile outside the profile
    with profiler.profile(logdir=str(tmp_path), run_name="jax") as p:
        for i in range(3):
            profiler.step(i)
            with profiler.trace("jax_step"):
                np.testing.assert_allclose(f(x), np.maximum(x, 0) * 2, rtol=1e-6)
    ev = load_trace(p)["traceEvents"]
    kernels = [e for e in ev if e["ph"] == "X" and e.get("cat") == "kernel" and e["name"] == FWD]
    ncores = kernels[0]["args"]["ncores"]
    assert {e["args"]["core"] for e in kernels} == set(range(ncores))
    assert len(kernels) == 3 * ncores
    assert sum(1 for e in ev if e.get("cat") == "block" and e["name"] == "jax_step") == 3
    o = {o["op"]: o for o in p.summary["ops"]}[FWD]
    assert o["calls"] == 3 and o["kernels"] == 3 * ncores
    assert o["bytes"] >= 3 * 2 * x.nbytes


def test_demo_runs_end_to_end(tmp_path):
    """examples/profiler/demo.py (seed 004's demo) with a tiny number of steps."""
    import sys
    env = dict(os.environ, OPCORE_PROFILE_QUIET="1", OPCORE_MEMBW_GBPS="20")
    logdir = tmp_path / "logs"
    r = subprocess.run(
        [sys.executable, os.path.join(REPO, "examples", "profiler", "demo.py"), "--logdir", str(logdir),
         "--run-name", "demo", "--epochs", "3", "--build-directory", str(tmp_path / "build")],
        capture_output=True, text=True, timeout=300, env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert "End Training" in r.stdout
    for rel in ("demo.trace.json.gz", "demo.summary.json", "demo.summary.csv", "demo.report.html"):
        assert (logdir / rel).stat().st_size > 0, rel
    xplanes = list((logdir / "plugins" / "profile" / "demo").glob("*.xplane.pb"))
    assert len(xplanes) == 1 and xplanes[0].stat().st_size > 0
    s = json.loads((logdir / "demo.summary.json").read_text())
    assert s["steps"] == 3
    blocks = {b["name"]: b["count"] for b in s["blocks"]}
    assert blocks["model_build"] == blocks["loss_backward"] == blocks["optimizer_step"] == 3
    ops = {o["op"]: o for o in s["ops"]}
    assert ops[FWD]["calls"] == 6 and ops[BWD]["calls"] == 6  # two ReLUs per step
