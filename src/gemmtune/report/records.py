"""Reading a bench JSON's records: the methods and their labels, a record's kernel time, its
speedup over cuBLAS, the physical floor reached, and each group's and mode's summary against the
issue's targets."""

from __future__ import annotations

from collections import defaultdict

from .stats import geomean, is_tie, speedup, verdict

GROUPS = ("decode", "prefill", "splitk", "odd", "square")
# (key in a shape's "methods", label). The first three are gemmtune's own modes.
METHODS = (
    ("gemmtune", "gemmtune default"),
    ("gemmtune_fast", "gemmtune --fast"),
    ("gemmtune_top5", "gemmtune model top-5"),
    ("gemmtune_auto", "gemmtune model adaptive top-k"),
    ("gemmtune_top1", "gemmtune model top-1"),
    ("gemmtune_top20", "gemmtune model top-20"),
    ("gemmtune_exhaustive", "gemmtune exhaustive"),
    ("inductor", "Inductor max-autotune"),
    ("tunableop", "PyTorch TunableOp"),
    ("nvmmh_top1", "nvMMH top-1"),
    ("nvmmh_top5", "nvMMH top-5"),
)
GEMMTUNE_METHODS = ("gemmtune", "gemmtune_fast", "gemmtune_top5")
LABELS = dict(METHODS)
# Geomean speedup over cuBLAS a gemmtune mode must reach per group (the targets).
SPEEDUP_TARGETS = (("splitk", 2.0), ("odd", 1.5), ("decode", 1.15), ("prefill", 0.98), ("square", 0.98))
# Tuning: at most this fraction of max-autotune's tuning wall time ...
TUNE_TIME_RATIO = 0.10
# ... while reaching at least this fraction of the best kernel time measured (geomean).
TUNE_QUALITY = 0.97
# The kernel cuBLAS's row runs: torch.mm. A method whose choice is exactly this ran the same
# kernel ('pad+aten' runs it on padded copies: not the same; Inductor's 'aten' is its
# extern_kernels.mm, torch.mm again).
CUBLAS_CHOICE = "aten"
SAME_MARK = "†"
SAME_NOTE = (f"{SAME_MARK} same kernel as cuBLAS (choice `{CUBLAS_CHOICE}`: the very torch.mm call of the cuBLAS "
             "row), so any difference from 1.00× there is measurement noise, not a faster or slower kernel; "
             "the times are shown as measured.")


def methods_of(shape: dict) -> dict:
    """A shape's method records by name; {} where the JSON has none or null there (a hand-merged or
    partial file: ``.get("methods", {})`` gave None and AttributeError deep in the render)."""
    m = shape.get("methods")
    return m if isinstance(m, dict) else {}


def kernel(rec: dict | None) -> dict | None:
    """The kernel time entry {ms, spread, repeats} of an ok record, else None (a null or
    non-object record or kernel entry: no time)."""
    if not isinstance(rec, dict) or rec.get("status") != "ok":
        return None
    k = rec.get("kernel")
    return k if isinstance(k, dict) and k.get("ms") else None


def method_speedup(shape: dict, method: str) -> tuple[float | None, bool]:
    """(speedup over cuBLAS, tie) of one method on one shape; (None, False) without data."""
    rec = methods_of(shape).get(method)
    k = kernel(rec)
    base = (rec or {}).get("baseline") or kernel(shape.get("cublas"))
    # A baseline without a time (its cuBLAS failed; NaN saved as null) raised TypeError in is_tie.
    if k is None or base is None or not base.get("ms"):
        return None, False
    return speedup(base["ms"], k["ms"]), is_tie(base["ms"], base.get("spread"), k["ms"], k.get("spread"))


def same_kernel_as_cublas(shape: dict, method: str) -> bool:
    """True when ``method`` ran cuBLAS's own kernel on the shape (choice ``aten``, not ``pad+aten``)."""
    rec = methods_of(shape).get(method) or {}
    base = (shape.get("cublas") or {}).get("choice", CUBLAS_CHOICE)
    return kernel(rec) is not None and rec.get("choice") == CUBLAS_CHOICE and base == CUBLAS_CHOICE


def best_ms(shape: dict) -> float | None:
    """The fastest verified kernel time any method (cuBLAS included) reached on the shape."""
    times = [k["ms"] for k in [kernel(shape.get("cublas"))] +
             [kernel(r) for r in methods_of(shape).values()] if k]
    return min(times) if times else None


# A gemmtune mode whose kernel is this much slower than the fastest gemmtune choice of the run
# gets a line saying whether its own sweep timed that choice (``sweep_misses``).
MISS_MARGIN = 1.05


def sweep_misses(shape: dict) -> list[str]:
    """One line per gemmtune mode that ended more than MISS_MARGIN slower than the fastest
    choice any gemmtune mode (or cuBLAS) reached on the shape, saying whether that choice was
    in the mode's own sweep (the bench record's ``sweep``): never timed (its ranking or space
    left it out), or timed slower there than what it kept (sweep noise, or the run-off).
    Records without a sweep (bench JSONs before session 22) give no line.

    >>> rec = lambda ch, ms, sweep=None: {"status": "ok", "choice": ch, "kernel": {"ms": ms}, **({"sweep": sweep} if sweep else {})}
    >>> shape = {"cublas": rec("aten", 0.0306), "methods": {
    ...     "gemmtune": rec("skinny:a", 0.0172),
    ...     "gemmtune_fast": rec("aten", 0.0306, [{"choice": "aten", "ms": 0.0302}, {"choice": "skinny:b", "ms": 0.041}])}}
    >>> sweep_misses(shape)
    ['gemmtune --fast: never timed `skinny:a` (17.2 µs here), the fastest gemmtune choice; it kept `aten` (30.6 µs)']
    """
    ours = [(k["ms"], rec["choice"]) for m, rec in [("cublas", shape.get("cublas"))] + list(methods_of(shape).items())
            if (m == "cublas" or m.startswith("gemmtune")) and (k := kernel(rec)) and rec.get("choice")]
    if not ours:
        return []
    best_ms_, best = min(ours)
    out = []
    for m, label in METHODS:
        rec = methods_of(shape).get(m)
        k = kernel(rec)
        if not m.startswith("gemmtune") or k is None or not rec.get("sweep") or rec.get("choice") == best:
            continue
        if k["ms"] <= best_ms_ * MISS_MARGIN:
            continue
        timed = next((r for r in rec["sweep"] if r.get("choice") == best), None)
        kept = f"it kept `{rec['choice']}` ({k['ms'] * 1e3:.1f} µs)"
        if timed is None:
            out.append(f"{label}: never timed `{best}` ({best_ms_ * 1e3:.1f} µs here), the fastest gemmtune choice; {kept}")
        elif timed.get("ms") is None:
            out.append(f"{label}: `{best}` failed in its sweep ({timed.get('status')}); {kept}")
        else:
            out.append(f"{label}: timed `{best}` at {timed['ms'] * 1e3:.1f} µs in its sweep "
                       f"({best_ms_ * 1e3:.1f} µs here); {kept}")
    return out


def methods_present(doc: dict) -> list[str]:
    """Methods with at least one ok record, in METHODS order."""
    return [m for m, _ in METHODS if any(kernel(methods_of(s).get(m)) for s in doc["shapes"])]


def floor_fraction(shape: dict, rec: dict | None) -> float | None:
    """floor / kernel time of one record on one shape (1.0 = at the physical floor)."""
    k = kernel(rec)
    return shape["floor_ms"] / k["ms"] if k and shape.get("floor_ms") else None


def read_fraction(shape: dict, rec: dict | None) -> float | None:
    """The shape's read reference time / the record's kernel time (gemmtune.bench.readtime: a kernel
    that only reads the shape's input bytes, in the same rounds; 1.0 = as fast as that read), or
    None where either has no time.

    >>> read_fraction({"read": {"status": "ok", "kernel": {"ms": 0.0098}}}, {"status": "ok", "kernel": {"ms": 0.0118}})
    0.8305084745762712
    >>> read_fraction({}, {"status": "ok", "kernel": {"ms": 1.0}}) is None
    True
    """
    k, r = kernel(rec), kernel(shape.get("read"))
    return r["ms"] / k["ms"] if k and r else None


def group_speedups(doc: dict, method: str) -> dict[str, dict]:
    """Per group (and 'all'): geomean speedup over cuBLAS, shape count, wins / ties / losses, the
    geomean fraction of the physical floor reached (``floor``; None where no shape has one), and
    the geomean fraction of the read reference's speed (``read``, over ``read_n`` shapes; None
    where no shape has one). ``method`` 'cublas' gives cuBLAS's own fractions (speedup 1 by
    definition)."""
    acc: dict[str, list] = defaultdict(list)
    for s in doc["shapes"]:
        if method == "cublas":
            x, tie, rec = (1.0, True, s.get("cublas")) if kernel(s.get("cublas")) else (None, False, None)
        else:
            (x, tie), rec = method_speedup(s, method), methods_of(s).get(method)
        # The floor fraction needs the method's kernel time only, not cuBLAS's: a shape where
        # cuBLAS failed still counts in the method's '% of the floor'.
        f, rd = floor_fraction(s, rec), read_fraction(s, rec)
        if x is not None or f is not None:
            acc[s["group"]].append((x, tie, f, rd))
            acc["all"].append((x, tie, f, rd))
    out = {}
    for g, ys in acc.items():
        xs = [(x, t) for x, t, _, _ in ys if x is not None]
        fl = [f for _, _, f, _ in ys if f is not None]
        rds = [rd for *_, rd in ys if rd is not None]
        out[g] = {"geomean": geomean(x for x, _ in xs), "n": len(xs),
                  "wins": sum(x > 1 and not t for x, t in xs), "ties": sum(t for _, t in xs),
                  "losses": sum(x < 1 and not t for x, t in xs),
                  "floor": geomean(fl) if fl else None, "floor_n": len(fl),
                  "read": geomean(rds) if rds else None, "read_n": len(rds)}
    return out


def tuning_summary(doc: dict, method: str) -> dict:
    """Tuning wall time of ``method`` against max-autotune's on the shapes both tuned (``shapes``
    of them), and the geomean fraction of the best measured kernel time it reached on every shape
    it tuned (``fraction_shapes`` of them: issue #19's target is the geomean over the suite,
    whether or not max-autotune ran on a shape).

    A shape's ``tune_s`` leaves out the run's one worker start-up (the header's ``modes[method]
    ["startup_s"]``), which a user's ``tune`` call pays too: ``ratio_with_startup`` adds it, where
    max-autotune ran on every shape the method tuned (session 43's odd group: 0.27x without it,
    0.38x with it). None where the header does not record it (a report merged from older runs).

    >>> doc = {"header": {"modes": {"gemmtune_fast": {"startup_s": 3.0}}}, "shapes": [
    ...     {"methods": {"gemmtune_fast": {"status": "ok", "kernel": {"ms": 1.0}, "tune_s": 1.0},
    ...                  "inductor": {"status": "ok", "kernel": {"ms": 1.0}, "tune_s": 10.0}}}]}
    >>> t = tuning_summary(doc, "gemmtune_fast")
    >>> t["ratio"], t["ratio_with_startup"], t["startup_s"]
    (0.1, 0.4, 3.0)
    """
    mine = theirs = 0.0
    fractions, n = [], 0
    for s in doc["shapes"]:
        rec = methods_of(s).get(method)
        ind = methods_of(s).get("inductor")
        if kernel(rec) is None or rec.get("tune_s") is None:
            continue
        fractions.append(speedup(best_ms(s), kernel(rec)["ms"]))
        if kernel(ind) is not None and ind.get("tune_s") is not None:
            mine += rec["tune_s"]
            theirs += ind["tune_s"]
            n += 1
    total = sum((methods_of(s).get(method) or {}).get("tune_s") or 0.0 for s in doc["shapes"])
    # A null mode record in the header (as a null method record on a shape): nothing recorded.
    startup = (((doc.get("header") or {}).get("modes") or {}).get(method) or {}).get("startup_s")
    with_startup = ((mine + startup) / theirs if theirs and startup is not None and n == len(fractions)
                    else None)
    return {"tune_s": total, "shapes": n, "ratio": mine / theirs if theirs else None,
            "startup_s": startup, "ratio_with_startup": with_startup,
            "fraction_of_best": geomean(fractions), "fraction_shapes": len(fractions)}


def failed_only(shapes, method: str) -> bool:
    """True when ``method`` has a record on some of ``shapes`` but a verified kernel on none: it
    ran and failed (wrong, error) on every one of them, which is not 'not run'. A ``skipped``
    record (the mode not part of the run, a dependency missing) is not a run."""
    recs = [r for s in shapes if (r := methods_of(s).get(method)) and r.get("status") != "skipped"]
    return bool(recs) and not any(kernel(r) for r in recs)


def targets(doc: dict) -> dict[str, dict]:
    """For each gemmtune mode: each target's value and verdict (MET / MISSED / NOT RUN, or FAILED
    where the mode ran on the group's shapes and reached a verified kernel on none)."""
    out = {}
    for m in GEMMTUNE_METHODS:
        gs = group_speedups(doc, m)
        rows = {}
        for g, thr in SPEEDUP_TARGETS:
            v = gs.get(g, {}).get("geomean")
            # A mode that failed on every shape of the group read NOT RUN, as if it had not run.
            failed = v is None and failed_only([s for s in doc["shapes"] if s["group"] == g], m)
            rows[g] = {"value": v, "threshold": thr, "verdict": "FAILED" if failed else verdict(v, thr),
                       "n": gs.get(g, {}).get("n", 0),
                       "of": sum(s["group"] == g for s in doc["shapes"])}
        t = tuning_summary(doc, m)
        ratio = t["ratio_with_startup"] if t["ratio_with_startup"] is not None else t["ratio"]
        if t["fraction_of_best"] is None and failed_only(doc["shapes"], m):
            tv = "FAILED"
        elif ratio is None or t["fraction_of_best"] is None:
            tv = "NOT RUN"
        else:
            tv = "MET" if (verdict(ratio, TUNE_TIME_RATIO, at_most=True) == "MET"
                           and verdict(t["fraction_of_best"], TUNE_QUALITY) == "MET") else "MISSED"
        rows["tuning"] = {**t, "verdict": tv}
        out[m] = rows
    return out
