"""opcore.jax — opcore ops as XLA custom calls in JAX.

Every opcore op is called through ONE XLA FFI handler written in C
(src/jax/ffi_handler.c), registered once as the custom-call target
``"opcore"`` for the CPU platform. The op's qualified name travels as the
custom call's ``op`` attribute, its non-tensor arguments as attributes named
after the schema's arguments::

    import opcore, opcore.jax
    opcore.custom_op.load_library("build/add/libadd.so")
    add = opcore.jax.op("add_ops::tensor_add")

    @jax.jit
    def f(a, b):
        return a * b * add(a, b)

    print(opcore.jax.hlo(f, a, b))      # HLO text with the custom-call

Every schema type works (docs/jax.md): tensors, ``Tensor?`` (None),
``Tensor[]`` (a list of arrays), ``int[]``/``int[N]``, ``float[]``, ``str``,
``ScalarType`` (a dtype), ``T?``, several results, ``-> ()`` and in-place
``Tensor(a!)`` arguments in their functional form (the new values are
returned; XLA updates the buffers in place through input_output_aliases).

Output shapes and dtypes come from the op's shape function (run on the
host at trace time); with symbolic sizes (``jax.export``) they are traced
into JAX dimension expressions. Training: ``opcore.jax.with_vjp(fwd, bwd)``
pairs a forward op with its backward (bound by name) into a
``jax.custom_vjp``. ``opcore.jax.export`` exports with the custom call
allowed; ``batch_dims=`` makes an op split along its batch under sharding.

The handler is compiled at first use with the system C compiler (``$CC``,
default ``cc``) against the installed jaxlib's ``xla/ffi/api/c_api.h`` and
linked against libopcore; the result is cached in
``$OPCORE_CACHE_DIR/jax`` (default ``~/.cache/opcore/jax``), keyed by the
jaxlib version and a hash of the sources.
"""

from __future__ import annotations

import copy
import ctypes
import functools
import hashlib
import os
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable

import numpy as np

import jax
import jax.numpy as jnp

from opcore import _C, _jax_dims, _jax_sharding, _jax_vjp, _jax_vma, custom_op

__all__ = [
    "TARGET",
    "Op",
    "op",
    "with_vjp",
    "passthrough",
    "hlo",
    "export",
    "deserialize",
    "disabled_checks",
    "register",
    "handler_path",
    "forget_ops",
    "alias_copies",
    "call_sites",
]

#: The custom-call target name every opcore op lowers to.
TARGET = "opcore"

# opcore's dtypes (include/opcore/dtype.h) by name, as numpy / jax dtypes
_DTYPE_BY_NAME = {name: jnp.dtype(name) for name in _C.dtype_names()}  # "float32", "bfloat16", ...
_OC_DTYPES = frozenset(_DTYPE_BY_NAME.values())
_SUPPORTED = ", ".join(_C.dtype_names())


# ---------------------------------------------------------------------------
# Locating opcore (headers, libopcore) and the handler source.

_REPO = Path(__file__).resolve().parents[2]  # python/opcore/jax.py -> repo root (source tree)


def _lib_dir() -> Path:
    """libopcore's directory, by the rule every opcore build uses
    (oc_build_lib_dir: $OPCORE_LIB_DIR, else next to the libopcore.so this
    process loaded)."""
    d = _C.lib_dir()
    if not d or not (Path(d) / "libopcore.so").exists():
        raise RuntimeError(f"opcore.jax: cannot find libopcore.so (opcore.lib_dir() gives {d!r}); "
                           "build it with `make lib` or set OPCORE_LIB_DIR")
    return Path(d).resolve()


def _include_dir() -> Path:
    """opcore's headers, by the rule every opcore build uses
    (oc_build_include_dir: $OPCORE_INCLUDE_DIR, else beside libopcore)."""
    d = _C.include_dir()
    if not d or not (Path(d) / "opcore" / "host.h").exists():
        raise RuntimeError(f"opcore.jax: cannot find the opcore headers (opcore.include_dir() gives {d!r}); "
                           "set OPCORE_INCLUDE_DIR")
    return Path(d).resolve()


def _handler_source() -> Path:
    # The source tree's file first (an editable install: edits take effect),
    # then the copy an installed package ships (setup.py stages it).
    here = Path(__file__).resolve().parent
    for p in (_REPO / "src" / "jax" / "ffi_handler.c", here / "_jax_ffi_handler.c"):
        if p.exists():
            return p
    raise RuntimeError(f"opcore.jax: the handler source is missing (neither {here / '_jax_ffi_handler.c'} "
                       "nor src/jax/ffi_handler.c); reinstall opcore")


def _prebuilt_handler(src: Path, c_api: Path, jaxlib_version: str) -> Path | None:
    """The handler built with the package (mk/package.mk, when jaxlib was
    present), if it was built for this jaxlib from this very c_api.h and
    handler source: its name carries the version and the hash of both."""
    tag = hashlib.sha256(c_api.read_bytes() + src.read_bytes()).hexdigest()[:16]
    p = _lib_dir() / f"opcore_jax_ffi-jaxlib{jaxlib_version}-{tag}.so"
    return p if p.exists() else None


def _cache_dir() -> Path:
    return Path(custom_op.cache_dir("jax"))


# ---------------------------------------------------------------------------
# Building and registering the handler.

_lock = threading.RLock()
_handler_lib: ctypes.CDLL | None = None
_handler_so: Path | None = None
_registered = False


def _build_handler() -> Path:
    import jaxlib

    src = _handler_source()
    jax_inc = Path(jax.ffi.include_dir())
    c_api = jax_inc / "xla" / "ffi" / "api" / "c_api.h"
    if not c_api.exists():
        raise RuntimeError(f"opcore.jax: jaxlib ships no {c_api}; jaxlib {jaxlib.__version__} is too old")
    prebuilt = _prebuilt_handler(src, c_api, jaxlib.__version__)
    if prebuilt is not None:
        return prebuilt
    inc = _include_dir()
    lib = _lib_dir()
    cc = os.environ.get("CC", "cc")

    h = hashlib.sha256()
    h.update(src.read_bytes())
    h.update(c_api.read_bytes())
    for p in sorted((inc / "opcore").glob("*.h")):  # host.h and what it includes
        h.update(p.read_bytes())
    h.update(str(lib).encode())
    h.update(cc.encode())
    ver = jaxlib.__version__
    out = _cache_dir() / f"opcore_jax_ffi-jaxlib{ver}-{h.hexdigest()[:16]}.so"
    if out.exists():
        return out

    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=out.stem + ".", suffix=".so.tmp", dir=out.parent)
    os.close(fd)
    # libopcore's soname is libopcore.so.0: the dynamic loader looks for that
    # name. A build tree may only hold libopcore.so; then point a private
    # libopcore.so.0 link at it. (If the opcore package already loaded
    # libopcore, the loader reuses that instance by its soname.)
    rpaths = [str(lib)]
    if not (lib / "libopcore.so.0").exists():
        link_dir = _cache_dir() / ("lib-" + hashlib.sha256(str(lib).encode()).hexdigest()[:12])
        link_dir.mkdir(parents=True, exist_ok=True)
        link = link_dir / "libopcore.so.0"
        if not link.exists():
            try:
                os.symlink(lib / "libopcore.so", link)
            except FileExistsError:
                pass
        rpaths.insert(0, str(link_dir))
    cmd = [
        cc, "-std=c11", "-O2", "-fPIC", "-shared", "-fvisibility=hidden",
        "-I", str(jax_inc), "-I", str(inc),
        str(src), "-o", tmp,
        "-L", str(lib), "-lopcore", "-Wl,-rpath," + ":".join(rpaths),
    ]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(
                "opcore.jax: compiling the XLA FFI handler failed:\n$ "
                + " ".join(cmd) + "\n" + r.stdout + r.stderr
            )
        os.replace(tmp, out)  # atomic: concurrent builders are harmless
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


def handler_path() -> Path:
    """Path of the compiled handler library (building it if needed)."""
    _load_handler()
    assert _handler_so is not None
    return _handler_so


def _load_handler() -> ctypes.CDLL:
    global _handler_lib, _handler_so
    with _lock:
        if _handler_lib is None:
            so = _build_handler()
            lib = ctypes.CDLL(str(so))
            lib.oc_jax_handler_address.restype = ctypes.c_void_p
            lib.oc_jax_handler_address.argtypes = []
            lib.oc_jax_forget_ops.restype = None
            lib.oc_jax_alias_copies.restype = ctypes.c_uint64
            lib.oc_jax_alias_copies.argtypes = []
            for f in ("oc_jax_site_type_id", "oc_jax_site_type_info"):
                getattr(lib, f).restype = ctypes.c_void_p
                getattr(lib, f).argtypes = []
            lib.oc_jax_sites.restype = ctypes.c_uint64
            lib.oc_jax_sites.argtypes = []
            lib.oc_jax_prepared_sites.restype = ctypes.c_uint64
            lib.oc_jax_prepared_sites.argtypes = []
            _handler_lib, _handler_so = lib, so
        return _handler_lib


def register() -> None:
    """Register the ``"opcore"`` FFI target with XLA (once per process)."""
    global _registered
    with _lock:
        if _registered:
            return
        lib = _load_handler()
        # The per-call-site state's type first (XLA assigns its id), then
        # the handler for two stages: instantiate decodes each call site's
        # attributes once, execute runs the calls (src/jax/ffi_handler.c).
        jax.ffi.register_ffi_type("opcore_call_site", {
            "type_id": jax.ffi.pycapsule(lib.oc_jax_site_type_id()),
            "type_info": jax.ffi.pycapsule(lib.oc_jax_site_type_info())}, platform="cpu")
        handler = jax.ffi.pycapsule(lib.oc_jax_handler_address())
        jax.ffi.register_ffi_target(TARGET, {"instantiate": handler, "execute": handler}, platform="cpu")
        _registered = True


def forget_ops() -> None:
    """Drop the handler's cached op lookups (after unloading a library)."""
    if _handler_lib is not None:
        _handler_lib.oc_jax_forget_ops()
    _forget_python_caches()


# ---------------------------------------------------------------------------
# Op metadata (from opcore._C.Op: arg_info, results).

class _Arg:
    """One schema argument, as opcore._C.Op.arg_info describes it."""

    _INFO = ("name", "type", "schema_type", "optional", "mutable", "list_len", "keyword_only",
             "has_default", "default")
    __slots__ = ("index", *_INFO, "is_tensor", "is_list")

    def __init__(self, index: int, info: dict):
        self.index = index
        for k in self._INFO:
            setattr(self, k, info[k])
        # Tensor, Tensor?, Tensor(a!), Tensor[]: operands, not attributes
        self.is_tensor = self.type in ("Tensor", "Tensor[]")
        self.is_list = self.type == "Tensor[]"

    def __repr__(self):
        return f"{self.schema_type} {self.name}"


class _OpMeta:
    """A loaded op's schema, read once: arguments, results, aliases."""

    def __init__(self, cop):
        self.op = cop
        self.qualname = cop.qualname
        self.schema = cop.schema
        self.args = tuple(_Arg(i, d) for i, d in enumerate(cop.arg_info))
        self.by_name = {a.name: a for a in self.args}
        self.results = tuple((name, alias) for name, alias in cop.results)
        self.result_names = tuple(name or f"result{i}" for i, (name, _) in enumerate(self.results))
        self.fresh = tuple(i for i, (_, alias) in enumerate(self.results) if alias is None)
        self.mutated = tuple(a for a in self.args if a.mutable)
        self.tensor_args = tuple(a for a in self.args if a.is_tensor)

    def error(self, msg: str, arg: _Arg | None = None):
        where = f"argument '{arg.name}' ({arg.schema_type}): " if arg is not None else ""
        return _C.OpArgumentError(f"opcore op '{self.qualname}': {where}{msg} (schema: {self.schema})")


@functools.lru_cache(maxsize=None)
def _op_info(qualname: str) -> _OpMeta:
    try:
        cop = _C.find_op(qualname)
    except KeyError as e:
        raise LookupError(
            f"opcore.jax: op '{qualname}' is not loaded ({e.args[0]}); load its library first "
            "(opcore.custom_op.load / load_library)"
        ) from None
    return _OpMeta(cop)


def _forget_python_caches():
    _op_info.cache_clear()
    _result_specs.cache_clear()
    _jax_sharding.forget()


# ---------------------------------------------------------------------------
# Arguments: binding a call to the schema, checking and normalising values.

_MISSING = _C.MISSING  # an argument left to its schema default


def _is_array(v) -> bool:
    return isinstance(v, (jax.Array, np.ndarray, np.generic)) or hasattr(v, "aval")


def _static(meta: _OpMeta, a: _Arg, v):
    """A concrete Python value for a non-tensor argument (arrays of rank 0
    or 1 become numbers or lists; traced values are refused)."""
    if isinstance(v, jax.core.Tracer):
        raise meta.error("must be a static Python value, not a traced array (non-tensor arguments "
                         "become attributes of the custom call; make it static, e.g. "
                         "jax.jit(..., static_argnames=...))", a)
    if isinstance(v, (jax.Array, np.ndarray, np.generic)) and np.ndim(v) <= 1:
        v = np.asarray(v).tolist()
    return v


def _as_int(meta, a, v, what="an int"):
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise meta.error(f"expected {what}, got {v!r}", a)
    v = int(v)
    if not -(1 << 63) <= v < (1 << 63):
        raise meta.error(f"{v} does not fit in a 64-bit int", a)
    return v


def _as_float(meta, a, v, what="a float"):
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise meta.error(f"expected {what}, got {v!r}", a)
    return float(v)


def _as_list(meta, a, v, item, what):
    """int[] / float[]: a list or tuple; int[N] / float[N] also take one
    number for all N items."""
    if a.list_len and not isinstance(v, (list, tuple)):
        return (item(meta, a, v, what),) * a.list_len
    if not isinstance(v, (list, tuple)):
        raise meta.error(f"expected a list of {what}s, got {type(v).__name__}", a)
    out = tuple(item(meta, a, x, what) for x in v)
    if a.list_len and len(out) != a.list_len:
        raise meta.error(f"expected {a.list_len} {what}s, got a list of {len(out)}", a)
    return out


def _dtype_name(meta, a, v) -> str:
    try:
        dt = np.dtype(v)
    except (TypeError, ValueError):  # numpy's "not understood" / "cannot interpret"
        dt = None
    if dt is None or dt not in _OC_DTYPES:
        raise meta.error(f"expected a dtype opcore supports ({_SUPPORTED}; e.g. jnp.float32 or "
                         f"'float32'), got {v!r}{' (an int code is not a dtype)' if type(v) is int else ''}", a)
    return dt.name


def _dict_kind(v) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, tuple):
        return "float[]" if any(isinstance(x, float) for x in v) else "int[]"
    return type(v).__name__  # int, float, str


class _DictValue(dict):
    """A Dict argument's normalised value: a dict of int, float, bool, str
    and tuples (lists), hashable by its typed items so that it can be part
    of a call's static key ({'a': 1} and {'a': True} differ)."""

    def _typed(self):
        return tuple((k, _dict_kind(v), v) for k, v in self.items())

    def __hash__(self):
        return hash(self._typed())

    def __eq__(self, other):
        return isinstance(other, _DictValue) and self._typed() == other._typed()

    def __ne__(self, other):
        return not self == other


class _DictArray:
    """A list inside a Dict attribute: jax.ffi_call needs hashable attribute
    values, and lowers this as the dense array it stands for."""

    def __init__(self, array):
        self.array = array

    def __hash__(self):
        return hash((self.array.dtype.str, self.array.tobytes()))

    def __eq__(self, other):
        return (isinstance(other, _DictArray) and self.array.dtype == other.array.dtype
                and np.array_equal(self.array, other.array))

    def __jax_array__(self):
        return self.array


def _norm_dict(meta: _OpMeta, a: _Arg, v) -> _DictValue:
    """A Dict argument: str keys; int, float, bool, str or list values."""
    if not isinstance(v, dict):
        raise meta.error(f"expected a dict, got {type(v).__name__}", a)
    out = _DictValue()
    for k, x in v.items():
        if not isinstance(k, str):
            raise meta.error(f"keys must be str, got {k!r}", a)
        where = f"key {k!r}: "
        if "\0" in k:
            raise meta.error(where + "a key may not hold a NUL character (the kernel gets a C string)", a)
        if isinstance(x, jax.core.Tracer):
            raise meta.error(where + "must be a static Python value, not a traced array (a Dict becomes "
                             "an attribute of the custom call)", a)
        if isinstance(x, (jax.Array, np.ndarray)) and np.ndim(x) <= 1:
            x = np.asarray(x).tolist()
        if isinstance(x, (bool, np.bool_)):
            out[k] = bool(x)
        elif isinstance(x, (int, np.integer)):
            out[k] = _as_int(meta, a, x, where + "an int")
        elif isinstance(x, (float, np.floating)):
            out[k] = float(x)
        elif isinstance(x, str):
            if "\0" in x:
                raise meta.error(where + "a str may not hold a NUL character (the kernel gets a C string)", a)
            out[k] = x
        elif isinstance(x, (list, tuple)):
            if any(isinstance(y, (bool, np.bool_)) or not isinstance(y, (int, float, np.integer, np.floating))
                   for y in x):
                raise meta.error(where + f"a list holds ints or floats only, got {x!r}", a)
            floats = any(isinstance(y, (float, np.floating)) for y in x)
            out[k] = tuple(float(y) if floats else _as_int(meta, a, y, where + "an int") for y in x)
        else:
            raise meta.error(where + f"expected an int, float, bool, str or a list of numbers, got "
                             f"{type(x).__name__}", a)
    return out


def _dict_attr(v: _DictValue) -> dict:
    """A Dict's value as a dictionary attribute (the handler decodes it)."""
    out = {}
    for k, x in v.items():
        if isinstance(x, tuple):
            x = _DictArray(np.asarray(x, dtype=np.float64 if _dict_kind(x) == "float[]" else np.int64)
                           .reshape(len(x)))
        else:
            x = _attr(None, x)
        out[k] = x
    return out


def _norm_static(meta: _OpMeta, a: _Arg, v):
    """A non-tensor argument's value, checked and normalised: int, float,
    bool, str, a dtype name (ScalarType), a tuple (int[], float[]) or None."""
    if v is None:
        if not a.optional:
            raise meta.error(f"got None; only optional ({a.schema_type}?) arguments take None", a)
        return None
    if a.type == "Dict":
        return _norm_dict(meta, a, v)
    v = _static(meta, a, v)
    t = a.type
    if t == "int":
        return _as_int(meta, a, v)
    if t == "float":
        return _as_float(meta, a, v)
    if t == "bool":
        if not isinstance(v, (bool, np.bool_)):
            raise meta.error(f"expected a bool, got {v!r}", a)
        return bool(v)
    if t == "Scalar":
        if isinstance(v, (bool, np.bool_)):
            return bool(v)
        if isinstance(v, (int, np.integer)):
            return _as_int(meta, a, v)
        return _as_float(meta, a, v, "a number")
    if t == "str":
        if not isinstance(v, str):
            raise meta.error(f"expected a str, got {type(v).__name__}", a)
        if "\0" in v:  # the kernel gets a C string: it would end at the NUL
            raise meta.error(f"the str holds a NUL character at index {v.index(chr(0))}; a kernel receives a str "
                             "as a C string, which would end there (pass the data as an array instead)", a)
        return v
    if t == "ScalarType":
        return _dtype_name(meta, a, v)
    if t == "int[]":
        return _as_list(meta, a, v, _as_int, "int")
    if t == "float[]":
        return _as_list(meta, a, v, _as_float, "float")
    raise meta.error(f"has type {t}, which opcore.jax does not know", a)


def _norm_array(meta: _OpMeta, a: _Arg, v, item: int | None = None):
    where = f"item {item} " if item is not None else ""
    if not _is_array(v):
        if isinstance(v, (list, tuple)):  # as jnp functions do: a list is not an array
            raise meta.error(f"{where}expected an array, got a {type(v).__name__}" +
                             ("" if a.is_list else " (only Tensor[] arguments take lists)"), a)
        try:
            v = jnp.asarray(v)
        except Exception:
            raise meta.error(f"{where}expected an array, got {type(v).__name__}", a) from None
    dt = np.dtype(v.dtype)
    if dt not in _OC_DTYPES:
        raise meta.error(f"{where}has dtype {dt}, which opcore does not support ({_SUPPORTED})", a)
    return v


def _norm_tensor(meta: _OpMeta, a: _Arg, v):
    """A tensor argument: an array, None (Tensor?) or a list of arrays (Tensor[])."""
    if v is None:
        if not a.optional:
            raise meta.error("got None; only Tensor? arguments take None", a)
        return None
    if a.is_list:
        if _is_array(v) or not isinstance(v, (list, tuple)):
            raise meta.error(f"expected a list of arrays, got {type(v).__name__}", a)
        return [_norm_array(meta, a, x, k) for k, x in enumerate(v)]
    return _norm_array(meta, a, v)


def _bind(meta: _OpMeta, args: tuple, kwargs: dict) -> list:
    """The call's values in schema order (normalised; _MISSING where the
    schema default applies), bound by the C op's binder (strict: keyword-only
    arguments by keyword only)."""
    vals = meta.op.bind(args, kwargs, strict=True)
    for a in meta.args:
        v = vals[a.index]
        if v is _MISSING:
            if a.is_tensor:
                vals[a.index] = None  # Tensor? = None: an explicit None keeps the operand count clear
            continue
        vals[a.index] = _norm_tensor(meta, a, v) if a.is_tensor else _norm_static(meta, a, v)
    return vals


def _static_key(meta: _OpMeta, vals: list) -> tuple:
    """What of a call is static: non-tensor values and the tensors' structure
    (None, or a list's length). Hashable; equal keys lower alike."""
    key = []
    for a in meta.args:
        v = vals[a.index]
        if a.is_tensor:
            key.append(None if v is None else len(v) if a.is_list else -1)
        else:
            key.append(v)
    return tuple(key)


# ---------------------------------------------------------------------------
# Result shapes: the op's shape function, run on shapes and dtypes only.

class _Spec:
    """A shape and a dtype, as opcore._C.Op.infer / trace read them."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), dtype


def _tensor_meta(v):
    if v is None:
        return None
    if isinstance(v, list):
        return _jax_dims.ListMeta((tuple(x.shape), np.dtype(x.dtype)) for x in v)
    return (tuple(v.shape), np.dtype(v.dtype))


def _shape_kwargs(meta: _OpMeta, key: tuple, tmeta: tuple, dims=None) -> dict:
    """Keyword arguments for op.infer / op.trace: shape specs for tensors
    (sizes mapped through `dims`, for probe runs), static values as given."""
    kw = {}
    for a, k, m in zip(meta.args, key, tmeta):
        if a.is_tensor:
            if m is None:
                kw[a.name] = None
            elif a.is_list:
                kw[a.name] = [_Spec(dims(s) if dims else s, d) for s, d in m]
            else:
                kw[a.name] = _Spec(dims(m[0]) if dims else m[0], m[1])
        elif k is not _MISSING:
            kw[a.name] = list(k) if isinstance(k, tuple) else k
    return kw


@functools.lru_cache(maxsize=4096)
def _result_specs(qualname: str, key: tuple, tmeta: tuple) -> tuple:
    """((shape, numpy dtype), ...) for every result of the op (aliased ones
    included). Symbolic sizes (jax.export) go through op.trace."""
    meta = _op_info(qualname)
    if all(_jax_dims.is_static(s) for m in tmeta for s, _ in _jax_dims.items(m)):
        got = meta.op.infer(**_shape_kwargs(meta, key, tmeta))
        return _check_sizes(qualname, tuple((tuple(n), _DTYPE_BY_NAME[dt]) for n, dt in got))
    traced = _jax_dims.trace(meta, lambda dims: _shape_kwargs(meta, key, tmeta, dims), tmeta)
    return _check_sizes(qualname, tuple((shape, _DTYPE_BY_NAME[dt]) for shape, dt in traced))


_INT64_MAX = 2**63 - 1


def _check_sizes(qualname: str, specs: tuple) -> tuple:
    """`specs`, if every result's byte count fits in int64 (XLA keeps byte
    sizes in int64 and aborts the process on a shape beyond them, eager or
    jitted); else opcore's error naming the op and the result. Symbolic
    sizes are checked when they become numbers."""
    for i, (shape, dtype) in enumerate(specs):
        if not all(isinstance(n, (int, np.integer)) for n in shape):
            continue
        count = dtype.itemsize
        for n in shape:
            count *= int(n)
        if count > _INT64_MAX:
            sizes = ", ".join(str(int(n)) for n in shape)
            raise _C.OpError(f"op '{qualname}': result {i}: its shape function answered "
                             f"sizes [{sizes}] of {dtype.name}, which hold more bytes than int64 "
                             "can count")
    return specs


# ---------------------------------------------------------------------------
# The JAX callable.

def _attr(a: _Arg, v):
    """A normalised non-tensor value of argument `a` as a custom-call attribute."""
    if v is None:
        return {}  # None (the handler reads an empty dictionary as None)
    if isinstance(v, _DictValue):
        return _dict_attr(v)  # a Dict argument (never None: there is no Dict?)
    if isinstance(v, bool):
        return np.bool_(v)
    if isinstance(v, int):
        return np.int64(v)
    if isinstance(v, float):
        return np.float64(v)
    if isinstance(v, tuple):  # int[] / float[]: a dense array
        return np.asarray(v, dtype=np.int64 if a.type == "int[]" else np.float64).reshape(len(v))
    return v  # str (and ScalarType by name)


class Op:
    """A JAX callable for one loaded opcore op (see :func:`op`).

    Call it like the schema: tensors as JAX or numpy arrays (``None`` for a
    ``Tensor?``, a list for a ``Tensor[]``), non-tensor arguments as static
    Python values (they become attributes of the custom call; a changed
    value retraces). It returns the op's functional form: its fresh results
    followed by the new value of every mutated argument; one value alone,
    several as a tuple, ``None`` for none.
    """

    def __init__(self, qualname: str, vmap_method: str = "sequential", batch_dims=None,
                 has_side_effect: bool = False, grid=None):
        if "::" not in qualname:
            raise ValueError(f"opcore.jax.op: expected 'library::op', got {qualname!r}")
        register()
        self.qualname = qualname
        self.vmap_method = vmap_method
        if not isinstance(has_side_effect, (bool, np.bool_)):
            raise TypeError(f"opcore.jax.op('{qualname}'): has_side_effect must be True or False, "
                            f"got {has_side_effect!r}")
        self.has_side_effect = bool(has_side_effect)
        self._meta = meta = _op_info(qualname)
        self.schema = meta.schema
        for attr in ("op", "opcore_grid"):
            if attr in meta.by_name:
                raise ValueError(f"opcore.jax: op '{qualname}' has an argument named '{attr}', which clashes "
                                 "with the custom call's attribute of that name")
        self.grid = _grid(qualname, grid)
        self.tensor_args = tuple(a.name for a in meta.tensor_args)
        self.batch_dims = _jax_sharding.BatchDims.parse(meta, batch_dims) if batch_dims is not None else None
        self.__name__ = qualname.split("::", 1)[1]
        self.__qualname__ = self.__name__
        self.__doc__ = f"opcore op {qualname}: {self.schema}"

    def __repr__(self):
        grid = f", grid={self.grid}" if self.grid else ""
        return f"opcore.jax.op({self.qualname!r}{grid})  # {self.schema}"

    def __getitem__(self, grid):
        """``op[2, 2]``: the op launched on that grid (as NKI's ``kernel[grid]``)."""
        launched = copy.copy(self)
        launched.grid = _grid(self.qualname, grid)
        return launched

    def bind(self, args: tuple, kwargs: dict) -> list:
        """The call's arguments in schema order, checked and normalised
        (tensors: arrays, None, lists; the rest: Python values; a default
        left out is filled in)."""
        vals = _bind(self._meta, args, kwargs)
        return [a.default if v is _MISSING else v for a, v in zip(self._meta.args, vals)]

    def __call__(self, *args, **kwargs):
        return self._call(_bind(self._meta, args, kwargs))

    # -- internals -------------------------------------------------------------

    def _bound(self, args: tuple, kwargs: dict) -> list:
        """The call's values in schema order, normalised (_MISSING where the
        schema default applies)."""
        return _bind(self._meta, args, kwargs)

    def _key(self, vals: list) -> tuple:
        """The static key of bound values (see _static_key)."""
        return _static_key(self._meta, vals)

    def _call(self, vals: list):
        """Run the op on bound values (from _bind)."""
        meta = self._meta
        key = _static_key(meta, vals)
        tensors = [vals[a.index] for a in meta.tensor_args]
        if self.batch_dims is not None:
            routed = _jax_sharding.route(self, key, tensors)
            if routed is not None:
                return routed
        return self._lower(key, tensors)

    def _lower(self, key: tuple, tensors: list):
        """The custom call itself: operands, attributes, results."""
        meta = self._meta
        flat = _jax_vma.flatten(tensors)
        vma = _jax_vma.vma_union(flat)
        if vma:
            flat = [_jax_vma.to_varying(x, vma) for x in flat]
        tmeta = tuple(_tensor_meta(v) if a.is_tensor else None
                      for a, v in zip(meta.args, self._full(key, tensors)))
        specs = _result_specs(self.qualname, key, tmeta)

        # results: fresh ones, then one per mutated tensor (aliased to its operand)
        like = flat[0] if flat else None
        results = [_jax_vma.result_struct(*specs[i], vma, like) for i in meta.fresh]
        aliases, mutated_counts, pos = {}, [], 0
        for a, t in zip(meta.tensor_args, tensors):
            n = 0 if t is None else len(t) if a.is_list else 1
            if a.mutable:
                for j in range(n):
                    aliases[pos + j] = len(results)
                    x = flat[pos + j]
                    results.append(_jax_vma.result_struct(tuple(x.shape), np.dtype(x.dtype), vma, like))
                mutated_counts.append((a.is_list, n))
            pos += n

        attrs = {"op": self.qualname}
        if self.grid:
            attrs["opcore_grid"] = np.asarray(self.grid, dtype=np.int64)
        for a, k in zip(meta.args, key):
            if a.is_tensor:
                if k is None:
                    attrs[a.name] = {}  # Tensor? given None
                elif a.is_list:
                    attrs[a.name] = np.int64(k)
            elif k is not _MISSING:
                attrs[a.name] = _attr(a, k)

        call = jax.ffi.ffi_call(TARGET, results, vmap_method=self.vmap_method,
                                input_output_aliases=aliases or None,
                                has_side_effect=self.has_side_effect or not results)
        try:
            outs = list(call(*flat, **attrs))
        except ValueError as e:
            if "cannot be differentiated" not in str(e):
                raise
            raise ValueError(_no_gradient(meta)) from None

        # the functional form: fresh results, then each mutated argument's new value
        value = outs[:len(meta.fresh)]
        rest = outs[len(meta.fresh):]
        for is_list, n in mutated_counts:
            value.append(rest[:n] if is_list else rest[0] if n else None)  # None: a Tensor(a!)? given None
            rest = rest[n:]
        if not value:
            return None
        return value[0] if len(value) == 1 else tuple(value)

    def _full(self, key: tuple, tensors: list) -> list:
        """Values in schema order from a static key and the tensors."""
        it = iter(tensors)
        return [next(it) if a.is_tensor else k for a, k in zip(self._meta.args, key)]


def _no_gradient(meta: _OpMeta) -> str:
    if meta.mutated:
        return (f"opcore op '{meta.qualname}' writes its arguments in place "
                f"({', '.join(a.name for a in meta.mutated)}) and has no gradient: differentiate a "
                "functional op, or keep the in-place op out of jax.grad (e.g. the optimiser step)")
    return (f"opcore op '{meta.qualname}' has no gradient by itself: pair it with its backward, "
            f"opcore.jax.with_vjp('{meta.qualname}', '<library>::<backward op>' or a callable)")


def _grid(qualname: str, grid):
    """A launch grid as a tuple of 1 to 3 ints >= 1 (an int is a 1-d grid), or None."""
    if grid is None:
        return None
    dims = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
    if not 1 <= len(dims) <= 3:
        raise ValueError(f"opcore.jax: op '{qualname}': a launch grid has 1 to 3 axes, got {len(dims)}")
    for d, n in enumerate(dims):
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
            raise TypeError(f"opcore.jax: op '{qualname}': axis {d} of the launch grid must be an int, "
                            f"got {type(n).__name__}")
        if not 1 <= n <= _INT64_MAX:
            raise ValueError(f"opcore.jax: op '{qualname}': axis {d} of the launch grid is {n}; every axis "
                             f"needs {'at least 1 program' if n < 1 else 'at most 2**63 - 1 programs'}")
    return tuple(int(n) for n in dims)


def op(qualname: str, *, vmap_method: str = "sequential", batch_dims=None, has_side_effect: bool = False,
       grid=None) -> Op:
    """A JAX callable for the loaded op ``qualname`` ("library::op").

    ``vmap_method`` says how ``jax.vmap`` maps it (see jax.ffi.ffi_call):
    ``"sequential"`` (default: a loop of calls, right for any op) or
    ``"broadcast_all"`` (one call on the batched arrays: right for
    rank-polymorphic ops such as element-wise ones), or ``"expand_dims"``.

    ``batch_dims`` declares the op batch-separable, so that it runs per shard
    when its inputs are sharded along the batch (``jax.jit`` with a
    ``NamedSharding``) instead of on gathered inputs: an int (the batch
    dimension of every tensor argument and result), a tuple of ints
    (several batch dimensions at any positions: the j-th of every batched
    tensor is one batch axis), or a dict from argument and result names to
    those or None (not batched); see docs/jax.md.

    ``has_side_effect=True`` marks an op whose calls matter beyond its
    results (a counter, a logger, an op keeping state between calls): XLA
    then keeps every call, even where its results are unused, and never
    merges two equal calls into one (``jax.ffi.ffi_call``'s flag of that
    name). An op without results (``-> ()``) always has it.

    ``grid`` launches the op on that grid (an int or a tuple of up to 3),
    overriding its own (``.grid`` in its oc_def, or its shape function's
    oc_set_grid); ``op(...)[2, 2]`` does the same.
    """
    return Op(qualname, vmap_method=vmap_method, batch_dims=batch_dims, has_side_effect=has_side_effect,
              grid=grid)


# ---------------------------------------------------------------------------
# Training: custom_vjp from forward + backward.

def passthrough(grad, *inputs):
    """A backward that passes the gradient through unchanged (d(a+b)/da = 1)."""
    return grad


def with_vjp(forward, *backward, vmap_method: str = "sequential") -> Callable:
    """Pair a forward op with its backward into a ``jax.custom_vjp`` function.

    ``backward`` is either ONE entry giving the gradients of all tensor
    inputs, or one entry per tensor input of ``forward`` (schema order). An
    entry is an op name or :class:`Op` (bound by name: it receives the
    forward's inputs and non-tensor arguments, its saved results and the
    incoming gradients ``grad`` / ``grad_<result>`` / ``grad<i>``; its
    results ``grad_<input>`` go to that input, others positionally), any
    callable (called as ``bwd(*grads, *tensor_inputs)``; its keyword-only
    parameters named after forward results, or ``results``, receive the
    forward's saved results), or ``None`` (no
    gradient: zeros). Every gradient is checked against its input's shape
    and dtype::

        relu = opcore.jax.with_vjp("my_ops::relu_forward", "my_ops::relu_backward")
        ln = opcore.jax.with_vjp("nn_ops::layer_norm", "nn_ops::layer_norm_backward")
        add = opcore.jax.with_vjp("add_ops::tensor_add", opcore.jax.passthrough,
                                  opcore.jax.passthrough)
    """
    def as_entry(f):
        if f is None or isinstance(f, Op):
            return f
        if isinstance(f, str):
            return op(f, vmap_method=vmap_method)
        if callable(f):
            return f
        raise TypeError(f"opcore.jax.with_vjp: expected an op name, an opcore.jax.Op, a callable or "
                        f"None, got {f!r}")

    fwd = as_entry(forward)
    if not isinstance(fwd, Op):
        raise TypeError("opcore.jax.with_vjp: the forward must be an opcore op (name or opcore.jax.Op)")
    return _jax_vjp.make(fwd, [as_entry(b) for b in backward], Op)


# ---------------------------------------------------------------------------
# jax.export: the custom call is allowed, symbolic sizes are traced.

def disabled_checks() -> list:
    """The safety checks jax.export must skip for opcore ops: its custom
    call target "opcore" is not one of JAX's stable targets."""
    return [jax.export.DisabledSafetyCheck.custom_call(TARGET)]


def export(fun: Callable, *, disabled_checks: tuple = (), **kwargs) -> Callable:
    """``jax.export.export`` for functions that call opcore ops: the
    custom-call check is disabled for "opcore" (and ``disabled_checks``),
    batch-sharded ops lower as plain custom calls (custom partitioning is
    not serialisable). ``fun`` may be jitted or not::

        exp = opcore.jax.export(f)(jax.ShapeDtypeStruct(
            jax.export.symbolic_shape("b, 4"), jnp.float32))
        blob = exp.serialize()
        opcore.jax.deserialize(blob).call(x)   # any batch size

    The process that runs the exported function must load the op libraries.
    """
    checks = [*globals()["disabled_checks"](), *disabled_checks]
    register()
    exporter = jax.export.export(fun if hasattr(fun, "lower") else jax.jit(fun),
                                 disabled_checks=checks, **kwargs)

    @functools.wraps(exporter)
    def run(*args, **kw):
        with _jax_sharding.exporting():
            return exporter(*args, **kw)

    return run


def deserialize(blob: bytes | bytearray):
    """``jax.export.deserialize`` after registering opcore's handler (the
    ops' libraries must be loaded before the function runs)."""
    register()
    return jax.export.deserialize(blob)


# ---------------------------------------------------------------------------
# Debug dump: the graph with the custom call.

def hlo(fn: Callable, *args, compiled: bool = False, dialect: str = "hlo", **kwargs) -> str:
    """Text of ``fn``'s graph for these arguments, showing opcore's custom call.

    ``compiled=False`` (default): the lowered module
    (``jax.jit(fn).lower(*args).as_text(dialect="hlo")``), where the op is
    ``custom-call(...), custom_call_target="opcore"`` with its ``op`` name
    in the backend config; ``dialect="stablehlo"`` gives the MLIR form.
    ``compiled=True``: the HLO after XLA's optimisations
    (``.lower(...).compile().as_text()``), the counterpart of seed 003's
    ``runtime_executable().hlo_modules()[0].to_string()``.
    """
    lowered = jax.jit(fn).lower(*args, **kwargs)
    if compiled:
        return lowered.compile().as_text()
    return lowered.as_text(dialect=dialect)


def call_sites() -> int:
    """How many opcore custom calls were decoded once per call site (in
    XLA's instantiate stage) rather than on every call."""
    return int(_load_handler().oc_jax_sites())


def prepared_sites() -> int:
    """How many call sites run their calls through a prepared call: after
    a site's first call (checked against the shape function), its buffers
    are bound once and each later call only swaps data pointers."""
    return int(_load_handler().oc_jax_prepared_sites())


def alias_copies() -> int:
    """How many times the handler copied a mutated operand into its result
    buffer because XLA did not alias the two (0 when every in-place update
    happened in place)."""
    return int(_load_handler().oc_jax_alias_copies())
