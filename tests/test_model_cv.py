"""gemmtune train --cv K --ship PATH (gemmtune.model.cv): cross-validation by shape, the choice
of kind, and the shipped file with its cross-validation in the provenance."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gemmtune import cli
from gemmtune.model import cv as cvmod
from gemmtune.model import load_model
from gemmtune.model.data import load_dataset

SLICE = Path(__file__).parent / "data" / "h200_collect_slice.csv.gz"  # 40 collected H200 shapes


def test_folds_hold_every_shape_once_and_spread_each_group():
    shapes = {(i, i, i) for i in range(1, 31)}
    groups = {s: ("a" if s[0] <= 20 else "b") for s in shapes}
    folds = cvmod.folds_by_group(shapes, groups, 5, seed=3)
    assert sorted(s for f in folds for s in f) == sorted(shapes)
    assert all(sum(groups[s] == "a" for s in f) == 4 and sum(groups[s] == "b" for s in f) == 2 for f in folds)
    assert folds == cvmod.folds_by_group(shapes, groups, 5, seed=3)  # seeded
    with pytest.raises(ValueError, match="at least 2 folds"):
        cvmod.folds_by_group(shapes, groups, 1)


def test_shape_groups_are_the_collection_plans():
    groups = cvmod.shape_groups()
    assert len(groups) >= 400 and set(groups.values()) == {"llm", "decode", "splitk", "odd", "square", "random"}


@pytest.mark.slow  # three gbt fits and one on everything (~8 s)
def test_train_cv_ships_the_chosen_kind_with_its_evaluation(tmp_path, capsys):
    out = tmp_path / "m.json"
    rc = cli.main(["train", "--store", str(SLICE), "--cv", "3", "--kinds", "gbt", "--ship", str(out), "--force",
                   "--report", str(tmp_path / "cv")])
    text = capsys.readouterr().out
    assert rc == 0 and out.is_file(), text
    readme = (tmp_path / "cv" / "README.md").read_text()
    assert "| gbt | triton_mm |" in readme and "Shipped: `" in readme
    assert json.loads((tmp_path / "cv" / "cv.json").read_text())["shipped"]["path"] == str(out)
    assert "3-fold cross-validation by shape: 40 shapes" in text and "chosen: gbt" in text
    prov = json.loads(out.read_text())["provenance"]
    ev = prov["evaluation"]
    assert ev["kinds_compared"] == ["gbt"] and ev["cv"]["shapes"] == 40 and ev["cv_analytic"]["shapes"] == 40
    assert prov["training_set"]["shapes"] == 40 and "all 40 shapes" in prov["training_set"]["which"]
    data = load_dataset(SLICE)
    model = load_model(out, data.context["device_name"], triton_version=data.context["triton_version"])
    g = data.groups[0]
    assert len(model.predict(g.problem, g.choices)) == len(g.choices)


def test_ship_is_refused_when_the_kind_ranks_worse_than_analytic(tmp_path, capsys, monkeypatch):
    def fake_cv(data, *, kinds, folds, **kw):
        worse = {"shapes": 40, "spearman_mean": 0.5, "top1_regret_geomean": 0.2, "top1_within_10pct": 0.5,
                 "top1_found": 0.3, "top1_regret_mean": 0.3, "top5_regret_geomean": 0.1}
        better = dict(worse, top1_found=0.6, top1_regret_mean=0.1)
        return {"folds": folds, "seed": 0, "kinds": list(kinds), "shapes": 40, "scored": 40,
                "summaries": {**{k: worse for k in kinds}, "analytic": better}, "fit_s": {k: 0.1 for k in kinds}}

    monkeypatch.setattr(cvmod, "cross_validate", fake_cv)
    out = tmp_path / "m.json"
    rc = cli.main(["train", "--store", str(SLICE), "--cv", "--kind", "mlp", "--ship", str(out)])
    text = capsys.readouterr().out
    assert rc == 1 and not out.exists() and "not shipped" in text and "5-fold" in text and "chosen: mlp" in text
    assert cli.main(["train", "--store", str(SLICE), "--cv", "--compare", str(tmp_path / "c")]) == 2


def test_per_family_scores_and_the_report(tmp_path):
    """score() ranks within each family too; family_summaries counts where each family holds the
    best measured choice and the model's first; write_report puts both in README.md and cv.json."""
    from gemmtune.device import DeviceInfo
    from gemmtune.model import AnalyticModel

    data = load_dataset(SLICE).ranked()
    per = cvmod.score(AnalyticModel(DeviceInfo.lookup("h200")), data)
    fams = cvmod.family_summaries(per)
    assert {"triton_mm", "splitk"} <= set(fams)
    assert sum(f["best_is"] for f in fams.values()) == len(per) == sum(f["top1_is"] for f in fams.values())
    assert fams["triton_mm"]["shapes"] == sum("triton_mm" in m["families"] for m in per) > 0
    summ = {"shapes": len(per), "spearman_mean": 0.5, "top1_within_10pct": 0.5, "top1_regret_geomean": 0.1}
    res = {"folds": 2, "seed": 0, "kinds": ["gbt"], "shapes": 40, "scored": len(per), "min_choices": 20,
           "summaries": {"gbt": summ, "analytic": summ}, "families": {"gbt": fams, "analytic": fams},
           "fit_s": {"gbt": 1.0}}
    readme = cvmod.write_report(res, tmp_path / "r", command="gemmtune train ...", data=data).read_text()
    assert "| analytic | splitk |" in readme and "Reproduce: `gemmtune train ...`" in readme
    assert json.loads((tmp_path / "r" / "cv.json").read_text())["families"]["gbt"]["triton_mm"]["best_is"] >= 0
    assert cli.main(["train", "--store", str(SLICE), "--report", str(tmp_path / "x")]) == 2  # needs --cv


@pytest.mark.slow  # three lgbm_rank fits on 40 shapes (~5 s)
def test_train_policies_replays_the_selection_policies_per_fold(tmp_path, capsys):
    pytest.importorskip("lightgbm")
    rc = cli.main(["train", "--store", str(SLICE), "--cv", "3", "--kind", "lgbm_rank", "--policies",
                   str(tmp_path / "p")])
    assert rc == 0
    doc = json.loads((tmp_path / "p" / "policies.json").read_text())
    assert doc["kind"] == "lgbm_rank" and doc["folds"] == 3 and "all" in doc["summaries"]
    assert {"k=1", "k=2", "diverse=2", "oracle-family"} <= set(doc["summaries"]["all"])
    assert len({r["key"] for r in doc["rows"]}) == len(doc["rows"])  # each problem scored once
    assert "| diverse=2 |" in (tmp_path / "p" / "README.md").read_text()
    assert cli.main(["train", "--store", str(SLICE), "--policies", str(tmp_path / "q"), "--ship", "x"]) == 2


def _as_other_gpu(data, name="NVIDIA H100 80GB HBM3", **ctx):
    from gemmtune.model.data import Dataset
    return Dataset(list(data.groups), {**data.context, "device_name": name, **ctx}, "other.csv", [])


def test_pool_marks_each_problem_with_the_gpu_that_measured_it_and_refuses_what_does_not_rank_alike():
    from gemmtune.device import DeviceInfo
    from gemmtune.model.data import ModelError, pool

    data = load_dataset(SLICE)
    other = _as_other_gpu(data.subset(sorted(data.shapes)[:10]))
    p = pool(data, [other])
    assert len(p.groups) == len(data.groups) + len(other.groups)
    assert [g.device for g in p.groups[:len(data.groups)]] == [None] * len(data.groups)
    assert {g.device for g in p.groups[len(data.groups):]} == {DeviceInfo.lookup("h100")}
    assert len(p.native().groups) == len(data.groups) and p.context == data.context
    assert "pooled 10 problems measured on NVIDIA H100 80GB HBM3" in p.notes[-1] and "(NVIDIA H100" in p.source
    # a store of the same GPU is native: merged, scored like the rest
    assert len(pool(data, [_as_other_gpu(other, name=data.context["device_name"])]).native().groups) == len(p.groups)
    for bad, why in ((_as_other_gpu(other, name="Some GPU"), "not a built-in GPU"),
                     (_as_other_gpu(other, capability="8.0"), "compute capability 8.0"),
                     (_as_other_gpu(other, triton_version="3.2.0"), "triton 3.2.0")):
        with pytest.raises(ModelError, match=why):
            pool(data, [bad])


def test_training_featurizes_a_pooled_problem_with_its_own_gpu():
    """The analytic estimate is a feature: the same problem measured on an H100 carries the
    H100's bandwidth in it, not the target's."""
    from gemmtune.device import DeviceInfo
    from gemmtune.model import training
    from gemmtune.model.analytic import AnalyticModel
    from gemmtune.model.data import Dataset, pool
    from gemmtune.model.features import featurize

    data = load_dataset(SLICE)
    g = data.groups[0]
    one = Dataset([g], dict(data.context), "t", [])
    p = pool(one, [_as_other_gpu(one)])
    h200, h100 = DeviceInfo.lookup("h200"), DeviceInfo.lookup("h100")
    X, y, gid = training._matrix(p, h200, AnalyticModel(h200))
    n = len(g.choices)
    assert list(gid) == [0] * n + [1] * n
    assert (X[:n] == featurize(g.problem, g.choices, h200)).all()
    assert (X[n:] == featurize(g.problem, g.choices, h100)).all() and not (X[:n] == X[n:]).all()


def test_cross_validation_trains_on_pooled_problems_but_scores_only_its_own(monkeypatch):
    """Each fold trains on the pooled problems whose shape it does not hold out (no shape measured
    on the other GPU leaks into its own evaluation) and scores only the target GPU's problems."""
    from gemmtune.device import DeviceInfo
    from gemmtune.model import AnalyticModel
    from gemmtune.model.data import pool

    data = load_dataset(SLICE)
    p = pool(data, [_as_other_gpu(data)])
    seen = []

    def fake_fit(train_d, **kw):
        seen.append(train_d)
        return AnalyticModel(DeviceInfo.lookup("h200")), {}

    monkeypatch.setattr(cvmod, "fit", fake_fit)
    res = cvmod.cross_validate(p, kinds=["gbt"], folds=4, groups={})
    assert res["scored"] == len(data.ranked().groups)
    for fold_train in seen:
        own = {g.shape for g in fold_train.groups if g.device is None}
        other = {g.shape for g in fold_train.groups if g.device is not None}
        assert own == other and 0 < len(own) < len(data.shapes)


def test_train_pool_store_is_refused_where_only_the_store_is_read(tmp_path):
    for extra in (["--compare", str(tmp_path / "c")], ["--policies", str(tmp_path / "p")]):
        assert cli.main(["train", "--store", str(SLICE), "--pool-store", str(SLICE), *extra]) == 2


def _h100_copy(tmp_path, n=20):
    """A store file of ``n`` of the slice's problems, as if measured on an H100."""
    import gzip

    other = tmp_path / "h100.csv.gz"
    with gzip.open(SLICE, "rt") as f, gzip.open(other, "wt") as g:
        g.write(f.readline())
        rows = f.readlines()
        keys = sorted({r.split(",")[5] for r in rows})[:n]
        g.writelines(r.replace("NVIDIA H200,", "NVIDIA H100 80GB HBM3,", 1) for r in rows if r.split(",")[5] in keys)
    return other


@pytest.mark.slow  # three gbt fits on 40 + 20 shapes and one on everything
def test_train_pool_store_ships_a_model_for_the_target_gpu_with_the_pool_in_its_provenance(tmp_path, capsys):
    other = _h100_copy(tmp_path)
    out = tmp_path / "m.json"
    rc = cli.main(["train", "--store", str(SLICE), "--pool-store", str(other), "--cv", "3", "--kinds", "gbt",
                   "--ship", str(out), "--force"])
    text = capsys.readouterr()
    assert rc == 0 and out.is_file(), text.out
    assert "pooled 20 problems measured on NVIDIA H100 80GB HBM3" in text.err
    assert "40 problems scored" in text.out  # the slice's own problems only
    prov = json.loads(out.read_text())["provenance"]
    ts = prov["training_set"]
    assert prov["device_name"] == "NVIDIA H200" and ts["pooled"] == {"NVIDIA H100 80GB HBM3": 20}
    assert ts["problems"] == len(load_dataset(SLICE).groups) + 20 and "(NVIDIA H100 80GB HBM3)" in ts["source"]


@pytest.mark.slow  # one gbt fit
def test_plain_train_with_a_pool_scores_only_the_stores_own_held_out_problems(tmp_path):
    from gemmtune.model import train
    from gemmtune.model.data import split_by_shape

    other = _h100_copy(tmp_path, n=40)  # every problem of the slice twice: once per GPU
    model, rep = train(SLICE, exclude_suites=(), kind="gbt", pool_stores=[other])
    _, te = split_by_shape(load_dataset(SLICE), 0.2, 0)
    assert rep["test_problems"] == len(te.ranked().groups)  # the H100 twins of those shapes: neither side
    assert rep["train_problems"] == 2 * (len(load_dataset(SLICE).groups) - len(te.groups))
    assert model.provenance["training_set"]["pooled"] == {"NVIDIA H100 80GB HBM3": rep["train_problems"] // 2}
