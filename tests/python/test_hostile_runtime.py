"""Hostile use of the runtime reached from Python: calls from threads with
small stacks, a kernel stack that cannot be mapped, launch grids and Dict
arguments a user should not be able to get wrong silently.

Every case runs in a Python process of its own with a timeout: a crash or
a hang fails that one test, never the run. Each case checks the answer (or
the error naming the op), that the process lives on and that the next call
is right.
"""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from opcore import custom_op

CASE_TIMEOUT = 240

KERNELS = r"""
#include <opcore/kernel.h>

oc_tensor *twice(const oc_tensor *x)
{
    OC_CHECK(x->dtype == OC_FLOAT32, "float32 only, got %s", oc_dtype_name(x->dtype));
    oc_tensor *out = oc_dst_tensor();
    for (int64_t i = 0; i < oc_numel(x); i++) ((float *)out->data)[i] = 2 * ((const float *)x->data)[i];
    return out;
}

/* the number of keys of d, and d["k"] when it is there */
oc_tensor *nkeys(const oc_tensor *x, const oc_dict *d)
{
    (void)x;
    int64_t k = -1;
    if (oc_dict_has(d, "k")) OC_CHECK(oc_dict_get_int(d, "k", &k) == OC_OK, "%s", oc_errmsg());
    ((int64_t *)oc_dst_tensor()->data)[0] = oc_dict_size(d);
    ((int64_t *)oc_dst_tensor()->data)[1] = k;
    return oc_dst_tensor();
}

/* multicore: core 1 returns NULL without writing its share */
oc_tensor *null_some(const oc_tensor *x)
{
    if (oc_cpu_id() == 1) return NULL;
    int64_t lo, hi;
    oc_core_range(oc_numel(x), 1, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) ((float *)oc_dst_tensor()->data)[i] = 3.0f;
    return oc_dst_tensor();
}
"""

SHAPES = r"""
#include <opcore/library.h>
static oc_tensor *same(const oc_tensor *x) { return oc_empty_like(x); }
static oc_tensor *two(const oc_tensor *x, const oc_dict *d)
{
    (void)x, (void)d;
    return oc_empty(OC_INT64, 1, (int64_t[]){2});
}
OC_LIBRARY(hostile_rt, m)
{
    oc_def(m, "twice(Tensor x) -> Tensor", same, "twice");
    oc_def(m, "null_some(Tensor x) -> Tensor", same, "null_some", .multicore = true);
    oc_def(m, "nkeys(Tensor x, Dict d) -> Tensor", two, "nkeys");
}
"""


@pytest.fixture(scope="module")
def lib_path(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile_rt")
    (d / "k.c").write_text(KERNELS)
    (d / "s.c").write_text(SHAPES)
    lib = custom_op.load(name="hostile_rt", compute_srcs=[str(d / "k.c")], shape_srcs=[str(d / "s.c")],
                         build_directory=str(d / "build"))
    return lib.path


def run_case(code, lib_path):
    """Run `code` in a fresh Python with `lib` loaded from lib_path; it
    prints OK at its end."""
    prelude = ("import numpy as np\nfrom opcore import custom_op\n"
               f"lib = custom_op.load_library({lib_path!r})\n")
    p = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=CASE_TIMEOUT)
    assert p.returncode == 0 and p.stdout.rstrip().endswith("OK"), \
        f"exit {p.returncode}\nstdout:\n{p.stdout[-4000:]}\nstderr:\n{p.stderr[-4000:]}"


# ---- calls from threads with small stacks ----------------------------------------


@pytest.mark.parametrize("kib", [64, 128])
def test_direct_calls_from_a_thread_with_a_small_stack(lib_path, kib):
    run_case(f"""
        import threading
        threading.stack_size({kib} * 1024)
        got = []
        def body():
            x = np.arange(6, dtype=np.float32)
            for _ in range(3):
                got.append(np.array_equal(lib.twice(x), 2 * x))
            try:
                lib.twice(np.zeros(3, np.int64))
            except Exception as e:
                got.append("hostile_rt::twice" in str(e) and "float32 only" in str(e))
            got.append(np.array_equal(lib.twice(x), 2 * x))
        t = threading.Thread(target=body)
        t.start()
        t.join()
        assert got == [True] * 5, got
        print("OK")
    """, lib_path)


def test_torch_ops_from_a_thread_with_a_small_stack(lib_path):
    pytest.importorskip("torch")
    run_case("""
        import threading
        import torch
        threading.stack_size(64 * 1024)
        got = []
        def body():
            x = torch.arange(6, dtype=torch.float32)
            for _ in range(3):
                got.append(torch.equal(torch.ops.hostile_rt.twice(x), 2 * x))
        t = threading.Thread(target=body)
        t.start()
        t.join()
        assert got == [True] * 3, got
        print("OK")
    """, lib_path)


# ---- a multicore kernel returning NULL on some cores ---------------------------


NULL_SOME = "kernel 'null_some' returned oc_dst_tensor() on some cores and NULL on core 1"


@pytest.mark.parametrize("path", ["direct", "torch", "jax"])
def test_multicore_null_on_some_cores_is_an_error(lib_path, path):
    pytest.importorskip({"direct": "numpy", "torch": "torch", "jax": "jax"}[path])
    run_case(f"""
        n = 1 << 17  # split over the cores
        def call():
            if {path!r} == "direct":
                return np.asarray(lib.null_some(np.zeros(n, np.float32)))
            if {path!r} == "torch":
                import torch
                return torch.ops.hostile_rt.null_some(torch.zeros(n)).numpy()
            import jax, jax.numpy as jnp
            from opcore import jax as ocjax
            return np.asarray(jax.block_until_ready(ocjax.op("hostile_rt::null_some")(jnp.zeros(n))))
        import os
        try:
            got = call()
        except Exception as e:
            assert "hostile_rt::null_some" in str(e) and {NULL_SOME!r} in str(e), str(e)
        else:  # one core: the launch is one share, and right
            assert len(os.sched_getaffinity(0)) == 1 and (got == 3).all()
        x = np.arange(6, dtype=np.float32)
        assert np.array_equal(lib.twice(x), 2 * x)  # the next call
        print("OK")
    """, lib_path)


# ---- Dict arguments ------------------------------------------------------------------


@pytest.mark.parametrize("path", ["direct", "jax"])
def test_dict_key_with_nul_refused(lib_path, path):
    pytest.importorskip({"direct": "numpy", "jax": "jax"}[path])
    run_case(f"""
        def call(d):
            if {path!r} == "direct":
                return list(lib.nkeys(np.zeros(1, np.float32), d))
            import jax, jax.numpy as jnp
            from opcore import jax as ocjax
            return list(np.asarray(ocjax.op("hostile_rt::nkeys")(jnp.zeros(1), d)))
        try:
            call({{"k\\0b": 1}})
        except Exception as e:
            assert "hostile_rt::nkeys" in str(e) and "a key may not hold a NUL character" in str(e), str(e)
        else:
            raise AssertionError("a key with a NUL was accepted")
        assert call({{"k": 5}}) == [1, 5]  # the next call
        print("OK")
    """, lib_path)


def test_dict_with_100k_keys_is_linear(lib_path):
    # 16k keys took 11.6 s when every pair of keys was compared; 100k never
    # finished. Linear: well inside the case's timeout on any machine.
    run_case("""
        d = {f"key{i}": i for i in range(100000)}
        d["k"] = 7
        x = np.zeros(1, np.float32)
        for _ in range(3):
            assert list(lib.nkeys(x, d)) == [100001, 7]
        print("OK")
    """, lib_path)


# ---- a build lock held by a stopped build --------------------------------------------

SLOW_CC = """#!/bin/sh
# a compiler that takes its time (but answers --version at once)
for a in "$@"; do [ "$a" = "--version" ] && exec cc "$@"; done
sleep 60
exec cc "$@"
"""


def _build(src, out, **env):
    code = f"""
        from opcore import custom_op
        custom_op.build("hostile_rt", [{str(src / 'k.c')!r}], [{str(src / 's.c')!r}],
                        build_directory={str(out)!r})
    """
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ, **env),
                            start_new_session=True)


def test_lock_held_by_a_stopped_build_is_named_at_once(tmp_path):
    """A build waiting on a lock whose holder is stopped says so at once,
    with the holder's pid and what to do, and gives up within a minute
    unless OPCORE_BUILD_LOCK_TIMEOUT says otherwise."""
    (tmp_path / "k.c").write_text(KERNELS)
    (tmp_path / "s.c").write_text(SHAPES)
    cc = tmp_path / "slowcc"
    cc.write_text(SLOW_CC)
    cc.chmod(0o755)
    out = tmp_path / "out"
    holder = _build(tmp_path, out, CC=str(cc))
    waiter = None
    try:
        lock = out / ".libhostile_rt.so.lock"
        deadline = time.monotonic() + CASE_TIMEOUT
        while not (lock.exists() and lock.read_text().strip() == str(holder.pid)):
            assert time.monotonic() < deadline, "the holder never took the lock"
            time.sleep(0.05)
        os.kill(holder.pid, signal.SIGSTOP)
        env = {k: v for k, v in os.environ.items() if k != "OPCORE_BUILD_LOCK_TIMEOUT"}
        waiter = subprocess.Popen(
            [sys.executable, "-c", f"from opcore import custom_op; custom_op.build('hostile_rt', "
             f"[{str(tmp_path / 'k.c')!r}], [{str(tmp_path / 's.c')!r}], build_directory={str(out)!r})"],
            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
        line = waiter.stderr.readline()  # the first thing it says, while it still waits
        assert waiter.poll() is None, line
        assert f"waiting for process {holder.pid} (stopped)" in line, line
        assert f"kill -CONT {holder.pid}" in line, line
        assert "giving up after 60 s" in line, line
    finally:
        for p in (waiter, holder):
            if p is not None:
                os.killpg(p.pid, signal.SIGKILL)
                p.communicate()
