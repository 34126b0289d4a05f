"""The `opcore` command of the installed package.

The command-line tool is a C program (src/cli/) shipped inside the package
as opcore/bin/opcore, next to the libopcore it links (opcore/lib/). The
installed `opcore` command is a /bin/sh script (written by setup.py) that
execs it without starting Python; `python -m opcore` (and that script in an
editable install, where the tool is not beside site-packages) replaces the
Python process with it here, so both behave exactly as a `make install`ed
`opcore`: same options, output and exit codes (docs/cli.md).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["executable", "main"]


def executable() -> str:
    """Path of the C command-line tool inside the package."""
    exe = Path(__file__).resolve().parent / "bin" / "opcore"
    if not (exe.is_file() and os.access(exe, os.X_OK)):
        raise FileNotFoundError(
            f"opcore: the command-line tool {exe} is missing from the installed package; "
            "reinstall opcore (`pip install --force-reinstall opcore`), or in a source tree run "
            "`make python`")
    return str(exe)


def build_torch_shim(args: list[str]) -> None:
    """`python -m opcore build-torch-shim [DIR]`: build opcore's torch kernel
    shim for the installed torch into DIR (default: opcore's cache, where
    `import opcore.torch` looks for it after the package's own folder)."""
    if len(args) > 1 or args[:1] in (["-h"], ["--help"]):
        sys.exit("usage: python -m opcore build-torch-shim [DIR]\n" + build_torch_shim.__doc__)
    from opcore import _cache, _torch_native

    try:
        path = _torch_native.build_shim(args[0] if args else _cache.cache_dir("torch"))
    except RuntimeError as e:
        sys.exit(f"opcore: {e}")
    print(f"opcore: torch kernel shim {path}")
    sys.exit(0)


def main(argv: list[str] | None = None) -> None:
    """Run `opcore ARGS...` (ARGS: argv, default sys.argv[1:]); does not return."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["build-torch-shim"]:  # needs torch's headers, found from Python
        build_torch_shim(args[1:])
    try:
        exe = executable()
    except FileNotFoundError as e:
        sys.exit(str(e))
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(exe, ["opcore", *args])


if __name__ == "__main__":
    main()
