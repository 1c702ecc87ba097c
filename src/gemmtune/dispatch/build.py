"""Making dispatchers: ``compile_mm`` (tune one kernel per size hint), ``compile_bmm`` (the same for
batched products) and ``lookup`` (a table's winners, no tuning)."""

from __future__ import annotations

import itertools
import numbers
import os
import warnings
from typing import Callable, Mapping, Sequence

from ..configs import Choice
from ..problem import LAYOUTS, Problem, dtype_name
from ..table import LookupTable, TableChoice
from ..table import provenance as make_provenance
from .common import ATEN, DEFAULT_HINTS, DIMS, MODES, HintChoice, _current_provenance, _pkg
from .core import Dispatcher


def _winners(result, problems: list[Problem]) -> tuple[list[tuple[Choice, float | None]], dict | None,
                                                        LookupTable | None]:
    """Winners per problem from a TuneResult (``.shapes``) or a mapping problem/key -> choice."""
    if hasattr(result, "shapes"):
        by_key = {s.problem.key: (s.best, getattr(s, "best_ms", None)) for s in result.shapes}
        ctx = getattr(result, "context", None)
        prov = None
        if ctx is not None:
            from .. import __version__
            prov = make_provenance(ctx.device_name, ctx.capability, ctx.torch_version,
                                   ctx.triton_version, __version__, "tuned")
        table = getattr(result, "table", None)
    elif isinstance(result, Mapping):
        by_key = {}
        for p, c in result.items():
            by_key[p.key if isinstance(p, Problem) else str(p)] = (c, None)
        prov, table = None, None
    else:
        raise TypeError("tune_fn must return a TuneResult (with .shapes) or a mapping "
                        f"problem (or key) -> choice, not {type(result).__name__}")
    out = []
    for p in problems:
        best, ms = by_key.get(p.key, (None, None))
        if best is None:
            warnings.warn(f"tuning found no working kernel for {p.key}; using aten (torch.mm) there",
                          RuntimeWarning, stacklevel=3)
            out.append((ATEN, None))
        else:
            out.append((best if isinstance(best, Choice) else Choice.parse(str(best)), ms))
    return out, prov, table


def _table_here(table: LookupTable | str | os.PathLike | None) -> LookupTable | None:
    """A table for the dispatch path: a path is read with ``load_or_none`` (a bad file warns once
    and gives None), and the table's provenance is checked against this machine's GPU and Triton
    (``check_provenance``: another one warns and marks the table untrusted; its choices are still
    used, each verified at its first call), as the tuner checks a ``table=``."""
    from ..table import check_provenance, load_or_none
    if isinstance(table, (str, os.PathLike)):
        table = load_or_none(table)
    if isinstance(table, LookupTable):
        here = _current_provenance("tuned")
        check_provenance(table, here["device_name"], here["triton"])
    return table


def compile_mm(*, n: int | None = None, k: int | None = None, m: int | None = None, dtype,
               hints: Mapping[str, Sequence[int]] | None = None, mode: str = "similarity",
               table: LookupTable | str | os.PathLike | None = None,
               families: Sequence[str] | None = None, space: str = "default", store=None,
               device: str | None = None, tune_fn: Callable | None = None, timer=None,
               verify: bool = True, layout_a: str = "row", layout_b: str = "row",
               progress: bool | None = None, tune_kwargs: Mapping | None = None,
               batch: int | None = None, deterministic: bool = False) -> Dispatcher:
    """Tune one kernel per size hint and return ``mm(a, b)`` for any size of the dynamic dims.

    ``batch``: tune the hints as bmm problems of this batch size (``compile_bmm``); the
    dispatcher then serves 3-D calls of any batch (and 2-D ones) with those kernels.

    ``m``, ``n``, ``k``: static sizes; a dim left as None is dynamic and takes its
    hints from ``hints`` (default: 64, 256, 4096 for every dynamic dim; given hints
    must cover every dynamic dim). One problem is tuned per combination of hints.
    ``mode``: 'similarity', 'benchmark' or 'table' (see the module doc). ``table``: a
    LookupTable or its JSON path, for mode='table' (the tuned hint winners are added
    to it). ``families``, ``space``, ``store``, ``device``, ``progress`` and
    ``deterministic``: tune only choices that give the same bits on every call (no fp32-atomic
    split-K reduction; ``gemmtune.tune``). ``tune_kwargs`` go to the tuner. ``tune_fn``: the tuner, default ``gemmtune.tune``;
    it is called once as ``tune_fn(problems, families=..., space=..., [store=...,
    device=...,] progress=..., **tune_kwargs)`` and returns a TuneResult or a mapping
    problem (or its key) -> choice (or its id). ``timer``: used by mode='benchmark'.
    ``layout_a``/``layout_b``: the layouts the caller passes ('col' for ``x @ W.t()``):
    the hint problems are tuned with them and table keys use them.
    ``verify``: check each shape's first kernel against fp64 (see the module doc).
    ``progress``: the tuner's progress (a bar on a terminal, plain lines otherwise); default
    ``None``: on in interactive use (stderr is a terminal or Python is interactive).
    Outputs have the inputs' dtype; float32 runs exact fp32 dots (no tf32).

    Example (skipped in doctests: it tunes on a GPU)::

        >>> mm = gemmtune.compile_mm(n=4096, k=4096, dtype="bf16",
        ...                          hints={"m": [64, 256, 4096]})   # doctest: +SKIP
        >>> mm(torch.randn(100, 4096, device="cuda", dtype=torch.bfloat16),
        ...    torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16))  # doctest: +SKIP
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    for name, lay in (("layout_a", layout_a), ("layout_b", layout_b)):
        # The Dispatcher's own check, before tuning: compile_bmm's hint problems take a broadcast
        # layout ('bcast_row'), so every hint was tuned (minutes on a GPU) before the Dispatcher
        # refused it. A dispatcher reads each call's strides, a broadcast operand's included.
        if lay not in LAYOUTS:
            extra = (f" (a bmm dispatcher serves operands broadcast over the batch whatever it declares: pass "
                     f"{name}={lay.removeprefix('bcast_')!r})" if isinstance(lay, str) and lay.startswith("bcast_")
                     else "")
            raise ValueError(f"{name} must be one of {LAYOUTS}, got {lay!r}{extra}")
    if table is not None and mode != "table":
        raise ValueError(f"table= is only used by mode='table' (mode is {mode!r})")
    dims = {"m": m, "n": n, "k": k}
    for d, v in dims.items():
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
            raise ValueError(f"{d} must be a non-negative int (static) or None (dynamic), got {v!r}")
    dynamic = [d for d in DIMS if dims[d] is None]
    if hints is None:
        hints = {d: DEFAULT_HINTS for d in dynamic}
    hints = dict(hints)
    static_hinted = sorted(set(hints) - set(dynamic))
    if static_hinted:
        raise ValueError(f"hints given for {static_hinted}, which are static (or not m/n/k); "
                         f"dynamic dims: {dynamic}")
    missing = [d for d in dynamic if d not in hints]
    if missing:
        raise ValueError(f"dynamic dim(s) {missing} need hints, e.g. hints={{{missing[0]!r}: [64, 256, 4096]}}")
    clean = {}
    for d in dynamic:
        given = hints[d]
        # Read once, as a list: a generator was used up by the check below, leaving no hints
        # ("a dispatcher needs at least one hint choice", after tuning nothing), and a numpy
        # array's truth value raised numpy's own ValueError. Sizes are ints (numpy's too).
        try:
            vals = None if isinstance(given, (int, str, bytes)) else list(given)
        except TypeError:  # not iterable
            vals = None
        if not vals or any(not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < 1 for v in vals):
            raise ValueError(f"hints[{d!r}] must be a non-empty list of positive ints, got {given!r}")
        clean[d] = tuple(sorted({int(v) for v in vals}))
    dtype = dtype_name(dtype)
    # The dispatch path never fails on a bad table: it warns once and goes on with
    # the tuned hint kernels (exact entries for the hints, similarity elsewhere).
    table = _table_here(table)

    if progress is None:
        progress = _pkg().interactive()
    if batch is not None and (not isinstance(batch, int) or isinstance(batch, bool) or batch < 1):
        raise ValueError(f"batch must be an int >= 1 (the bmm batch the hints are tuned at), got {batch!r}")
    combos = list(itertools.product(*[clean[d] if d in clean else (dims[d],) for d in DIMS]))
    bmm = {} if batch is None else {"op": "bmm", "batch": batch}
    problems = [Problem.from_sizes(cm, cn, ck, dtype, layout_a=layout_a, layout_b=layout_b, **bmm)
                for cm, cn, ck in combos]
    if tune_fn is None:
        from ..tune import tune as tune_fn
    kw = {"families": families, "space": space, "progress": progress, **(tune_kwargs or {})}
    if deterministic:  # only choices that give the same bits every call (gemmtune.tune)
        kw["deterministic"] = True
    if store is not None:
        kw["store"] = store
    if device is not None:
        kw["device"] = device
    winners, prov, tuned_table = _winners(tune_fn(problems, **kw), problems)
    hint_choices = [HintChoice(tuple(c), ch, ms) for c, (ch, ms) in zip(combos, winners)]
    if mode == "table":
        merged = LookupTable(dict(table.provenance) if table is not None else (
            prov or _current_provenance("by-hand")))
        if table is not None:
            merged.entries.update(table.entries)
        if tuned_table is not None:
            merged.entries.update(tuned_table.entries)
        for p, h in zip(problems, hint_choices):
            merged.entries.setdefault(p.key, [TableChoice(h.choice, h.device_ms)])
        table = merged
    return Dispatcher(dims=dims, dtype=dtype, hints=clean, hint_choices=hint_choices, mode=mode,
                      table=table, timer=timer, verify=verify, layout_a=layout_a, layout_b=layout_b,
                      provenance=prov or _current_provenance("by-hand"), batch=batch)


def compile_bmm(*, batch: int, n: int | None = None, k: int | None = None, m: int | None = None, dtype,
                **kwargs) -> Dispatcher:
    """``compile_mm`` for batched products: the hint problems are bmm problems of ``batch``
    matrices (static ``m``/``n``/``k`` and ``hints`` as in compile_mm, per matrix), and the
    dispatcher returned serves ``d(a, b)`` for 3-D operands of any batch.

    Example (skipped in doctests: it tunes on a GPU)::

        >>> bmm = gemmtune.compile_bmm(batch=32, k=64, dtype="bf16", layout_b="col",
        ...                            hints={"m": [128, 1024], "n": [128, 1024]})   # doctest: +SKIP
        >>> s = bmm(q, k.transpose(1, 2))                                          # doctest: +SKIP
    """
    return compile_mm(m=m, n=n, k=k, dtype=dtype, batch=batch, **kwargs)


def lookup(table: LookupTable | str | os.PathLike | None, *, dtype, layout_a: str = "row", layout_b: str = "row",
           verify: bool = True) -> Dispatcher:
    """A dispatcher that tunes nothing: each shape (mm, or bmm for 3-D calls) runs the table's
    exact entry for it (its first choice that runs and verifies here) and cuBLAS otherwise.
    ``table``: a LookupTable, its JSON path (a bad file warns once and serves cuBLAS), or None; one
    made on another GPU or Triton MAJOR.MINOR warns (``TableWarning``) and is used, untrusted.

    Example::

        >>> import torch, gemmtune
        >>> d = gemmtune.dispatch.lookup(None, dtype="fp32")
        >>> d(torch.randn(2, 3, 4), torch.randn(2, 4, 5)).shape
        torch.Size([2, 3, 5])
    """
    table = _table_here(table)
    if table is None:
        table = LookupTable(_current_provenance("by-hand"))
    return Dispatcher(dims={}, dtype=dtype, hints={d: (1,) for d in DIMS},
                      hint_choices=[HintChoice((1, 1, 1), ATEN)], mode="table", table=table, verify=verify,
                      layout_a=layout_a, layout_b=layout_b)
