"""A tune stopped part way (Ctrl-C in a notebook, an exception) released its claims in the store
only on the normal path: a rerun in the same process took them for another live tuner's and
waited out their expiry (session 45's CPU hunt; the test failed before)."""

from __future__ import annotations

import pytest

import gemmtune
from gemmtune.problem import Problem


# ------------------------------------------------------------------ store claims
def test_an_interrupted_tune_does_not_stall_a_rerun_in_the_same_process(tmp_path, monkeypatch):
    """Ctrl-C (or any exception) during ``gemmtune.tune`` left its claims in the store: in the same
    process (a notebook, a script that retries) the rerun, a new claim owner whose process is
    alive, took them for another live tuner's and waited for them to expire: 60 s + timeout x
    candidates (3 minutes for one candidate, about 2 hours for the smoke preset's 60)."""
    from gemmtune.tuning import recorder

    p = Problem.from_sizes(16, 16, 16, "fp16")
    store = tmp_path / "s.sqlite"

    def interrupted(self, *a, **kw):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(recorder.Recorder, "record", interrupted)
        with pytest.raises(KeyboardInterrupt):
            gemmtune.tune([p], families=["aten"], store=store, progress=False, in_process=True)

    def no_waiting(self, problem, others, measure):
        if others:
            raise AssertionError(f"the rerun waits for claims its own process left: {[c.id for _, c in others]}")
        return 0

    monkeypatch.setattr(recorder.Recorder, "await_others", no_waiting)
    r = gemmtune.tune([p], families=["aten"], store=store, progress=False, in_process=True)
    assert r.shapes[0].best == "aten"
