"""What a tuning run returns (``ShapeResult`` per shape, ``TuneResult``) and how it is shown:
the JSON summary, the failure lines and the rich table."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..bench import status as _status
from ..bench.status import Status
from ..problem import Problem
from ..store import RunContext
from ..table import LookupTable

FAILED = tuple(s.value for s in _status.FAILED)


@dataclass
class ShapeResult:
    name: str
    group: str
    problem: Problem
    best: str | None
    best_ms: float | None
    aten_ms: float | None
    tried: int
    failed: int
    statuses: dict = field(default_factory=dict)
    # status -> the first failure's reason (one line), so that a summary can say why
    reasons: dict = field(default_factory=dict)
    # Wall time from the moment the tuner turned to this shape until its last result was
    # in: the wait for whatever of its compilation had not already run ahead (during the
    # previous shapes' benchmarking), then its verification and timing. Compile work done
    # ahead is not counted here, so the shapes' tune_s add up to the run's wall time
    # (less start-up). Near 0 when every candidate was reused.
    tune_s: float = 0.0
    # Of tune_s, the seconds this shape waited for its compile workers' job (0 without compile
    # workers, or where the job was done when the shape's turn came). A first shape that waits
    # long is waiting for the compile workers' start-up.
    compile_wait_s: float = 0.0
    # How many of the model's best were benchmarked (cuBLAS and table choices on top) and
    # why: 'fixed' for benchmark_space=k / DEFAULT, choose_k's reason for 'AUTO'; None
    # when every candidate was benchmarked or a table entry fixed them.
    k: int | None = None
    k_reason: str | None = None
    # The run-off between a close winner and cuBLAS (tuning.runoff): both times and the one
    # kept, or why it could not run; None when there was none.
    runoff: dict | None = None
    # The candidates of this shape that have a result (any status) in the run's context: the run's
    # verdict on each. ``tune --out`` merging into an earlier table drops that table's times for
    # these (tuning.recorder.write_table): a choice this run measured and did not keep (slower,
    # wrong, failed to compile, lost the run-off or --min-gain) must not stay first on an older
    # time. Crashes, timeouts and errors (RETRYABLE: perhaps the machine's) are left out.
    measured_ids: frozenset = frozenset()
    # Each family the caller named that offered this shape no candidate, with why (plan.offered_nothing).
    offered_nothing: dict = field(default_factory=dict)

    @property
    def speedup(self) -> float | None:
        if self.best_ms and self.aten_ms:
            return self.aten_ms / self.best_ms
        return None


@dataclass(frozen=True)
class TableCoverage:
    """How many of a run's problems (distinct keys) a lookup table given to ``tune`` (``--table``)
    has an entry for, and the keys of those it has none for: an exact key match, dtype, layout
    and op included. Those are tuned with the usual candidates, as without a table. ``source``:
    the table's path, where it was given as one.

    >>> TableCoverage(1, 3, ("mm:M1-N2-K3:...", "mm:M4-N5-K6:...")).line(limit=1)
    'the lookup table covers 1 of the 3 shapes; the other 2 have no entry and are tuned in full: mm:M1-N2-K3:... and 1 more'
    >>> TableCoverage(2, 2, (), "t.json").line(), TableCoverage(2, 2).brief
    ('the lookup table t.json covers all 2 shapes', 'lookup table covered 2 of 2 shapes')
    """
    covered: int
    total: int
    uncovered: tuple = ()
    source: str | None = None

    @property
    def brief(self) -> str:
        return f"lookup table covered {self.covered} of {self.total} shape{'s' if self.total != 1 else ''}"

    def line(self, limit: int = 5, how: str = "tuned in full") -> str:
        """One line for the user: the counts, and the first ``limit`` uncovered keys."""
        where = f" {self.source}" if self.source else ""
        if not self.uncovered:
            return f"the lookup table{where} covers all {self.total} shape{'s' if self.total != 1 else ''}"
        left = len(self.uncovered)
        names = ", ".join(self.uncovered[:limit]) + (f" and {left - limit} more" if left > limit else "")
        other = f"the other {left} have" if left > 1 else "the other has"
        return (f"the lookup table{where} covers {self.covered} of the {self.total} shapes; {other} no entry "
                f"and {'are' if left > 1 else 'is'} {how}: {names}")


@dataclass
class TuneResult:
    shapes: list[ShapeResult]
    context: RunContext
    representative: bool
    wall_s: float
    measured: int
    reused: int
    table: LookupTable | None = None
    table_path: Path | None = None
    store_path: Path | None = None
    # Of wall_s, the time the benchmark worker(s) waited for compilation to finish
    # (with compile workers only): much of wall_s here means compiling is the bottleneck.
    compile_wait_s: float = 0.0
    # Of wall_s, the time until the benchmark worker answered (its torch import and CUDA
    # context; the compile workers start at the same time), and the number of compile
    # workers started (compile_pool_size; 0: the benchmark worker compiled).
    startup_s: float = 0.0
    compile_workers: int = 0
    # Work left unrecorded, one line each (a cluster run: a task that failed on every try,
    # or results from a worker on another device); a rerun measures it.
    rejected: list = field(default_factory=list)
    # Of wall_s, the seconds the benchmark worker spent compiling candidates together on threads
    # before timing them (runs without compile workers: bench.measure.precompile), and how many.
    precompile_s: float = 0.0
    precompiled: int = 0
    # What of the run's shapes the lookup table given to it (``table=``, ``--table``) covered;
    # None without one.
    table_coverage: TableCoverage | None = None


def reason_line(reason: str, width: int = 200) -> str:
    """A failure reason in one line for a summary: its first line, and for a Triton
    compilation error, whose first line only says where ("at 12:4:"), its last line too
    (the error itself, after the quoted source).

    >>> reason_line("CompilationError: at 3:8:\\n    acc = tl.dot(a, b)\\n        ^\\nValueError('bad')")
    "CompilationError: at 3:8: ... ValueError('bad')"
    """
    lines = [ln.strip() for ln in reason.strip().splitlines() if ln.strip()]
    if not lines:
        return ""
    line = lines[0]
    if len(lines) > 1 and re.search(r"\bat \d+:\d+:?$", line):
        line = f"{line} ... {lines[-1]}"
    return line[:width]


def summary(result: TuneResult) -> dict:
    """Everything the per-shape table shows, as JSON-able data."""
    return {
        "context": result.context.__dict__, "representative": result.representative,
        "wall_s": result.wall_s, "measured": result.measured, "reused": result.reused,
        "compile_wait_s": result.compile_wait_s, "startup_s": result.startup_s,
        "compile_workers": result.compile_workers,
        "precompile_s": result.precompile_s, "precompiled": result.precompiled,
        "table_coverage": None if result.table_coverage is None else {
            "covered": result.table_coverage.covered, "total": result.table_coverage.total,
            "uncovered": list(result.table_coverage.uncovered)},
        "shapes": [{"group": s.group, "name": s.name, "key": s.problem.key, "best": s.best,
                    "best_ms": s.best_ms, "aten_ms": s.aten_ms, "speedup": s.speedup,
                    "tried": s.tried, "failed": s.failed, "statuses": s.statuses, "tune_s": s.tune_s,
                    "compile_wait_s": s.compile_wait_s, "k": s.k, "k_reason": s.k_reason, "runoff": s.runoff,
                    "offered_nothing": s.offered_nothing}
                   for s in result.shapes],
    }


def failure_lines(result: TuneResult) -> list[str]:
    """One line per shape with failures: the count of each failure status and the first
    reason of each, so that 'failed 15' says why (e.g. every candidate's compile error).

    >>> s = ShapeResult("x", "cli", Problem.from_sizes(4, 4, 4), None, None, None, 3, 3,
    ...                 {"compile_error": 3}, {"compile_error": "CompilationError: bad"})
    >>> failure_lines(TuneResult([s], None, False, 0.0, 3, 0, None, None, None))
    ['x: failed 3: compile_error x3 (CompilationError: bad)']
    """
    lines = []
    for s in result.shapes:
        if not s.failed:
            continue
        parts = [f"{st} x{n}" + (f" ({s.reasons[st]})" if s.reasons.get(st) else "")
                 for st, n in sorted(s.statuses.items()) if st != Status.OK and st in FAILED]
        lines.append(f"{s.name}: failed {s.failed}: " + ", ".join(parts))
    return lines


def offered_nothing_lines(result: TuneResult) -> list[str]:
    """One line per shape and named family that offered it no candidate, with why.

    >>> s = ShapeResult("x", "cli", Problem.from_sizes(4, 4, 4), "aten", 1e-3, 1e-3, 1, 0,
    ...                 offered_nothing={"skinny": "1 config rejected, e.g. too big"})
    >>> offered_nothing_lines(TuneResult([s], None, False, 0.0, 1, 0, None, None, None))
    ['x: skinny offered no candidate (1 config rejected, e.g. too big)']
    """
    return [f"{s.name}: {fam} offered no candidate ({why})" for s in result.shapes
            for fam, why in s.offered_nothing.items()]


def runoff_lines(result: TuneResult) -> list[str]:
    """One line per shape whose winner was timed again beside cuBLAS (tuning.runoff).

    >>> s = ShapeResult("x", "cli", Problem.from_sizes(4, 4, 4), "aten", 1e-3, 1e-3, 3, 0,
    ...                 runoff={"ms": {"t": 1.1e-3, "aten": 1e-3}, "kept": "aten"})
    >>> runoff_lines(TuneResult([s], None, False, 0.0, 3, 0, None, None, None))
    ['x: run-off against cuBLAS: t 1.10 us, aten 1.00 us: kept aten']
    """
    lines = []
    for s in result.shapes:
        ro = s.runoff
        if not ro:
            continue
        times = ", ".join(f"{c} {ms * 1e3:.2f} us" for c, ms in (ro.get("ms") or {}).items() if ms)
        tail = f"kept {ro['kept']}" if "kept" in ro else f"not decided ({ro.get('error', '?')}): kept {s.best}"
        lines.append(f"{s.name}: run-off against cuBLAS: " + (f"{times}: " if times else "") + tail)
    return lines


def render(result: TuneResult, console=None) -> None:
    """Print the per-shape summary table (rich)."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console(width=None if sys.stdout.isatty() else 160)
    title = f"gemmtune tune on {result.context.device_name}"
    if not result.representative:
        title += "  [bold yellow](CPU interpreter: timings NOT representative)[/]"
    t = Table(title=title)
    num = ("best µs", "aten µs", "speedup", "tried", "failed", "tune s")
    with_k = any(s.k is not None for s in result.shapes)
    num += ("model k",) if with_k else ()
    for col in ("shape", "problem", "best choice") + num:
        t.add_column(col, justify="right" if col in num else "left",
                     overflow="fold", no_wrap=col != "best choice")
    for s in result.shapes:
        bias = " +bias" if s.problem.op == "addmm" else ""
        batch = f"{s.problem.batch}x" if s.problem.op == "bmm" else ""  # bmm: batch x M x N x K
        t.add_row(s.name, f"{batch}{s.problem.m}x{s.problem.n}x{s.problem.k} {s.problem.dtype}{bias}",
                  s.best or "-", f"{s.best_ms * 1e3:.2f}" if s.best_ms else "-",
                  f"{s.aten_ms * 1e3:.2f}" if s.aten_ms else "-",
                  f"{s.speedup:.2f}x" if s.speedup else "-", str(s.tried), str(s.failed),
                  f"{s.tune_s:.1f}", *([f"{s.k}" if s.k is not None else "-"] if with_k else []))
    console.print(t)
    for line in offered_nothing_lines(result) + failure_lines(result) + runoff_lines(result):
        console.print(line, markup=False)
    console.print(f"{result.measured} measured, {result.reused} reused from {result.store_path}, "
                  f"{result.wall_s:.1f} s ({result.startup_s:.1f} s worker start-up"
                  + (f", {result.precompile_s:.1f} s compiling {result.precompiled} together" if result.precompiled else "")
                  + ")"
                  + (f"; {result.table_coverage.brief}" if result.table_coverage is not None else "")
                  + (f"; table -> {result.table_path}" if result.table_path else ""))
