"""Reports: Markdown tables and PNG plots from a bench JSON (``gemmtune bench``), merging
of partial runs, and the Markdown of a tuning run directory (``scripts/gpu_run.sh tune``).

    gemmtune report out/2026-11-23-h200-torch2.11.0-cu130-triton3.6.0-bench.json
    gemmtune report --merge part-a-bench.json part-b-bench.json --out benchmarks/results/DIR
    gemmtune report --tune-run benchmarks/results/2026-11-21-h200-public-full

A bench JSON (schema ``gemmtune-bench/1``, written by gemmtune.benchmark) holds a header
(GPU, date, versions), the ceilings measured in the same run, notes, and one record per
shape: the roofline floor, cuBLAS, and one record per method, each
``{"status": "ok", "choice": ..., "kernel": {"ms", "spread", "repeats"}, "eager": {...},
"tune_s": ..., "rel_err": ...}`` or ``{"status": "skipped" | "wrong" | "error", "reason": ...}``.
A method record may carry ``baseline``, the cuBLAS time measured in the same process as
that method when it differs from the shape's cuBLAS (recorded runs assembled from two
calls); speedups use it.

Since the interleaved timing (gemmtune.benchmark.round_robin), a kernel entry also holds
``rounds``, ``round_ms`` and ``round_spread`` (per round), ``within_spread`` and
``across_spread`` (``spread`` is the larger), and the ceilings hold ``read`` (a read
bandwidth, beside ``copy``) and ``memory_gbps``; older JSONs, without them, still read
and render (their floors are the copy bandwidth's, as they were computed then). A method
whose choice is ``aten`` ran the very kernel cuBLAS ran (``same_kernel_as_cublas``): the
report marks it, since any difference from cuBLAS there is measurement noise.

The arithmetic is in small pure functions with exact tests: ``geomean``, ``is_tie``,
``speedup``, ``roofline_ms``, ``memory_gbps``, ``verdict``.

Example::

    >>> from gemmtune.report import geomean, is_tie
    >>> geomean([2.0, 8.0])
    4.0
    >>> is_tie(10.0, 0.05, 10.4, 0.0)   # 0.4 apart, inside 10.0 x 5% IQR
    True
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import time
from collections import defaultdict
from pathlib import Path

from .jsonio import read_json

SCHEMA = "gemmtune-bench/1"
GROUPS = ("decode", "prefill", "splitk", "odd", "square")
# (key in a shape's "methods", label). The first three are gemmtune's own modes.
METHODS = (
    ("gemmtune", "gemmtune default"),
    ("gemmtune_fast", "gemmtune --fast"),
    ("gemmtune_top5", "gemmtune model top-5"),
    ("gemmtune_auto", "gemmtune model adaptive top-k"),
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
PLOTS = ("speedup", "roofline", "tuning")


# ------------------------------------------------------------------ pure arithmetic
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


# ------------------------------------------------------------------ reading records
def kernel(rec: dict | None) -> dict | None:
    """The kernel time entry {ms, spread, repeats} of an ok record, else None."""
    if not rec or rec.get("status") != "ok":
        return None
    k = rec.get("kernel")
    return k if k and k.get("ms") else None


def method_speedup(shape: dict, method: str) -> tuple[float | None, bool]:
    """(speedup over cuBLAS, tie) of one method on one shape; (None, False) without data."""
    rec = shape.get("methods", {}).get(method)
    k = kernel(rec)
    base = (rec or {}).get("baseline") or kernel(shape.get("cublas"))
    if k is None or base is None:
        return None, False
    return speedup(base["ms"], k["ms"]), is_tie(base["ms"], base.get("spread"), k["ms"], k.get("spread"))


# The kernel cuBLAS's row runs: torch.mm. A method whose choice is exactly this ran the same
# kernel ('pad+aten' runs it on padded copies: not the same; Inductor's 'aten' is its
# extern_kernels.mm, torch.mm again).
CUBLAS_CHOICE = "aten"
SAME_MARK = "†"
SAME_NOTE = (f"{SAME_MARK} same kernel as cuBLAS (choice `{CUBLAS_CHOICE}`: the very torch.mm call of the cuBLAS "
             "row), so any difference from 1.00× there is measurement noise, not a faster or slower kernel; "
             "the times are shown as measured.")


def same_kernel_as_cublas(shape: dict, method: str) -> bool:
    """True when ``method`` ran cuBLAS's own kernel on the shape (choice ``aten``, not ``pad+aten``)."""
    rec = shape.get("methods", {}).get(method) or {}
    base = (shape.get("cublas") or {}).get("choice", CUBLAS_CHOICE)
    return kernel(rec) is not None and rec.get("choice") == CUBLAS_CHOICE and base == CUBLAS_CHOICE


def best_ms(shape: dict) -> float | None:
    """The fastest verified kernel time any method (cuBLAS included) reached on the shape."""
    times = [k["ms"] for k in [kernel(shape.get("cublas"))] +
             [kernel(r) for r in shape.get("methods", {}).values()] if k]
    return min(times) if times else None


def methods_present(doc: dict) -> list[str]:
    """Methods with at least one ok record, in METHODS order."""
    return [m for m, _ in METHODS if any(kernel(s.get("methods", {}).get(m)) for s in doc["shapes"])]


def floor_fraction(shape: dict, rec: dict | None) -> float | None:
    """floor / kernel time of one record on one shape (1.0 = at the physical floor)."""
    k = kernel(rec)
    return shape["floor_ms"] / k["ms"] if k and shape.get("floor_ms") else None


def group_speedups(doc: dict, method: str) -> dict[str, dict]:
    """Per group (and 'all'): geomean speedup over cuBLAS, shape count, wins / ties / losses, and
    the geomean fraction of the physical floor reached (``floor``; None where no shape has one).
    ``method`` 'cublas' gives cuBLAS's own floor fraction (speedup 1 by definition)."""
    acc: dict[str, list] = defaultdict(list)
    for s in doc["shapes"]:
        if method == "cublas":
            x, tie, rec = (1.0, True, s.get("cublas")) if kernel(s.get("cublas")) else (None, False, None)
        else:
            (x, tie), rec = method_speedup(s, method), s.get("methods", {}).get(method)
        if x is not None:
            f = floor_fraction(s, rec)
            acc[s["group"]].append((x, tie, f))
            acc["all"].append((x, tie, f))
    out = {}
    for g, xs in acc.items():
        fl = [f for _, _, f in xs if f is not None]
        out[g] = {"geomean": geomean(x for x, _, _ in xs), "n": len(xs),
                  "wins": sum(x > 1 and not t for x, t, _ in xs), "ties": sum(t for _, t, _ in xs),
                  "losses": sum(x < 1 and not t for x, t, _ in xs),
                  "floor": geomean(fl) if fl else None}
    return out


def tuning_summary(doc: dict, method: str) -> dict:
    """Tuning wall time of ``method`` against max-autotune's on the shapes both tuned, and the
    geomean fraction of the best measured kernel time it reached there."""
    mine = theirs = 0.0
    fractions, n = [], 0
    for s in doc["shapes"]:
        rec = s.get("methods", {}).get(method)
        ind = s.get("methods", {}).get("inductor")
        if kernel(rec) is None or rec.get("tune_s") is None:
            continue
        fractions.append(speedup(best_ms(s), kernel(rec)["ms"]))
        if kernel(ind) is not None and ind.get("tune_s") is not None:
            mine += rec["tune_s"]
            theirs += ind["tune_s"]
            n += 1
    total = sum(s.get("methods", {}).get(method, {}).get("tune_s") or 0.0 for s in doc["shapes"])
    return {"tune_s": total, "shapes": n, "ratio": mine / theirs if theirs else None,
            "fraction_of_best": geomean(fractions)}


def targets(doc: dict) -> dict[str, dict]:
    """For each gemmtune mode: each target's value and verdict (MET / MISSED / NOT RUN)."""
    out = {}
    for m in GEMMTUNE_METHODS:
        gs = group_speedups(doc, m)
        rows = {}
        for g, thr in SPEEDUP_TARGETS:
            v = gs.get(g, {}).get("geomean")
            rows[g] = {"value": v, "threshold": thr, "verdict": verdict(v, thr),
                       "n": gs.get(g, {}).get("n", 0),
                       "of": sum(s["group"] == g for s in doc["shapes"])}
        t = tuning_summary(doc, m)
        if t["ratio"] is None or t["fraction_of_best"] is None:
            tv = "NOT RUN"
        else:
            tv = "MET" if (verdict(t["ratio"], TUNE_TIME_RATIO, at_most=True) == "MET"
                           and verdict(t["fraction_of_best"], TUNE_QUALITY) == "MET") else "MISSED"
        rows["tuning"] = {**t, "verdict": tv}
        out[m] = rows
    return out


# ------------------------------------------------------------------ files
def load_bench(path: str | os.PathLike) -> dict:
    """Read a bench JSON; ValueError names the file when it is not one."""
    path = Path(path)
    doc = read_json(path)
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise ValueError(f"{path} is not a gemmtune bench JSON (schema {SCHEMA!r}); "
                         "for a `gemmtune tune` run directory use --tune-run")
    return doc


def slug(text: str) -> str:
    """File-name-safe lower-case text: 'NVIDIA H200' -> 'h200', '2.11.0+cu130' -> '2.11.0-cu130'."""
    t = text.lower().replace("nvidia", " ")
    out = "".join(c if c.isalnum() or c == "." else "-" for c in t)
    return "-".join(p for p in out.split("-") if p)


def bench_filename(header: dict, suffix: str = "") -> str:
    """``<date>-<gpu>-torch<v>-triton<v>[-suffix]-bench.json`` from a bench header."""
    parts = [header["date"][:10], slug(header["device_name"]), "torch" + slug(header["torch"]),
             "triton" + slug(header["triton"])]
    if suffix:
        parts.append(slug(suffix))
    return "-".join(parts) + "-bench.json"


def save_bench(doc: dict, path: str | os.PathLike) -> Path:
    """Write atomically (a killed run never leaves half a file)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, allow_nan=False))
    os.replace(tmp, path)
    return path


_SAME = ("device_name", "torch", "triton", "gemmtune")


def merge_bench(docs: list[dict]) -> dict:
    """One bench document from partial runs (``--groups`` / ``--limit``) on the same GPU and
    software. A shape measured in several parts keeps the last part's record. Ceilings
    are the first part's (each part's own stay under ``parts``; its shapes' floors were
    computed from them)."""
    if not docs:
        raise ValueError("nothing to merge")
    h0 = docs[0]["header"]
    for d in docs[1:]:
        diff = [k for k in _SAME if d["header"].get(k) != h0.get(k)]
        if diff:
            raise ValueError("cannot merge runs that differ in " + ", ".join(
                f"{k} ({h0.get(k)} vs {d['header'].get(k)})" for k in diff)
                + ": their times do not compare")
    shapes: dict[str, dict] = {}
    notes: list[str] = []
    for d in docs:
        for s in d["shapes"]:
            shapes.pop(s["key"] + "|" + s["name"], None)
            shapes[s["key"] + "|" + s["name"]] = s
        notes += [n for n in d.get("notes", []) if n not in notes]
    order = {g: i for i, g in enumerate(GROUPS)}
    merged = sorted(shapes.values(), key=lambda s: order.get(s["group"], len(order)))
    groups = [g for g in GROUPS if any(s["group"] == g for s in merged)]
    groups += sorted({s["group"] for s in merged} - set(groups))
    header = {**h0, "date": max(d["header"]["date"] for d in docs), "groups": groups, "limit": None,
              "merged_from": len(docs)}
    parts = []
    for d in docs:
        for p in d.get("parts") or [{"date": d["header"]["date"], "groups": d["header"].get("groups"),
                                     "limit": d["header"].get("limit"), "ceilings": d.get("ceilings")}]:
            parts.append(p)
    return {"schema": SCHEMA, "source": docs[0].get("source", ""), "header": header,
            "ceilings": docs[0].get("ceilings"), "notes": notes, "parts": parts, "shapes": merged}


# ------------------------------------------------------------------ Markdown
def _us(ms: float | None) -> str:
    return f"{ms * 1e3:.2f}" if ms else "-"


def _x(x: float | None, tie: bool = False, same: bool = False) -> str:
    if x is None:
        return "-"
    return f"{x:.2f}×" + (" tie" if tie else "") + (f" {SAME_MARK}" if same else "")


def _dims(s: dict) -> str:
    short = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
    batch = f"{s['batch']}×" if s.get("batch", 1) != 1 else ""  # a bmm's batch first
    return f"{batch}{s['m']}×{s['n']}×{s['k']} {short.get(s['dtype'], s['dtype'])}"


def _why(rec: dict | None) -> str:
    if not rec:
        return "not run"
    r = str(rec.get("reason", "")).replace("|", "/").replace("\n", " ")
    return f"{rec.get('status', '?')}: {r[:140]}" if r else str(rec.get("status", "?"))


def _choice(rec: dict) -> str:
    """The method's choice; for Inductor, where its generated code named no kernel we
    recognise (e.g. its DecomposeK subgraph), the winner its autotuner logged."""
    c = rec.get("choice")
    if c:
        return f"`{c}`"
    picks = [str(a["pick"]).replace("|", "/") for a in rec.get("autotune") or ()
             if isinstance(a, dict) and a.get("pick")]
    return f"autotune pick: `{' + '.join(picks)}`" if picks else "(not recorded)"


def _ceilings_line(doc: dict) -> str:
    c = doc.get("ceilings") or {}
    cp = c.get("copy") or {}
    rd = c.get("read") or {}
    mm = c.get("mm") or {}
    bits = []
    if cp.get("gbps"):
        bits.append(f"copy bandwidth {cp['gbps']:.0f} GB/s")
    if rd.get("gbps"):
        each = ", ".join(f"{k} {v['gbps']:.0f}" for k, v in (rd.get("kernels") or {}).items() if v.get("gbps"))
        bits.append(f"read bandwidth {rd['gbps']:.0f} GB/s" + (f" (best of {each})" if each else ""))
    elif rd.get("status"):
        bits.append(f"read bandwidth not measured ({rd['status']})")
    for dt in ("bfloat16", "float16", "float32"):
        if (mm.get(dt) or {}).get("tflops"):
            bits.append(f"{dt} mm {mm[dt]['tflops']:.1f} TFLOP/s")
    how = c.get("how", "")
    return ("Ceilings: " + ", ".join(bits) + (f" ({how})" if how else "") + ".") if bits else "Ceilings: none recorded."


def _floor_line(doc: dict) -> str:
    """How the floors of this document were computed (older JSONs: the copy bandwidth only)."""
    c = doc.get("ceilings") or {}
    if (c.get("read") or {}).get("gbps"):
        mem = (f"minimum bytes / memory bandwidth, the higher of the copy and the read bandwidth "
               f"({memory_gbps(c):.0f} GB/s)")
    else:
        mem = "minimum bytes / copy bandwidth"
    return (f"A shape's floor is max(flops / mm peak of its dtype, {mem}); minimum bytes = A and B read once, "
            "C written once. Efficiency = floor / time; above 100% the kernel beat the floor (measurement "
            "noise, or a ceiling measured below what the GPU can do) and is shown as measured, never capped.")


def render_markdown(doc: dict, plots: dict[str, str] | None = None) -> str:
    """The whole report as Markdown. ``plots``: PNG file names (relative to the Markdown)."""
    h = doc["header"]
    present = methods_present(doc)
    L: list[str] = []
    L.append(f"# gemmtune bench: {h['device_name']}, {h['date'][:10]}\n")
    if doc.get("source"):
        L.append(f"> {doc['source']}\n")
    vers = ", ".join(f"{k} {h[k]}" for k in ("torch", "triton", "gemmtune", "nvmmh", "python") if h.get(k))
    L.append(f"{h['device_name']} (sm {h.get('capability', '?')}), {vers}. Suite `{h.get('suite', '?')}`, "
             f"groups {', '.join(h.get('groups') or ['all'])}"
             + (f", first {h['limit']} shapes" if h.get("limit") else "") + f"; {len(doc['shapes'])} shapes.\n")
    L.append(_ceilings_line(doc) + " " + _floor_line(doc) + "\n")
    L.append(f"Kernel time: {h.get('timer', 'device time')}. Every output was checked against an fp64 "
             "reference before its time was kept. `×` = cuBLAS time / method time (cuBLAS measured in the "
             "same process); `tie` = the difference is smaller than the larger of the two spreads (relative IQR; "
             "with interleaved rounds, at least the across-round range). "
             "Geomeans count ties at their measured ratio.\n")
    if h.get("modes"):
        L.append("What each tuned method ran: " + "; ".join(
            f"{LABELS.get(m, m)}: {', '.join(f'{k}={v!r}' for k, v in r.get('kwargs', {}).items()) or 'defaults'} "
            f"({r.get('measured', '?')} candidates, {r.get('wall_s', 0):.0f} s)" for m, r in h["modes"].items()) + ".\n")
    if doc.get("notes"):
        L.append("Notes:\n")
        L += [f"- {n}" for n in doc["notes"]]
        L.append("")

    # Targets
    any_same = any(same_kernel_as_cublas(x, m) for x in doc["shapes"] for m in present)
    tg = targets(doc)
    L.append("## Targets\n")
    L.append("| target | threshold | " + " | ".join(LABELS[m] for m in GEMMTUNE_METHODS) + " |")
    L.append("|---|---|" + "---|" * len(GEMMTUNE_METHODS))
    for g, thr in SPEEDUP_TARGETS:
        cells = []
        for m in GEMMTUNE_METHODS:
            r = tg[m][g]
            part = f" ({r['n']} of {r['of']} shapes)" if r["value"] is not None and r["n"] < r["of"] else ""
            cells.append(f"{_x(r['value'])} **{r['verdict']}**{part}" if r["value"] is not None
                         else f"**{r['verdict']}**")
        L.append(f"| {g}: geomean speedup over cuBLAS | ≥ {thr:.2f}× | " + " | ".join(cells) + " |")
    cells = []
    for m in GEMMTUNE_METHODS:
        r = tg[m]["tuning"]
        if r["verdict"] == "NOT RUN":
            cells.append("**NOT RUN**")
        else:
            cells.append(f"{r['ratio']:.2f}× the time at {r['fraction_of_best'] * 100:.1f}% of best "
                         f"**{r['verdict']}**")
    L.append(f"| tuning wall time vs max-autotune, at % of the best kernel | ≤ {TUNE_TIME_RATIO:.2f}× at "
             f"≥ {TUNE_QUALITY * 100:.0f}% | " + " | ".join(cells) + " |")
    L.append("")
    for m in GEMMTUNE_METHODS:
        met = [k for k, r in tg[m].items() if r["verdict"] == "MET"]
        missed = [k for k, r in tg[m].items() if r["verdict"] == "MISSED"]
        if not met and not missed:
            L.append(f"- {LABELS[m]}: not run.")
        else:
            L.append(f"- {LABELS[m]}: {len(met)} of {len(met) + len(missed)} targets MET"
                     + (f" ({', '.join(met)})" if met else "")
                     + (f"; MISSED: {', '.join(missed)}" if missed else "") + ".")
    exhaustive = ("`gemmtune exhaustive` benchmarked the whole exhaustive space of the shapes it ran on"
                  if "gemmtune_exhaustive" in present else "no exhaustive search is part of it")
    L.append("\nThe best kernel is the fastest verified time any method reached on the shape in this "
             f"run (cuBLAS included); {exhaustive}.\n")

    # Geomeans per group
    L.append("## Geomean speedup over cuBLAS\n")
    L.append("Per cell: geomean (shapes; wins / ties / losses)."
             + (f" Shapes where a method ran cuBLAS's own kernel ({SAME_MARK} in the tables below) count "
                "at their measured ratio." if any_same else "") + "\n")
    L.append("| group | " + " | ".join(LABELS[m] for m in present) + " |")
    L.append("|---|" + "---|" * len(present))
    per = {m: group_speedups(doc, m) for m in present}
    groups = [*(g for g in GROUPS if any(s["group"] == g for s in doc["shapes"])), "all"]
    for g in groups:
        cells = []
        for m in present:
            r = per[m].get(g)
            cells.append(f"{_x(r['geomean'])} ({r['n']}; {r['wins']}/{r['ties']}/{r['losses']})" if r else "-")
        L.append(f"| {g} | " + " | ".join(cells) + " |")
    L.append("")
    # The distance still to go: how close each method came to the physical floor.
    L.append("## Geomean % of the physical floor\n")
    L.append("Per cell: geomean over the group's shapes of floor / kernel time (100% = at the floor).\n")
    per["cublas"] = group_speedups(doc, "cublas")
    cols = ["cublas", *present]
    L.append("| group | " + " | ".join("cuBLAS" if m == "cublas" else LABELS[m] for m in cols) + " |")
    L.append("|---|" + "---|" * len(cols))
    for g in groups:
        cells = [f"{per[m][g]['floor'] * 100:.0f}%" if per[m].get(g) and per[m][g]["floor"] else "-"
                 for m in cols]
        L.append(f"| {g} | " + " | ".join(cells) + " |")
    L.append("")

    # Tuning time
    L.append("## Tuning wall time\n")
    L.append("| method | total s | vs max-autotune (same shapes) | geomean % of best kernel |")
    L.append("|---|---|---|---|")
    for m in present:
        t = tuning_summary(doc, m)
        L.append(f"| {LABELS[m]} | {t['tune_s']:.1f} | "
                 + (f"{t['ratio']:.2f}× ({t['shapes']} shapes)" if t["ratio"] is not None else "-") + " | "
                 + (f"{t['fraction_of_best'] * 100:.1f}%" if t["fraction_of_best"] else "-") + " |")
    L.append("")

    # Overview
    L.append("## Per shape: speedup over cuBLAS\n")
    L.append("| group | shape | M×N×K dtype | floor µs | cuBLAS µs | " + " | ".join(LABELS[m] for m in present) + " |")
    L.append("|---|---|---|---|---|" + "---|" * len(present))
    for s in doc["shapes"]:
        cb = kernel(s.get("cublas"))
        L.append(f"| {s['group']} | {s['name']} | {_dims(s)} | {_us(s.get('floor_ms'))} | "
                 f"{_us(cb['ms'] if cb else None)} | "
                 + " | ".join(_x(*method_speedup(s, m), same_kernel_as_cublas(s, m)) for m in present) + " |")
    L.append("")
    if any_same:
        L.append(SAME_NOTE + "\n")

    # Detail per shape
    L.append("## Per shape: every method\n")
    for s in doc["shapes"]:
        floor = s.get("floor_ms")
        L.append(f"### {s['group']} / {s['name']}: {_dims(s)}\n")
        L.append(f"Floor {_us(floor)} µs ({s.get('bound', '?')}-bound); best kernel {_us(best_ms(s))} µs.\n")
        L.append("| method | choice | kernel µs | spread | × cuBLAS | % of floor | eager µs | tune s | rel. err |")
        L.append("|---|---|---|---|---|---|---|---|---|")
        rows = [("cuBLAS", s.get("cublas"), None)] + [(LABELS[m], s.get("methods", {}).get(m), m)
                                                     for m, _ in METHODS]
        shape_same = False
        for label, rec, m in rows:
            k = kernel(rec)
            if k is None:
                if m is None or rec:
                    L.append(f"| {label} | {_why(rec)} | | | | | | | |")
                continue
            x, tie = method_speedup(s, m) if m else (1.0, False)
            same = bool(m) and same_kernel_as_cublas(s, m)
            shape_same = shape_same or same
            spread = f"{k['spread'] * 100:.1f}%" if k.get("spread") is not None else "-"
            eff = f"{floor / k['ms'] * 100:.0f}%" if floor else "-"
            eager = (rec.get("eager") or {}).get("ms")
            tune = f"{rec['tune_s']:.1f}" if rec.get("tune_s") is not None else "-"
            rel = f"{rec['rel_err']:.1e}" if rec.get("rel_err") is not None else "-"
            L.append(f"| {label} | {_choice(rec)} | {_us(k['ms'])} | {spread} | {_x(x, tie, same)} | "
                     f"{eff} | {_us(eager)} | {tune} | {rel} |")
        L.append("")
        if shape_same:
            L.append(f"{SAME_MARK} same kernel as cuBLAS: the difference is noise.\n")

    if plots:
        L.append("## Plots\n")
        titles = {"speedup": "Speedup over cuBLAS per shape", "roofline": "Efficiency against the roofline floor",
                  "tuning": "Tuning wall time against kernel performance"}
        for k, name in plots.items():
            L.append(f"![{titles.get(k, k)}]({name})\n")
    return "\n".join(L).rstrip() + "\n"


# ------------------------------------------------------------------ plots
def _figure(width: float, height: float):
    # The object API with the Agg canvas: no pyplot, no global backend switch.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _bars(ax, doc: dict, series: list[tuple[str, list]], ylabel: str, ref: float | None, log: bool) -> None:
    names = [s["name"] for s in doc["shapes"]]
    n = max(1, len(series))
    w = 0.8 / n
    for i, (label, ys) in enumerate(series):
        xs = [j - 0.4 + w * (i + 0.5) for j in range(len(names))]
        ax.bar([x for x, y in zip(xs, ys) if y], [y for y in ys if y], width=w, label=label)
    if ref is not None:
        ax.axhline(ref, color="black", linewidth=0.8)
    if log:
        from matplotlib.ticker import FuncFormatter

        ax.set_yscale("log")
        for axis in (ax.yaxis.set_major_formatter, ax.yaxis.set_minor_formatter):
            axis(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel(ylabel)
    prev = None
    for j, s in enumerate(doc["shapes"]):  # group boundaries and names
        if s["group"] != prev:
            if j:
                ax.axvline(j - 0.5, color="grey", linewidth=0.5, linestyle=":")
            ax.text(j - 0.4, 1.0, s["group"], transform=ax.get_xaxis_transform(), fontsize=8,
                    va="bottom")
            prev = s["group"]
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def plot_speedup(doc: dict, path: str | os.PathLike) -> Path:
    present = methods_present(doc)
    fig = _figure(max(8.0, 0.45 * len(doc["shapes"]) + 3), 4.5)
    ax = fig.add_subplot()
    _bars(ax, doc, [(LABELS[m], [method_speedup(s, m)[0] for s in doc["shapes"]]) for m in present],
          "speedup over cuBLAS (×, log)", 1.0, True)
    ax.set_title(f"Speedup over cuBLAS, {doc['header']['device_name']}", fontsize=10, pad=14)
    fig.savefig(path, dpi=110)
    return Path(path)


def plot_roofline(doc: dict, path: str | os.PathLike) -> Path:
    present = methods_present(doc)

    def eff(s, rec):
        k = kernel(rec)
        return s["floor_ms"] / k["ms"] if k and s.get("floor_ms") else None

    series = [("cuBLAS", [eff(s, s.get("cublas")) for s in doc["shapes"]])]
    series += [(LABELS[m], [eff(s, s.get("methods", {}).get(m)) for s in doc["shapes"]]) for m in present]
    fig = _figure(max(8.0, 0.45 * len(doc["shapes"]) + 3), 4.5)
    ax = fig.add_subplot()
    _bars(ax, doc, series, "floor / kernel time", 1.0, False)
    ax.set_title(f"Efficiency against the roofline floor, {doc['header']['device_name']}", fontsize=10, pad=14)
    fig.savefig(path, dpi=110)
    return Path(path)


def plot_tuning(doc: dict, path: str | os.PathLike) -> Path:
    fig = _figure(7.0, 4.5)
    ax = fig.add_subplot()
    for m in methods_present(doc):
        pts = []
        for s in doc["shapes"]:
            rec = s.get("methods", {}).get(m)
            if kernel(rec) and rec.get("tune_s"):
                pts.append((rec["tune_s"], best_ms(s) / kernel(rec)["ms"]))
        if pts:
            t = tuning_summary(doc, m)
            line = ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=14, alpha=0.6, label=LABELS[m])
            ax.scatter([t["tune_s"] / len(pts)], [t["fraction_of_best"]], s=120, marker="*",
                       color=line.get_facecolor()[0], edgecolor="black", linewidth=0.5)
    ax.axhline(TUNE_QUALITY, color="grey", linewidth=0.8, linestyle="--")
    ax.set_xscale("log")
    ax.set_xlabel("tuning wall time per shape (s, log); star = mean time, geomean fraction")
    ax.set_ylabel("best kernel time / method's kernel time")
    ax.set_title(f"Tuning time against performance, {doc['header']['device_name']}", fontsize=10)
    ax.legend(fontsize=7)
    fig.savefig(path, dpi=110)
    return Path(path)


_PLOTTERS = {"speedup": plot_speedup, "roofline": plot_roofline, "tuning": plot_tuning}


def render(doc: dict, out_dir: str | os.PathLike, stem: str, *, plots: bool = True) -> dict[str, Path]:
    """Write ``<stem>.md`` and, with matplotlib, ``<stem>-{speedup,roofline,tuning}.png`` under
    ``out_dir``. Returns {'markdown': path, 'speedup': path, ...}."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    names: dict[str, str] = {}
    if plots and importlib.util.find_spec("matplotlib") is None:
        doc = {**doc, "notes": [*doc.get("notes", []),
                                "plots not drawn: matplotlib is not installed (pip install 'gemmtune[report]')"]}
    elif plots:
        for k in PLOTS:
            written[k] = _PLOTTERS[k](doc, out / f"{stem}-{k}.png")
            names[k] = written[k].name
    md = out / f"{stem}.md"
    md.write_text(render_markdown(doc, names))
    written["markdown"] = md
    return written


def render_file(path: str | os.PathLike, out_dir: str | os.PathLike | None = None, *,
                plots: bool = True) -> dict[str, Path]:
    """Render a bench JSON beside itself (or into ``out_dir``)."""
    path = Path(path)
    doc = load_bench(path)
    return render(doc, out_dir or path.parent, path.name.removesuffix(".json"), plots=plots)


# ------------------------------------------------------------------ tuning-run directories
def render_tune_run(run_dir: str | os.PathLike, title: str = "gemmtune tune, default space") -> str:
    """Markdown of one GPU tuning run as scripts/gpu_run.sh writes it: tune-summary.json (per
    shape, from the store), tune-run.json (per-shape tuning wall time), env.txt and,
    when present, inductor.json (torch.compile max-autotune in the same call)."""
    d = Path(run_dir)
    summ = json.loads((d / "tune-summary.json").read_text())
    run = json.loads((d / "tune-run.json").read_text())
    ind_doc = json.loads((d / "inductor.json").read_text()) if (d / "inductor.json").exists() else {}
    ind = {r["key"]: r for r in ind_doc.get("rows", [])}
    tune_s = {r["key"]: r["tune_s"] for r in run["shapes"]}
    ctx = run["context"]

    def geo(xs):
        g = geomean(xs)
        return f"{g:.3f}" if g is not None else "-"

    L = [f"# {title}\n",
         f"{ctx['device_name']} (sm {ctx['capability']}), torch {ctx['torch_version']}, "
         f"triton {ctx['triton_version']}, gemmtune {ctx['gemmtune_version']}. Environment: "
         f"`{(d / 'env.txt').read_text().splitlines()[0]}`.\n",
         "Device time: median of 20 CUDA-graph replays, L2-cold (rotating inputs > 2x L2). "
         "Every candidate verified against fp64 first. `x` = cuBLAS time / gemmtune time, same "
         "process; `tie` when the difference is inside the measured spread (IQR/median). "
         "Inductor: torch.compile(mode='max-autotune-no-cudagraphs') with caches disabled, "
         "timed the same way in the same call (its cuBLAS column is its own measurement).\n"]
    hdr = ("| group | shape | M×N×K dtype | best choice | best µs | cuBLAS µs | x | candidates | tune s "
           "| Inductor tune s | Inductor µs | Inductor x |")
    L += [hdr, "|---" * (hdr.count("|") - 1) + "|"]
    groups: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    tot_ours = tot_ind = 0.0
    for r in summ["rows"]:
        key = r["key"]
        m, n, k = key.split(":")[1].replace("M", "").replace("N", "").replace("K", "").split("-")
        x = speedup(r["aten_ms"], r["best_ms"])
        tie = (x is not None and r["best"] != "aten"
               and is_tie(r["aten_ms"], r.get("aten_spread"), r["best_ms"], r.get("best_spread")))
        i = ind.get(key, {})
        ix = speedup(i.get("aten_ms"), i.get("inductor_ms"))
        ts = tune_s.get(key)
        its = f"{i['inductor_tune_s']:.1f}" if "inductor_tune_s" in i else "-"
        tot_ours += ts or 0
        tot_ind += i.get("inductor_tune_s", 0) or 0
        groups[r["group"]]["ours"].append(x)
        groups[r["group"]]["ind"].append(ix)
        dtype = key.split(":")[2].split("->")[0]
        L.append(f"| {r['group']} | {r['name']} | {m}×{n}×{k} {dtype} | `{r['best']}` | {_us(r['best_ms'])} | "
                 f"{_us(r['aten_ms'])} | {x:.2f}{' tie' if tie else ''} | {r['candidates']} | "
                 f"{ts:.1f} | {its} | {_us(i.get('inductor_ms'))} | "
                 f"{f'{ix:.2f}' if ix else '-'} |")
    L.append("\n| group | shapes | gemmtune x (geomean) | Inductor x (geomean) |\n|---|---|---|---|")
    for name, g in groups.items():
        L.append(f"| {name} | {len(g['ours'])} | {geo(g['ours'])} | {geo(g['ind'])} |")
    allo = [x for g in groups.values() for x in g["ours"]]
    alli = [x for g in groups.values() for x in g["ind"]]
    L.append(f"| all | {len(allo)} | {geo(allo)} | {geo(alli)} |")
    L.append(f"\nTuning wall time, sum over shapes: gemmtune {tot_ours:.0f} s "
             f"({run['measured']} candidates, compiled in parallel), "
             + (f"Inductor max-autotune {tot_ind:.0f} s." if ind else "Inductor not run in this call."))
    return "\n".join(L) + "\n"


def bench_from_tune_run(run_dir: str | os.PathLike, names: list[str] | None = None) -> dict:
    """A bench document from a recorded tuning run directory (tune-summary.json, tune-run.json,
    optionally inductor.json), for shapes ``names`` (default all).

    What such a run lacks is said in the document: no ceilings were measured, so they are
    derived from the run itself (per dtype the best cuBLAS FLOP/s, and the best cuBLAS
    minimum-bytes/s: lower bounds of the real peaks); repeats are CudaGraphTimer's default
    20; Inductor ran in a separate call, so its record carries that call's cuBLAS time as
    its baseline; no other method ran.
    """
    from .problem import Problem

    d = Path(run_dir)
    summ = json.loads((d / "tune-summary.json").read_text())
    run = json.loads((d / "tune-run.json").read_text())
    ind_doc = json.loads((d / "inductor.json").read_text()) if (d / "inductor.json").exists() else {}
    ind = {r["key"]: r for r in ind_doc.get("rows", [])}
    ctx = run["context"]
    reps = 20

    def t(ms, spread, repeats=reps):
        return {"ms": ms, "spread": spread, "repeats": repeats}

    peaks: dict[str, float] = {}
    gbps = 0.0
    for r in summ["rows"]:
        p = Problem.from_key(r["key"])
        if r.get("aten_ms"):
            peaks[p.dtype] = max(peaks.get(p.dtype, 0.0), p.flops / (r["aten_ms"] * 1e9))
            gbps = max(gbps, p.min_bytes / (r["aten_ms"] * 1e6))
    ceilings = {"how": f"derived from the recorded cuBLAS times of {d.name}: lower bounds, not measured",
                "copy": {"gbps": gbps}, "mm": {dt: {"tflops": v} for dt, v in peaks.items()}}
    env_line = (d / "env.txt").read_text().splitlines()[0] if (d / "env.txt").exists() else ""
    header = {"date": ind_doc.get("date") or env_line or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "device_name": ctx["device_name"], "capability": ctx["capability"],
              "torch": ctx["torch_version"], "triton": ctx["triton_version"], "gemmtune": ctx["gemmtune_version"],
              "suite": "public", "groups": None, "limit": None, "repeats": reps,
              "timer": "median of 20 CUDA-graph replays, L2-cold (rotating inputs > 2x L2)",
              "inductor_mode": "max-autotune-no-cudagraphs"}
    shapes = []
    for r in summ["rows"]:
        if names is not None and r["name"] not in names:
            continue
        p = Problem.from_key(r["key"])
        floor = roofline_ms(p.flops, p.min_bytes, peaks.get(p.dtype), gbps)
        compute = p.flops / (peaks[p.dtype] * 1e9) if peaks.get(p.dtype) else 0.0
        cublas = {"status": "ok", "choice": "aten", "kernel": t(r["aten_ms"], r.get("aten_spread")),
                  "eager": t(r.get("aten_eager_ms"), None), "rel_err": None}
        methods = {"gemmtune": {"status": "ok", "choice": r["best"], "kernel": t(r["best_ms"], r.get("best_spread")),
                                "eager": t(r.get("best_eager_ms"), None), "tune_s": r.get("tune_s"),
                                "candidates": r.get("candidates"), "rel_err": None}}
        i = ind.get(r["key"])
        if i and i.get("inductor_ms") and i.get("inductor_ok"):
            methods["inductor"] = {"status": "ok", "choice": None, "kernel": t(i["inductor_ms"], i.get("inductor_spread"),
                                                                           i.get("repeats", reps)),
                                   "eager": t(i.get("inductor_eager_ms"), None), "tune_s": i.get("inductor_tune_s"),
                                   "rel_err": i.get("inductor_rel_err"),
                                   "baseline": t(i["aten_ms"], i.get("aten_spread"), i.get("repeats", reps))}
        elif i:
            methods["inductor"] = {"status": "error" if i.get("inductor_error") else "wrong",
                                   "reason": i.get("inductor_error", "output did not match the fp64 reference")}
        for m in ("gemmtune_fast", "gemmtune_top5", "nvmmh_top1", "nvmmh_top5"):
            methods[m] = {"status": "skipped", "reason": "not part of the recorded run"}
        shapes.append({"group": r["group"], "name": r["name"], "key": r["key"], "m": p.m, "n": p.n, "k": p.k,
                       "dtype": p.dtype, "flops": p.flops, "min_bytes": p.min_bytes, "floor_ms": floor,
                       "bound": "compute" if floor and compute >= floor else "memory",
                       "cublas": cublas, "methods": methods})
    return {"schema": SCHEMA,
            "source": (f"Assembled from the recorded run benchmarks/results/{d.name} (tune-summary.json, "
                       "tune-run.json, inductor.json) by gemmtune.report.bench_from_tune_run; not a "
                       "`gemmtune bench` measurement."),
            "header": header, "ceilings": ceilings,
            "notes": ["Inductor ran in a separate call of the same session; its speedups use that call's own "
                      "cuBLAS time (its baseline), the other methods the tuner's.",
                      "The chosen Inductor kernel was not recorded in inductor.json.",
                      "gemmtune --fast, the model top-5 and nvMatmulHeuristics were not part of the recorded run."],
            "shapes": shapes}
