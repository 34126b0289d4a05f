#!/usr/bin/env python3
"""Fail if the modules of python/opcore/ import each other in a cycle.

Every import counts, at module level or inside a function: a function-local
import that dodges an import-time cycle is still a circle between files. An
import of the package itself (``from opcore import OpError``) is an edge to
opcore/__init__.py; ``from opcore import _C`` names the submodule. Run from
anywhere:  python3 scripts/check_py_imports.py [package dir]
"""
import ast
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_layers import circles as cycles  # noqa: E402  (one Tarjan for both checks)

PKG = "opcore"
# The C extension: a module of the package too, and a leaf (it imports none
# of the Python modules).
EXTENSIONS = ("_C",)


def module_names(root):
    """{dotted name: path} of the package's .py files."""
    out = {}
    for p in sorted(root.rglob("*.py")):
        parts = list(p.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join([PKG, *parts])] = p
    for ext in EXTENSIONS:
        out[f"{PKG}.{ext}"] = None
    return out


def imports(name, path, modules):
    """The package's modules that module `name` imports (anywhere in it)."""
    is_pkg = path.name == "__init__.py"
    here = name if is_pkg else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = here.split(".")
                up = up[:len(up) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            # `from a import b`: b is a submodule, or a name from a itself
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        for t in targets:
            # `import opcore.x.y` imports opcore.x.y (its parents are packages
            # whose __init__ the import runs too, but opcore's own __init__
            # is light: count the named module only)
            while t and t not in modules:
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


def main(argv):
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[1] / "python" / PKG
    modules = module_names(root)
    graph = {name: imports(name, path, modules) if path else set() for name, path in modules.items()}
    bad = cycles(graph)
    for comp in bad:
        edges = [f"{a} -> {b}" for a in comp for b in sorted(graph[a]) if b in comp]
        print(f"check_py_imports: import cycle among {', '.join(comp)}:\n  " + "\n  ".join(edges), file=sys.stderr)
    if not bad:
        print(f"check_py_imports: {len(modules)} modules of {root}, no import cycle")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
