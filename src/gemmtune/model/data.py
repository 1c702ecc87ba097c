"""Training data for the learned models: measured times grouped by problem, and splits.

Data: a results store (``.sqlite``, ``.sqlite.gz``) or its CSV export (``.csv``,
``.csv.gz``): the rows with status ``ok``. Train/test splits are BY SHAPE
(M, N, K; all dtypes and layouts of one shape fall on the same side), never by
row, and shapes of the public benchmark suite are excluded by default: they are
for evaluation only.

Example::

    >>> from gemmtune.model.data import load_dataset, split_by_shape
    >>> data = load_dataset("data/collect/collect.sqlite.gz")      # doctest: +SKIP
    >>> train, test = split_by_shape(data, 0.2, seed=0)           # doctest: +SKIP
"""

from __future__ import annotations

import csv
import gzip
import math
import os
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..configs import Choice
from ..problem import Problem
from ..table import major_minor
from .errors import ModelError

# Domain guard (see the module docstring): full learned correction within TRUST_RADIUS
# of a training problem of the same dtype and alignment (log2 units of M, N, K; each of
# the first collected H200 shapes has another within 1.62), none beyond ZERO_RADIUS.
TRUST_RADIUS = 1.5
ZERO_RADIUS = 3.0

# The fp32 arithmetic of an fp32 (TF32 off) problem whose rows carry no tag ("": a schema-1 store,
# from before the store recorded it, 2026-12-01). The stores of data/collect (H200, H100) were
# timed before 3xTF32 became the default (2026-11-30), as IEEE. The tuner is stricter
# (store.rows.counts_as_measured): to it an untagged fp32 row is a measurement for neither.
LEGACY_FP32_PRECISION = "ieee"

@dataclass
class ShapeData:
    """The measured choices of one problem: ``times_ms[i]`` is ``choices[i]``'s median device ms."""

    problem: Problem
    choices: list[Choice]
    times_ms: np.ndarray
    # The GPU that measured it, where that is not the dataset's own (``pool``): its features use
    # this GPU's facts, and cross-validation trains on it but never scores it.
    device: object = None
    # The fp32 arithmetic that timed it (the store's column: "tf32x3", "ieee", or "" where it does
    # not matter or is unknown). 3xTF32 and IEEE time one kernel 1.5-2x apart, so the two are never
    # one group (load_dataset).
    fp32_precision: str = ""

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.problem.m, self.problem.n, self.problem.k)

    @property
    def timed_fp32_precision(self) -> str | None:
        """The fp32 arithmetic that timed these rows ("tf32x3" or "ieee"; untagged:
        ``LEGACY_FP32_PRECISION``), or None where the problem's arithmetic does not depend on it
        (not fp32, or TF32 allowed)."""
        from ..precision import precision_tag
        return precision_tag(self.problem, self.fp32_precision or LEGACY_FP32_PRECISION) or None


def timed_as(g: ShapeData):
    """A context in which the analytic model and the features see fp32 as ``g``'s rows were timed
    (``ShapeData.timed_fp32_precision``), whatever this process's GEMMTUNE_FP32_PRECISION: training
    rows and their scores are featurized for the arithmetic that measured them."""
    from ..precision import assume_fp32_precision
    return assume_fp32_precision(g.timed_fp32_precision)


@dataclass
class Dataset:
    groups: list[ShapeData]
    context: dict = field(default_factory=dict)
    source: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return sum(len(g.choices) for g in self.groups)

    @property
    def shapes(self) -> set[tuple[int, int, int]]:
        return {g.shape for g in self.groups}

    def subset(self, shapes) -> "Dataset":
        keep = set(shapes)
        return Dataset([g for g in self.groups if g.shape in keep], dict(self.context), self.source,
                       list(self.notes))

    def native(self) -> "Dataset":
        """The problems measured on the dataset's own GPU (not pooled from another: ``pool``)."""
        return Dataset([g for g in self.groups if g.device is None], dict(self.context), self.source,
                       list(self.notes))

    def ranked(self, min_choices: int = None) -> "Dataset":
        """The problems with at least ``min_choices`` measured choices (default
        ``MIN_RANKED_CHOICES``): the ones a ranking can be scored on. A problem measured only
        in part (cuBLAS and a few others) makes any ranking look perfect."""
        n = MIN_RANKED_CHOICES if min_choices is None else min_choices
        return Dataset([g for g in self.groups if len(g.choices) >= n], dict(self.context), self.source,
                       list(self.notes))


def _read_records(path: Path) -> list[dict]:
    """Rows with status ok as dicts of the store's columns (strings or numbers). A CSV exported
    before the store had ``fp32_precision`` (schema version 1) lacks it: its rows read as ""."""
    name = path.name.lower()
    if name.endswith((".csv", ".csv.gz")):
        opener = gzip.open if name.endswith(".gz") else open
        with opener(path, "rt", newline="", encoding="utf-8") as f:
            return [r | {"fp32_precision": r.get("fp32_precision") or ""}
                    for r in csv.DictReader(f) if r.get("status") == "ok"]
    if name.endswith((".sqlite", ".sqlite.gz", ".db")):
        from dataclasses import fields

        from ..store import opened_readonly

        with opened_readonly(path) as store:
            rows = store.rows(status="ok")
        if not rows:
            return []
        # asdict(c) | asdict(r), field by field: every field is a str, number, bool or None, and
        # asdict's recursive deep copy of each took ~40 s of CPU on the 113k rows of data/collect.
        names = [f.name for f in fields(rows[0][0])], [f.name for f in fields(rows[0][1])]
        return [{n: getattr(c, n) for n in names[0]} | {n: getattr(r, n) for n in names[1]} for c, r in rows]
    raise ModelError(f"cannot read {path}: expected a results store (.sqlite, .sqlite.gz) "
                     "or its CSV export (.csv, .csv.gz)")


# Evaluations score rankings only on problems with at least this many measured choices.
MIN_RANKED_CHOICES = 20


def load_dataset(path: str | os.PathLike, *, device_name: str | None = None) -> Dataset:
    """The ok rows of a results store (or its CSV export), grouped by problem.

    Rows measured on several GPUs or triton MAJOR.MINOR versions are not mixed: the
    group with the most rows is used (or the GPU named by ``device_name``), and the
    others are listed in ``Dataset.notes``. A choice measured more than once within
    that group counts with the geometric mean of its times.

    A problem is grouped by (key, ``fp32_precision``): an fp32 TF32-off problem timed under
    both IEEE and 3xTF32 (or also in a version-1 store, "") gives one group per arithmetic,
    never one mixing their times.
    """
    path = Path(path)
    if not path.is_file():
        # A folder given for the store said "no such file", sending the user to look for a typo.
        why = "it is a directory; give the store file in it" if path.is_dir() else "no such file"
        raise ModelError(f"cannot read {path}: {why}")
    from ..store import GZIP_ERRORS

    try:
        recs = _read_records(path)
    except GZIP_ERRORS as e:
        # A truncated or corrupt .gz (a copy cut short): EOFError is neither ValueError nor
        # OSError, and ended predict --eval and train with a traceback.
        raise ModelError(f"cannot read {path}: {e} (a truncated or corrupt gzip file)") from None
    by_ctx: dict[tuple, list[dict]] = defaultdict(list)
    for r in recs:
        try:
            ms = float(r["device_ms"])
        except (TypeError, ValueError):
            continue
        if not (math.isfinite(ms) and ms > 0):
            continue
        r = dict(r)
        r["device_ms"] = ms
        by_ctx[(r["device_name"], major_minor(r["triton_version"]))].append(r)
    if not by_ctx:
        raise ModelError(f"{path}: no rows with status ok and a finite device time")
    if device_name is not None:
        picks = [k for k in by_ctx if k[0].lower() == device_name.lower()]
        if not picks:
            raise ModelError(f"{path}: no rows measured on {device_name!r}; it holds "
                             + ", ".join(sorted({k[0] for k in by_ctx})))
        key = max(picks, key=lambda k: len(by_ctx[k]))
    else:
        key = max(by_ctx, key=lambda k: len(by_ctx[k]))
    notes = [f"skipped {len(v)} rows measured on {k[0]} with triton {k[1]}" for k, v in by_ctx.items()
             if k != key]
    rows = by_ctx[key]
    if "interpreter" in key[0].lower():
        raise ModelError(f"{path}: its rows were timed in the Triton CPU interpreter ({key[0]}); "
                         "those times say nothing about a GPU, refusing to train on them")
    ctx = {c: rows[-1][c] for c in ("device_name", "capability", "torch_version", "triton_version",
                                    "gemmtune_version")}
    per: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    forms = 0
    for r in rows:
        if _other_static_form(r["choice_id"]):
            forms += 1
            continue
        per[(r["problem_key"], r.get("fp32_precision") or "")][r["choice_id"]].append(r["device_ms"])
    if forms:
        # The rankers score a tile; its triton_static forms have the carried form's features and are
        # timed beside a pick, never ranked (tuning.plan.static_forms): as rows they would give one
        # feature vector several labels.
        notes.append(f"skipped {forms} rows of triton_static's indexed forms (timed beside a pick, not ranked)")
    groups = []
    for (key_, tag), ch in sorted(per.items()):
        try:
            p = Problem.from_key(key_)
            ids = sorted(ch)
            choices = [Choice.parse(c) for c in ids]
        except ValueError as e:
            notes.append(f"skipped {key_}: {e}")
            continue
        t = np.array([math.exp(sum(map(math.log, ch[c])) / len(ch[c])) for c in ids])
        groups.append(ShapeData(p, choices, t, fp32_precision=tag))
    return Dataset(groups, ctx, path.name, notes)


def _other_static_form(choice_id: str) -> bool:
    """Whether ``choice_id`` is a triton_static form other than carried (configs.STATIC_FORMS).

    >>> _other_static_form("triton_static:BM64-BN128-BK64-S4-W4-G8-IXW"), _other_static_form("triton_static:BM64-BN128-BK64-S4-W4-G8")
    (True, False)
    """
    bare = choice_id[len("pad+"):] if choice_id.startswith("pad+") else choice_id
    return bare.startswith("triton_static:") and bare.endswith(("-IX", "-IXW"))


def public_shapes() -> set[tuple[int, int, int]]:
    """(M, N, K) of the public benchmark suite: evaluation only, never training data."""
    from ..shapes import preset

    return {(s.problem.m, s.problem.n, s.problem.k) for s in preset("public")}


def suite_shapes(name_or_csv: str) -> set[tuple[int, int, int]]:
    from ..shapes import PRESETS, load_csv, preset

    shapes = preset(name_or_csv) if name_or_csv in PRESETS else load_csv(name_or_csv)
    return {(s.problem.m, s.problem.n, s.problem.k) for s in shapes}


def pool(data: Dataset, others: list[Dataset]) -> Dataset:
    """``data`` plus every problem of ``others``, each of those marked with the GPU that measured
    it (``ShapeData.device``), so that its features carry that GPU's facts (the analytic estimate:
    bandwidth, L2). A ranker trained on the pool ranks for ``data``'s GPU; cross-validation scores
    only ``data``'s own problems. ``others`` must come from built-in GPUs of ``data``'s compute
    capability, measured with the same triton MAJOR.MINOR.

    Why: a store collected on one GPU lacks the classes that were collected later on another.
    The H200 store had no odd-vocabulary heads, almost no small N and no huge K; its ranker put
    the best of 55 such H200 problems within 10% on 32.7% of them. Pooled with the H100 store,
    --fast on 19 H200 shapes of those classes, outside both stores, went from 91.4% to 96.9% of
    the best (benchmarks/results/2026-11-27-h200-s21).
    """
    from ..device import DeviceInfo

    groups = list(data.groups)
    notes = list(data.notes)
    cap, triton = data.context.get("capability"), major_minor(data.context.get("triton_version", ""))
    for o in others:
        name = o.context.get("device_name", "")
        try:
            dev = DeviceInfo.lookup(name)
        except ValueError:
            raise ModelError(f"{o.source}: measured on {name!r}, which is not a built-in GPU; its features "
                             "need the GPU's facts") from None
        if o.context.get("capability") != cap:
            raise ModelError(f"{o.source}: compute capability {o.context.get('capability')} differs from "
                             f"{data.source}'s {cap}: its kernels do not rank alike")
        if major_minor(o.context.get("triton_version", "")) != triton:
            raise ModelError(f"{o.source}: triton {o.context.get('triton_version')} differs from "
                             f"{data.source}'s {data.context.get('triton_version')}")
        same = name == data.context.get("device_name")  # the same GPU: its problems are native
        groups += [ShapeData(g.problem, g.choices, g.times_ms, None if same else dev, g.fp32_precision)
                   for g in o.groups]
        notes.append(f"pooled {len(o.groups)} problems measured on {name} from {o.source}")
    source = " + ".join([data.source, *(f"{o.source} ({o.context.get('device_name')})" for o in others)])
    return Dataset(groups, dict(data.context), source, notes)


def exclude(data: Dataset, shapes: set[tuple[int, int, int]]) -> tuple[Dataset, int]:
    """``data`` without the groups whose (M, N, K) is in ``shapes``, and how many went."""
    kept = [g for g in data.groups if g.shape not in shapes]
    return Dataset(kept, dict(data.context), data.source, list(data.notes)), len(data.groups) - len(kept)


def split_by_shape(data: Dataset, test_fraction: float = 0.2, seed: int = 0,
                   strata=None) -> tuple[Dataset, Dataset]:
    """(train, test) with every (M, N, K) on exactly one side; at least one shape each
    when there are two or more.

    ``strata``: optional shape group per (M, N, K), a dict or a callable (shapes it does
    not know form one more group). Each group is then split on its own, holding out
    ``round(test_fraction * n)`` of its ``n`` shapes (at least one of a group of two or
    more), so every group appears on both sides. Deterministic for a given seed.
    """
    shapes = sorted(data.shapes)
    if not 0.0 < test_fraction < 1.0:
        raise ModelError(f"test_fraction must be between 0 and 1, got {test_fraction}")
    rng = np.random.default_rng(seed)

    def n_held(n: int) -> int:
        return min(n - 1, max(1, round(test_fraction * n))) if n > 1 else 0

    if strata is None:
        order = [shapes[i] for i in rng.permutation(len(shapes))]
        n_test = n_held(len(shapes))
        return data.subset(order[n_test:]), data.subset(order[:n_test])
    label = strata if callable(strata) else strata.get
    by: dict[str, list] = defaultdict(list)
    for s in shapes:
        by[str(label(s))].append(s)
    test: list = []
    for name in sorted(by):
        group = by[name]
        order = [group[i] for i in rng.permutation(len(group))]
        test += order[:n_held(len(group))]
    if not test and len(shapes) > 1:  # only groups of one shape: hold out one of them
        test = [shapes[int(rng.integers(len(shapes)))]]
    held = set(test)
    return data.subset([s for s in shapes if s not in held]), data.subset(test)


# ---------------------------------------------------------------- domain guard
def _dtype_tag(p: Problem) -> str:
    """The dtype part of the problem key: 'bf16->bf16', 'fp32+tf32->fp32', ..."""
    return p.key.split(":")[2]


def trust_class(tag: str) -> str:
    """The domain guard's dtype class of a dtype tag: fp16 and bf16 are one class ('f16'). The
    features cannot tell them apart (the same element sizes), Hopper's tensor cores run both at one
    rate, and on the H200 store's 249 shapes timed in both, bf16's fastest config was within 10%
    of fp16's best on 94.4% (geomean 98.0% of it), more often than the ranker's own top 1 is. So
    a model trained on one of them ranks the other with its full correction.

    >>> trust_class("bf16->bf16"), trust_class("fp16->fp16"), trust_class("fp32+tf32->fp32")
    ('f16->f16', 'f16->f16', 'fp32+tf32->fp32')
    """
    return tag.replace("bf16", "f16").replace("fp16", "f16")


def _layout_tag(p: Problem) -> str:
    return f"{p.layout_a}/{p.layout_b}"


def _unaligned(p: Problem) -> bool:
    return not (p.aligned_a and p.aligned_b)


def domain_of(data: Dataset) -> dict:
    """What a model trained on ``data`` has seen (stored as provenance['domain']):
    ``problems`` holds [M, N, K, dtype tag, unaligned 0/1] of every training problem,
    ``family_rows`` the training rows per kernel family."""
    probs = sorted({(g.problem.m, g.problem.n, g.problem.k, _dtype_tag(g.problem), int(_unaligned(g.problem)))
                    for g in data.groups})
    rows: dict[str, int] = defaultdict(int)
    for g in data.groups:
        for c in g.choices:
            rows[c.family] += 1
    return {"dtypes": sorted({_dtype_tag(g.problem) for g in data.groups}),
            "layouts": sorted({_layout_tag(g.problem) for g in data.groups}),
            "problems": [list(p) for p in probs], "family_rows": dict(sorted(rows.items())),
            "trust_radius": TRUST_RADIUS, "zero_radius": ZERO_RADIUS}
