"""What a hostile user tries against the build tool and the call path
(issue 24, items 5, 6, 8, 9, 10 and 11): a str holding a NUL, size
arithmetic and element counts that overflow int64, a kernel stack larger
than the engine maps, unloading a library while other threads call its
ops, sources that include /dev/stdin or a FIFO, a build lock held by a
stopped or dead process, library names that walk out of the cache.

Every case runs in a process of its own with a timeout (item 12): a
subprocess it starts itself, or -- @isolated -- the test run again alone in
a fresh pytest. A hang or a crash fails that one test, never the run.
"""
import functools
import os
import signal
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import opcore
from opcore import custom_op

from conftest import CLI, needs_cli, run_cli

KERNELS = r"""
#include <string.h>
#include <opcore/kernel.h>

oc_tensor *str_len(const oc_tensor *x, const char *s)
{
    (void)x;
    oc_tensor *out = oc_dst_tensor();
    ((int64_t *)out->data)[0] = (int64_t)strlen(s);
    return out;
}

oc_tensor *grow(const oc_tensor *x, int64_t n) { (void)x; (void)n; return oc_dst_tensor(); }
oc_tensor *widen(const oc_tensor *x, int64_t n) { (void)x; (void)n; return oc_dst_tensor(); }
oc_tensor *square(const oc_tensor *x, int64_t n) { (void)x; (void)n; return oc_dst_tensor(); }

oc_tensor *scaled(const oc_tensor *x, double alpha)
{
    oc_tensor *out = oc_dst_tensor();
    for (int64_t i = 0; i < oc_numel(x); i++) ((float *)out->data)[i] = (float)alpha * ((const float *)x->data)[i];
    return out;
}

/* the dtype's code, as int64 */
oc_tensor *dtype_code(const oc_tensor *x, oc_dtype dtype)
{
    (void)x;
    oc_tensor *out = oc_dst_tensor();
    ((int64_t *)out->data)[0] = (int64_t)dtype;
    return out;
}
"""

SHAPES = r"""
#include <opcore/library.h>
#include <opcore/dim.h>

static oc_tensor *str_len_shape(const oc_tensor *x, const char *s)
{
    (void)x;
    (void)s;
    int64_t one[1] = {1};
    return oc_empty(OC_INT64, 1, one);
}

/* x->sizes[0] * n through the checked helpers */
static oc_tensor *grow_shape(const oc_tensor *x, int64_t n)
{
    int64_t sizes[1] = {oc_dim_mul(x->sizes[0], n)};
    return oc_empty(OC_FLOAT32, 1, sizes);
}

static oc_tensor *widen_shape(const oc_tensor *x, int64_t n)
{
    int64_t sizes[1] = {oc_dim_add(x->sizes[0], n)};
    return oc_empty(OC_FLOAT32, 1, sizes);
}

/* (n, n): every size is valid, their product is not when n >= 2**32 */
static oc_tensor *square_shape(const oc_tensor *x, int64_t n)
{
    (void)x;
    int64_t sizes[2] = {n, n};
    return oc_empty(OC_FLOAT32, 2, sizes);
}

static oc_tensor *scaled_shape(const oc_tensor *x, double alpha)
{
    (void)alpha;
    return oc_empty_like(x);
}

static oc_tensor *dtype_code_shape(const oc_tensor *x, oc_dtype dtype)
{
    (void)x;
    (void)dtype;
    int64_t one[1] = {1};
    return oc_empty(OC_INT64, 1, one);
}

OC_LIBRARY(hostile, m)
{
    oc_def(m, "scaled(Tensor x, *, float alpha=1.0) -> Tensor", scaled_shape, "scaled");
    oc_def(m, "dtype_code(Tensor x, ScalarType dtype) -> Tensor", dtype_code_shape, "dtype_code");
    oc_def(m, "str_len(Tensor x, str s) -> Tensor", str_len_shape, "str_len");
    oc_def(m, "grow(Tensor x, int n) -> Tensor", grow_shape, "grow");
    oc_def(m, "widen(Tensor x, int n) -> Tensor", widen_shape, "widen");
    oc_def(m, "square(Tensor x, int n) -> Tensor", square_shape, "square");
}
"""

CASE_TIMEOUT = 240  # seconds for one subprocess; a hang fails the test


@pytest.fixture(scope="module")
def srcs(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile_src")
    (d / "kernels.c").write_text(KERNELS)
    (d / "shape.c").write_text(SHAPES)
    return d


@pytest.fixture(scope="module")
def lib(srcs):
    return custom_op.load(name="hostile", compute_srcs=[str(srcs / "kernels.c")],
                          shape_srcs=[str(srcs / "shape.c")], build_directory=str(srcs / "build"))


CHILD = "OC_HOSTILE_CHILD"


def isolated(test):
    """Run `test` alone in a fresh pytest process, bounded by CASE_TIMEOUT
    (the parent sets up its fixtures too, cheaply: builds are cached)."""
    if os.environ.get(CHILD):
        return test

    @functools.wraps(test)
    def in_child(*args, **kwargs):
        name = os.environ["PYTEST_CURRENT_TEST"].split("::", 1)[1].rsplit(" ", 1)[0]
        name = re.sub(r"@[^@\[\]]*$", "", name)  # pytest-xdist's "@group" suffix
        p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"{__file__}::{name}"],
                           capture_output=True, text=True, timeout=CASE_TIMEOUT, env=dict(os.environ, **{CHILD: "1"}),
                           cwd=Path(__file__).parent)
        assert p.returncode == 0, p.stdout[-6000:] + p.stderr[-2000:]
        assert "1 passed" in p.stdout, p.stdout[-2000:]

    return in_child


def run_py(code, timeout=CASE_TIMEOUT, **kw):
    """Run `code` in a fresh Python; returns the CompletedProcess."""
    env = dict(os.environ, **kw.pop("env", {}))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=env, **kw)


def tree(root):
    return sorted(str(p.relative_to(root)) for p in Path(root).rglob("*"))


# ---- item 11: names ------------------------------------------------------------


@pytest.mark.parametrize("name", ["../../escaped_dir", "../sibling", "a b"])
@isolated
def test_bad_name_creates_nothing_in_or_out_of_the_cache(tmp_path, srcs, monkeypatch, name):
    cache = tmp_path / "a" / "b" / "cache"
    cache.mkdir(parents=True)
    monkeypatch.setenv("OPCORE_CACHE_DIR", str(cache))
    before = tree(tmp_path)
    with pytest.raises(ValueError, match="not a C identifier"):
        custom_op.load(name=name, compute_srcs=[str(srcs / "kernels.c")], shape_srcs=[str(srcs / "shape.c")])
    assert tree(tmp_path) == before


@pytest.mark.parametrize("name", ["../sibling", "a b"])
@isolated
def test_bad_name_with_a_build_directory_creates_nothing(tmp_path, srcs, name):
    out = tmp_path / "out" / "build"
    with pytest.raises(ValueError, match="not a C identifier"):
        custom_op.build(name, [str(srcs / "kernels.c")], [str(srcs / "shape.c")], build_directory=str(out))
    assert tree(tmp_path) == []


# ---- item 5: strings -----------------------------------------------------------


@isolated
def test_str_without_nul_reaches_the_kernel_whole(lib):
    import numpy as np

    assert int(lib.str_len(np.zeros(1, np.float32), "abcde")[0]) == 5


@isolated
def test_str_with_nul_refused_in_a_direct_call(lib):
    import numpy as np

    with pytest.raises(opcore.OpArgumentError, match=r"hostile::str_len.*'s'.*NUL character at index 2"):
        lib.str_len(np.zeros(1, np.float32), "ab\0cd")


@isolated
def test_str_with_nul_refused_through_torch_ops(lib):
    torch = pytest.importorskip("torch")
    with pytest.raises(Exception, match=r"hostile::str_len.*'s'.*NUL character at index 2"):
        torch.ops.hostile.str_len(torch.zeros(1), "ab\0cd")


@isolated
def test_str_with_nul_refused_through_jax(lib):
    pytest.importorskip("jax")
    import jax.numpy as jnp

    from opcore import jax as ocjax

    with pytest.raises(opcore.OpArgumentError, match=r"hostile::str_len.*'s'.*NUL character at index 2"):
        ocjax.op("hostile::str_len")(jnp.zeros(1), "ab\0cd")


# ---- item 12: messages naming the op, the argument and what was expected --------


@isolated
def test_keyword_only_by_keyword_runs_in_a_direct_call(lib):
    import numpy as np

    assert lib.scaled(np.ones(3, np.float32), alpha=2.0).tolist() == [2.0, 2.0, 2.0]


@isolated
def test_keyword_only_by_position_refused_in_a_direct_call(lib):
    import numpy as np

    with pytest.raises(opcore.OpArgumentError, match=r"op 'hostile::scaled': argument 'alpha' is keyword-only: "
                                                       r"pass alpha=2\.0"):
        lib.scaled(np.ones(3, np.float32), 2.0)


@isolated
def test_keyword_only_by_position_refused_through_jax(lib):
    pytest.importorskip("jax")
    import jax.numpy as jnp

    from opcore import jax as ocjax

    with pytest.raises(opcore.OpArgumentError, match=r"'hostile::scaled': argument 'alpha' is keyword-only: "
                                                       r"pass alpha=2\.0"):
        ocjax.op("hostile::scaled")(jnp.ones(3), 2.0)


@isolated
def test_keyword_only_by_keyword_runs_through_torch_ops(lib):
    torch = pytest.importorskip("torch")
    x = torch.ones(3, requires_grad=True)
    assert torch.ops.hostile.scaled(x.detach(), alpha=2.0).tolist() == [2.0, 2.0, 2.0]
    assert torch.ops.hostile.scaled(x, alpha=3.0).tolist() == [3.0, 3.0, 3.0]  # the autograd kernel's call


@isolated
def test_keyword_only_by_position_refused_through_torch_ops(lib):
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match=r"hostile::scaled\(\) takes 1 positional argument"):
        torch.ops.hostile.scaled(torch.ones(3), 2.0)


def _dtype_forms():
    import numpy as np

    forms = [("name", "float32"), ("torch_name", "torch.float32"), ("numpy_type", np.float32),
             ("numpy_dtype", np.dtype("float32"))]
    try:
        import torch
        forms.append(("torch_dtype", torch.float32))
    except ImportError:
        pass
    try:
        import jax.numpy as jnp
        forms.append(("jax_type", jnp.float32))
    except ImportError:
        pass
    return forms


@isolated
@pytest.mark.parametrize("form", [f for _, f in _dtype_forms()], ids=[i for i, _ in _dtype_forms()])
def test_scalar_type_natural_forms_accepted_in_a_direct_call(lib, form):
    import numpy as np

    from opcore import _C

    assert int(lib.dtype_code(np.zeros(1, np.float32), form)[0]) == _C.dtype_names().index("float32")


@isolated
def test_scalar_type_python_float_reads_as_float64_like_numpy_and_torch(lib):
    import numpy as np

    from opcore import _C

    assert int(lib.dtype_code(np.zeros(1, np.float32), float)[0]) == _C.dtype_names().index("float64")


@isolated
@pytest.mark.parametrize("bad", [6, "garbage", "x.float32", "float32,", object()],
                         ids=["int_code", "garbage", "dotted_garbage", "numpy_struct_spec", "object"])
def test_scalar_type_wrong_form_refused_naming_the_accepted_forms(lib, bad):
    import numpy as np

    with pytest.raises(opcore.OpArgumentError, match=r"op 'hostile::dtype_code': argument 2 'dtype': expected a "
                                                       r"dtype: torch\.float32, numpy\.float32, .*'float32' "
                                                       r"\(one of float32, .*\), got "):
        lib.dtype_code(np.zeros(1, np.float32), bad)


@isolated
def test_scalar_type_int_code_refusal_says_an_int_is_not_a_dtype(lib):
    import numpy as np

    with pytest.raises(opcore.OpArgumentError, match=r"got 6 \(an int code is not a dtype\)"):
        lib.dtype_code(np.zeros(1, np.float32), 6)


@isolated
def test_scalar_type_wrong_form_refused_through_jax_naming_the_argument(lib):
    pytest.importorskip("jax")
    import jax.numpy as jnp

    from opcore import jax as ocjax

    with pytest.raises(opcore.OpArgumentError, match=r"'hostile::dtype_code': argument 'dtype' \(ScalarType\): "
                                                       r"expected a dtype opcore supports \(float32, .*got 'garbage'"):
        ocjax.op("hostile::dtype_code")(jnp.zeros(1), "garbage")


@isolated
def test_scalar_type_int_code_refused_through_jax_saying_an_int_is_not_a_dtype(lib):
    pytest.importorskip("jax")
    import jax.numpy as jnp

    from opcore import jax as ocjax

    with pytest.raises(opcore.OpArgumentError, match=r"'hostile::dtype_code': argument 'dtype' \(ScalarType\): .*"
                                                       r"got 6 \(an int code is not a dtype\)"):
        ocjax.op("hostile::dtype_code")(jnp.zeros(1), 6)


@isolated
def test_scalar_type_jax_type_accepted_through_jax(lib):
    pytest.importorskip("jax")
    import jax.numpy as jnp

    from opcore import _C
    from opcore import jax as ocjax

    assert int(ocjax.op("hostile::dtype_code")(jnp.zeros(1), jnp.float64)[0]) == _C.dtype_names().index("float64")


# ---- item 6: sizes -------------------------------------------------------------


@isolated
def test_dim_mul_overflow_is_an_error_naming_the_op(lib):
    import numpy as np

    # 2**62 * 4 wraps to 0 in plain arithmetic (a silent empty result)
    with pytest.raises(opcore.OpError, match=r"hostile::grow.*oc_dim_mul: 4 \* 4611686018427387904 overflows int64"):
        lib.grow(np.zeros(4, np.float32), 2**62)


@isolated
def test_dim_add_overflow_is_an_error_naming_the_op(lib):
    import numpy as np

    with pytest.raises(opcore.OpError, match=r"hostile::widen.*oc_dim_add: .* overflows int64"):
        lib.widen(np.zeros(4, np.float32), 2**63 - 2)


@isolated
def test_element_count_overflow_refused_in_a_direct_call(lib):
    import numpy as np

    with pytest.raises(opcore.OpError, match=r"hostile::square.*more elements or bytes than int64"):
        lib.square(np.zeros(1, np.float32), 2**32)


def test_element_count_overflow_refused_under_jax_jit(lib):
    """XLA aborts the process on an extent product that overflows: opcore
    must refuse the shape before XLA sees it."""
    pytest.importorskip("jax")
    p = run_py(f"""
        import jax, jax.numpy as jnp
        from opcore import custom_op, jax as ocjax
        custom_op.load_library({lib.path!r})
        f = jax.jit(lambda x: ocjax.op("hostile::square")(x, {2**32}))
        try:
            f(jnp.zeros(1))
        except Exception as e:
            print("REFUSED", e)
    """)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "REFUSED" in p.stdout and "hostile::square" in p.stdout, p.stdout + p.stderr[-2000:]
    assert "more elements or bytes than int64" in p.stdout


# ---- item 12: unclear messages -------------------------------------------------


@isolated
def test_float_default_that_underflows_refused_at_build_naming_the_argument(tmp_path, srcs):
    """torch's schema parser (std::stod) refuses it with "IndexError: stod";
    opcore refuses it first, at build time, saying what to write."""
    shape = tmp_path / "shape.c"
    shape.write_text(SHAPES.replace('"widen(Tensor x, int n) -> Tensor"', '"widen(Tensor x, float n=1e-400) -> Tensor"')
                     .replace("widen_shape(const oc_tensor *x, int64_t n)", "widen_shape(const oc_tensor *x, double n)")
                     .replace("oc_dim_add(x->sizes[0], n)", "x->sizes[0] + (int64_t)n"))
    kernels = tmp_path / "kernels.c"
    kernels.write_text(KERNELS.replace("widen(const oc_tensor *x, int64_t n)", "widen(const oc_tensor *x, double n)"))
    with pytest.raises(opcore.BuildError, match=r"library 'hostile': schema \"widen\(Tensor x, float n=1e-400\) -> "
                       r"Tensor\": argument 'n': default 1e-400 is too small for a double.*write 0\.0, or a value of "
                       r"at least 2\.22507e-308"):
        custom_op.build("hostile", [str(kernels)], [str(shape)], build_directory=str(tmp_path / "out"))


# ---- item 8: --stack-size ---------------------------------------------------------


@isolated
def test_stack_size_beyond_the_engine_refused_with_the_maximum(tmp_path, srcs):
    with pytest.raises(ValueError, match=r"more than the engine maps: at most 1073741824 bytes"):
        custom_op.build("big_stack", [str(srcs / "kernels.c")], [str(srcs / "shape.c")],
                        build_directory=str(tmp_path), stack_size=2**40)
    assert not (tmp_path / "libbig_stack.so").exists()


@isolated
def test_non_numeric_stack_size_says_what_it_takes(tmp_path, srcs):
    with pytest.raises(TypeError, match=r"stack_size must be a number of bytes \(an int\), got 'lots'"):
        custom_op.build("s", [str(srcs / "kernels.c")], [str(srcs / "shape.c")], build_directory=str(tmp_path),
                        stack_size="lots")


@needs_cli
def test_cli_stack_size_beyond_the_engine_refused(tmp_path, srcs):
    p = run_cli("build", "-n", "big_stack", "-s", srcs / "shape.c", "-c", srcs / "kernels.c",
                "-o", tmp_path, "--stack-size", "1099511627776")
    assert p.returncode != 0
    assert "at most 1073741824 bytes" in p.stderr
    assert not (tmp_path / "libbig_stack.so").exists()


@needs_cli
def test_cli_non_numeric_stack_size_says_what_a_size_is(tmp_path, srcs):
    p = run_cli("build", "-n", "s", "-s", srcs / "shape.c", "-o", tmp_path, "--stack-size", "lots")
    assert p.returncode != 0
    assert "--stack-size 'lots' is not a size: expected a positive number of bytes" in p.stderr
    assert "512k" in p.stderr


# ---- item 10: only regular files, no hangs -------------------------------------------


def hanging_build(tmp_path, srcs, include, prefix=""):
    """custom_op.build of a compute source that includes `include`, in a
    subprocess whose stdin is an open pipe (reading it would wait)."""
    (tmp_path / "bad.c").write_text(f"{prefix}#include {include}\n" + KERNELS)
    code = f"""
        from opcore import custom_op
        try:
            custom_op.build("hostile", [{str(tmp_path / 'bad.c')!r}], [{str(srcs / 'shape.c')!r}],
                            build_directory={str(tmp_path / 'out')!r})
            print("BUILT")
        except Exception as e:
            print("REFUSED", e)
    """
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        out, err = p.communicate(timeout=CASE_TIMEOUT)  # stdin stays open until then
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        pytest.fail(f"the build with #include {include} hung")
    return p.returncode, out, err


def test_include_of_dev_stdin_is_refused_not_waited_on(tmp_path, srcs):
    rc, out, err = hanging_build(tmp_path, srcs, "</dev/stdin>")
    assert rc == 0, err[-2000:]
    assert "REFUSED" in out and "includes /dev/stdin" in out and "regular files" in out, out + err


def test_include_of_a_fifo_is_refused_not_waited_on(tmp_path, srcs):
    os.mkfifo(tmp_path / "pipe.h")
    rc, out, err = hanging_build(tmp_path, srcs, '"pipe.h"')
    assert rc == 0, err[-2000:]
    assert "REFUSED" in out and "pipe.h, which is a FIFO" in out, out + err


def test_fifo_reached_through_a_header_is_refused(tmp_path, srcs):
    os.mkfifo(tmp_path / "pipe.h")
    (tmp_path / "inner.h").write_text('#include "pipe.h"\n')
    rc, out, err = hanging_build(tmp_path, srcs, '"inner.h"')
    assert rc == 0, err[-2000:]
    assert "REFUSED" in out and "inner.h:1 includes" in out and "FIFO" in out, out + err


def test_include_of_dev_stdin_through_a_macro_is_refused(tmp_path, srcs):
    """The literal scan cannot see it; the compiler reads /dev/null and its
    dependency list names /dev/stdin, which is refused."""
    rc, out, err = hanging_build(tmp_path, srcs, "STDIN", prefix="#define STDIN </dev/stdin>\n")
    assert rc == 0, err[-2000:]
    assert "REFUSED" in out and "includes /dev/stdin" in out, out + err


def test_fifo_included_through_a_macro_ends_the_compile(tmp_path, srcs):
    """The literal scan cannot see it and the compiler blocks opening the
    FIFO: the build tool notices the wait and ends the compile."""
    os.mkfifo(tmp_path / "pipe.h")
    rc, out, err = hanging_build(tmp_path, srcs, "PIPE", prefix='#define PIPE "pipe.h"\n')
    assert rc == 0, err[-2000:]
    assert "REFUSED" in out and "waiting to open a FIFO" in out, out + err


@needs_cli
def test_cli_include_of_dev_stdin_is_refused(tmp_path, srcs):
    (tmp_path / "bad.c").write_text("#include </dev/stdin>\n" + KERNELS)
    p = subprocess.Popen([str(CLI), "build", "-n", "hostile", "-s", str(srcs / "shape.c"),
                          "-c", str(tmp_path / "bad.c"), "-o", str(tmp_path / "out")],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=CASE_TIMEOUT)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        pytest.fail("opcore build with #include </dev/stdin> hung")
    assert p.returncode != 0
    assert "includes /dev/stdin" in err


# ---- item 10: the build lock -------------------------------------------------------------

SLOW_CC = """#!/bin/sh
# a compiler that takes its time (but answers --version at once)
for a in "$@"; do [ "$a" = "--version" ] && exec cc "$@"; done
sleep 30
exec cc "$@"
"""


def start_build(srcs, out, **env):
    code = f"""
        from opcore import custom_op
        try:
            custom_op.build("hostile", [{str(srcs / 'kernels.c')!r}], [{str(srcs / 'shape.c')!r}],
                            build_directory={str(out)!r})
            print("BUILT")
        except Exception as e:
            print("REFUSED", e)
    """
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ, **env), start_new_session=True)


def wait_for_lock_holder(lock, pid):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if lock.exists() and lock.read_text().strip() == str(pid):
            return
        time.sleep(0.05)
    pytest.fail(f"process {pid} never took the build lock {lock}")


def test_lock_held_by_a_stopped_build_times_out_naming_its_pid(tmp_path, srcs):
    cc = tmp_path / "slowcc"
    cc.write_text(SLOW_CC)
    cc.chmod(0o755)
    out = tmp_path / "out"
    holder = start_build(srcs, out, CC=str(cc))
    try:
        wait_for_lock_holder(out / ".libhostile.so.lock", holder.pid)
        os.kill(holder.pid, signal.SIGSTOP)
        t0 = time.monotonic()
        p = start_build(srcs, out, OPCORE_BUILD_LOCK_TIMEOUT="2")
        stdout, stderr = p.communicate(timeout=CASE_TIMEOUT)
        assert time.monotonic() - t0 < CASE_TIMEOUT
        assert "REFUSED" in stdout, stdout + stderr
        assert f"held by process {holder.pid} (stopped)" in stdout
        assert "OPCORE_BUILD_LOCK_TIMEOUT" in stdout
        assert f"waiting for process {holder.pid} (stopped)" in stderr  # said while waiting
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.communicate()


def test_lock_of_a_dead_holder_is_taken_over(tmp_path, srcs):
    """The lock's descriptor outlives the build that took it (a process it
    started keeps it open): the next build takes the lock over."""
    out = tmp_path / "out"
    out.mkdir()
    lock = out / ".libhostile.so.lock"
    p = run_py(f"""
        import fcntl, os, subprocess
        fd = os.open({str(lock)!r}, os.O_RDWR | os.O_CREAT)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, b"%d\\n" % os.getpid())
        child = subprocess.Popen(["sleep", "120"], pass_fds=[fd], start_new_session=True,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(child.pid)
    """)
    survivor = int(p.stdout)
    try:
        b = start_build(srcs, out, OPCORE_BUILD_LOCK_TIMEOUT="60")
        stdout, stderr = b.communicate(timeout=CASE_TIMEOUT)
        assert "BUILT" in stdout, stdout + stderr
        assert "which is dead: taking it over" in stderr
        assert (out / "libhostile.so").exists()
    finally:
        os.kill(survivor, signal.SIGKILL)


# ---- item 9: unload while calls run --------------------------------------------

SLOW_KERNEL = r"""
#include <time.h>
#include <opcore/kernel.h>

/* x + 1, slowly: calls are still running when another thread unloads */
oc_tensor *slow_inc(const oc_tensor *x)
{
    struct timespec nap = {0, 2000000};
    nanosleep(&nap, NULL);
    oc_tensor *out = oc_dst_tensor();
    const float *a = x->data;
    float *o = out->data;
    for (int64_t i = 0; i < oc_numel(x); i++) o[i] = a[i] + 1;
    return out;
}
"""

SLOW_SHAPE = r"""
#include <opcore/library.h>
static oc_tensor *same(const oc_tensor *x) { return oc_empty_like(x); }
OC_LIBRARY(unloadme, m) { oc_def(m, "slow_inc(Tensor x) -> Tensor", same, "slow_inc"); }
"""

UNLOADED = "op 'unloadme::slow_inc': its library 'unloadme' was unloaded"


@pytest.fixture(scope="module")
def slow_lib(tmp_path_factory):
    d = tmp_path_factory.mktemp("unload_src")
    (d / "k.c").write_text(SLOW_KERNEL)
    (d / "s.c").write_text(SLOW_SHAPE)
    return str(custom_op.build("unloadme", [str(d / "k.c")], [str(d / "s.c")], build_directory=str(d))[0])


def unload_race(path, kinds, rounds=3):
    """Threads calling slow_inc the ways `kinds` names while the main thread
    unloads the library, `rounds` times (loading it again in between).
    Every thread must see right answers, then exactly the unloaded error;
    the process must live."""
    p = run_py(f"""
        import threading, time
        import numpy as np
        from opcore import custom_op
        kinds = {kinds!r}
        if any(k in ("torch", "direct") for k in kinds):
            import torch
        if "jax" in kinds:
            import jax, jax.numpy as jnp
            import opcore.jax
        for r in range({rounds}):
            lib = custom_op.load_library({path!r})
            calls = {{
                "torch": lambda: torch.ops.unloadme.slow_inc(torch.ones(64)),
                "direct": lambda op=lib.slow_inc: op(torch.ones(64)),
                "numpy": lambda op=lib.slow_inc: op(np.ones(64, np.float32)),
            }}
            if "jax" in kinds:
                f = jax.jit(lambda t: opcore.jax.op("unloadme::slow_inc")(t))
                calls["jax"] = lambda: f(jnp.ones(64, jnp.float32))
            ok, ends = [0] * len(kinds), [None] * len(kinds)
            started = threading.Barrier(len(kinds) + 1)
            def worker(i, call):
                started.wait()
                while True:
                    try:
                        y = np.asarray(call())
                    except Exception as e:
                        ends[i] = f"{{type(e).__name__}}: {{e}}"
                        return
                    assert (y == 2).all(), y
                    ok[i] += 1
            threads = [threading.Thread(target=worker, args=(i, calls[k])) for i, k in enumerate(kinds)]
            for t in threads:
                t.start()
            started.wait()
            while min(ok) < 3:  # every thread has run the kernel: calls are in flight
                time.sleep(0.005)
            custom_op.unload("unloadme")
            for t in threads:
                t.join()
            for k, e in zip(kinds, ends):
                print(k, e)
    """)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == rounds * len(kinds), p.stdout + p.stderr
    return lines


@pytest.mark.parametrize("kinds", [("torch", "torch", "torch"), ("direct", "direct", "numpy"),
                                   ("torch", "direct", "torch", "direct")])
def test_unload_while_calls_run_waits_then_refuses_naming_the_op(slow_lib, kinds):
    pytest.importorskip("torch")
    for line in unload_race(slow_lib, kinds):
        assert f"OpError: {UNLOADED}" in line, line


def test_unload_while_jax_jit_calls_run_waits_then_refuses_naming_the_op(slow_lib):
    pytest.importorskip("jax")
    for line in unload_race(slow_lib, ("jax", "jax", "numpy")):
        if line.startswith("jax"):  # the jitted call looks the op up by name
            assert "op 'unloadme::slow_inc' is not loaded" in line, line
        else:
            assert f"OpError: {UNLOADED}" in line, line


def test_torch_op_after_unload_names_the_op(slow_lib):
    """Both an OpOverloadPacket kept from before and a fresh torch.ops
    lookup raise opcore's error, not torch's internal ones."""
    pytest.importorskip("torch")
    p = run_py(f"""
        import torch, opcore
        from opcore import custom_op
        custom_op.load_library({slow_lib!r})
        op = torch.ops.unloadme.slow_inc  # a reference kept from before
        custom_op.unload("unloadme")
        for call in (op, torch.ops.unloadme.slow_inc):
            try:
                call(torch.ones(2))
            except opcore.OpError as e:
                print(e)
    """)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 2 and all(UNLOADED in line for line in lines), p.stdout


def test_torch_op_loaded_again_after_unload_runs(slow_lib):
    pytest.importorskip("torch")
    p = run_py(f"""
        import torch
        from opcore import custom_op
        custom_op.load_library({slow_lib!r})
        custom_op.unload("unloadme")
        custom_op.load_library({slow_lib!r})
        print(torch.ops.unloadme.slow_inc(torch.ones(2)).tolist())
    """)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[2.0, 2.0]"


@isolated
def test_direct_call_after_unload_names_the_op(slow_lib):
    import numpy as np

    lib = custom_op.load_library(slow_lib)
    op = lib.slow_inc
    custom_op.unload("unloadme")
    with pytest.raises(opcore.OpError, match=UNLOADED):
        op(np.ones(2, np.float32))
