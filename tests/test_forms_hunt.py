"""Defects found by an adversarial hunt over triton_static's K-loop forms (configs.StaticConfig.form:
carried, indexed ``-IX``, indexed_wrap ``-IXW``). Each test fails on the tree it was written
against; none needs a GPU or a worker process (CPU, seconds).

1. A model-ranked plan whose k covers every candidate (``benchmark_space`` of at least the
   space's size, or 'DEFAULT' over the default space) benchmarks the whole space, yet neither
   times the first tile pick's other forms (plan.static_forms) nor asks for the post-sweep
   refinement (Planned.refine, plan.refine_forms): the forms are timed with k = 20 and never
   with k = 30 on the same problem.
2. The cluster tuner (gemmtune.cluster.tune_cluster, ``tune(cluster=...)``) plans "exactly as
   tune does" but ignores Planned.refine: a whole-space sweep on the cluster never times the
   fastest tile's other forms, which a plain tune does (and picks).
3. The tuner's plain progress lines count the refined forms past the shape's total
   ("67/65").
4. The Inductor export writes one identical triton::mm config per form (and per triton_mm
   twin) of one tile: a merged table's entry became the same config four times over.
"""

from __future__ import annotations

import re
import types

import pytest

import gemmtune

from gemmtune.configs import Choice
from gemmtune.device import DeviceInfo
from gemmtune.problem import Problem
from gemmtune.store import ResultStore, RunContext
from gemmtune.table import LookupTable, TableChoice
from gemmtune.tuning.plan import CandidatePlan, as_shapes
from test_tuning import FormsPool, form_ms

H100 = DeviceInfo.lookup("h100")
FORM_SUFFIXES = ("-IX", "-IXW")


class ByIndex:
    """A ranking model that ranks the candidates in the order given."""

    def predict(self, problem, choices):
        return list(range(len(choices)))


def _forms(choices) -> list[str]:
    return [c.id for c in choices if c.family == "triton_static" and c.config.form != "carried"]


# ------------------------------------------------------------------ 1. k covering the whole space
@pytest.mark.parametrize("problem, bspace, space", [
    (Problem.from_sizes(333, 4097, 1025, "bf16"), 1000, "default"),
    (Problem.from_sizes(333, 4097, 1025, "bf16"), "DEFAULT", "default"),
    (Problem.from_sizes(17, 33, 31, "fp16"), 30, "default"),  # k = 20 times the forms, 30 does not
], ids=["k1000", "DEFAULT", "small-k30"])
def test_a_model_k_that_covers_the_whole_space_still_times_the_other_forms(problem, bspace, space):
    plan = CandidatePlan(("triton_mm", "triton_static"), space, H100, bspace=bspace, ranker=ByIndex())
    planned = plan(problem)
    assert any(c.family == "triton_static" for c in planned.choices)  # unaligned: static serves it
    # Either the forms of the first tile pick are listed (as for a smaller k), or the sweep of this
    # whole space is refined afterwards (as for benchmark_space='SAME'). Today: neither.
    assert _forms(planned.choices) or planned.refine, \
        f"{len(planned.choices)} candidates, no triton_static form and refine={planned.refine}"


def test_the_forms_are_timed_for_every_k_once_they_are_for_a_smaller_one():
    p = Problem.from_sizes(17, 33, 31, "fp16")
    timed = {}
    for k in (3, 20, 30):
        planned = CandidatePlan(("triton_mm", "triton_static"), "default", H100, bspace=k, ranker=ByIndex())(p)
        timed[k] = bool(_forms(planned.choices)) or planned.refine
    assert timed == {3: True, 20: True, 30: True}


# ------------------------------------------------------------------ 2. the cluster tuner
INFO = {"device_name": "NVIDIA H100 80GB HBM3", "capability": "9.0", "torch": "2.11.0", "triton": "3.6.0",
        "gemmtune": gemmtune.__version__}  # the driver's: cluster.py refuses workers on another


def _form_times(task: dict) -> dict:
    """A cluster task (cluster.run_task's reply) timed as tests/test_tuning.py's FormsPool (form_ms)."""
    res = [[pk, cid, {"status": "ok", "device_ms": form_ms(cid)}] for pk, cid in task["items"]]
    return {"worker": "fake", "info": INFO, "seconds": 0.0, "results": res}


class _Done:
    def __init__(self, value):
        self.value = value

    def result(self):
        return self.value

    def done(self):
        return True

    def cancel(self):
        pass

    def add_done_callback(self, fn):
        fn(self)


class _Client:
    """Runs each submitted task at once, in this process (no Dask)."""

    def submit(self, fn, payload, **kw):
        return _Done(fn(payload))

    def subscribe_topic(self, topic, handler):  # the results come in each task's reply only
        pass


def test_a_cluster_sweep_times_the_fastest_tiles_other_forms_as_tune_does(monkeypatch, tmp_path):
    import gemmtune.cluster as cl

    monkeypatch.setattr(cl, "_distributed", lambda: types.SimpleNamespace(Client=_Client))
    ctx = RunContext(INFO["device_name"], INFO["capability"], INFO["torch"], INFO["triton"], INFO["gemmtune"])
    monkeypatch.setattr(cl, "start_workers",
                        lambda client, **kw: (types.SimpleNamespace(name="fake"), ctx, ["fake"], {}))
    odd = Problem.from_sizes(96, 50257, 768, "bf16")  # unaligned B rows, odd N along them
    r = cl.tune_cluster([odd], cluster=_Client(), families=["triton_mm", "triton_static"],
                        store=tmp_path / "s.sqlite", progress=False, device="h100", task_fn=_form_times)
    listed = [c.id for c in CandidatePlan(("triton_mm", "triton_static"), "default", H100)(odd).choices]
    fastest = min(c for c in listed if c.startswith("triton_static:"))
    with ResultStore(tmp_path / "s.sqlite") as db:
        timed = set(db.done(ctx, odd.key))
    # A plain tune of the same space times f"{fastest}-IX" / "-IXW" after the sweep and picks the
    # -IX form (tests/test_tuning.py::test_a_whole_space_sweep_times_the_fastest_tiles_other_forms).
    assert {f"{fastest}-IX", f"{fastest}-IXW"} <= timed, f"{r.measured} timed, no form of {fastest}"
    assert r.shapes[0].best == f"{fastest}-IX"


# ------------------------------------------------------------------ 3. progress past the total
def test_the_progress_lines_never_count_past_a_shapes_total(store, capsys):
    from gemmtune.tuning.executor import Executor
    from gemmtune.tuning.recorder import Recorder
    from gemmtune.tuning.tuner import Tuner

    odd = Problem.from_sizes(96, 50257, 768, "bf16")
    plan = CandidatePlan(("triton_mm", "triton_static"), "default", H100)
    pool = FormsPool()
    Tuner(progress=True, runoff=0).sweep(as_shapes([odd]), plan, Executor(pool),
                                         Recorder(store, RunContext("cpu", "0.0", "2.6", "3.2", "0.1")))
    assert any(t["choice"].endswith("-IX") for t in pool.tasks)  # the refinement ran
    counts = [tuple(map(int, m)) for m in re.findall(r": (\d+)/(\d+) \(", capsys.readouterr().err)]
    assert counts and all(done <= total for done, total in counts), counts


@pytest.fixture
def store(tmp_path):
    db = ResultStore(tmp_path / "s.sqlite")
    yield db
    db.close()


# ------------------------------------------------------------------ 4. Inductor export duplicates
def test_the_inductor_export_lists_one_tiles_forms_once():
    from gemmtune.inductor_export import convert

    p = Problem.from_sizes(333, 4097, 1025, "bf16")
    tile = "BM64-BN128-BK64-S4-W4-G8"
    ids = [f"triton_static:{tile}-IX", f"triton_static:{tile}-IXW", f"triton_static:{tile}", f"triton_mm:{tile}",
           "aten"]
    table = LookupTable({}, {p.key: [TableChoice(Choice.parse(c), 0.01 * (i + 1)) for i, c in enumerate(ids)]})
    (configs,) = convert(table).table.values()
    # Inductor compiles and benchmarks every config of an entry: one kernel four times over here.
    assert len(configs) == len({tuple(sorted(c.items())) for c in configs}), configs
