"""opcore.profiler — what every core did, in Perfetto, TensorBoard and a summary.

    import opcore.profiler as prof

    with prof.profile(logdir="logs", profile_type="trace") as p:
        for step in range(10):
            prof.step(step)
            with prof.trace("forward"):
                y = model(x)
            with prof.trace("loss_backward"):
                loss.backward()
    print(p.run_dir, p.trace_path, p.html_path)
    print(p.summary["ops"][0])

Everything inside the ``profile`` block is captured (or its first
``ms_duration`` milliseconds): every opcore kernel on every engine core, every
op call with its phases, library builds, ``trace`` blocks and ``step`` markers.
On exit it writes, under ``logdir``:

* ``RUN.trace.json.gz`` — Chrome trace-event JSON; open in https://ui.perfetto.dev
* ``plugins/profile/RUN/HOST.xplane.pb`` — for ``tensorboard --logdir logdir``
  with the profile plugin (``pip install xprof``)
* ``RUN.summary.json`` / ``RUN.summary.csv`` — the per-operator summary (also
  printed as a table unless ``OPCORE_PROFILE_QUIET=1``)
* ``RUN.report.html`` — a self-contained report: timeline per core + table

``profile(..., torch=True)`` runs ``torch.profiler`` alongside and puts
PyTorch's own operators (``aten::addmm``, the optimizer, autograd) on the
same timeline, on the same host-thread tracks as the opcore calls they made;
``jax=True`` does the same with ``jax.profiler``'s host trace.

See docs/profiler.md.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import tempfile
from typing import Any, Optional

from opcore import _C

__all__ = ["profile", "trace", "Trace", "step", "enabled", "membw_gbps", "membw_source"]

_CLOCK_REALTIME = 1  # oc_profiler_clock


def torch_spans(torch_profile) -> list:
    """The host events of a finished ``torch.profiler.profile`` as spans for
    ``_C.profiler_import`` (name, category, thread, OS tid, t0, t1 in
    CLOCK_REALTIME ns, is-an-operator). PyTorch stamps its events with
    CLOCK_REALTIME (c10::getTime); its Chrome trace gives them in us from
    ``baseTimeNanoseconds``, with the OS thread ids."""
    with tempfile.TemporaryDirectory(prefix="opcore-torch-") as tmp:
        path = os.path.join(tmp, "torch.json")
        torch_profile.export_chrome_trace(path)
        with open(path, encoding="utf-8") as f:
            trace = json.load(f)
    base = int(trace.get("baseTimeNanoseconds", 0))
    events = trace.get("traceEvents", [])
    threads = {(e.get("pid"), e.get("tid")): e.get("args", {}).get("name")
               for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    spans = []
    for e in events:
        tid = e.get("tid")
        if e.get("ph") != "X" or not isinstance(tid, int) or not isinstance(e.get("pid"), int):
            continue  # counters, flows, the profiler's own "Spans"/"Traces" rows
        t0 = base + round(e["ts"] * 1000)
        cat = e.get("cat")
        spans.append((e["name"], cat, threads.get((e["pid"], tid)) or "torch thread", tid, t0,
                      t0 + round(e.get("dur", 0) * 1000), cat == "cpu_op"))
    return spans


class profile(contextlib.ContextDecorator):
    """Profile everything run inside the ``with`` block.

    Args:
        logdir: folder for the outputs (created if missing).
        profile_type: ``'trace'`` records everything; ``'operator'`` records
            kernels, whole op calls, builds, named blocks and steps, but not
            the phases inside a call (shape inference, allocation, dispatch,
            waiting for the cores).
        ms_duration: record only the first this many milliseconds
            (``None``: until the block ends).
        run_name: name of the run (letters, digits, ``.``, ``_``, ``-``);
            ``None`` means a timestamp. An existing run is never overwritten:
            ``_1``, ``_2``, ... is appended.
        torch: also run ``torch.profiler`` (CPU activities) and put its
            events (``aten::`` operators, autograd, the optimizer) on the same
            timeline, in every output; ``torch_profiler`` is that profiler.
        jax: also run ``jax.profiler`` and put its host events (Python
            functions, XLA's CPU thunks) on the same timeline.

    After the block, the object has ``run_name``, ``logdir``, ``run_dir``
    (``logdir/plugins/profile/RUN``, what TensorBoard lists), ``trace_path``,
    ``xplane_path``, ``summary_json_path``, ``summary_csv_path``,
    ``html_path`` and ``summary`` (the parsed summary JSON).
    """

    def __init__(self, logdir: str | os.PathLike = "logs", profile_type: str = "trace",
                 ms_duration: Optional[float] = None, run_name: Optional[str] = None,
                 torch: bool = False, jax: bool = False):
        if profile_type not in ("trace", "operator"):
            raise ValueError(f"profile_type is {profile_type!r}; expected 'trace' or 'operator'")
        if ms_duration is not None and not ms_duration > 0:
            raise ValueError(f"ms_duration is {ms_duration!r}; expected None or a number of milliseconds > 0")
        self.logdir = os.fspath(logdir)
        self.profile_type = profile_type
        self.ms_duration = ms_duration
        self.run_name = run_name
        self.run_dir: Optional[str] = None
        self.trace_path: Optional[str] = None
        self.xplane_path: Optional[str] = None
        self.summary_json_path: Optional[str] = None
        self.summary_csv_path: Optional[str] = None
        self.html_path: Optional[str] = None
        self._summary: Optional[dict] = None
        self._running = False
        self.torch = bool(torch)
        self.jax = bool(jax)
        self.torch_profiler = None
        self._jax_dir: Optional[str] = None

    def start(self) -> "profile":
        # the other profilers start first: their own start-up stays outside
        # opcore's window, and a failure leaves nothing running
        try:
            if self.torch:
                import torch.profiler as tp
                self.torch_profiler = tp.profile(activities=[tp.ProfilerActivity.CPU])
                self.torch_profiler.__enter__()
            if self.jax:
                import jax.profiler as jp
                self._jax_dir = tempfile.mkdtemp(prefix="opcore-jax-")
                jp.start_trace(self._jax_dir)
            _C.profiler_start(self.logdir, self.profile_type,
                              float(self.ms_duration) if self.ms_duration else 0.0, self.run_name)
        except BaseException:
            self._stop_others(import_spans=False)
            raise
        self._running = True
        return self

    def _stop_others(self, import_spans: bool) -> None:
        """Stop torch.profiler / jax.profiler; import their spans into the
        running opcore profile."""
        try:
            if self.torch_profiler is not None:
                self.torch_profiler.__exit__(None, None, None)
                if import_spans:
                    _C.profiler_import("torch", _CLOCK_REALTIME, torch_spans(self.torch_profiler))
        finally:
            if self._jax_dir is not None:
                try:
                    import jax.profiler as jp
                    jp.stop_trace()
                    pattern = os.path.join(self._jax_dir, "plugins", "profile", "*", "*.xplane.pb")
                    paths = glob.glob(pattern) if import_spans else []  # on a failed start: not read
                    for path in paths:
                        with open(path, "rb") as f:
                            _C.profiler_import_xspace("jax", f.read())
                finally:
                    shutil.rmtree(self._jax_dir, ignore_errors=True)
                    self._jax_dir = None

    def stop(self) -> "profile":
        if not self._running:
            raise RuntimeError("this profile is not running")
        self._running = False
        try:
            self._stop_others(import_spans=True)
        finally:
            out = _C.profiler_stop()
        self.run_name = out["run_name"]
        self.logdir = out["logdir"]
        self.run_dir = out["run_dir"]
        self.trace_path = out["trace"]
        self.xplane_path = out["xplane"]
        self.summary_json_path = out["summary_json"]
        self.summary_csv_path = out["summary_csv"]
        self.html_path = out["html"]
        self._summary = None
        return self

    @property
    def summary(self) -> dict:
        """The operator summary (the content of ``summary_json_path``)."""
        if self._summary is None:
            if not self.summary_json_path:
                raise RuntimeError("the profile has not stopped yet")
            with open(self.summary_json_path, encoding="utf-8") as f:
                self._summary = json.load(f)
        return self._summary

    def __enter__(self) -> "profile":
        return self.start()

    def __exit__(self, *exc: Any) -> bool:
        self.stop()
        return False

    def __repr__(self) -> str:
        state = "running" if self._running else (self.run_dir or "not started")
        return f"<opcore.profiler.profile {self.profile_type} {state}>"


class trace(contextlib.ContextDecorator):
    """A named block: ``with trace("loss_backward"): ...`` (also a decorator).

    Shows as a span on the calling thread's track, nested in any enclosing
    block. Costs almost nothing when no profile runs.
    """

    def __init__(self, name: str):
        self.name = str(name)

    def __enter__(self) -> "trace":
        _C.profiler_begin(self.name)
        return self

    def __exit__(self, *exc: Any) -> bool:
        _C.profiler_end()
        return False


#: The seeds' spelling (``torch_xla.debug.profiler.Trace``).
Trace = trace


def step(n: int) -> None:
    """Mark the start of step ``n`` (it lasts until the next marker)."""
    _C.profiler_step(int(n))


def enabled() -> bool:
    """True while a profile is recording."""
    return bool(_C.profiler_enabled())


def membw_gbps() -> float:
    """The machine's memory bandwidth in GB/s that the summary compares
    against: ``OPCORE_MEMBW_GBPS``, else measured (best of several tries)
    and cached per machine, re-measured when stale or on another machine."""
    return float(_C.profiler_membw_gbps())


def membw_source() -> str:
    """How ``membw_gbps()`` was obtained, in words."""
    return str(_C.profiler_membw_source())
