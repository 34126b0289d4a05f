"""Shared pieces of the profiler's tests (test_profiler*.py): the seed 004
demo's ReLU ops, a small MLP training step that uses them, and readers for
the profiler's outputs and xprof's tool data. No tests here."""
import contextlib
import gzip
import importlib.util
import json
import os

import pytest

torch = pytest.importorskip("torch")
profiler = pytest.importorskip("opcore.profiler")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FWD = "my_ops::relu_forward"
BWD = "my_ops::relu_backward"

# examples/profiler/demo.py (seed 004's demo), by path: examples/mlp has a demo.py too
_spec = importlib.util.spec_from_file_location("profiler_demo", os.path.join(REPO, "examples", "profiler", "demo.py"))
demo = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(demo)

# The seed 004 demo's own ReLU (forward and backward are opcore ops).
Relu = demo.Relu


@pytest.fixture(scope="session")
def relu_ops(tmp_path_factory):
    """torch.ops.my_ops with the demo's multicore ReLU loaded."""
    try:  # another test module may have loaded a my_ops ReLU already
        torch.ops.my_ops.relu_forward
    except (AttributeError, RuntimeError):
        demo.load_relu(multicore=True, build_directory=str(tmp_path_factory.mktemp("relu_build")))
    return torch.ops.my_ops


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 256)
        self.fc2 = torch.nn.Linear(256, 10)

    def forward(self, x):
        return torch.log_softmax(self.fc2(Relu.apply(self.fc1(x))), dim=1)


def train(steps):
    """`steps` SGD steps of MLP, each with a step marker and the seed's
    named blocks model_build / loss_backward / optimizer_step."""
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


@contextlib.contextmanager
def quiet_env():
    """For the block: the summary not printed and a fixed bandwidth."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPCORE_PROFILE_QUIET", "1")
        mp.setenv("OPCORE_MEMBW_GBPS", "20")
        yield


def load_trace(p):
    """The Chrome trace of a stopped profile."""
    with gzip.open(p.trace_path, "rt", encoding="utf-8") as f:
        return json.load(f)


def spans(trace, **match):
    """The complete events ("X") of a Chrome trace whose fields equal `match`."""
    return [e for e in trace["traceEvents"]
            if e.get("ph") == "X" and all(e.get(k) == v for k, v in match.items())]


def thread_names(trace):
    """{(pid, tid): name} of a Chrome trace (or of xprof's trace_viewer data)."""
    return {(e["pid"], e.get("tid")): e["args"]["name"] for e in trace["traceEvents"]
            if e.get("ph") == "M" and e["name"] == "thread_name"}


def process_names(trace):
    """{pid: name} of a Chrome trace (or of xprof's trace_viewer data)."""
    return {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
            if e.get("ph") == "M" and e["name"] == "process_name"}


def inside(inner, outer, slack_us=0.0):
    """True if span `inner` lies within span `outer` (Chrome-trace us; the
    small default slack is for the 3-decimal rounding of "ts"/"dur")."""
    eps = 0.0015 + slack_us
    return outer["ts"] - eps <= inner["ts"] and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + eps


def xprof_tool(xplane_path, tool, params=None):
    """xprof's own conversion of an .xplane.pb for `tool`, parsed."""
    raw_to_tool_data = pytest.importorskip("xprof.convert.raw_to_tool_data")
    data, content_type = raw_to_tool_data.xspace_to_tool_data([xplane_path], tool, params or {})
    assert data is not None, f"xprof produced nothing for {tool}"
    assert content_type == "application/json", content_type
    return json.loads(data)


def datatable(table):
    """A Google-charts DataTable of xprof's tool data as a list of dicts."""
    ids = [c["id"] for c in table["cols"]]
    return [dict(zip(ids, [c.get("v") for c in row["c"]])) for row in table.get("rows") or []]


def step_rows(tables):
    """The per-step table (the one with "stepTimeMs") of an xprof tool's data, as dicts."""
    return next(datatable(t) for t in tables if any(c["id"] == "stepTimeMs" for c in t.get("cols", [])))
