"""The report's arithmetic, in small pure functions with exact tests: ``geomean``, ``is_tie``,
``speedup``, ``roofline_ms``, ``memory_gbps``, ``verdict``.

    >>> geomean([2.0, 8.0])
    4.0
    >>> is_tie(10.0, 0.05, 10.4, 0.0)   # 0.4 apart, inside 10.0 x 5% IQR
    True
"""

from __future__ import annotations

import math

def geomean(values) -> float | None:
    """Geometric mean of the positive finite values; None when there are none.

    >>> geomean([1.25, 0.8]), geomean([]), geomean([None, 3.0])
    (1.0, None, 3.0)
    """
    xs = [float(v) for v in values if v is not None and math.isfinite(v) and v > 0]
    if not xs:
        return None
    prod = math.prod(xs)  # exact for the few ratios of a report; logs only if it over/underflows
    if 0.0 < prod < math.inf:
        return prod ** (1.0 / len(xs))
    return math.exp(math.fsum(math.log(x) for x in xs) / len(xs))


def is_tie(a_ms: float, a_spread: float | None, b_ms: float, b_spread: float | None) -> bool:
    """True when two times differ by less than the larger of their spreads.

    A spread is the relative inter-quartile range (IQR / median) the timer stores, so
    ``a_ms * a_spread`` is the width of a's middle half in ms. Equal times are a tie.
    """
    width = max(a_ms * (a_spread or 0.0), b_ms * (b_spread or 0.0))
    return a_ms == b_ms or abs(a_ms - b_ms) < width


def speedup(base_ms: float | None, ms: float | None) -> float | None:
    """base / ms (above 1: faster than the base); None when either is missing."""
    if not base_ms or not ms or not math.isfinite(base_ms) or not math.isfinite(ms):
        return None
    return base_ms / ms


def roofline_ms(flops: int, min_bytes: int, peak_tflops: float | None, gbps: float | None) -> float | None:
    """The time no kernel can beat: max(flops / peak, bytes / bandwidth), in ms.

    >>> roofline_ms(2 * 10**12, 10**9, 1000.0, 1000.0)   # 2 ms of math, 1 ms of memory
    2.0
    """
    compute = flops / (peak_tflops * 1e9) if peak_tflops else 0.0
    memory = min_bytes / (gbps * 1e6) if gbps else 0.0
    return max(compute, memory) or None


def memory_gbps(ceilings: dict | None) -> float | None:
    """The memory bandwidth a floor uses: the higher of the copy bandwidth (bytes read +
    written) and the read bandwidth (read-dominated kernels), whichever were measured.

    >>> memory_gbps({"copy": {"gbps": 2763.0}, "read": {"gbps": 4100.0}})
    4100.0
    >>> memory_gbps({"copy": {"gbps": 2763.0}})   # a JSON from before the read ceiling
    2763.0
    """
    c = ceilings or {}
    rates = [(c.get(k) or {}).get("gbps") for k in ("copy", "read")]
    rates = [float(r) for r in rates if r is not None and math.isfinite(r) and r > 0]
    return max(rates) if rates else None


def verdict(value: float | None, threshold: float, *, at_most: bool = False) -> str:
    """'MET' / 'MISSED' for a value against a threshold (at least, or at most); 'NOT RUN'
    when there is no value."""
    if value is None:
        return "NOT RUN"
    ok = value <= threshold if at_most else value >= threshold
    return "MET" if ok else "MISSED"
