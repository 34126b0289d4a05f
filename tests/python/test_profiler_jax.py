"""opcore's lanes alongside jax.profiler's trace: profile(jax=True) runs
jax.profiler and imports the host events of the XSpace it writes (Python
functions, XLA's CPU thunks), on the same clock. Alignment by causality: the
XLA thunk that runs opcore's FFI handler (the custom call) encloses opcore's
span of that call."""
import pytest

jax = pytest.importorskip("jax")
np = pytest.importorskip("numpy")
ojax = pytest.importorskip("opcore.jax")
profiler = pytest.importorskip("opcore.profiler")
from test_profiler_support import (FWD, inside, load_trace, process_names, quiet_env,  # noqa: E402,F401
                                   relu_ops, spans, thread_names, xprof_tool)

CALLS = 3


@pytest.fixture(scope="module")
def run(relu_ops, tmp_path_factory):
    relu = ojax.op(FWD)
    f = jax.jit(lambda x: relu(x) * 2)
    x = np.random.default_rng(0).standard_normal((64, 256), dtype=np.float32)
    f(x).block_until_ready()  # compile outside the profile
    with quiet_env(), profiler.profile(logdir=str(tmp_path_factory.mktemp("jax_logs")), run_name="jax", jax=True) as p:
        for i in range(CALLS):
            profiler.step(i)
            with profiler.trace("jax_step"):
                np.testing.assert_allclose(f(x), np.maximum(x, 0) * 2, rtol=1e-6)
    return p


def test_jax_events_and_opcore_lanes_on_one_clock(run):
    tr = load_trace(run)
    jx = spans(tr, cat="jax")
    assert jx and all(e["args"]["source"] == "jax" for e in jx)
    names = thread_names(tr)
    assert any(names[(e["pid"], e["tid"])].startswith("tf_XLAPjRtCpuClient") for e in jx)
    calls = spans(tr, cat="call", name=FWD)
    assert len(calls) == CALLS
    kernels = spans(tr, cat="kernel", name=FWD)
    ncores = tr["otherData"]["engine_cores"]
    for c in calls:
        # the XLA thunk of the custom call (an operator: it has an hlo_op) encloses opcore's call
        thunks = [e for e in jx if e["args"]["op"] and inside(c, e)]
        assert thunks, c
        assert sorted(k["args"]["core"] for k in kernels if inside(k, c)) == list(range(ncores))
    assert {o["source"] for o in run.summary["ops"]} == {"opcore", "jax"}


def test_xprof_shows_both(run):
    tv = xprof_tool(run.xplane_path, "trace_viewer")
    ev = tv["traceEvents"]
    procs, threads = process_names(tv), thread_names(tv)
    host = next(pid for pid, n in procs.items() if n == "/host:CPU")
    engine = next(pid for pid, n in procs.items() if n.startswith("/device:GPU:0"))
    x = [e for e in ev if e.get("ph") == "X"]
    assert any(e["pid"] == host and threads[(host, e["tid"])].startswith("tf_XLAPjRtCpuClient") for e in x)
    assert sum(1 for e in x if e["pid"] == engine and e["name"] == FWD) == CALLS * run.summary["engine_cores"]
