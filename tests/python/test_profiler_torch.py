"""One timeline with PyTorch: opcore.profiler.profile(torch=True) runs
torch.profiler alongside and merges its events, so a training step shows
PyTorch's own operators (the matmuls, the optimizer, autograd) and opcore's
per-core kernels together -- in the Chrome trace (Perfetto), in the XSpace
(TensorBoard / xprof), the summary and the HTML report.

Alignment of the two clocks is checked by causality: PyTorch records its
span of an opcore op (torch.ops.my_ops.relu_forward) around the call, so
opcore's own span of that call, and each kernel it ran on the engine's
cores, must lie inside PyTorch's span -- exactly, on the converted clock."""
import pytest

torch = pytest.importorskip("torch")
profiler = pytest.importorskip("opcore.profiler")
from opcore import _C  # noqa: E402
from test_profiler_support import (BWD, FWD, datatable, inside, load_trace, process_names, quiet_env,  # noqa: E402,F401
                                   relu_ops, spans, thread_names, train, xprof_tool)

STEPS = 3


@pytest.fixture(scope="module")
def run(relu_ops, tmp_path_factory):
    with quiet_env(), profiler.profile(logdir=str(tmp_path_factory.mktemp("torch_logs")), run_name="both",
                                       torch=True) as p:
        train(STEPS)
    return p


def test_torch_ops_and_opcore_lanes_in_one_chrome_trace(run):
    tr = load_trace(run)
    torch_ops = {e["name"] for e in spans(tr, cat="cpu_op")}
    # the model's matmuls (forward addmm, backward mm), the loss, the SGD update
    assert {"aten::linear", "aten::addmm", "aten::mm", "aten::nll_loss_forward", "aten::add_"} <= torch_ops
    assert any(e["name"].startswith("Optimizer.step#SGD.step") for e in spans(tr, cat="user_annotation"))
    names = thread_names(tr)
    ncores = tr["otherData"]["engine_cores"]
    kernels = spans(tr, cat="kernel")
    assert {names[(e["pid"], e["tid"])] for e in kernels} == {f"core {c}" for c in range(ncores)}
    # PyTorch's operators are on the opcore host tracks of their threads
    calls = spans(tr, cat="call")
    assert len(calls) == 2 * STEPS
    for c in calls:
        assert any(e["tid"] == c["tid"] and e["pid"] == c["pid"] for e in spans(tr, cat="cpu_op"))
    assert all(e["args"]["source"] == "torch" for e in spans(tr, cat="cpu_op"))


def test_one_clock(run):
    tr = load_trace(run)
    torch_ops = spans(tr, cat="cpu_op")
    kernels = spans(tr, cat="kernel")
    ncores = tr["otherData"]["engine_cores"]
    for c in spans(tr, cat="call"):
        # PyTorch's span of the same op, on the same thread, encloses opcore's
        outer = [t for t in torch_ops if t["name"] == c["name"] and t["tid"] == c["tid"] and inside(c, t)]
        assert len(outer) == 1, (c, [t for t in torch_ops if t["name"] == c["name"]])
        # the call's kernels: one per core, inside the call, hence inside PyTorch's span
        mine = [k for k in kernels if k["name"] == c["name"] and inside(k, c)]
        assert sorted(k["args"]["core"] for k in mine) == list(range(ncores))
        assert all(inside(k, outer[0]) for k in mine)
    # and opcore's named blocks contain PyTorch's ops of that block
    lb = spans(tr, cat="block", name="loss_backward")
    assert len(lb) == STEPS
    mm = [t for t in torch_ops if t["name"] == "aten::mm"]
    assert mm and all(any(inside(t, b) for b in lb) for t in mm)


def test_xprof_shows_torch_ops(run):
    tv = xprof_tool(run.xplane_path, "trace_viewer")
    ev = tv["traceEvents"]
    procs = process_names(tv)
    host = next(pid for pid, n in procs.items() if n == "/host:CPU")
    engine = next(pid for pid, n in procs.items() if n.startswith("/device:GPU:0"))
    x = [e for e in ev if e.get("ph") == "X"]
    main = {(e["name"], e["tid"]) for e in x if e["pid"] == host}
    addmm_tids = {t for n, t in main if n == "aten::addmm"}
    assert addmm_tids and addmm_tids & {t for n, t in main if n == FWD}  # one host line for both
    assert any(e["pid"] == engine and e["name"] == FWD for e in x)
    rows = datatable(xprof_tool(run.xplane_path, "framework_op_stats")[0])
    host_rows = {r["operation"]: r for r in rows if r["host_or_device"] == "Host"}
    assert host_rows["aten/addmm"]["type"] == "addmm" and host_rows["aten/addmm"]["occurrences"] == 2 * STEPS
    assert host_rows["aten/linear"]["total_self_time"] < host_rows["aten/linear"]["total_time"]  # addmm inside
    # PyTorch's record of the call into opcore is not counted a second time
    assert host_rows["my_ops/relu_forward"]["occurrences"] == STEPS


def test_summary_lists_torch_ops_after_opcore_ops(run):
    ops = run.summary["ops"]
    sources = [o["source"] for o in ops]
    assert sources[:2] == ["opcore", "opcore"] and set(sources[2:]) == {"torch"}
    by = {o["op"]: o for o in ops}
    assert by[FWD]["calls"] == STEPS and by[BWD]["calls"] == STEPS
    assert by["aten::addmm"]["calls"] == 2 * STEPS and by["aten::addmm"]["kernels"] == 0
    assert run.summary["imported_events"] > 0
    assert run.torch_profiler is not None  # PyTorch's own profile object, e.g. for key_averages()
    assert any(k.key == "aten::addmm" for k in run.torch_profiler.key_averages())


def test_import_errors(tmp_path):
    with pytest.raises(ValueError, match="no profile is running"):
        _C.profiler_import("torch", 1, [("x", None, None, 1, 1, 2, False)])
    with quiet_env(), profiler.profile(logdir=str(tmp_path)):
        with pytest.raises(ValueError, match="ends .* before it starts"):
            _C.profiler_import("torch", 1, [("x", "cpu_op", None, 1, 10, 5, True)])
        with pytest.raises(TypeError, match="span 0 is not a tuple"):
            _C.profiler_import("torch", 1, ["x"])
        with pytest.raises(ValueError, match="not an XSpace"):
            _C.profiler_import_xspace("jax", b"\xff\xff\xff")
