"""Stress: many threads calling single-core and multicore ops through
PyTorch, forward and backward (autograd), with some calls faulting on
purpose (exit, abort, assert, SIGSEGV, raise(SIGABRT), pthread_exit, a
stack overflow, OC_CHECK), for a bounded time. Every good result must be
right, every fault must be reported naming its op, no thread may hang, and
the process's memory must stay flat. OC_STRESS_SECONDS sets the length
(default 8); the counts are printed (pytest -s)."""
import faulthandler
import os
import random
import threading
import time

import numpy as np
import pytest

import opcore

torch = pytest.importorskip("torch")

SECONDS = float(os.environ.get("OC_STRESS_SECONDS", "8"))
THREADS = 8
# (how, text) of tests/isolation/misbehave.h; jumps to shared jmp_bufs are
# left out (threads would overwrite each other's buffers)
FAULTS = [(1, "called exit(3)"), (2, "called _exit(4)"), (5, "called abort()"),
          (6, "assertion failed"), (7, "SIGABRT"), (8, "called pthread_exit()"),
          (13, "stack overflow"), (15, "arg is 0, not 42"), (16, "Segmentation fault"),
          (14, "SIGSEGV")]
LIBS = ("iso", "iso_multi")


def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / (1 << 20)


class Twice(torch.autograd.Function):
    """y = 2x with opcore ops both ways; `how` makes the backward misbehave."""

    @staticmethod
    def forward(ctx, x, fwd_lib, bwd_lib, how):
        ctx.bwd_lib, ctx.how = bwd_lib, how
        return getattr(torch.ops, fwd_lib).misbehave(x, 0, 0)

    @staticmethod
    def backward(ctx, g):
        return getattr(torch.ops, ctx.bwd_lib).misbehave(g.contiguous(), ctx.how, 0), None, None, None


def test_threads_with_faults_forward_and_backward(load_iso):
    for name in LIBS:
        load_iso(name, multicore=name == "iso_multi")
    faulthandler.dump_traceback_later(SECONDS * 20 + 120, exit=True)  # a deadlock fails the run
    stop = time.monotonic() + SECONDS
    counts = [dict(calls=0, faults=0, backward=0) for _ in range(THREADS)]
    errors = []
    rss = {}

    def worker(i):
        rng = random.Random(1000 + i)
        x = torch.from_numpy((np.arange(4096, dtype=np.float32) * (i + 1)) % 23 - 11)
        want = 2 * x
        c = counts[i]
        try:
            while time.monotonic() < stop:
                lib = rng.choice(LIBS)
                r = rng.random()
                c["calls"] += 1
                if r < 0.55:
                    if not torch.equal(getattr(torch.ops, lib).misbehave(x, 0, 0), want):
                        errors.append(f"{lib}: wrong result")
                elif r < 0.8:
                    how, text = rng.choice(FAULTS)
                    try:
                        getattr(torch.ops, lib).misbehave(x, how, 0)
                        errors.append(f"{lib} how={how}: no error")
                    except opcore.OpError as e:
                        c["faults"] += 1
                        if f"op '{lib}::misbehave'" not in str(e) or text not in str(e):
                            errors.append(f"{lib} how={how}: {e}")
                else:
                    c["backward"] += 1
                    xr = x.clone().requires_grad_()
                    faulty = r >= 0.9
                    how, text = rng.choice(FAULTS) if faulty else (0, "")
                    try:
                        Twice.apply(xr, rng.choice(LIBS), lib, how).sum().backward()
                        if faulty:
                            errors.append(f"backward {lib} how={how}: no error")
                        elif not torch.equal(xr.grad, torch.full_like(x, 2)):
                            errors.append(f"backward {lib}: wrong gradient")
                    except opcore.OpError as e:
                        c["faults"] += 1
                        if not faulty or text not in str(e):
                            errors.append(f"backward {lib} how={how}: {e}")
                if i == 0 and "warm" not in rss and time.monotonic() > stop - SECONDS * 2 / 3:
                    rss["warm"] = rss_mib()
        except Exception as e:  # anything else is a failure of the test
            errors.append(f"thread {i}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(SECONDS * 20 + 60)
        assert not t.is_alive(), "a thread hung"
    faulthandler.cancel_dump_traceback_later()
    rss["end"] = rss_mib()
    calls = sum(c["calls"] for c in counts)
    faults = sum(c["faults"] for c in counts)
    backward = sum(c["backward"] for c in counts)
    print(f"\nstress: {THREADS} threads, {SECONDS:g} s: {calls} calls ({backward} through autograd), "
          f"{faults} faults reported, RSS {rss.get('warm', 0):.1f} -> {rss['end']:.1f} MiB")
    assert not errors, errors[:10]
    assert faults > 0 and calls > faults
    assert rss["end"] - rss.get("warm", rss["end"]) < 32, rss  # flat: no leak per call
