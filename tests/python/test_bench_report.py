"""bench/report.py and bench/benchlib.py: the report names the machine,
keeps one part per machine, and refuses rows whose candidates ran on
different page policies."""
import json
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench"))

import benchlib  # noqa: E402
import report  # noqa: E402

OTHER = {"cpu": "AMD EPYC 7B13", "cpu_id": "family 25 model 1",
         "isa": ["AVX", "AVX2", "FMA", "F16C"], "thp": "madvise", "cores": 2}


def section(path, title, rows, machine=None):
    obj = {"title": title, "rows": rows}
    if machine is not None:
        obj["machine"] = machine
    with open(path, "w") as f:
        json.dump(obj, f)


def row(op, pages, gain=False):
    return benchlib.tag({"op": op, "vs eager": 1.02}, pages=pages,
                        path={"opcore": "AVX2", "torch": benchlib.torch_path()}, gain=gain)


def test_refuses_rows_on_different_page_policies(tmp_path, capsys):
    here = benchlib.machine()
    section(tmp_path / "norms.json", "Norms", [
        row("rmsnorm equal", {"opcore": "huge", "torch": "huge"}),
        row("rmsnorm unequal", {"opcore": "huge", "torch": "4k"}),
        row("rmsnorm output pages", {"opcore": "huge", "torch": "4k"}, gain=True)], here)
    out = tmp_path / "report.md"
    assert report.main(["--results", str(tmp_path), "--out", str(out)]) == 1
    text = out.read_text()
    table = text.split("### Norms", 1)[1].split("<sub>", 1)[0]
    assert "rmsnorm equal" in table and "both huge" in table
    assert "rmsnorm unequal" not in table
    assert "rmsnorm output pages [huge-page gain]" in table
    assert "_pages" not in table and "_path" not in table
    refused = text.split("### Refused rows", 1)[1]
    assert "rmsnorm unequal" in refused and "opcore huge, torch 4k" in refused
    assert "different page policies" in capsys.readouterr().err


def test_names_the_machine_and_keeps_other_machines(tmp_path):
    here = benchlib.machine()
    section(tmp_path / "a.json", "Section A", [{"kernel": "memcpy", "GB/s": 10.0}], here)
    out = tmp_path / "report.md"
    assert report.main(["--results", str(tmp_path), "--out", str(out)]) == 0
    text = out.read_text()
    assert here["cpu"] in text
    for name in here["isa"]:
        assert name in text
    # a run of other results, from another machine, keeps this machine's part
    other = tmp_path / "other"
    other.mkdir()
    section(other / "b.json", "Section B", [{"kernel": "memcpy", "GB/s": 7.0}], OTHER)
    assert report.main(["--results", str(other), "--out", str(out)]) == 0
    text = out.read_text()
    assert "Section A" in text and "Section B" in text
    assert "AMD EPYC 7B13 (family 25 model 1), AVX2" in text
    assert text.count("<!-- machine: ") == 2
    # rewriting this machine's part replaces it, and only it
    section(tmp_path / "a.json", "Section A2", [{"kernel": "memcpy", "GB/s": 11.0}], here)
    assert report.main(["--results", str(tmp_path), "--out", str(out)]) == 0
    text = out.read_text()
    assert "Section A2" in text and "### Section A\n" not in text and "Section B" in text
    assert text.index("Section A2") < text.index("Section B")  # this machine first


def test_unrecorded_part_goes_once_every_file_names_its_machine(tmp_path):
    here = benchlib.machine()
    section(tmp_path / "old.json", "Old section", [{"kernel": "memcpy", "GB/s": 9.0}])
    out = tmp_path / "report.md"
    assert report.main(["--results", str(tmp_path), "--out", str(out)]) == 0
    assert "## machine not recorded" in out.read_text()
    # the same file re-run on this machine: the unrecorded part is gone
    section(tmp_path / "old.json", "Old section", [{"kernel": "memcpy", "GB/s": 9.5}], here)
    assert report.main(["--results", str(tmp_path), "--out", str(out)]) == 0
    text = out.read_text()
    assert "machine not recorded" not in text and "Old section" in text
    assert text.count("<!-- machine: ") == 1


def test_write_records_the_machine(tmp_path, capsys):
    benchlib.write("x.json", {"title": "t", "rows": []}, results=str(tmp_path))
    obj = json.loads((tmp_path / "x.json").read_text())
    m = obj["machine"]
    assert m == benchlib.machine()
    assert m["cpu"] and isinstance(m["isa"], list)
    assert obj["paths"]["op-library kernels"] == benchlib.native_path()
    assert obj["paths"]["tile functions"] in ("AVX2", "portable")
    assert capsys.readouterr().out.startswith("machine: ")
    benchlib.banner()
    line = capsys.readouterr().out.splitlines()[-1]
    assert line.startswith("machine: ") and m["cpu"] in line


@pytest.mark.parametrize("mode", ["always", "madvise", "never"])
def test_page_policy(monkeypatch, mode):
    monkeypatch.setattr(benchlib, "thp_mode", lambda: mode)
    big, small = 64 << 20, 1 << 20
    on = {"THP_MEM_ALLOC_ENABLE": "1"}
    off = {"OC_HUGEPAGE_OUTPUTS": "0"}
    pp = benchlib.page_policy
    got = (pp("opcore", big, env={}), pp("opcore", big, env=off), pp("torch", big, env={}),
           pp("torch", big, env=on), pp("opcore", small, env={}), pp("numpy", big, env={}))
    want = {"always": ("huge", "huge", "huge", "huge", "4k", "huge"),
            "madvise": ("huge", "4k", "4k", "huge", "4k", "4k"),
            "never": ("4k",) * 6}[mode]
    assert got == want


def test_paths(monkeypatch):
    assert benchlib.vector_level(["AVX", "AVX2", "FMA"]) == "AVX2"
    assert benchlib.vector_level(["AVX2", "FMA", "AVX-512F"]) == "AVX-512"
    assert benchlib.vector_level(["SSE4.2"]) == "portable"
    monkeypatch.setenv("OC_TILE_ISA", "portable")
    assert benchlib.tile_path() == "portable"
    monkeypatch.setenv("OPCORE_MARCH", "x86-64-v2")
    assert benchlib.native_path() == "-march=x86-64-v2"


def test_policy_env_gives_each_policy_its_pages(monkeypatch):
    monkeypatch.setattr(benchlib, "thp_mode", lambda: "madvise")
    base = {"THP_MEM_ALLOC_ENABLE": "1", "OC_HUGEPAGE_OUTPUTS": "0", "PATH": "/bin"}
    want = {"huge": ("huge", "huge"), "4k": ("4k", "4k"), "gain": ("huge", "4k")}
    for policy, (oc, pt) in want.items():
        env = benchlib.policy_env(policy, base)
        assert env["PATH"] == "/bin"
        got = (benchlib.page_policy("opcore", 64 << 20, env), benchlib.page_policy("torch", 64 << 20, env))
        assert got == (oc, pt), policy
    with pytest.raises(ValueError, match="policy_env: policy must be one of"):
        benchlib.policy_env("2m")
