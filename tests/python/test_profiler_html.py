"""The HTML report, rendered in headless Chromium (driven over the DevTools
protocol by bench/chromium_cdp.py) and inspected there: a table row per op,
one lane per engine core with its kernels drawn, the first view on the work
(not on the library build and the idle gap before it), zoom and hover."""
import importlib.util
import os
import time

import pytest

torch = pytest.importorskip("torch")
profiler = pytest.importorskip("opcore.profiler")
from conftest import RELU, renamed_shape_source  # noqa: E402
from test_profiler_support import BWD, FWD, REPO, load_trace, quiet_env, relu_ops, spans, train  # noqa: E402,F401

_spec = importlib.util.spec_from_file_location("chromium_cdp", os.path.join(REPO, "bench", "chromium_cdp.py"))
cdp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cdp)

if not cdp.find_chromium():
    pytest.skip("no chromium (scripts/install-deps.sh installs Debian's chromium)", allow_module_level=True)

STEPS = 3


@pytest.fixture(scope="module")
def run(relu_ops, tmp_path_factory):
    from opcore import custom_op
    build = tmp_path_factory.mktemp("html_build")
    with quiet_env(), profiler.profile(logdir=str(tmp_path_factory.mktemp("html_logs")), run_name="html",
                                       torch=True) as p:
        # a library build and an idle gap, then the training
        custom_op.load(name="my_ops_html", compute_srcs=[str(RELU / "elementwise" / "relu.c")],
                       shape_srcs=[str(renamed_shape_source(build, "my_ops_html"))],
                       build_directory=str(build))
        time.sleep(0.3)
        train(STEPS)
    return p


@pytest.fixture(scope="module")
def page(run):
    with cdp.Chromium(width=1400, height=1000) as ch:
        yield ch.open("file://" + os.path.abspath(run.html_path))


def test_no_network(run):
    with open(run.html_path, encoding="utf-8") as f:
        text = f.read()
    assert "http://" not in text and "https://" not in text
    assert "<link" not in text and "src=" not in text


def test_script_ran_and_drew(page):
    assert page.evaluate("document.body.dataset.ready") == "1"
    assert int(page.evaluate("document.body.dataset.drawn")) > 0
    assert page.evaluate("document.getElementById('cv').width") > 100


def test_a_table_row_per_op(run, page):
    rows = page.evaluate("[...document.querySelectorAll('#ops tbody tr.op')]"
                         ".map(tr => [tr.dataset.op, tr.dataset.source, tr.cells[2].textContent])")
    want = [[o["op"], o["source"], str(o["calls"])] for o in run.summary["ops"]]
    assert rows == want
    assert [FWD, "opcore", str(STEPS)] in rows and [BWD, "opcore", str(STEPS)] in rows
    assert any(r[0] == "aten::addmm" and r[1] == "torch" for r in rows)


def test_a_lane_per_core_with_its_kernels(run, page):
    ncores = run.summary["engine_cores"]
    lanes = page.evaluate("[...document.querySelectorAll('#labels .lane.core')].map(d => d.textContent)")
    assert lanes == [f"core {c}" for c in range(ncores)]
    # kernel rects painted in each core's lane (16 px rows, the cores first)
    painted = page.evaluate(
        "(() => { const cv = document.getElementById('cv'), g = cv.getContext('2d'), dpr = cv.width / "
        "cv.clientWidth, out = []; for (let c = 0; c < %d; c++) { const d = g.getImageData(0, "
        "Math.round((c * 16 + 8) * dpr), cv.width, 1).data; let n = 0; for (let i = 3; i < d.length; i += 4) "
        "if (d[i]) n++; out.push(n); } return out; })()" % ncores)
    assert all(n > 0 for n in painted), painted


def test_opens_on_the_work(run, page):
    tr = load_trace(run)
    lo, hi = page.evaluate("window.ocReport.view()")
    dur = page.evaluate("window.ocReport.dur")
    build = spans(tr, cat="build")
    assert build, "the library build was recorded"
    build_end = max(b["ts"] + b["dur"] for b in build) * 1e3  # ns from the profile start
    step0 = min(s["ts"] for s in spans(tr, cat="step")) * 1e3
    last_kernel = max(k["ts"] + k["dur"] for k in spans(tr, cat="kernel")) * 1e3
    assert build_end + 0.3e9 <= step0  # the gap
    margin = (hi - lo) / 40
    assert build_end < lo <= step0 and step0 - lo <= margin  # from the first step, not the build
    assert last_kernel <= hi <= dur
    assert [lo, hi] == page.evaluate("window.ocReport.work")
    # "whole profile" and back
    page.evaluate("document.getElementById('all').click()")
    page.evaluate("new Promise(r => requestAnimationFrame(r))")
    assert page.evaluate("window.ocReport.view()") == [0, dur]
    page.evaluate("document.getElementById('fit').click()")
    assert page.evaluate("window.ocReport.view()") == [lo, hi]


def test_zoom_and_hover(run, page):
    lo, hi = page.evaluate("window.ocReport.view()")
    x, y = page.evaluate("(() => { const r = document.getElementById('plot').getBoundingClientRect();"
                         " return [r.left + r.width / 2, r.top + 8]; })()")
    page.send("Input.dispatchMouseEvent", {"type": "mouseWheel", "x": x, "y": y, "deltaX": 0, "deltaY": -120})
    page.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    zlo, zhi = page.evaluate("window.ocReport.view()")
    assert zhi - zlo == pytest.approx((hi - lo) * 0.8, rel=1e-6)  # zoomed in about the pointer
    assert zlo == pytest.approx(lo + (hi - lo) * 0.1, rel=1e-3)
    # hover a kernel of core 0: the tooltip names the op, the core's row and its bytes
    k = next(e for e in spans(load_trace(run), cat="kernel", name=FWD) if e["args"]["core"] == 0)
    t0, t1 = k["ts"] * 1e3, (k["ts"] + k["dur"]) * 1e3
    page.evaluate(f"window.ocReport.setView({t0 - (t1 - t0)}, {t1 + (t1 - t0)})")
    page.evaluate("new Promise(r => requestAnimationFrame(r))")
    cx, cy = page.evaluate("(() => { const r = document.getElementById('cv').getBoundingClientRect();"
                           " return [r.left + r.width / 2, r.top + 8]; })()")
    page.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": cx, "y": cy})
    tip = page.evaluate("document.getElementById('tip').textContent")
    assert tip.startswith(FWD + " (kernel)") and "core 0" in tip and "in " in tip
    assert page.evaluate("getComputedStyle(document.getElementById('tip')).display") == "block"
