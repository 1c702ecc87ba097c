"""What the dispatcher's parts share: its constants, ``HintChoice`` and ``Decision``, the similarity
ranking of hints, provenance checks, the interpreter lock, and whether a CUDA graph is being captured."""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import torch

from .. import kernels
from ..configs import AtenConfig, Choice
from ..provenance import DISPATCH, Provenance


DIMS = ("m", "n", "k")
MODES = ("similarity", "benchmark", "table")
DEFAULT_HINTS = (64, 256, 4096)
SCHEMA_VERSION = 1
FORMAT = "gemmtune.dispatcher"
# Whether any autocast is on, in one C call (~0.1 us): a patched forward runs it on every call,
# where torch.is_autocast_enabled(x.device.type) first builds x.device (~0.5 us on a CPU core of
# this machine, 2026-11-28; ~100 patched layers per decode step of a small model pay it each).
# The dispatcher's aten closure (launch) reads it too.
_any_autocast = getattr(torch._C, "_is_any_autocast_enabled", lambda: True)

ATEN = Choice("aten", AtenConfig())
# Distances are rounded to this many decimals so that float noise never breaks a tie.
_TIE_DECIMALS = 9

# The Triton interpreter's one lock (kernels._INTERP_LOCK, which says why): kernels.run_choice
# takes it for its own launches; the dispatcher holds it around its cached launches in the
# interpreter and around a first sight's checks there.
_INTERP_LOCK = kernels._INTERP_LOCK


class ProvenanceWarning(UserWarning):
    """A saved dispatcher was tuned on another GPU or with another triton/torch version."""


@dataclass(frozen=True)
class HintChoice:
    """The winner tuned for one hint combination."""

    sizes: tuple[int, int, int]  # (M, N, K) of the hint problem
    choice: Choice
    device_ms: float | None = None


# Decision.source's values: why a shape runs its choice ('empty': a product with a size of 0, no kernel).
SOURCES = ("similarity", "benchmark", "table", "fallback", "empty")


@dataclass(frozen=True)
class Decision:
    """What a shape runs and why. ``source``: similarity | benchmark | table | fallback | empty."""

    choice: Choice
    source: str
    hint: tuple[int, int, int] | None = None
    verified: bool = False
    times_ms: Mapping[str, float] | None = None  # benchmark mode: choice id -> device ms
    reason: str = ""


def _log2(sizes: Sequence[int]) -> tuple[float, ...]:
    return tuple(math.log2(max(1, int(d))) for d in sizes)


def rank_hints(target: Sequence[int], hints: Sequence[Sequence[int]]) -> list[int]:
    """Indices of ``hints`` ((M, N, K) each), nearest to ``target`` first.

    Distance: L1 over log2 (M, N, K), dims of 0 or 1 counting as log2 1 = 0.
    Ties: the larger hint (larger log2 M*N*K), then the larger (M, N, K) tuple.

    Example::

        >>> rank_hints((128, 64, 64), [(64, 64, 64), (256, 64, 64)])   # a tie: larger wins
        [1, 0]
    """
    t = _log2(target)

    def key(i: int):
        h = hints[i]
        lh = _log2(h)
        dist = round(sum(abs(x - y) for x, y in zip(t, lh)), _TIE_DECIMALS)
        return (dist, -round(sum(lh), _TIE_DECIMALS), tuple(-int(x) for x in h))

    return sorted(range(len(hints)), key=key)


def _current_provenance(produced_by: str) -> dict:
    return Provenance.current(produced_by).to_dict()


def provenance_mismatches(saved: Mapping[str, str], current: Mapping[str, str] | None = None) -> list[str]:
    """Why a dispatcher saved under ``saved`` may not be valid now (empty when it is).

    Checked (provenance.DISPATCH): the GPU (name and capability; one CPU is one device,
    interpreter or not) and the triton and torch major.minor versions.
    """
    cur = current or _current_provenance("tuned")
    out = []
    for what in Provenance.from_dict(saved).mismatches(Provenance.from_dict(cur), DISPATCH):
        if what == "device":
            out.append(f"tuned on {saved.get('device_name')} (capability {saved.get('capability')}), "
                       f"running on {cur['device_name']} (capability {cur['capability']})")
        else:
            out.append(f"tuned with {what} {saved.get(what)}, running {what} {cur[what]}")
    return out


@contextlib.contextmanager
def _interp_guard(on: bool):
    if on:
        with _INTERP_LOCK:
            yield
    else:
        yield


def _locked(fn: Callable) -> Callable:
    def run(*args, **kwargs):
        with _INTERP_LOCK:
            return fn(*args, **kwargs)
    return run


def _random_operand(rows: int, cols: int, layout: str, dtype: torch.dtype, device,
                    batch: int | None = None) -> torch.Tensor:
    """A random (rows x cols) operand of ``layout``; with ``batch``, that many of them, one after
    the other (3-D)."""
    lead = () if batch is None else (batch,)
    if layout == "col":
        return torch.randn(*lead, cols, rows, dtype=dtype, device=device).transpose(-2, -1)
    if layout == "strided":
        return torch.randn(*lead, rows, 2 * cols, dtype=dtype, device=device)[..., ::2]
    return torch.randn(*lead, rows, cols, dtype=dtype, device=device)


def capturing(t: torch.Tensor) -> bool:
    """Whether ``t``'s device is capturing a CUDA graph on the current stream."""
    return t.is_cuda and torch.cuda.is_current_stream_capturing()


def interactive() -> bool:
    """Whether someone is watching: stderr is a terminal, or Python runs interactively."""
    import sys
    return bool(getattr(sys, "ps1", None)) or sys.flags.interactive or (
        hasattr(sys.stderr, "isatty") and sys.stderr.isatty())


def _pkg():
    """The gemmtune.dispatch package, read when called: ``capturing``, ``interpreter_enabled`` and
    ``interactive`` are looked up there, where callers (and tests) may replace them."""
    from .. import dispatch
    return dispatch
