"""Problem: the frozen description of one GEMM, and the key used everywhere.

A Problem says what is multiplied (M, N, K, dtypes), how each operand lies in
memory (row-major, column-major i.e. a transposed view, or general strides) and
whether it is 16-byte aligned (data pointer and leading stride). Two calls with
equal problems can share one tuned kernel; the stable ``key`` names the problem
in the results store, the lookup table and the dispatcher.

Example::

    >>> from gemmtune.problem import Problem
    >>> p = Problem.from_sizes(32, 32, 28672, "bfloat16")
    >>> p.key
    'mm:M32-N32-K28672:bf16->bf16:row.a/row.a'
    >>> Problem.from_sizes(32, 32, 28672, "bfloat16", op="addmm").key   # + bias (N,)
    'addmm:M32-N32-K28672:bf16->bf16:row.a/row.a'
    >>> Problem.from_sizes(16, 4096, 4096, "e4m3", "bf16", layout_b="col", op="scaled_mm", scale="row").key
    'scaled_mm:M16-N4096-K4096:e4m3->bf16:row.a/col.a:row'
    >>> Problem.from_sizes(128, 128, 64, "fp16", layout_b="col", op="bmm", batch=32).key   # q @ k.transpose(1, 2)
    'bmm:B32-M128-N128-K64:fp16->fp16:row.a/col.a'
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace

import torch

from .precision import pads_b_kmajor_problem

# Short names keep keys readable; the long names are torch's own.
DTYPES: dict[str, torch.dtype] = {
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    # fp8: only for op='scaled_mm' (the operands of a scaled product; see FP8_DTYPES)
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e5m2": torch.float8_e5m2,
}
SHORT = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float8_e4m3fn": "e4m3",
         "float8_e5m2": "e5m2"}
_ALIASES = {
    "fp16": "float16", "half": "float16", "f16": "float16", "float16": "float16",
    "bf16": "bfloat16", "bfloat16": "bfloat16",
    "fp32": "float32", "float": "float32", "f32": "float32", "float32": "float32",
    "e4m3": "float8_e4m3fn", "fp8": "float8_e4m3fn", "fp8_e4m3": "float8_e4m3fn", "float8_e4m3fn": "float8_e4m3fn",
    "e5m2": "float8_e5m2", "fp8_e5m2": "float8_e5m2", "float8_e5m2": "float8_e5m2",
}
# scaled_mm's operand dtypes. ``Problem.dtype`` is A's; B is always e4m3 (``FP8_B``): torch._scaled_mm
# (cuBLASLt) refuses e5m2 x e5m2, and e5m2 is the gradient format, which sits on A's side.
FP8_DTYPES = ("float8_e4m3fn", "float8_e5m2")
FP8_B = "float8_e4m3fn"
# scaled_mm's output dtypes (cuBLASLt's fp8 GEMM writes bf16, fp16 or fp32; we tune bf16 and fp32).
SCALED_OUT_DTYPES = ("bfloat16", "float32")
# scaled_mm's scale modes: 'tensor' (one fp32 scale per operand) or 'row' (per-token scale_a (M, 1)
# and per-channel scale_b (1, N), fp32); out = (a @ b) * scale_a * scale_b (+ bias).
SCALES = ("tensor", "row")
LAYOUTS = ("row", "col", "strided")
# bmm only: an operand whose batch stride is 0 (one matrix broadcast over the batch, e.g.
# ``w.expand(B, K, N)``) has its slice layout prefixed with this, e.g. 'bcast_row'. It reads
# one matrix from memory instead of B of them, so it is a problem of its own.
BCAST = "bcast_"
BMM_LAYOUTS = LAYOUTS + tuple(BCAST + lay for lay in LAYOUTS)
# mm: out = a @ b. addmm: out = a @ b + bias, with bias (N,) of the output's dtype broadcast
# over the rows (nn.Linear's and Conv1D's GEMM), tuned with the bias fused in the epilogue.
# scaled_mm: out = (a @ b) * scale_a * scale_b (+ bias (N,) of the output's dtype when ``bias``), fp8
# operands, the scales applied to the fp32 accumulator (gemmtune.scaled).
# bmm: out[b] = a[b] @ b[b] for b < batch (torch.bmm), A (batch, M, K), B (batch, K, N), each
# operand with a batch stride of its own (0: one matrix broadcast over the batch, BCAST).
OPS = ("mm", "addmm", "scaled_mm", "bmm")
ALIGN_BYTES = 16


def dtype_name(dtype: torch.dtype | str) -> str:
    """Canonical dtype name ('bfloat16', ...) for a torch dtype or an alias such as 'bf16'.

    Raises TypeError for anything gemmtune does not multiply.
    """
    if isinstance(dtype, torch.dtype):
        for name, dt in DTYPES.items():
            if dt == dtype:
                return name
        raise TypeError(
            f"unsupported dtype {dtype}; gemmtune multiplies {', '.join(DTYPES)}"
        )
    if isinstance(dtype, str):
        name = _ALIASES.get(dtype.lower().removeprefix("torch."))
        if name is None:
            raise TypeError(
                f"unsupported dtype {dtype!r}; use one of {', '.join(DTYPES)} "
                f"(or {', '.join(sorted(set(_ALIASES) - set(DTYPES)))})"
            )
        return name
    raise TypeError(f"dtype must be a torch.dtype or a string, not {type(dtype).__name__}")


@functools.lru_cache(maxsize=None)
def element_size(dtype: str) -> int:
    # Cached: the spaces ask thousands of times per shape, and each answer is a tensor allocation.
    return torch.empty((), dtype=DTYPES[dtype_name(dtype)]).element_size()


def operand_layout(rows: int, cols: int, stride: tuple[int, int]) -> str:
    """'row' when the last dim is contiguous, 'col' when the first is, else 'strided'.

    A dim of size 1 never constrains the layout: its stride is never used.
    """
    s0, s1 = stride
    if cols == 1 or s1 == 1:
        return "row"
    if rows == 1 or s0 == 1:
        return "col"
    return "strided"


def slice_layout(layout: str) -> str:
    """The layout of one matrix of an operand: 'bcast_col' -> 'col', 'row' -> 'row'."""
    return layout.removeprefix(BCAST)


def operand_aligned(ptr: int, rows: int, cols: int, stride: tuple[int, ...], elsize: int) -> bool:
    """True when the data pointer and the leading stride are both multiples of 16 bytes
    (a 3-D operand's ``stride`` (batch, row, col): its batch stride too, unless it is 0).

    16 bytes is the width of one vectorised global load (and a TMA requirement);
    Triton's JIT specialises on exactly this divisibility.
    """
    if len(stride) == 3:
        if (stride[0] * elsize) % ALIGN_BYTES:
            return False
        stride = stride[1:]
    layout = operand_layout(rows, cols, stride)
    if layout == "row":
        lead = stride[0] if rows > 1 else 0
    elif layout == "col":
        lead = stride[1] if cols > 1 else 0
    else:
        return False
    return ptr % ALIGN_BYTES == 0 and (lead * elsize) % ALIGN_BYTES == 0


def _contiguous_aligned(layout: str, rows: int, cols: int, elsize: int, batched: bool) -> bool:
    """``operand_aligned`` of a fresh contiguous operand of ``layout`` ('col': a transposed one),
    what ``Problem.from_sizes`` assumes. A single row (column) of a row- (column-) major matrix has
    a leading stride that is never read, and ``operand_aligned`` ignores it: from_sizes once
    required it aligned all the same, so an M = 1 product with K * itemsize not a multiple of 16
    (a decode step) keyed 'row.u' here and 'row.a' from its own tensors (tests/test_dispatch_hunt.py).
    A batch of matrices (bmm, not broadcast) has a batch stride of rows x cols, which
    operand_aligned does read: there the contiguous leading stride decides, as before."""
    sl = slice_layout(layout)
    if sl == "strided":
        return False
    lead = cols if sl == "row" else rows
    read = (rows if sl == "row" else cols) > 1 or (batched and not layout.startswith(BCAST))
    return not read or (lead * elsize) % ALIGN_BYTES == 0


def _sized_operand(layout: str, rows: int, cols: int, elsize: int, batch: int,
                   aligned: bool | None) -> tuple[str, bool | None]:
    """(layout, aligned) that ``from_tensors`` gives a fresh contiguous operand of ``layout`` when one
    of its dims is 1, where a layout is ambiguous: ``operand_layout`` names a single column 'row' and
    a single row whose last dim is contiguous 'row' too, and ``operand_aligned`` then reads the
    stride the actual layout leads with. ``from_sizes(8, 8, 1, layout_a='col')`` keyed
    'col.a' while the same tensors (``randn(1, 8).t()``) key 'row.u', so a table tuned from a suite
    was never looked up for them. Other operands are returned as given (aligned None: the caller's
    ``_contiguous_aligned``); a 'strided' one with a size-1 dim gets the layout tensors give it
    (a single column 'row', a single row 'col'), never aligned."""
    sl = slice_layout(layout)
    if (rows != 1 and cols != 1) or sl not in LAYOUTS:
        return layout, aligned
    bcast = BCAST if layout.startswith(BCAST) else ""
    if sl == "strided":
        return bcast + ("row" if cols == 1 else "col"), False if aligned is None else aligned
    stride = (cols, 1) if sl == "row" else (1, rows)
    if aligned is None:
        full = ((0 if bcast else rows * cols), *stride) if batch > 1 else stride
        aligned = operand_aligned(0, rows, cols, full, elsize)
    return bcast + operand_layout(rows, cols, stride), aligned


@dataclass(frozen=True, order=True)
class Problem:
    """One GEMM: out[M, N] = a[M, K] @ b[K, N] (``op='mm'``), or that plus a bias[N] broadcast
    over the rows (``op='addmm'``; the bias has the output's dtype).

    Build it with ``Problem.from_tensors(a, b)`` or ``Problem.from_sizes(M, N, K, dtype)``.
    ``allow_tf32`` matters only for float32 inputs: it lets the tensor cores round
    the inputs to tf32 (about 3e-4 relative error instead of fp32's 1e-6).
    """

    m: int
    n: int
    k: int
    dtype: str = "bfloat16"
    out_dtype: str | None = None  # None: same as dtype
    layout_a: str = "row"
    layout_b: str = "row"
    aligned_a: bool = True
    aligned_b: bool = True
    allow_tf32: bool = False
    op: str = field(default="mm")
    scale: str = ""     # scaled_mm only: 'tensor' or 'row' (SCALES); '' for mm and addmm
    bias: bool = False  # scaled_mm only: a bias (N,) is added (addmm's bias is implied by its op)
    batch: int = 1      # bmm only: the number of products (op='bmm'); 1 for the other ops

    def __post_init__(self) -> None:
        for name in ("m", "n", "k"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"Problem.{name} must be a non-negative int, got {v!r}")
        for name in ("aligned_a", "aligned_b", "allow_tf32"):
            # Strict: bool("false") is True, so a string or a count here would key (and run) the
            # wrong problem silently.
            v = getattr(self, name)
            if not isinstance(v, bool):
                raise TypeError(f"Problem.{name} must be True or False, got {v!r}")
        if not isinstance(self.batch, int) or isinstance(self.batch, bool) or self.batch < 1:
            raise ValueError(f"Problem.batch must be an int >= 1, got {self.batch!r}")
        if self.batch != 1 and self.op != "bmm":
            raise ValueError(f"Problem.batch is bmm's: op {self.op!r} multiplies one matrix pair "
                             f"(got batch={self.batch}); use op='bmm'")
        object.__setattr__(self, "dtype", dtype_name(self.dtype))
        scaled = self.op == "scaled_mm"
        object.__setattr__(self, "out_dtype", ("bfloat16" if scaled else self.dtype) if self.out_dtype is None
                           else dtype_name(self.out_dtype))
        if scaled or self.dtype in FP8_DTYPES:
            self._check_scaled()
        elif self.out_dtype not in (self.dtype, "float32"):
            raise TypeError(
                f"out_dtype {self.out_dtype} is not supported for {self.dtype} inputs; "
                + (f"use {self.dtype} or float32" if self.dtype != "float32" else "use float32")
            )
        if self.op not in OPS:
            raise ValueError(f"Problem.op must be one of {OPS}, got {self.op!r}")
        allowed = BMM_LAYOUTS if self.op == "bmm" else LAYOUTS
        for name in ("layout_a", "layout_b"):
            lay = getattr(self, name)
            if lay not in allowed:
                extra = (f" ({lay!r}: a broadcast operand is bmm's)" if lay in BMM_LAYOUTS else "")
                raise ValueError(f"Problem.{name} must be one of {allowed}, got {lay!r}{extra}")
            if self.op == "bmm" and self.batch == 1 and lay.startswith(BCAST):
                # One matrix: nothing is broadcast; one key for one problem.
                object.__setattr__(self, name, slice_layout(lay))
            aligned = "aligned_" + name[-1]
            if slice_layout(lay) == "strided" and getattr(self, aligned):
                # A strided operand is never aligned (operand_aligned: neither dim is contiguous, so
                # there are no 16-byte vectors to load): 'strided.a' is posed by no tensors, and a table
                # entry or store row keyed by it was never looked up. One key for one problem.
                object.__setattr__(self, aligned, False)
        if not scaled and (self.scale or self.bias):
            raise ValueError(f"Problem.scale and Problem.bias are scaled_mm's; op {self.op!r} takes neither "
                             f"(got scale={self.scale!r}, bias={self.bias!r})")
        if self.allow_tf32 and self.dtype != "float32":
            # tf32 is meaningless for 16-bit inputs; normalise so keys stay unique.
            object.__setattr__(self, "allow_tf32", False)

    def _check_scaled(self) -> None:
        if self.op != "scaled_mm":
            raise TypeError(f"{self.dtype} inputs need scales: use op='scaled_mm' (gemmtune tune --op scaled_mm; "
                            f"got op {self.op!r})")
        if self.dtype not in FP8_DTYPES:
            raise TypeError(f"scaled_mm multiplies fp8 ({', '.join(FP8_DTYPES)}), not {self.dtype}")
        if self.out_dtype not in SCALED_OUT_DTYPES:
            raise TypeError(f"scaled_mm's out_dtype must be one of {SCALED_OUT_DTYPES}, got {self.out_dtype}")
        if self.scale not in SCALES:
            raise ValueError(f"scaled_mm needs Problem.scale in {SCALES} (tensor-wise or row-wise), "
                             f"got {self.scale!r}")
        if not isinstance(self.bias, bool):
            raise ValueError(f"Problem.bias must be a bool, got {self.bias!r}")

    # ----------------------------------------------------------------- builders
    @classmethod
    def from_sizes(
        cls,
        m: int,
        n: int,
        k: int,
        dtype: str | torch.dtype = "bfloat16",
        out_dtype: str | torch.dtype | None = None,
        *,
        layout_a: str = "row",
        layout_b: str = "row",
        aligned_a: bool | None = None,
        aligned_b: bool | None = None,
        allow_tf32: bool = False,
        op: str = "mm",
        scale: str = "",
        bias: bool = False,
        batch: int = 1,
    ) -> "Problem":
        """A problem from numbers. Alignment defaults to what contiguous tensors would have.
        scaled_mm: ``dtype`` is A's fp8 dtype (B is e4m3), ``out_dtype`` defaults to bf16,
        ``scale`` is 'tensor' or 'row', ``bias`` whether a bias (N,) is added.
        bmm (``op='bmm'``): ``batch`` products of (M, K) @ (K, N); layouts are those of one
        matrix, 'bcast_' + layout for an operand broadcast over the batch (batch stride 0)."""
        dt = dtype_name(dtype)
        es = element_size(dt)
        batched = op == "bmm"
        # a size-1 dim: the layout and alignment real tensors of that shape are keyed by
        nb = batch if batched else 1
        if op != "scaled_mm":
            # (scaled_mm keeps the layouts given: torch._scaled_mm takes A row-major and B
            # column-major only, a (K, 1) B included, and the Inductor export keys it so)
            layout_a, aligned_a = _sized_operand(layout_a, m, k, es, nb, aligned_a)
            layout_b, aligned_b = _sized_operand(layout_b, k, n, es, nb, aligned_b)
        if aligned_a is None:
            aligned_a = _contiguous_aligned(layout_a, m, k, es, batched)
        if aligned_b is None:
            aligned_b = _contiguous_aligned(layout_b, k, n, es, batched)
        return cls(
            m, n, k, dt, dtype_name(out_dtype) if out_dtype is not None else None,
            layout_a, layout_b, aligned_a, aligned_b, allow_tf32, op, scale, bias, batch,
        )

    @classmethod
    def from_tensors(
        cls,
        a: torch.Tensor,
        b: torch.Tensor,
        out_dtype: str | torch.dtype | None = None,
        *,
        allow_tf32: bool = False,
        op: str = "mm",
        scale: str = "",
        bias: bool = False,
    ) -> "Problem":
        """The problem that ``a @ b`` poses (``op='addmm'``: ``a @ b + bias``), with the
        operands' real layouts and alignment. 3-D operands (batch, M, K) and (batch, K, N) pose
        a ``bmm`` (``op`` left as 'mm' or given as 'bmm'): each matrix's layout, and an operand
        with batch stride 0 (``expand``) as broadcast ('bcast_row', ...).

        Raises ValueError/TypeError for inputs gemmtune cannot multiply (see check_operands).
        """
        if op == "mm" and isinstance(a, torch.Tensor) and a.dim() == 3:
            op = "bmm"
        check_operands(a, b, op=op)
        return cls._from_checked(a, b, out_dtype, allow_tf32=allow_tf32, op=op, scale=scale, bias=bias)

    @classmethod
    def _from_checked(cls, a: torch.Tensor, b: torch.Tensor, out_dtype=None, *, allow_tf32: bool = False,
                      op: str = "mm", scale: str = "", bias: bool = False) -> "Problem":
        """``from_tensors`` for operands ``check_operands(a, b, op)`` has passed (``op`` 'bmm' for
        3-D ones): ``gemmtune.matmul`` checks first, and a second check cost ~2 us a call."""
        m, k = a.shape[-2:]
        n = b.shape[-1]
        dt = dtype_name(a.dtype)
        es = a.element_size()
        batch = a.shape[0] if op == "bmm" else 1
        return cls(
            m, n, k, dt, dtype_name(out_dtype) if out_dtype is not None else None,
            _layout_of(a), _layout_of(b),
            operand_aligned(a.data_ptr(), m, k, _align_strides(a), es),
            operand_aligned(b.data_ptr(), k, n, _align_strides(b), es),
            allow_tf32, op, scale, bias, batch,
        )

    # ------------------------------------------------------------------ derived
    @property
    def key(self) -> str:
        """Stable string key, e.g. ``mm:M32-N32-K28672:bf16->bf16:row.a/col.u`` (``addmm:...``
        for a problem with a bias; ``scaled_mm:...:e4m3->bf16:row.a/col.a:row+bias`` for a
        scaled one: its scale mode, and ``+bias`` when it adds one)."""
        tf32 = "+tf32" if self.allow_tf32 else ""
        key = (
            f"{self.op}:M{self.m}-N{self.n}-K{self.k}:"
            f"{SHORT[self.dtype]}{tf32}->{SHORT[self.out_dtype]}:"
            f"{self.layout_a}.{'a' if self.aligned_a else 'u'}/"
            f"{self.layout_b}.{'a' if self.aligned_b else 'u'}"
        )
        if self.op == "scaled_mm":
            key += f":{self.scale}{'+bias' if self.bias else ''}"
        if self.op == "bmm":
            key = key.replace(":M", f":B{self.batch}-M", 1)
        return key

    @property
    def slice_layout_a(self) -> str:
        """A's layout as one matrix ('row', 'col' or 'strided'), broadcast or not."""
        return slice_layout(self.layout_a)

    @property
    def slice_layout_b(self) -> str:
        return slice_layout(self.layout_b)

    @property
    def broadcast_a(self) -> bool:
        """bmm: A is one matrix broadcast over the batch (batch stride 0)."""
        return self.layout_a.startswith(BCAST)

    @property
    def broadcast_b(self) -> bool:
        return self.layout_b.startswith(BCAST)

    @property
    def out_shape(self) -> tuple[int, ...]:
        """The output's shape: (M, N), or (batch, M, N) for bmm."""
        return (self.batch, self.m, self.n) if self.op == "bmm" else (self.m, self.n)

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    @property
    def dtype_b(self) -> str:
        """B's dtype: the problem's, except scaled_mm's, whose B is always e4m3 (FP8_B)."""
        return FP8_B if self.op == "scaled_mm" else self.dtype

    @property
    def torch_dtype_b(self) -> torch.dtype:
        return DTYPES[self.dtype_b]

    @property
    def torch_out_dtype(self) -> torch.dtype:
        return DTYPES[self.out_dtype]

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.m * self.n * self.k

    @property
    def min_bytes(self) -> int:
        """Bytes moved if each input (the bias too) is read once and the output written once
        (bmm: every matrix of the batch, a broadcast operand's one matrix once):
        ``read_bytes + write_bytes``."""
        return self.read_bytes + self.write_bytes

    @property
    def read_bytes(self) -> int:
        """The part of ``min_bytes`` read: A and B once (a broadcast operand's one matrix once),
        the bias (one more row of the output's size) and scaled_mm's scales."""
        es = element_size(self.dtype)
        bias_rows = int(self.op == "addmm" or bool(self.bias))
        scales = 0 if self.op != "scaled_mm" else 8 if self.scale == "tensor" else 4 * (self.m + self.n)
        na = 1 if self.broadcast_a else self.batch
        nb = 1 if self.broadcast_b else self.batch
        return (es * (na * self.m * self.k + nb * self.k * self.n)
                + element_size(self.out_dtype) * self.batch * bias_rows * self.n + scales)

    @property
    def write_bytes(self) -> int:
        """The part of ``min_bytes`` written: the output (C), once."""
        return element_size(self.out_dtype) * self.batch * self.m * self.n

    def with_sizes(self, m: int | None = None, n: int | None = None, k: int | None = None,
                   batch: int | None = None) -> "Problem":
        return replace(self, m=self.m if m is None else m, n=self.n if n is None else n,
                       k=self.k if k is None else k, batch=self.batch if batch is None else batch)

    def padded(self) -> "Problem":
        """The problem ``pad+`` choices actually run: row-major, aligned, N and K rounded
        up to whole 16-byte vectors (see kernels.run_choice). scaled_mm's padded B is
        column-major (K-major), the layout fp8 GEMMs read (torch._scaled_mm requires it), and so
        is an fp32 mm's run as 3xTF32 (precision.pads_b_kmajor_problem: TF32 wgmma reads B
        K-major; the Triton families' copies, as pad+aten keeps a row-major one for SGEMM)."""
        per = max(1, ALIGN_BYTES // element_size(self.dtype))
        kmajor = self.op == "scaled_mm" or pads_b_kmajor_problem(self)
        # bmm: a broadcast operand is padded once and stays broadcast (kernels.run_choice).
        return replace(self, n=-(-self.n // per) * per, k=-(-self.k // per) * per,
                       layout_a=BCAST + "row" if self.broadcast_a else "row",
                       layout_b="col" if kmajor else BCAST + "row" if self.broadcast_b else "row",
                       aligned_a=True, aligned_b=True)

    def log2_shape(self) -> tuple[float, float, float]:
        """log2 of (M, N, K), with dims of 0 or 1 both mapping to 0 (used for similarity)."""
        return tuple(math.log2(max(1, d)) for d in (self.m, self.n, self.k))  # type: ignore[return-value]

    def __str__(self) -> str:
        return self.key

    @classmethod
    def from_key(cls, key: str) -> "Problem":
        """Parse a key made by ``Problem.key``; raises ValueError naming the bad part."""
        try:
            op, sizes, dts, lay, *scaled = key.split(":")
            if (op == "scaled_mm") != (len(scaled) == 1) or len(scaled) > 1:
                raise ValueError("a scaled_mm key has 5 ':'-separated parts (the last its scale mode, "
                                 "e.g. 'row' or 'tensor+bias'), other ops 4")
            scale, plus = (scaled[0].partition("+")[::2]) if scaled else ("", "")
            if plus not in ("", "bias"):
                raise ValueError(f"scale part {scaled[0]!r} must read <mode> or <mode>+bias")
            batch = 1
            if op == "bmm":
                bs, _, sizes = sizes.partition("-")
                if bs[:1] != "B":
                    raise ValueError("bmm sizes must read B<int>-M<int>-N<int>-K<int>")
                batch = int(bs[1:])
            ms, ns, ks = sizes.split("-")
            if not (ms[0] == "M" and ns[0] == "N" and ks[0] == "K"):
                raise ValueError("sizes must read M<int>-N<int>-K<int>")
            src, dst = dts.split("->")
            tf32 = src.endswith("+tf32")
            la, lb = lay.split("/")
            (lay_a, al_a), (lay_b, al_b) = la.split("."), lb.split(".")
            if al_a not in "au" or al_b not in "au" or len(al_a) != 1 or len(al_b) != 1:
                raise ValueError("alignment flag must be 'a' or 'u'")
            p = cls(int(ms[1:]), int(ns[1:]), int(ks[1:]), src.removesuffix("+tf32"), dst,
                    lay_a, lay_b, al_a == "a", al_b == "a", tf32, op, scale, plus == "bias", batch)
        except (ValueError, TypeError, IndexError) as e:
            raise ValueError(f"malformed problem key {key!r}: {e}") from None
        # One problem, one key: anything that does not read back identically
        # (aliases, leading zeros, '+', a strided operand marked aligned) is refused.
        if p.key != key:
            strided = [f"{side} ({lay}.a)" for side, lay, al in (("A", lay_a, al_a), ("B", lay_b, al_b))
                       if slice_layout(lay) == "strided" and al == "a"]
            why = (f": a strided operand is never aligned, so no tensors pose {' or '.join(strided)}"
                   if strided else "")
            raise ValueError(f"problem key {key!r} is not canonical{why}; did you mean {p.key!r}?")
        return p


def _layout_of(t: torch.Tensor) -> str:
    """An operand's Problem layout: its matrices' layout, 'bcast_' + it for a 3-D operand
    broadcast over a batch of more than one (batch stride 0)."""
    lay = operand_layout(t.shape[-2], t.shape[-1], tuple(t.stride()[-2:]))
    if t.dim() == 3 and t.shape[0] > 1 and t.stride(0) == 0:
        return BCAST + lay
    return lay


def _align_strides(t: torch.Tensor) -> tuple[int, ...]:
    """The strides whose alignment matters: a batch of one has no batch stride to speak of."""
    if t.dim() == 3 and t.shape[0] == 1:
        return tuple(t.stride()[1:])
    return tuple(t.stride())


def check_not_negated(name: str, t: torch.Tensor) -> None:
    """Raise ValueError when ``t`` is a negated view (``Tensor.is_neg()``: the ``.imag`` of a
    conjugated complex tensor, ``torch._neg_view``): its memory holds the values without their sign,
    which torch's ops apply and a Triton kernel, reading the memory, does not."""
    if t.is_neg():
        raise ValueError(f"{name} is a negated view (Tensor.is_neg(), e.g. the .imag of a conjugated complex "
                         f"tensor): gemmtune's kernels read its memory, which lacks the sign; pass "
                         f"{name}.resolve_neg()")


def check_dense(name: str, t: torch.Tensor, reader: str, remedy: str = "pass ") -> None:
    """Raise TypeError when ``t`` is not strided (sparse COO, CSR, ...): gemmtune's kernels read
    strided memory, and a sparse operand, bias, residual or scale failed deep inside them ("Cannot
    access data pointer of Tensor that doesn't have storage"). ``reader`` says what reads it."""
    if t.layout is not torch.strided:
        raise TypeError(f"{name} is a {t.layout} tensor: {reader} dense (strided) tensors; {remedy}{name}.to_dense()")


def check_operands(a: torch.Tensor, b: torch.Tensor, op: str = "mm") -> None:
    """Raise a clear TypeError/ValueError when a @ b is not a GEMM gemmtune can run
    (``op='scaled_mm'``: an fp8 A, e4m3 or e5m2, and an e4m3 B; ``op='bmm'``: two 3-D operands
    (batch, M, K) and (batch, K, N) of one batch size)."""
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, not {type(t).__name__}")
        check_dense(name, t, "gemmtune multiplies", "use torch.mm, or ")  # (torch.mm takes sparse)
    if op == "bmm" or (a.dim() == 3 and b.dim() == 3):
        for name, t in (("a", a), ("b", b)):
            if t.dim() != 3:
                raise ValueError(f"bmm: {name} must be 3-D (batch, rows, cols), got {t.dim()}-D with shape "
                                 f"{tuple(t.shape)}")
        if op not in ("mm", "bmm"):
            raise ValueError(f"op {op!r} takes 2-D operands; 3-D ones make a bmm (op='bmm')")
        if a.shape[0] != b.shape[0]:
            raise ValueError(f"bmm: batch sizes differ: a is {tuple(a.shape)} and b is {tuple(b.shape)} "
                             f"({a.shape[0]} != {b.shape[0]}); to broadcast one matrix, expand it "
                             f"(e.g. b.expand({a.shape[0]}, -1, -1): batch stride 0, read once)")
    else:
        for name, t, other in (("a", a, b), ("b", b, a)):
            if t.dim() != 2:
                hint = (f"; {'b' if name == 'a' else 'a'} is 2-D: a bmm takes two 3-D operands "
                        "(batch, M, K) @ (batch, K, N)" if t.dim() == 3 else "")
                raise ValueError(f"{name} must be 2-D, or both operands 3-D for a bmm (got {t.dim()}-D with "
                                 f"shape {tuple(t.shape)}){hint}")
    if op == "scaled_mm":
        if a.dtype not in (torch.float8_e4m3fn, torch.float8_e5m2) or b.dtype != torch.float8_e4m3fn:
            # The reason given for the one case it names (an fp16 pair was told "e5m2 x e5m2 has no
            # cuBLASLt kernel"): a B of e5m2, or operands that are no fp8 at all.
            fp8 = (torch.float8_e4m3fn, torch.float8_e5m2)
            why = ("e5m2 x e5m2 has no cuBLASLt kernel" if b.dtype == torch.float8_e5m2 else
                   "quantize them first, or multiply 16/32-bit operands with gemmtune.matmul"
                   if a.dtype not in fp8 or b.dtype not in fp8 else "")
            raise TypeError(f"scaled_mm takes a float8_e4m3fn or float8_e5m2 A and a float8_e4m3fn B, got "
                            f"{a.dtype} and {b.dtype}" + (f" ({why})" if why else ""))
    elif a.dtype != b.dtype:
        raise TypeError(f"a and b must have the same dtype, got {a.dtype} and {b.dtype}")
    elif a.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        raise TypeError(f"{a.dtype} inputs need scales: use gemmtune.scaled_mm (op='scaled_mm')")
    dtype_name(a.dtype)  # raises TypeError for unsupported dtypes
    check_not_negated("a", a)
    check_not_negated("b", b)
    if a.device != b.device:
        raise ValueError(f"a and b must be on the same device, got {a.device} and {b.device}")
    if a.shape[-1] != b.shape[-2]:
        ia, ib = a.dim() - 1, b.dim() - 2
        raise ValueError(
            f"inner dimensions differ: a is {tuple(a.shape)} and b is {tuple(b.shape)} "
            f"(a.shape[{ia}]={a.shape[-1]} != b.shape[{ib}]={b.shape[-2]})"
        )
