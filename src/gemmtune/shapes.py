"""Shape suites: CSV files (group,name,M,N,K,dtype), named presets and --shape strings.

Optional columns ``layout_a`` / ``layout_b`` (row, col, strided; default row) give the
operands' layouts, as ``gemmtune capture`` writes them (``x @ W.T`` has a col-major B), and
``op`` (mm, or addmm: with a bias of N fused; default: the loader's ``op``, mm) the operation.
scaled_mm rows (fp8: dtype e4m3 or e5m2) also read ``scale`` (tensor or row; default tensor),
``out_dtype`` (bf16 or fp32; default bf16) and ``bias`` (1/true: a bias of N added; default
none); their B defaults to col (``x @ W.T``, the layout fp8 GEMMs read).
bmm rows (op ``bmm``) read ``batch`` (the number of products, >= 1; required), and their
layouts may be broadcast ones (``bcast_row``: one matrix for the whole batch). A ``--shape``
of a bmm reads ``BxMxNxK[:dtype]``.
Other extra columns (count, m_min, m_max, modules, ...) are carried for people, not read.
Lines starting with ``#`` are comments, blank ones (spaces only too) are skipped; a size is
ASCII digits, written ``64`` or ``64.0``.

Example::

    >>> from gemmtune.shapes import parse_shape
    >>> parse_shape("32x32x28672:bf16").problem.key
    'mm:M32-N32-K28672:bf16->bf16:row.a/row.a'
"""

from __future__ import annotations

import csv
import warnings
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .problem import Problem, dtype_name

PRESETS = {
    "public": "public.csv",  # the benchmark suite (evaluation only: never train on it)
    "smoke": "smoke.csv",    # two tiny shapes: the whole pipeline in seconds, interpreter included
    "bmm": "bmm.csv",        # batched products: attention QK^T / PV and MoE experts (op bmm)
}
COLUMNS = ("group", "name", "M", "N", "K", "dtype")
# Every column a suite may have: the required ones, the optional ones load_csv reads, and those
# gemmtune capture writes for people (count, m_min, m_max, modules).
KNOWN_COLUMNS = COLUMNS + ("layout_a", "layout_b", "op", "batch", "scale", "out_dtype", "bias",
                           "count", "m_min", "m_max", "modules")
# A sign is matched so that "-1x4x4" gets the "M must be >= 1" message, not "expected MxNxK".
_SHAPE_RE = re.compile(r"(?a)^\s*([-+]?\d+)\s*[xX]\s*([-+]?\d+)\s*[xX]\s*([-+]?\d+)\s*(?::\s*([A-Za-z0-9_.]+))?\s*$")
_BMM_SHAPE_RE = re.compile(
    r"(?a)^\s*([-+]?\d+)\s*[xX]\s*([-+]?\d+)\s*[xX]\s*([-+]?\d+)\s*[xX]\s*([-+]?\d+)\s*(?::\s*([A-Za-z0-9_.]+))?\s*$")


@dataclass(frozen=True)
class Shape:
    group: str
    name: str
    problem: Problem


# The largest size a tensor dimension (an int64) can hold.
MAX_SIZE = 2**63 - 1


def _check_sizes(where: str, M: int, N: int, K: int) -> None:
    zero = [d for d, v in (("M", M), ("N", N), ("K", K)) if v < 1]
    if zero:
        raise ValueError(f"bad shape {where!r}: {', '.join(zero)} must be >= 1 (a GEMM with an empty "
                         "dimension has nothing to tune)")
    huge = [d for d, v in (("M", M), ("N", N), ("K", K)) if v > MAX_SIZE]
    if huge:
        raise ValueError(f"bad shape {where!r}: {', '.join(huge)} must be at most 2**63 - 1 (a tensor's "
                         "sizes are int64)")


def scaled_kwargs(op: str, scale: str | None = None, out_dtype: str | None = None, bias=None,
                  layout_b: str | None = None) -> dict:
    """Problem.from_sizes keywords of a scaled_mm shape (defaults: tensor-wise, bf16 out, no bias,
    B column-major); just the B layout for other ops."""
    if op != "scaled_mm":
        return {"layout_b": layout_b or "row"}
    return {"layout_b": layout_b or "col", "scale": scale or "tensor", "out_dtype": out_dtype or "bfloat16",
            "bias": _bias_flag(bias)}


def _bias_flag(bias) -> bool:
    """A suite's or a command's bias value: 1/true/bias, or 0/false/none (empty: none)."""
    b = str(bias).strip().lower() if bias is not None else ""
    if b not in ("", "0", "1", "true", "false", "none", "bias"):
        raise ValueError(f"bias must be 1/true/bias or 0/false/none, got {bias!r}")
    return b in ("1", "true", "bias")


def parse_shape(text: str, default_dtype: str = "bfloat16", op: str = "mm", *, scale: str | None = None,
                out_dtype: str | None = None, bias: bool = False) -> Shape:
    """``MxNxK[:dtype]``, e.g. ``32x32x28672:bf16``; ``op``: mm, addmm (a @ b + bias) or scaled_mm
    (fp8, default dtype e4m3, B column-major; ``scale``, ``out_dtype`` and ``bias`` as in
    ``scaled_kwargs``); bmm: ``BxMxNxK[:dtype]``, the batch first (row-major operands)."""
    if op != "scaled_mm":
        # They were ignored: out_dtype='fp32' on an mm gave a bf16 -> bf16 problem without a word
        # (the CLI and suites refuse them on other ops too).
        given = [f"{name}={v!r}" for name, v in (("scale", scale), ("out_dtype", out_dtype), ("bias", bias)) if v]
        if given:
            raise ValueError(f"{', '.join(given)}: scale, out_dtype and bias are scaled_mm's; op {op!r} takes none "
                             "of them (addmm takes its bias from op='addmm')")
    if op == "bmm":
        b = _BMM_SHAPE_RE.match(text)
        if not b:
            raise ValueError(f"bad bmm shape {text!r}: expected BxMxNxK[:dtype] (batch first), e.g. 32x128x128x64:bf16")
        B, M, N, K = (int(g) for g in b.groups()[:4])
        _check_sizes(text, M, N, K)
        if B < 1:
            raise ValueError(f"bad shape {text!r}: the batch must be >= 1")
        if B > MAX_SIZE:
            raise ValueError(f"bad shape {text!r}: the batch must be at most 2**63 - 1 (a tensor's sizes are int64)")
        return Shape("cli", f"{B}x{M}x{N}x{K}", Problem.from_sizes(M, N, K, b.group(5) or default_dtype,
                                                                   op="bmm", batch=B))
    m = _SHAPE_RE.match(text)
    if not m:
        raise ValueError(f"bad shape {text!r}: expected MxNxK[:dtype], e.g. 32x32x28672:bf16")
    M, N, K = (int(g) for g in m.groups()[:3])
    _check_sizes(text, M, N, K)
    if op == "scaled_mm":
        p = Problem.from_sizes(M, N, K, m.group(4) or "float8_e4m3fn", op=op,
                               **scaled_kwargs(op, scale, out_dtype, bias))
    else:
        p = Problem.from_sizes(M, N, K, m.group(4) or default_dtype, op=op)
    return Shape("cli", f"{M}x{N}x{K}", p)


# ASCII digits only: int() alone also took '6_4' (64: Python's digit separator) and other scripts'
# digits ('٦٤'), which no --shape (the same ASCII-only rule) accepts.
_SIZE_RE = re.compile(r"^\s*([-+]?[0-9]+)(?:\.0*)?\s*$")


def _size(text, column: str) -> int:
    """A suite's size: an integer, also as a spreadsheet or pandas writes one ('64.0': pandas writes
    a column with an empty cell, a batch column beside mm rows, as floats); anything else is a
    ValueError naming the column.

    >>> _size("64", "M"), _size(" 4.0 ", "batch")
    (64, 4)
    >>> _size("64.5", "M")
    Traceback (most recent call last):
    ...
    ValueError: M must be a whole number, got '64.5'
    """
    m = _SIZE_RE.match(text) if isinstance(text, str) else None
    if not m:
        raise ValueError(f"{column} must be a whole number, got {text!r}")
    return int(m.group(1))


def load_csv(path: str | Path, op: str = "mm") -> list[Shape]:
    """Read a suite CSV; errors name the file, the line and the field. ``op``: the operation
    of rows without an ``op`` column (or with it empty). Lines starting with ``#`` are comments."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")  # a spreadsheet's byte-order mark is no part of "group"
    except (OSError, UnicodeDecodeError) as e:
        # A binary file (a results store given for a suite) raises UnicodeDecodeError, which has no strerror.
        raise ValueError(f"cannot read shape suite {path}: {getattr(e, 'strerror', None) or e}") from None
    # Header names trimmed: a " layout_b" (a space after the comma) passed the unknown-column check,
    # which trims, and was then never read, so every row ran row-major without a word (session 45's
    # CPU hunt); a required column so written was reported missing.
    # Comment lines (#) and blank lines left out, anywhere; each row keeps the number of its line in
    # the file (numbered by rows read, an error after a blank line named the line above it). Blank
    # includes spaces only: csv skips an empty line but read "   " as a row of one field, so a suite
    # with such a line between rows (or at its end) was refused ("missing field(s) name, M, ...").
    kept = [(n, line) for n, line in enumerate(text.splitlines(), start=1)
            if line.strip() and not line.lstrip().startswith("#")]
    reader = csv.DictReader(line for _, line in kept)
    rows, numbers = [], []
    for r in reader:
        rows.append({(k.strip() if isinstance(k, str) else k): v for k, v in r.items()})
        numbers.append(kept[reader.line_num - 1][0])
    if not rows:
        raise ValueError(f"{path}: no shapes (expected a header {','.join(COLUMNS)} and rows)")
    # A column named twice (trimmed, as read) was read from its last place without a word: a
    # spreadsheet's second "M" column decided every row's M.
    names = [c.strip() for c in reader.fieldnames or () if isinstance(c, str) and c.strip()]  # '' is read by none
    twice = sorted({c for c in names if names.count(c) > 1})
    if twice:
        raise ValueError(f"{path}: column(s) {', '.join(twice)} named twice in the header; keep one of each")
    missing = [c for c in COLUMNS if c not in rows[0]]
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(missing)}; expected {','.join(COLUMNS)}")
    # A column no reader here knows is ignored, but said: a misspelt "layout_B" or "layoutb" had
    # every row tuned row-major without a word.
    unknown = [c for c in rows[0] if c is not None and c.strip() not in KNOWN_COLUMNS]
    if unknown:
        warnings.warn(f"{path}: column(s) {', '.join(repr(c) for c in unknown)} not read (known: "
                      f"{', '.join(KNOWN_COLUMNS)}): ignored", RuntimeWarning, stacklevel=2)
    shapes = []
    for line, row in zip(numbers, rows):
        short = [c for c in COLUMNS if row.get(c) is None]  # a row with fewer fields than the header
        if short:
            raise ValueError(f"{path}:{line}: bad row {dict(row)}: missing field(s) {', '.join(short)}")
        if row.get(None):  # csv.DictReader's place for fields past the header's
            raise ValueError(f"{path}:{line}: bad row: {len(row[None])} field(s) more than the header has "
                             f"({', '.join(map(repr, row[None]))}); add their column(s) to the header")
        try:
            M, N, K = (_size(row[c], c) for c in ("M", "N", "K"))
            _check_sizes(f"{M}x{N}x{K}", M, N, K)
            row_op = (row.get("op") or op).strip()
            batch = (row.get("batch") or "").strip()
            if row_op != "bmm" and batch and _size(batch, "batch") != 1:
                # Checked for every op: a scaled_mm row's batch of 8 was once ignored, one product tuned.
                raise ValueError(f"batch {batch} is bmm's (op {row_op!r} multiplies one matrix pair)")
            if row_op == "scaled_mm":
                kw = scaled_kwargs(row_op, (row.get("scale") or "").strip(), (row.get("out_dtype") or "").strip(),
                                   row.get("bias"), (row.get("layout_b") or "").strip())
                p = Problem.from_sizes(M, N, K, row["dtype"].strip(),
                                       layout_a=(row.get("layout_a") or "row").strip(), op=row_op, **kw)
            else:
                layouts = {f"layout_{x}": (row.get(f"layout_{x}") or "row").strip() for x in "ab"}
                if row_op == "bmm":
                    if not batch:
                        raise ValueError("a bmm row needs its batch column (the number of products)")
                    layouts["batch"] = _size(batch, "batch")
                # scaled_mm's own columns on another op's row were ignored without a word (an fp16 row
                # with out_dtype fp32 tuned fp16 -> fp16): refused like batch above.
                stray = ["scale"] if (row.get("scale") or "").strip().lower() not in ("", "0", "false", "none") else []
                if _bias_flag(row.get("bias")):
                    stray.append("bias")
                out_dtype = (row.get("out_dtype") or "").strip()
                if out_dtype and dtype_name(out_dtype) != dtype_name(row["dtype"].strip()):
                    stray.append("out_dtype")
                if stray:
                    raise ValueError(f"column(s) {', '.join(stray)} are scaled_mm's (this row's op is {row_op!r}; "
                                     "addmm takes its bias from op=addmm)")
                p = Problem.from_sizes(M, N, K, row["dtype"].strip(), **layouts, op=row_op)
        except (ValueError, TypeError) as e:
            raise ValueError(f"{path}:{line}: bad row {dict(row)}: {e}") from None
        shapes.append(Shape(row["group"].strip(), row["name"].strip(), p))
    return shapes


def load_suite(spec: str | Path, op: str = "mm") -> list[Shape]:
    """A suite CSV by path, or a bundled preset by name (``bmm``) when no such file exists."""
    if str(spec) in PRESETS and not Path(spec).exists():
        return preset(str(spec), op=op)
    return load_csv(spec, op=op)


def with_preset_groups(shapes: list[Shape], groups) -> list[Shape]:
    """``shapes`` plus, for each requested group they lack that names a bundled preset (``bmm``),
    that preset's rows of the group: ``gemmtune bench --groups bmm`` on the public suite."""
    have = {s.group for s in shapes}
    extra = [s for g in (groups or ()) if g not in have and g in PRESETS for s in preset(g) if s.group == g]
    return list(shapes) + extra


def preset(name: str, op: str = "mm") -> list[Shape]:
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; presets: {', '.join(PRESETS)}")
    with resources.as_file(resources.files("gemmtune.data") / PRESETS[name]) as p:
        return load_csv(p, op=op)
