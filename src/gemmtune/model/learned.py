"""LearnedModel: device time learned from measured results, with provenance.

The model predicts log device time as the analytic model's estimate plus a learned
correction: ``log(ms) = log(analytic ms) + f(features)``, where ``f`` is either

* ``gbt``: gradient-boosted oblivious trees (one split per tree level, as in
  CatBoost) grown on 64-bin feature histograms, or
* ``mlp``: a 2-layer ReLU network (64 units each) trained with Adam,

both in plain numpy. ``fit(kind="auto")`` trains both on 80% of the training
shapes and keeps the one whose per-shape ranking (mean Spearman) is better on the
other 20%, then refits it on all of them. Starting from the analytic estimate
means an unfamiliar region degrades to the analytic ranking instead of noise.

Training weights each row by how close it is to its shape's best measured time
(``weighting="near_best"``: ``0.25 + exp(-ln(t / t_best) / 0.3)``): a ranking is
judged by its top, so errors among the fast choices cost more than errors among
choices that are 3x slower. ``weighting="none"`` is plain least squares.

Domain guard: the model records what it was trained on (every training problem's
M, N, K, dtype and whether an operand was unaligned, and the layouts). For a
problem outside that domain the learned correction is shrunk towards the analytic
estimate: none for a layout it never saw or when no training problem had the same
dtype and alignment; otherwise by the distance to the nearest such training
problem (log2 units of M, N, K): full within 1.5, none beyond 3.0, linear in
between. ``LearnedModel.trust(problem)`` says which weight a problem gets and why.

A third kind, ``lgbm_rank`` (LightGBM lambdarank, needs the ``learn`` extra), ranks
instead of timing: it scores each problem's choices (higher = faster) and is trained on
relevance labels graded by each choice's time relative to its problem's best. It predicts
no milliseconds (``LearnedModel.outputs == 'score'``): ``rank_keys`` orders it like the
others, and ``predict`` returns those keys (see ``LearnedModel.predict``).

Data, splits and metrics live in ``data.py`` and ``metrics.py``, the regressors and the
ranker in ``regressors.py``, training (``fit``, ``train``) in ``training.py``; their public
names are importable from here too.

Saved as JSON with provenance (a ranker: its LightGBM text model beside it, named in the
JSON with its sha256): GPU name, capability and facts, torch / triton /
gemmtune versions, feature version, the training set and the held-out metrics.
``load_model`` refuses to trust a model from another GPU, another triton
MAJOR.MINOR or another feature version: it warns (``ModelWarning``) and returns
an ``AnalyticModel`` instead. A model of another feature version loaded without that check
(``LearnedModel.load``) raises ``ModelError`` when asked to rank: its trees or weights read
columns that mean something else now.

Families: a model ranks the families it was trained on (``knows``: its provenance's
``domain["family_rows"]``). A family it has no rows of gets the analytic estimate, except
triton_static, which a model without triton_static rows scores as the triton_mm config it
compiles (the same kernel; the tuner then times it beside its triton_mm twin instead of
ranking it: ``tuning.plan._split_twins``).

Example::

    >>> from gemmtune.model import load_dataset, fit, load_model
    >>> data = load_dataset("results.sqlite")                      # doctest: +SKIP
    >>> model, report = fit(data)                                  # doctest: +SKIP
    >>> model.save("model.json")                                   # doctest: +SKIP
    >>> m = load_model("model.json", device="h100")                # doctest: +SKIP
    >>> m.predict(problem, choices)                                # doctest: +SKIP
"""


from __future__ import annotations

import dataclasses
import gzip
import json
import math
import os
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np

from ..device import DeviceInfo
from ..jsonio import locked, read_json, write_atomic
from ..problem import Problem
from ..table import major_minor
from .analytic import AnalyticModel
from .data import (MIN_RANKED_CHOICES, TRUST_RADIUS, ZERO_RADIUS, Dataset, ShapeData, _dtype_tag, trust_class,  # noqa: F401
                   _layout_tag, _unaligned, domain_of, exclude, load_dataset, public_shapes, split_by_shape,
                   suite_shapes)
from .errors import ModelDependencyError, ModelError, ModelWarning  # noqa: F401
from .features import (FAMILIES, FAMILY_CODES, FEATURE_NAMES, FEATURE_VERSION, POST_V1, STATIC, TRITON_MM, batch,
                       featurize)
from .metrics import _predict_ms, _ranks, evaluate, rank_keys, shape_metrics, spearman, summarize  # noqa: F401
from .regressors import _GBT, _MLP, _REGRESSORS, RANKERS, _LGBMRanker, import_lightgbm  # noqa: F401

MODEL_FORMAT = "gemmtune-perf-model"
MODEL_SCHEMA = 1
_LN2 = math.log(2.0)
_BASE_COL = FEATURE_NAMES.index("log2_analytic_us")


# ------------------------------------------------------------------------ model


def _base_log_ms(X: np.ndarray) -> np.ndarray:
    """ln(analytic ms) from the log2(analytic us) feature."""
    return X[:, _BASE_COL] * _LN2 - math.log(1000.0)


# A kernel family with fewer training rows than this is thinly covered: the adaptive top-k
# (topk.choose_k) widens when one ranks near the top (support = rows / this, at most 1).
FAMILY_ROWS_FULL = 1000


# Where the model does not trust a problem (trust 0: another dtype class, a layout or a size far
# from its training set), the analytic ln ms ranks alone, and on memory-bound problems it is flat:
# every config that streams the operands at the bandwidth ceiling gets the same estimate (all
# 2,600 triton_static/triton_mm/skinny configs of 1x50257x768 bf16 on an H100 tie at one value),
# so candidate order decided. The ranker's own order then breaks exact ties only.
TIE_BREAK = True
TIE_EPS = 1e-6


def _break_ties(base: np.ndarray, key: np.ndarray, seen: np.ndarray) -> np.ndarray:
    """``base`` with the ``seen`` entries nudged by at most TIE_EPS in ``key``'s order: choices
    whose base keys are equal come out in ``key``'s order, and no other pair changes order unless
    their base keys are within TIE_EPS (a 0.0001% difference in estimated time).

    >>> _break_ties(np.array([1.0, 1.0, 0.5]), np.array([3.0, 2.0, 9.0]), np.array([True, True, True])).argsort().tolist()
    [2, 1, 0]
    """
    out = np.asarray(base, dtype=np.float64).copy()
    k = np.asarray(key, dtype=np.float64)[seen]
    if not len(k) or not np.isfinite(k).all():
        return out
    span = float(k.max() - k.min())
    if span > 0:
        out[seen] += TIE_EPS * (k - k.min()) / span
    return out


class LearnedModel:
    """The analytic estimate corrected by a regressor trained on measurements, or (family
    ``lgbm_rank``) a LightGBM ranker's scores.

    Build with ``fit(dataset)`` or ``LearnedModel.load(path)`` (no trust check; use
    ``load_model`` for that).

    * ``rank_keys(problem, choices)``: per choice, lower = faster, in ln-ms units (a
      regressor: ln of its estimated ms; a ranker: its negative score times the fitted
      ``scale``, anchored at the analytic ln ms of its first choice). What the tuner and
      the metrics order by.
    * ``predict(problem, choices)``: the ``PerfModel`` protocol, lower = faster. A
      regressor (``outputs == 'ms'``) returns estimated ms; a ranker (``outputs ==
      'score'``) returns ``exp(rank_keys)``: an ordering only, NOT a time, although its
      first choice's value is the analytic estimate of that choice.
    * ``predict_ms``: regressors only; a ranker raises ModelError.
    """

    kind = "learned"

    def __init__(self, device: DeviceInfo, family: str, regressor, provenance: dict):
        self.device = device
        self.family = family
        self.regressor = regressor
        self.outputs = getattr(regressor, "outputs", "ms")
        self.provenance = provenance
        self.feature_version = FEATURE_VERSION
        self.source = "<model>"
        self.analytic = AnalyticModel(device)
        dom = provenance.get("domain") if isinstance(provenance, dict) else None
        self.domain = dom if isinstance(dom, dict) else None
        # (dtype class, unaligned) -> log2 (M, N, K) of the training problems of that class
        by: dict[tuple, list] = defaultdict(list)
        for row in (self.domain or {}).get("problems", []):
            m, n, k, tag, un = row
            by[(trust_class(tag), bool(un))].append((m, n, k))
        self._near = {c: np.log2(np.maximum(np.asarray(v, dtype=np.float64), 1.0)) for c, v in by.items()}
        # triton_static without rows of its own: scored as its triton_mm config (same kernel).
        self._static_as_mm = not self.knows("triton_static") and self.knows("triton_mm")
        self._unseen = [FAMILY_CODES[f] for f in FAMILIES
                        if not self.knows(f) and not (f == "triton_static" and self._static_as_mm)]

    def __repr__(self) -> str:
        return f"LearnedModel({self.family!r}, {self.device.name!r})"

    def trust(self, problem: Problem) -> tuple[float, str]:
        """(weight of the learned correction for ``problem``, 0..1; why). 1.0 for a model
        that records no domain (files written before the domain guard)."""
        dom = self.domain
        if not dom:
            return 1.0, "the model records no training domain"
        if problem.op == "bmm" and problem.batch > 1 and "bmm" not in dom.get("ops", ()):
            # Its domain records (M, N, K), dtypes and layouts, not the batch: a bmm of 512 products
            # was trusted fully as its one matrix's mm, 512x fewer tiles (session 45's CPU hunt).
            return 0.0, f"a bmm of {problem.batch} products, and its training set holds no bmm"
        tag = _dtype_tag(problem)
        if trust_class(tag) not in {trust_class(t) for t in dom.get("dtypes", [])}:
            return 0.0, f"dtype {tag} is not in its training set ({', '.join(dom.get('dtypes', []))})"
        lay = _layout_tag(problem)
        if lay not in dom.get("layouts", []):
            return 0.0, f"layout {lay} is not in its training set ({', '.join(dom.get('layouts', []))})"
        un = _unaligned(problem)
        kind = "unaligned" if un else "aligned"
        near = self._near.get((trust_class(tag), un))
        if near is None or not len(near):
            return 0.0, f"no {kind} {tag} problem in its training set"
        here = np.log2(np.maximum(np.array([problem.m, problem.n, problem.k], dtype=np.float64), 1.0))
        dist = float(np.sqrt(((near - here) ** 2).sum(axis=1)).min())
        lo = float(dom.get("trust_radius", TRUST_RADIUS))
        hi = float(dom.get("zero_radius", ZERO_RADIUS))
        w = 1.0 if dist <= lo else 0.0 if dist >= hi else (hi - dist) / (hi - lo)
        return w, (f"nearest {kind} {tag} training problem {dist:.2f} log2 units of (M, N, K) away "
                   f"(full trust within {lo:g}, none beyond {hi:g})")

    def knows(self, family: str) -> bool:
        """Whether the model was trained on measurements of ``family`` (its provenance's
        ``domain["family_rows"]``; a file that records none: feature version 1's four families)."""
        rows = (self.domain or {}).get("family_rows")
        if isinstance(rows, dict):
            return rows.get(family, 0) > 0
        return family in FAMILY_CODES and FAMILY_CODES[family] not in POST_V1 and family != "triton_static"

    def _batch(self, problem: Problem, choices):
        """The ChoiceBatch this model reads: triton_static rows as triton_mm when it never saw them."""
        b = batch(problem, choices)
        if self._static_as_mm and (b.fam == STATIC).any():
            b = dataclasses.replace(b, fam=np.where(b.fam == STATIC, TRITON_MM, b.fam))
        return b

    def _check_features(self) -> None:
        if self.feature_version != FEATURE_VERSION:
            raise ModelError(f"{self.source}: made for feature version "
                             f"{self.feature_version!r}, this gemmtune computes version {FEATURE_VERSION}'s "
                             "features; retrain it (gemmtune train) or load it with load_model, which falls "
                             "back to the analytic model")

    def support(self, families) -> tuple[float, str]:
        """(how well the training data covers ``families``, 0..1; why): the smallest
        rows / FAMILY_ROWS_FULL among them (1.0 when the model records no family rows,
        except the skinny family, which feature version 1 models never saw)."""
        rows = (self.domain or {}).get("family_rows")
        worst, why = 1.0, "its families are well covered"
        for fam in dict.fromkeys(families):
            n = rows.get(fam, 0) if isinstance(rows, dict) else (0 if fam == "skinny" else None)
            if n is None:
                continue
            v = min(1.0, n / FAMILY_ROWS_FULL)
            if v < worst:
                worst, why = v, f"family {fam} has {n} training rows (full support from {FAMILY_ROWS_FULL})"
        return worst, why

    def predict(self, problem: Problem, choices) -> list[float]:
        """Per choice, lower is better: estimated device ms (a regressor), or for a ranker
        ``exp(rank_keys)``, an ordering that is not a time (see the class docstring)."""
        if self.outputs == "score":
            return np.exp(self.rank_keys(problem, choices)).tolist()
        return self.predict_ms(problem, choices).tolist()

    def rank_keys(self, problem: Problem, choices) -> np.ndarray:
        """Per choice, lower = faster, in ln-ms units (see the class docstring)."""
        if self.outputs == "ms":
            with np.errstate(divide="ignore"):
                return np.log(self.predict_ms(problem, choices))
        self._check_features()
        b = self._batch(problem, choices)
        if len(b) == 0:
            return np.zeros(0)
        base = np.log(self.analytic.predict_ms(problem, None, choice_batch=b))
        w, _ = self.trust(problem)
        seen = ~np.isin(b.fam, self._unseen)
        if not seen.any() or (w <= 0.0 and not TIE_BREAK):
            return base
        X = featurize(problem, None, self.device, analytic=self.analytic, choice_batch=b)
        key = -self.regressor.scale * self.regressor.predict(X)
        if w <= 0.0:
            return _break_ties(base, key, seen)
        # Blend with the analytic ln ms by trust (a constant shift of either changes no order
        # within the problem), then anchor the seen families' first choice at its analytic
        # ln ms: families the ranker never saw (no training rows) keep their analytic ln ms.
        key = w * key + (1.0 - w) * base
        top = np.flatnonzero(seen)[int(np.argmin(key[seen]))]
        out = base.copy()
        out[seen] = key[seen] - key[top] + base[top]
        return out

    def predict_ms(self, problem: Problem, choices) -> np.ndarray:
        """Estimated device ms per choice (regressors; a ranker predicts no times)."""
        if self.outputs != "ms":
            raise ModelError(f"a {self.family} model scores choices and predicts no times: use rank_keys "
                             "(or predict, which orders the same way)")
        self._check_features()
        b = self._batch(problem, choices)
        if len(b) == 0:
            return np.zeros(0)
        w, _ = self.trust(problem)
        if w <= 0.0:
            return self.analytic.predict_ms(problem, None, choice_batch=b)
        X = featurize(problem, None, self.device, analytic=self.analytic, choice_batch=b)
        corr = self.regressor.predict(X)
        est = np.exp(_base_log_ms(X) + (corr if w >= 1.0 else w * corr))
        # Families this model never saw measured get the analytic estimate, not a correction
        # learned on others.
        unseen = np.isin(b.fam, self._unseen)
        if unseen.any():
            est[unseen] = self.analytic.predict_ms(problem, None, choice_batch=b)[unseen]
        return est

    # ------------------------------------------------------------------ files
    def to_json(self, booster_file: str | None = None) -> dict:
        """The model file's JSON; a ranker's names ``booster_file`` and records its sha256."""
        if self.outputs == "score":
            params = self.regressor.to_json(self.regressor.to_text(), booster_file or "?")
        else:
            params = self.regressor.to_json()
        return {"format": MODEL_FORMAT, "schema_version": MODEL_SCHEMA, "family": self.family,
                "feature_version": self.feature_version, "features": list(FEATURE_NAMES),
                "provenance": self.provenance, "params": params}

    @staticmethod
    def booster_path(path: str | os.PathLike) -> Path:
        """Where a ranker saved at ``path`` keeps its LightGBM text model: 'x.json' -> 'x.lgbm.txt'."""
        path = Path(path)
        return path.with_name((path.name[:-5] if path.name.endswith(".json") else path.name) + ".lgbm.txt")

    def save(self, path: str | os.PathLike) -> Path:
        """Write the model as JSON (atomically); floats round-trip exactly. A ranker also
        writes its booster in LightGBM's text format beside it (``booster_path``; no pickle)."""
        path = Path(path)
        if not path.resolve().parent.is_dir():
            raise ModelError(f"cannot write {path}: directory {path.resolve().parent} does not exist")
        if self.outputs != "score":
            return write_atomic(path, json.dumps(self.to_json(), sort_keys=True) + "\n")
        # A ranker is two files, the JSON recording the booster's sha256. Written one after the
        # other, a save that failed between them (a full disk, an interrupt) left the earlier
        # model's JSON beside the new booster: that model then refused to load ("does not match
        # the model JSON ... stale or edited"), lost. So the earlier booster is put back when the
        # JSON cannot be written, and two saves to one path (the lock) do not interleave their
        # files. (A process killed between the two renames still leaves a mismatch, which load
        # names; it never loads a booster with the wrong JSON.)
        bpath = self.booster_path(path)
        text = self.regressor.to_text()
        doc = json.dumps(self.to_json(bpath.name), sort_keys=True) + "\n"  # before either write
        with locked(path):
            try:
                before = bpath.read_bytes()
            except FileNotFoundError:
                before = None
            write_atomic(bpath, text)
            try:
                return write_atomic(path, doc)
            except BaseException:
                if before is not None:
                    write_atomic(bpath, before)
                else:
                    bpath.unlink(missing_ok=True)
                raise

    @classmethod
    def from_json(cls, doc: dict, source: str = "<model>", folder: str | os.PathLike | None = None,
                  numpy_predict: bool = False) -> "LearnedModel":
        """The model of a file's JSON ``doc``; a ranker's booster file is read from ``folder``
        (``numpy_predict``: its trees read by lgbm_text, lightgbm not imported)."""
        if not isinstance(doc, dict) or doc.get("format") != MODEL_FORMAT:
            raise ModelError(f"{source}: not a gemmtune performance model (format != {MODEL_FORMAT!r})")
        if doc.get("schema_version") != MODEL_SCHEMA:
            raise ModelError(f"{source}: model schema {doc.get('schema_version')!r}, this gemmtune reads "
                             f"{MODEL_SCHEMA}")
        fam = doc.get("family")
        if not isinstance(fam, str) or (fam not in _REGRESSORS and fam not in RANKERS):
            raise ModelError(f"{source}: unknown model family {fam!r}; known: {', '.join([*_REGRESSORS, *RANKERS])}")
        try:
            prov = doc["provenance"]
            d = dict(prov["device"])
            d["capability"] = tuple(d["capability"])
            device = DeviceInfo(**d)
            if doc.get("feature_version") != FEATURE_VERSION:
                # Its trees or weights read another feature set: not loaded, so that it cannot rank
                # (load_model warns and falls back on the version; LearnedModel refuses to predict).
                reg = _Stale("score" if fam in RANKERS else "ms", source)
            elif fam in RANKERS:
                reg = RANKERS[fam].from_text(_booster_text(doc["params"], source, folder), doc["params"],
                                             len(FEATURE_NAMES), source, numpy_predict=numpy_predict)
            else:
                reg = _REGRESSORS[fam].from_json(doc["params"])
            # Inside the try: the constructor computes with the provenance's device and domain
            # (AnalyticModel, the training-problem index), so a hand-edited "sm_count": "x" or
            # "capability": [] raised TypeError / IndexError from analytic.py, naming no file.
            m = cls(device, fam, reg, prov)
        except (KeyError, TypeError, ValueError, IndexError, OverflowError) as e:
            # OverflowError: a weight or feature index of 10^30 given to numpy.
            if isinstance(e, ModelError):
                raise
            raise ModelError(f"{source}: malformed model file: {type(e).__name__}: {e}") from None
        m.source = source
        m.feature_version = doc.get("feature_version")
        if doc.get("features") != list(FEATURE_NAMES) and m.feature_version == FEATURE_VERSION:
            raise ModelError(f"{source}: its feature names differ from feature version {FEATURE_VERSION}'s")
        return m

    @classmethod
    def load(cls, path: str | os.PathLike, numpy_predict: bool = False) -> "LearnedModel":
        path = Path(path)
        return cls.from_json(read_json(path, ModelError), str(path), path.parent, numpy_predict=numpy_predict)


class _Stale:
    """The regressor of a model file of another feature version: not read, never predicts."""

    scale = 1.0

    def __init__(self, outputs: str, source: str):
        self.outputs, self.source = outputs, source

    def _refuse(self, *_a, **_k):
        raise ModelError(f"{self.source}: a model of another feature version than {FEATURE_VERSION} "
                         "neither predicts nor saves here; retrain it (gemmtune train)")

    predict = to_json = to_text = _refuse

    def hyperparameters(self) -> dict:
        return {}


def _booster_text(params: dict, source: str, folder) -> str:
    name = params["booster_file"]
    if folder is None:
        raise ModelError(f"{source}: a ranker's booster lives in a file beside its JSON ({name}); "
                         "load it with LearnedModel.load(path)")
    if Path(name).name != name:
        raise ModelError(f"{source}: booster_file must be a file name beside the model, not {name!r}")
    try:
        if name.endswith(".gz"):
            # The shipped boosters are gzipped (4 MB of text each at 127 leaves, 1.8 MB gzipped):
            # what is checked against the JSON's sha256 is the text, as for a plain file.
            return gzip.decompress((Path(folder) / name).read_bytes()).decode()
        return (Path(folder) / name).read_text()
    except (OSError, EOFError) as e:  # (gzip.BadGzipFile is an OSError; a cut .gz raises EOFError)
        raise ModelError(f"{source}: cannot read its booster file {name}: "
                         f"{getattr(e, 'strerror', None) or e}") from None


# ---------------------------------------------------------------------- loading
def _device_info(device: DeviceInfo | str | None, fallback: DeviceInfo) -> DeviceInfo:
    if isinstance(device, DeviceInfo):
        return device
    if isinstance(device, str):
        try:
            return DeviceInfo.lookup(device)
        except ValueError:
            return fallback
    return fallback


def installed_triton() -> str:
    """The installed triton's version: ``triton.__version__`` once imported, else its package
    metadata (importing triton only to read it took 0.3 s on the 2-core CPU machine)."""
    import sys

    if "triton" not in sys.modules:
        from importlib.metadata import PackageNotFoundError, version
        try:
            return version("triton")
        except PackageNotFoundError:  # e.g. a pytorch-triton build: ask the module
            pass
    import triton
    return triton.__version__


def load_model(path: str | os.PathLike, device: DeviceInfo | str | None = None, *,
               triton_version: str | None = None, numpy_predict: bool = False):
    """A model to rank choices with: the learned model at ``path`` when it can be trusted
    here, else an ``AnalyticModel`` for ``device`` after a ``ModelWarning``.

    Trusted means: made on the GPU ``device`` names (compared without case; skipped when
    ``device`` is None), with the same triton MAJOR.MINOR as ``triton_version`` (default:
    the installed triton), and with this gemmtune's feature version. A file that is not
    a model at all, or a ranker whose booster file does not match it (stale) or is not a booster
    it can predict from (edited: ``regressors.checked_booster``), raises ``ModelError``; a
    ranker where lightgbm does not import, or with ``numpy_predict``, predicts with lgbm_text
    (numpy).

    Example::

        >>> m = load_model("model.json", device="h100")   # doctest: +SKIP
    """
    try:
        model = LearnedModel.load(path, numpy_predict=numpy_predict)
    except ModelDependencyError as e:
        warnings.warn(f"{e}; ranking with the analytic model instead", ModelWarning, stacklevel=2)
        return AnalyticModel(_device_info(device, _file_device(path)))
    prov = model.provenance
    if triton_version is None:
        triton_version = installed_triton()
    why = []
    if device is not None:
        name = _device_info(device, model.device).name if not isinstance(device, str) else device
        if isinstance(device, str):
            try:
                name = DeviceInfo.lookup(device).name
            except ValueError:
                pass
        if name.strip().lower() != str(prov.get("device_name", "")).strip().lower():
            why.append(f"it was trained on {prov.get('device_name')!r}, this is {name!r}")
    if major_minor(prov.get("triton", "")) != major_minor(triton_version):
        why.append(f"it was trained with triton {prov.get('triton')!r}, this is triton {triton_version!r} "
                   "(another MAJOR.MINOR generates other code)")
    if model.feature_version != FEATURE_VERSION:
        why.append(f"its feature version {model.feature_version} is not this gemmtune's {FEATURE_VERSION}")
    if why:
        warnings.warn(f"{path}: not using the learned model: {'; '.join(why)}; ranking with the "
                      "analytic model instead", ModelWarning, stacklevel=2)
        return AnalyticModel(_device_info(device, model.device))
    return model


def _file_device(path) -> DeviceInfo:
    """The GPU a model file records (for the analytic fallback), else the built-in H100."""
    try:
        d = dict(read_json(Path(path), ModelError)["provenance"]["device"])
        d["capability"] = tuple(d["capability"])
        return DeviceInfo(**d)
    except (ModelError, KeyError, TypeError, ValueError):
        return DeviceInfo.lookup("h100")


# Training (fit, train and their helpers) lives in training.py, which builds on this module;
# the names stay importable from here, looked up when first asked for.
_TRAINING = ("NEAR_BEST_TAU", "NEAR_BEST_FLOOR", "WEIGHTINGS", "_near_best_weights", "_matrix", "_device_for",
             "_fit_one", "_weights", "_score", "fit", "_Zero", "train")


def __getattr__(name: str):
    if name in _TRAINING:
        from . import training
        return getattr(training, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
