"""Shape capture: record every GEMM a model runs, as a suite that ``gemmtune tune`` takes.

A ``TorchDispatchMode`` sees the aten ops under autograd, so it catches the GEMMs that
``nn.Linear`` (``aten.addmm`` / ``aten.mm`` after ``linear`` decomposes), ``x @ w``,
``torch.matmul`` on 3-D operands (``aten.bmm``) and HF transformers' ``Conv1D``
(``addmm``) really run, with their real strides (``x @ W.T`` with a row-major weight is a
column-major B). Their out= and in-place forms (``torch.mm(a, b, out=c)``, ``c.addmm_(a, b)``,
``torch.bmm(..., out=)``) count as the same GEMM. An addmm is recorded as op addmm only when its
added input is a bias (N,) or (1, N) and beta = alpha = 1, what the tuned addmm problem adds; any
other (a full (M, N) matrix, as ``c.addmm_(a, b)`` adds, an (M, 1) column, a scale) as its mm, with
a ``note`` saying so. ``aten._addmm_activation`` (addmm + relu/gelu) is its addmm, the activation
noted; ``dot``/``vdot`` (1 x 1 x K), ``addr`` (M x N x 1) and the ``.dtype`` overloads (an fp32
output of fp16/bf16 inputs, which a record cannot carry) are recorded as not tuned, with the reason
in ``note``. A matrix-vector product (``torch.mv``,
``A @ v``, ``torch.matmul(T, v)`` of a 3-D T, which views T as 2-D; ``aten.mv`` / ``addmv``) is
recorded as the one-row mm (addmm) of its transpose, ``v[None] @ A.T``: 1 x M x K, the GEMV
that the skinny family serves (``_one_row``); ``torch.matmul(v, A)`` is that mm already.
Module forward hooks name the innermost module that was running. On the meta
device the products inside ``F.scaled_dot_product_attention`` are left out and counted
(``meta_attention_calls``): there it takes torch's math path, which a GPU's fused attention
does not (``_MetaAttention``). An MoE's
grouped GEMM (``aten._grouped_mm``, transformers 5's experts), ``baddbmm`` and ``addbmm`` are
recorded as not tuned yet.

One record per distinct problem (op, batch, M, N, K, dtype, layouts): how often it ran and which
modules ran it. A ``bmm`` (attention's ``q @ k.transpose``, ``p @ v``) is recorded with its
batch and each matrix's layout (``bcast_...`` for an operand expanded over the batch) and is
tuned like the 2-D GEMMs; the suite CSV carries it as op ``bmm`` with a ``batch`` column.
Run the model on several example inputs (``inputs=[(x1,), (x2,)]``, e.g. prefill and decode
lengths; an input is a tuple of positional arguments, a dict of keyword arguments, as an
encoder-decoder's ``input_ids`` and ``decoder_input_ids``, or one tensor) and the records of one
layer differ only in M; each such family carries
``m_min``/``m_max``, which ``hints()`` turns into the dispatcher's size hints.

Example::

    >>> import torch, gemmtune
    >>> mlp = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64))
    >>> cap = gemmtune.capture(mlp, inputs=[(torch.randn(4, 64),), (torch.randn(32, 64),)])
    >>> [(r.op, r.m, r.n, r.k, r.layout_b) for r in cap.records][:2]
    [('addmm', 4, 256, 64, 'col'), ('addmm', 4, 64, 256, 'col')]
    >>> cap.hints()[(256, 64, 'float32', 'col')]
    [4, 32]
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
import sys
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from .problem import BCAST, BMM_LAYOUTS, LAYOUTS, Problem, dtype_name, operand_layout, slice_layout
from .jsonio import write_atomic

aten = torch.ops.aten
# aten op -> (the record's op, index of A, index of B in the call's positional arguments). Each
# op's out= overload (``torch.mm(a, b, out=c)``; ``torch.matmul(a, b, out=c)`` is ``mm.out`` too)
# takes ``out`` as a keyword, and its in-place form (``c.addmm_(a, b)``) its added input first, as
# .default does: the same GEMM, recorded and counted as .default's. They never pass through
# .default, so listening to it alone missed them. (The ``.dtype`` overloads, an fp16/bf16 product
# with an fp32 output, are recorded as not tuned, op ``mm.dtype`` etc., with a note naming the out
# dtype: a record carries no output dtype, and as the inputs' dtype it would be tuned for the wrong
# output. Before, they were not recorded at all.)
_GEMM_OPS = {
    "mm": ("mm", 0, 1), "addmm": ("addmm", 1, 2), "addmm_": ("addmm", 1, 2),
    "bmm": ("bmm", 0, 1),
    # not tuned (Record.tunable): no family takes a batched added input (baddbmm), or sums the
    # products over the batch (addbmm: c + sum_i A[i] @ B[i], an mm of K = batch x K only once A's
    # matrices are copied side by side); recorded so that a capture says they ran
    "baddbmm": ("baddbmm", 1, 2), "baddbmm_": ("baddbmm", 1, 2),
    "addbmm": ("addbmm", 1, 2), "addbmm_": ("addbmm", 1, 2),
    # matrix-vector: recorded as the one-row mm (addmm) of their transpose (_one_row)
    "mv": ("mv", 0, 1), "addmv": ("addmv", 1, 2), "addmv_": ("addmv", 1, 2),
    # addmm + relu / gelu fused (what addmm + an activation decomposes to under torch.compile's
    # decompositions): its addmm (_added), the activation left out and named in the note
    "_addmm_activation": ("addmm", 1, 2),
    # not tuned: a dot product is a 1 x 1 x K product, an outer product (addr: C + v1 v2^T) an
    # M x N x 1 one; neither is a GEMM a family serves. (torch.outer and torch.ger are
    # CompositeImplicit in torch 2.13: a view and aten.mul, no product op reaches the mode.)
    "dot": ("dot", 0, 1), "vdot": ("vdot", 0, 1),
    "addr": ("addr", 1, 2), "addr_": ("addr", 1, 2),
}
_GEMM_ARGS = {getattr(getattr(aten, name), overload): spec for name, spec in _GEMM_OPS.items()
              if hasattr(aten, name)
              for overload in ("default", "out") if overload in getattr(aten, name).overloads()}
# The ``.dtype`` overloads (torch 2.13: mm, bmm, addmm, baddbmm; ``out_dtype`` is the argument after
# B, an fp32 output of fp16/bf16 inputs): op '<op>.dtype', not tuned (_untuned_note).
_DTYPE_OPS = {"mm": (0, 1, 2), "bmm": (0, 1, 2), "addmm": (1, 2, 3), "baddbmm": (1, 2, 3)}
_DTYPE_ARGS = {getattr(getattr(aten, name), overload): (name, *idx) for name, idx in _DTYPE_OPS.items()
               if hasattr(aten, name)
               for overload in ("dtype", "dtype_out") if overload in getattr(aten, name).overloads()}
# A matrix-vector product's record op: mv is mm, addmv (a bias over the matrix's rows) is addmm.
_MATVEC = {"mv": "mm", "addmv": "addmm"}
# MoE experts in transformers 5 (Mixtral, Qwen-MoE...) run one grouped GEMM per layer: tokens
# (T, K) against every expert's weight (E, K, N), split by offsets. Not tuned, but recorded (batch
# = E, M = the routed tokens), so that a capture says they ran instead of missing them.
if hasattr(aten, "_grouped_mm"):
    _GEMM_ARGS[aten._grouped_mm.default] = ("grouped_mm", 0, 1)
SUITE_COLUMNS = ("group", "name", "M", "N", "K", "dtype", "layout_a", "layout_b", "op", "batch", "count",
                 "m_min", "m_max", "modules")
TUNED_OPS = ("mm", "addmm", "bmm")


@dataclass
class Record:
    """One distinct GEMM: ``count`` calls, by ``modules`` (qualified names, '' = top level)."""

    op: str
    m: int
    n: int
    k: int
    dtype: str
    layout_a: str
    layout_b: str
    batch: int = 1
    count: int = 0
    modules: list[str] = field(default_factory=list)
    # what the record stands for when it is not the op's plain GEMM ('; '-joined, one per kind of
    # call): an addmm recorded as its mm (a full added matrix), an _addmm_activation's activation
    # left out, or why an untunable one is not tuned (a .dtype overload's out dtype, a dot product)
    note: str = ""

    @property
    def family_key(self) -> tuple:
        """What the records of one layer share across input sizes: everything but M."""
        return (self.op, self.n, self.k, self.dtype, self.layout_a, self.layout_b, self.batch)

    @property
    def tunable(self) -> bool:
        """Whether gemmtune tunes it today: mm, addmm and bmm in its dtypes (not baddbmm or addbmm,
        not an MoE's grouped_mm, not fp8) of dense operands (not a sparse adjacency matrix's product)."""
        return (self.op in TUNED_OPS and self.dtype in ("bfloat16", "float16", "float32")
                and self.layout_a in BMM_LAYOUTS and self.layout_b in BMM_LAYOUTS)

    @property
    def kind(self) -> str:
        """What the summary names an untunable record by: op/dtype, and a sparse operand's layout."""
        return "/".join([self.op, self.dtype] + [lay for lay in (self.layout_a, self.layout_b)
                                                 if lay not in BMM_LAYOUTS])

    def problem(self) -> Problem:
        """The problem to tune: op addmm (the bias fused) for an addmm, bmm (with its batch) for a
        bmm, else mm."""
        return Problem.from_sizes(self.m, self.n, self.k, self.dtype, layout_a=self.layout_a,
                                  layout_b=self.layout_b, op=self.op,
                                  **({"batch": self.batch} if self.op == "bmm" else {}))


def _layout(t: torch.Tensor) -> str:
    """A matrix's layout; a 3-D operand's with 'bcast_' when it is one matrix expanded over a
    batch (batch stride 0), as Problem.from_tensors says it. A sparse operand (a graph network's
    adjacency matrix, ``adj @ x``) is named by its torch layout ('sparse_coo', 'sparse_csr'),
    which no dense problem has (``Record.tunable``): a CSR one, which has no strides, raised from
    inside the capture, and a COO one was recorded as a dense 'strided' product to tune."""
    if t.layout is not torch.strided:
        return str(t.layout).removeprefix("torch.")
    rows, cols = t.shape[-2], t.shape[-1]
    lay = operand_layout(rows, cols, tuple(t.stride()[-2:]))
    lay = lay if lay in LAYOUTS else "strided"
    if t.dim() == 3 and t.shape[0] > 1 and t.stride(0) == 0:
        return BCAST + lay
    return lay


def _one_row(mat: torch.Tensor, vec: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The operands (A, B) of the GEMM a matrix-vector product ``mat @ vec`` (M x K times K) is
    recorded as: ``vec[None] @ mat.T``, 1 x M x K, whose one output row is the product's vector
    (the same memory either way). Not the M x 1 x K ``mat @ vec[:, None]``: its N = 1 fills no
    tiled family's tile, and skinny serves M up to 64 only (skinny_spec.MAX_M), while the one-row
    form, a row-major ``mat`` being a column-major B, is the GEMV that skinny's one-row path
    serves, the problem of a Linear's decode step on the same weight, and what
    ``gemmtune.matmul(vec[None], mat.T)`` runs.
    (A sparse ``mat`` stays untunable: its transpose is named by its own layout, CSR's CSC.)"""
    return vec.unsqueeze(0), mat.t()


def _dtype_text(dtype: torch.dtype) -> str:
    """A record's dtype: gemmtune's name for one it multiplies, torch's own for any other. A
    float64 (int, complex) GEMM is recorded as untunable (``Record.tunable``), as the summary and
    the JSON say; ``dtype_name`` raised TypeError there, so a model with one fp64 product could
    not be captured at all, and a patched layer's first call under capture, whose fp64 reference
    check raised it, fell back to cuBLAS for good."""
    try:
        return dtype_name(dtype)
    except TypeError:
        return str(dtype).removeprefix("torch.")


class _TorchPaths(dict):
    """The eager-path table a gemmtune-patched layer reads (``_gemmtune_paths``) during a capture:
    every shape on torch's own path, so the layer runs ``F.linear`` (a Conv1D its own forward).
    Its GEMM is then recorded as an unpatched layer's (the tuned path calls no aten GEMM, and
    a capture of a patched model recorded none of its layers), and its dispatcher decides and
    verifies nothing under the capture (a first call there failed its fp64 check and kept
    cuBLAS for that shape for good)."""

    def __init__(self, aten: str):
        super().__init__()
        self.aten = aten

    def get(self, key, default=None):
        return self.aten


def _torch_paths(model: torch.nn.Module) -> list:
    """Put every gemmtune-patched layer of ``model`` on torch's path (``_TorchPaths``); returns
    (layer, its own table) pairs for ``_restore_paths``."""
    held = [(mod, mod.__dict__["_gemmtune_paths"]) for mod in model.modules() if "_gemmtune_paths" in mod.__dict__]
    if held:
        from .nn import _ATEN  # (gemmtune.nn is imported already: it made those tables)
        for mod, _ in held:
            mod._gemmtune_paths = _TorchPaths(_ATEN)
    return held


def example_passes(inputs) -> list:
    """``inputs`` as a list of example inputs, one per pass. One tensor or one dict is refused:
    iterated as a list it would be passes of its rows (or of its key names), at the wrong M."""
    if isinstance(inputs, (torch.Tensor, Mapping)):
        raise TypeError(f"inputs is a list of example inputs, one per forward pass ([(x,)], [x] or "
                        f"[dict(input_ids=...)]), not one {type(inputs).__name__}")
    return list(inputs)


def _tensors(x) -> list:
    """The tensors of one example input (a tuple/list of arguments, a dict of them, or a tensor)."""
    if isinstance(x, Mapping):
        return list(x.values())
    return list(x) if isinstance(x, (tuple, list)) else [x]


def _call(model: torch.nn.Module, x):
    """``model`` on one example input: a tuple or list of positional arguments, a dict of keyword
    arguments, or one tensor (its only argument: ``model(*x)`` would have split it into as many
    arguments as it has rows)."""
    if isinstance(x, Mapping):
        return model(**x)
    if isinstance(x, torch.Tensor):
        return model(x)
    if isinstance(x, (tuple, list)):
        return model(*x)
    raise TypeError(f"an example input is a tuple of positional arguments, a dict of keyword arguments or a "
                    f"tensor, not {type(x).__name__}")


class _Mode(TorchDispatchMode):
    def __init__(self, capture: "Capture"):
        super().__init__()
        self.capture = capture

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        spec = _GEMM_ARGS.get(func)
        if spec is None and func in _DTYPE_ARGS:
            spec = _DTYPE_ARGS[func]
        if spec is not None:
            if self.capture._meta_attention:
                self.capture.meta_attention_calls += 1
            else:
                self.capture._add(*_recorded(func, spec, args, kwargs or {}))
        return func(*args, **(kwargs or {}))


def _row_bias(bias, n: int) -> bool:
    """Whether an addmm's added input is a bias over the output's columns, (N,) or (1, N): what the
    tuned addmm problem adds (the bias fused in the epilogue). A full (M, N) matrix, an (M, 1)
    column, a scalar or any other broadcast is not."""
    if not isinstance(bias, torch.Tensor):
        return False
    return tuple(bias.shape) in ((n,), (1, n))


def _recorded(func, spec: tuple, args: tuple, kwargs: dict) -> tuple:
    """(op, A, B, note): what ``Capture._add`` records for a call of one of the listened ops."""
    name = func._schema.name.removeprefix("aten::")
    if func in _DTYPE_ARGS:
        op, ia, ib, iout = spec
        out_dtype = args[iout] if len(args) > iout else kwargs.get("out_dtype")
        a, b = args[ia], args[ib]
        note = (f"aten.{name}.{func._overloadname}: out dtype {_dtype_text(out_dtype)} from "
                f"{_dtype_text(a.dtype)} inputs; a record has no output dtype, not tuned")
        return f"{op}.dtype", a, b, note
    op, ia, ib = spec
    a, b = args[ia], args[ib]
    if op in ("dot", "vdot"):
        return op, a.unsqueeze(0), b.unsqueeze(1), (f"aten.{name}: a 1 x 1 x K dot product of two "
                                                    "vectors, not a GEMM gemmtune tunes")
    if op == "addr":
        return op, a.unsqueeze(1), b.unsqueeze(0), (f"aten.{name}: an M x N x 1 outer product (added to "
                                                    "a matrix), not a GEMM gemmtune tunes")
    if op in _MATVEC:
        a, b = _one_row(a, b)
        op = _MATVEC[op]
    if op != "addmm":
        return op, a, b, ""
    # an addmm (addmv's one-row form, _addmm_activation): the tuned addmm problem adds a bias (N,)
    # to A @ B; anything else is recorded as its mm, the GEMM that gemmtune can tune, with a note
    act = ""
    if name.startswith("_addmm_activation"):
        act = "gelu" if kwargs.get("use_gelu", False) else "relu"
    bias, beta, alpha = args[0], kwargs.get("beta", 1), kwargs.get("alpha", 1)
    what = f"aten.{name}" + (f" ({act})" if act else "")
    row_bias = _row_bias(bias, b.shape[-1])
    if not row_bias or beta != 1 or alpha != 1:
        added = (f"a {tuple(bias.shape)} added input" if isinstance(bias, torch.Tensor) else "a scalar added input")
        why = added if not row_bias else f"beta={beta}, alpha={alpha}"
        rest = "the add and the activation run apart" if act else "the add runs apart"
        return "mm", a, b, f"{what} with {why}: recorded as its mm (the tuned addmm adds a bias (N,)); {rest}"
    return "addmm", a, b, (f"{what}: recorded as its addmm, the {act} left out" if act else "")


class _MetaAttention(TorchFunctionMode):
    """Marks the GEMMs that ``F.scaled_dot_product_attention`` runs on meta tensors. The meta
    device has no fused attention kernel, so SDPA takes torch's math path there and runs bmm
    products (in fp32: GPT-2 on meta gave 4 such problems of its 14) that the flash or
    memory-efficient kernel of a GPU (or the CPU's flash kernel) never runs. A model captured on
    meta, to record a large model's shapes without its memory, should list what it would run."""

    def __init__(self, capture: "Capture"):
        super().__init__()
        self.capture = capture

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is not _SDPA or not (args and isinstance(args[0], torch.Tensor) and args[0].is_meta):
            return func(*args, **(kwargs or {}))
        self.capture._meta_attention += 1
        try:
            return func(*args, **(kwargs or {}))
        finally:
            self.capture._meta_attention -= 1


_SDPA = torch.nn.functional.scaled_dot_product_attention


class Capture:
    """The GEMMs recorded from one or more forward passes (see the module docstring)."""

    def __init__(self) -> None:
        self._records: dict[tuple, Record] = {}
        self._stack: list[str] = []
        self._linears: set[str] = set()  # names of the nn.Linear modules (hints() reads their bmm)
        self._layers: set[str] = set()  # names of the layers patch converts or names (nn.Linear, Conv1D)
        self.passes = 0
        self._meta_attention = 0  # > 0 inside F.scaled_dot_product_attention on meta tensors
        self.meta_attention_calls = 0  # GEMM calls left out there (_MetaAttention)

    # -------------------------------------------------------------- recording
    def _add(self, op: str, a: torch.Tensor, b: torch.Tensor, note: str = "") -> None:
        # a grouped_mm's groups are its B's (the experts), its A the tokens of all of them
        batch = a.shape[0] if a.dim() == 3 else b.shape[0] if op == "grouped_mm" and b.dim() == 3 else 1
        m, k = a.shape[-2], a.shape[-1]
        n = b.shape[-1]
        rec = Record(op, int(m), int(n), int(k), _dtype_text(a.dtype), _layout(a), _layout(b), int(batch))
        key = (*rec.family_key, rec.m)
        have = self._records.setdefault(key, rec)
        if note and note not in have.note.split("; "):
            have.note = f"{have.note}; {note}" if have.note else note
        have.count += 1
        where = self._stack[-1] if self._stack else ""
        if where not in have.modules:
            have.modules.append(where)

    def _hooks(self, model: torch.nn.Module) -> list:
        from .modeltune import is_conv1d  # patch's own test of a Conv1D (modeltune imports this module)
        handles = []
        for name, mod in model.named_modules():
            if isinstance(mod, torch.nn.Linear):
                self._linears.add(name)
            if isinstance(mod, torch.nn.Linear) or is_conv1d(mod):
                self._layers.add(name)
            def pre(_m, _a, name=name):
                self._stack.append(name)

            def post(_m, _a, _o):
                self._stack.pop()
            handles.append(mod.register_forward_pre_hook(pre))
            handles.append(mod.register_forward_hook(post, always_call=True))
        return handles

    def run(self, model: torch.nn.Module, fn=None, inputs: Iterable[tuple] = ()) -> "Capture":
        """Record ``model(*x)`` for each ``x`` of ``inputs`` (``model(**x)`` for a dict,
        ``model(x)`` for a tensor), or ``fn()`` when given (e.g. a closure that calls
        ``model.generate``). Gradients are off; nothing is changed (a model in training mode gets its
        buffers back as they were: BatchNorm's running statistics)."""
        passes = example_passes(inputs)  # once: ``inputs`` may be a generator
        handles = self._hooks(model)
        held = _torch_paths(model)
        # A module in training mode updates buffers in place on every pass (BatchNorm's running
        # statistics and num_batches_tracked): the example passes fitted a pretrained model's
        # statistics to the example inputs. Put back after the passes (eval mode changes none).
        saved = [(b, b.detach().clone()) for b in model.buffers()] if any(
            m.training for m in model.modules()) else []
        # The attention mark only where meta is involved: elsewhere no torch function needs it,
        # and a model captured on a real device runs under the dispatch mode alone, as before.
        meta = any(t.is_meta for t in model.parameters()) or any(
            isinstance(t, torch.Tensor) and t.is_meta for x in passes for t in _tensors(x))
        try:
            with torch.no_grad(), (_MetaAttention(self) if meta else contextlib.nullcontext()), _Mode(self):
                if fn is not None:
                    fn()
                    self.passes += 1
                for x in passes:
                    _call(model, x)
                    self.passes += 1
        finally:
            for h in handles:
                h.remove()
            for mod, paths in held:
                mod._gemmtune_paths = paths
            with torch.no_grad():
                for b, was in saved:
                    if b.shape == was.shape:  # (a buffer resized in place is left as it is)
                        b.copy_(was)
            self._stack.clear()
        return self

    # -------------------------------------------------------------- results
    @property
    def records(self) -> list[Record]:
        """Records in first-seen order."""
        return list(self._records.values())

    def hints(self) -> dict[tuple, list[int]]:
        """``{(N, K, dtype, layout_b): sorted distinct M}`` over the tunable 2-D records (mm, addmm:
        a layer's GEMM): the size hints of one dispatcher per layer shape
        (``compile_mm(n=, k=, hints={"m": ...})``).

        A bmm that an ``nn.Linear`` ran, its B one matrix broadcast over the batch, counts as the
        2-D GEMM of its stacked rows (M = batch x M): that is how ``F.linear`` runs a 3-D input
        that cannot be viewed as 2-D (a transposed activation, as Mamba's ``out_proj`` takes)
        when the weight needs no gradient (``requires_grad_(False)``, a frozen model), and it is
        the M a patched layer, which flattens its input, runs. A model's own bmm against a
        broadcast matrix is no layer's GEMM and gives no hint.

        Only a GEMM that a layer ran (an ``nn.Linear`` or ``Conv1D``: ``outside_layers`` lists the
        others) gives a hint: WavLM's attention multiplies its q/k/v weights itself (through
        ``F.multi_head_attention_forward``), and its own 64 x 64 products gave the projections'
        shape hints, so ``patch`` converted layers whose forward never runs, and named none of them
        as not run (session 45's CPU hunt)."""
        out: dict[tuple, set] = defaultdict(set)
        for r in self.records:
            if not r.tunable:
                continue
            if r.op != "bmm":
                if self._layers and not any(name in self._layers for name in r.modules):
                    continue  # (a capture with no layer names known, e.g. a bare function: every GEMM)
                out[(r.n, r.k, r.dtype, r.layout_b)].add(r.m)
            elif (r.layout_b.startswith(BCAST) and not r.layout_a.startswith(BCAST)
                  and all(name in self._linears for name in r.modules)):
                out[(r.n, r.k, r.dtype, slice_layout(r.layout_b))].add(r.batch * r.m)
        return {k: sorted(v) for k, v in out.items()}

    def outside_layers(self) -> list[tuple["Record", list[str]]]:
        """The tunable 2-D GEMMs (mm, addmm) that a module other than an ``nn.Linear`` or a
        ``Conv1D`` ran, each with those modules' names: a module's own ``F.linear(x, self.weight)``
        (Qwen-MoE's ``TopKRouter``) or a product of two activations. ``patch`` converts layers
        only, so these run torch's kernel; ``tune_model`` names them in a warning."""
        out = []
        for r in self.records:
            if r.tunable and r.op != "bmm":
                names = [n for n in r.modules if n not in self._layers]
                if names:
                    out.append((r, names))
        return out

    def problems(self) -> list[Problem]:
        """The distinct tunable problems: ``mm``, ``addmm`` (a Linear with a bias) and ``bmm``,
        each tuned with what it runs (addmm with its bias fused into the kernel's epilogue). A GEMM
        with an empty dimension (a pass of batch 0 or sequence 0) has nothing to tune and is left
        out."""
        seen, out = set(), []
        for r in self.records:
            if r.tunable and not _empty(r):
                p = r.problem()
                if p.key not in seen:
                    seen.add(p.key)
                    out.append(p)
        return out

    def summary(self) -> str:
        tun = [r for r in self.records if r.tunable]
        other = [r for r in self.records if not r.tunable]
        calls = sum(r.count for r in self.records)
        text = (f"{calls} GEMM calls in {self.passes} pass(es): {len(self.records)} distinct "
                f"({len(self.problems())} tunable problems, {len(self.hints())} layer shapes)")
        if other:
            kinds = sorted({r.kind for r in other})
            text += f"; not tuned yet: {len(other)} ({', '.join(kinds)})"
        if self.meta_attention_calls:
            text += (f"; {self.meta_attention_calls} calls inside attention on meta left out (a GPU's "
                     "fused attention runs none)")
        return text if tun or not other else text + "; nothing tunable"

    def write_suite(self, path: str | Path, group: str = "captured") -> Path:
        """A suite CSV (``gemmtune tune --suite``): one row per distinct tunable problem (op mm,
        addmm or bmm, a bmm's ``batch``; 1 for the others), plus the count, the layer's M range
        and the modules. Other GEMMs (baddbmm, addbmm, fp8) are listed in the JSON beside it
        (``write_json``), not here, until gemmtune tunes them."""
        path = Path(path)
        ranges: dict[tuple, list[int]] = defaultdict(list)
        for r in self.records:
            ranges[r.family_key].append(r.m)
        rows, used = [], set()
        for r in self.records:
            if not r.tunable or _empty(r):
                continue
            base = re.sub(r"[^A-Za-z0-9_.]+", "_", (r.modules[0] or "model")).strip("_") or "model"
            stem = f"{base}_{r.op}" + (f"_b{r.batch}" if r.op == "bmm" else "") + f"_m{r.m}"
            name = stem
            i = 1
            while name in used:
                i += 1
                name = f"{stem}_{i}"
            used.add(name)
            ms = ranges[r.family_key]
            rows.append({"group": group, "name": name, "M": r.m, "N": r.n, "K": r.k, "dtype": r.dtype,
                         "layout_a": r.layout_a, "layout_b": r.layout_b, "op": r.op, "batch": r.batch,
                         "count": r.count,
                         "m_min": min(ms), "m_max": max(ms), "modules": ";".join(r.modules)})
        path.parent.mkdir(parents=True, exist_ok=True)
        buf = io.StringIO(newline="")
        w = csv.DictWriter(buf, fieldnames=SUITE_COLUMNS)
        w.writeheader()
        w.writerows(rows)
        write_atomic(path, buf.getvalue())
        return path

    def write_json(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        # Atomically, as write_suite: write_text truncated the file first, so an interrupted
        # write lost the capture it replaced, and a results store at the path was overwritten
        # (write_atomic refuses one by name).
        write_atomic(path, json.dumps({"passes": self.passes, "summary": self.summary(),
                                       "meta_attention_calls": self.meta_attention_calls,
                                       "records": [asdict(r) for r in self.records]}, indent=1) + "\n")
        return path


def int_at_least(v, low: int) -> bool:
    """Whether ``v`` is an integer (a bool is not, whatever its value) of at least ``low``: what a
    count or size argument takes, checked where it is given rather than where it is first used."""
    return not isinstance(v, bool) and hasattr(v, "__index__") and v.__index__() >= low


def _empty(r: Record) -> bool:
    """Whether a record's GEMM has an empty dimension (M, N or K 0: a pass of batch 0 or sequence
    0, Linear(0, n)). Such a row made the suite that ``write_suite`` wrote unreadable by
    ``gemmtune tune --suite`` ("M must be >= 1": the whole suite refused) and ``problems()``
    listed problems no tuner can time. (``hints()`` keeps them: ``tune_model`` names them.)"""
    return 0 in (r.m, r.n, r.k)


def unwrapped(model):
    """``model`` without the wrapper ``torch.compile(model)`` returns (an OptimizedModule, possibly
    nested), whose layers are all named ``_orig_mod.<name>`` and whose forward is not the model's:
    save_patched / load_patched name the model's own layers (an artifact loads into the model
    compiled or not), and ``cache_kwarg`` reads its own forward's signature. (torch._dynamo is
    not imported for this: a model it never wrapped is no OptimizedModule.)"""
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    while eval_frame is not None and isinstance(model, eval_frame.OptimizedModule):
        model = model._orig_mod
    return model


def cache_kwarg(model) -> str:
    """The keyword a HF causal LM's forward takes its KV cache by: ``cache`` from transformers
    5.2x on (``past_key_values`` still works there, with a FutureWarning on every run that says it
    goes in 5.40), ``past_key_values`` before. Read from the forward's signature of the model, or
    of the module a torch.compile wrapper holds.

    >>> class New(torch.nn.Module):
    ...     def forward(self, input_ids=None, cache=None, use_cache=None): ...
    >>> class Old(torch.nn.Module):
    ...     def forward(self, input_ids=None, past_key_values=None, use_cache=None): ...
    >>> cache_kwarg(New()), cache_kwarg(Old()), cache_kwarg(torch.nn.Identity())
    ('cache', 'past_key_values', 'past_key_values')
    """
    import inspect

    mod = unwrapped(model)
    try:
        params = inspect.signature(mod.forward).parameters
    except (TypeError, ValueError, AttributeError):
        return "past_key_values"
    return "cache" if "cache" in params and "past_key_values" not in params else "past_key_values"


def new_cache(model):
    """An empty transformers ``DynamicCache`` for ``model``'s forward, built from its config where
    DynamicCache takes one (transformers 5.x: one layer kind per model layer, as ``generate``
    makes it; a state-space layer's among them). An empty one without a config grows attention
    layers only: Mamba's forward raised IndexError on it (2026-11-29, transformers 5.24), while
    every attention model of tests/test_hf_archs gave the same logits with either."""
    import inspect

    from transformers import DynamicCache
    config = getattr(unwrapped(model), "config", None)
    try:
        takes_config = "config" in inspect.signature(DynamicCache.__init__).parameters
    except (TypeError, ValueError):
        takes_config = False
    return DynamicCache(config=config) if takes_config and config is not None else DynamicCache()


def capture_causal_lm(model: torch.nn.Module, *, batch: int = 1, seq: int = 32, decode_steps: int = 2,
                      seed: int = 0, progress=None) -> Capture:
    """Record an HF causal LM's GEMMs over one prefill of ``batch`` x ``seq`` random tokens and
    ``decode_steps`` greedy steps of one token each on its KV cache: each layer's M then
    ranges from ``batch`` (decode) to ``batch * seq`` (prefill), which ``write_suite`` records.
    ``progress(line)`` is called after each pass (e.g. ``print``).

    Example::

        >>> cap = capture_causal_lm(model, batch=1, seq=32, decode_steps=2)   # doctest: +SKIP
    """
    # Refused by name: batch or seq 0 raised from inside the model's attention ("cannot reshape
    # tensor of 0 elements..."), and decode_steps < 0 returned an empty capture with no word.
    for what, v, low in (("batch", batch, 1), ("seq", seq, 1), ("decode_steps", decode_steps, 0)):
        if not int_at_least(v, low):
            raise ValueError(f"capture_causal_lm: {what} must be an int >= {low}, got {v!r}")
    device = next(model.parameters()).device
    vocab = int(model.config.vocab_size)
    g = torch.Generator(device="cpu").manual_seed(seed)
    ids = torch.randint(0, vocab, (batch, seq), generator=g).to(device)
    cache, cap = new_cache(model), Capture()
    kw = cache_kwarg(model)
    state = {}

    def step(x):
        def run():
            state["next"] = model(input_ids=x, use_cache=True, **{kw: cache}).logits[:, -1:].argmax(-1)
        return run
    for i in range(decode_steps + 1):
        before = sum(r.count for r in cap.records)
        x = ids if i == 0 else state["next"]
        cap.run(model, fn=step(x))
        if progress is not None:
            what = f"prefill, M = {batch * seq}" if i == 0 else f"decode step {i}/{decode_steps}, M = {batch}"
            progress(f"pass {i + 1}/{decode_steps + 1} ({what}): "
                     f"{sum(r.count for r in cap.records) - before} GEMM calls")
    return cap


def capture(model: torch.nn.Module, *example_inputs, inputs: Iterable | None = None,
            fn=None) -> Capture:
    """Record the GEMMs of ``model(*example_inputs)`` (or of each input in ``inputs``: a tuple
    of positional arguments, a dict of keyword arguments or one tensor; or of ``fn()``).
    Returns a ``Capture``: ``records``, ``problems()``, ``hints()``, ``write_suite(path)``. See the module docstring for an example."""
    runs = example_passes(inputs) if inputs is not None else ([tuple(example_inputs)] if example_inputs else [])
    if not runs and fn is None:
        raise ValueError("capture needs example inputs (capture(model, x) or inputs=[(x1,), ...]) or fn=")
    return Capture().run(model, fn=fn, inputs=runs)
