"""Fused sibling Linears (``gemmtune.fuse_linears``) under ``torch.compile``: one GEMM in the graph.

In eager mode a fused group's members share one GEMM through a round protocol (``fuse.py``) that
checks, per call, the input's identity and version counter. dynamo cannot trace that check (a
version counter is an unbacked symbol to it), so until now a compiled model ran its members
unfused. This module fuses them in the compiled graph instead, where the check is a property of
the graph:

1. Traced, a member emits ``gemmtune::fused_member(x, w, b, fw, fb, start, size, handle)``: its own
   ``F.linear(x, w, b)`` (what the member computes, whatever happens next), tagged with the
   group's fused weight and bias, its rows in them (start, size) and the fused layer's dispatcher handle
   (-1: a plain ``nn.Linear``, cuBLAS or Inductor's own GEMM).
2. Inductor's pre-grad custom pass (``torch._inductor.config.pre_grad_custom_pass``, installed
   the first time a member is traced; a pass already there is kept and runs first) replaces the
   members that read one input node with one GEMM over the fused weight and a column slice each:
   ``F.linear(x, fw, fb)`` for a plain fused layer (Inductor lowers and, under max-autotune,
   tunes the fused shape), ``gemmtune::mm`` on the fused layer's dispatcher for a patched one
   (whose cuBLAS hand-back to Inductor, ``torch_ops.aten_to_inductor``, then applies to the
   fused shape; the M=1 hand-back, ``torch_ops.gemv_to_inductor``, by default does not apply in
   a graph that holds a merged group: the tuned GEMVs won there).
3. The pre-grad graph is not functional, so a group is merged only if no node between its
   first and last member may write memory (an in-place op, ``out=``, a ``setitem``, a
   submodule call, a higher-order op, a callable from outside torch): the input and the weights then hold the same
   values at every member, and the one GEMM at the first member computes what each would have.

Where the pass does not run (another backend than Inductor, ``backend="eager"`` or
``"aot_eager"``), each member op is its own ``F.linear``: the same work as unfused. Under
``torch.export`` the members are plain ``F.linear`` calls (an exported program needs no gemmtune).

Limits: the trace-time check that the members' parameters are views of the fused weight
(``_Group._fusable``, which re-fuses them if they were moved) is not a guard of the compiled
graph. A member parameter rebound after compiling with a tensor of the same shape, dtype and
device (``layer.weight.data = t``) is not seen by the fused GEMM until the model runs once
eagerly (which re-fuses) or ``torch.compiler.reset()``; in-place updates (``load_state_dict``,
optimizer steps, ``weight.mul_``) write into the fused tensor and are seen, and a
``load_state_dict`` that rebinds the parameters (``assign=True``, the swap_tensors flag) re-fuses
the group as it loads (once, when it has loaded every member it reaches: a load of a module
holding only part of a group re-fuses when that part is loaded). A member whose output
feeds a ``.view`` alone gets a ``.reshape`` there (the slice is strided; ``reshape`` is the
same view when one exists); with more users, a contiguous copy of its slice.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import inspect
import itertools
import operator
import os
import warnings
import weakref
from pathlib import Path

import torch
import torch.nn.functional as F

from .autograd import needs_grad
from .torch_ops import _LIB, check_devices

_LIB.define("fused_member(Tensor x, Tensor w, Tensor? b, Tensor fw, Tensor? fb, int start, int size, int handle) "
            "-> Tensor")


def _member_op(x, w, b, fw, fb, start, size, handle):
    return F.linear(x, w, b)


for _key in ("CPU", "CUDA"):
    _LIB.impl("fused_member", _member_op, _key)


@torch.library.register_fake("gemmtune::fused_member", lib=_LIB)
def _member_fake(x, w, b, fw, fb, start, size, handle):
    check_devices("fused_member", x, w=w, b=b, fw=fw, fb=fb)  # (it says why: this is the Meta kernel too)
    return x.new_empty((*x.shape[:-1], w.shape[0]))


# Groups by an id a traced graph can carry as a constant (dynamo cannot hand a _Group to a
# function it runs at trace time: torch 2.11 converts such arguments to Python constants).
_GROUPS: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_IDS = itertools.count()
# How many groups the pass merged, and how many it left unmerged because something between their
# members may write memory: read by tests and by whoever wants to know the pass ran. A Counter: a
# key a caller's STATS.clear() removed reads 0 (as a dict it made the next compile fail inside
# the pass, KeyError 'kept').
STATS = collections.Counter(merged=0, kept=0)  # (and "folded", "residuals" with the norm fold)


def register(group) -> int:
    gid = next(_IDS)
    _GROUPS[gid] = group
    return gid


def _trace_ok(gid: int) -> bool:
    """At trace time: whether group ``gid`` can be computed as one GEMM now (its members'
    parameters views of the fused tensor, re-fused if they were moved; no weight gradient),
    with the pass that merges its members installed."""
    g = _GROUPS.get(gid)
    if g is None or _exporting() or not g._fusable():
        return False
    return install()


# Run once by dynamo at trace time and baked into the graph (torch._dynamo.assume_constant_result
# sets this flag; importing torch._dynamo here would cost every import of gemmtune ~2 s).
_trace_ok._dynamo_marked_constant = True  # type: ignore[attr-defined]


def _handle(fused: torch.nn.Module, x: torch.Tensor) -> int:
    """The fused layer's dispatcher handle where its compiled forward would run the tuned op, else
    -1 (plain F.linear), by gemmtune.nn.Linear.forward's own rules under torch.compile."""
    from .nn import Linear
    if not isinstance(fused, Linear) or fused._traced_to_torch(x):
        return -1
    if x.dtype != fused.dispatcher.torch_dtype or fused.weight.dtype != x.dtype:
        return -1
    return fused._gemmtune_handle


def _exporting() -> bool:
    """torch.export (strict) traces through dynamo too: an exported program gets torch's own
    F.linear, not an op that needs gemmtune where it is loaded, and no Inductor pass merges it.
    Read as the flag itself, from ``_trace_ok`` (run for real at trace time): torch 2.11's dynamo
    folds a traced ``torch.compiler.is_exporting()`` to True under every torch.compile (2.13 reads
    the flag), which had left every fused group unmerged on the GPU machine."""
    return bool(getattr(torch.compiler, "_is_exporting_flag", False))


def member_forward(m: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """A fused group's member ``m`` traced by torch.compile (see the module docstring)."""
    g = m._gemmtune_group
    w, b = m.weight, m.bias
    if needs_grad(x, w, b):
        return F.linear(x, w, b)  # the op has no autograd formula; training runs unfused
    if (x.dim() == 0 or not (x.is_cuda or x.is_cpu) or torch.is_autocast_enabled(x.device.type)
            or not _trace_ok(g.gid)):
        # (the op has kernels for CPU and CUDA only; autocast would move where the cast happens)
        return F.linear(x, w, b)
    fused = g.fused
    i = m._gemmtune_index
    return torch.ops.gemmtune.fused_member(x, w, b, fused.weight, fused.bias, g.offsets[i], g.sizes[i],
                                           _handle(fused, x))


def _fused_rows(x: torch.Tensor, fw: torch.Tensor, fb: torch.Tensor | None, handle: int) -> torch.Tensor:
    """The group's one GEMM, as the pass puts it in the graph (traced by AOTAutograd from there)."""
    if handle < 0:
        return F.linear(x, fw, fb)
    y = torch.ops.gemmtune.mm(x.reshape(-1, x.shape[-1]), fw.t(), handle, fb)
    return y.view(*x.shape[:-1], fw.shape[0])


def _fused_rows_rms(x: torch.Tensor, g: torch.Tensor, eps: float, fw: torch.Tensor, fb: torch.Tensor | None,
                    handle: int) -> torch.Tensor:
    """The group's one GEMM with the RMSNorm before it folded in (gemmtune.normfold): ``x`` is the
    norm's input."""
    y = torch.ops.gemmtune.rms_mm(x.reshape(-1, x.shape[-1]), g, eps, fw.t(), handle, fb)
    return y.view(*x.shape[:-1], fw.shape[0])


def _is_mm(node) -> bool:
    op = torch.ops.gemmtune.mm
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target in (op, op.default)


def _val(node):
    return node.meta.get("example_value", node.meta.get("val")) if isinstance(node, torch.fx.Node) else None


def _take_residual(graph: torch.fx.Graph, h: torch.fx.Node) -> torch.fx.Node | None:
    """Where ``h``, a folded norm's input, is a residual sum ``r + y`` (either order) whose ``y`` is
    a patched layer's ``gemmtune::mm`` seen through one view (a decode step's o_proj or down_proj),
    give the sum to that op as its residual epilogue (its ``residual`` argument) and let the view
    stand for ``h``; returns the view, or None where ``h`` is anything else (left as it was).

    Why, with the fold only: Inductor fuses the add into the norm kernel after it; the fold takes
    the norm into the next GEMV, and left that kernel as the add alone (33 of them in Llama-1B's
    decode step, ~37 us of 1179, H200 session 43). Taken into the GEMM before it, the add is done in
    the strip's epilogue on its fp32 sums (one rounding where the model has two: the GEMM's output's,
    then the sum's). Where the dispatcher's choice for the shape is cuBLAS, it adds after the GEMM
    (dispatch.core), one kernel as before."""
    if h.op != "call_function" or h.target not in (operator.add, torch.add) or len(h.args) != 2 or h.kwargs:
        return None
    hv = _val(h)
    for i in (0, 1):
        view, r = h.args[i], h.args[1 - i]
        if not isinstance(view, torch.fx.Node) or not isinstance(r, torch.fx.Node) or len(view.users) != 1:
            continue
        mm = view.args[0] if view.args else None
        if not _is_mm(mm) or len(mm.users) != 1 or not _is_reshape(view):
            continue
        args = _named_args(mm, ("a", "b", "handle", "bias", "activation", "residual"))
        if args.get("activation", "none") != "none" or args.get("residual") is not None:
            continue
        rv, vv, mv = _val(r), _val(view), _val(mm)
        if not all(isinstance(t, torch.Tensor) for t in (hv, rv, vv, mv)):
            continue
        if not (rv.shape == vv.shape == hv.shape and rv.dtype == vv.dtype == hv.dtype and mv.dim() == 2
                and isinstance(mv.shape[1], int)):
            continue
        if not _readable_at(graph, r, mm, h):
            continue
        with graph.inserting_before(mm):
            r2 = graph.call_method("reshape", (r, -1, mv.shape[1]))
        mm.args = (args["a"], args["b"], args["handle"], args.get("bias"), "none", r2)
        mm.kwargs = {}
        h.replace_all_uses_with(view)
        graph.erase_node(h)
        STATS["residuals"] += 1
        return view
    return None


# What may stand between the GEMM and the residual sum: ops that keep the product's elements in
# row-major order (checked with equal shapes below), so that ``f(mm) + r == f(mm + r)`` for ``r``
# reshaped to the product's (M, N). Any other op there (``o_proj(x) * 2`` of a 2-D input, a
# ``relu``, a square ``.t()``) took the residual into the GEMM all the same: ``f(mm + r)``, a
# silently wrong sum.
_RESHAPE_METHODS = ("view", "reshape", "unflatten", "flatten")
_RESHAPE_FUNCTIONS = (torch.reshape, torch.flatten, torch.unflatten, torch.Tensor.view, torch.Tensor.reshape,
                      torch.Tensor.unflatten, torch.Tensor.flatten)


def _is_reshape(node: torch.fx.Node) -> bool:
    if node.op == "call_method":
        return node.target in _RESHAPE_METHODS
    return node.op == "call_function" and node.target in _RESHAPE_FUNCTIONS


def _readable_at(graph: torch.fx.Graph, r: torch.fx.Node, mm: torch.fx.Node, h: torch.fx.Node) -> bool:
    """Whether the residual ``r`` of the sum ``h`` may be read at ``mm`` instead (``_take_residual``
    moves the read there): ``r`` is computed before ``mm``, and no node between ``mm`` and ``h`` may
    write memory (the pre-grad graph is not functional: an in-place op there could change ``r``
    after the epilogue read it). Without this, a residual computed after the GEMM (``y = o(a);
    r = x * 2; h = y + r``) was read by a reshape inserted before its own definition: an invalid
    graph ("used before it has been defined")."""
    at = {n: i for i, n in enumerate(graph.nodes) if n is r or n is mm or n is h}
    return len(at) == 3 and at[r] < at[mm] < at[h] and not _written_between(graph, mm, h)


def _foldable(x: torch.fx.Node, members: list, handle: int):
    """The RMSNorm (normfold.NormMatch) whose output ``x`` only the group's ``members`` read, where
    the group is patched (``handle`` >= 0) and its M is statically 1 (a decode step: the one-row
    strip folds); else None."""
    from .normfold import only_read_by, rms_norm_input
    if handle < 0:
        return None
    shape = getattr(_val(x), "shape", None)
    if shape is None or not all(isinstance(s, int) for s in shape[:-1]):
        return None
    if int(torch.Size(shape[:-1]).numel()) != 1:
        return None
    norm = rms_norm_input(x)
    if norm is None or not only_read_by(x, members):
        return None
    # rms_mm takes a (K,) weight and gives x's shape: a weight that broadcasts otherwise ((1, 1, K))
    # was folded, and its norm came out 3-D into the 2-D GEMM (a ValueError at run time)
    xv, gv = _val(norm.x), _val(norm.weight)
    if (xv is not None and tuple(xv.shape) != tuple(shape)) or (gv is not None and tuple(gv.shape) != (shape[-1],)):
        return None
    return norm


_INPLACE_OPERATORS = {getattr(operator, n) for n in (
    "iadd", "iand", "iconcat", "ifloordiv", "ilshift", "imod", "imul", "imatmul", "ior", "ipow", "irshift",
    "isub", "itruediv", "ixor", "setitem", "delitem")}
_SAFE_MODULES = ("torch", "_operator", "operator", "builtins", "math")


@functools.lru_cache(maxsize=None)
def _inplace_at(target) -> int | None:
    """The position of ``target``'s ``inplace`` parameter (``F.relu(x, inplace)``), or None."""
    try:
        params = list(inspect.signature(target).parameters)
    except (TypeError, ValueError):  # a builtin without a signature
        return None
    return params.index("inplace") if "inplace" in params else None


def _inplace_positional(node: torch.fx.Node) -> bool:
    """Whether a call passes ``inplace`` positionally as anything but False (``F.relu(h, True)``,
    ``F.dropout(h, p, training, True)``; a traced value counts as True). ``_writes`` read the
    keyword alone: such a call between two members was taken as pure, the members merged, and the
    later one read the input as it was before the write (a compiled model's silently wrong result)."""
    try:
        i = _inplace_at(node.target)
    except TypeError:  # an unhashable target
        return True
    return i is not None and len(node.args) > i and node.args[i] is not False


def _writes(node: torch.fx.Node) -> bool:
    """Whether ``node`` may write memory (conservatively: True for anything not known to be pure)."""
    if node.op in ("placeholder", "get_attr", "output"):
        return False
    if node.op == "call_module" or "out" in node.kwargs or node.kwargs.get("inplace") is True:
        return True
    if node.op == "call_function" and _inplace_positional(node):
        return True
    t = node.target
    if node.op == "call_method":
        return t.endswith("_") and not t.endswith("__") or t in ("__setitem__", "__delitem__")
    if t in _INPLACE_OPERATORS or isinstance(t, torch._ops.HigherOrderOperator):
        return True  # (a higher-order op runs a subgraph or a user's Triton kernel, which may write)
    name = getattr(t, "__name__", "")
    if name.endswith("_") and not name.endswith("__"):
        return True
    if isinstance(t, torch._ops.OpOverloadPacket):
        # the out= overloads are taken only with an out= argument, checked above
        schemas = [getattr(t, o)._schema for o in t.overloads() if "out" not in o]
    elif isinstance(t, torch._ops.OpOverload):
        schemas = [t._schema]
    else:
        mod = getattr(t, "__module__", None) or ""
        return mod.split(".")[0] not in _SAFE_MODULES
    return any(a.alias_info is not None and a.alias_info.is_write for s in schemas for a in s.arguments)


def _named_args(node: torch.fx.Node, names: tuple) -> dict:
    """``node``'s arguments by name (``names``: the op's parameters in order), positional or keyword."""
    vals = dict(zip(names, node.args))
    vals.update(node.kwargs)
    return vals


def _member_args(node: torch.fx.Node):
    names = ("x", "w", "b", "fw", "fb", "start", "size", "handle")
    vals = _named_args(node, names)
    return [vals.get(n) for n in names]


def _is_member(node: torch.fx.Node) -> bool:
    op = torch.ops.gemmtune.fused_member
    return node.op == "call_function" and node.target in (op, op.default)


# A view op and the reshape that is the same view wherever one exists. ``view_as`` fails on the
# strided slice as ``view`` does: it was left as it was, and a merged member read by
# ``q.view_as(t)`` that merges dims failed at run time (eager: a contiguous output).
_VIEW_TO_RESHAPE = {"view": "reshape", "view_as": "reshape_as",
                    torch.Tensor.view: torch.Tensor.reshape, torch.Tensor.view_as: torch.Tensor.reshape_as}


def _is_view(node: torch.fx.Node) -> bool:
    if node.op not in ("call_method", "call_function") or node.target not in _VIEW_TO_RESHAPE:
        return False
    # ``.view(dtype)`` reinterprets the bits (it takes the strided slice: its last dim is dense); made a
    # reshape it was reshape(dtype), a TypeError
    return not any(isinstance(a, torch.dtype) for a in (*node.args[1:], *node.kwargs.values()))


def _plan(graph: torch.fx.Graph) -> tuple[list, int]:
    """The sets of member nodes to merge, each (x, fw, fb, handle, [(node, start, size)]), and how
    many sets were kept apart: read only, so that a surprise leaves the graph as it was."""
    nodes = list(graph.nodes)
    pos = {n: i for i, n in enumerate(nodes)}
    sets: dict[tuple, list] = {}
    for n in nodes:
        if _is_member(n):
            x, _, _, fw, fb, start, size, h = _member_args(n)
            if not (isinstance(start, int) and isinstance(size, int) and isinstance(h, int)):
                continue  # (dynamo passes them as constants; anything else is left alone)
            members = sets.setdefault((x, fw, fb, h), [])
            if any((start, size) == (s0, z0) for _, s0, z0 in members):
                # One member called again on the same input: merged, both calls became views of the
                # same columns, and an in-place op on one output changed the other (session 45's CPU
                # hunt). The repeat is left as it is: it computes its own slice.
                continue
            members.append((n, start, size))
    plan, kept = [], 0
    for (x, fw, fb, h), members in sets.items():
        if len(members) < 2:
            continue
        if any(_writes(n) for n in nodes[pos[members[0][0]] + 1:pos[members[-1][0]]]):
            kept += 1
            continue
        plan.append((x, fw, fb, h, members))
    return plan, kept


def _written_between(graph: torch.fx.Graph, first: torch.fx.Node, last: torch.fx.Node) -> bool:
    """Whether a node strictly between ``first`` and ``last`` (in graph order) may write memory."""
    inside = False
    for n in graph.nodes:
        if n is last:
            return False
        if inside and _writes(n):
            return True
        inside = inside or n is first
    return False


def merge(graph: torch.fx.Graph) -> int:
    """Replace each set of ``gemmtune::fused_member`` nodes that read one input with one GEMM and
    their slices (the module docstring says when). Returns the number of sets merged. Tells
    ``torch_ops.note_graph_fused`` whether it merged any: the M=1 hand-back's default differs
    in such a graph."""
    from .torch_ops import note_graph_fused
    note_graph_fused(False)
    try:
        plan, kept = _plan(graph)
    except Exception as e:  # noqa: BLE001 - a pass must not fail the user's compile: unmerged is correct
        warnings.warn(f"gemmtune.fuse_compile: fused groups left unmerged in this graph ({type(e).__name__}: {e})",
                      RuntimeWarning, stacklevel=2)
        return 0
    note_graph_fused(bool(plan))
    STATS["kept"] += kept
    fold = os.environ.get("GEMMTUNE_FOLD_NORMS", "0") == "1"  # work in progress (gemmtune.normfold)
    for x, fw, fb, h, members in plan:
        norm = _foldable(x, [m for m, _, _ in members], h) if fold else None
        if norm is not None and _written_between(graph, norm.nodes[0], members[0][0]):
            # The folded GEMM reads the norm's input at the first member, not where the norm read it:
            # an in-place write in between (hs.add_(1)) was folded into the norm. The norm stays.
            norm = None
        with graph.inserting_before(members[0][0]):
            if norm is not None:
                norm_x = _take_residual(graph, norm.x) or norm.x
                rows = graph.call_function(_fused_rows_rms, (norm_x, norm.weight, norm.eps, fw, fb, h))
            else:
                rows = graph.call_function(_fused_rows, (x, fw, fb, h))
        for m, start, size in members:
            with graph.inserting_before(m):
                out = graph.call_function(torch.narrow, (rows, -1, start, size))
                users = list(m.users)
                if len(users) > 1 and any(_is_view(u) for u in users):
                    out = graph.call_method("contiguous", (out,))
            m.replace_all_uses_with(out)
            if len(users) == 1 and _is_view(users[0]):
                # the slice is strided by the group's width: .view fails where it would merge the
                # last dim; reshape is that same view wherever one exists
                users[0].target = _VIEW_TO_RESHAPE[users[0].target]
            graph.erase_node(m)
        if norm is not None:  # the norm's chain and dynamo's probes of its output: nothing reads them now
            for n in [u for u in x.users if not u.users] + list(reversed(norm.nodes)):
                if not n.users:
                    graph.erase_node(n)
            STATS["folded"] += 1
    STATS["merged"] += len(plan)
    return len(plan)


def _uuid() -> str:
    # this module and compile_route's: the pass runs both (routing first)
    from . import compile_route
    return hashlib.sha256(Path(__file__).read_bytes() + Path(compile_route.__file__).read_bytes()).hexdigest()


def _pass_class() -> type:
    """``MergeFusedMembers``: gemmtune's pre-grad pass class, made on first use (importing
    Inductor's ``CustomGraphPass`` takes ~1 s, which a model that never compiles should not pay)
    and kept as this module's attribute of that name, so that it pickles by reference. Inductor's
    cache keys pickle the pass configured: with torch 2.11, a class local to a function failed
    there ("Can't pickle local object"; H200, 2026-11-30, bench-model's compile of a patched,
    fused model) and the key was dropped."""
    cls = globals().get("MergeFusedMembers")
    if cls is not None:
        return cls
    from torch._inductor.custom_graph_pass import CustomGraphPass

    class MergeFusedMembers(CustomGraphPass):
        """gemmtune's pre-grad pass (``compile_route.route``, then ``merge``), after the pass(es) that
        were configured before."""

        gemmtune = True

        def __init__(self, prior):
            self.prior = prior

        def _priors(self):
            p = self.prior
            return [] if p is None else list(p) if isinstance(p, (list, tuple)) else [p]

        def __call__(self, graph: torch.fx.Graph) -> None:
            from . import compile_route
            for p in self._priors():
                p(graph)
            compile_route.route(graph)
            merge(graph)

        def uuid(self):
            # GEMMTUNE_FOLD_NORMS changes what the pass makes of a graph: a graph cached with the
            # fold (or without it) must not be given to a process with the other setting.
            # And which retired layers' weights are routed in this process (compile_route.state says why).
            from . import compile_route
            parts = [_uuid(), "fold=" + os.environ.get("GEMMTUNE_FOLD_NORMS", "0"), "route=" + compile_route.state()]
            for p in self._priors():
                u = p.uuid() if hasattr(p, "uuid") else None
                if u is None:
                    return None  # an unhashable prior: Inductor then runs the passes before its cache
                parts.append(repr(u))
            return hashlib.sha256("|".join(parts).encode()).hexdigest()

    MergeFusedMembers.__qualname__ = "MergeFusedMembers"
    MergeFusedMembers.__module__ = __name__
    globals()["MergeFusedMembers"] = MergeFusedMembers
    return MergeFusedMembers


def __getattr__(name: str):
    # pickle finds the pass class as gemmtune.fuse_compile.MergeFusedMembers also in a process
    # that has not made it yet (an unpickled cache entry, say)
    if name == "MergeFusedMembers":
        return _pass_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _make_pass(prior):
    return _pass_class()(prior)


def install() -> bool:
    """Put the merging pass in Inductor's ``pre_grad_custom_pass`` (once; a pass set before is
    kept and runs first). False where this torch has no Inductor."""
    try:
        from torch._inductor import config
    except ImportError:
        return False
    from .torch_ops import register_inductor_gemv

    # gemmtune::mm's hand-back to Inductor (M=1 under coordinate descent, cuBLAS at static sizes)
    # is registered by that op's fake kernel, which dynamo runs while tracing a patched layer; here
    # the op appears only in the pass's output, traced by AOTAutograd after its decomposition
    # table was read: so register it now.
    register_inductor_gemv()
    current = config.pre_grad_custom_pass
    if getattr(current, "gemmtune", False):
        return True
    config.pre_grad_custom_pass = _make_pass(current)
    return True


__all__ = ["member_forward", "merge", "install", "STATS"]
