"""The GPU scripts' CPU paths: bench_dispatch.py --smoke (every section, toy sizes, the
Triton interpreter) and report_dispatch.py on the committed H200 results. They guard the
scripts the device runs against breaking between GPU sessions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "2026-11-22-h200-dispatch"


def _env() -> dict:
    env = dict(os.environ, TRITON_INTERPRET="1")
    env["PYTHONPATH"] = str(ROOT / "src") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


@pytest.mark.slow
def test_bench_dispatch_smoke_every_section(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_dispatch.py"), "--smoke", "--oracle",
                        "--exclude-aten", "--families", "triton_mm", "--oracle-families", "triton_mm",
                        "--saveload-families", "triton_mm", "--out", str(tmp_path),
                        "--store", str(tmp_path / "s.sqlite")],
                       env=_env(), capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads((tmp_path / "bench_dispatch.json").read_text())
    secs = doc["sections"]
    assert set(secs) == {"table", "sweep", "saveload", "compile", "overhead"}
    assert not [n for n, s in secs.items() if "error" in s], {n: s.get("error") for n, s in secs.items()}
    # --exclude-aten: the hint kernels are Triton ones, so the seed table compares kernels.
    assert all("aten" not in row for row in secs["table"]["rows"] if row.startswith("kernel tuned"))
    sweep = secs["sweep"]
    assert sweep["done"] == len(sweep["points"]) == 4 and sweep["oracle_done"] == 4
    assert all(r["oracle"]["best"] != "aten" for r in sweep["rows"])
    load = secs["saveload"]["load_with_binaries"]
    assert load["rc"] == 0 and all(load["correct"].values())
    assert secs["compile"]["graph_breaks"] == 0 and secs["compile"]["unique_graphs"] == 1
    # And the report renders it.
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "report_dispatch.py"),
                        str(tmp_path / "bench_dispatch.json"), "--out", str(tmp_path / "rep")],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Seed table" in (tmp_path / "rep" / "report.md").read_text()


@pytest.mark.slow
def test_bench_dispatch_hints_flag(tmp_path):
    """--hints replaces the issue's default hints everywhere the script uses them."""
    base = [sys.executable, str(ROOT / "scripts" / "bench_dispatch.py"), "--smoke", "--exclude-aten",
            "--families", "triton_mm", "--out", str(tmp_path), "--store", str(tmp_path / "s.sqlite")]
    r = subprocess.run([*base, "--sections", "table", "--hints", "64,4"], env=_env(), capture_output=True,
                       text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = json.loads((tmp_path / "bench_dispatch.json").read_text())["sections"]["table"]["rows"]
    assert [k.split(" (")[0] for k in rows if k.startswith("kernel tuned")] == [
        "kernel tuned at M=4", "kernel tuned at M=64"]
    bad = subprocess.run([*base, "--hints", "4,x"], env=_env(), capture_output=True, text=True, timeout=120,
                         check=False)
    assert bad.returncode == 2 and "--hints takes comma-separated integers" in bad.stderr


@pytest.mark.slow
def test_bench_edge_smoke(tmp_path):
    """scripts/bench_edge.py on the interpreter: both edge modes verified, JSON written."""
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_edge.py"), "--smoke", "--out", str(tmp_path)],
                       env=_env(), capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rows = json.loads((tmp_path / "bench_edge.json").read_text())["rows"]
    cases = [(row["shape"], name, c["status"]) for row in rows for name, c in row["cases"].items()
             if name != "cuBLAS"]  # the Triton cases; cuBLAS is timed beside them (below)
    assert len(cases) == 4 and all(st == "ok" for *_, st in cases), cases
    assert all(row["cases"]["cuBLAS"]["status"] == "ok" for row in rows)
    assert {name.split()[-1] for _, name, _ in cases} == {"wrap", "mask"}
    # Timed in the bench's interleaved rounds (host wall clock here): every kernel, every round.
    for row in rows:
        assert set(row["cases"]) == {"cuBLAS", *(n for shape, n, _ in cases if shape == row["shape"])}
        for c in row["cases"].values():
            assert c["device_us"] > 0 and len(c["rounds_us"]) == 3 and c["spread"] >= 0
    assert "| m1_64x40 | 1×64×40 | `BM16-BN32-BK16-S2-W4-G4` |" in (tmp_path / "report.md").read_text()


@pytest.mark.slow  # a collect.py dry run over every phase (~6 s); test_model's collect tests stay fast
def test_collect_dry_run_counts_what_a_store_leaves(tmp_path):
    """collect.py --dry-run --resume-from: the plan minus what the store already holds."""
    import re
    import sqlite3

    cmd = [sys.executable, str(ROOT / "scripts" / "collect.py"), "--dry-run", "--dtypes", "bf16",
           "--limit-shapes", "2"]
    r = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    total = int(re.search(r"2 shapes, (\d+) candidates", r.stdout).group(1))
    plan = subprocess.run([sys.executable, str(ROOT / "scripts" / "collect.py"), "--list-shapes",
                           "--limit-shapes", "1"], env=_env(), capture_output=True, text=True, check=True)
    _group, _name, m, n, k, layout_b = plan.stdout.splitlines()[1].split(",")
    # The problem key of that shape, as the store writes it (gemmtune.problem.Problem.key).
    from gemmtune.problem import Problem

    key = Problem.from_sizes(int(m), int(n), int(k), "bf16", layout_b=layout_b).key
    store = tmp_path / "s.sqlite"
    con = sqlite3.connect(store)
    con.execute("CREATE TABLE results (problem_key TEXT, choice_id TEXT)")
    con.executemany("INSERT INTO results VALUES (?, ?)", [(key, "aten"), ("mm:elsewhere", "aten")])
    con.commit()
    con.close()
    r = subprocess.run([*cmd, "--resume-from", str(store)], env=_env(), capture_output=True, text=True,
                       timeout=300, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"left after s.sqlite: {total - 1} candidates on 2 shapes" in r.stdout, r.stdout


def test_collect_finds_rows_timed_before_the_edge_masks(tmp_path):
    """stale_edge_rows: Triton rows the kernel now runs differently, timed before the change."""
    import importlib.util
    import sqlite3

    from gemmtune.problem import Problem

    spec = importlib.util.spec_from_file_location("collect", ROOT / "scripts" / "collect.py")
    collect = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(collect)
    decode = Problem.from_sizes(1, 4096, 4096, "bf16", layout_b="col").key   # M = 1: masked now
    wide = Problem.from_sizes(4096, 4096, 4096, "bf16").key                  # no edge at all
    odd = Problem.from_sizes(512, 50257, 768, "bf16").key                    # odd N, row-major B
    old, new = collect.EDGE_MASKS_SINCE - 3600, collect.EDGE_MASKS_SINCE + 3600
    rows = [(decode, "triton_mm:BM64-BN32-BK128-S5-W4-G8", "triton_mm", old),      # stale
            (decode, "splitk:BM16-BN64-BK64-S3-W4-G8-SK4-atomic", "splitk", old),  # stale (M < 16)
            (decode, "decompose_k:s2", "decompose_k", old),                       # stale (its tile)
            (decode, "aten", "aten", old),                                        # cuBLAS: never
            (decode, "triton_mm:BM16-BN64-BK64-S3-W4-G8", "triton_mm", new),       # timed after: fine
            (wide, "triton_mm:BM128-BN128-BK64-S3-W4-G8", "triton_mm", old),       # nothing masked
            (odd, "triton_mm:BM128-BN128-BK64-S3-W4-G8", "triton_mm", old),        # odd N masked now
            (odd, "pad+triton_mm:BM128-BN128-BK64-S3-W4-G8", "triton_mm", old)]    # padded N is even
    store = tmp_path / "s.sqlite"
    con = sqlite3.connect(store)
    con.execute("CREATE TABLE results (problem_key TEXT, choice_id TEXT, family TEXT, created_at REAL)")
    con.executemany("INSERT INTO results VALUES (?, ?, ?, ?)", rows)
    con.commit()
    con.close()
    stale = collect.stale_edge_rows(store)
    assert sorted(stale) == sorted([rows[i][:2] for i in (0, 1, 2, 6)]), stale
    assert collect.drop_rows(store, stale) == 4
    assert collect.stale_edge_rows(store) == [] and len(collect.measured_keys(store)) == 4


def test_collect_launch_bound_rows_are_the_old_cut_rows_under_the_bound(tmp_path):
    import gzip
    import importlib.util
    import sqlite3

    spec = importlib.util.spec_from_file_location("collect", ROOT / "scripts" / "collect.py")
    collect = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(collect)
    old, new, bound = collect.LAUNCH_BOUND_SINCE - 60, collect.LAUNCH_BOUND_SINCE + 60, collect.LAUNCH_BOUND_MS
    rows = [("p", "a", "ok", 1, 0.08, old),            # cut, old timer, launch-sized: dropped
            ("p", "b", "ok", 1, bound * 0.99, old),    # just under the bound: dropped
            ("p", "c", "ok", 1, bound * 1.01, old),    # over it: the launches queued, kept
            ("p", "d", "ok", 5, 0.02, old),            # timed in full: kept
            ("p", "e", "ok", 1, 0.08, new),            # cut by the fixed timer: kept
            ("p", "f", "crashed", 1, 0.08, old)]       # not a timing: kept
    store = tmp_path / "s.sqlite"
    con = sqlite3.connect(store)
    con.execute("CREATE TABLE results (problem_key TEXT, choice_id TEXT, status TEXT, repeats INTEGER, "
                "device_ms REAL, created_at REAL)")
    con.executemany("INSERT INTO results VALUES (?, ?, ?, ?, ?, ?)", rows)
    con.commit()
    con.close()
    bad = collect.launch_bound_rows(store)
    assert sorted(bad) == [("p", "a"), ("p", "b")]
    kept = tmp_path / "dropped.csv.gz"
    assert collect.save_rows(store, bad, kept) == 2
    with gzip.open(kept, "rt") as f:
        lines = f.read().splitlines()
    assert lines[0].startswith("problem_key,choice_id,status") and len(lines) == 3
    assert collect.drop_rows(store, bad) == 2
    assert collect.launch_bound_rows(store) == [] and len(collect.measured_keys(store)) == 4


@pytest.mark.slow  # reads and reports every committed H200 dispatch result (~4 s)
def test_report_dispatch_on_the_committed_h200_results(tmp_path):
    files = sorted(RESULTS.glob("bench_dispatch-*.json"))
    assert len(files) == 5
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "report_dispatch.py"), *map(str, files),
                        "--out", str(tmp_path)], capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    md = (tmp_path / "report.md").read_text()
    # The numbers the README quotes come from these files.
    assert "| similarity | 0.999 (target ≤ 1.05: MET) | 1.009 |" in md
    assert "| 1×256×256 | 18.1 |" in md
    assert "| kernel tuned at M=64 (triton_mm:BM64-BN32-BK128-S5-W4-G8) | 13.1 | 43.1 | 675.9 |" in md
    assert "| load_with_binaries | 9 | 0 | 0 |" in md
    pytest.importorskip("matplotlib")
    from PIL import Image

    for stem in ("bench_dispatch-all-families", "bench_dispatch-triton-only"):  # the two with a sweep
        with Image.open(tmp_path / f"sweep-{stem}.png") as im:
            assert im.size[0] > 100


def test_report_dispatch_rejects_other_json(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"shapes": []}')
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "report_dispatch.py"), str(bad), "--out",
                        str(tmp_path / "o")], capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 2 and "not a bench_dispatch.py result" in r.stderr


def test_check_inductor_fp8_lut_dry_run():
    """The fp8 Inductor check's table and export (its GPU part runs on the device only)."""
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "check_inductor_fp8_lut.py"), "--dry-run"],
                       env=_env(), capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "exported: 14 keys for 4 problems; skipped: []" in r.stdout and "dry run: ok" in r.stdout
    for template in ("triton::mm", "aten::_scaled_mm", "triton::scaled_mm_device_tma_epilogue_scaling"):
        assert f"'template_id': '{template}'" in r.stdout
