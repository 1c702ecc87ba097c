"""`gemmtune report --store`: a per-problem summary of a results store (best choice, cuBLAS,
speedup, failures), on a store written by a real (interpreter) tune run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import gemmtune
from gemmtune import cli
from gemmtune.problem import Problem
from gemmtune.report.store import markdown, summarize
from mdtables import md_tables


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("s") / "s.sqlite"
    gemmtune.tune([Problem.from_sizes(16, 16, 32, "fp16")], families=["triton_mm"], store=path, progress=False)
    return path


def test_summary_of_a_tuned_store(store):
    [row] = summarize(store)
    assert row["key"] == Problem.from_sizes(16, 16, 32, "fp16").key
    assert row["best"] and row["best_ms"] > 0 and row["aten_ms"] > 0
    assert row["speedup"] == pytest.approx(row["aten_ms"] / row["best_ms"])
    assert set(row["families"]) == {"aten", "triton_mm"} and row["failed"] == 0
    assert row["measured"] == sum(row["statuses"].values())
    md = markdown([row])
    [table] = [t for t in md_tables(md) if t and "problem" in t[0]]
    assert [r["problem"] for r in table][:1] and "geomean speedup" in md


def test_cli_report_store(store, tmp_path, capsys):
    out = tmp_path / "summary.json"
    assert cli.main(["report", "--store", str(store), "--json", str(out)]) == 0
    assert any(t and "problem" in t[0] for t in md_tables(capsys.readouterr().out))
    assert json.loads(out.read_text())["problems"][0]["best"]
    assert cli.main(["report", "--store", str(tmp_path / "none.sqlite")]) == 2
    assert "no results store" in capsys.readouterr().err


def test_report_store_never_writes_over_its_inputs(store, tmp_path, capsys):
    """``report --store S --json S`` (or ``--run-summary S``) replaced the results store, every
    measurement, with the summary JSON; ``--run-summary`` naming ``--tune-json`` replaced that
    run's JSON. Each is one line, rc 2, and the files are as they were."""
    import shutil
    s = tmp_path / "s.sqlite"
    shutil.copy(store, s)
    tj = tmp_path / "tune.json"
    tj.write_text("{}")
    before = s.read_bytes(), tj.read_bytes()
    for extra in (["--json", str(s)], ["--run-summary", str(s)],
                  ["--run-summary", str(tj), "--tune-json", str(tj), "--suite", "smoke"]):
        assert cli.main(["report", "--store", str(s), *extra]) == 2, extra
        err = capsys.readouterr().err
        assert "one file" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert (s.read_bytes(), tj.read_bytes()) == before, extra


def test_run_summary_of_the_committed_h200_run_is_the_committed_file(tmp_path, capsys):
    """report --store --run-summary (what scripts/summarize_store.py wrote): the committed
    H200 run's store gives back its committed tune-summary.json, which --tune-run renders."""
    import gzip

    run = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "2026-11-21-h200-public-full"
    store = tmp_path / "s.sqlite"
    store.write_bytes(gzip.decompress((run / "store.sqlite.gz").read_bytes()))
    out = tmp_path / "tune-summary.json"
    assert cli.main(["report", "--store", str(store), "--run-summary", str(out),
                     "--tune-json", str(run / "tune-run.json")]) == 0
    assert json.loads(out.read_text()) == json.loads((run / "tune-summary.json").read_text())
    text = capsys.readouterr().out
    assert text.splitlines()[0].split()[:3] == ["group", "name", "best"]
    assert any(line.startswith("geomean speedup over aten, splitk:") for line in text.splitlines())


def test_run_summary_refuses_a_store_of_two_run_contexts(tmp_path, capsys):
    """A run summary pairs each problem's best with its cuBLAS time: rows of two GPUs would pair
    one GPU's best with the other's cuBLAS (an H200 kernel over an H100 cuBLAS: a made-up speedup)."""
    from gemmtune.store import ResultRow, ResultStore, RunContext

    key = Problem.from_sizes(64, 64, 64, "bf16").key

    def row(cid, ms):
        return ResultRow(problem_key=key, choice_id=cid, family=cid.split(":")[0], status="ok", device_ms=ms,
                         eager_ms=None, rel_err=None, m=64, n=64, k=64, dtype="bfloat16", out_dtype="bfloat16",
                         layout="row/row", aligned=True)
    path = tmp_path / "two.sqlite"
    with ResultStore(path) as st:
        st.record_many(RunContext("NVIDIA H100 80GB HBM3", "9.0", "2.11", "3.6.0", "0.1"), [row("aten", 0.010)])
        st.record_many(RunContext("NVIDIA H200", "9.0", "2.11", "3.6.0", "0.1"),
                       [row("aten", 0.008), row("triton_mm:BM16-BN16-BK16-S1-W2-G1", 0.005)])
    assert cli.main(["report", "--store", str(path), "--run-summary", str(tmp_path / "s.json")]) == 2
    err = capsys.readouterr().err
    assert "2 run contexts" in err and "NVIDIA H100" in err and "NVIDIA H200" in err
    assert {r["device"] for r in summarize(path)} == {"NVIDIA H100 80GB HBM3", "NVIDIA H200"}  # apart: fine
