"""Serve the tuner's GEMV strips with programmatic dependent launch (``pdl=True``; Hopper+).

A skinny ``-pdl`` strip (kernels.skinny) is launched with PDL: it may start while the kernel
before it is still running, loads its first weight tile, and only then waits (``gdc_wait``) for
that kernel's output. What it gains depends on the kernel before it, which back-to-back tuning
cannot see, so the tuner never ranks ``-pdl`` configs. ``pdl=True`` (``patch``, ``tune_model``,
``load_patched``) gives each dispatcher whose winners include a one-slice CUDA-core strip on a
K-contiguous weight a twin (``attach_twins``: ``d.pdl_twin``) that serves those strips as their
``-pdl`` configs, and a graph that Inductor compiles with its own PDL on calls the twin instead
(torch_ops.pdl_twin_handle, at the op's decomposition). Everywhere else (eager calls, a compile
with Inductor's PDL off) the dispatcher serves its plain strips: the one setting where the twins
were measured to gain is the one where they run.

Measured on an H200 (torch 2.11, triton 3.6; benchmarks/results/2026-11-29-h200-s37), Llama-1B
decode at batch 1, fused + tuned, torch.compile, CUDA graphs, interleaved:

- with Inductor's own PDL on (``torch._inductor.config.triton.enable_pdl = True``), whose
  kernels let the next one launch early: 1.025-1.061x the same winners without PDL (four runs),
  and 1.051x max-autotune compiled with Inductor's PDL on as well;
- with it off: 0.969-0.979x. Each strip then follows a kernel that knows no PDL and runs 0.3-1.1
  us slower than its plain twin (call 2 there: timed after a spacer kernel); hence no twin there;
- Inductor's PDL alone: 0.985-0.992x.

For inference: a weight updated in place right before a ``-pdl`` GEMM would be read before the
update finishes.

Why the inputs are safe: a kernel launched with PDL starts early only where the kernel before it
triggers that (``griddepcontrol.launch_dependents``); one that never does (cuBLAS, cuDNN, ATen,
Inductor's kernels with its PDL off) triggers at its exit, so the strip starts after it as without
PDL. Every kernel that does trigger early (Inductor's with its PDL on, these strips) waits for the
kernel before it before it reads any activation, so a kernel's completion implies its
predecessors', and the strip's ``gdc_wait`` covers the whole chain. Only the weight tile loaded
before that wait is read early. The other way round, an Inductor kernel after the strip waits
before its first load too: Inductor skips the wait only where its scheduler's previous node wrote
nothing the kernel reads, and after an extern kernel (the ``gemmtune::mm`` op) it has no previous
node (torch 2.11, ``Scheduler.previous_node``), so it waits.
"""
from __future__ import annotations

import os
import sys
import warnings
from dataclasses import replace
from typing import Iterable, Mapping

from .configs import Choice


def pdl_twin(choice: Choice | str, layout_b: str) -> Choice:
    """The ``-pdl`` twin of a one-slice CUDA-core skinny strip on a K-contiguous B (``layout_b``
    'col', a Linear's weight), else ``choice`` itself (as a Choice). Pure.

    >>> pdl_twin("skinny:BM1-BN4-BK1024-SK1-S1-W4-core-det", "col").id
    'skinny:BM1-BN4-BK1024-SK1-S1-W4-core-det-pdl'
    >>> [pdl_twin(c, lb).id for c, lb in [("skinny:BM1-BN4-BK1024-SK2-S1-W4-core-det", "col"),
    ...                                    ("skinny:BM1-BN4-BK1024-SK1-S1-W4-core-det", "row"), ("aten", "col")]]
    ['skinny:BM1-BN4-BK1024-SK2-S1-W4-core-det', 'skinny:BM1-BN4-BK1024-SK1-S1-W4-core-det', 'aten']
    """
    ch = choice if isinstance(choice, Choice) else Choice.parse(str(choice))
    c = ch.config
    # pad+ copies first (validate refuses it with -pdl); split and stream-K have no prefetch path
    # (skinny_spec.pdl_misfit). The tl.dot and N-contiguous paths peel their first step too, but
    # only the CUDA-core strip on a K-contiguous B was measured in a model (session 37).
    if ch.family != "skinny" or ch.pad or layout_b != "col" or c.dot or c.split_k != 1 or c.stream_k or c.pdl:
        return ch
    return Choice("skinny", replace(c, pdl=True))


# What ``pdl=True`` credits a strip that has a ``-pdl`` twin, against cuBLAS, when its tuning call
# picks a winner (``tune(pdl_credit=...)``; ``tune_model(pdl=True)`` passes it on Hopper): its
# time alone is counted this fraction lower. Why: the tuner times kernels alone, without PDL, and
# a twin served in a graph compiled with Inductor's PDL gains on its plain self where cuBLAS gains
# nothing. Measured on an H200: a chain of 32 pointwise -> GEMV pairs (1 x 16384 x 2048 and back)
# ran 1.028x (BN8 strip) and 1.037x (BN2) faster with the twins than with the plain strips
# (benchmarks/results/2026-11-30-h200-s42, call 1); Llama-1B's decode step with every strip
# twinned 1.025-1.061x (s37). There, Llama-1B's fused gate/up stayed on cuBLAS in worker-tuned
# runs though its BN8 strip timed 17.8 against 18.4 us alone in session 41: the run-off's 1% tie
# rule and the noise between the two timings decided a shape the twin would have won. 0.02 is
# below the smallest gain measured.
PDL_CREDIT = 0.02


def credited(choice_id: str, layout_b: str, op: str = "mm") -> bool:
    """Whether ``choice_id`` is served by a ``-pdl`` twin under ``pdl=True`` at ``layout_b`` (a
    one-slice CUDA-core skinny strip on a K-contiguous B) for a problem of ``op``: the choices
    ``pdl_credit`` applies to. Pure.

    >>> credited("skinny:BM1-BN8-BK512-SK1-S1-W4-core-det-flat-sum", "col"), credited("aten", "col")
    (True, False)
    >>> credited("skinny:BM1-BN8-BK512-SK1-S1-W4-core-det-flat-sum", "row")
    False
    >>> credited("skinny:BM1-BN8-BK512-SK1-S1-W4-core-det-flat-sum", "col", "scaled_mm")
    False
    """
    # Only a dispatcher serves twins (attach_twins): gemmtune.scaled_mm runs a table's strip plain.
    if op == "scaled_mm" or not choice_id.startswith("skinny:"):
        return False
    try:
        ch = Choice.parse(choice_id)
    except ValueError:
        return False
    return pdl_twin(ch, layout_b) is not ch  # (pdl_twin gives back the choice it has no twin for)


def credit_kwargs(tune_kwargs: dict) -> dict:
    """``tune_kwargs`` (for ``gemmtune.tune``) with ``pdl_credit=PDL_CREDIT`` where ``pdl=True``'s
    twins run with PDL (this GPU is a Hopper or later) and the caller chose no credit; else as
    they are (off a GPU, the interpreter runs the twins without PDL; a cluster run, which has no
    run-off to weigh the credit in, picks by time)."""
    if "pdl_credit" in tune_kwargs or tune_kwargs.get("cluster") is not None:
        return tune_kwargs
    cap = _capability()
    if cap is None or cap < (9, 0):
        return tune_kwargs
    return dict(tune_kwargs, pdl_credit=PDL_CREDIT)


def twin_table(table):
    """``table`` (a LookupTable) with every entry's choices replaced by ``pdl_twin`` at the B
    layout its key names (an entry whose key does not parse is left as it is); a new table."""
    from .problem import Problem

    entries = {}
    for key, tcs in table.entries.items():
        try:
            layout_b = Problem.from_key(key).layout_b
        except ValueError:
            entries[key] = tcs
            continue
        entries[key] = [replace(tc, choice=pdl_twin(tc.choice, layout_b)) for tc in tcs]
    return replace(table, entries=entries)


def _capability() -> tuple[int, int] | None:
    """The current CUDA device's compute capability; None off a GPU (the interpreter runs
    ``-pdl`` strips without PDL)."""
    import torch
    return tuple(torch.cuda.get_device_capability()) if torch.cuda.is_available() else None


def _caller_level() -> int:
    """``warnings.warn``'s stacklevel, from the function that calls this one, of the first frame
    outside gemmtune: these warnings are reached at several depths (patch, tune_model through
    _tune_model, load_patched, attach_twins), and a fixed level named gemmtune's own lines."""
    here = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(here):
        frame, level = frame.f_back, level + 1
    return level


def _too_old(cap: tuple[int, int] | None) -> bool:
    """Whether ``cap`` is a GPU before Hopper (warned: the plain strips are served)."""
    if cap is not None and cap < (9, 0):
        warnings.warn(f"gemmtune: pdl=True needs compute capability 9.0 or later (Hopper); this GPU is "
                      f"{cap[0]}.{cap[1]}, so the tuned kernels are served without PDL", RuntimeWarning, stacklevel=_caller_level())
        return True
    return False


def twin_dispatcher(d):
    """A new Dispatcher serving ``d``'s hint winners (and its table's entries) as their ``-pdl``
    twins, ``d`` itself untouched; ``d`` where nothing changes, or before Hopper (warned)."""
    from .dispatch import Dispatcher

    hcs = [replace(h, choice=pdl_twin(h.choice, d.layout_b)) for h in d.hint_choices]
    table = None if d.table is None else twin_table(d.table)
    # The table counts too: a table dispatcher serves its exact entries before the hints, and the
    # addmm entries to calls with a bias, so strips there had no twin behind cuBLAS hint winners.
    # Only entries of its own shapes: a table shared by a model's dispatchers holds the others'.
    twinned = table is not None and any(_serves(d, key) for key, tcs in table.entries.items()
                                        if tcs != d.table.entries[key])
    if (hcs == list(d.hint_choices) and not twinned) or _too_old(_capability()):
        return d
    return Dispatcher(dims=d.dims, dtype=d.dtype, hints=d.hints, hint_choices=hcs, mode=d.mode, table=table,
                      timer=d.timer, verify=d.verify, layout_a=d.layout_a, layout_b=d.layout_b,
                      provenance=d.provenance, batch=getattr(d, "batch", None))


def _serves(d, key: str) -> bool:
    """Whether the table key ``key`` names a problem that dispatcher ``d`` may look up: its dtype
    and layouts, and its static sizes."""
    from .problem import Problem
    try:
        p = Problem.from_key(key)
    except ValueError:
        return False
    return (p.dtype, p.layout_a, p.layout_b) == (d.dtype, d.layout_a, d.layout_b) and all(
        d.dims[x] in (None, getattr(p, x)) for x in ("m", "n", "k"))


def attach_twins(dispatchers: Mapping | Iterable) -> int:
    """Give each dispatcher (a mapping's values, or an iterable) whose winners have ``-pdl`` twins
    its twin (``twin_dispatcher``) as ``d.pdl_twin``: what a graph compiled with Inductor's PDL on
    calls in its place (torch_ops.pdl_twin_handle). Returns how many got one."""
    from .torch_ops import REGISTRY

    n = 0
    for d in (dispatchers.values() if isinstance(dispatchers, Mapping) else dispatchers):
        if getattr(d, "pdl_twin", None) is None:
            t = twin_dispatcher(d)
            if t is not d:
                d.pdl_twin = t
                # Registered now, not when a graph is first lowered: a graph that Inductor's
                # on-disk caches give back to a later process names the twin's handle without
                # lowering anything, and the handle is the twin's content digest (torch_ops).
                REGISTRY.register(t)
        n += getattr(d, "pdl_twin", None) is not None
    return n


def warn_if_training(model, where: str) -> None:
    """Warn where ``model`` has parameters that require grad: ``-pdl`` strips read their first
    weight tile before the kernel ahead of them ends, so they are for inference."""
    training = sum(p.requires_grad for p in model.parameters())
    if training:
        warnings.warn(f"gemmtune.{where}(pdl=True): {training} parameter(s) of this model require grad. -pdl GEMMs "
                      "read their first weight tile before the kernel ahead of them ends, so they are for inference: "
                      "an in-place weight update compiled with Inductor's PDL on, right before one, could be read "
                      "half done (model.requires_grad_(False) for inference)", RuntimeWarning, stacklevel=_caller_level())
