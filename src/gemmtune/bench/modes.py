"""gemmtune's modes in the bench (the tuner's keywords per report method) and the tuning phase
that runs each of them, and nvMMH's top-k as lookup tables, over the shapes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Collection, Sequence

from .. import report
from ..shapes import Shape
from .nvmmh import nvmmh_choices
from .records import dist_version, sweep_record

# gemmtune's modes: report method name -> tune() keyword arguments (space='default' unless
# given). --fast is tune(fast=True): the exhaustive space, the model's first choice of each of its
# two best families and its next best choice benchmarked (plus cuBLAS); the model's top-5 is the
# same search with its 5 best benchmarked. A mode runs only
# when tune() takes every one of its keywords (TuneOptions' fields); otherwise the run records
# a note and the mode's records say "skipped".
TUNE_MODES: dict[str, dict] = {
    "gemmtune": {},
    "gemmtune_fast": {"fast": True},
    "gemmtune_top5": {"space": "exhaustive", "benchmark_space": 5},
}
# Opt-in modes (`gemmtune bench --extra-modes top20,exhaustive`): the model's top-20, and the
# whole exhaustive space benchmarked, the reference the model's top-k is judged against. The
# exhaustive space holds 870-9,045 candidates per public-suite shape on an H200, so that mode
# is for a few chosen shapes (--suite / --groups / --limit), not the whole suite in one call.
# ``auto``: the model's adaptive top-k (benchmark_space='AUTO', model.topk.choose_k: k grows
# where the model is unsure), the mode meant to reach 97% of the best at the lowest cost.
OPTIONAL_MODES: dict[str, dict] = {
    "gemmtune_auto": {"space": "exhaustive", "benchmark_space": "AUTO"},
    # The model's top 1: what --fast benchmarked until 2026-11-26 (session 14), kept to compare.
    "gemmtune_top1": {"space": "exhaustive", "benchmark_space": 1},
    "gemmtune_top20": {"space": "exhaustive", "benchmark_space": 20},
    "gemmtune_exhaustive": {"space": "exhaustive", "benchmark_space": "SAME"},
}
EXTRA_MODE_NAMES = {"auto": "gemmtune_auto", "top1": "gemmtune_top1", "top20": "gemmtune_top20", "exhaustive": "gemmtune_exhaustive"}
NVMMH_TOPK = {"nvmmh_top1": 1, "nvmmh_top5": 5}


def extra_modes(names: str | Sequence[str] | None) -> list[str]:
    """Method keys of the opt-in modes named (``"top20,exhaustive"``); ValueError on others."""
    if not names:
        return []
    items = names.split(",") if isinstance(names, str) else list(names)
    out = []
    for n in (x.strip() for x in items if x.strip()):
        key = EXTRA_MODE_NAMES.get(n, n if n in OPTIONAL_MODES else None)
        if key is None:
            raise ValueError(f"unknown extra mode {n!r}: choose from {', '.join(EXTRA_MODE_NAMES)}")
        if key not in out:
            out.append(key)
    return out


def supported_modes(extra: Sequence[str] = (), fields: Collection[str] | None = None
                    ) -> tuple[dict[str, dict], dict[str, str]]:
    """The modes the tuner can run (name -> keywords), and why each other mode cannot: the
    standard ones (TUNE_MODES) plus the opt-in ones named in ``extra`` (OPTIONAL_MODES keys).
    A mode runs when every keyword it sets is a field of ``TuneOptions`` (``fields``: those
    names, default ``tuning.options.option_names()``).

    >>> modes, skipped = supported_modes(fields={"space", "fast"})
    >>> sorted(modes), skipped
    (['gemmtune', 'gemmtune_fast'], {'gemmtune_top5': "gemmtune.tune() has no 'benchmark_space' option in this version"})
    """
    if fields is None:
        from ..tuning.options import option_names
        fields = option_names()
    modes, skipped = {}, {}
    for name, kwargs in [*TUNE_MODES.items(), *((m, OPTIONAL_MODES[m]) for m in extra)]:
        missing = [k for k in kwargs if k not in fields]
        if missing:
            skipped[name] = (f"gemmtune.tune() has no {', '.join(repr(m) for m in missing)} "
                             "option in this version")
        else:
            modes[name] = kwargs
    return modes, skipped


def tune_phase(shapes: Sequence[Shape], *, tune_fn: Callable, scratch: Path, seed: int, provenance: dict,
               say: Callable[[str], None] = lambda msg: None, extra: Sequence[str] = ()) -> dict:
    """Tune ``shapes`` once per mode: gemmtune's modes with their keywords, and nvMMH's top-1 /
    top-5 as lookup tables that make the tuner compile (in parallel), check and time exactly
    those configs. Every mode gets a fresh store and Triton cache: nothing is reused.

    Returns {"tuned": mode -> key -> ShapeResult, "skipped": mode -> why, "extra_s": mode ->
    key -> nvMMH query seconds, "errors": mode -> key -> why, "notes": [...], "modes": mode ->
    what ran (for the header), "sweeps": mode -> key -> what it timed (``sweep_record``)}.
    """
    from ..table import LookupTable, TableChoice

    modes, skipped = supported_modes(extra)
    notes = [f"{report.LABELS[m]}: skipped: {why}" for m, why in skipped.items()]
    jobs = [(mode, {"space": "default", **kw}, dict(kw), list(shapes)) for mode, kw in modes.items()]
    extra_s: dict[str, dict] = {}
    errors: dict[str, dict] = {}
    if dist_version("nvidia-matmul-heuristics") is None:
        for m in NVMMH_TOPK:
            skipped[m] = "nvidia-matmul-heuristics is not installed"
        notes.append("nvMMH: skipped: nvidia-matmul-heuristics is not installed (pip install nvidia-matmul-heuristics)")
    else:
        picks, query_s, failed = {}, {}, {}
        for sh in shapes:
            t0 = time.perf_counter()
            try:
                picks[sh.problem.key] = nvmmh_choices(sh.problem, provenance["device_name"], max(NVMMH_TOPK.values()))
            except Exception as e:  # a config the library cannot give is a result too
                failed[sh.problem.key] = f"nvMatmulHeuristics: {type(e).__name__}: {e}"[:500]
                continue
            query_s[sh.problem.key] = time.perf_counter() - t0
            if not picks[sh.problem.key]:
                failed[sh.problem.key] = "nvMatmulHeuristics returned no configuration"
        for mode, k in NVMMH_TOPK.items():
            table = LookupTable(dict(provenance), {key: [TableChoice(c) for c in ch[:k]] for key, ch in picks.items() if ch})
            jobs.append((mode, {"table": table}, {"table": f"nvMatmulHeuristics top-{k}, Triton target"},
                         [sh for sh in shapes if sh.problem.key in table.entries]))
            extra_s[mode] = query_s
            errors[mode] = failed
    tuned, ran, sweeps = {}, {}, {}
    for mode, kwargs, described, subset in jobs:
        if not subset:
            continue
        say(f"{report.LABELS[mode]}: tuning {len(subset)} shapes")
        try:
            r = tune_fn(subset, store=str(scratch / f"{mode}.sqlite"), out=None, progress=False, seed=seed,
                        env={"TRITON_CACHE_DIR": str(scratch / f"triton-{mode}")}, **kwargs)
        except Exception as e:  # one mode failing must not cost the others
            notes.append(f"{report.LABELS[mode]}: the tuner failed: {type(e).__name__}: {e}"[:500])
            if mode in OPTIONAL_MODES:  # asked for: its rows say so instead of vanishing
                skipped[mode] = f"the tuner failed: {type(e).__name__}: {e}"[:300]
            continue
        # A problem listed twice (two rows of the same sizes, an addmm row benchmarked as mm beside
        # the mm row) is tuned once: its first result paid the tuning, the later one read it back
        # from the store in ~1 ms. Keeping the last gave both rows that ~0 s tuning time.
        tuned[mode] = {}
        for sh in r.shapes:
            tuned[mode].setdefault(sh.problem.key, sh)
        sweeps[mode] = read_sweeps(scratch / f"{mode}.sqlite", getattr(r, "context", None), tuned[mode], notes,
                                   report.LABELS[mode])
        ran[mode] = {"kwargs": described, "wall_s": r.wall_s, "measured": r.measured,
                     "startup_s": r.startup_s, "compile_workers": r.compile_workers,
                     "compile_wait_s": r.compile_wait_s, "precompile_s": r.precompile_s}
        say(f"  {r.measured} candidates in {r.wall_s:.1f} s ({r.startup_s:.1f} s worker start-up, "
            f"{r.compile_workers} compile workers, {r.compile_wait_s:.1f} s waiting for them)")
    return {"tuned": tuned, "skipped": skipped, "extra_s": extra_s, "errors": errors, "notes": notes,
            "modes": ran, "sweeps": sweeps}


def read_sweeps(store_path: Path, ctx, keys, notes: list, label: str) -> dict:
    """problem key -> ``sweep_record`` of what one mode timed on it, read back from the mode's
    own (fresh) store, in run context ``ctx`` (None: any); {} (and a note) when the store cannot
    be read: the record is for diagnosis, and the bench's figures do not depend on it."""
    from ..store import ResultStore

    try:
        with ResultStore(store_path) as store:
            return {key: sweep_record([row for _, row in store.rows(ctx, key)]) for key in keys}
    except Exception as e:  # noqa: BLE001 - reported in the notes, not fatal
        notes.append(f"{label}: its timed candidates could not be read back ({type(e).__name__}: {e})"[:300])
        return {}
