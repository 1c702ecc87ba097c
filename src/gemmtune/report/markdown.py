"""A bench JSON as Markdown: header, ceilings, the per-group table against the targets, the
per-shape tables and the notes."""

from __future__ import annotations

from collections import Counter

from .records import (GEMMTUNE_METHODS, GROUPS, LABELS, METHODS, SAME_MARK, SAME_NOTE, SPEEDUP_TARGETS,
                      TUNE_QUALITY, TUNE_TIME_RATIO, best_ms, failed_only, group_speedups, kernel, method_speedup, methods_of,
                      methods_present, same_kernel_as_cublas, sweep_misses, targets, tuning_summary)
from .stats import memory_gbps, verdict, write_gbps


def _cell(text) -> str:
    """A suite's group or shape name as a table cell: a '|' in it (a CSV field may hold one) split
    the row into one column more than its table has, and shifted every later cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _row(cells) -> str:
    return "| " + " | ".join(cells) + " |"


def read_line(s: dict) -> str:
    """The per-shape header's words on the shape's ``read`` reference (gemmtune.bench.readtime):
    what reading its inputs' bytes alone took in the same rounds, as a share of the floor, and the
    best kernel's time as a share of it; '' where the record has none.

    >>> s = {"floor_ms": 0.00768, "read": {"status": "ok", "bytes": 33_570_816, "kernel": {"ms": 0.0097}},
    ...      "cublas": {"status": "ok", "kernel": {"ms": 0.0124}}}
    >>> read_line(s)[:83]
    ' A kernel that only reads its inputs (33.6 MB) took 9.70 µs in the same rounds, 79%'
    >>> read_line(s)[83:]
    ' of the floor; the best kernel ran at 78% of that read.'
    >>> read_line({"read": {"status": "error", "reason": "OutOfMemoryError: x"}})
    ' The read reference failed: OutOfMemoryError: x.'
    >>> read_line({"floor_ms": 1.0})
    ''
    """
    r = s.get("read")
    if not r:
        return ""
    k = kernel(r)
    if k is None:
        return f" The read reference failed: {r.get('reason') or r.get('status')}."
    floor, best = s.get("floor_ms"), best_ms(s)
    out = f" A kernel that only reads its inputs ({r['bytes'] / 1e6:.1f} MB) took {_us(k['ms'])} µs in the same rounds"
    if floor:
        out += f", {floor / k['ms']:.0%} of the floor"
    if best:
        out += f"; the best kernel ran at {k['ms'] / best:.0%} of that read"
    return out + "."


def _us(ms: float | None) -> str:
    return f"{ms * 1e3:.2f}" if ms else "-"


def _x(x: float | None, tie: bool = False, same: bool = False) -> str:
    if x is None:
        return "-"
    return f"{x:.2f}×" + (" tie" if tie else "") + (f" {SAME_MARK}" if same else "")


def _against(value: float, threshold: float, digits: int, *, at_most: bool = False, scale: float = 1.0) -> str:
    """``value * scale`` with ``digits`` decimals, or more where fewer would round it onto the
    other side of ``threshold`` (0.9796 against >= 0.98 reads '0.980', not '0.98' beside a MISSED)."""
    want = verdict(value, threshold, at_most=at_most)
    for d in range(digits, digits + 6):
        text = f"{value * scale:.{d}f}"
        if verdict(float(text) / scale, threshold, at_most=at_most) == want:
            return text
    return text


def _dims(s: dict) -> str:
    short = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
    batch = f"{s['batch']}×" if s.get("batch", 1) != 1 else ""  # a bmm's batch first
    # Operands other than row-major named: two rows of one size and dtype, x @ W and x @ W.T,
    # read the same, though their kernels (and speedups) differ. (Older JSONs: no layouts kept.)
    lay = {x: s.get(f"layout_{x}", "row") for x in "ab"}
    lay = "" if lay == {"a": "row", "b": "row"} else f", A {lay['a']}, B {lay['b']}"
    return f"{batch}{s['m']}×{s['n']}×{s['k']} {short.get(s['dtype'], s['dtype'])}{lay}"


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
    mm = c.get("mm") or {}
    bits = []
    if cp.get("gbps"):
        bits.append(f"copy bandwidth {cp['gbps']:.0f} GB/s")
    for kind, of in (("read", "best of "), ("write", "")):  # the read ceiling takes the best of two kernels
        e = c.get(kind) or {}
        if e.get("gbps"):
            each = ", ".join(f"{k} {v['gbps']:.0f}" for k, v in (e.get("kernels") or {}).items() if v.get("gbps"))
            bits.append(f"{kind} bandwidth {e['gbps']:.0f} GB/s" + (f" ({of}{each})" if each else ""))
        elif e.get("status"):
            bits.append(f"{kind} bandwidth not measured ({e['status']})")
    for dt in ("bfloat16", "float16", "float32"):
        if (mm.get(dt) or {}).get("tflops"):
            bits.append(f"{dt} mm {mm[dt]['tflops']:.1f} TFLOP/s")
    how = c.get("how", "")
    return ("Ceilings: " + ", ".join(bits) + (f" ({how})" if how else "") + ".") if bits else "Ceilings: none recorded."


def _floor_line(doc: dict) -> str:
    """How the floors of this document were computed (older JSONs: the copy bandwidth only; with a
    write ceiling: read and write bytes each at its own rate, summed)."""
    c = doc.get("ceilings") or {}
    wg = write_gbps(c)
    if wg and memory_gbps(c):
        own = (c.get("write") or {}).get("gbps")
        which = ("the write ceiling's" if own and wg <= own else
                 f"the rate the copy implies once its reads take the read bandwidth, 1 / (2 / copy - 1 / read), "
                 f"above the write ceiling's {own:.0f} GB/s")
        mem = (f"read bytes / read bandwidth + write bytes / write bandwidth (a sum: HBM's bus carries reads and "
               f"writes in turn), the read bandwidth the higher of the copy and the read bandwidth "
               f"({memory_gbps(c):.0f} GB/s), the write bandwidth {which} ({wg:.0f} GB/s)")
    elif (c.get("read") or {}).get("gbps"):
        mem = (f"minimum bytes / memory bandwidth, the higher of the copy and the read bandwidth "
               f"({memory_gbps(c):.0f} GB/s)")
    else:
        mem = "minimum bytes / copy bandwidth"
    fp8 = any(str(s.get("dtype", "")).startswith("float8") for s in doc.get("shapes", ()))
    peak = "mm peak of its dtype" + (" (fp8: twice the bf16 peak, no fp8 peak is measured)" if fp8 else "")
    return (f"A shape's floor is max(flops / {peak}, {mem}); minimum bytes = A and B read once (a bmm operand "
            "broadcast over the batch once), a bias and scales read once (the read bytes), C written once (the "
            "write bytes). Efficiency = floor / time; "
            "above 100% the kernel beat the floor (measurement noise, or a ceiling measured below what the GPU can "
            "do) and is shown as measured, never capped.")


def _groups(doc: dict) -> list[str]:
    """The groups of the document's shapes: the public suite's (GROUPS) in their order, then any
    other (fp8, bmm, a user's suite's) in order of first appearance. Every group the 'all' row
    counts has a row of its own."""
    seen = list(dict.fromkeys(s["group"] for s in doc["shapes"]))
    return [g for g in GROUPS if g in seen] + [g for g in seen if g not in GROUPS]


def _share_cell(r: dict | None, of: int, key: str = "floor") -> str:
    """A '% of the floor' (``key`` 'floor') or '% of the read reference' ('read') cell of a
    group_speedups entry: the geomean, and '(n of N)' when it is over fewer shapes than the group
    has (the method failed or was not run on the others; their floors are not in it)."""
    if not r or not r.get(key):
        return "-"
    n = r.get(f"{key}_n", r["n"])
    return f"{r[key] * 100:.0f}%" + (f" ({n} of {of})" if n < of else "")


def _mode_ran(m: str, r: dict | None) -> str:
    """One tuned method's options, candidates and wall time, from the header's ``modes``. A null
    record raised AttributeError, and a missing or null wall time read as 0 s."""
    if not isinstance(r, dict):
        return f"{LABELS.get(m, m)}: not recorded"
    kw = ", ".join(f"{k}={v!r}" for k, v in (r.get("kwargs") or {}).items()) or "defaults"
    wall = f"{r['wall_s']:.0f} s" if isinstance(r.get("wall_s"), (int, float)) else "time not recorded"
    return f"{LABELS.get(m, m)}: {kw} ({r.get('measured', '?')} candidates, {wall})"


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
    parts = [p for p in doc.get("parts") or () if p.get("ceilings")]
    if len(parts) > 1 and any(p["ceilings"] != parts[0]["ceilings"] for p in parts):
        # A merged report: the line above is the first run's; each shape's floor is its own run's.
        L.append(f"Merged from {len(parts)} runs, each shape's floor from its own run's ceilings: "
                 + "; ".join(f"{p.get('date', '?')}: " + _ceilings_line({"ceilings": {**p["ceilings"], "how": ""}})
                             .removeprefix("Ceilings: ").rstrip(".") for p in parts) + ".\n")
    L.append(f"Kernel time: {h.get('timer', 'device time')}. Every output was checked against an fp64 "
             "reference before its time was kept. `×` = cuBLAS time / method time (cuBLAS measured in the "
             "same process); `tie` = the difference is smaller than the larger of the two spreads (relative IQR; "
             "with interleaved rounds, at least the across-round range). "
             "Geomeans count ties at their measured ratio.\n")
    if h.get("modes"):
        L.append("What each tuned method ran: " + "; ".join(_mode_ran(m, r) for m, r in h["modes"].items()) + ".\n")
    if doc.get("notes"):
        L.append("Notes:\n")
        # One line each: a tuner's or compiler's error is often several lines, and a line of it that
        # began with '#' or '|' became a heading or a table row of the report.
        L += [f"- {' '.join(str(n).split())}" for n in doc["notes"]]
        L.append("")

    # Targets
    any_same = any(same_kernel_as_cublas(x, m) for x in doc["shapes"] for m in present)
    tg = targets(doc)
    L.append("## Targets\n")
    L.append("| target | threshold | " + " | ".join(LABELS[m] for m in GEMMTUNE_METHODS) + " |")
    L.append("|---|---|" + "---|" * len(GEMMTUNE_METHODS))
    # A target's row only where the run has shapes of its group: a suite of other groups (or a
    # --groups run) showed every target as NOT RUN, as if gemmtune had not run.
    in_run = {s["group"] for s in doc["shapes"]}
    absent = [g for g, _ in SPEEDUP_TARGETS if g not in in_run]
    for g, thr in SPEEDUP_TARGETS:
        if g in absent:
            continue
        cells = []
        for m in GEMMTUNE_METHODS:
            r = tg[m][g]
            part = f" ({r['n']} of {r['of']} shapes)" if r["value"] is not None and r["n"] < r["of"] else ""
            cells.append(f"{_against(r['value'], thr, 2)}× **{r['verdict']}**{part}" if r["value"] is not None
                         else f"**{r['verdict']}**")
        L.append(f"| {g}: geomean speedup over cuBLAS | ≥ {thr:.2f}× | " + " | ".join(cells) + " |")
    cells = []
    for m in GEMMTUNE_METHODS:
        r = tg[m]["tuning"]
        if r["verdict"] in ("NOT RUN", "FAILED"):
            cells.append(f"**{r['verdict']}**")
        else:
            with_startup = r.get("ratio_with_startup") is not None
            ratio = r["ratio_with_startup"] if with_startup else r["ratio"]
            cells.append(f"{_against(ratio, TUNE_TIME_RATIO, 2, at_most=True)}× the time ({r['shapes']} shapes"
                         + (", with the worker start-up" if with_startup else "") + ") "
                         f"at {_against(r['fraction_of_best'], TUNE_QUALITY, 1, scale=100)}% "
                         f"of best ({r['fraction_shapes']} shapes) **{r['verdict']}**")
    L.append(f"| tuning wall time vs max-autotune, at % of the best kernel | ≤ {TUNE_TIME_RATIO:.2f}× at "
             f"≥ {TUNE_QUALITY * 100:.0f}% | " + " | ".join(cells) + " |")
    L.append("")
    if absent:
        L.append(f"No shapes of group{'s' if len(absent) > 1 else ''} {', '.join(absent)} in this run: "
                 f"{'their targets do' if len(absent) > 1 else 'its target does'} not apply.\n")
    for m in GEMMTUNE_METHODS:
        met = [k for k, r in tg[m].items() if r["verdict"] == "MET" and k not in absent]
        missed = [k for k, r in tg[m].items() if r["verdict"] == "MISSED" and k not in absent]
        # Targets whose shapes the mode ran on and failed on, each one: a target not met, not "not run".
        failed = [k for k, r in tg[m].items() if r["verdict"] == "FAILED" and k not in absent]
        if m not in present and failed_only(doc["shapes"], m):
            # It ran and failed everywhere: "not run" sent the reader to the run's options.
            recs = [r for s in doc["shapes"] if (r := methods_of(s).get(m)) and r.get("status") != "skipped"]
            counts = Counter(str(r.get("status", "?")) for r in recs)
            L.append(f"- {LABELS[m]}: ran on {len(recs)} shapes, no verified kernel on any ("
                     + ", ".join(f"{k} x{n}" for k, n in counts.items()) + f"; first: {_why(recs[0])}).")
        elif not met and not missed and not failed and m in present:
            why = ["no speedup over cuBLAS in a target's group" if len(absent) < len(SPEEDUP_TARGETS)
                   else "none of its shapes is in a target's group"]
            if tg[m]["tuning"]["verdict"] == "NOT RUN":
                why.append("no max-autotune tuning time to compare with")
            L.append(f"- {LABELS[m]}: ran, but no target could be decided ({'; '.join(why)}).")
        elif not met and not missed and not failed:
            L.append(f"- {LABELS[m]}: not run.")
        else:
            L.append(f"- {LABELS[m]}: {len(met)} of {len(met) + len(missed) + len(failed)} targets MET"
                     + (f" ({', '.join(met)})" if met else "")
                     + (f"; MISSED: {', '.join(missed)}" if missed else "")
                     + (f"; FAILED (no verified kernel on the group's shapes): {', '.join(failed)}"
                        if failed else "") + ".")
    exhaustive = ("`gemmtune exhaustive` benchmarked the whole exhaustive space of the shapes it ran on"
                  if "gemmtune_exhaustive" in present else "no exhaustive search is part of it")
    L.append("\nThe best kernel is the fastest verified time any method reached on the shape in this "
             f"run (cuBLAS included); {exhaustive}.\n")

    # Geomeans per group
    L.append("## Geomean speedup over cuBLAS\n")
    L.append("Per cell: geomean (shapes; wins / ties / losses)."
             + (f" Shapes where a method ran cuBLAS's own kernel ({SAME_MARK} in the tables below) count "
                "at their measured ratio." if any_same else "") + "\n")
    # Rows of as many cells as the header (with no method timed, "| group |  |" over "|---|").
    L.append(_row(["group", *(LABELS[m] for m in present)]))
    L.append("|---|" + "---|" * len(present))
    per = {m: group_speedups(doc, m) for m in present}
    groups = [*_groups(doc), "all"]
    for g in groups:
        cells = []
        for m in present:
            r = per[m].get(g)
            cells.append(f"{_x(r['geomean'])} ({r['n']}; {r['wins']}/{r['ties']}/{r['losses']})" if r and r["n"] else "-")
        L.append(_row([_cell(g), *cells]))
    L.append("")
    # The distance still to go: how close each method came to the physical floor.
    L.append("## Geomean % of the physical floor\n")
    L.append("Per cell: geomean over the group's shapes of floor / kernel time (100% = at the floor); "
             "'(n of N)' where the method has a kernel time on only n of the group's N shapes.\n")
    count = {g: sum(s["group"] == g for s in doc["shapes"]) for g in groups[:-1]}
    count["all"] = len(doc["shapes"])
    per["cublas"] = group_speedups(doc, "cublas")
    cols = ["cublas", *present]
    L.append(_row(["group", *("cuBLAS" if m == "cublas" else LABELS[m] for m in cols)]))
    L.append("|---|" + "---|" * len(cols))
    for g in groups:
        cells = [_share_cell(per[m].get(g), count.get(g, 0)) for m in cols]
        L.append(_row([_cell(g), *cells]))
    L.append("")
    # Beside it, the distance to what any kernel reaches on the same bytes (bench.readtime)
    read_count = {g: sum(s["group"] == g and kernel(s.get("read")) is not None for s in doc["shapes"])
                  for g in groups[:-1]}
    read_count["all"] = sum(read_count.values())
    if read_count["all"]:
        L.append("## Geomean % of the read reference\n")
        L.append("Memory-bound shapes that write little (a decode GEMV) only: per cell, the geomean over them "
                 "of the read reference's time / the kernel time, where the read reference is a kernel that "
                 "only reads the shape's input bytes, timed in the same rounds (100% = as fast as that read); "
                 "'(n of N)': n of the group's N such shapes.\n")
        L.append(_row(["group", *("cuBLAS" if m == "cublas" else LABELS[m] for m in cols)]))
        L.append("|---|" + "---|" * len(cols))
        for g in (g for g in groups if read_count.get(g)):
            L.append(_row([_cell(g), *(_share_cell(per[m].get(g), read_count[g], "read") for m in cols)]))
        L.append("")

    # Tuning time
    L.append("## Tuning wall time\n")
    L.append("| method | total s | worker start-up s | vs max-autotune (same shapes) | with the start-up "
             "| geomean % of best kernel |")
    L.append("|---|---|---|---|---|---|")
    for m in present:
        t = tuning_summary(doc, m)
        L.append(f"| {LABELS[m]} | {t['tune_s']:.1f} | "
                 + (f"{t['startup_s']:.1f}" if t.get("startup_s") is not None else "-") + " | "
                 + (f"{t['ratio']:.2f}× ({t['shapes']} shapes)" if t["ratio"] is not None else "-") + " | "
                 + (f"{t['ratio_with_startup']:.2f}×" if t.get("ratio_with_startup") is not None else "-") + " | "
                 + (f"{t['fraction_of_best'] * 100:.1f}% ({t['fraction_shapes']} shapes)" if t["fraction_of_best"]
                    else "-") + " |")
    L.append("")
    L.append("Total s: the shapes' tuning times. A run's benchmark worker starts once (its torch import "
             "and CUDA context), before its first shape; the target's ratio counts it where max-autotune "
             "tuned every shape.\n")

    # Overview
    L.append("## Per shape: speedup over cuBLAS\n")
    L.append(_row(["group", "shape", "M×N×K dtype", "floor µs", "cuBLAS µs", *(LABELS[m] for m in present)]))
    L.append("|---|---|---|---|---|" + "---|" * len(present))
    for s in doc["shapes"]:
        cb = kernel(s.get("cublas"))
        L.append(_row([_cell(s["group"]), _cell(s["name"]), _dims(s), _us(s.get("floor_ms")), _us(cb["ms"] if cb else None),
                       *(_x(*method_speedup(s, m), same_kernel_as_cublas(s, m)) for m in present)]))
    L.append("")
    if any_same:
        L.append(SAME_NOTE + "\n")

    # Detail per shape
    L.append("## Per shape: every method\n")
    for s in doc["shapes"]:
        floor = s.get("floor_ms")
        L.append(f"### {s['group']} / {s['name']}: {_dims(s)}\n")
        L.append(f"Floor {_us(floor)} µs ({s.get('bound', '?')}-bound); best kernel {_us(best_ms(s))} µs."
                 + read_line(s) + "\n")
        L.append("| method | choice | kernel µs | spread | × cuBLAS | % of floor | eager µs | eager µs, dispatcher "
                 "| tune s | rel. err |")
        L.append("|---|---|---|---|---|---|---|---|---|---|")
        rows = [("cuBLAS", s.get("cublas"), None)] + [(LABELS[m], methods_of(s).get(m), m)
                                                     for m, _ in METHODS]
        shape_same = False
        for label, rec, m in rows:
            k = kernel(rec)
            if k is None:
                if m is None or rec:
                    L.append(f"| {label} | {_why(rec)} | | | | | | | | |")
                continue
            x, tie = method_speedup(s, m) if m else (1.0, False)
            same = bool(m) and same_kernel_as_cublas(s, m)
            shape_same = shape_same or same
            spread = f"{k['spread'] * 100:.1f}%" if k.get("spread") is not None else "-"
            eff = f"{floor / k['ms'] * 100:.0f}%" if floor else "-"
            eager = (rec.get("eager") or {}).get("ms")
            disp = (rec.get("eager_dispatch") or {}).get("ms")
            tune = f"{rec['tune_s']:.1f}" if rec.get("tune_s") is not None else "-"
            rel = f"{rec['rel_err']:.1e}" if rec.get("rel_err") is not None else "-"
            L.append(f"| {label} | {_choice(rec)} | {_us(k['ms'])} | {spread} | {_x(x, tie, same)} | "
                     f"{eff} | {_us(eager)} | {_us(disp)} | {tune} | {rel} |")
        L.append("")
        if shape_same:
            L.append(f"{SAME_MARK} same kernel as cuBLAS: the difference is noise.\n")
        misses = sweep_misses(s)
        if misses:
            L.append("Why a mode missed the fastest gemmtune choice (its own sweep):\n")
            L.extend(f"- {line}" for line in misses)
            L.append("")

    if plots:
        L.append("## Plots\n")
        titles = {"speedup": "Speedup over cuBLAS per shape", "roofline": "Efficiency against the roofline floor",
                  "tuning": "Tuning wall time against kernel performance"}
        for k, name in plots.items():
            L.append(f"![{titles.get(k, k)}]({name})\n")
    return "\n".join(L).rstrip() + "\n"
