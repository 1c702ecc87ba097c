"""Markdown and a plot from scripts/bench_dispatch.py results (any machine, no GPU).

    python scripts/report_dispatch.py RESULT.json [MORE.json ...] --out DIR

Writes DIR/report.md (the seed table, the M sweep against the oracle and cuBLAS, save /
load, torch.compile, per-call overhead: every section each file holds) and, where
matplotlib is installed, DIR/sweep-<name>.png per file with a sweep: device time
against M (log-log) for cuBLAS, each dispatcher mode and the per-shape oracle, and
below it each mode's time relative to the oracle (or to cuBLAS where the oracle did
not reach that M). Numbers are copied from the JSON, never recomputed from estimates.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

MODES = ("similarity", "benchmark", "table")


def _us(cell: dict | None) -> str:
    return f"{cell['device_us']:.1f}" if cell and cell.get("device_us") else "-"


def _ratio(rows: list[dict], mode: str, base: str) -> float | None:
    """Geomean of mode time / base time over the rows that have both."""
    from gemmtune.report import geomean

    return geomean(r[mode]["device_us"] / r[base]["device_us"] for r in rows
                   if r.get(mode, {}).get("device_us") and r.get(base, {}).get("device_us"))


def table_md(sec: dict) -> list[str]:
    ms = [str(m) for m in sec["columns_M"]]
    out = [f"Device time in µs (N = {sec['N']}, K = {sec['K']}, {sec['dtype']}), each cell verified "
           "against fp64 and timed in one process:", "",
           "| kernel | " + " | ".join(f"M = {m}" for m in ms) + " |", "|---|" + "---|" * len(ms)]
    for row, cells in sec["rows"].items():
        picks = {cells[m].get("choice") for m in ms if cells.get(m, {}).get("choice")}
        label = row + (f" → {', '.join(sorted(picks))}" if picks else "")
        out.append(f"| {label} | " + " | ".join(_us(cells.get(m)) for m in ms) + " |")
    return out


def sweep_md(sec: dict) -> list[str]:
    rows = sec["rows"]
    out = [f"{sec['done']} of {len(sec['points'])} M points timed; the oracle (each M tuned exactly) "
           f"reached {sec['oracle_done']} of them.", "",
           "| M | cuBLAS | similarity | benchmark | table | oracle | oracle choice |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        oc = r.get("oracle", {}).get("best") or "-"
        out.append(f"| {r['M']} | {_us(r.get('cublas'))} | " + " | ".join(
            f"{_us(r.get(m))} `{r.get(m, {}).get('choice', '-')}`" for m in MODES)
            + f" | {_us(r.get('oracle'))} | `{oc}` |")
    out += ["", "| mode | geomean time / oracle (M where the oracle ran) | geomean time / cuBLAS (all M) |",
            "|---|---|---|"]
    for m in MODES:
        vo, vc = _ratio(rows, m, "oracle"), _ratio(rows, m, "cublas")
        verdict = "" if vo is None else (" (target ≤ 1.05: MET)" if vo <= 1.05 else " (target ≤ 1.05: MISSED)")
        out.append(f"| {m} | {vo:.3f}{verdict} |" if vo else f"| {m} | - |")
        out[-1] += f" {vc:.3f} |" if vc else " - |"
    return out


def saveload_md(sec: dict) -> list[str]:
    out = ["| process | kernels saved / restored | compiled in the new process | new decisions (tuning) | "
           "first-call ms per M | all correct |", "|---|---|---|---|---|---|"]
    s = sec.get("save", {})
    out.append(f"| save | {s.get('kernels_saved', '-')} | - | - | compile_mm {s.get('compile_mm_s', 0):.1f} s "
               f"(tuning from the store) | - |")
    for k in ("load_with_binaries", "load_without_binaries"):
        v = sec.get(k)
        if not v:
            continue
        if v.get("rc") != 0:
            out.append(f"| {k} | failed: {v.get('stderr_tail', '')[-200:]!r} | | | | |")
            continue
        first = ", ".join(f"{m}: {t:.1f}" for m, t in v["first_call_ms"].items())
        out.append(f"| {k} | {v['restored_dirs']} | {v['compiled_in_this_process']} | {v['new_decisions']} | "
                   f"{first} | {all(v['correct'].values())} |")
    choices = sorted(set((s.get("choices") or {}).values()))
    out += ["", f"Saved choices: {', '.join(f'`{c}`' for c in choices) or '-'}."]
    return out


def compile_md(sec: dict) -> list[str]:
    out = [f"Backend `{sec['backend']}`, `dynamic=True, fullgraph=True`: {sec['unique_graphs']} graph(s), "
           f"{sec['graph_breaks']} graph break(s); patch (tuning) {sec['patch_tune_s']:.1f} s.", "",
           "| batch × seq (M) | first call s | max rel. error vs eager nn.Linear |", "|---|---|---|"]
    for r in sec["runs"]:
        out.append(f"| {r['batch']} × {r['seq']} ({r['M']}) | {r['first_call_s']:.3f} | "
                   f"{r['max_rel_err_vs_eager_nn_linear']:.2e} |")
    return out


def overhead_md(sec: dict) -> list[str]:
    rows = sec["rows"]
    names = [k[:-len(" us/call")] for k in rows[0] if k.endswith(" us/call")]
    out = [f"Wall time per call in µs, eager, {sec['calls']} back-to-back calls then one sync, best of 5:", "",
           "| M×N×K | " + " | ".join(names) + " | overhead over torch.mm | overhead over the prepared "
           "Triton launch | tuned choice |", "|---|" + "---|" * (len(names) + 3)]
    for r in rows:
        over_t = r.get("dispatch overhead over the prepared triton launch us")
        # Older results (before the prepared launch) named the first one differently.
        over_mm = r.get("dispatch overhead over torch.mm us", r.get("dispatcher python overhead us"))
        out.append(f"| {r['M']}×{r['N']}×{r['K']} | " + " | ".join(f"{r[n + ' us/call']:.1f}" for n in names)
                   + f" | {over_mm:.1f} | "
                   + (f"{over_t:.1f}" if over_t is not None else "-") + f" | `{r['tuned_choice']}` |")
    out += ["", "Overhead over torch.mm: the dispatcher forced to cuBLAS minus torch.mm. Overhead over "
            "the prepared Triton launch: the dispatcher forced to one Triton config minus that kernel "
            "launched by its prepared launcher into a preallocated output."]
    return out


def plot_sweep(sec: dict, path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = sec["rows"]
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(8, 8), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    series = {"cuBLAS": "cublas", **{f"dispatcher: {m}": m for m in MODES}, "oracle (tuned per M)": "oracle"}
    color = dict(zip(["cublas", *MODES, "oracle"], ["C0", "C1", "C2", "C3", "C4"]))  # same per mode in both panels
    for label, key in series.items():
        pts = [(r["M"], r[key]["device_us"]) for r in rows if r.get(key, {}).get("device_us")]
        if pts:
            ax.plot(*zip(*pts), marker="o", ms=3, label=label, color=color[key], lw=1.2 if key != "oracle" else 2.0)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_ylabel("device time (µs)")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    for m in MODES:
        pts = []
        for r in rows:
            base = r.get("oracle", {}).get("device_us") or r.get("cublas", {}).get("device_us")
            if r.get(m, {}).get("device_us") and base:
                pts.append((r["M"], r[m]["device_us"] / base))
        if pts:
            ax2.plot(*zip(*pts), marker="o", ms=3, label=m, color=color[m])
    ax2.axhline(1.0, color="k", lw=0.8)
    ax2.axhline(1.05, color="r", lw=0.8, ls="--", label="+5%")
    ax2.set_ylabel("time / oracle (cuBLAS where no oracle)")
    ax2.set_xlabel("M")
    ax2.legend(fontsize=8)
    ax2.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


SECTIONS = {"table": ("Seed table: one kernel per hint vs the dispatcher", table_md),
            "sweep": ("M sweep: dispatcher modes vs the per-shape oracle and cuBLAS", sweep_md),
            "saveload": ("Save and load in a fresh process (empty Triton cache)", saveload_md),
            "compile": ("torch.compile(dynamic=True) over a patched model", compile_md),
            "overhead": ("Per-call overhead, eager", overhead_md)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("inputs", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    md = ["# Dynamic-shape dispatcher on the GPU", ""]
    for path in args.inputs:
        try:
            doc = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            print(f"{path}: cannot read bench_dispatch results: {e}", file=sys.stderr)
            return 2
        if not isinstance(doc, dict) or "sections" not in doc:
            print(f"{path}: not a bench_dispatch.py result (no 'sections')", file=sys.stderr)
            return 2
        a = doc.get("args", {})
        md += [f"## `{path.name}`", "",
               f"{doc['device']} (sm {doc['capability']}), torch {doc['torch']}, triton {doc['triton']}, "
               f"gemmtune {doc['gemmtune']}{', ' + doc['date'] if doc.get('date') else ''}. Hint families: "
               f"{a.get('families') or 'all'}; oracle families: {a.get('oracle_families') or 'all'}; "
               f"sections run: {a.get('sections')}.", ""]
        for name, (title, fn) in SECTIONS.items():
            sec = doc["sections"].get(name)
            if sec is None:
                continue
            md += [f"### {title}", ""]
            if "error" in sec:
                md += [f"Failed: `{sec['error']}`", ""]
                continue
            md += fn(sec) + [""]
            if name == "sweep":
                png = args.out / f"sweep-{path.stem}.png"
                if plot_sweep(sec, png):
                    md += [f"![sweep]({png.name})", ""]
    (args.out / "report.md").write_text("\n".join(md) + "\n")
    print(args.out / "report.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
