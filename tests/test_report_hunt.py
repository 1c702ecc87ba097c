"""CPU hunt of the commands that read results after the GPU run: ``gemmtune report`` (a bench
JSON, ``--merge``, ``--tune-run``, ``--store``), ``train`` / ``predict`` (``--eval``, ``--model``)
and ``lut export-inductor`` / ``diff`` / ``merge``, on corner inputs a user meets: a method that
failed on every shape, a bench run cut by its ``--deadline`` merged with the run that measured the
rest, parts of one run tuned in two processes, truncated gzip stores, corrupted model files.
Every input is built in tmp_path from small documents; one test per defect found."""

from __future__ import annotations

import copy
import gzip
from pathlib import Path

import pytest

from gemmtune import cli, report

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "bench_fixture.json"


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
