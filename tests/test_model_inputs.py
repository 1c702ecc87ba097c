"""The model / predict / report paths on odd inputs (session 45's CPU hunt): each test failed
before its fix and names what it expects instead:
a one-line error naming the file and the problem (or a trust the domain guard can defend),
never a silent wrong ranking, a process abort or a traceback from deep inside.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import math
from pathlib import Path

import pytest

import gemmtune
from gemmtune import cli
from gemmtune.device import DeviceInfo
from gemmtune.model import ModelError, load_model
from gemmtune.problem import Problem
from gemmtune.store import ResultRow, ResultStore, RunContext
from gemmtune.tune import candidates

MODELS = Path(gemmtune.__file__).parent / "data" / "models"
RANKER = MODELS / "nvidia-h200-rank.json"
SAMPLE = Path(__file__).parent / "data" / "model_sample.csv.gz"
BENCH = Path(__file__).parent / "data" / "bench_fixture.json"
H200 = DeviceInfo.lookup("h200")


def _edited_ranker(tmp_path: Path, edit_booster=None, edit_json=None) -> Path:
    """A copy of the shipped H200 ranker, its booster text edited by ``edit_booster`` and its
    JSON by ``edit_json``; the JSON's sha256 is updated to the edited booster (so the stale-file
    check passes and the edit itself is what loading must judge)."""
    doc = json.loads(RANKER.read_text())
    text = RANKER.with_name("nvidia-h200-rank.lgbm.txt").read_text()
    if edit_booster is not None:
        text = edit_booster(text)
    (tmp_path / "m.lgbm.txt").write_text(text)
    doc["params"]["booster_file"] = "m.lgbm.txt"
    doc["params"]["sha256"] = hashlib.sha256(text.encode()).hexdigest()
    if edit_json is not None:
        edit_json(doc)
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    return path


# ------------------------------------------------------------------ domain guard


def test_bmm_problem_gets_no_learned_trust_from_a_model_trained_on_mm_only():
    """The shipped H200 ranker was trained on mm problems only (its domain has no batch), yet a
    bmm of 512 64x64x64 products is trusted fully, 'nearest training problem 0.00 log2 units
    away': the domain guard (LearnedModel.trust, learned.py:181-204) compares only M, N, K,
    dtype, layout and alignment, so the batch is ignored and the mm correction is applied to a
    problem with 512x the tiles."""
    m = load_model(RANKER, "h200", triton_version="3.6.0", numpy_predict=True)
    p = Problem.from_sizes(64, 64, 64, "bf16", op="bmm", batch=512)
    assert not any(isinstance(row[0], str) or len(row) > 5 for row in m.domain["problems"])  # no op / batch
    w, why = m.trust(p)
    assert w == 0.0, f"bmm B=512 trusted with weight {w}: {why}"


# ------------------------------------------------------------------ a hand-edited ranker JSON


@pytest.mark.parametrize("scale", [float("nan"), -1.0])
def test_ranker_json_with_a_bad_scale_is_refused(tmp_path, scale):
    """The ranker's ``scale`` lives in the JSON, outside the booster's sha256, and is read with a
    bare float() (regressors.py:465). A NaN scale made every seen choice's key NaN (94 of 108
    candidates non-finite on 64x64x4096: the plan then ranks them last, the learned ranking
    silently dropped); a negative one reverses the ranking. Training only ever writes a finite
    scale > 0 (_calibrate returns 1.0 otherwise). Expected: ModelError naming the file."""
    def edit(doc):
        doc["params"]["scale"] = scale
    path = _edited_ranker(tmp_path, edit_json=edit)
    p = Problem.from_sizes(64, 64, 4096, "bf16")
    cands = candidates(p, list(gemmtune.families()), "default", H200)
    with pytest.raises(ModelError, match="m.json"):
        m = load_model(path, "h200", triton_version="3.6.0", numpy_predict=True)
        est = m.predict(p, cands)
        # (what happens today: a ranking of NaNs, or the reverse of the file's)
        assert all(math.isfinite(x) for x in est) and scale > 0


# ------------------------------------------------------------------ predict --eval / report


def test_predict_eval_on_a_store_with_no_usable_problem_is_one_line(tmp_path, capsys):
    """A store whose ok rows all carry a choice id this gemmtune cannot parse (e.g. a family of
    a newer version): load_dataset drops every problem into ``notes`` and returns no groups,
    evaluate's summary is {"shapes": 0}, and _predict_eval (cli/model.py:97) raised
    KeyError: 'choices'. Expected: exit 2 with one line naming the store."""
    with gzip.open(SAMPLE, "rt", newline="") as f:
        rows = list(csv.DictReader(f))
    keys = sorted({r["problem_key"] for r in rows})[:3]
    out = tmp_path / "newer.csv"
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, list(rows[0]))
        w.writeheader()
        w.writerows(dict(r, choice_id="newfamily:X1", family="newfamily") for r in rows if r["problem_key"] in keys)
    rc = cli.main(["predict", "--eval", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and "newer.csv" in err and len(err.strip().splitlines()) == 1, err


def test_report_store_with_a_zero_ms_row_does_not_crash(tmp_path, capsys):
    """ResultStore accepts an ok row of 0.0 ms and store.best returns it (core.py:200 keeps
    device_ms >= 0), but report.store.summarize divides cuBLAS's time by it (report/store.py:57):
    `gemmtune report --store` ended in ZeroDivisionError with a traceback (and a negative time
    gives 'error: math domain error' from markdown's geomean, naming neither file nor row)."""
    ctx = RunContext("NVIDIA H100 80GB HBM3", "9.0", "2.6.0", "3.2.0", "0.1.0")
    key = "mm:M32-N32-K64:bf16->bf16:row.a/row.a"

    def row(cid, fam, ms):
        return ResultRow(problem_key=key, choice_id=cid, family=fam, status="ok", device_ms=ms, eager_ms=0.015,
                         rel_err=1e-3, m=32, n=32, k=64, dtype="bfloat16", out_dtype="bfloat16",
                         layout="row/row", aligned=True)
    path = tmp_path / "s.sqlite"
    with ResultStore(path) as s:
        s.record(ctx, row("aten", "aten", 0.01))
        s.record(ctx, row("triton_mm:BM32-BN32-BK32-S2-W4-G8", "triton_mm", 0.0))
    rc = cli.main(["report", "--store", str(path)])
    cap = capsys.readouterr()
    assert rc in (0, 2), cap


@pytest.mark.parametrize("edit", ["no_header", "shape_without_group", "shapes_not_a_list"])
def test_report_bench_json_of_the_right_schema_but_missing_parts_is_one_line(tmp_path, capsys, edit):
    """load_bench (report/files.py:30) checks only the schema string; a bench JSON with that
    schema but no "header", a shape without "group", or "shapes" that is not a list raised
    KeyError / AttributeError from render (tracebacks out of `gemmtune report`)."""
    doc = json.loads(BENCH.read_text())
    if edit == "no_header":
        del doc["header"]
    elif edit == "shape_without_group":
        doc["shapes"][0] = {"name": "x"}
    else:
        doc["shapes"] = {"a": 1}
    path = tmp_path / "b.json"
    path.write_text(json.dumps(doc))
    rc = cli.main(["report", str(path), "--no-plots", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2 and "b.json" in err and len(err.strip().splitlines()) == 1, err
