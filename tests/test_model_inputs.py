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
import re
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
    text = gzip.decompress(RANKER.with_name("nvidia-h200-rank.lgbm.txt.gz").read_bytes()).decode()
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


# ------------------------------------------------------------------ a hand-edited ranker booster
# Each edit keeps the JSON's sha256 in step with the booster (so the stale-file check passes): the
# booster text itself must be judged before lightgbm or the numpy predictor reads it.


def _tree_field(text: str, tree: int, field: str, edit) -> str:
    """``text`` with the ``field=`` line of tree ``tree`` replaced by ``edit(its values)``."""
    head, sep, rest = text.partition(f"\nTree={tree}\n")
    block, nxt, tail = rest.partition("\nTree=")
    lines = block.split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith(field + "="))
    lines[at] = field + "=" + " ".join(edit(lines[at].split("=", 1)[1].split()))
    return head + sep + "\n".join(lines) + nxt + tail


def _put(index: int, value: str):
    def edit(values):
        return values[:index] + [value] + values[index + 1:]
    return edit


def _resized(text: str) -> str:
    """``text`` with its header's tree_sizes recomputed: an editor who also mended LightGBM's byte
    offsets (each tree's bytes from its 'Tree=' line to the next tree or 'end of trees')."""
    trees_at = text.index("\nTree=") + 1
    trees, end, tail = text[trees_at:].partition("end of trees")
    sizes = " ".join(str(len(b.encode())) for b in re.split(r"(?=^Tree=)", trees, flags=re.M) if b)
    head = re.sub(r"^tree_sizes=.*$", "tree_sizes=" + sizes, text[:trees_at], count=1, flags=re.M)
    return head + trees + end + tail


def _first_trees(text: str, n: int) -> str:
    """``text`` with only its first ``n`` trees, still ended by 'end of trees' (header kept)."""
    trees, end, tail = text.partition("\nend of trees")
    return "\nTree=".join(trees.split("\nTree=")[:n + 1]) + end + tail


def _more_features(text: str) -> str:
    """A header of 60 features, consistent in itself (names and infos too), where the JSON says 49."""
    text = text.replace("\nmax_feature_idx=48\n", "\nmax_feature_idx=59\n", 1)
    text = re.sub(r"^(feature_names=.*)$", lambda m: m[1] + "".join(f" Column_{i}" for i in range(49, 60)),
                  text, count=1, flags=re.M)
    return re.sub(r"^(feature_infos=.*)$", lambda m: m[1] + " none" * 11, text, count=1, flags=re.M)


# (edit of the shipped H200 booster, what the one-line error must name). Tree 3 of that booster
# has 127 leaves (31 before the 2026-12-03 retrain); its split_feature starts 46 39, its left_child
# 12 2, its right_child 1 5 6 8 13 7 9 32 15: the edits that keep every byte count leave LightGBM's
# tree_sizes offsets valid (the others mend them, _resized). The comments say what each edit did
# before the check (lightgbm 4.7, numpy_predict or not; written for the 31-leaf tree).
BOOSTER_EDITS = {
    # numpy: a bare IndexError when ranking; lightgbm: loads, and predicts from beyond the row
    "split_feature_beyond_the_features": (lambda t: _tree_field(t, 3, "split_feature", _put(0, "49")),
                                          "tree 3 splits on feature 49"),
    # numpy: ranks with 150 of the 300 trees, silently; lightgbm: aborts the process (SIGABRT: its
    # tree_sizes offsets point past the trees, Log::Fatal inside an OpenMP loop)
    "cut_in_half": (lambda t: _first_trees(t, 150), "tree_sizes"),
    # both rank with 150 of the 300 trees the JSON records, silently
    "cut_in_half_offsets_mended": (lambda t: _resized(_first_trees(t, 150)), "150 trees"),
    # numpy: loads the broken last tree; lightgbm: SIGSEGV
    "cut_inside_a_tree": (lambda t: t[:len(t) // 2], "cut short"),
    # numpy: every later tree's leaves (thresholds) shift by one, silently; lightgbm: SIGABRT
    "leaf_value_one_short": (lambda t: _resized(_tree_field(t, 3, "leaf_value", lambda v: v[:-1])),
                             "tree 3: leaf_value has 126 values"),
    "threshold_one_short": (lambda t: _resized(_tree_field(t, 3, "threshold", lambda v: v[:-1])),
                            "tree 3: threshold has 125 values"),
    # both load; a row that reaches the leaf scores NaN
    "leaf_value_nan": (lambda t: _resized(_tree_field(t, 3, "leaf_value", _put(0, "nan"))),
                       "tree 3: leaf_value"),
    # numpy reads leaf 139 of 127 (39 of 31 then), another tree's leaf, silently; lightgbm loads it too
    "child_beyond_the_leaves": (lambda t: _resized(_tree_field(t, 3, "right_child", _put(8, "-140"))),
                                "tree 3: its child"),
    # node 1 is its own left child: both load, and prediction (numpy's and lightgbm's) never ends
    "child_loop": (lambda t: _tree_field(t, 3, "left_child", _put(1, "1")), "tree 3: its child"),
    # the same values, one byte longer: numpy reads it fine, lightgbm: SIGABRT (tree_sizes)
    "offsets_stale": (lambda t: _tree_field(t, 3, "shrinkage", lambda v: ["0.050"]), "tree_sizes"),
    # numpy loads it; lightgbm raises 'Wrong size of feature_names' (a ModelError already)
    "feature_names_one_more": (lambda t: re.sub(r"^(feature_names=.*)$", r"\1 Column_49", t, count=1, flags=re.M),
                               "feature_names"),
    # refused already, after lightgbm had read it and naming the JSON, not the booster file
    "more_features_than_the_json": (_more_features, "60 features"),
}


class _LightGBMSawIt(BaseException):
    """Raised by a stand-in lightgbm.Booster: a BaseException, so that from_text's ``except
    Exception`` (for LightGBM's own errors) does not turn it into a ModelError."""


@pytest.mark.parametrize("predictor", ["numpy", "lightgbm"])
@pytest.mark.parametrize("edit", list(BOOSTER_EDITS))
def test_edited_ranker_booster_is_refused_before_any_predictor_reads_it(tmp_path, monkeypatch, edit, predictor):
    """A booster edited and its sha256 updated in the JSON passed the stale-file check
    (regressors.py from_text), and then the numpy reader raised a bare IndexError, looped, or
    ranked silently with the wrong trees or leaves, while lightgbm read past its arrays or aborted
    the whole process (Log::Fatal inside its OpenMP tree parser: 'terminate called without an
    active exception'). Expected: ModelError, one line naming the booster file and the problem,
    raised before lightgbm is handed the text (here a stand-in that fails the test if called)."""
    edit_booster, problem = BOOSTER_EDITS[edit]
    path = _edited_ranker(tmp_path, edit_booster=edit_booster)
    if predictor == "lightgbm":
        lightgbm = pytest.importorskip("lightgbm")

        def booster(*_a, **_k):
            raise _LightGBMSawIt(f"lightgbm was handed the {edit} booster")
        monkeypatch.setattr(lightgbm, "Booster", booster)
    with pytest.raises(ModelError) as e:
        load_model(path, "h200", triton_version="3.6.0", numpy_predict=predictor == "numpy")
    msg = str(e.value)
    assert "m.lgbm.txt" in msg and problem in msg and "\n" not in msg, msg


@pytest.mark.parametrize("predictor", ["numpy", "lightgbm"])
def test_unedited_ranker_booster_copy_loads(tmp_path, predictor):
    """The checks above refuse nothing LightGBM wrote: the shipped booster, copied (and its
    tree_sizes recomputed by the tests' own rule, which must leave it unchanged), loads."""
    if predictor == "lightgbm":
        pytest.importorskip("lightgbm")
    text = gzip.decompress(RANKER.with_name("nvidia-h200-rank.lgbm.txt.gz").read_bytes()).decode()
    assert _resized(text) == text
    path = _edited_ranker(tmp_path, edit_booster=_resized)
    m = load_model(path, "h200", triton_version="3.6.0", numpy_predict=predictor == "numpy")
    assert m.regressor.booster.num_trees() == 300


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
