"""Every fenced code block of README.md and docs/*.md runs as written.

Each block is one test, named FILE:LINE (the line of its opening fence):

- ```sh / ```bash: a bash script (`set -e`: every command must succeed);
  ```console: the `$ ` lines of a transcript, the rest is output.
- ```python: a script run by this Python (the venv's); a block of `>>>`
  lines is a doctest: its shown output is checked too.
- ```c: with a main(), compiled against libopcore and run; else op code:
  compiled by `opcore build` (a shape source, with OC_LIBRARY, is built with
  the kernel files its document names; a kernel, with the shape files; a
  kernel alone, with a shape source that registers no op).
- ```text, ```output and fences with no language are output, diagrams or
  usage synopses; ```toml, ```json and the like (DATA_LANGS) files shown:
  not run.

A block runs on its own, in a fresh directory holding a copy of the
repository's examples/ (so `examples/relu/shape.c` and `cd examples/mlp`
work as the docs write them), with `opcore` and this Python first on PATH,
a cache of its own (OPCORE_CACHE_DIR) and, unless the environment sets it,
OMP_NUM_THREADS=1 (the blocks run at once; `nproc` then prints 1 too). Two markers, HTML comments on the
line before a fence (invisible on a rendered page), say what the prose says:

    <!-- doc: file relu.c -->     the block is the file relu.c: written into
                                  the directory of every block of its document
    <!-- doc: continues -->       the block continues the previous block of its
                                  document that runs (not text, not a file, not
                                  in FRAGMENTS), and that one its own previous
                                  if marked: they run first, in the same
                                  directory; consecutive Python blocks in one
                                  process, so names carry over; each runs in
                                  the directory the shell blocks before it
                                  left (a `cd` carries over, as in a terminal)

A block of training or benchmark runs whose document gives the arguments of
a quick run of the same code runs with them (QUICK below). A block that
cannot run as written (a fragment of a function, a command that
installs from the network, a run of many minutes) is listed in FRAGMENTS
below with its reason; the body of an example's function shown alone is
listed in EXCERPTS with its file, and each of its lines must be a line of that
file. A listed block that no longer exists fails the test.

The blocks run in parallel (one per CPU), each with a timeout.
"""
import concurrent.futures
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import CLI, REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
RUN_LANGS = {"sh", "bash", "console", "python", "c"}
TEXT_LANGS = {"", "text", "output"}
# files shown (configuration, data): not run; a <!-- doc: file NAME --> block
# of any language is written for the other blocks of its document
DATA_LANGS = {"toml", "ini", "cfg", "json", "yaml", "make", "makefile", "diff"}
TIMEOUT_S = 240

# (document, the block's first non-blank line, or lines joined by \n, stripped)
# -> why it is not run.
FRAGMENTS = {
    ("README.md", "pip install torch==2.13.0     # the CPU build (an unpinned torch pulls a CUDA build of several GB)"):
        "installs from the network and a built wheel (tests/python/test_package.py installs the wheel)",
    ("README.md", "make demo   # installs what it needs, builds the C ReLU, trains the tutorial's MLP with it"):
        "make test and make fuzz run for 30+ minutes (the demo alone: see tutorial 1)",
    ("docs/python.md", "pip install torch==2.13.0        # the CPU build (an unpinned torch pulls a CUDA build of several GB)"):
        "installs from the network and a built wheel (tests/python/test_package.py installs the wheel)",
    ("docs/tutorial_1_first_operator.md", "sudo apt-get install dataset-fashion-mnist   # the data: /usr/share/datasets/fashion-mnist"):
        "installs system and network packages (scripts/install-deps.sh does it)",
    ("docs/tutorial_1_first_operator.md", "make demo      # = python examples/mlp/demo.py"):
        "make in the repository (deps, build, two trainings); the train.py block before it runs the training",
    ("docs/tutorial_2_performance.md", "make bench                      # or: python bench/mlp_bench.py [--quick]"):
        "the benchmarks run for many minutes (make bench; tests check correctness, not timing)",
    ("docs/tutorial_4_tiles.md", "oc_tile t = oc_tile_alloc(p.rb, p.d, OC_FLOAT32), s = oc_tile_alloc(p.rb, 1, OC_FLOAT32);"):
        "the NKI-shaped port (load, compute, store) that the in-place form shown after it replaced",
    ("docs/tutorial_4_tiles.md", "oc_tile X = oc_tile_of_tensor(&xv, 0), O = oc_tile_of_tensor(&ov, 0), s = oc_tile_alloc(p.rb, 1, OC_FLOAT32);"):
        "the in-place form, before the overlap examples/tiles/rmsnorm.c adds (its loop is shown after it)",
    ("docs/tutorial_5_quantised.md", "/* shape function: the packed bytes' size */"):
        "lines of bench/kernels/lowp_linear.c's pack and packed-linear ops (test_lowp.py runs them)",
    ("docs/tutorial_5_quantised.md", "wp = torch.ops.lowp.lowp_pack_i8(w_int8, w_scale)   # once, at load"):
        "the calls of those ops (tests/python/test_lowp.py makes them on real weights)",
    # C: lines of a function, shown without the function around them
    ("docs/build.md", "float m = oc_max_f32(in, cols);"): "lines of the softmax kernel of examples/activations",
    ("docs/c_api.md", "oc_value args[] = {oc_value_tensor(&x), oc_value_ints((int64_t[]){256}, 1)};"):
        "lines of a host function (the whole program: 'A complete host program' below)",
    ("docs/profiler.md", 'oc_profiler_start("logs", OC_PROFILE_TRACE, 0 /* ms, 0 = until stop */, NULL /* run name */);'):
        "lines of a host program around its op calls",
    ("docs/tensor_ops.md", "#include <opcore/tensor_ops.h>"): "calls shown one per line, on tensors a kernel has",
    ("docs/tutorial_2_performance.md", "oc_tensor *out = oc_dst_tensor();\noc_iter it;"):
        "the oc_iter loop of the bench's badd kernel",
    ("docs/tutorial_2_performance.md", "uint32_t id = oc_cpu_id(), cores = oc_cpu_count();"):
        "two lines: what oc_core_range computes",
    ("docs/tutorial_2_performance.md", "float *xf = oc_tcm_malloc(BLOCK * sizeof *xf), *yf = oc_tcm_malloc(BLOCK * sizeof *yf);"):
        "the loop of the bench's bf16 axpy kernel",
    ("docs/tutorial_2_performance.md", "void badd_into(const oc_tensor *x, const oc_tensor *y, oc_tensor *out) { add_into(out, x, y); }"):
        "a kernel and its oc_def line, elided (...) between",
    ("docs/tutorial_2_performance.md", "out = torch.empty_like(x)          # keeps x's layout, as torch.add does"):
        "the call of the badd_into fragment above (a library no example builds)",
    ("docs/tutorial_3_beyond_relu.md", "/* shape.c */"): "excerpts of examples/ops/shape.c, elided (...)",
    ("docs/tutorial_3_beyond_relu.md", "/* layer_norm.c */"): "an excerpt of examples/ops/layer_norm.c, elided (...)",
    ("docs/tutorial_3_beyond_relu.md", 'oc_def(m, "layer_norm_backward(Tensor grad_out, Tensor x, Tensor mean, Tensor rstd, "'):
        "one oc_def line of examples/ops/shape.c",
    ("docs/tutorial_3_beyond_relu.md", 'oc_def(m, "sgd_momentum_(Tensor(a!)[] params, Tensor(b!)[] momentum_bufs, Tensor[] grads, float lr, "'):
        "one oc_def line of examples/ops/shape.c",
    ("docs/tutorial_3_beyond_relu.md", "void sgd_momentum_(oc_tensor_list_mut params, oc_tensor_list_mut momentum_bufs, oc_tensor_list grads,"):
        "an excerpt of examples/ops/sgd.c, elided (...)",
    ("docs/tutorial_3_beyond_relu.md", "static oc_tensor *concat_shape(oc_tensor_list xs, int64_t dim)"):
        "an excerpt of examples/ops/shape.c, elided (...)",
    ("docs/tutorial_3_beyond_relu.md", "return oc_dim_add(oc_dim_div(oc_dim_sub(oc_dim_add(in, 2 * p), k), s), 1);  /* (in + 2p - k) / s + 1 */"):
        "one line of avg_pool2d's shape function",
    ("docs/tutorial_3_beyond_relu.md", "oc_tensor *linear(const oc_tensor *x, const oc_tensor *weight, const oc_tensor *bias)"):
        "an excerpt of examples/ops/linear.c, elided (...)",
    ("docs/tutorial_3_beyond_relu.md", "oc_tensor *global_sum(const oc_tensor *x)"):
        "an excerpt of examples/ops/global_sum.c (its declarations left out)",
    ("docs/tutorial_3_beyond_relu.md", "int64_t shape[] = {256};"):
        "lines of examples/ops/ops_host.c",
    # jax.md: calls that need what a test sets up
    ("docs/jax.md", 'b, h = jax.export.symbolic_shape("b, h")'):
        "exports a `model` the page does not define (test_jax_export.py runs it)",
    ("docs/jax.md", 'mesh = jax.make_mesh((2,), ("d",), axis_types=(jax.sharding.AxisType.Auto,))'):
        "needs 2 devices (XLA_FLAGS before jax is imported); test_jax_sharding.py runs it",
    ("docs/jax.md", 'layer_norm = opcore.jax.op("nn_ops::layer_norm", batch_dims=0)     # every tensor argument and result'):
        "needs 2 devices (XLA_FLAGS before jax is imported); test_jax_sharding.py runs it",
}

# Excerpts: (document, first lines) -> the file whose lines they are. Not run
# (the body of a function), but every line must be a line of that file (a
# trailing /* comment */ the document adds aside).
EXCERPTS = {
    ("docs/tutorial_2_performance.md", "oc_tensor *out = oc_zeros_like(x);"): "examples/relu/elementwise/relu.c",
    ("docs/tutorial_2_performance.md", "oc_tensor *out = oc_dst_tensor();\noc_stream"): "examples/relu/stream/relu.c",
    ("docs/tutorial_2_performance.md", "#define BLOCK 1024 /* elements per TCM buffer */"): "examples/relu/tcm/relu.c",
    ("docs/tutorial_2_performance.md", "#define BLOCK 4096 /* elements per TCM buffer */"): "examples/relu/multicore/relu.c",
    ("docs/tutorial_2_performance.md", "const int64_t grid_x = (rows + TILE_ROWS - 1) / TILE_ROWS,"):
        "examples/seed003/shape.c",
    ("docs/tutorial_2_performance.md", "const int64_t r0 = oc_program_id(0) * TILE_ROWS,"): "examples/seed003/add.c",
    ("docs/tutorial_4_tiles.md", "for (int64_t r = p.lo, n = p.rb, k = 0; r < p.hi; r += n, k ^= 1) {"):
        "examples/tiles/rmsnorm.c",
    ("docs/tutorial_4_tiles.md", "oc_core_range(ta.rows, 16, &lo, &hi);"): "examples/tiles/matmul.c",
    ("docs/tutorial_3_beyond_relu.md", 'oc_def(m, "concat(Tensor[] xs, int dim=0) -> Tensor", concat_shape, "concat", .strided = true);'):
        "examples/ops/shape.c",
}

# (document, first line) -> (arguments added to each `python SCRIPT.py` of the
# block, where the document says they make a quick run of the same code).
QUICK = {
    ("docs/tutorial_1_first_operator.md", "cd examples/mlp"):
        ("--epochs 1 --max-steps 20", "tutorial 1, section 5: --epochs N, --max-steps N for quick runs"),
    ("docs/tutorial_2_performance.md", "cd examples/mlp"):
        ("--epochs 1 --max-steps 20", "tutorial 2, The measurement: --epochs 1 --max-steps 20, a quick run"),
    ("docs/troubleshooting.md", "nproc; uptime"):
        ("--epochs 1 --max-steps 20", "tutorial 1, section 5: --epochs N, --max-steps N for quick runs"),
}


@dataclass
class Block:
    doc: Path
    line: int  # the opening fence's line, 1-based
    lang: str
    text: str
    file: str = None  # <!-- doc: file NAME -->
    continues: bool = False  # <!-- doc: continues -->
    prefix: list = field(default_factory=list)  # the blocks it continues

    @property
    def rel(self):
        return self.doc.relative_to(REPO).as_posix()

    @property
    def id(self):
        return f"{self.rel}:{self.line}"

    def listed(self, table):
        """This block's entry of a table keyed by (document, the block's
        first line or lines), or None."""
        text = "\n".join(s.strip() for s in self.text.splitlines() if s.strip())
        return next((v for (doc, head), v in table.items() if doc == self.rel and text.startswith(head)), None)


MARKER = re.compile(r"<!--\s*doc:\s*(file\s+(\S+)|continues)\s*-->")
FENCE = re.compile(r"^(\s*)(```+)\s*([\w+-]*)")


def parse(doc):
    lines = doc.read_text().splitlines()
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, ticks, lang = m.group(1), m.group(2), m.group(3).lower()
        start, body = i + 1, []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(ticks):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1
        prev = next((lines[j] for j in range(start - 2, -1, -1) if lines[j].strip()), "")
        b = Block(doc, start, lang, "\n".join(body) + "\n")
        for mm in MARKER.finditer(prev):
            if mm.group(2):
                b.file = mm.group(2)
            else:
                b.continues = True
        blocks.append(b)
    # a continuation runs after the blocks it continues
    last = None
    for b in blocks:
        if b.continues:
            assert last is not None, f"{b.id}: <!-- doc: continues --> but no earlier block to continue"
            b.prefix = last.prefix + [last]
        if _runnable(b) and not b.file:
            last = b
    return blocks


def _runnable(b):
    return (b.lang in RUN_LANGS and b.listed(FRAGMENTS) is None and b.listed(EXCERPTS) is None
            and not (b.file and b.lang != "c"))


BLOCKS = [b for d in DOCS for b in parse(d)]


def _env(work):
    env = dict(os.environ)
    bindirs = [str(Path(sys.executable).parent), str(CLI.parent)]
    env["PATH"] = os.pathsep.join(bindirs + [env.get("PATH", "")])
    env["OPCORE_CACHE_DIR"] = str(work / ".cache")
    # many blocks run at once: one thread each keeps the machine usable
    env.setdefault("OMP_NUM_THREADS", "1")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _prepare(b, work):
    shutil.copytree(REPO / "examples", work / "examples",
                    ignore=shutil.ignore_patterns("build", "__pycache__", "*.so"))
    for other in BLOCKS:
        if other.doc == b.doc and other.file:
            dst = work / other.file
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_text(other.text)


def _cwd(work):
    """Where the next block of a chain runs: the directory the chain's last
    shell block ended in (CWD_FILE), else the block's own directory."""
    f = work / CWD_FILE
    return Path(f.read_text().strip()) if f.exists() else work


CWD_FILE = ".doc_cwd"


def _run(cmd, work, env, script=None):
    try:
        p = subprocess.run(cmd, cwd=_cwd(work), env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        return f"timed out after {TIMEOUT_S} s: {' '.join(map(str, cmd))}\n{e.stdout or ''}{e.stderr or ''}"
    if p.returncode == 0:
        return None
    shown = f"--- script:\n{script}" if script else ""
    return (f"exit {p.returncode}: {' '.join(map(str, cmd))}\n{shown}\n--- stdout:\n{p.stdout[-3000:]}"
            f"\n--- stderr:\n{p.stderr[-4000:]}")


def _shell(b, work, env, prefix):
    parts = []
    for x in prefix + [b]:
        if x.lang == "console":
            parts += [ln[2:] for ln in x.text.splitlines() if ln.startswith("$ ")]
        else:
            parts.append(x.text)
    quick = b.listed(QUICK)
    if quick:
        parts[-1] = re.sub(r"^(\s*python3? \S+\.py)", rf"\1 {quick[0]}", parts[-1], flags=re.M)
    script = "set -eo pipefail\n" + "\n".join(parts)
    # the next block of the chain starts where this one ends
    return _run(["bash", "-c", f"{script}\npwd > {shlex.quote(str(work / CWD_FILE))}"], work, env, script)


DOCTEST_RUNNER = """
import doctest, sys
g = {"__name__": "__main__"}
exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), g)
t = doctest.DocTestParser().get_doctest(open(sys.argv[2]).read(), g, sys.argv[3], sys.argv[3], 0)
r = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
r.run(t)
sys.exit(1 if r.failures else 0)
"""


def _python(b, work, env, prefix):
    chain = prefix + [b]
    tag = b.id.replace("/", "_").replace(":", "_")
    if ">>>" in b.text:
        (work / "prefix.py").write_text("\n".join(x.text for x in prefix))
        (work / "doctest.txt").write_text(b.text)
        (work / "runner.py").write_text(DOCTEST_RUNNER)
        return _run([sys.executable, *(str(work / f) for f in ("runner.py", "prefix.py", "doctest.txt")), b.id],
                    work, env, b.text)
    script = "\n".join(x.text for x in chain)
    path = work / f"{tag}.py"
    path.write_text(script)
    return _run([sys.executable, str(path)], work, env, script)


def _c(b, work, env, prefix):
    src = work / f"block_{b.line}.c"
    src.write_text("\n".join(x.text for x in prefix + [b]))
    if re.search(r"\bint\s+main\s*\(", b.text):
        inc, lib = REPO / "include", CLI.parent
        exe = work / f"block_{b.line}"
        err = _run(["cc", "-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror", f"-I{inc}", str(src),
                    f"-L{lib}", "-lopcore", f"-Wl,-rpath,{lib}", "-o", str(exe)], work, env, src.read_text())
        return err or _run([str(exe)], work, env)
    files = [o for o in BLOCKS if o.doc == b.doc and o.file and o.file.endswith(".c") and o is not b]
    if "OC_LIBRARY" in b.text:
        shape, compute = [src], [work / o.file for o in files if "OC_LIBRARY" not in o.text]
        if not compute:
            return f"{b.id}: a shape source, but its document names no kernel file (<!-- doc: file NAME.c -->)"
    else:
        compute = [src]
        shape = [work / o.file for o in files if "OC_LIBRARY" in o.text]
        if not shape:
            (work / "no_ops.c").write_text("#include <opcore/library.h>\nOC_LIBRARY(doc_block, m) { (void)m; }\n")
            shape = [work / "no_ops.c"]
    cmd = [str(CLI), "build", "--name", "doc_block", "--compute", *map(str, compute),
           "--shape", *map(str, shape), "-o", str(work / "out"), "--cflags", "-Werror"]
    return _run(cmd, work, env, src.read_text())


RUNNERS = {"sh": _shell, "bash": _shell, "console": _shell, "python": _python, "c": _c}


def run_block(b, root):
    work = root / b.id.replace("/", "_").replace(":", "_")
    work.mkdir(parents=True)
    _prepare(b, work)
    env = _env(work)
    # the chain of blocks it continues: each maximal run of one language in
    # one script, the last run with the block itself
    chain, seg = b.prefix + [b], []
    for x in chain:
        if seg and (x.lang != seg[-1].lang or x.lang == "c"):
            err = RUNNERS[seg[-1].lang](seg[-1], work, env, seg[:-1])
            if err:
                return f"(in {seg[-1].id}, which {b.id} continues) {err}"
            seg = []
        seg.append(x)
    return RUNNERS[b.lang](b, work, env, seg[:-1])


@pytest.fixture(scope="session")
def block_results(request, tmp_path_factory):
    """Runs the selected blocks, in parallel; FILE:LINE -> error or None."""
    wanted = {item.callspec.params["block"].id for item in request.session.items
              if item.originalname == "test_doc_block" and hasattr(item, "callspec")}
    todo = [b for b in BLOCKS if b.id in wanted and _runnable(b)]
    root = tmp_path_factory.mktemp("doc_blocks")
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        futures = {b.id: pool.submit(run_block, b, root) for b in todo}
    return {k: f.result() for k, f in futures.items()}


@pytest.mark.skipif(not CLI.exists(), reason=f"{CLI} not built (make cli)")
@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.id)
def test_doc_block(block, block_results):
    known = block.lang in RUN_LANGS | TEXT_LANGS | DATA_LANGS or block.file
    assert known, (f"{block.id}: fence language '{block.lang}' is neither run ({sorted(RUN_LANGS)}) nor text "
                   f"({sorted(TEXT_LANGS | DATA_LANGS)}); a file's text: mark it <!-- doc: file NAME -->")
    source = block.listed(EXCERPTS)
    if source:
        def code(text):  # its lines, a trailing /* comment */ aside
            return [re.sub(r"\s*/\*[^*]*\*/$", "", s.strip()) for s in text.splitlines()]
        lines = set(code((REPO / source).read_text()))
        missing = [s for s in code(block.text) if s and s not in lines]
        assert not missing, f"{block.id}: an excerpt of {source}, but these lines are not in it: {missing}"
        return
    if not _runnable(block):
        return
    err = block_results[block.id]
    if err is not None:
        pytest.fail(f"{block.id}: the ```{block.lang} block fails as written:\n{err}", pytrace=False)


def test_fragment_list_is_current():
    """Every block FRAGMENTS lists still exists (as its first line)."""
    stale = [k for k in [*FRAGMENTS, *QUICK, *EXCERPTS] if not any(b.listed({k: 1}) for b in BLOCKS)]
    assert not stale, f"FRAGMENTS lists blocks no document has (edit the key to the block's first line): {stale}"


def test_markers_are_well_formed():
    """A doc: marker is one of the two forms; a typo would silently not apply."""
    bad = []
    for doc in DOCS:
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            if re.search(r"<!--\s*doc:", line) and not MARKER.search(line):
                bad.append(f"{doc.relative_to(REPO)}:{n}: {line.strip()}")
    assert not bad, "unknown doc: markers (use 'file NAME' or 'continues'):\n" + "\n".join(bad)


README = REPO / "README.md"
README_MAX_LINES = 250
PATH_TOKEN = re.compile(r"^(docs|examples|bench|scripts|include|src|tests|python|mk)/[\w./<>*-]*$")


def _exists(rel):
    """A repository path as the README writes it: `<name>` and `*` are
    placeholders, a trailing / a folder."""
    rel = rel.split("#", 1)[0]
    if "<" in rel or "*" in rel:
        pattern = re.sub(r"<[^>]*>", "*", rel)
        return any(REPO.glob(pattern.rstrip("/"))) or (REPO / pattern.split("*", 1)[0]).parent.is_dir()
    return (REPO / rel).exists()


def test_docs_speak_a_users_words():
    """docs/*.md name the AWS Neuron documents they follow as such: no
    "seeds", no issue numbers (file names such as examples/seed003 and the
    --seed option are names, not words)."""
    for page in sorted((REPO / "docs").glob("*.md")):
        text = re.sub(r"seed003|SEED003|--seed\b|same seed|manual_seed", "", page.read_text())
        for pat in (r"\bseeds?\b", r"\bissues? \d+", r"shared/seeds"):
            hit = re.search(pat, text, re.I)
            assert not hit, f"{page.name} says '{hit.group(0)}' (internal planning words)"


def test_readme_is_a_users_page():
    """README.md: short, no internal planning words, every link, path and
    make target it names real, and a performance summary of at most 10
    rows that names its machine and links the full report."""
    text = README.read_text()
    lines = text.splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines (at most {README_MAX_LINES})"
    for pat in (r"\bseeds?\b", r"\bissues? \d+", r"shared/seeds", r"<!-- bench:"):
        hit = re.search(pat, text, re.I)
        assert not hit, f"README.md says '{hit.group(0)}' (internal planning words, or a generated report)"
    links = [t for t in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"(https?:|#|mailto:)", t)]
    missing = [t for t in links if not _exists(t)]
    assert not missing, f"README.md links to files that do not exist: {missing}"
    for t in links:  # an anchor names a heading of that page (GitHub's slugs)
        page, _, anchor = t.partition("#")
        if anchor and page.endswith(".md"):
            slugs = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
                     for h in re.findall(r"^#+ (.+)$", (REPO / page).read_text(), re.M)}
            assert anchor in slugs, f"README.md links to {t}: {page} has no such heading"
    paths = [t for t in re.findall(r"`([^`\s]+)`", text) if PATH_TOKEN.match(t)]
    missing = [t for t in paths if not _exists(t)]
    assert not missing, f"README.md names paths that do not exist: {missing}"
    makefiles = [REPO / "Makefile", *sorted((REPO / "mk").glob("*.mk"))]
    targets = {m.group(1) for f in makefiles for m in re.finditer(r"^([\w-]+)\s*:", f.read_text(), re.M)}
    named = set(re.findall(r"(?:`|^)make ([a-z][\w-]*)", text, re.M))  # commands, not prose
    assert named and named <= targets, f"README.md names make targets that do not exist: {named - targets}"
    # "two commands": the block under that heading holds two
    head = next(i for i, ln in enumerate(lines) if ln.startswith("## ") and "two commands" in ln)
    fence = next(i for i in range(head, len(lines)) if lines[i].startswith("```"))
    end = next(i for i in range(fence + 1, len(lines)) if lines[i].startswith("```"))
    assert len([ln for ln in lines[fence + 1:end] if ln.strip()]) == 2
    # the performance summary
    perf = text.split("\n## Performance", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in perf.splitlines() if ln.startswith("|")][2:]
    assert 1 <= len(rows) <= 10, f"the performance summary has {len(rows)} rows (1 to 10)"
    assert "bench/results/report.md" in perf
    assert re.search(r"(Intel|AMD|Xeon|EPYC|Arm|Graviton)", perf), "the summary does not name its machine"
    assert re.search(r"\b(AVX2|AVX-512)\b", perf), "the summary does not name the instruction sets"
