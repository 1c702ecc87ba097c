"""The tuner's parts alone (gemmtune.tuning): options, plan, recorder, executor, look-ahead.

None of these starts a worker: the plan runs on a built-in device, the recorder on a
temporary store, the executor on a fake pool. The whole tuner runs in test_tune.py.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future

import pytest

import gemmtune
from gemmtune.configs import AtenConfig, Choice
from gemmtune.device import DeviceInfo
from gemmtune.problem import Problem
from gemmtune.shapes import Shape
from gemmtune.store import ResultStore, RunContext
from gemmtune.table import LookupTable, TableChoice
from gemmtune.tuning.executor import Executor
from gemmtune.tuning.options import TuneOptions, option_names
from gemmtune.tuning.plan import CandidatePlan, as_shapes, candidates
from gemmtune.tuning.recorder import Recorder, write_table
from gemmtune.tuning.tuner import Lookahead, PlanAhead, Tuner

H100 = DeviceInfo.lookup("h100")
CTX = RunContext("cpu", "0.0", "2.6", "3.2", "0.1")
P = Problem.from_sizes(64, 64, 4096, "bf16")
ATEN = Choice("aten", AtenConfig())


class ByIndex:
    """A ranking model that ranks the candidates in the order given."""

    def predict(self, problem, choices):
        return list(range(len(choices)))


# ----------------------------------------------------------------------------- options
def test_options_are_the_keywords_of_tune():
    import inspect
    params = set(inspect.signature(gemmtune.tune).parameters) - {"problems"}
    assert params == option_names()


@pytest.mark.parametrize("kw, err", [
    ({"benchmark_space": "lots"}, ValueError), ({"fast": True, "benchmark_space": 5}, ValueError),
    ({"timing": "slow"}, ValueError), ({"compile_ahead": -1}, ValueError), ({"compile_ahead": True}, ValueError),
    ({"model": 3}, TypeError), ({"pdl_credit": 0.5}, ValueError), ({"pdl_credit": -0.01}, ValueError),
    ({"pdl_credit": True}, ValueError), ({"pdl_credit": 0.02, "cluster": "local:2"}, ValueError)])
def test_options_refuse_bad_values_when_made(kw, err):
    with pytest.raises(err):
        TuneOptions(**kw)


def test_options_derived_fields():
    o = TuneOptions(families=["splitk", "aten"], fast=True)
    assert o.families == ("splitk", "aten") and o.bspace == "FAST" and o.search_space == "exhaustive"
    assert TuneOptions().bspace == "SAME" and TuneOptions(benchmark_space="3").bspace == 3
    assert o.replace(fast=False).bspace == "SAME"
    with pytest.raises(ValueError, match="nosuch"):
        TuneOptions(families=["nosuch"]).check()
    with pytest.raises(AttributeError):
        o.space = "exhaustive"  # frozen


def test_tuner_takes_options_or_keywords():
    assert Tuner(seed=3).options == TuneOptions(seed=3)
    assert Tuner(TuneOptions(seed=3), fast=True).options == TuneOptions(seed=3, fast=True)


# ----------------------------------------------------------------------------- plan
def test_plan_every_candidate_without_a_model():
    plan = CandidatePlan(("decompose_k",), "default", H100)
    got = plan(P)
    assert [c.id for c in got.choices] == [c.id for c in candidates(P, ["decompose_k"], "default", H100)]
    assert got.k is None and got.why is None and plan.compiles_at_most(P) is None


def test_plan_top_k_keeps_cublas_and_says_so():
    plan = CandidatePlan(("decompose_k",), "default", H100, bspace=2, ranker=ByIndex())
    got = plan(P)
    assert [c.id for c in got.choices] == ["aten", "decompose_k:s2", "decompose_k:s4"]
    assert (got.k, got.why) == (2, "fixed") and plan.compiles_at_most(P) == 2


def test_plan_a_table_entry_fixes_the_choices():
    lut = LookupTable({}, {P.key: [TableChoice(Choice.parse("decompose_k:s8"), 0.01)]})
    plan = CandidatePlan(("triton_mm",), "default", H100, lut, bspace=1, ranker=ByIndex())
    assert [c.id for c in plan(P).choices] == ["decompose_k:s8"] and plan(P).k is None
    assert plan.compiles_at_most(P) == 1
    other = P.with_sizes(k=2048)
    assert len(plan(other).choices) == 2  # no entry: cuBLAS + the model's top 1


def test_as_shapes_names_what_is_not_a_problem():
    s = as_shapes([P, Shape("g", "n", P)])
    assert [x.name for x in s] == ["64x64x4096", "n"]
    with pytest.raises(TypeError, match=r"problems\[1\]"):
        as_shapes([P, "64x64x64"])


# ----------------------------------------------------------------------------- recorder
@pytest.fixture
def store(tmp_path):
    db = ResultStore(tmp_path / "s.sqlite")
    yield db
    db.close()


def test_recorder_pending_record_and_summary(store):
    rec = Recorder(store, CTX)
    dk = Choice.parse("decompose_k:s2")
    assert rec.pending(P, [ATEN, dk])[1] == [(P, ATEN), (P, dk)]
    rec.record(P, ATEN, {"status": "ok", "device_ms": 0.02})
    rec.record(P, dk, {"status": "crashed", "reason": "worker died\nmore"})
    assert rec.pending(P, [ATEN, dk])[1] == [] and rec.recorded == 2
    assert Recorder(store, CTX, retry_failed=True).pending(P, [ATEN, dk])[1] == [(P, dk)]
    s = rec.summarize(Shape("g", "x", P), [ATEN, dk])
    assert (s.best, s.aten_ms, s.tried, s.failed) == ("aten", 0.02, 2, 1)
    assert s.reasons == {"crashed": "worker died"}


def test_recorder_records_compile_failures_and_keeps_the_rest(store):
    rec = Recorder(store, CTX)
    a, b = Choice.parse("decompose_k:s2"), Choice.parse("decompose_k:s4")
    keep = rec.record_compile_failures([(P, a), (P, b)], {(P.key, a.id): {"status": "compile_error"},
                                                          (P.key, b.id): {"status": "ok"}})
    assert keep == [(P, b)] and set(store.done(CTX, P.key)) == {a.id}
    assert rec.recorded == 0  # compile failures are not measurements


def test_two_recorders_split_the_claims_and_wait_for_each_other(store):
    one, two = Recorder(store, CTX, owner="one"), Recorder(store, CTX, owner="two")
    todo = [(P, ATEN), (P, Choice.parse("decompose_k:s2"))]
    mine, others = one.claim(P, todo)
    assert mine == todo and others == []
    mine2, others2 = two.claim(P, todo)
    assert mine2 == [] and others2 == todo
    for p, c in mine:
        one.record(p, c, {"status": "ok", "device_ms": 1.0})
    one.release(P)
    assert two.await_others(P, others2, measure=lambda pcs: pytest.fail("nothing to measure")) == 2


def test_await_others_takes_over_an_expired_claim(store):
    sleeps, measured = [], []
    two = Recorder(store, CTX, owner="two", sleep=sleeps.append)
    store.claim(CTX, P.key, [ATEN.id], "dead", ttl_s=-1)  # a tuner that died: its claim expired
    got = two.await_others(P, [(P, ATEN)], measure=lambda pcs: measured.extend(pcs))
    assert measured == [(P, ATEN)] and got == 0 and sleeps == []


def test_a_sweeps_progress_counts_a_taken_over_claim_in_its_total(store, capsys, monkeypatch):
    """A candidate another tuner claimed, whose claim expired while this one measured its own, is
    measured here: it advanced the shape's count, whose total held this tuner's claims only, so the
    progress read "6/5". The total now grows by what is taken over."""
    import re

    from gemmtune.store import claims as claims_mod

    clock = [1000.0]  # the claims' clock: the dead tuner's claim expires while this one waits
    monkeypatch.setattr(claims_mod, "time", type("Clock", (), {"time": staticmethod(lambda: clock[0])}))
    plan = CandidatePlan(("decompose_k",), "default", H100)
    cands = plan(P).choices
    held = cands[-1].id
    assert store.claim(CTX, P.key, [held], "otherhost:1", ttl_s=60) == [held]  # a tuner elsewhere, then dead
    rec = Recorder(store, CTX, sleep=lambda s: clock.__setitem__(0, clock[0] + 120))
    pool = TimedPool()
    Tuner(progress=True, runoff=0).sweep(as_shapes([P]), plan, Executor(pool), rec)
    assert sorted(t["choice"] for t in pool.tasks) == sorted(c.id for c in cands)  # taken over and measured
    counts = [tuple(map(int, m)) for m in re.findall(r"  \S+: (\d+)/(\d+) \(", capsys.readouterr().err)]
    assert counts and all(done <= total for done, total in counts), counts
    assert counts[-1] == (len(cands), len(cands)), counts


def test_write_table_merges_unless_overwrite(store, tmp_path):
    rec = Recorder(store, CTX)
    rec.record(P, ATEN, {"status": "ok", "device_ms": 0.5})
    s = rec.summarize(Shape("g", "x", P), [ATEN])
    out = tmp_path / "t.json"
    table, path = write_table([s], CTX, out, overwrite=False)
    assert path == out and list(table.entries) == [P.key]
    q = P.with_sizes(k=2048)
    rec.record(q, ATEN, {"status": "ok", "device_ms": 0.1})
    table2, _ = write_table([rec.summarize(Shape("g", "y", q), [ATEN])], CTX, out, overwrite=False)
    assert set(table2.entries) == {P.key, q.key}
    table3, _ = write_table([rec.summarize(Shape("g", "y", q), [ATEN])], CTX, out, overwrite=True)
    assert set(table3.entries) == {q.key}


# ----------------------------------------------------------------------------- executor
class FakePool:
    def __init__(self):
        self.tasks = []

    def info(self):
        return {"device_name": "cpu"}

    def map(self, tasks, **kw):
        self.tasks += tasks
        for t in reversed(tasks):  # answers in any order
            yield t, {"status": "ok", "device_ms": 1.0}


def test_executor_pairs_each_result_with_its_candidate():
    pool = FakePool()
    ex = Executor(pool, seed=7, timing="quick")
    dk = Choice.parse("decompose_k:s2")
    got = list(ex.measure([(P, ATEN), (P, dk)]))
    assert [(p, c) for p, c, _ in got] == [(P, dk), (P, ATEN)]
    assert all(t["seed"] == 7 and t["timer"] == "quick" for t in pool.tasks)
    assert ex.compiler is None and ex.n_compile == 0 and ex.compile_ahead([(P, dk)]) is None
    ex.close()


class OpPool(FakePool):
    """Records (op, task); answers 'precompile' with ``precompile`` (a dict, or an exception to raise)."""

    def __init__(self, precompile):
        super().__init__()
        self.ops, self.precompile = [], precompile

    def map(self, tasks, op="bench", **kw):
        self.ops += [(op, t) for t in tasks]
        if op == "precompile":
            if isinstance(self.precompile, Exception):
                raise self.precompile
            for t in tasks:
                yield t, dict(self.precompile, compiled=len(t["choices"]))
            return
        yield from super().map(tasks)


def test_executor_precompiles_each_chunk_of_a_problems_candidates_before_timing_them(monkeypatch):
    from gemmtune.tuning import executor as ex_mod

    monkeypatch.setattr(ex_mod, "PRECOMPILE_CHUNK", 3)
    dks = [Choice.parse(f"decompose_k:s{s}") for s in (2, 4, 8, 16)]
    q = P.with_sizes(k=2048)
    todo = [(P, ATEN)] + [(P, c) for c in dks] + [(q, dks[0])]
    pool = OpPool({"status": "ok", "s": 0.25, "threads": 2})
    ex = Executor(pool, precompile=True)
    got = list(ex.measure(todo))
    assert sorted((p.key, c.id) for p, c, _ in got) == sorted((p.key, c.id) for p, c in todo)
    ops = [(op, t.get("choices", t.get("choice"))) for op, t in pool.ops]
    # Chunks of at most 3 of one problem: [aten, s2, s4] precompiles the 2 that compile, [s8, s16]
    # both, and q's lone candidate nothing (one compile gains nothing on threads).
    assert ops == [("precompile", ["decompose_k:s2", "decompose_k:s4"]), ("bench", "aten"),
                   ("bench", "decompose_k:s2"), ("bench", "decompose_k:s4"),
                   ("precompile", ["decompose_k:s8", "decompose_k:s16"]), ("bench", "decompose_k:s8"),
                   ("bench", "decompose_k:s16"), ("bench", "decompose_k:s2")]
    assert ex.precompile_s == pytest.approx(0.5) and ex.precompiled == 4
    # Off by default (the Tuner turns it on where a GPU is), and with compile workers.
    plain = OpPool({"status": "ok", "s": 0.25})
    list(Executor(plain).measure(todo))
    assert all(op == "bench" for op, _ in plain.ops)


@pytest.mark.parametrize("answer", [RuntimeError("the worker server refused the request: unknown op"),
                                    {"status": "skipped", "reason": "not on a GPU", "for_run": True},
                                    {"status": "error", "reason": "ValueError: unknown op 'precompile'"},
                                    {"status": "crashed", "reason": "worker exited with signal 11"}])
def test_executor_stops_precompiling_where_the_worker_cannot_and_still_times_everything(answer):
    dks = [Choice.parse(f"decompose_k:s{s}") for s in (2, 4, 8, 16)]
    q = P.with_sizes(k=2048)
    todo = [(P, c) for c in dks] + [(q, c) for c in dks]
    pool = OpPool(answer)
    ex = Executor(pool, precompile=True)
    got = list(ex.measure(todo))
    assert len(got) == 8 and all(r["status"] == "ok" for _, _, r in got)
    assert [op for op, _ in pool.ops].count("precompile") == 1 and not ex.precompile
    assert ex.precompile_s == 0.0 and ex.precompiled == 0


def test_executor_keeps_precompiling_after_a_skip_that_holds_for_one_problem_only():
    dks = [Choice.parse(f"decompose_k:s{s}") for s in (2, 4)]
    q = P.with_sizes(k=2048)
    pool = OpPool({"status": "skipped", "reason": "empty problem", "for_run": False})
    ex = Executor(pool, precompile=True)
    assert len(list(ex.measure([(P, c) for c in dks] + [(q, c) for c in dks]))) == 4
    assert [op for op, _ in pool.ops].count("precompile") == 2 and ex.precompile


def test_precompile_op_on_a_cpu_worker_is_skipped_with_its_reason():
    from gemmtune.bench.runner import WorkerState, handle

    res = handle("precompile", {"problem": P.key, "choices": ["decompose_k:s2", "decompose_k:s4"]},
                 WorkerState(device="cpu"))
    # for_run: the skip holds for every problem of the run, so the Executor stops asking.
    assert res == {"status": "skipped", "reason": "not on a GPU", "for_run": True}
    bad = handle("precompile", {"problem": P.key}, WorkerState(device="cpu"))
    assert bad["status"] == "error" and "choices" in bad["reason"]


# ----------------------------------------------------------------------------- look-ahead
def test_lookahead_plans_ahead_and_raises_a_shapes_error_on_its_turn():
    shapes = [Shape("g", str(i), P.with_sizes(k=64 * (i + 1))) for i in range(4)]
    planned, submitted = [], []

    def plan(problem):
        planned.append(problem.k)
        if problem.k == 128:
            raise ValueError("bad shape")
        return problem.k

    def submit(j, got):
        submitted.append(j)
        f = Future()
        f.set_result(j)
        return f

    ahead = Lookahead(shapes, plan, ahead=2, submit=submit)
    assert ahead.plan(0) == 64 and planned == [64, 128, 192] and submitted == [0, 2]
    assert ahead.job(0).result() == 0 and ahead.job(1) is None
    with pytest.raises(ValueError, match="bad shape"):
        ahead.plan(1)
    assert ahead.plan(2) == 192 and planned == [64, 128, 192, 256]


def test_plan_ahead_plans_in_order_on_its_thread_within_depth_and_raises_on_turn():
    import threading
    problems = [P.with_sizes(k=64 * (i + 1)) for i in range(6)]
    threads, planned = set(), []
    gate = threading.Event()

    def plan(problem):
        threads.add(threading.current_thread().name)
        planned.append(problem.k)
        if len(planned) == 2:
            gate.set()
        if problem.k == 128:
            raise ValueError("bad shape")
        return problem.k

    ahead = PlanAhead(problems, plan, depth=2)
    assert gate.wait(10)
    time.sleep(0.2)
    assert planned == [64, 128]  # no further than depth ahead of what was asked for
    assert ahead(problems[0]) == 64
    with pytest.raises(ValueError, match="bad shape"):
        ahead(problems[1])
    assert [ahead(p) for p in problems[2:]] == [192, 256, 320, 384]
    assert planned == [64 * (i + 1) for i in range(6)] and threads == {"gemmtune-plan-ahead"}
    with pytest.raises(RuntimeError, match="in their order"):
        ahead(problems[0])
    ahead.close()


def test_plan_ahead_close_stops_planning():
    problems = [P.with_sizes(k=64 * (i + 1)) for i in range(5)]
    planned = []
    ahead = PlanAhead(problems, lambda p: planned.append(p.k) or p.k, depth=1)
    assert ahead(problems[0]) == 64
    ahead.close()
    ahead._thread.join(10)
    assert not ahead._thread.is_alive() and len(planned) <= 2
    with pytest.raises(ValueError, match="depth"):
        PlanAhead(problems, lambda p: p, depth=0)


# ----------------------------------------------------------------------------- the sweep, with a fake pool
class TimedPool(FakePool):
    """Answers every candidate ok, cuBLAS slowest, so the first Triton candidate wins."""

    def map(self, tasks, **kw):
        self.tasks += tasks
        for i, t in enumerate(tasks):
            yield t, {"status": "ok", "device_ms": 1.0 if t["choice"] == "aten" else 0.5 + 0.01 * i, "repeats": 20}



class LateCompiles(Executor):
    """An executor whose compile workers are still starting: the first shape's compile job
    completes ``delay`` s after it is queued, the later ones at once."""

    def __init__(self, pool, delay: float):
        super().__init__(pool)
        self.compiler = object()  # (only its presence counts: Lookahead compiles ahead)
        self.delay, self.jobs = delay, 0

    def compile_ahead(self, todo):
        todo = [pc for pc in todo if pc[1].needs_compile]
        if not todo:
            return None
        self.jobs += 1
        fut = Future()
        result = {(p.key, c.id): {"status": "ok"} for p, c in todo}
        if self.jobs == 1:
            threading.Timer(self.delay, fut.set_result, (result,)).start()
        else:
            fut.set_result(result)
        return fut


def test_sweep_records_each_shapes_wait_for_its_compiles(store):
    """The seconds a shape waited for its compile workers go into its result (a first shape that
    waits is waiting for their start-up), and add up to the run's compile_wait_s."""
    shapes = as_shapes([P, P.with_sizes(k=2048), P.with_sizes(k=1024)])
    plan = CandidatePlan(("decompose_k",), "default", H100)
    swept = Tuner(progress=False).sweep(shapes, plan, LateCompiles(TimedPool(), 0.3), Recorder(store, CTX))
    waits = [r.compile_wait_s for r in swept.shapes]
    assert waits[0] >= 0.25 and all(w < 0.05 for w in waits[1:])
    assert swept.compile_wait_s == pytest.approx(sum(waits)) and swept.shapes[0].tune_s >= waits[0]
    assert all(r.best == "decompose_k:s2" for r in swept.shapes)


def test_tuner_sweep_records_summarizes_and_reuses(store):
    shapes = as_shapes([P, P.with_sizes(k=2048)])
    plan = CandidatePlan(("decompose_k",), "default", H100)
    tuner = Tuner(progress=False)
    pool = TimedPool()
    rec = Recorder(store, CTX)
    swept = tuner.sweep(shapes, plan, Executor(pool), rec)
    results = swept.shapes
    n = sum(len(plan(s.problem).choices) for s in shapes)
    assert rec.recorded == n == len(pool.tasks) and swept.reused == 0 and swept.compile_wait_s == 0.0
    assert [r.best for r in results] == ["decompose_k:s2", "decompose_k:s2"]
    assert all(r.aten_ms == 1.0 and r.speedup == pytest.approx(1.0 / r.best_ms) and r.failed == 0 and r.k is None
               for r in results)
    # The same sweep again: everything comes from the store, nothing is measured.
    again = Recorder(store, CTX)
    swept2 = tuner.sweep(shapes, plan, Executor(pool), again)
    results2 = swept2.shapes
    assert again.recorded == 0 and swept2.reused == n and len(pool.tasks) == n
    assert [r.best for r in results2] == [r.best for r in results]


class CloseCallPool(FakePool):
    """The sweep times cuBLAS at 1.0 and the rest at 0.97 (a close call); a run-off answers
    ``runoff`` ({"best": ms, "aten": ms}, "best" the sweep's winner; or a whole result dict),
    and is recorded in ``runoffs``."""

    def __init__(self, runoff):
        super().__init__()
        self.runoff, self.runoffs = runoff, []

    def map(self, tasks, op="bench", **kw):
        for t in tasks:
            if op == "runoff":
                self.runoffs.append(t)
                best = t["choices"][0]
                res = self.runoff if "status" in self.runoff else {"status": "ok", "choices": {
                    c: {"status": "ok", "ms": self.runoff["aten" if c == "aten" else "best"], "spread": 0.01}
                    for c in t["choices"]}}
                assert best != "aten"
                yield t, res
            else:
                self.tasks.append(t)
                yield t, {"status": "ok", "device_ms": 1.0 if t["choice"] == "aten" else 0.97, "repeats": 20}


@pytest.mark.parametrize("runoff, margin, aten_wins", [
    ({"best": 1.0, "aten": 0.9}, 0.05, True),                  # cuBLAS wins the run-off
    ({"best": 0.8, "aten": 0.9}, 0.05, False),                 # the sweep's winner holds
    ({"best": 0.895, "aten": 0.9}, 0.05, True),                # ahead by 0.6% in the run-off: a tie, cuBLAS
    ({"status": "error", "reason": "unknown op"}, 0.05, False),  # an older worker: the sweep's stands
    ({"best": 1.0, "aten": 0.9}, 0.0, False),                  # runoff=0: none
    ({"best": 1.0, "aten": 0.9}, 0.02, False),                 # 3% ahead: beyond the margin, none
])
def test_tuner_sweep_runs_off_a_close_winner_against_cublas(store, runoff, margin, aten_wins):
    shapes = as_shapes([P])
    plan = CandidatePlan(("decompose_k",), "default", H100)
    pool = CloseCallPool(runoff)
    r = Tuner(progress=False, runoff=margin).sweep(shapes, plan, Executor(pool, seed=3), Recorder(store, CTX)).shapes[0]
    ran = margin > 0.03
    assert len(pool.runoffs) == int(ran) and (r.best == "aten") == aten_wins
    if ran:
        t = pool.runoffs[0]
        assert t["problem"] == P.key and t["seed"] == 3 and t["choices"][1] == "aten"
        assert t["choices"][0].startswith("decompose_k:")
        if "status" in runoff:
            assert "unknown op" in r.runoff["error"]
        else:
            assert r.runoff["ms"] == {t["choices"][0]: runoff["best"], "aten": runoff["aten"]}
            assert r.runoff["kept"] == r.best
        assert r.best_ms == (1.0 if aten_wins else 0.97)  # the sweep's times: the store's rows
    else:
        assert r.runoff is None and r.best_ms == 0.97
    assert summary_of(r)["runoff"] == r.runoff


class PdlCallPool(FakePool):
    """An M = 1 GEMV on a Linear's weight: the sweep times cuBLAS at 1.0 and every other
    candidate at ``others`` (slower alone); a run-off answers ``runoff`` (best, aten)."""

    def __init__(self, others, runoff):
        super().__init__()
        self.others, self.runoff, self.runoffs = others, runoff, []

    def map(self, tasks, op="bench", **kw):
        for t in tasks:
            if op == "runoff":
                self.runoffs.append(t)
                yield t, {"status": "ok", "choices": {c: {"status": "ok", "ms": self.runoff[c == "aten"], "spread": 0.01}
                                                      for c in t["choices"]}}
            else:
                self.tasks.append(t)
                yield t, {"status": "ok", "device_ms": 1.0 if t["choice"] == "aten" else self.others, "repeats": 20}


GEMV = Problem.from_sizes(1, 16384, 2048, "bf16", layout_b="col")


@pytest.mark.parametrize("credit, family, runoff, winner", [
    (0.02, "skinny", (1.005, 1.0), "strip"),     # 0.5% slower alone, credited 2%: the strip (its -pdl twin) wins
    (0.0, "skinny", (1.005, 1.0), "aten"),       # no credit: cuBLAS, and no run-off (cuBLAS won the sweep)
    (0.02, "skinny", (1.02, 1.0), "aten"),       # 2% slower in the run-off: beyond the credit and the 1% tie
    (0.02, "decompose_k", (1.005, 1.0), "aten"),  # a family without a -pdl twin gets no credit
])
def test_pdl_credit_keeps_a_near_tie_strip_that_pdl_serves_as_its_twin(store, credit, family, runoff, winner):
    from gemmtune.pdl import credited
    plan = CandidatePlan((family,), "default", H100)
    pool = PdlCallPool(1.01, runoff)
    r = Tuner(progress=False, pdl_credit=credit).sweep(as_shapes([GEMV]), plan, Executor(pool),
                                                        Recorder(store, CTX, pdl_credit=credit)).shapes[0]
    if winner == "aten":
        assert r.best == "aten" and r.best_ms == 1.0
    else:
        assert credited(r.best, "col") and r.best_ms == 1.01  # its own time, not the credited one
        assert r.runoff["kept"] == r.best and r.runoff["pdl_credit"] == pytest.approx(0.02)
    assert len(pool.runoffs) == int(credit > 0 and family == "skinny")


def test_tune_model_credits_the_twins_on_hopper_only(monkeypatch):
    """tune_model(pdl=True) passes pdl.PDL_CREDIT to gemmtune.tune on a Hopper, nothing before it,
    and leaves a credit the caller chose (0 included) as it is."""
    import sys

    import torch

    import gemmtune.pdl as pdl
    seen = []

    def fake_tune(problems, **kw):
        seen.append(kw.get("pdl_credit"))
        raise RuntimeError("stop here")  # the keywords are what this test is about
    monkeypatch.setattr(sys.modules["gemmtune.tune"], "tune", fake_tune)
    model = torch.nn.Sequential(torch.nn.Linear(16, 8)).eval()
    for cap, kw, want in [((9, 0), {}, pdl.PDL_CREDIT), ((8, 0), {}, None), (None, {}, None),
                          ((9, 0), {"pdl_credit": 0.0}, 0.0), ((9, 0), {"cluster": "local:2"}, None)]:
        monkeypatch.setattr(pdl, "_capability", lambda cap=cap: cap)
        with pytest.raises(RuntimeError, match="stop here"):
            gemmtune.tune_model(model, [(torch.randn(2, 16),)], pdl=True, prestart=False, **kw)
        assert seen[-1] == want
    with pytest.raises(RuntimeError, match="stop here"):  # pdl=False: never
        monkeypatch.setattr(pdl, "_capability", lambda: (9, 0))
        gemmtune.tune_model(model, [(torch.randn(2, 16),)], prestart=False)
    assert seen[-1] is None


def summary_of(r):
    from gemmtune.tuning.results import TuneResult, summary
    return summary(TuneResult([r], CTX, True, 0.0, 0, 0))["shapes"][0]


def test_runoff_winner_needs_both_times_and_min_gain():
    from gemmtune.tuning.runoff import runoff_winner, wants_runoff

    def res(t, a):
        return {"status": "ok", "choices": {"t": t, "aten": a}}
    ok = {"status": "ok", "ms": 1.0, "spread": 0.0}
    assert runoff_winner(res(dict(ok, ms=0.99), ok), "t")[0] == "t"
    assert runoff_winner(res(dict(ok, ms=0.99), ok), "t", min_gain=0.02)[0] == "aten"
    assert runoff_winner(res(ok, ok), "t")[0] == "aten"  # a tie: cuBLAS, torch's own call
    won, rec = runoff_winner(res({"status": "wrong", "reason": "mismatch"}, ok), "t")
    assert won == "t" and "mismatch" in rec["error"]
    assert runoff_winner(res(dict(ok, ms=float("nan")), ok), "t")[0] == "t"
    assert not wants_runoff("t", float("inf"), 1.0, 0.05) and not wants_runoff(None, None, 1.0, 0.05)
    # A kernel of a few microseconds: the sweep's cuBLAS time is noisier than 5%, so a winner by up
    # to 25% is timed again beside it (H100 1024^3: a pick its sweep timed at 7.32 us ran 0.83x cuBLAS in the bench)
    assert wants_runoff("t", 0.00732, 0.0080, 0.05) and not wants_runoff("t", 0.00732, 0.0100, 0.05)
    assert wants_runoff("t", 0.9, 1.0, 0.05) is False  # long kernels keep the 5% margin
    with pytest.raises(ValueError, match="runoff"):
        Tuner(runoff=1.5)
    with pytest.raises(ValueError, match="runoff"):
        Tuner(runoff=True)


def test_worker_runoff_times_both_choices_in_interleaved_rounds(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    from gemmtune.bench.runner import WorkerState, handle
    from gemmtune.bench.timing import WallTimer

    q = Problem.from_sizes(17, 23, 40, "fp16")
    state = WorkerState(timer=WallTimer(repeats=4, warmup=0), device="cpu")
    res = handle("runoff", {"problem": q.key, "choices": ["decompose_k:s2", "aten"], "seed": 1}, state)
    assert res["status"] == "ok" and set(res["choices"]) == {"decompose_k:s2", "aten"}
    for c in res["choices"].values():
        assert c["status"] == "ok" and c["ms"] > 0 and c["rounds"] == 4 and len(c["round_ms"]) == 4
    bad = handle("runoff", {"problem": q.key, "choices": ["triton_mm:BM999-BN16-BK16-S1-W4-G1", "aten"]}, state)
    assert bad["choices"]["aten"]["status"] == "ok" and bad["choices"]["triton_mm:BM999-BN16-BK16-S1-W4-G1"]["status"] != "ok"
    assert handle("nope", {"problem": q.key, "choice": "aten"}, state)["status"] == "error"


# ------------------------------------------------------------------ deterministic choices only
def test_is_deterministic_marks_the_atomic_reductions():
    from gemmtune.configs import Choice
    from gemmtune.tuning.plan import is_deterministic

    def det(cid):
        return is_deterministic(Choice.parse(cid))
    assert not det("splitk:BM64-BN64-BK64-S4-W4-G8-SK32-atomic")
    assert det("splitk:BM64-BN64-BK64-S4-W4-G8-SK32-det")
    assert not det("skinny:BM16-BN16-BK256-SK8-S6-W2-dot-atomic")
    assert det("skinny:BM16-BN16-BK256-SK8-S6-W2-dot-det") and det("skinny:BM16-BN64-BK128-SK1-S5-W2-dot-atomic")
    assert not det("skinny:BM16-BN64-BK128-SK1-S4-W4-dot-atomic-P132")   # stream-K adds strips atomically
    for cid in ("aten", "triton_mm:BM64-BN64-BK32-S3-W4-G8", "decompose_k:s4", "pad+aten"):
        assert det(cid), cid


def test_deterministic_plan_drops_atomic_candidates_only():
    from gemmtune.device import DeviceInfo
    from gemmtune.problem import Problem
    from gemmtune.tuning.plan import CandidatePlan, is_deterministic

    dev = DeviceInfo.lookup("h200")
    p = Problem.from_sizes(16, 64, 16384, "bf16")
    every = CandidatePlan(("splitk", "skinny", "aten"), "default", dev)(p).choices
    det = CandidatePlan(("splitk", "skinny", "aten"), "default", dev, deterministic=True)(p).choices
    assert any(not is_deterministic(c) for c in every)      # the space has atomic configs
    assert det and all(is_deterministic(c) for c in det)
    assert [c for c in every if is_deterministic(c)] == det  # nothing else is dropped, order kept
    assert "aten" in {c.id for c in det}


def test_deterministic_reaches_the_plan_from_tune_and_the_cli(monkeypatch):
    import gemmtune
    from gemmtune.cli import build_parser
    from gemmtune.tuning.options import TuneOptions, option_names
    from gemmtune.tuning.tuner import make_plan

    assert "deterministic" in option_names()
    ctx = gemmtune.tuning.tuner.context_of({"device_name": "NVIDIA H200", "capability": "9.0", "torch": "x",
                                            "triton": "3.6.0", "gemmtune": "0"})
    plan = make_plan(TuneOptions(deterministic=True, device="h200"), {}, ctx, None, None)
    assert plan.deterministic
    args = build_parser().parse_args(["tune", "--shape", "16x64x16384:bf16", "--deterministic"])
    assert args.deterministic is True


def test_deterministic_reaches_tune_from_compile_mm_and_patch():
    import torch

    import gemmtune
    seen = []

    def fake(problems, **kw):
        seen.append(kw.get("deterministic", False))
        return {p.key: "aten" for p in problems}
    gemmtune.compile_mm(n=8, k=16, dtype="fp32", hints={"m": [4]}, tune_fn=fake, deterministic=True, progress=False)
    gemmtune.patch(torch.nn.Linear(16, 8), hints={"m": [4]}, tune_fn=fake, deterministic=True, progress=False)
    gemmtune.tune_model(torch.nn.Sequential(torch.nn.Linear(16, 8)), [(torch.randn(4, 16),)], tune_fn=fake,
                        deterministic=True, progress=False)
    assert seen == [True, True, True]


def test_min_gain_keeps_cublas_unless_a_kernel_beats_it_by_the_margin(tmp_path):
    from gemmtune.configs import AtenConfig, Choice
    from gemmtune.shapes import Shape
    from gemmtune.store import ResultStore
    from gemmtune.problem import Problem
    from gemmtune.tuning.recorder import Recorder, RunContext
    db = ResultStore(tmp_path / "s.sqlite")
    ctx = RunContext("cpu", "0.0", "2.6", "3.2", "0.1")
    p = Problem.from_sizes(8, 8, 8, "fp16")
    aten, tri = Choice("aten", AtenConfig()), Choice.parse("triton_mm:BM16-BN16-BK16-S1-W2-G8")
    Recorder(db, ctx).record(p, aten, {"status": "ok", "device_ms": 1.00})
    Recorder(db, ctx).record(p, tri, {"status": "ok", "device_ms": 0.985})  # 1.5% faster
    s = Shape("g", "x", p)
    assert Recorder(db, ctx).summarize(s, [aten, tri]).best == tri.id  # default: the fastest
    r = Recorder(db, ctx, min_gain=0.02).summarize(s, [aten, tri])
    assert r.best == "aten" and r.best_ms == 1.00
    assert Recorder(db, ctx, min_gain=0.01).summarize(s, [aten, tri]).best == tri.id
    assert Recorder(db, ctx, min_gain=0.02).summarize(s, [tri]).best == tri.id  # cuBLAS not a candidate
    db.close()
    for bad in (-0.1, 1.0, True, "2%"):
        with pytest.raises(ValueError, match="min_gain"):
            TuneOptions(min_gain=bad)


def test_check_refuses_a_table_path_that_is_the_store_or_a_directory(tmp_path):
    """``tune --store X --out X --overwrite`` replaced every measurement with the table; ``--out DIR``
    failed with a traceback after the whole run. Both are refused before anything is measured."""
    store = tmp_path / "results.sqlite"
    with pytest.raises(ValueError, match="one file"):
        TuneOptions(store=str(store), out=str(store)).check()
    with pytest.raises(ValueError, match="is a directory"):
        TuneOptions(store=str(store), out=str(tmp_path)).check()
    TuneOptions(store=str(store), out=str(tmp_path / "table.json")).check()  # fine


def test_a_suite_row_shorter_than_its_header_is_one_clear_error(tmp_path):
    from gemmtune.shapes import load_csv
    path = tmp_path / "s.csv"
    path.write_text("group,name,M,N,K,dtype\ng,n,4,4,4\n")
    with pytest.raises(ValueError, match=r"s\.csv:2: bad row .*missing field\(s\) dtype"):
        load_csv(path)
    path.write_text("\ufeffgroup,name,M,N,K,dtype\ng,n,4,4,4,bf16\n")  # a spreadsheet's byte-order mark
    assert [s.name for s in load_csv(path)] == ["n"]


def test_write_table_onto_an_earlier_table_takes_this_runs_verdict_on_the_choices_it_measured(tmp_path):
    """An earlier table's faster time of a choice this run measured and did not keep (here: wrong
    under a newer Triton; or lost to --min-gain) no longer puts that choice first; choices the run
    did not measure keep their times."""
    db = ResultStore(tmp_path / "s.sqlite")
    out = tmp_path / "t.json"
    p = Problem.from_sizes(8, 8, 8, "fp16")
    s = Shape("g", "x", p)
    tri, dk = Choice.parse("triton_mm:BM16-BN16-BK16-S1-W2-G8"), Choice.parse("decompose_k:s2")
    old = RunContext("cpu", "0.0", "2.6", "3.5.0", "0.1")
    r = Recorder(db, old)
    r.record(p, ATEN, {"status": "ok", "device_ms": 1.0})
    r.record(p, tri, {"status": "ok", "device_ms": 0.9})
    assert write_table([r.summarize(s, [ATEN, tri])], old, out, False)[0].best(p) == tri
    # Same context, --min-gain 0.2: cuBLAS unless a kernel wins by 20%.
    r2 = Recorder(db, old, min_gain=0.2)
    assert write_table([r2.summarize(s, [ATEN, tri])], old, out, False)[0].entries[p.key] == [
        TableChoice(ATEN, 1.0)]
    # Another table run that tuned only decompose_k on this shape: its choice joins, by time.
    r.record(p, dk, {"status": "ok", "device_ms": 1.2})
    t = write_table([r.summarize(s, [dk])], old, out, False)[0]
    assert [tc.choice for tc in t.entries[p.key]] == [ATEN, dk]
    # A newer Triton: the tile is now wrong, cuBLAS wins; the tile's 0.9 ms must not come back.
    new = RunContext("cpu", "0.0", "2.6", "3.6.0", "0.1")
    r3 = Recorder(db, new)
    r3.record(p, ATEN, {"status": "ok", "device_ms": 1.0})
    r3.record(p, tri, {"status": "wrong", "rel_err": 0.5})
    with pytest.warns(UserWarning, match="different triton versions"):
        t = write_table([r3.summarize(s, [ATEN, tri])], new, out, False)[0]
    assert tri not in [tc.choice for tc in t.entries[p.key]] and t.best(p) == ATEN
    # Every candidate failed this time. A wrong result is a verdict: decompose_k goes. A crash may
    # have been the machine's (another process's OOM): cuBLAS keeps its earlier time.
    r3.record(p, ATEN, {"status": "crashed", "reason": "x"})
    r3.record(p, dk, {"status": "wrong", "rel_err": 0.5})
    with pytest.warns(UserWarning, match="different triton versions"):
        t = write_table([r3.summarize(s, [ATEN, tri, dk])], new, out, False)[0]
    assert t.entries[p.key] == [TableChoice(ATEN, 1.0)]
    # Wrong or refused everywhere: the entry goes.
    r3.record(p, ATEN, {"status": "unsupported", "reason": "x"})
    with pytest.warns(UserWarning, match="different triton versions"):
        t = write_table([r3.summarize(s, [ATEN, tri, dk])], new, out, False)[0]
    assert p.key not in t.entries
    db.close()


def test_tuner_trace_notes_each_planned_shape_on_the_wall_clock(tmp_path, monkeypatch):
    """GEMMTUNE_WORKER_TRACE: the tuner's own steps in tuner-<pid>.jsonl beside its workers'
    traces; unset, nothing is written; an unwritable place warns and traces nothing."""
    import json
    import os

    from gemmtune.tuning.tuner import Planned, tuner_trace
    monkeypatch.delenv("GEMMTUNE_WORKER_TRACE", raising=False)
    tuner_trace()("run")  # a no-op
    assert not list(tmp_path.iterdir())
    monkeypatch.setenv("GEMMTUNE_WORKER_TRACE", str(tmp_path / "t"))
    note = tuner_trace()
    shapes = as_shapes([Problem.from_sizes(8, 8, 8, "fp16"), Problem.from_sizes(16, 8, 8, "fp16")])
    ahead = Lookahead(shapes, lambda p: Planned([Choice.parse("aten")]), ahead=1, note=note)
    ahead.plan(0)
    lines = [json.loads(x) for x in (tmp_path / "t" / f"tuner-{os.getpid()}.jsonl").read_text().splitlines()]
    assert [(x["op"], x["shape"], x["choices"]) for x in lines] == [("planned", 0, 1), ("planned", 1, 1)]
    assert lines[0]["t0"] <= lines[1]["t0"]
    note.close()
    note("after")  # a closed trace drops the line instead of raising
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("GEMMTUNE_WORKER_TRACE", str(blocker / "t"))
    with pytest.warns(RuntimeWarning, match="cannot be written"):
        tuner_trace()("run")


def form_ms(choice_id: str) -> float:
    """A time made up for the forms' tests: a carried triton_static tile 1.0 ms, its indexed form
    0.8, everything else 2.0."""
    return 0.8 if choice_id.endswith("-IX") else 1.0 if choice_id.startswith("triton_static:") else 2.0


class FormsPool(FakePool):
    """Times each candidate at ``form_ms``."""

    def map(self, tasks, **kw):
        for t in tasks:
            self.tasks.append(t)
            yield t, {"status": "ok", "device_ms": form_ms(t["choice"])}


def test_a_whole_space_sweep_times_the_fastest_tiles_other_forms(store, tmp_path):
    """A whole space (no ranker) lists triton_static's carried forms only: after the sweep the
    tuner times the fastest tile's other forms (plan.refine_forms), and one of them can win. A
    table entry's fixed choices and an aligned problem get none."""
    odd = Problem.from_sizes(96, 50257, 768, "bf16")  # unaligned B rows, odd N along them
    plan = CandidatePlan(("triton_mm", "triton_static"), "default", H100)
    pool = FormsPool()
    r = Tuner(progress=False, runoff=0).sweep(as_shapes([odd]), plan, Executor(pool), Recorder(store, CTX)).shapes[0]
    timed = [t["choice"] for t in pool.tasks]
    listed = [c.id for c in plan(odd).choices]
    # every carried static tile ties at 1.0 ms: the fastest is the first by id
    fastest = min(c for c in listed if c.startswith("triton_static:"))
    assert [c for c in timed if c not in listed] == [f"{fastest}-IX", f"{fastest}-IXW"]
    assert r.best == f"{fastest}-IX" and r.best_ms == 0.8 and r.tried == len(listed) + 2
    # aligned: no triton_static candidate, nothing more
    pool2 = FormsPool()
    aligned = Problem.from_sizes(96, 4096, 768, "bf16")
    Tuner(progress=False, runoff=0).sweep(as_shapes([aligned]), plan, Executor(pool2), Recorder(store, CTX))
    assert pool2.tasks and not any("-IX" in t["choice"] for t in pool2.tasks)
    # a table entry fixes the choices: nothing added
    lut = LookupTable({}, {odd.key: [TableChoice(Choice.parse(fastest), 1.0)]})
    pool3 = FormsPool()
    fixed = CandidatePlan(("triton_mm", "triton_static"), "default", H100, lut)
    with ResultStore(tmp_path / "fresh.sqlite") as fresh:
        Tuner(progress=False, runoff=0).sweep(as_shapes([odd]), fixed, Executor(pool3), Recorder(fresh, CTX))
    assert [t["choice"] for t in pool3.tasks] == [fastest]
