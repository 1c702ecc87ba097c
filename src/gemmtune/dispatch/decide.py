"""How the dispatcher decides a shape the first time it sees it: the candidates (the table's exact
entry, the hint kernels by similarity), whether each can run here, its check against fp64, the
benchmark mode's timing, and the table's addmm winner for calls with a bias (a mixin of Dispatcher)."""

from __future__ import annotations

import contextlib
import math
import warnings

import torch

from .. import kernels
from ..configs import Choice
from ..problem import Problem
from ..verify import check as verify_check
from .common import ATEN, Decision, HintChoice, _interp_guard, _pkg, rank_hints


class Deciding:
    """Dispatcher's decisions (``self.hint_choices``, ``self.table``, ``self.mode``, ... are its)."""

    def _interp(self, device: torch.device) -> bool:
        return device.type == "cpu" and _pkg().interpreter_enabled()

    def _runnable(self, choice: Choice, problem: Problem, device: torch.device) -> str | None:
        """Why ``choice`` cannot run ``problem`` here (None when it can)."""
        if choice.family in kernels.TRITON_FAMILIES and device.type == "cpu" and not _pkg().interpreter_enabled():
            return "Triton kernels need CUDA (or TRITON_INTERPRET=1) and these tensors are on the CPU"
        try:
            kernels.validate_choice(choice, problem)
        except (ValueError, TypeError) as e:
            return str(e)
        return None

    def _verify(self, choice: Choice, problem: Problem, device: torch.device) -> str | None:
        """Run ``choice`` on fresh random inputs of ``problem`` (an addmm problem's with a bias);
        the reason it is wrong, or None."""
        from ..bench.measure import epilogue_for, make_bias, make_inputs

        if choice == ATEN:
            return None  # torch.mm (torch.addmm) is the reference itself
        try:
            ((a, b),) = make_inputs(problem, str(device), 1, seed=0)
            bias = make_bias(problem, str(device), seed=0)
            out = torch.full(problem.out_shape, math.nan, dtype=problem.torch_out_dtype, device=device)
            kernels.run_choice(choice, a, b, out, allow_tf32=problem.allow_tf32, workspace=self._workspace,
                               epilogue=epilogue_for(bias))
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            res = verify_check(out, a, b, problem, bias)
        except Exception as e:  # failures are data: try the next candidate
            return f"{type(e).__name__}: {e}"[:500]
        return None if res.ok else res.reason

    def _addmm_choice(self, m: int, n: int, k: int, a, b, mm_choice: Choice) -> Choice:
        """The kernel of a call with a bias: the table's addmm winner for the shape (the first
        of its entry's choices that runs and verifies here, bias included), else ``mm_choice``
        (the shape's decision, the bias fused in its epilogue). Decided once per shape, at its
        first call with a bias: never on the cached path."""
        if (m, n, k) not in self._addmm:
            self._addmm[(m, n, k)] = self._decide_addmm(m, n, k, a, b)
        hit = self._addmm[(m, n, k)]
        if hit is not None and self._runnable(hit.choice, Problem.from_tensors(a, b, op="addmm"), a.device):
            return mm_choice  # decided on a device these operands are not on (see Dispatcher._decision_for)
        return mm_choice if hit is None else hit.choice

    def _table_keys(self, m: int, n: int, k: int, *, op: str = "mm", batch: int | None = None,
                    seen: Problem | None = None) -> list[str]:
        """The table keys a call of the size looks up, in order: that of the call's own layouts
        (``seen``, the problem of the call being decided), then that of the declared layouts.

        One dispatcher serves calls in the layouts the model gives them: a bmm's q @ k^T with a
        column-major B and p @ v row-major, a Linear's ``x @ W.t()`` on a dispatcher declared
        row-major. Only the declared layouts' key was looked up (for mm and addmm), so a tuned
        entry of the call's own layout was never served and cuBLAS or a hint ran, without a
        word. No other layout's entry is looked up, and whichever entry a choice comes from, it
        is checked on the call's own problem before it runs (``_runnable``; ``_verify`` with
        verify on). A decision is still per size: a later call of that size in another layout
        runs it too, its launch reading the strides it is given."""
        more = {"op": "bmm", "batch": batch} if batch is not None else {"op": op}
        declared = Problem.from_sizes(m, n, k, self.dtype, layout_a=self.layout_a, layout_b=self.layout_b,
                                      **more).key
        if seen is None:
            return [declared]
        own = Problem.from_sizes(m, n, k, self.dtype, layout_a=seen.layout_a, layout_b=seen.layout_b,
                                 **more).key
        return list(dict.fromkeys([own, declared]))

    def _addmm_entry(self, m: int, n: int, k: int, seen: Problem | None = None) -> list:
        """The table's ``addmm`` choices for the size, best first (its own layouts' entry, then
        the declared layouts': ``_table_keys``), or [] (no table, an empty product, no entry):
        what a call with a bias runs before the size's mm choice (``_decide_addmm``;
        ``expected_choice(bias=True)`` reads it too, with the declared layouts)."""
        if self.table is None or 0 in (m, n, k):
            return []
        out, ids = [], set()
        for key in self._table_keys(m, n, k, op="addmm", seen=seen):
            for tc in self.table.entries.get(key, []):
                if tc.choice.id not in ids:
                    ids.add(tc.choice.id)
                    out.append(tc)
        return out

    def _decide_addmm(self, m: int, n: int, k: int, a, b) -> Decision | None:
        problem = Problem.from_tensors(a, b, op="addmm")  # the layouts and alignment actually seen
        entry = self._addmm_entry(m, n, k, seen=problem)
        if not entry:
            return None
        rejected = []
        with _interp_guard(self._interp(a.device)), (torch.cuda.device(a.device) if a.device.type == "cuda"
                                                     else contextlib.nullcontext()):
            for tc in entry:
                why = self._runnable(tc.choice, problem, a.device)
                if why is None and self.verify:
                    why = self._verify(tc.choice, problem, a.device)
                if why is None:
                    return Decision(tc.choice, "table", verified=self.verify, reason="; ".join(rejected))
                rejected.append(f"{tc.choice.id}: {why}")
        keys = " / ".join(self._table_keys(m, n, k, op="addmm", seen=problem))
        warnings.warn(f"gemmtune: no choice of the table's {keys} entry ran correctly here "
                      f"({'; '.join(rejected)[:500]}); calls with a bias use the shape's mm kernel",
                      RuntimeWarning, stacklevel=5)
        return None

    @property
    def addmm_decisions(self) -> dict[tuple[int, int, int], Decision]:
        """The table's addmm winners that calls with a bias run, by (M, N, K), decided so far."""
        return {s: d for s, d in self._addmm.items() if d is not None}

    def _ranked(self, m: int, n: int, k: int) -> list[HintChoice]:
        """The hints' choices, nearest hint first. A choice compiled for its exact sizes
        (a family with ``PER_SHAPE``: triton_static) serves only its own hint's shape: on any
        other it would compile again at the first call."""
        return [self.hint_choices[i] for i in rank_hints((m, n, k), self._hint_sizes)
                if self._hint_sizes[i] == (m, n, k)
                or not getattr(kernels.get(self.hint_choices[i].choice.family), "PER_SHAPE", False)]

    def _listed(self, m: int, n: int, k: int, batch: int | None = None,
                seen: Problem | None = None) -> list[tuple[Choice, str, tuple | None]]:
        """The candidates for a size before any is run, best first, as (choice, source, hint):
        the table's exact entry (table mode), then the hints' choices, nearest first. ``seen``: the
        problem of the call being decided (its layouts), whose table entry comes first."""
        cands: list[tuple[Choice, str, tuple | None]] = []
        if self.mode == "table" and self.table is not None:
            # The entry of the call's own layouts first (a bmm's broadcast weight, bcast_, is a
            # layout of its own), then the declared layouts' (_table_keys says why).
            for key in self._table_keys(m, n, k, batch=batch, seen=seen):
                cands += [(tc.choice, "table", None) for tc in self.table.entries.get(key, [])]
        return cands + [(h.choice, "similarity", h.sizes) for h in self._ranked(m, n, k)]

    def _decide(self, a, b, m, n, k, previous: Decision | None = None, batch: int | None = None) -> Decision:
        device = a.device
        if m == 0 or n == 0 or k == 0 or batch == 0:
            return Decision(ATEN, "empty", verified=True, reason="empty product: no kernel runs")
        problem = Problem.from_tensors(a, b)  # the layouts and alignment actually seen (3-D: a bmm)
        # Candidates, best first: (choice, source, hint).
        cands: list[tuple[Choice, str, tuple | None]] = []
        if previous is not None:
            cands.append((previous.choice, previous.source, previous.hint))
        cands += self._listed(m, n, k, batch, seen=problem)
        rejected: list[str] = []
        seen, runnable = set(), []
        for c, src, hint in cands:
            if c.id in seen:
                continue
            seen.add(c.id)
            why = self._runnable(c, problem, device)
            if why is None:
                runnable.append((c, src, hint))
            else:
                rejected.append(f"{c.id}: {why}")
        with _interp_guard(self._interp(device)), (torch.cuda.device(device) if device.type == "cuda"
                                                   else contextlib.nullcontext()):
            # A loaded decision is re-verified, not re-timed: loading never benchmarks anew.
            if self.mode == "benchmark" and previous is None:
                return self._benchmark(problem, device, runnable, rejected)
            for c, src, hint in runnable:
                why = self._verify(c, problem, device) if self.verify else None
                if why is None:
                    return Decision(c, src, hint, verified=self.verify, reason="; ".join(rejected))
                rejected.append(f"{c.id}: {why}")
        return Decision(ATEN, "fallback", verified=True,
                        reason="no hint kernel ran correctly: " + "; ".join(rejected))

    def _benchmark(self, problem: Problem, device: torch.device, runnable, rejected) -> Decision:
        from ..bench.measure import WorkerState, measure
        from ..bench.timing import default_timer

        if self.timer is None:
            self.timer = default_timer()
        state = WorkerState(timer=self.timer, device=device.type)
        times: dict[str, float] = {}
        best = None
        try:
            for c, src, hint in runnable:
                res = measure(problem, c, self.timer, state=state)
                ms = res.device_ms
                if res.ok and ms is not None and math.isfinite(ms):
                    times[c.id] = float(ms)
                    if best is None or ms < times[best[0].id]:
                        best = (c, hint)
                else:
                    rejected.append(f"{c.id}: {res.status}: {res.reason}"[:500])
        finally:
            state.release()  # free the inputs now
        if best is None:
            return Decision(ATEN, "fallback", verified=True, times_ms=times,
                            reason="no hint kernel ran correctly: " + "; ".join(rejected))
        return Decision(best[0], "benchmark", best[1], verified=True, times_ms=times,
                        reason="; ".join(rejected))

