"""The results store's fp32_precision column: which fp32 arithmetic (3xTF32 or IEEE) timed a row.

Schema version 2 adds it; a version-1 store migrates in place when opened for writing and is read
as it is when opened read-only. A row of an fp32 TF32-off problem timed under the other arithmetic
(or of unknown arithmetic) is not reused; training never mixes the two in one group.
"""

from __future__ import annotations

import csv
import gzip
import shutil
import sqlite3

import pytest

from gemmtune.configs import AtenConfig, Choice
from gemmtune.model.data import load_dataset
from gemmtune.precision import FP32_PRECISIONS, fp32_precision, key_precision_tag, precision_tag
from gemmtune.problem import Problem
from gemmtune.store import SCHEMA_VERSION, ResultRow, ResultStore, RunContext, StoreError, opened_readonly
from gemmtune.store.rows import PRECISION_TAGS
from gemmtune.tuning.recorder import Recorder

CTX = RunContext("NVIDIA H200", "9.0", "2.6.0", "3.2.0", "0.1.0")
FP32 = Problem.from_sizes(16, 32, 32, "fp32")
BF16 = Problem.from_sizes(16, 32, 32, "bf16")
ATEN = Choice("aten", AtenConfig())

# The results table exactly as schema version 1 made it (before fp32_precision), written out
# rather than derived from the code under test.
V1_RESULTS = """CREATE TABLE results (
    device_name TEXT NOT NULL, capability TEXT NOT NULL, torch_version TEXT NOT NULL,
    triton_version TEXT NOT NULL, gemmtune_version TEXT NOT NULL,
    problem_key TEXT NOT NULL, choice_id TEXT NOT NULL, family TEXT NOT NULL, status TEXT NOT NULL,
    device_ms REAL, eager_ms REAL, rel_err REAL, reason TEXT NOT NULL,
    m INTEGER NOT NULL, n INTEGER NOT NULL, k INTEGER NOT NULL,
    dtype TEXT NOT NULL, out_dtype TEXT NOT NULL, layout TEXT NOT NULL, aligned INTEGER NOT NULL,
    params_json TEXT NOT NULL, repeats INTEGER, spread REAL, created_at REAL NOT NULL,
    PRIMARY KEY (device_name, capability, torch_version, triton_version, gemmtune_version,
                 problem_key, choice_id)
)"""
V1_ROWS = [
    ("NVIDIA H200", "9.0", "2.6.0", "3.2.0", "0.1.0", FP32.key, "aten", "aten", "ok",
     0.25, 0.3, 1.5e-7, "", 16, 32, 32, "float32", "float32", "row/row", 1, "{}", 10, 0.01, 1700000000.5),
    ("NVIDIA H200", "9.0", "2.6.0", "3.2.0", "0.1.0", FP32.key, "triton_mm:x", "triton_mm", "compile_error",
     None, None, None, "boom", 16, 32, 32, "float32", "float32", "row/row", 1, '{"BM": 64}', None, None, 1.0),
    ("NVIDIA H200", "9.0", "2.6.0", "3.2.0", "0.1.0", BF16.key, "aten", "aten", "ok",
     float("inf"), 0.1, 0.0, "", 16, 32, 32, "bfloat16", "bfloat16", "row/row", 1, "{}", 3, 0.5, 2.0),
]


def other(tag: str) -> str:
    return next(t for t in FP32_PRECISIONS if t != tag)


def make_v1(path):
    con = sqlite3.connect(path)
    con.execute(V1_RESULTS)
    con.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    con.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    con.executemany(f"INSERT INTO results VALUES ({', '.join('?' * 24)})", V1_ROWS)
    con.commit()
    con.close()
    return path


def raw(path, sql):
    con = sqlite3.connect(path)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def row(problem: Problem, choice_id: str = "aten", ms: float = 1.0, tag: str = "", **kw) -> ResultRow:
    return ResultRow(problem_key=problem.key, choice_id=choice_id, family=choice_id.split(":")[0], status="ok",
                     device_ms=ms, eager_ms=None, rel_err=None, m=problem.m, n=problem.n, k=problem.k,
                     dtype=problem.dtype, out_dtype=problem.out_dtype, layout="row/row", aligned=True,
                     fp32_precision=tag, **kw)


def test_tags():
    assert PRECISION_TAGS == ("",) + FP32_PRECISIONS  # rows.py restates them without importing torch
    assert precision_tag(FP32, "ieee") == "ieee" and precision_tag(FP32) == fp32_precision()
    assert precision_tag(BF16, "ieee") == ""
    assert precision_tag(Problem.from_sizes(16, 32, 32, "fp32", allow_tf32=True), "ieee") == ""
    assert key_precision_tag(Problem.from_sizes(16, 32, 32, "fp32", op="bmm", batch=2).key, "ieee") == "ieee"
    with pytest.raises(ValueError, match="fp32 precision 'x'"):
        key_precision_tag(FP32.key, "x")


def test_v1_store_migrates_losslessly(tmp_path):
    path = make_v1(tmp_path / "v1.sqlite")
    before = raw(path, "SELECT * FROM results ORDER BY problem_key, choice_id")
    with ResultStore(path) as db:
        got = db.rows()
    after = raw(path, "SELECT * FROM results ORDER BY problem_key, choice_id")
    assert after == [r + ("",) for r in before]  # every value kept, the new column ''
    assert raw(path, "SELECT value FROM meta WHERE key='schema_version'") == [("2",)] and SCHEMA_VERSION == 2
    assert [r.fp32_precision for _, r in got] == ["", "", ""]
    assert {(r.problem_key, r.choice_id, r.device_ms, r.status) for _, r in got} == {
        (FP32.key, "aten", 0.25, "ok"), (FP32.key, "triton_mm:x", None, "compile_error"),
        (BF16.key, "aten", float("inf"), "ok")}
    with ResultStore(path) as db:  # a migrated store opens as version 2, unchanged
        assert db.count() == 3
    assert raw(path, "SELECT * FROM results ORDER BY problem_key, choice_id") == after


def test_v1_store_read_only_is_read_and_left_as_it_is(tmp_path):
    path = make_v1(tmp_path / "v1.sqlite")
    gz = tmp_path / "v1.sqlite.gz"
    with open(path, "rb") as src, gzip.open(gz, "wb") as out:
        shutil.copyfileobj(src, out)
    gz_bytes = gz.read_bytes()
    for where in (gz, path):
        with opened_readonly(where) as db:
            rows = db.rows()
            assert [(r.choice_id, r.fp32_precision) for _, r in rows] == [("aten", ""), ("aten", ""),
                                                                         ("triton_mm:x", "")]
            assert db.best(CTX, BF16.key) is None  # inf is no time
            assert db.best(CTX, FP32.key, "").choice_id == "aten"
    assert gz.read_bytes() == gz_bytes
    # The plain file was not migrated by the read-only opening.
    assert raw(path, "SELECT value FROM meta WHERE key='schema_version'") == [("1",)]
    assert "fp32_precision" not in {r[1] for r in raw(path, "PRAGMA table_info(results)")}


def test_newer_schema_refused_read_only_too(tmp_path):
    path = make_v1(tmp_path / "v3.sqlite")
    con = sqlite3.connect(path)
    con.execute("UPDATE meta SET value='3' WHERE key='schema_version'")
    con.commit()
    con.close()
    for readonly in (False, True):
        with pytest.raises(StoreError, match="schema version 3"):
            ResultStore(path, readonly=readonly)


def test_row_of_other_fp32_arithmetic_is_measured_again_and_replaced(tmp_path):
    tag = fp32_precision()
    with ResultStore(tmp_path / "s.sqlite") as db:
        db.record(CTX, row(FP32, ms=2.0, tag=other(tag)))
        rec = Recorder(db, CTX)
        reuse, todo = rec.pending(FP32, [ATEN])
        assert reuse == {} and todo == [(FP32, ATEN)]
        assert db.done(CTX, FP32.key) == {} and db.best(CTX, FP32.key) is None
        assert db.best(CTX, FP32.key, other(tag)).device_ms == 2.0  # still there, for the other setting
        assert db.claim(CTX, FP32.key, ["aten"], "me", 60.0) == ["aten"]
        rec.record(FP32, ATEN, {"status": "ok", "device_ms": 1.0})
        rows = db.rows()
        assert len(rows) == 1  # same primary key: the re-measure replaced it
        assert (rows[0][1].fp32_precision, rows[0][1].device_ms) == (tag, 1.0)
        assert rec.pending(FP32, [ATEN]) == ({"aten": rows[0][1]}, [])
        assert db.best(CTX, FP32.key).device_ms == 1.0


def test_legacy_fp32_row_is_not_reused_but_bf16_is(tmp_path):
    path = make_v1(tmp_path / "v1.sqlite")
    with ResultStore(path) as db:
        rec = Recorder(db, CTX)
        assert rec.pending(FP32, [ATEN])[1] == [(FP32, ATEN)]  # unknown arithmetic: measured again
        reuse, todo = rec.pending(BF16, [ATEN])
        assert todo == [] and reuse["aten"].device_ms == float("inf")


def test_bf16_row_reused_whatever_its_tag_or_the_setting(tmp_path):
    with ResultStore(tmp_path / "s.sqlite") as db:
        db.record(CTX, row(BF16, ms=0.5))
        for tag in FP32_PRECISIONS:  # what a process under either setting asks for a bf16 problem
            assert db.done(CTX, BF16.key, precision_tag(BF16, tag))["aten"].device_ms == 0.5
        assert Recorder(db, CTX).pending(BF16, [ATEN])[1] == []
        assert db.best(CTX, BF16.key).device_ms == 0.5


def test_invalid_tag_refused(tmp_path):
    with ResultStore(tmp_path / "s.sqlite") as db, pytest.raises(ValueError, match="invalid fp32_precision"):
        db.record(CTX, row(FP32, tag="tf32"))


def test_csv_round_trip_and_old_csv(tmp_path):
    with ResultStore(tmp_path / "s.sqlite") as db:
        db.record(CTX, row(FP32, ms=2.0, tag="ieee"))
        db.record(CTX, row(BF16, ms=0.5))
        db.export(tmp_path / "r.csv")
    with open(tmp_path / "r.csv", newline="") as f:
        recs = list(csv.DictReader(f))
    assert {(r["problem_key"], r["fp32_precision"]) for r in recs} == {(FP32.key, "ieee"), (BF16.key, "")}
    data = load_dataset(tmp_path / "r.csv")
    assert {(g.problem.key, g.fp32_precision) for g in data.groups} == {(FP32.key, "ieee"), (BF16.key, "")}
    # A CSV exported by a version-1 store has no such column: its rows read as "".
    with open(tmp_path / "old.csv", "w", newline="") as f:
        w = csv.DictWriter(f, [c for c in recs[0] if c != "fp32_precision"], extrasaction="ignore")
        w.writeheader()
        w.writerows(recs)
    assert {g.fp32_precision for g in load_dataset(tmp_path / "old.csv").groups} == {""}


def test_load_dataset_keeps_the_two_arithmetics_apart(tmp_path):
    # Two gemmtune versions (one device, one triton): one problem timed under IEEE and 3xTF32.
    ctx_b = RunContext("NVIDIA H200", "9.0", "2.6.0", "3.2.0", "0.2.0")
    with ResultStore(tmp_path / "s.sqlite") as db:
        db.record(CTX, row(FP32, ms=2.0, tag="ieee"))
        db.record(ctx_b, row(FP32, ms=1.0, tag="tf32x3"))
        db.record(CTX, row(BF16, ms=0.5))
        db.record(ctx_b, row(BF16, ms=0.125))
    for src in ("s.sqlite", "s.csv"):
        if src == "s.csv":
            with ResultStore(tmp_path / "s.sqlite", readonly=True) as db:
                db.export(tmp_path / "s.csv")
        groups = sorted(((g.problem.key, g.fp32_precision, list(g.times_ms)) for g in
                         load_dataset(tmp_path / src).groups), key=lambda g: (g[0], g[1]))
        assert groups == [(BF16.key, "", [pytest.approx(0.25)]),  # bf16: one group, geometric mean
                          (FP32.key, "ieee", [2.0]), (FP32.key, "tf32x3", [1.0])]


@pytest.mark.slow  # a collect dry run over every phase (~6 s)
def test_collect_dry_run_counts_other_arithmetic_rows_as_left(tmp_path, capsys):
    import re

    from gemmtune import cli, collect
    from gemmtune.collect.shapes import problems_for

    base = ["collect", "--dry-run", "--dtypes", "fp32", "--limit-shapes", "4"]  # fp32 takes every third
    assert cli.main(base) == 0
    total = int(re.search(r"2 shapes, (\d+) candidates", capsys.readouterr().out).group(1))
    (_, _, first), (_, _, second) = problems_for("float32", collect.shape_plan()[:4])
    with ResultStore(tmp_path / "s.sqlite") as db:
        db.record(CTX, row(first, tag=fp32_precision()))  # reused: one candidate fewer
        db.record(CTX, row(second, tag=other(fp32_precision())))  # measured again
    assert cli.main([*base, "--resume-from", str(tmp_path / "s.sqlite")]) == 0
    out = capsys.readouterr().out
    assert "1 fp32 rows of s.sqlite were timed under another fp32 arithmetic" in out
    assert f"left after s.sqlite: {total - 1} candidates on 2 shapes" in out


def test_training_features_follow_the_rows_arithmetic_not_the_process(monkeypatch):
    # An fp32 row is featurized (analytic estimates among the features) for the arithmetic that
    # timed it, whatever this process's GEMMTUNE_FP32_PRECISION: a tagged row by its tag, an
    # untagged one (schema-1 store) as IEEE. The old fit() featurized them for the process's
    # setting (3xTF32 by default) and only warned about untagged rows.
    import numpy as np

    from gemmtune import precision
    from gemmtune.configs import Choice
    from gemmtune.device import DeviceInfo
    from gemmtune.model.analytic import AnalyticModel
    from gemmtune.model.data import Dataset, ShapeData
    from gemmtune.model.features import featurize
    from gemmtune.model.training import _matrix, fit

    dev = DeviceInfo.lookup("h100")
    cs = [Choice.parse("aten"), Choice.parse("triton_mm:BM64-BN64-BK32-S3-W4-G8"),
          Choice.parse("triton_mm:BM128-BN128-BK32-S3-W4-G8")]

    def group(m, tag, dtype="fp32"):
        return ShapeData(Problem.from_sizes(m, 512, 1024, dtype), cs, np.array([1.0, 2.0, 3.0]), fp32_precision=tag)
    data = Dataset([group(256, "ieee"), group(512, ""), group(1024, "tf32x3"), group(256, "", "bf16")])

    def matrix(process):
        monkeypatch.setattr(precision, "_FP32_ON_DEVICE", [process])
        return _matrix(data, dev, AnalyticModel(dev))[0]
    x3, ieee = matrix("tf32x3"), matrix("ieee")
    assert np.array_equal(x3, ieee)
    # ... and they are the features of each row's own arithmetic (the two differ for fp32)
    for i, g in enumerate(data.groups):
        want = {"ieee": "ieee", "": "ieee", "tf32x3": "tf32x3"}[g.fp32_precision]
        monkeypatch.setattr(precision, "_FP32_ON_DEVICE", [want])
        assert np.array_equal(ieee[3 * i:3 * i + 3], featurize(g.problem, g.choices, dev))
    monkeypatch.setattr(precision, "_FP32_ON_DEVICE", ["tf32x3"])
    assert not np.array_equal(featurize(data.groups[0].problem, cs, dev), ieee[:3])
    # fit takes both arithmetics in one dataset, and says how it featurized them
    model, _ = fit(data, kind="gbt", device=dev)
    assert model.provenance["fp32_features"] == {"per_row_precision": True, "untagged_as": "ieee",
                                                 "problems": {"ieee": 1, "tf32x3": 1, "untagged_as_ieee": 1}}
    # At tune time a model featurizes for this process's arithmetic (the candidates run with it)
    p = data.groups[0].problem
    keys = {}
    for process in ("tf32x3", "ieee"):
        monkeypatch.setattr(precision, "_FP32_ON_DEVICE", [process])
        keys[process] = featurize(p, cs, dev)
    assert not np.array_equal(keys["tf32x3"], keys["ieee"])


def test_scoring_features_follow_the_rows_arithmetic(monkeypatch):
    # cv.score and metrics.evaluate featurize a held-out fp32 row for the arithmetic that timed it too
    import numpy as np

    from gemmtune import precision
    from gemmtune.configs import Choice
    from gemmtune.model import cv, metrics
    from gemmtune.model.data import Dataset, ShapeData

    seen = []

    class Spy:
        def predict(self, problem, choices):
            seen.append(precision.fp32_precision())
            return [1.0] * len(choices)
    cs = [Choice.parse("aten"), Choice.parse("triton_mm:BM64-BN64-BK32-S3-W4-G8")]
    data = Dataset([ShapeData(Problem.from_sizes(64, 64, 64, "fp32"), cs, np.array([1.0, 2.0]), fp32_precision=t)
                    for t in ("ieee", "", "tf32x3")])
    monkeypatch.setattr(precision, "_FP32_ON_DEVICE", ["tf32x3"])
    cv.score(Spy(), data)
    metrics.evaluate(Spy(), data)
    assert seen == ["ieee", "ieee", "tf32x3"] * 2
    assert precision.fp32_precision() == "tf32x3"
