"""``gemmtune train --threads N``: LightGBM trains on N threads (model.regressors.training_threads)."""
from __future__ import annotations

from pathlib import Path

import pytest

from gemmtune.cli import main
from gemmtune.model import regressors

SAMPLE = Path(__file__).resolve().parent / "data/model_sample.csv.gz"


def test_train_threads_reach_lightgbm(tmp_path, monkeypatch):
    pytest.importorskip("lightgbm")
    seen = []
    fit = regressors._LGBMRanker.fit

    def spy(self, *a, **kw):
        seen.append(self.threads)
        return fit(self, *a, **kw)

    monkeypatch.setattr(regressors._LGBMRanker, "fit", spy)
    rc = main(["train", "--store", str(SAMPLE), "--kind", "lgbm_rank", "--force", "--threads", "1",
               "--out", str(tmp_path / "m.json")])
    assert rc == 0 and (tmp_path / "m.json").is_file()
    assert seen and set(seen) == {1}
    # Outside the command, the default again.
    assert regressors._LGBMRanker().threads == regressors._LGBMRanker(threads=None).threads != 0
    assert regressors._TRAIN_THREADS.get() is None


def test_train_threads_refuses_zero(capsys):
    with pytest.raises(SystemExit) as e:
        main(["train", "--store", str(SAMPLE), "--threads", "0"])
    assert e.value.code == 2 and "--threads: must be >= 1" in capsys.readouterr().err
