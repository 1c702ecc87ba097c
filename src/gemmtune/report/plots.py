"""A bench JSON as PNG plots (matplotlib): speedup over cuBLAS, % of the roofline floor, tuning time."""

from __future__ import annotations

import os
from pathlib import Path

from ..jsonio import replacing
from .records import LABELS, TUNE_QUALITY, best_ms, kernel, method_speedup, methods_of, methods_present
from .stats import geomean

PLOTS = ("speedup", "roofline", "tuning")


def _figure(width: float, height: float):
    # The object API with the Agg canvas: no pyplot, no global backend switch.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _text(name) -> str:
    """A suite's name as matplotlib text: a '$' escaped, so that 'cost $M$' is not set as math and
    '$x_{$' does not stop the plot (matplotlib's mathtext raised ValueError)."""
    return str(name).replace("$", r"\$")


def _bars(ax, doc: dict, series: list[tuple[str, list]], ylabel: str, ref: float | None, log: bool) -> None:
    names = [_text(s["name"]) for s in doc["shapes"]]
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
            ax.text(j - 0.4, 1.0, _text(s["group"]), transform=ax.get_xaxis_transform(), fontsize=8,
                    va="bottom")
            prev = s["group"]
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def _save(fig, path: str | os.PathLike) -> None:
    """The figure as PNG, written atomically (as the report's Markdown): savefig writes in place,
    and a run killed mid-write left the previous plot cut short."""
    with replacing(path) as f:
        fig.savefig(f, dpi=110, format="png")


def plot_speedup(doc: dict, path: str | os.PathLike) -> Path:
    present = methods_present(doc)
    fig = _figure(max(8.0, 0.45 * len(doc["shapes"]) + 3), 4.5)
    ax = fig.add_subplot()
    _bars(ax, doc, [(LABELS[m], [method_speedup(s, m)[0] for s in doc["shapes"]]) for m in present],
          "speedup over cuBLAS (×, log)", 1.0, True)
    ax.set_title(f"Speedup over cuBLAS, {_text(doc['header']['device_name'])}", fontsize=10, pad=14)
    _save(fig, path)
    return Path(path)


def plot_roofline(doc: dict, path: str | os.PathLike) -> Path:
    present = methods_present(doc)

    def eff(s, rec):
        k = kernel(rec)
        return s["floor_ms"] / k["ms"] if k and s.get("floor_ms") else None

    series = [("cuBLAS", [eff(s, s.get("cublas")) for s in doc["shapes"]])]
    series += [(LABELS[m], [eff(s, methods_of(s).get(m)) for s in doc["shapes"]]) for m in present]
    fig = _figure(max(8.0, 0.45 * len(doc["shapes"]) + 3), 4.5)
    ax = fig.add_subplot()
    _bars(ax, doc, series, "floor / kernel time", 1.0, False)
    ax.set_title(f"Efficiency against the roofline floor, {_text(doc['header']['device_name'])}", fontsize=10, pad=14)
    _save(fig, path)
    return Path(path)


def plot_tuning(doc: dict, path: str | os.PathLike) -> Path:
    fig = _figure(7.0, 4.5)
    ax = fig.add_subplot()
    for m in methods_present(doc):
        pts = []
        for s in doc["shapes"]:
            rec = methods_of(s).get(m)
            if kernel(rec) and rec.get("tune_s"):
                pts.append((rec["tune_s"], best_ms(s) / kernel(rec)["ms"]))
        if pts:
            line = ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=14, alpha=0.6, label=LABELS[m])
            # the star: the mean tuning time and the geomean fraction of the points drawn (the
            # summary's total also holds the time of shapes with no kernel, which have no point)
            ax.scatter([sum(p[0] for p in pts) / len(pts)], [geomean(p[1] for p in pts)], s=120, marker="*",
                       color=line.get_facecolor()[0], edgecolor="black", linewidth=0.5)
    ax.axhline(TUNE_QUALITY, color="grey", linewidth=0.8, linestyle="--")
    ax.set_xscale("log")
    ax.set_xlabel("tuning wall time per shape (s, log); star = mean time, geomean fraction")
    ax.set_ylabel("best kernel time / method's kernel time")
    ax.set_title(f"Tuning time against performance, {_text(doc['header']['device_name'])}", fontsize=10)
    ax.legend(fontsize=7)
    _save(fig, path)
    return Path(path)


_PLOTTERS = {"speedup": plot_speedup, "roofline": plot_roofline, "tuning": plot_tuning}
