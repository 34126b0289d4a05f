"""What the Python benchmarks share: interleaved, paired timing; opcore
libraries built under their own namespace; writing a result file.

Timing:

Candidates take turns round by round on the same machine moment; each
round gives every candidate's time and every candidate's ratio to a
reference measured in that same round. Reported figures are medians over
rounds: of the times, and of the paired ratios (a noisy moment hits the
candidates of one round alike, and the median drops the rounds it hit
unevenly).

What every result records (bench/report.py reads it):

- the machine: write() adds "machine" (machine(): CPU model, instruction
  sets, the transparent-huge-page mode, cores) to each result file, and
  banner() prints the same line at the start of a bench's output;
- each candidate's page policy: a row compared against another candidate
  carries "_pages" ({candidate: "huge" | "4k"}, from page_policy()); the
  report refuses a row whose candidates differ there, unless the row is the
  huge-page gain itself, marked "_pages_gain": true (labelled as such);
- the paths kernels took: write() adds "paths" (paths(): op-library
  kernels, libopcore's tile functions, torch's when imported); per row,
  "_path" ({candidate: "AVX-512" | "AVX2" |
  "portable" | a longer text}), from tile_path(), native_path(),
  torch_path() or the kernel's own answer (oc_tile_matmul_path).

tag(row, pages=..., path=...) adds both, and the visible "pages" and
"path" columns, to a row.
"""
import json
import os
import platform
import re
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")


def interleaved(fns, rounds, reps, warmup=None, clock=time.perf_counter, block_warmup=0,
                calls=None):
    """fns: {name: callable()} (each call is one repetition). Returns
    {name: [seconds per repetition, one per round]}. block_warmup: untimed
    calls before each timed block (the candidate alone: its data back in
    the cache, its threads awake). calls: a dict to fill with each call
    timed on its own, {name: [[seconds of a block's i-th call, one per
    round] for i in range(reps)]}."""
    samples = {name: [] for name in fns}
    if calls is not None:
        calls.update({name: [[] for _ in range(reps)] for name in fns})
    for fn in fns.values():
        for _ in range(warmup if warmup is not None else max(1, reps // 10)):
            fn()
    names = list(fns)
    for r in range(rounds):
        # rotate the order, so no candidate always runs first in a round
        k = r % len(names)
        for name in names[k:] + names[:k]:
            fn = fns[name]
            for _ in range(block_warmup):
                fn()
            t0 = clock()
            if calls is None:
                for _ in range(reps):
                    fn()
            else:
                for i in range(reps):
                    t1 = clock()
                    fn()
                    calls[name][i].append(clock() - t1)
            samples[name].append((clock() - t0) / reps)
    return samples


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def paired_ratio(samples, name, reference):
    """Median over rounds of (name's time / reference's time)."""
    return median([a / b for a, b in zip(samples[name], samples[reference])])


def medians(samples):
    return {name: median(ts) for name, ts in samples.items()}


def load_renamed(build_root, namespace, shape_src, compute_srcs, old_namespace, multicore=False, cflags=()):
    """Build and load an opcore library whose shape source registers
    `old_namespace`, under `namespace` instead (a process holds one library
    per name). Returns torch.ops.<namespace>."""
    import torch

    from opcore import custom_op
    d = os.path.join(build_root, namespace)
    os.makedirs(d, exist_ok=True)
    shape = os.path.join(d, "shape.c")
    with open(shape_src) as f:
        text = f.read().replace(f"OC_LIBRARY({old_namespace},", f"OC_LIBRARY({namespace},")
    with open(shape, "w") as f:
        f.write(text)
    custom_op.load(name=namespace, compute_srcs=list(compute_srcs), shape_srcs=[shape], build_directory=d,
                   multicore=multicore, extra_cflags=list(cflags))
    return getattr(torch.ops, namespace)


# ---- the machine ----------------------------------------------------------------

# /proc/cpuinfo flag -> the name users read, in the order a report lists them
_ISA = [("sse4_2", "SSE4.2"), ("avx", "AVX"), ("avx2", "AVX2"), ("fma", "FMA"), ("f16c", "F16C"),
        ("avx512f", "AVX-512F"), ("avx512bw", "AVX-512BW"), ("avx512vl", "AVX-512VL"),
        ("avx512_vnni", "AVX-512VNNI"), ("avx512_bf16", "AVX-512BF16"),
        ("avx512_fp16", "AVX-512FP16"), ("avx_vnni", "AVX-VNNI"), ("amx_tile", "AMX"),
        ("asimd", "NEON"), ("sve", "SVE")]


def _cpuinfo():
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        return "", set()
    model = re.search(r"^(?:model name|Model)\s*:\s*(.+)$", text, re.M)
    flags = re.search(r"^(?:flags|Features)\s*:\s*(.+)$", text, re.M)
    return (model.group(1).strip() if model else "",
            set(flags.group(1).split()) if flags else set())


def isa():
    """The vector instruction sets this CPU has, by their usual names."""
    flags = _cpuinfo()[1]
    return [name for flag, name in _ISA if flag in flags]


def thp_mode():
    """The kernel's transparent-huge-page mode: always, madvise, never or
    unknown (no /sys/kernel/mm/transparent_hugepage)."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            hit = re.search(r"\[(\w+)\]", f.read())
        return hit.group(1) if hit else "unknown"
    except OSError:
        return "unknown"


def _cpu_id():
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        return ""
    fam = re.search(r"^cpu family\s*:\s*(\d+)$", text, re.M)
    mod = re.search(r"^model\s*:\s*(\d+)$", text, re.M)
    return f"family {fam.group(1)} model {mod.group(1)}" if fam and mod else ""


def machine():
    """{"cpu", "cpu_id", "isa", "thp", "cores"}: recorded in every result
    file (a virtual machine's model name can be generic: cpu_id tells
    generations apart)."""
    model = _cpuinfo()[0] or platform.processor() or platform.machine()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu": model, "cpu_id": _cpu_id(), "isa": isa(), "thp": thp_mode(), "cores": cores}


def machine_line(m=None):
    m = m or machine()
    cpu = m["cpu"] + (f" ({m['cpu_id']})" if m.get("cpu_id") else "")
    return (f"machine: {cpu}; {', '.join(m['isa']) or 'no vector extensions found'}; "
            f"THP {m['thp']}; {m['cores']} usable cores")


def banner():
    """Print the machine line (each bench's output starts with it)."""
    print(machine_line(), flush=True)


# ---- the paths kernels take ----------------------------------------------------

def vector_level(flags=None):
    """The widest x86 vector level this CPU offers a kernel: "AVX-512",
    "AVX2" (with FMA) or "portable"."""
    have = set(isa()) if flags is None else set(flags)
    if "AVX-512F" in have:
        return "AVX-512"
    if {"AVX2", "FMA"} <= have:
        return "AVX2"
    return "portable"


def tile_path():
    """The path libopcore's tile functions take (built twice, for x86-64-v3
    and for any x86-64, chosen at load by the CPU): "AVX2" or "portable".
    $OC_TILE_ISA, where set, names a lower path forced for tests."""
    forced = os.environ.get("OC_TILE_ISA", "").strip().lower()
    names = {"avx512": "AVX-512", "avx2": "AVX2", "portable": "portable"}
    level = vector_level()
    if forced in names:
        order = ["portable", "AVX2", "AVX-512"]
        return names[forced] if order.index(names[forced]) <= order.index(level) else level
    return "portable" if level == "portable" else "AVX2"


def native_path():
    """The path of an op library's kernels: compiled with -march=native
    (the default) they may use every instruction set the CPU has;
    $OPCORE_MARCH names another target."""
    march = os.environ.get("OPCORE_MARCH")
    if march is None or march == "native":
        return f"{vector_level()} (-march=native)"
    return f"-march={march}" if march else "portable (no -march)"


def torch_path():
    """The kernels torch chose on this CPU (AVX512, AVX2 or DEFAULT, which
    $ATEN_CPU_CAPABILITY can lower)."""
    try:
        import torch
        cap = torch.backends.cpu.get_cpu_capability()
    except Exception:
        return "unknown"
    return {"AVX512": "AVX-512", "AVX2": "AVX2", "DEFAULT": "portable"}.get(cap, cap)


# ---- holding every library to AVX2 (--isa avx2) ------------------------------------

# each library's own switch to its AVX2 kernels, as on a CPU without AVX-512 or VNNI: opcore's
# tile layer, torch's ATen, MKL, oneDNN, fbgemm
AVX2_ENV = {"OC_TILE_ISA": "avx2", "ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
            "ONEDNN_MAX_CPU_ISA": "AVX2", "FBGEMM_ENABLE_INSTRUCTIONS": "AVX2"}
# a bench's own op libraries under --isa avx2: -march=native less what an AVX2-only CPU lacks
AVX2_CFLAGS = ["-mno-avx512f", "-mno-avxvnni"]


def forced_avx2():
    """Whether this process runs with opcore limited to AVX2 (--isa avx2)."""
    return os.environ.get("OC_TILE_ISA") == AVX2_ENV["OC_TILE_ISA"]


def paths():
    """The paths kernels take in this process, for a result's "paths": op
    libraries' kernels, libopcore's tile functions and, when this process
    imported torch, torch's kernels."""
    out = {"op-library kernels": native_path(), "tile functions": tile_path()}
    if "torch" in sys.modules:
        out["torch"] = torch_path()
    return out


# ---- page policy ------------------------------------------------------------------

OPCORE_HUGE_MIN = 4 << 20   # opcore advises a fresh result of 4 MiB or more
TORCH_HUGE_MIN = 2 << 20    # torch, with THP_MEM_ALLOC_ENABLE=1, from 2 MiB


def page_policy(side, nbytes=None, env=None):
    """How a candidate's fresh results are paged: "huge" or "4k".

    side: "opcore" (huge pages advised unless OC_HUGEPAGE_OUTPUTS=0), "torch"
    (only with THP_MEM_ALLOC_ENABLE=1) or anything else (plain malloc, no
    advice). The kernel's THP mode decides first: "always" gives every side
    huge pages, "never" none. nbytes: the result's size, when known (below
    each side's threshold nothing is advised). env: the environment the
    candidate ran in (a child process's), default this one's."""
    env = os.environ if env is None else env
    mode = thp_mode()
    if mode == "never":
        return "4k"
    if mode == "always":
        return "huge" if nbytes is None or nbytes >= (2 << 20) else "4k"
    if side == "opcore":
        on = env.get("OC_HUGEPAGE_OUTPUTS", "1").strip().lower() not in ("0", "off", "false", "no")
        return "huge" if on and (nbytes is None or nbytes >= OPCORE_HUGE_MIN) else "4k"
    if side == "torch":
        on = env.get("THP_MEM_ALLOC_ENABLE", "") == "1"
        return "huge" if on and (nbytes is None or nbytes >= TORCH_HUGE_MIN) else "4k"
    return "4k"


# A child process's environment for each way of comparing pages: "huge"
# (both sides' fresh results on huge pages: torch's allocator asked too),
# "4k" (neither side advises huge pages), "gain" (the defaults: opcore's
# results on huge pages, torch's not: the huge-page gain, a row of its own).
POLICIES = ("huge", "4k", "gain")


def policy_env(policy, base=None):
    """The environment a candidate process runs in under `policy`."""
    if policy not in POLICIES:
        raise ValueError(f"policy_env: policy must be one of {POLICIES}, got {policy!r}")
    env = dict(os.environ if base is None else base)
    env.pop("THP_MEM_ALLOC_ENABLE", None)
    env.pop("OC_HUGEPAGE_OUTPUTS", None)
    if policy == "huge":
        env["THP_MEM_ALLOC_ENABLE"] = "1"
    elif policy == "4k":
        env["OC_HUGEPAGE_OUTPUTS"] = "0"
    return env


def tag(row, pages=None, path=None, gain=False):
    """Record on a result row each candidate's page policy (pages:
    {candidate: "huge" | "4k"}) and kernel path (path: {candidate: text}),
    hidden for the report's checks ("_pages", "_path") and shown as the
    "pages" and "path" columns. gain=True marks the row that measures the
    huge-page gain itself (its candidates differ on purpose). Returns row."""
    if pages:
        row["_pages"] = dict(pages)
        kinds = sorted(set(pages.values()))
        row["pages"] = (("both " if len(pages) == 2 else "all ") + kinds[0] if len(kinds) == 1
                        else ", ".join(f"{k} {v}" for k, v in pages.items()))
        if gain:
            row["_pages_gain"] = True
    if path:
        row["_path"] = dict(path)
        row["path"] = ", ".join(f"{k} {v}" for k, v in path.items())
    return row


def write(name, obj, results=RESULTS):
    """Write a bench/report.py section to results/name, with the machine
    it ran on (obj["machine"]) and the paths its kernels took
    (obj["paths"]), unless the bench set them; prints the machine line."""
    obj.setdefault("machine", machine())
    obj.setdefault("paths", paths())
    print(machine_line(obj["machine"]))
    os.makedirs(results, exist_ok=True)
    path = os.path.join(results, name)
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)
    print(f"wrote {os.path.relpath(path, REPO)}")


def main(argv):
    """python bench/benchlib.py banner | stamp FILE...: print the machine
    line, or add "machine" to result files a C bench wrote."""
    if argv[:1] == ["banner"]:
        banner()
        return 0
    if argv[:1] == ["stamp"] and len(argv) > 1:
        for path in argv[1:]:
            with open(path) as f:
                obj = json.load(f)
            if not isinstance(obj, dict):
                continue  # not a report section
            obj.setdefault("machine", machine())
            obj.setdefault("paths", paths())
            with open(path, "w") as f:
                json.dump(obj, f, indent=1)
        return 0
    print("usage: python bench/benchlib.py banner | stamp FILE...", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
