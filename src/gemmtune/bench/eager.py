"""A gemmtune choice's eager per-call cost as a model pays it: through the dispatcher.

``gemmtune bench`` times every method's kernel from CUDA graphs. Its ``eager`` time is the wall
time per call of the launch that was verified, which for gemmtune's modes is the generic path
(``kernels.run_choice``: the family looked up and the config checked on every call). A model calls
gemmtune through a dispatcher instead (``compile_mm``, ``gemmtune.nn.Linear``, ``patch``): one
prepared launch per shape, which allocates its output as ``torch.mm`` does. ``dispatch_launch``
builds that dispatcher for one choice, with nothing tuned; ``bench.suite.dispatch_eager`` times calls
to it (``timing.wall_ms_per_call``), so that the report can show beside cuBLAS's eager time what a
call costs on the path a model takes.
"""

from __future__ import annotations

from typing import Callable, Sequence

from ..problem import Problem
from .inductor import held_launch

EAGER_CALLS = 20
# Untimed calls first: the dispatcher's first call of a shape prepares its launch.
EAGER_WARMUP = 2


def dispatch_launch(problem: Problem, choice: str, inputs: Sequence[tuple]) -> Callable[[int], None]:
    """``launch(i)``: ``dispatcher(*inputs[i])`` for a ``compile_mm`` dispatcher of ``problem``'s
    static sizes that serves ``choice`` (no tuning, no first-call fp64 check: the bench verified the
    choice already). Each output is kept for one pass over the input sets, as Inductor's are
    (``held_launch``). mm with row- or column-major operands only: ValueError otherwise.

    >>> import torch
    >>> p = Problem.from_sizes(3, 5, 4, "float32")
    >>> sets = [(torch.randn(3, 4), torch.randn(4, 5))]
    >>> launch = dispatch_launch(p, "aten", sets); launch(0)
    >>> torch.allclose(launch.held[0], sets[0][0] @ sets[0][1])
    True
    """
    if problem.op != "mm" or problem.layout_a not in ("row", "col") or problem.layout_b not in ("row", "col"):
        raise ValueError(f"the dispatcher's eager time is taken for mm with row- or column-major operands, "
                         f"not {problem.key}")
    from ..dispatch.build import compile_mm

    def tune_fn(problems, **_):  # the choice the bench verified, for the one hint problem
        return {q: choice for q in problems}

    disp = compile_mm(m=problem.m, n=problem.n, k=problem.k, dtype=problem.dtype, layout_a=problem.layout_a,
                      layout_b=problem.layout_b, tune_fn=tune_fn, verify=False, progress=False)
    return held_launch(disp, inputs)
