"""Performance models: estimate each choice's device time without running it.

Every model is an object with one method::

    predict(problem: Problem, choices: list[Choice]) -> list[float]   # estimated ms, lower is better

The tuner takes such an object (``tune(..., model=...)``) and uses it only to rank
candidates when asked to benchmark fewer than all of them; it never imports a
concrete model. Two are provided:

* ``AnalyticModel(device)``: roofline, tile waves, occupancy, pipelining and the
  families' extra costs, from the DeviceInfo alone (no training; any GPU).
* ``LearnedModel``: the analytic estimate corrected by a regressor trained on a
  results store (``fit`` / ``train``), saved as JSON with provenance and loaded with
  ``load_model``, which falls back to the analytic model (with a ``ModelWarning``)
  for a file made on another GPU or triton MAJOR.MINOR.

No learned model ships with this version: there is no training data yet from shapes
outside the public benchmark suite (which is kept for evaluation only), so
``default_model`` returns the analytic model.

Example::

    >>> import gemmtune
    >>> from gemmtune.model import default_model
    >>> p = gemmtune.Problem.from_sizes(32, 32, 28672, "bf16")
    >>> cands = gemmtune.space(p, "splitk", device="h100") + gemmtune.space(p, "triton_mm", device="h100")
    >>> est = default_model("h100").predict(p, cands)
    >>> min(zip(est, cands))[1].family
    'splitk'
"""

from __future__ import annotations

from typing import Protocol, Sequence

from ..device import DeviceInfo
from .analytic import AnalyticModel
from .features import FEATURE_NAMES, FEATURE_VERSION, featurize
from .learned import (Dataset, LearnedModel, ModelError, ModelWarning, evaluate, fit, load_dataset,
                      load_model, split_by_shape, train)


class PerfModel(Protocol):
    def predict(self, problem, choices: Sequence) -> list[float]: ...


def default_model(device: DeviceInfo | str | None = None) -> AnalyticModel:
    """The model the tuner ranks with when none is given: the analytic model for ``device``
    (a DeviceInfo, a built-in name, or None for the visible GPU / the built-in H100)."""
    from ..device import current_or

    dev = device if isinstance(device, DeviceInfo) else current_or(device)
    return AnalyticModel(dev)


__all__ = ["PerfModel", "AnalyticModel", "LearnedModel", "ModelError", "ModelWarning", "Dataset",
           "FEATURE_NAMES", "FEATURE_VERSION", "featurize", "default_model", "evaluate", "fit",
           "load_dataset", "load_model", "split_by_shape", "train"]
