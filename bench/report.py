#!/usr/bin/env python3
"""Turn the benchmark results in bench/results/*.json into one markdown report
(bench/results/report.md) and one PNG chart per machine, with the machine
described.

    python bench/report.py [--results DIR] [--out report.md]

Any benchmark adds a section by writing a JSON file into bench/results/:

    {
      "title": "ReLU bandwidth vs memcpy",          # section heading (required)
      "rows": [{"kernel": "memcpy", "GB/s": 11.2},   # table rows (required); the
               {"kernel": "relu tcm", "GB/s": 10.9}],#   columns are the keys, in order
      "machine": {"cpu": "...", "isa": [...], ...},  # benchlib.machine(): where it ran
      "notes": "markdown shown under the table",     # optional
      "order": 30,                                   # optional: sections sort by it (default 50)
      "columns": ["kernel", "GB/s"],                 # optional: which keys, in which order
      "chart": {"label": "kernel", "value": "GB/s",  # optional: a bar panel in the PNG
                "ylabel": "GB/s", "log": false,      #   ("ratio": the column printed beside
                "ratio": "vs memcpy"},               #   each bar; default "vs baseline")
      "target": {"metric": "...", "min": 0.97,       # optional: one target or a list,
                 "value": 0.99, "met": true,         #   listed in the summary; "ceiling"
                 "ceiling": 0.87}                    #   (optional): the best reachable
    }                                                #   value, shown in its own column

Keys starting with "_" are never shown. A row comparing candidates records
each one's page policy in "_pages" ({candidate: "huge" | "4k"}) and kernel
path in "_path" (benchlib.tag). A row whose candidates ran under different
page policies is refused: left out of its table, listed under "Refused
rows", and the exit status is 1; only a row marked "_pages_gain": true (the
huge-page gain measured on purpose) may differ, and it is labelled so.

The report keeps one part per machine (CPU model and instruction sets, from
each file's "machine"): a run rewrites the parts of the machines its result
files come from and keeps the other machines' parts already in the report
(but the part for files that named no machine, once none is left).
Column names starting with "vs " or ending in "ratio" or "x" are shown as
ratios (0.985x). Files that are not in this format are reported and skipped.
"""
import argparse
import glob
import json
import os
import platform
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")
sys.path.insert(0, HERE)
import benchlib  # noqa: E402

# one machine's part of report.md lies between these two lines
PART_BEGIN = "<!-- machine: {key} -->"
PART_END = "<!-- end of machine: {key} -->"
PART_RE = re.compile(r"^<!-- machine: (.+?) -->\n(.*?)^<!-- end of machine: \1 -->\n?", re.M | re.S)
UNRECORDED = "machine not recorded"


# ---- the machine ------------------------------------------------------------

def _cmd(*argv):
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception:
        return ""


def machine():
    """This machine, in full (the table under this machine's part)."""
    m = {}
    b = benchlib.machine()
    m["CPU"] = b["cpu"] + (f" ({b['cpu_id']})" if b.get("cpu_id") else "")
    m["instruction sets"] = ", ".join(b["isa"]) or "-"
    m["transparent huge pages"] = b["thp"]
    m["cores (usable)"] = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    m["cores (online)"] = os.cpu_count()
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
        m["memory"] = f"{kb / 2**20:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    caches = _cmd("lscpu")
    for key in ("L1d cache", "L2 cache", "L3 cache"):
        hit = re.search(rf"^{key}:\s*(.+)$", caches, re.M)
        if hit:
            m[key] = hit.group(1).strip()
    hv = re.search(r"^Hypervisor vendor:\s*(.+)$", caches, re.M)
    if hv:
        m["virtualised"] = hv.group(1).strip()
    m["OS"] = f"{platform.system()} {platform.release()}"
    m["Python"] = platform.python_version()
    try:
        import torch
        m["torch"] = f"{torch.__version__} ({torch.get_num_threads()} intra-op threads)"
    except ImportError:
        m["torch"] = "not installed"
    try:
        import numpy
        m["numpy"] = numpy.__version__
    except ImportError:
        pass
    cc = _cmd(os.environ.get("CC", "cc"), "--version").splitlines()
    if cc:
        m["C compiler"] = cc[0]
    rev = _cmd("git", "-C", REPO, "rev-parse", "--short", "HEAD")
    if rev and not rev.startswith("fatal"):
        dirty = _cmd("git", "-C", REPO, "status", "--porcelain", "--untracked-files=no")
        m["opcore commit"] = rev + (" (with local changes)" if dirty else "")
    return m


# ---- sections ---------------------------------------------------------------

def load_sections(results):
    sections, skipped = [], []
    for path in sorted(glob.glob(os.path.join(results, "*.json"))):
        try:
            with open(path) as f:
                obj = json.load(f)
        except (OSError, ValueError) as e:
            skipped.append(f"{os.path.basename(path)}: unreadable ({e})")
            continue
        if not (isinstance(obj, dict) and isinstance(obj.get("title"), str)
                and isinstance(obj.get("rows"), list)
                and all(isinstance(r, dict) for r in obj["rows"])):
            skipped.append(f"{os.path.basename(path)}: not a report section "
                           f"(needs \"title\" and a list of \"rows\")")
            continue
        obj["_file"] = os.path.basename(path)
        obj["_mtime"] = os.path.getmtime(path)
        obj["_machine"] = machine_key(obj.get("machine"))
        sections.append(obj)
    sections.sort(key=lambda s: (s.get("order", 50), s["_file"]))
    return sections, skipped


def machine_key(m):
    """The name of a machine's part of the report: its CPU model and
    instruction sets (UNRECORDED for a result file without "machine")."""
    if not isinstance(m, dict) or not m.get("cpu"):
        return UNRECORDED
    cpu = str(m["cpu"]) + (f" ({m['cpu_id']})" if m.get("cpu_id") else "")
    level = benchlib.vector_level(m.get("isa") or [])
    return f"{cpu}, {level}".replace("--", "-")


def check_pages(sec):
    """Refuse the rows whose candidates ran under different page policies
    (their "_pages" differ) unless the row is the huge-page gain itself
    ("_pages_gain"), which is labelled. Returns the refusals, one line each;
    the refused rows leave sec["rows"]."""
    kept, refused = [], []
    for r in sec["rows"]:
        pages = r.get("_pages")
        if isinstance(pages, dict) and len(set(pages.values())) > 1:
            if not r.get("_pages_gain"):
                first = next((str(v) for k, v in r.items() if not k.startswith("_")), "?")
                refused.append(f"{sec['_file']}: row '{first}': its candidates ran under different "
                               "page policies (" + ", ".join(f"{k} {v}" for k, v in pages.items())
                               + "); run them on the same policy, or mark the row as the huge-page "
                               "gain (\"_pages_gain\": true)")
                continue
            key = next((k for k in r if not k.startswith("_")), None)
            if key and "[huge-page gain]" not in str(r[key]):
                r[key] = f"{r[key]} [huge-page gain]"
        kept.append(r)
    sec["rows"] = kept
    return refused


def is_ratio(col):
    c = col.lower()
    return c.startswith("vs ") or c.endswith("ratio") or c.endswith(" x") or c == "x"


def fmt(col, v):
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int, float)) and is_ratio(col):
        return f"{v:.3f}x"
    if isinstance(v, float):
        a = abs(v)
        if a >= 1000:
            return f"{v:,.0f}"
        if a >= 100:
            return f"{v:.1f}"
        if a >= 1:
            return f"{v:.2f}"
        return f"{v:.4g}"
    return str(v).replace("|", "\\|")


def columns(sec):
    if sec.get("columns"):
        return list(sec["columns"])
    cols = []
    for r in sec["rows"]:
        cols += [k for k in r if k not in cols and not k.startswith("_")]
    return cols


def table(sec):
    cols = columns(sec)
    right = [isinstance(next((r.get(c) for r in sec["rows"] if r.get(c) is not None), ""),
                        (int, float)) for c in cols]
    out = ["| " + " | ".join(cols) + " |",
           "|" + "|".join("---:" if r else "---" for r in right) + "|"]
    for r in sec["rows"]:
        out.append("| " + " | ".join(fmt(c, r.get(c)) for c in cols) + " |")
    return "\n".join(out)


def targets(sections):
    rows = []
    for s in sections:
        t = s.get("target")
        for t in (t if isinstance(t, list) else [t] if t else []):
            rows.append((s["title"], t))
    return rows


# The fast-path targets (the cost of a call from each front end): the
# result file that measures it and a piece of its metric's text there. The
# report lists each with its measured value, or says which bench to run.
FAST_PATH_TARGETS = [
    ("1x1 op through torch.ops: <= 1.0x the C++ extension op", "torch.json", "1x1 op through torch.ops",
     "bench/torch_bench.py"),
    ("Direct call from Python (lib.op(x), output allocated): <= 1.0x the apache-tvm-ffi call", "torch.json",
     "direct call, output allocated", "bench/torch_bench.py"),
    ("From C, single-core 1x1 oc_op_call: <= 250 ns median", "call_cost.json", "single-core 1x1 oc_op_call",
     "build/bench/call_cost"),
    ("From C: 0 syscalls per call", "call_cost.json", "syscalls per oc_op_call", "build/bench/call_cost"),
    ("JAX, 1-element op under jit: <= 1.0x the C++ XLA FFI handler", "jax_ffi.json", "JAX, 1-element op",
     "bench/jax_ffi_bench.py"),
    ("Forward+backward, autograd.Function (AWS Neuron custom-op guide): around opcore ops <= 1.0x around C++ extension ops",
     "torch_autograd.json", "around opcore ops / around C++", "bench/torch_bench.py"),
    ("register_autograd <= 1.0x the autograd.Function pattern", "torch_autograd.json",
     "register_autograd /", "bench/torch_bench.py"),
    ("MLP training: opcore >= 1.0x the C++ extension reference model", "mlp_train.json",
     "reference model", "bench/mlp_bench.py"),
    ("MLP training: opcore >= 0.97x the ceiling model (autograd.Function around torch.relu)", "mlp_train.json",
     "ceiling model", "bench/mlp_bench.py"),
    ("MLP inference [4096, 2048]: TCM + multicore >= 1.0x the C++ extension reference model",
     "mlp_inference.json", "reference model", "bench/mlp_bench.py"),
    ("SiLU [4096, 4096], plain C loop, default flags, both on huge pages: >= 1.0x torch eager", "activations.json",
     "silu, plain C loop at default flags, both on huge pages: speed vs torch eager", "bench/activations_bench.py"),
    ("SiLU: >= 1.0x torch.compile", "activations.json", "silu, plain C loop at default flags, both on huge pages: speed vs torch.compile",
     "bench/activations_bench.py"),
    ("Row softmax [4096, 4096], plain C loop, default flags, both on huge pages: >= 1.0x torch eager", "activations.json",
     "softmax, plain C loop at default flags, both on huge pages: speed vs torch eager", "bench/activations_bench.py"),
    ("Row softmax: >= 1.0x torch.compile", "activations.json",
     "softmax, plain C loop at default flags, both on huge pages: speed vs torch.compile", "bench/activations_bench.py"),
    ("Multicore op right after a torch matmul vs back to back (a measured answer)", "multicore_after_matmul.json",
     "right after a torch matmul", "bench/multicore_after_matmul.py"),
]


def fast_path_table(sections, heading):
    by_file = {s["_file"]: s for s in sections}
    lines = [f"{heading}# Fast-path targets", "",
             "| target | bound | measured | met | measured ceiling | from |", "|---|---:|---:|---|---|---|"]
    for text, fname, needle, how in FAST_PATH_TARGETS:
        sec = by_file.get(fname)
        tg = None
        if sec:
            t = sec.get("target")
            tg = next((x for x in (t if isinstance(t, list) else [t] if t else [])
                       if needle in x.get("metric", "")), None)
        if tg is None:
            lines.append(f"| {text} | - | not measured | - | - | run `{how}` |")
            continue
        bound = f">= {tg['min']}" if "min" in tg else f"<= {tg['max']}" if "max" in tg else "-"
        val = tg.get("value")
        shown = f"{val:.3f}" if isinstance(val, (int, float)) else "-"
        c = tg.get("ceiling")
        ceiling = (f"{c:.3f} ({tg['ceiling_what']})" if "ceiling_what" in tg else f"{c:.3f}") \
            if isinstance(c, (int, float)) else "-"
        lines.append(f"| {text} | {bound} | {shown} | {fmt('', tg.get('met'))} | {ceiling} | {fname} |")
    return lines + [""]


# ---- the chart ----------------------------------------------------------------

def chart(sections, path):
    """One horizontal-bar panel per section that asks for one. Returns the
    path, or None (with the reason) when there is nothing to draw or no
    matplotlib."""
    panels = [s for s in sections if isinstance(s.get("chart"), dict)]
    if not panels:
        return None, "no section asks for a chart"
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None, "matplotlib is not installed (pip install -r bench/requirements.txt)"
    heights = [max(1.6, 0.45 * len(s["rows"]) + 1.0) for s in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, sum(heights)),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for ax, s in zip(axes[:, 0], panels):
        c = s["chart"]
        rows = [r for r in s["rows"] if isinstance(r.get(c["value"]), (int, float))]
        labels = [str(r.get(c["label"], "")) for r in rows]
        values = [float(r[c["value"]]) for r in rows]
        base = c.get("baseline", 0)
        colors = ["#8c8c8c" if "baseline" in lab.lower() or "memcpy" in lab.lower()
                  else "#2a7ab9" for lab in labels]
        y = list(range(len(rows)))[::-1]
        ax.barh(y, values, color=colors)
        ax.set_yticks(y)
        ax.set_yticklabels(labels)
        if c.get("log"):
            ax.set_xscale("log")
        ax.set_xlabel(c.get("ylabel", c["value"]))
        ax.set_title(s["title"], fontsize=10, loc="left")
        ref = next((v for lab, v in zip(labels, values) if "baseline" in lab.lower()), None)
        top = max(values) if values else 1
        for yy, v, r in zip(y, values, rows):
            # the row's own ratio when it has one (it may be a median of
            # per-run ratios), else this value over the baseline's
            rr = r.get(c.get("ratio", "vs baseline"))
            rr = rr if isinstance(rr, (int, float)) else (v / ref if ref else None)
            txt = fmt(c["value"], v) + (f"  ({rr:.2f}x)" if rr is not None and not base else "")
            ax.text(v, yy, " " + txt, va="center", fontsize=8)
        if not c.get("log"):
            ax.set_xlim(0, top * 1.3)
        ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path, None


# ---- the report -----------------------------------------------------------------

HEADER = """# opcore benchmark report

Written by `python bench/report.py` (or `make bench`) from bench/results/*.json.
One part per machine: a run rewrites the part of the machine it ran on and
keeps the others. Ratios are medians of paired ratios from interleaved rounds
in one run; the path column names the instruction set each kernel used, the
pages column each side's page policy for fresh results (rows whose sides ran
on different policies are refused, except the rows labelled as the huge-page
gain).
"""


def render(sections, skipped, mach, chart_name, chart_why, key, refused=(), heading="##"):
    """One machine's part: its targets, tables, chart and machine table."""
    sub = heading + "#"
    lines = [PART_BEGIN.format(key=key), f"{heading} {key}", "",
             f"Written {time.strftime('%Y-%m-%d %H:%M:%S')}.", ""]
    if key == UNRECORDED:
        lines += ["These result files do not say which machine measured them (they were written "
                  "before the benches recorded it): run their benches again to place them.", ""]
    t = targets(sections)
    if t:
        # the ceiling column only when some target has one
        ceil = any("ceiling" in tg for _, tg in t)
        lines += [f"{sub} Targets", "", "| section | metric | target | measured | met |"
                  + (" measured ceiling |" if ceil else ""),
                  "|---|---|---:|---:|---|" + ("---:|" if ceil else "")]
        for title, tg in t:
            val, metric = tg.get("value"), tg.get("metric", "")
            bound = (f">= {tg['min']}" if "min" in tg else f"<= {tg['max']}" if "max" in tg else "-")
            # ratios read as 0.97x; times and counts as plain numbers
            is_ratio = any(k in metric for k in (" vs ", "/", " x ", "speedup", "x memcpy"))
            shown = (fmt("x" if is_ratio else "", val) if isinstance(val, (int, float)) else "-")
            lines.append(f"| {title} | {metric} | {bound} | {shown} | {fmt('', tg.get('met'))} |"
                         + (f" {fmt('x', tg.get('ceiling'))} |" if ceil else ""))
        lines.append("")
    lines += fast_path_table(sections, sub)
    for s in sections:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(s["_mtime"]))
        lines += [f"{sub} {s['title']}", "", table(s), ""]
        if s.get("notes"):
            lines += [str(s["notes"]), ""]
        if isinstance(s.get("paths"), dict):
            lines += ["Kernel paths: " + "; ".join(f"{k} {v}" for k, v in s["paths"].items()) + ".", ""]
        lines += [f"<sub>from {s['_file']}, written {when}</sub>", ""]
    if refused:
        lines += [f"{sub} Refused rows", ""] + [f"- {r}" for r in refused] + [""]
    if chart_name:
        lines += [f"![benchmark chart]({chart_name})", ""]
    elif chart_why:
        lines += [f"(No chart: {chart_why}.)", ""]
    lines += [f"{sub} Machine", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {fmt('', v)} |" for k, v in mach.items()]
    lines.append("")
    if skipped:
        lines += ["Skipped result files:", ""] + [f"- {s}" for s in skipped] + [""]
    lines.append(PART_END.format(key=key))
    return "\n".join(lines) + "\n"


def recorded_machine(m):
    """The machine table of a part measured elsewhere: what its files say."""
    out = {"CPU": str(m.get("cpu", "?")) + (f" ({m['cpu_id']})" if m.get("cpu_id") else ""),
           "instruction sets": ", ".join(m.get("isa") or []) or "-"}
    if m.get("thp"):
        out["transparent huge pages"] = m["thp"]
    if m.get("cores"):
        out["cores (usable)"] = m["cores"]
    return out


def slug(key):
    return re.sub(r"[^a-z0-9]+", "-", key.lower()).strip("-")[:60] or "machine"


def existing_parts(path):
    """{key: text} of the machine parts already in the report at path."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return {}
    return {m.group(1): m.group(0) if m.group(0).endswith("\n") else m.group(0) + "\n"
            for m in PART_RE.finditer(text)}


def main(argv=None):
    ap = argparse.ArgumentParser(description="write bench/results/report.md and its charts")
    ap.add_argument("--results", default=RESULTS, help="directory of result JSON files")
    ap.add_argument("--out", help="markdown path (default RESULTS/report.md)")
    args = ap.parse_args(argv)
    os.makedirs(args.results, exist_ok=True)
    out = args.out or os.path.join(args.results, "report.md")
    sections, skipped = load_sections(args.results)
    here = machine_key(benchlib.machine())
    groups = {}
    for sec in sections:
        groups.setdefault(sec["_machine"], []).append(sec)
    parts = existing_parts(out)
    # results that named no machine are only those in the results folder now:
    # an old report's part for them goes once every file names its machine
    if UNRECORDED not in groups:
        parts.pop(UNRECORDED, None)
    refused_all = []
    for key, secs in groups.items():
        refused = [line for sec in secs for line in check_pages(sec)]
        refused_all += refused
        png = os.path.join(os.path.dirname(os.path.abspath(out)), f"report-{slug(key)}.png")
        drawn, why = chart(secs, png)
        if key == here:
            mach = machine()
        else:
            recorded = [s["machine"] for s in secs if isinstance(s.get("machine"), dict)]
            mach = recorded_machine(recorded[0] if recorded else {"cpu": UNRECORDED})
        parts[key] = render(secs, skipped if key == here or len(groups) == 1 else [], mach,
                            os.path.basename(png) if drawn else None, why, key, refused)
        print(f"report: part '{key}': {len(secs)} sections"
              + (f", chart {os.path.relpath(png)}" if drawn else f" (no chart: {why})"))
    # this machine first, then the others in name order
    order = sorted(parts, key=lambda k: (k != here, k == UNRECORDED, k))
    with open(out, "w") as f:
        f.write(HEADER + "\n" + "\n".join(parts[k] for k in order))
    print(f"wrote {os.path.relpath(out)}")
    for line in refused_all:
        print(f"report: refused {line}", file=sys.stderr)
    return 1 if refused_all else 0


if __name__ == "__main__":
    sys.exit(main())
