"""Performance models: estimate each choice's device time without running it.

Every model is an object with one method::

    predict(problem: Problem, choices: list[Choice]) -> list[float]   # estimated ms, lower is better

The tuner takes such an object (``tune(..., model=...)``) and uses it only to rank
candidates when asked to benchmark fewer than all of them; it never imports a
concrete model. Two are provided:

* ``AnalyticModel(device)``: roofline, tile waves, occupancy, pipelining and the
  families' extra costs, from the DeviceInfo alone (no training; any GPU).
* ``LearnedModel``: the analytic estimate corrected by a regressor trained on a
  results store (``fit`` / ``train``), or a LightGBM lambdarank ranker (kind
  ``lgbm_rank``, the ``learn`` extra) whose ``predict`` is an ordering, not ms; saved
  as JSON with provenance (a ranker: plus LightGBM's text model beside it) and loaded
  with ``load_model``, which falls back to the analytic model (with a ``ModelWarning``)
  for a file made on another GPU or triton MAJOR.MINOR. Without lightgbm a ranker still
  predicts, from its trees in numpy (``lgbm_text``); only training needs lightgbm.

``topk.choose_k`` picks how many of a model's best the tuner benchmarks
(``benchmark_space='AUTO'``); ``compare.compare`` scores model kinds side by side.

``default_model(device)`` is what the tuner ranks with when given no model: the
learned model shipped for that GPU (``gemmtune/data/models/``; one so far: NVIDIA
H200, triton 3.6, bf16 and fp16, see benchmarks/model/) when the installed triton has
its MAJOR.MINOR, else the analytic model, after a ``ModelWarning`` saying why. A
shipped model ranks problems outside its training domain (other dtypes, layouts,
far-away shapes) with the analytic model too (``LearnedModel.trust``).

Example::

    >>> import gemmtune
    >>> from gemmtune.device import DeviceInfo
    >>> from gemmtune.model import AnalyticModel
    >>> p = gemmtune.Problem.from_sizes(32, 32, 28672, "bf16")
    >>> cands = gemmtune.space(p, "splitk", device="h100") + gemmtune.space(p, "triton_mm", device="h100")
    >>> est = AnalyticModel(DeviceInfo.lookup("h100")).predict(p, cands)
    >>> min(zip(est, cands))[1].family
    'splitk'
    >>> m = default_model("h200", triton_version="3.6.0")   # the shipped H200 model  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Protocol, Sequence

from ..device import DeviceInfo
from .analytic import AnalyticModel
from .features import FEATURE_NAMES, FEATURE_VERSION, featurize
from .learned import Dataset, LearnedModel, ModelError, ModelWarning, evaluate, load_dataset, load_model, split_by_shape
from .training import fit, train
from .shipped import shipped_models


class PerfModel(Protocol):
    def predict(self, problem, choices: Sequence) -> list[float]: ...


def default_model(device: DeviceInfo | str | None = None, *, triton_version: str | None = None,
                  numpy_predict: bool = False):
    """The model the tuner ranks with when none is given, for ``device`` (a DeviceInfo,
    a built-in name, or None for the visible GPU / the built-in H100).

    The learned model shipped for that GPU when its triton MAJOR.MINOR is
    ``triton_version``'s (default: the installed triton); otherwise the analytic model,
    after a ``ModelWarning`` that says why (no model ships for this GPU, or the shipped
    one was made with another triton).
    """
    import warnings

    from ..device import current_or
    from . import shipped

    dev = device if isinstance(device, DeviceInfo) else current_or(device)
    path = shipped.shipped_for(dev)
    if path is None:
        have = shipped.describe()
        if have:
            warnings.warn(f"no learned performance model ships for {dev.name} (shipped: {'; '.join(have)}); "
                          "ranking with the analytic model", ModelWarning, stacklevel=2)
        return AnalyticModel(dev)
    return load_model(path, dev, triton_version=triton_version, numpy_predict=numpy_predict)


__all__ = ["PerfModel", "AnalyticModel", "LearnedModel", "ModelError", "ModelWarning", "Dataset",
           "FEATURE_NAMES", "FEATURE_VERSION", "featurize", "default_model", "evaluate", "fit",
           "load_dataset", "load_model", "shipped_models", "split_by_shape", "train"]
