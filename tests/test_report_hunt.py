"""CPU hunt of the commands that read results after the GPU run: ``gemmtune report`` (a bench
JSON, ``--merge``, ``--tune-run``, ``--store``), ``train`` / ``predict`` (``--eval``, ``--model``)
and ``lut export-inductor`` / ``diff`` / ``merge``, on corner inputs a user meets: a method that
failed on every shape, a bench run cut by its ``--deadline`` merged with the run that measured the
rest, parts of one run tuned in two processes, truncated gzip stores, corrupted model files.
Every input is built in tmp_path from small documents; one test per defect found."""

from __future__ import annotations

import copy
import csv
import gzip
import json
from pathlib import Path

import pytest

from gemmtune import cli, report

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "bench_fixture.json"
# A store export of 10 H200 problems, 34-73 measured choices each (a GPU run of s49).
SMALLK = ROOT / "benchmarks" / "results" / "2026-11-30-h200-s49" / "call2" / "smallk-default-rows.csv.gz"


def _doc() -> dict:
    return report.load_bench(FIXTURE)


# Defect: a gemmtune mode that failed on every shape was reported as "not run" / NOT RUN.
def test_a_mode_failing_on_every_shape_is_reported_failed_not_not_run():
    doc = _doc()
    for s in doc["shapes"]:
        s["methods"]["gemmtune_fast"] = {"status": "error", "reason": "compile failed"}
    t = report.targets(doc)["gemmtune_fast"]
    groups = {s["group"] for s in doc["shapes"]}
    assert all(t[g]["verdict"] == "FAILED" for g, _ in report.SPEEDUP_TARGETS if g in groups)
    assert t["tuning"]["verdict"] == "FAILED"
    md = report.render_markdown(doc)
    assert "- gemmtune --fast: not run." not in md
    assert f"- gemmtune --fast: ran on {len(doc['shapes'])} shapes, no verified kernel on any" in md
    # A mode with no record at all is still "not run".
    assert "- gemmtune model top-5: not run." in md


# Defect: a --deadline run merged with the run that measured the rest still said those shapes
# were not measured (its "deadline:" note was carried over).
def test_merge_drops_a_deadline_note_whose_shapes_another_part_measured():
    doc = _doc()
    names = [s["name"] for s in doc["shapes"]]
    a, b = copy.deepcopy(doc), copy.deepcopy(doc)
    a["shapes"], b["shapes"] = doc["shapes"][:6], doc["shapes"][6:]
    a["header"]["unmeasured"] = names[6:]
    a["notes"] = [f"deadline: 4 of 10 shapes not measured (the longest shape so far took 9 s and too little "
                  f"time was left): {', '.join(names[6:])}"]
    merged = report.merge_bench([a, b])
    assert len(merged["shapes"]) == 10 and "unmeasured" not in merged["header"]
    assert not any("not measured" in n for n in merged["notes"]), merged["notes"]
    # Where no part measured them, the merged report still says so.
    b["shapes"] = doc["shapes"][6:8]
    merged = report.merge_bench([a, b])
    assert merged["header"]["unmeasured"] == names[8:]
    assert sum("not measured" in n for n in merged["notes"]) == 1


# Defect: a truncated .csv.gz / .sqlite.gz store ended predict --eval, train and report --store
# with an EOFError traceback instead of one line naming the file.
@pytest.mark.parametrize("argv", [["predict", "--eval"], ["train", "--out", "m.json", "--store"],
                                  ["report", "--store"]])
@pytest.mark.parametrize("name", ["rows.csv.gz", "store.sqlite.gz"])
def test_a_truncated_gzip_store_is_one_line(tmp_path, monkeypatch, capsys, argv, name):
    monkeypatch.chdir(tmp_path)
    whole = gzip.compress(b"device_name,status\n" + b"NVIDIA H200,ok\n" * 2000)
    (tmp_path / name).write_bytes(whole[: len(whole) // 2])
    assert cli.main([*argv, name]) == 2
    err = capsys.readouterr().err
    assert name in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


# Defect: a merged report kept the first part's header modes: its candidate counts and tuning
# wall times only, and one worker start-up in the tuning target though each part paid one.
def test_merge_sums_each_parts_modes_and_start_ups():
    doc = _doc()
    a, b = copy.deepcopy(doc), copy.deepcopy(doc)
    a["shapes"], b["shapes"] = doc["shapes"][:5], doc["shapes"][5:]
    for s in doc["shapes"]:
        s["methods"]["inductor"] = {"status": "ok", "kernel": {"ms": 1.0}, "tune_s": 10.0}
        s["methods"]["gemmtune_fast"] = {"status": "ok", "kernel": {"ms": 1.0}, "tune_s": 0.5}
    a["header"]["modes"] = {"gemmtune_fast": {"kwargs": {"fast": True}, "measured": 10, "wall_s": 4.0,
                                              "startup_s": 2.0}}
    b["header"]["modes"] = {"gemmtune_fast": {"kwargs": {"fast": True}, "measured": 30, "wall_s": 6.0,
                                              "startup_s": 3.0}}
    merged = report.merge_bench([a, b])
    m = merged["header"]["modes"]["gemmtune_fast"]
    assert (m["measured"], m["wall_s"], m["startup_s"]) == (40, 10.0, 5.0)
    # 10 shapes x 0.5 s + both start-ups, against 10 x 10 s of max-autotune
    assert report.tuning_summary(merged, "gemmtune_fast")["ratio_with_startup"] == pytest.approx(0.1)
    b["header"]["modes"]["gemmtune_fast"]["kwargs"] = {"fast": True, "deterministic": True}
    assert any("different options" in n for n in report.merge_bench([a, b])["notes"])


def _smallk_rows() -> list[dict]:
    with gzip.open(SMALLK, "rt", newline="") as f:
        return list(csv.DictReader(f))


def _write_csv(path: Path, rows: list[dict]) -> Path:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def _summary_line(out: str) -> str:
    return next(line for line in out.splitlines() if "Spearman mean" in line)


# Defect: predict --eval scored problems with one measured choice (a --fast store's): their top-1
# is "found" whatever the model ranks, inflating 'best found' and deflating the regrets.
def test_predict_eval_leaves_out_problems_too_thinly_measured_to_rank(tmp_path, capsys):
    rows = _smallk_rows()
    keys = list(dict.fromkeys(r["problem_key"] for r in rows))
    first = [r for r in rows if r["problem_key"] == keys[0]]
    thin = [next(r for r in rows if r["problem_key"] == k and r["choice_id"] == "aten") for k in keys[1:]]
    path = _write_csv(tmp_path / "thin.csv", first + thin)
    assert cli.main(["predict", "--eval", str(path), "--device", "h200"]) == 0
    out = capsys.readouterr()
    assert _summary_line(out.out).startswith("1 problems,"), out.out
    assert f"{len(thin)} problems with fewer than" in out.err
    # None left: one line, exit 2.
    assert cli.main(["predict", "--eval", str(_write_csv(tmp_path / "thin2.csv", thin))]) == 2
    assert "fewer than" in capsys.readouterr().err


# Defect: predict --eval dropped the rows of another GPU (or triton) in the store without a word;
# train says so.
def test_predict_eval_says_which_rows_it_left_out(tmp_path, capsys):
    rows = _smallk_rows()
    other = [dict(r, device_name="NVIDIA H100 80GB HBM3") for r in rows[:30]]
    path = _write_csv(tmp_path / "mixed.csv", rows + other)
    assert cli.main(["predict", "--eval", str(path)]) == 0
    assert "skipped 30 rows measured on NVIDIA H100 80GB HBM3" in capsys.readouterr().err


# Defect: report --tune-run of a run where cuBLAS (or every candidate) failed on a shape, or whose
# tune-run.json lacks a shape, ended with "unsupported format string passed to NoneType.__format__"
# and no report (run_summary writes None for those times).
def test_tune_run_renders_a_shape_with_failed_cublas_or_no_choice(tmp_path, capsys):
    row = lambda name, key, best, best_ms, aten_ms: {  # noqa: E731
        "group": "odd", "name": name, "key": key, "candidates": 3, "statuses": {"ok": 1, "error": 2},
        "best": best, "best_ms": best_ms, "best_spread": 0.01, "aten_ms": aten_ms, "aten_spread": 0.01}
    k1, k2, k3 = (f"mm:M{m}-N64-K64:fp16->fp16:row.a/row.a" for m in (16, 32, 48))
    (tmp_path / "tune-summary.json").write_text(json.dumps({"rows": [
        row("ok", k1, "aten", 0.01, 0.01), row("no_cublas", k2, "triton_mm:x", 0.01, None),
        row("none_ok", k3, None, None, None)]}))
    ctx = {"device_name": "NVIDIA H200", "capability": "9.0", "torch_version": "2.11", "triton_version": "3.6",
           "gemmtune_version": "0.1"}
    (tmp_path / "tune-run.json").write_text(json.dumps({"context": ctx, "measured": 9, "shapes": [
        {"key": k1, "tune_s": 1.0}, {"key": k2, "tune_s": 2.0}]}))
    (tmp_path / "env.txt").write_text("env\n")
    assert cli.main(["report", "--tune-run", str(tmp_path)]) == 0, capsys.readouterr().err
    md = capsys.readouterr().out
    assert "| odd | no_cublas | 32×64×64 fp16 | `triton_mm:x` | 10.00 | - | - | 3 | 2.0 |" in md
    assert "| odd | none_ok | 48×64×64 fp16 | (no verified choice) | - | - | - | 3 | - |" in md
