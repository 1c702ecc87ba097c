"""The store's records: the run context, one result row, the columns, and their conversion to and
from SQLite values."""

from __future__ import annotations

import operator
from dataclasses import asdict, dataclass, fields

from ..bench.status import Status


# The status words rows hold: bench.measure.Status's values.
# The status words rows hold: bench.measure.Status's values.
STATUSES = tuple(s.value for s in Status)


@dataclass(frozen=True)
class RunContext:
    """Where and with what software a result was measured.

    Part of every row's key: a result is only reused under an identical context.

    Example::

        >>> ctx = RunContext.current("NVIDIA H100 80GB HBM3", "9.0")  # doctest: +SKIP
    """

    device_name: str
    capability: str
    torch_version: str
    triton_version: str
    gemmtune_version: str

    @classmethod
    def current(cls, device_name: str, capability: str) -> "RunContext":
        """Context for this process: the given device plus the installed versions.

        torch and triton are imported here rather than at module import so that
        reading or exporting a store stays cheap.
        """
        import torch
        import triton

        try:
            # Lazy: gemmtune/__init__ may import this module, and a broken or
            # half-installed package should not stop results being written.
            from gemmtune import __version__ as gemmtune_version
        except Exception:
            gemmtune_version = "0+unknown"
        return cls(
            device_name=str(device_name),
            capability=str(capability),
            torch_version=str(torch.__version__),
            triton_version=str(triton.__version__),
            gemmtune_version=str(gemmtune_version),
        )


# kw_only: with this many same-typed fields (m/n/k, three float timings) a
# positional call would silently swap values; keywords make that impossible.
@dataclass(frozen=True, kw_only=True)
class ResultRow:
    """One measured (or failed) candidate for one problem.

    ``device_ms`` is None when the candidate produced no timing (it failed to
    compile, crashed, ...); ``reason`` then says why. ``spread`` is the relative
    spread of the ``repeats`` timings. ``created_at`` is unix time; left at 0 the
    store fills in the time of recording. ``fp32_precision``: which fp32 arithmetic
    timed it (see the field's comment). Fields are keyword-only.

    SQLite stores a NaN float as NULL, so a NaN timing reads back as None;
    ``inf`` round-trips unchanged.

    Example::

        >>> ResultRow(problem_key="mm:M32-N32-K64:bf16->bf16:row.a/row.a",
        ...           choice_id="torch:eager", family="torch", status="ok",
        ...           device_ms=0.02, eager_ms=0.02, rel_err=0.0, m=32, n=32, k=64,
        ...           dtype="bfloat16", out_dtype="bfloat16", layout="row/row",
        ...           aligned=True).status
        'ok'
    """

    problem_key: str
    choice_id: str
    family: str
    status: str
    device_ms: float | None
    eager_ms: float | None
    rel_err: float | None
    reason: str = ""
    m: int
    n: int
    k: int
    dtype: str
    out_dtype: str
    layout: str
    aligned: bool
    params_json: str = "{}"
    repeats: int | None = None
    spread: float | None = None
    created_at: float = 0
    # How the measuring process's Triton kernels multiplied fp32 with TF32 off ("tf32x3" or
    # "ieee": gemmtune.precision.precision_tag); "" where the problem's arithmetic does not depend
    # on that setting, and on rows of a version-1 store (unknown). Not part of the key: a
    # re-measure under the other setting replaces the row (``counts_as_measured``).
    fp32_precision: str = ""


# ResultRow.fp32_precision's values: "" and gemmtune.precision.FP32_PRECISIONS (restated, not
# imported: that module imports torch, and reading or exporting a store needs only the stdlib).
PRECISION_TAGS = ("", "tf32x3", "ieee")

CONTEXT_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(RunContext))
ROW_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(ResultRow))
COLUMNS: tuple[str, ...] = CONTEXT_COLUMNS + ROW_COLUMNS
INT_FIELDS = ("m", "n", "k", "repeats")
FLOAT_FIELDS = ("device_ms", "eager_ms", "rel_err", "spread", "created_at")
KEY_COLUMNS = CONTEXT_COLUMNS + ("problem_key", "choice_id")
ORDER_BY = ", ".join(("problem_key", "choice_id") + CONTEXT_COLUMNS)


def counts_as_measured(row: ResultRow, fp32_precision: str) -> bool:
    """Whether ``row`` is a measurement for a process whose tag for the row's problem is
    ``fp32_precision`` (gemmtune.precision.precision_tag). A "" tag (the problem's arithmetic does
    not depend on the fp32 setting) takes every row; a "tf32x3" or "ieee" one only rows timed
    under it: 3xTF32 and IEEE run the same kernel 1.5-2x apart, and a legacy row ("", from a
    version-1 store) may have been timed under either.

    >>> r = ResultRow(problem_key="mm:M8-N8-K8:fp32->fp32:row.a/row.a", choice_id="aten", family="aten",
    ...               status="ok", device_ms=1.0, eager_ms=None, rel_err=None, m=8, n=8, k=8,
    ...               dtype="float32", out_dtype="float32", layout="row/row", aligned=True,
    ...               fp32_precision="ieee")
    >>> counts_as_measured(r, "ieee"), counts_as_measured(r, "tf32x3"), counts_as_measured(r, "")
    (True, False, True)
    """
    return not fp32_precision or row.fp32_precision == fp32_precision


def row_values(ctx: RunContext, row: ResultRow, now: float) -> tuple:
    if not isinstance(ctx, RunContext):
        raise TypeError(f"ctx must be a RunContext, not {type(ctx).__name__}")
    if not isinstance(row, ResultRow):
        raise TypeError(f"row must be a ResultRow, not {type(row).__name__}")
    if row.status not in STATUSES:
        raise ValueError(
            f"invalid status {row.status!r} for {row.problem_key} / {row.choice_id}; "
            f"expected one of {', '.join(STATUSES)}"
        )
    if row.fp32_precision not in PRECISION_TAGS:
        raise ValueError(
            f"invalid fp32_precision {row.fp32_precision!r} for {row.problem_key} / {row.choice_id}; "
            f"expected one of {', '.join(map(repr, PRECISION_TAGS))}"
        )
    values = asdict(ctx) | asdict(row)
    # sqlite3 cannot bind numpy / torch scalars (np.float32, np.int64, ...),
    # which measurement code naturally produces; convert them here so the
    # failure is not a confusing "Error binding parameter" at write time.
    for name in INT_FIELDS:
        if values[name] is not None:
            values[name] = operator.index(values[name])
    for name in FLOAT_FIELDS:
        if values[name] is not None:
            values[name] = float(values[name])
    values["aligned"] = int(bool(row.aligned))
    if not row.created_at:
        values["created_at"] = now
    return tuple(values[c] for c in COLUMNS)


def from_db(rec: tuple) -> tuple[RunContext, ResultRow]:
    nctx = len(CONTEXT_COLUMNS)
    ctx = RunContext(*rec[:nctx])
    kw = dict(zip(ROW_COLUMNS, rec[nctx:]))
    kw["aligned"] = bool(kw["aligned"])
    return ctx, ResultRow(**kw)
