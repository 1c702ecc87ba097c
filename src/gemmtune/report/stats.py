"""The report's arithmetic, in small pure functions with exact tests: ``geomean``, ``is_tie``,
``speedup``, ``roofline_ms``, ``memory_gbps``, ``write_gbps``, ``verdict``.

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


def roofline_ms(flops: int, min_bytes: int, peak_tflops: float | None, gbps: float | None,
                write_bytes: int = 0, write_gbps: float | None = None) -> float | None:
    """The time no kernel can beat: max(flops / peak, memory time), in ms.

    The memory time is ``min_bytes / gbps``; with a write bandwidth (``write_gbps``, see
    ``write_gbps``) it is read bytes / ``gbps`` + ``write_bytes`` / ``write_gbps``, the read
    bytes being ``min_bytes - write_bytes``. A sum, not a max: HBM has one data bus per channel
    that carries reads and writes in turn (switching direction costs time of its own), so a
    kernel that reads R and writes W bytes needs at least the time of each at the rate measured
    for that direction alone. That assumes each direction's rate is set by the bus; where a
    measured rate is limited elsewhere (the write kernel's own issue rate, say), reads and writes
    could overlap and a kernel could beat the sum: ``write_gbps`` bounds this for the device
    copy's 1:1 mix only. With writes slower than reads the floor is at least the old one
    (``min_bytes / gbps``), the more so the larger the share of C. ``write_gbps`` None (ceilings measured before the write ceiling,
    a CPU run) leaves the memory time ``min_bytes / gbps`` exactly, whatever ``write_bytes``.

    >>> roofline_ms(2 * 10**12, 10**9, 1000.0, 1000.0)   # 2 ms of math, 1 ms of memory
    2.0
    >>> roofline_ms(10**9, 3 * 10**9, 1000.0, 4000.0, write_bytes=2 * 10**9, write_gbps=1000.0)  # 0.25 + 2 ms
    2.25
    """
    compute = flops / (peak_tflops * 1e9) if peak_tflops else 0.0
    if gbps and write_gbps:
        memory = (min_bytes - write_bytes) / (gbps * 1e6) + write_bytes / (write_gbps * 1e6)
    else:
        memory = min_bytes / (gbps * 1e6) if gbps else 0.0
    return max(compute, memory) or None


def _rate(entry) -> float | None:
    r = (entry or {}).get("gbps") if isinstance(entry, dict) else None
    return float(r) if isinstance(r, (int, float)) and math.isfinite(r) and r > 0 else None


def memory_gbps(ceilings: dict | None) -> float | None:
    """The memory bandwidth a floor uses: the higher of the copy bandwidth (bytes read +
    written) and the read bandwidth (read-dominated kernels), whichever were measured. With a
    write ceiling it is the rate of the bytes read (``roofline_ms``).

    >>> memory_gbps({"copy": {"gbps": 2763.0}, "read": {"gbps": 4100.0}})
    4100.0
    >>> memory_gbps({"copy": {"gbps": 2763.0}})   # a JSON from before the read ceiling
    2763.0
    """
    c = ceilings or {}
    rates = [r for r in (_rate(c.get(k)) for k in ("copy", "read")) if r is not None]
    return max(rates) if rates else None


def write_gbps(ceilings: dict | None) -> float | None:
    """The write bandwidth a floor uses, or None without a write ceiling (ceilings measured
    before it: their floors stay ``min_bytes / memory_gbps``, as they were computed then).

    The higher of the write ceiling's own rate (a kernel that writes and reads next to nothing)
    and the write rate the device copy implies once its reads are counted at the read rate
    (``memory_gbps``): a copy of X bytes took 2X / copy GB/s, so under the floor's sum it wrote X
    bytes in 2X / copy - X / read, i.e. at 1 / (2 / copy - 1 / read). Taking the better of the two
    makes the copy's floor, X / read + X / write, at most the copy's measured time: with the
    write ceiling's rate alone that holds only when 1 / read + 1 / write <= 2 / copy (write at
    least the copy's rate does not suffice: with read 4400, write 1000 and copy 2700 GB/s the copy
    would run at 166% of its floor). Each of the ceilings' kernels (copy, reads, writes) thus
    takes at least its own floor (at most 100% of it) by construction, but for the few bytes the
    read kernels write (counted at the read rate there: 4 B, 64 KiB of 1 GiB); no other kernel is
    guaranteed to, as no measured rate is a proven maximum (a ceiling measured below what the
    GPU can do gives floors a kernel can beat; the report shows such a kernel above 100%).

    >>> round(write_gbps({"copy": {"gbps": 2700.0}, "read": {"gbps": 4400.0}, "write": {"gbps": 1000.0}}), 1)
    1947.5
    >>> write_gbps({"copy": {"gbps": 2700.0}, "read": {"gbps": 4400.0}, "write": {"gbps": 2500.0}})
    2500.0
    >>> write_gbps({"copy": {"gbps": 2700.0}, "read": {"gbps": 4400.0}}) is None   # an older file
    True
    """
    c = ceilings or {}
    own = _rate(c.get("write"))
    if own is None:
        return None
    copy_, read = _rate(c.get("copy")), memory_gbps(c)
    spare = 2 / copy_ - 1 / read if copy_ and read else 0.0  # the copy's time per byte left for its writes
    return max(own, 1 / spare) if spare > 0 else own


def verdict(value: float | None, threshold: float, *, at_most: bool = False) -> str:
    """'MET' / 'MISSED' for a value against a threshold (at least, or at most); 'NOT RUN'
    when there is no value."""
    if value is None:
        return "NOT RUN"
    ok = value <= threshold if at_most else value >= threshold
    return "MET" if ok else "MISSED"
