"""bench-model's JSON as Markdown and a PNG plot."""

from __future__ import annotations

from pathlib import Path

from ..jsonio import replacing
from .phases import GREEDY_STEPS
from .profile import markdown_rows

def _phases(m: dict) -> list[str]:
    """Every phase any mode of model ``m`` timed, in first-seen order (a skipped mode, e.g. a
    graph mode on a CPU, has none)."""
    return list(dict.fromkeys(p for rec in m["modes"].values() for p in rec.get("phases", {})))


def _num(v):
    """A number of the JSON for formatting: null (bench-model writes NaN as null) as NaN, which
    formats as 'nan' where None raised TypeError."""
    return float("nan") if v is None else v


def _timer(header: dict) -> str:
    """The timer the run's cells were taken with (the header's ``timer``). A JSON from before it
    was recorded: a CPU run timed on the wall clock, a GPU run with CUDA events (timing.time_call)."""
    if header.get("timer"):
        return header["timer"]
    return "the host's wall clock" if header.get("device") == "cpu" else "CUDA events"


def _first_calls(rec: dict) -> str:
    """A mode's first-calls cell: its seconds, or why it has none. A failed or skipped mode showed
    0.0 s, as if it had compiled in no time."""
    if "failed" in rec:
        return "failed"
    if "skipped" in rec:
        return "skipped"
    s = rec.get("first_calls_s")
    return "-" if s is None else f"{s:.1f}"


def markdown(doc: dict) -> str:
    """The report: per model, a table of ms per call and x eager per phase and mode, the tuning
    and compile times, and the checks."""
    h = doc["header"]
    L = [f"# gemmtune bench-model: {h['device']}", "",
         f"torch {h['torch']}, triton {h['triton']}, transformers {h.get('transformers', '?')}, "
         f"gemmtune {h['gemmtune']}, {h['date']}; dtype {h['dtype']}; tuning: {h['tune']}.", "",
         f"Each cell: ms per call (median of 5 rounds of back-to-back calls timed with {_timer(h)}, after "
         "warm-up; Python launch overhead included) and × eager. `max_autotune` is torch.compile "
         "mode `max-autotune-no-cudagraphs`. A `_graph` mode replays its base mode's call from a CUDA "
         "graph (the GPU's time of the step); its × is against `eager_graph`. `lut_compile` (opt-in) is the same "
         "max-autotune compile steered by gemmtune's table of the same tuning call (Inductor's lookup table); "
         "`compile_cdt` / `patch_compile_cdt` (opt-in) are the default compile with coordinate-descent tuning; "
         "`eager_fuse` / `eager_fuse_patch` (opt-in) run the sibling layers fused (`gemmtune.fuse_linears`), "
         "unpatched and tuned + patched; `fuse_patch_compile` / `fuse_patch_compile_cdt` / "
         "`fuse_patch_max_autotune` (opt-in) compile the latter (default, coordinate descent, max-autotune), "
         "each fused group one GEMM in the compiled graph (`gemmtune.fuse_compile`); `fuse_patch_compile_pdl` / "
         "`max_autotune_pdl` (opt-in, Hopper+) are `fuse_patch_compile` with the GEMV strips served as `-pdl` "
         "twins (`gemmtune.pdl`) and `max_autotune`, both compiled with Inductor's PDL on.", ""]
    for m in doc["models"]:
        if "error" in m and not m.get("modes"):
            L += [f"## {m['model']}", "", f"Not run: {m['error']}", ""]
            continue
        modes = list(m["modes"])
        phases = _phases(m)
        # a user's model (config:, dir:) by its model_type too; a named model's or an hf: entry's name says it
        mt = m.get("model_type")
        kind = f"{mt}, " if "source" in m and mt and m["model"] != f"hf:{mt}" else ""
        L += [f"## {m['model']} ({kind}{m['params'] / 1e6:.1f}M parameters)", ""]
        if "error" in m:
            # It raised after some modes finished (run._failed): those are shown, with no × eager
            # (worked out at the model's end) and no interleaved verdict.
            L.append(f"**Stopped:** {m['error']}. What follows is what its modes measured before that.\n")
        if "source" in m:
            L.append(f"From {m['source']}; attention: {m.get('attn_implementation') or 'transformers default'}.\n")
        if m.get("phases_not_run"):
            L.append("Phases not run: " + "; ".join(f"{p} ({why})" for p, why in m["phases_not_run"].items()) + ".\n")
        if "tune_s" in m:
            split = ""
            if "tune_call_s" in m:
                split = (f" (the tune call {_num(m['tune_call_s']):.1f} s, of it {m.get('tune_startup_s', 0.0):.1f} s "
                         f"workers' start-up; the rest capture, dispatchers and patching)")
            L.append(f"gemmtune tuning: {_num(m['tune_s']):.1f} s{split} for {m.get('tuned_problems', '?')} problems over "
                     f"{m.get('tuned_layer_shapes', '?')} layer shapes (one tune call); winners: "
                     + ", ".join(f"`{w}`" for w in m.get("winners", [])[:12]) + ".\n")
        for prefix, what in (("", "eager_patch"), ("fuse_", "eager_fuse_patch")):
            if m.get(prefix + "eager_gate"):
                L.append(_gate_line(m[prefix + "eager_gate"], what, m.get(prefix + "eager_gate_s", 0.0)))
            if prefix + "eager_retired" in m:
                L.append(f"Given back to torch's own class after the gate (`{what}`, `gemmtune.nn.retire`: every "
                         f"eager shape on cuBLAS; compiled, its GEMM on the dispatcher where the steps replay from "
                         f"CUDA graphs, Inductor's un-graphed: `gemmtune.compile_route`): "
                         f"{len(m[prefix + 'eager_retired'])} layer(s)" + _routes(m.get("compile_routes")) + ".\n")
        if m.get("fused_groups"):
            from ..fuse import kinds

            L.append(f"Fused sibling layers (eager_fuse*, `gemmtune.fuse_linears`): {len(m['fused_groups'])} groups ("
                     + ", ".join(f"{k} ×{c}" for k, c in kinds(m["fused_groups"], " + ").items()) + ")"
                     + (f"; the fused copy's own tuning {_num(m['fuse_tune_s']):.1f} s" if "fuse_tune_s" in m else "")
                     + (f" (the tune call {_num(m['fuse_tune_call_s']):.1f} s, of it {m.get('fuse_tune_startup_s', 0.0):.1f} s "
                        "workers' start-up)" if "fuse_tune_call_s" in m else "")
                     + (f", strips with a `-pdl` twin credited {m['fuse_tune_pdl_credit']:.0%} against cuBLAS "
                        "(`gemmtune.pdl.PDL_CREDIT`)" if m.get("fuse_tune_pdl_credit") else "")
                     + "".join(f"; `{mode}`: {r['fused_merged']} groups one GEMM in its compiled graphs"
                               for mode, r in m["modes"].items() if r.get("fused_merged"))
                     + ".\n")
        L.append("| phase | " + " | ".join(modes) + " |")
        L.append("|---|" + "---|" * len(modes))
        for p in phases:
            cells = []
            for mode in modes:
                r = m["modes"][mode].get("phases", {}).get(p)
                # no x_eager: its base (eager, or eager_graph for a graph mode) did not time the phase
                cells.append((f"{_num(r['ms']):.3f}" + (f" ({_num(r['x_eager']):.2f}×)" if "x_eager" in r else "")) if r else "-")
            L.append(f"| {p} | " + " | ".join(cells) + " |")
        aa = [(p, m["modes"]["eager"]["phases"][p]["interleaved_aa"]) for p in phases
              if "eager" in m["modes"] and "interleaved_aa" in m["modes"]["eager"].get("phases", {}).get(p, {})]
        if aa:
            L.append("| eager against itself, interleaved (the resolution) | " + "; ".join(
                f"{p}: paired rounds {_num(i['x_paired']):.3f}×"
                + (f" (95% CI {_num(i['lo']):.3f}–{_num(i['hi']):.3f})" if "lo" in i else "")
                + f", quartiles {_num(i['q1']):.3f}–{_num(i['q3']):.3f}" for p, i in aa)
                + " |" + " |" * (len(modes) - 1))
        for other in ("eager_copy", "eager_patch", "eager_fuse", "eager_fuse_patch"):
            inter = [(p, m["modes"][other]["phases"][p]["interleaved"]) for p in phases
                     if other in m["modes"] and "interleaved" in m["modes"][other].get("phases", {}).get(p, {})]
            if inter:
                L.append(f"| eager vs {other}, interleaved | " + "; ".join(
                    f"{p}: {_num(i['eager_ms']):.3f} / {_num(i[other + '_ms']):.3f} ms ({_num(i['x_eager']):.2f}×"
                    + (f"; paired rounds {_num(i['x_eager_paired']):.3f}×"
                       + (f" (95% CI {_num(i['x_eager_lo']):.3f}–{_num(i['x_eager_hi']):.3f})" if "x_eager_lo" in i else "")
                       + f", quartiles {_num(i['x_eager_q1']):.3f}–{_num(i['x_eager_q3']):.3f}, {i['rounds']} rounds"
                       if "x_eager_paired" in i else "")
                    + (f"; against eager_copy {_num(i['x_copy_paired']):.3f}× (95% CI {_num(i['x_copy_lo']):.3f}–"
                       f"{_num(i['x_copy_hi']):.3f})" if "x_copy_paired" in i else "") + ")"
                    for p, i in inter)
                    + " |" + " |" * (len(modes) - 1))
        gi = m.get("graph_interleaved", {})
        if gi:
            L.append("| CUDA graphs, interleaved | " + "; ".join(
                f"{p}: " + ", ".join(f"{k.replace('_x_', ' × ')} {_num(v):.3f}" for k, v in r.items() if "_x_" in k)
                for p, r in gi.items()) + " |" + " |" * (len(modes) - 1))
        L.append("| first calls (compile) s | " + " | ".join(_first_calls(m["modes"][mode]) for mode in modes) + " |")
        L.append("")
        checks = []
        for mode in modes:
            rec = m["modes"][mode]
            for p, r in rec.get("phases", {}).items():
                if "logits_ok" in r:
                    med = (f", median token {_num(r['logits_token_median_err']):.2e}"
                           if m.get("routed_experts") and "logits_token_median_err" in r else "")
                    checks.append(f"{mode}/{p}: logits err {_num(r['logits_rel_err']):.2e}{med} "
                                  f"{'ok' if r['logits_ok'] else 'FAIL'}")
                if "cosine_ok" in r:
                    checks.append(f"{mode}: min cosine {_num(r['min_cosine']):.5f} {'ok' if r['cosine_ok'] else 'FAIL'}")
            if "greedy_match" in rec:
                d = rec.get("greedy_divergence")
                checks.append(f"{mode}: greedy {GREEDY_STEPS} tokens " + (
                    ("identical to eager" + (" on a static KV cache" if m.get("greedy_cache") == "static" else ""))
                    if rec["greedy_match"] else
                    f"diverge at step {d['step']} (eager's top-1/top-2 gap there {_num(d['eager_gap']):.3f})"))
        skipped = [f"{mode} ({rec['skipped']})" for mode, rec in m["modes"].items() if "skipped" in rec]
        if skipped:
            L += ["Skipped: " + "; ".join(skipped) + ".", ""]
        failed = [f"{mode} ({rec['failed']})" for mode, rec in m["modes"].items() if "failed" in rec]
        if failed:
            L += ["**Failed:** " + "; ".join(failed) + ".", ""]
        if checks:  # none when only eager ran: it is what the others are checked against
            L += ["Checks: " + "; ".join(checks) + ".", ""]
            if m.get("routed_experts"):
                L += [f"A mixture of experts ({m['routed_experts']} routed): a token whose router's top-k is a "
                      "near tie runs other experts in bf16 than in fp32, in any mode, eager too, and moves the "
                      "logits' error as a whole, so the logits pass or fail on the median token's error "
                      "(within 1.5× eager's).", ""]
        L += markdown_rows(m.get("graph_profile", {}))
    return "\n".join(L) + "\n"


def plot(doc: dict, path: str | Path) -> Path | None:
    """A bar chart per model: × eager of every mode in every phase (the interleaved eager-vs-patch
    ratio where there is one). None when matplotlib is missing (the ``report`` extra)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return None
    models = [m for m in doc["models"] if "error" not in m and m.get("modes")]
    if not models:
        return None
    fig = Figure(figsize=(7, 2.6 * len(models)), layout="constrained")
    for i, m in enumerate(models):
        ax = fig.add_subplot(len(models), 1, i + 1)
        modes = list(m["modes"])
        phases = _phases(m)
        width = 0.8 / max(1, len(modes))
        for j, mode in enumerate(modes):
            xs, ys = [], []
            for k, p in enumerate(phases):
                r = m["modes"][mode].get("phases", {}).get(p)
                if r is None or ("interleaved" not in r and "x_eager" not in r):
                    continue
                xs.append(k + (j - (len(modes) - 1) / 2) * width)
                ys.append(r.get("interleaved", {}).get("x_eager", r.get("x_eager", 1.0)))
            ax.bar(xs, ys, width, label=mode)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(phases)), phases, fontsize=8)
        ax.set_ylabel("× eager (higher is faster)", fontsize=8)
        ax.set_title(f"{m['model']}", fontsize=9)
        ax.legend(fontsize=7, ncols=len(modes))
    path = Path(path)
    with replacing(path) as f:  # atomically, as bench-model.md and .json are written
        FigureCanvasAgg(fig).print_png(f)
    return path


def _routes(stats: dict | None) -> str:
    """What compile_route did in the run's compiles, where it did anything.

    >>> _routes({"routed": 324, "kept": 0, "ungraphed": 81})
    '; compiled GEMMs routed 324, left to Inductor un-graphed 81'
    >>> _routes({"routed": 0, "kept": 0}), _routes(None)
    ('', '')
    """
    stats = stats or {}
    parts = [f"{what} {stats[k]}" for k, what in (("routed", "routed"), ("ungraphed", "left to Inductor un-graphed"),
                                                   ("kept", "kept torch's (a call the op would not trace)"))
             if stats.get(k)]
    return ("; compiled GEMMs " + ", ".join(parts)) if parts else ""


def _gate_line(gate: list[dict], mode: str, seconds: float) -> str:
    """The step gate's verdicts (gemmtune.eager_gate) for one un-graphed patched mode."""
    from ..eager_gate import SLACK

    parts = []
    for r in gate:
        if r["kept"] == "none tuned":
            parts.append(f"{r['step']}: no tuned eager path to gate")
            continue
        if r["kept"] == "failed":
            parts.append(f"{r['step']}: not gated, the step raised when run again ({r.get('error', '?')}); "
                         f"its {r['tuned_shapes']} tuned layer shapes kept")
            continue
        ratios = ", ".join(f"{c} {x:.3f}" for c, x in r["ratio"].items() if c != "aten")
        noise = (f"; {', '.join(r['implausible'])} not kept: a step gain beyond {SLACK:g}× its layers' "
                 "own savings" if r.get("implausible") else "")
        parts.append(f"{r['step']}: kept **{r['kept']}** ({r['kept_shapes']} of {r['tuned_shapes']} tuned layer "
                     f"shapes; step time / all-cuBLAS: {ratios}{noise})")
    return (f"Step gate (`{mode}`, `gemmtune.gate_eager`, {seconds:.1f} s): " + "; ".join(parts) + ".\n")
