"""xprof (TensorBoard's profile plugin, from PyPI) shows an opcore profile in
its main tools: the profile of a real training loop (the demo's multicore
ReLU in an MLP, step markers, named blocks) is converted with xprof's own
converters (xprof.convert.raw_to_tool_data) and each tool's data is checked
against what opcore's summary says."""
import pytest

profiler = pytest.importorskip("opcore.profiler")
pytest.importorskip("xprof.convert.raw_to_tool_data")
from test_profiler_support import (BWD, FWD, datatable, process_names, quiet_env,  # noqa: E402,F401
                                   relu_ops, step_rows, train, xprof_tool)

# xprof drops the first and last step of a profile with more than 5 steps
STEPS = 4


@pytest.fixture(scope="module")
def run(relu_ops, tmp_path_factory):
    with quiet_env(), profiler.profile(logdir=str(tmp_path_factory.mktemp("xprof_logs")), run_name="xprof") as p:
        train(STEPS)
    return p


def ops(run):
    return {o["op"]: o for o in run.summary["ops"]}


def test_tool_list(run):
    from xprof.convert import raw_to_tool_data
    names = set(raw_to_tool_data.xspace_to_tool_names([run.xplane_path]))
    assert {"trace_viewer@", "overview_page", "input_pipeline_analyzer", "framework_op_stats",
            "op_profile"} <= names


def test_trace_viewer(run):
    tv = xprof_tool(run.xplane_path, "trace_viewer")
    ev = tv["traceEvents"]
    procs = process_names(tv)
    engine = next(pid for pid, n in procs.items() if n == "/device:GPU:0 (opcore engine)")
    host = next(pid for pid, n in procs.items() if n == "/host:CPU")
    threads = {}
    for e in ev:
        if e.get("ph") == "M" and e["name"] == "thread_name":
            threads.setdefault(e["pid"], {})[e["tid"]] = e["args"]["name"]
    ncores = run.summary["engine_cores"]
    assert ncores >= 1
    # one lane per engine core, and the steps
    assert sorted(threads[engine].values()) == sorted([f"core {i}" for i in range(ncores)] + ["Steps"])
    assert "Steps" in threads[host].values()
    assert any(n.startswith("main (") for n in threads[host].values())
    x = [e for e in ev if e.get("ph") == "X"]
    for op in (FWD, BWD):  # each kernel on each core, under the op's name
        for c in range(ncores):
            lane = next(t for t, n in threads[engine].items() if n == f"core {c}")
            k = [e for e in x if e["pid"] == engine and e["tid"] == lane and e["name"] == op]
            assert len(k) == STEPS, (op, c, len(k))
            assert int(k[0]["args"]["bytes_in"]) > 0
    steps = sorted(e["name"] for e in x if e["pid"] == engine and threads[engine][e["tid"]] == "Steps")
    assert steps == [f"step {i}" for i in range(STEPS)]
    main = [e for e in x if e["pid"] == host and threads[host][e["tid"]].startswith("main (")]
    names = {e["name"] for e in main}
    assert {"model_build", "loss_backward", "optimizer_step", FWD} <= names


def test_overview_page_steps(run):
    tables = xprof_tool(run.xplane_path, "overview_page")
    text = str(tables)
    assert "No step marker observed" not in text and "No step time measured" not in text
    steps = step_rows(tables)
    assert [s["stepnum"] for s in steps] == [str(i) for i in range(STEPS)]
    for s in steps:
        assert s["stepTimeMs"] > 0
        assert 0 < s["deviceComputeTimeMs"] <= s["stepTimeMs"]  # opcore's kernels
        parts = sum(v for k, v in s.items() if k.endswith("TimeMs") and k != "stepTimeMs")
        assert parts == pytest.approx(s["stepTimeMs"], rel=1e-3)
    # the step time breakdown's device compute is the engine's kernel time
    o = ops(run)
    assert sum(s["deviceComputeTimeMs"] for s in steps) <= o[FWD]["kernel_wall_ms"] + o[BWD]["kernel_wall_ms"] + 1e-3
    top = datatable(tables[0])
    assert {r["operation"] for r in top} == {"my_ops/relu_forward", "my_ops/relu_backward"}


def test_input_pipeline_analyzer_steps(run):
    tables = xprof_tool(run.xplane_path, "input_pipeline_analyzer")
    steps = step_rows(tables)
    assert len(steps) == STEPS and all(s["stepTimeMs"] > 0 for s in steps)


def test_framework_op_stats(run):
    rows = datatable(xprof_tool(run.xplane_path, "framework_op_stats")[0])
    o = ops(run)
    for op, path, typ in ((FWD, "my_ops/relu_forward", "relu_forward"), (BWD, "my_ops/relu_backward", "relu_backward")):
        dev = next(r for r in rows if r["host_or_device"] == "Device" and r["operation"] == path)
        assert dev["type"] == typ and dev["occurrences"] == STEPS
        # device time: the op's kernel time summed over the cores
        assert dev["total_time"] == pytest.approx(sum(o[op]["core_ms"]) * 1e3, rel=1e-6, abs=1e-3)
        assert dev["total_self_time"] == pytest.approx(dev["total_time"])
        host = next(r for r in rows if r["host_or_device"] == "Host" and r["operation"] == path)
        assert host["occurrences"] == STEPS  # the op calls
        assert host["total_time"] == pytest.approx(o[op]["total_ms"] * 1e3, rel=1e-6, abs=1e-3)
        assert 0 < host["total_self_time"] <= host["total_time"]


def test_op_profile_per_core(run):
    prof = xprof_tool(run.xplane_path, "op_profile")
    program = next(c for c in prof["byProgram"]["children"] if c["name"] != "IDLE")
    o = ops(run)
    ncores = run.summary["engine_cores"]
    for op, typ, path in ((FWD, "relu_forward", "my_ops/relu_forward"), (BWD, "relu_backward", "my_ops/relu_backward")):
        node = next(c for c in program["children"] if c["name"] == typ)
        assert node["metrics"]["occurrences"] == STEPS * ncores
        per_core = {c["name"]: c for c in node["children"]}
        assert set(per_core) == {f"{path}/core {i}" for i in range(ncores)}
        for i in range(ncores):
            m = per_core[f"{path}/core {i}"]["metrics"]
            assert m["occurrences"] == STEPS
            assert m["rawTime"] / 1e9 == pytest.approx(o[op]["core_ms"][i], abs=1e-6)  # ps vs ms


def test_overview_without_engine_kernels(tmp_path):
    """No opcore kernel ran (PyTorch's ops only, imported): no engine plane,
    so xprof takes the profile as CPU-only and breaks each step into host
    compute from the host step markers."""
    torch = pytest.importorskip("torch")
    m = torch.nn.Linear(64, 64)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    with quiet_env(), profiler.profile(logdir=str(tmp_path), run_name="cpu", torch=True) as p:
        for i in range(STEPS):
            profiler.step(i)
            m(torch.randn(8, 64)).sum().backward()
            opt.step()
    assert p.summary["engine_cores"] == 0
    tables = xprof_tool(p.xplane_path, "overview_page")
    steps = step_rows(tables)
    assert [s["stepnum"] for s in steps] == [f"step {i}" for i in range(STEPS)]
    assert all(0 < s["hostComputeTimeMs"] <= s["stepTimeMs"] and s["deviceComputeTimeMs"] == 0 for s in steps)
    rows = datatable(xprof_tool(p.xplane_path, "framework_op_stats")[0])
    assert any(r["host_or_device"] == "Host" and r["operation"] == "aten/addmm" for r in rows)
