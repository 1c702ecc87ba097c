"""The results-store side of a tuning run: what a problem still needs, the claims that let
several tuners share one store, recording each result the moment it arrives, each shape's
summary and the table of winners. Only the tuner's main thread uses it.

>>> import tempfile, os
>>> from gemmtune.configs import AtenConfig, Choice
>>> d = tempfile.mkdtemp()
>>> db = ResultStore(os.path.join(d, "s.sqlite"))
>>> rec = Recorder(db, RunContext("cpu", "0.0", "2.6", "3.2", "0.1"))
>>> p, aten = Problem.from_sizes(8, 8, 8, "fp16"), Choice("aten", AtenConfig())
>>> rec.pending(p, [aten])[1] == [(p, aten)]
True
>>> rec.record(p, aten, {"status": "ok", "device_ms": 0.01})
>>> rec.pending(p, [aten])[1], rec.summarize(Shape("g", "x", p), [aten]).best
([], 'aten')
>>> db.close()
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from pathlib import Path
from typing import Callable

from ..bench import status as _status
from ..bench.status import Status
from ..configs import Choice
from ..precision import precision_tag
from ..problem import Problem
from ..shapes import Shape
from ..store import STATUSES, ResultRow, ResultStore, RunContext, claim_owner
from ..table import LookupTable, TableChoice, as_table, provenance
from .results import FAILED, ShapeResult, reason_line
from ..jsonio import locked, refuse_results_store

RETRYABLE = tuple(s.value for s in _status.RETRYABLE)
# How often a tuner looks at the store for the results another tuner is measuring.
POLL_S = 0.5


def result_row(problem: Problem, choice: Choice, res: dict, fp32_precision: str | None = None) -> ResultRow:
    """A worker's result dict as the store's row (an unknown status is an error).
    ``fp32_precision``: the row's tag (``precision_tag``; None: this process's for ``problem``,
    which is the measuring workers' too: they inherit its environment and GPU)."""
    def num(key):
        v = res.get(key)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    return ResultRow(
        problem_key=problem.key, choice_id=choice.id, family=choice.family,
        status=res.get("status") if res.get("status") in STATUSES else Status.ERROR.value,
        device_ms=num("device_ms"), eager_ms=num("eager_ms"), rel_err=num("rel_err"),
        reason=str(res.get("reason", ""))[:2000], m=problem.m, n=problem.n, k=problem.k,
        dtype=problem.dtype, out_dtype=problem.out_dtype,
        layout=f"{problem.layout_a}/{problem.layout_b}", aligned=problem.aligned_a and problem.aligned_b,
        params_json=json.dumps(choice.config.params(), sort_keys=True),
        repeats=int(res["repeats"]) if isinstance(res.get("repeats"), int) else None,
        spread=num("spread"),
        fp32_precision=precision_tag(problem) if fp32_precision is None else fp32_precision,
    )


def claim_ttl(timeout: float, n: int) -> float:
    """How long a tuner holds its claim on ``n`` candidates: each is killed after ``timeout``
    seconds at worst, plus a minute of slack for compiling and recording."""
    return 60.0 + timeout * max(n, 1)


def prefer_aten(best, aten, min_gain: float, scale: float = 1.0):
    """``aten``'s row instead of ``best`` when ``best`` (another choice) is not at least
    ``min_gain`` faster than cuBLAS, i.e. ``best_ms * scale * (1 + min_gain) > aten_ms``; else
    ``best``. ``scale``: 1 less the PDL credit of a credited strip (``ranked_ms``), else 1.

    >>> from types import SimpleNamespace as R
    >>> prefer_aten(R(choice_id="t", device_ms=0.99), R(choice_id="aten", device_ms=1.0), 0.02).choice_id
    'aten'
    >>> prefer_aten(R(choice_id="t", device_ms=0.97), R(choice_id="aten", device_ms=1.0), 0.02).choice_id
    't'
    """
    if best is None or aten is None or min_gain <= 0 or best.choice_id == aten.choice_id:
        return best
    return aten if best.device_ms * scale * (1.0 + min_gain) > aten.device_ms else best


def ranked_ms(choice_id: str, device_ms: float, layout_b: str, pdl_credit: float, op: str = "mm") -> float:
    """The time a winner is picked by: ``device_ms``, less ``pdl_credit`` of it for a strip that
    ``pdl=True`` serves as its ``-pdl`` twin in a problem of ``op`` (``gemmtune.pdl.credited``;
    ``gemmtune.pdl.PDL_CREDIT`` says why).

    >>> ranked_ms("skinny:BM1-BN8-BK512-SK1-S1-W4-core-det-flat-sum", 1.0, "col", 0.02)
    0.98
    >>> ranked_ms("aten", 1.0, "col", 0.02), ranked_ms("skinny:BM1-BN8-BK512-SK1-S1-W4-core-det-flat-sum", 1.0, "col", 0.0)
    (1.0, 1.0)
    """
    if pdl_credit <= 0:
        return device_ms
    from ..pdl import credited
    return device_ms * (1.0 - pdl_credit) if credited(choice_id, layout_b, op) else device_ms


def summarize(s: Shape, cands: list[Choice], db: ResultStore, ctx: RunContext, min_gain: float = 0.0,
              pdl_credit: float = 0.0) -> ShapeResult:
    """``s``'s result from what the store holds for its candidates: the best verified time
    (cuBLAS's where nothing beats it by ``min_gain``: ``prefer_aten``), cuBLAS's, the statuses
    and each failure status's first reason. ``pdl_credit``: the best is picked by ``ranked_ms``
    (a strip with a ``-pdl`` twin counted that fraction faster); its own time is reported."""
    # Only rows timed under this process's fp32 arithmetic: the table's picks must be its own.
    rows = db.done(ctx, s.problem.key, precision_tag(s.problem))
    ids = {c.id for c in cands}
    rel = [r for cid, r in rows.items() if cid in ids]
    statuses = Counter(r.status for r in rel)
    ok = [r for r in rel if r.status == Status.OK and r.device_ms is not None and math.isfinite(r.device_ms)]
    lb, op = s.problem.layout_b, s.problem.op
    best = min(ok, key=lambda r: (ranked_ms(r.choice_id, r.device_ms, lb, pdl_credit, op), r.choice_id)) if ok else None
    best = prefer_aten(best, next((r for r in ok if r.choice_id == "aten"), None), min_gain,
                       ranked_ms(best.choice_id, 1.0, lb, pdl_credit, op) if best is not None else 1.0)
    aten = rows.get("aten")
    reasons: dict[str, str] = {}
    for r in sorted(rel, key=lambda r: r.choice_id):
        if r.status != Status.OK and r.status not in reasons:
            reasons[r.status] = reason_line(r.reason or "")
    return ShapeResult(s.name, s.group, s.problem, best.choice_id if best else None,
                       best.device_ms if best else None,
                       aten.device_ms if aten is not None and aten.status == Status.OK else None,
                       len(rel), sum(statuses[f] for f in FAILED), dict(statuses), reasons,
                       # A crash, timeout or other error may have been the machine's (another
                       # process's OOM), not a verdict on the candidate: its earlier table time stays.
                       measured_ids=frozenset(r.choice_id for r in rel if r.status not in RETRYABLE))


def table_of(shapes: list[ShapeResult], ctx: RunContext) -> LookupTable:
    """The winners of ``shapes`` as a lookup table made under ``ctx``."""
    from .. import __version__
    table = LookupTable(provenance(ctx.device_name, ctx.capability, ctx.torch_version,
                                   ctx.triton_version, __version__, "tuned"))
    for s in shapes:
        if s.best is not None:
            table.entries[s.problem.key] = [TableChoice(Choice.parse(s.best), s.best_ms)]
    return table


def superseded(earlier: LookupTable, shapes: list[ShapeResult]) -> LookupTable:
    """``earlier`` without the choices each of ``shapes`` has a verdict on in this run
    (``ShapeResult.measured_ids``: timed, wrong, refused by the compiler or the family; not a
    crash, timeout or error, which may have been the machine's): the run's verdict on them
    replaces the older times. An entry left with no choice is dropped. Choices the run did not
    measure stay as they were.

    Without this, merging kept an older, faster time of a choice that this run measured and
    did not keep (measured slower, failed or wrong under a newer Triton, lost the run-off or
    ``min_gain``), and put that choice first again."""
    out = LookupTable(dict(earlier.provenance), {k: list(v) for k, v in earlier.entries.items()},
                      source=earlier.source)
    for s in shapes:
        tcs = out.entries.get(s.problem.key)
        if tcs is None or not s.measured_ids:
            continue
        kept = [tc for tc in tcs if tc.choice.id not in s.measured_ids]
        if kept:
            out.entries[s.problem.key] = kept
        else:
            del out.entries[s.problem.key]
    return out


def table_to_merge(out, overwrite: bool) -> LookupTable | None:
    """The table at ``out`` that a run merges its winners into (None: no ``out``, none there yet,
    or ``overwrite``), read before the sweep so that a bad one fails before anything is measured.
    A file that is not a valid table is a ValueError that says it is the ``out`` table, and how to
    replace it."""
    if out is not None:
        refuse_results_store(out, "the table (--out)")  # before the sweep, --overwrite or not
    if out is None or overwrite or not Path(out).exists():
        return None
    try:
        return as_table(out)
    except ValueError as e:
        raise ValueError(f"{e}; this is the table the run would merge its winners into (--out): fix or move it, "
                         "or pass --overwrite (overwrite=True) to replace it") from None


def write_table(shapes: list[ShapeResult], ctx: RunContext, out, overwrite: bool):
    """The winners as a lookup table, written to ``out`` when given (merged into an existing
    one unless ``overwrite``; for the shapes of this run, the existing table's choices that this
    run measured give way to this run's results: ``superseded``). Returns (table, path or None)."""
    table = table_of(shapes, ctx)
    table_path = None
    if out:
        with locked(out):  # a run sharing the table waits: neither drops the other's entries
            if not overwrite and Path(out).exists():
                from ..table import merge
                # Never destroy an earlier table: merge into it (read again: a run sharing it may
                # have written it since; one from another GPU was refused before the sweep).
                table = merge([superseded(as_table(out), shapes), table])
            table_path = table.save(out)
    return table, table_path


class Recorder:
    """One run's view of the results store ``db`` under the run context ``ctx``.

    ``retry_failed``: crashed, timed-out and errored results count as not done (measured
    again); ``timeout``: a candidate's limit, which sets how long a claim is held;
    ``min_gain``: see ``prefer_aten``."""

    def __init__(self, db: ResultStore, ctx: RunContext, *, retry_failed: bool = False, timeout: float = 120.0,
                 owner: str | None = None, sleep: Callable[[float], None] = time.sleep, min_gain: float = 0.0,
                 pdl_credit: float = 0.0):
        self.db, self.ctx = db, ctx
        self.min_gain = min_gain
        self.pdl_credit = pdl_credit
        self.retry_failed, self.timeout = retry_failed, timeout
        self.owner = owner or claim_owner()  # this tuner, in the store's claims
        self.redo = RETRYABLE if retry_failed else ()
        self.sleep = sleep
        self.recorded = 0

    def pending(self, problem: Problem, cands: list[Choice]):
        """(results to reuse by choice id, [(problem, choice)] still to measure)."""
        # A row of an fp32 TF32-off problem timed under the other fp32 arithmetic (or unknown, from a
        # version-1 store) is not done: it is measured again and replaced (ResultStore.done).
        done = self.db.done(self.ctx, problem.key, precision_tag(problem))
        if self.retry_failed:
            # Crashes, hangs and errors can be transient (a busy GPU, a killed worker):
            # measure those again; wrong results stay.
            done = {k: r for k, r in done.items() if r.status not in RETRYABLE}
        return done, [(problem, c) for c in cands if c.id not in done]

    def record(self, problem: Problem, choice: Choice, res: dict) -> None:
        self.db.record(self.ctx, result_row(problem, choice, res))
        self.recorded += 1

    def record_compile_failures(self, todo, compiled: dict):
        """Record the candidates of ``todo`` that failed to compile (``compiled``: compile
        results by (problem key, choice id)); return the rest, to benchmark. A candidate
        without a compile result is benchmarked (its worker compiles it)."""
        keep = []
        for p, c in todo:
            res = compiled.get((p.key, c.id))
            if res is not None and res.get("status") in FAILED:
                self.db.record(self.ctx, result_row(p, c, res))
            else:
                keep.append((p, c))
        return keep

    def claim(self, problem: Problem, todo) -> tuple[list, list]:
        """Split ``todo`` into (what this tuner claimed and measures, what other tuners sharing
        the store hold and ``await_others`` waits for)."""
        mine = set(self.db.claim(self.ctx, problem.key, [c.id for _, c in todo], self.owner,
                                 claim_ttl(self.timeout, len(todo)), self.redo, precision_tag(problem)))
        return [pc for pc in todo if pc[1].id in mine], [pc for pc in todo if pc[1].id not in mine]

    def await_others(self, problem: Problem, others: list, measure) -> int:
        """Wait until the candidates other tuners claimed have results; any whose claim expired
        (its tuner died) is claimed and measured here (``measure(todo)``). Returns how many
        came from the others."""
        got = 0
        while others:
            came, take, others = self.poll_others(problem, others)
            got += came
            if take:
                measure(take)
            elif others:
                self.sleep(POLL_S)
        return got

    def poll_others(self, problem: Problem, others: list) -> tuple[int, list, list]:
        """One look at what other tuners claimed (``await_others``'s step, which the cluster driver
        takes between its own tasks): (how many now have results, those whose claim expired and
        this tuner now holds, those still held by the others)."""
        done = {cid for cid, r in self.db.done(self.ctx, problem.key, precision_tag(problem)).items()
                if r.status not in self.redo}
        came = sum(pc[1].id in done for pc in others)
        others = [pc for pc in others if pc[1].id not in done]
        if not others:
            return came, [], []
        take = set(self.db.claim(self.ctx, problem.key, [c.id for _, c in others], self.owner,
                                 claim_ttl(self.timeout, len(others)), self.redo, precision_tag(problem)))
        return came, [pc for pc in others if pc[1].id in take], [pc for pc in others if pc[1].id not in take]

    def release(self, problem: Problem | None = None) -> None:
        """Drop this tuner's claims on ``problem``, or on every problem (None)."""
        self.db.release(self.ctx, None if problem is None else problem.key, self.owner)

    def renew(self) -> None:
        """Keep this tuner's claims for another ``claim_ttl`` of one candidate (ResultStore.renew)."""
        self.db.renew(self.ctx, self.owner, claim_ttl(self.timeout, 1))

    def times(self, problem: Problem, cands: list[Choice]) -> dict[str, float]:
        """The verified device times (ms) the store holds for ``cands`` of ``problem``, by choice id."""
        ids = {c.id for c in cands}
        return {cid: r.device_ms for cid, r in self.db.done(self.ctx, problem.key, precision_tag(problem)).items()
                if cid in ids and r.status == Status.OK and r.device_ms is not None}

    def summarize(self, s: Shape, cands: list[Choice]) -> ShapeResult:
        return summarize(s, cands, self.db, self.ctx, self.min_gain, self.pdl_credit)
