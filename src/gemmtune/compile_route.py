"""Retired layers under torch.compile: their GEMM on their dispatcher, with no eager cost.

``gemmtune.nn.retire`` gives a converted layer whose eager calls all ran cuBLAS back to torch (its
class, its forward), so that an un-graphed step pays none of gemmtune's Python for it. Compiled,
such a layer traces as torch's ``F.linear`` (a Conv1D as ``torch.addmm``), which Inductor would
lower to its own GEMM: the tuned kernels of its dispatcher, which win in graphs where host time is
not paid, would be lost. So the retired layer's weight is registered here, and a pre-grad pass
(run by the pass ``fuse_compile.install`` puts in Inductor's ``pre_grad_custom_pass``) replaces
each such call with the ``gemmtune::mm`` op on the dispatcher: the graph a converted layer traces.

A call is routed only where the converted layer would have traced the op
(``nn.Linear._traced_to_torch``): the input and weight of the dispatcher's dtype, strided, on the
CPU or a GPU, a weight of the dispatcher's N and K, a bias of N elements or none, a dispatcher that
does not run cuBLAS everywhere (``nn.traces_as_torch``), and no autocast (in the graph, or around
the compile). Anything else stays torch's call: the same result, Inductor's GEMM.

The graph's weight is found by identity: dynamo lifts a module's parameters to graph inputs, whose
``grapharg`` holds the real tensor (``get_attr`` nodes where parameters are not lifted). A weight
replaced after retiring (``layer.weight = nn.Parameter(...)``) is not registered: torch's GEMM.

When: only in a compile whose steps replay from CUDA graphs (policy ``graphs``, the default). A
layer retires because, un-graphed, its step ran faster on torch's own cuBLAS call: the host time
of gemmtune's op (its Python around the launch) cost more than its kernel saved. An un-graphed
compiled step pays that host time too, and more of it shows, since Inductor's own calls are
cheaper than eager's: on an H200 (session 61) an un-graphed patch + compile of Llama-1B's decode
step at batch 1, its 81 retired layers routed, ran 0.59x plain torch.compile, while the same graph
replayed from CUDA graphs ran 1.085x max-autotune's. So a compile routes where Inductor's CUDA
graphs are on (``torch.compile(mode="reduce-overhead")`` or ``mode="max-autotune"``:
``torch._inductor.config.triton.cudagraphs``), or inside ``graphed()``, for a caller that captures
the compiled step into a CUDA graph itself (``torch.cuda.graph``, a serving engine's capture).
``set_policy("always")`` (or ``GEMMTUNE_COMPILE_ROUTE=always``) routes in every compile,
``"never"`` in none. The decision is made when a graph compiles: dynamo keeps the compiled code
for later calls (until ``torch._dynamo.reset()``), so set it before the first compiled call.

Inductor caches compiled graphs under a key that includes the pass's ``uuid``; what this pass does
to a graph depends on which weights are registered in this process and on whether it routes, so
the key includes that (``state``): a graph compiled with routes is never served to a model without
them, to a compile that does not route, or to another process.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import os

import torch
import torch.nn.functional as F
from torch.utils.weak import WeakIdKeyDictionary

from .fuse_compile import _named_args, _val

# weight -> Dispatcher. By identity: a tensor's == is elementwise, so a plain WeakKeyDictionary
# compared two live keys with it on a hash collision.
_ROUTED = WeakIdKeyDictionary()
_EPOCH = itertools.count(1)
_epoch = 0
# calls routed / registered calls left to torch (a call the op would not trace) / registered calls
# left to Inductor because the compile does not route (un-graphed, policy "graphs")
STATS = collections.Counter(routed=0, kept=0, ungraphed=0)
POLICIES = ("graphs", "always", "never")
POLICY_ENV = "GEMMTUNE_COMPILE_ROUTE"
_policy: str | None = None  # set_policy's; None: the environment's, else "graphs"
_graphed = 0  # graphed() contexts open


def policy() -> str:
    """The routing policy: ``set_policy``'s, else ``$GEMMTUNE_COMPILE_ROUTE``, else ``graphs``. A
    value of the environment that names no policy is a ValueError naming it."""
    if _policy is not None:
        return _policy
    env = os.environ.get(POLICY_ENV, "").strip().lower()
    if env and env not in POLICIES:
        raise ValueError(f"{POLICY_ENV}={os.environ[POLICY_ENV]!r}: give one of {', '.join(POLICIES)}")
    return env or "graphs"


def set_policy(value: str | None) -> None:
    """Route retired layers' GEMMs in compiles replayed from CUDA graphs (``graphs``, the default),
    in every compile (``always``) or in none (``never``); None goes back to the environment's."""
    global _policy
    if value is not None and value not in POLICIES:
        raise ValueError(f"compile_route policy {value!r}: give one of {', '.join(POLICIES)}")
    _policy = value


@contextlib.contextmanager
def graphed():
    """Compiles started inside replay from CUDA graphs the caller captures (``torch.cuda.graph``):
    under the ``graphs`` policy they route, as a compile with Inductor's CUDA graphs does. Only the
    compile counts: wrap the first call of the compiled model (and its warm-up), where dynamo and
    Inductor compile."""
    global _graphed
    _graphed += 1
    try:
        yield
    finally:
        _graphed -= 1


def routes_now() -> bool:
    """Whether a graph compiled now routes (the module doc says when)."""
    p = policy()
    if p != "graphs":
        return p == "always"
    if _graphed:
        return True
    from torch._inductor import config
    return bool(config.triton.cudagraphs)


def register(weight: torch.Tensor, dispatcher) -> None:
    """Route ``weight``'s GEMM (``F.linear(x, weight, b)``, or ``torch.addmm(b, x, weight)`` for a
    row-major dispatcher) to ``dispatcher`` in graphs Inductor compiles from now on."""
    global _epoch
    policy()  # a $GEMMTUNE_COMPILE_ROUTE that names no policy fails here, not inside a later compile
    _ROUTED[weight] = dispatcher
    _epoch = next(_EPOCH)


def unregister(weight: torch.Tensor) -> None:
    global _epoch
    if _ROUTED.pop(weight, None) is not None:
        _epoch = next(_EPOCH)


def state() -> str:
    """What the pass's output depends on beyond the graph: empty where nothing is registered (a
    graph then compiles, and is cached, as without gemmtune), else this process, the
    registrations' epoch and whether this compile routes."""
    if not len(_ROUTED):
        return ""
    return f"{os.getpid()}:{_epoch}:{'routes' if routes_now() else 'none'}"


def install() -> bool:
    """Put gemmtune's pre-grad pass (which routes, then merges fused groups) in Inductor's config."""
    from .fuse_compile import install as fuse_install
    return fuse_install()


def _routed_linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, handle: int) -> torch.Tensor:
    """``F.linear(x, w, b)`` on the dispatcher under ``handle``, as a converted Linear traces it
    (``nn.Linear._tuned``); traced by AOTAutograd from the pass's graph."""
    y = torch.ops.gemmtune.mm(x.reshape(-1, x.shape[-1]), w.t(), handle, b)
    return y.view(*x.shape[:-1], w.shape[0])


def _routed_addmm(b: torch.Tensor | None, a: torch.Tensor, w: torch.Tensor, handle: int) -> torch.Tensor:
    """``torch.addmm(b, a, w)`` (a Conv1D's ``x @ W + b``) on the dispatcher, as ``nn._conv1d_tuned``."""
    return torch.ops.gemmtune.mm(a, w, handle, b)


def _real(node, graph: torch.fx.Graph):
    """The real tensor behind a graph input: a lifted parameter's (``grapharg``), or a ``get_attr``'s."""
    if not isinstance(node, torch.fx.Node):
        return None
    if node.op == "placeholder":
        try:
            t = getattr(node.meta.get("grapharg"), "example", None)
        except Exception:  # noqa: BLE001 - a dead weak reference, a symbolic input: not a weight of ours
            return None
        return t if isinstance(t, torch.Tensor) else None
    if node.op == "get_attr" and graph.owning_module is not None:
        t = graph.owning_module
        try:
            for part in str(node.target).split("."):
                t = getattr(t, part)
        except AttributeError:
            return None
        return t if isinstance(t, torch.Tensor) else None
    return None


def _operands(node: torch.fx.Node):
    """(form, x, w, bias) of an ``F.linear`` or a plain ``torch.addmm`` call, else None."""
    if node.target is F.linear:
        names, form = ("input", "weight", "bias"), "linear"
    elif node.target is torch.addmm:
        names, form = ("input", "mat1", "mat2"), "addmm"
    else:
        return None
    vals = _named_args(node, names)
    # addmm's beta and alpha at 1 leave the product as it is; any other argument is not a GEMM of ours
    if form == "addmm" and any(vals.pop(k, 1) != 1 for k in ("beta", "alpha")):
        return None
    if len(node.args) > len(names) or not set(vals) <= set(names):
        return None
    if form == "linear":
        if "input" not in vals or "weight" not in vals:
            return None
        return form, vals["input"], vals["weight"], vals.get("bias")
    if len(vals) != 3:
        return None
    return form, vals["mat1"], vals["mat2"], vals["input"]


def _fits(form: str, d, xv, wv, bv) -> bool:
    """Whether a converted layer on ``d`` would have traced this call as the ``gemmtune::mm`` op."""
    from .nn import traces_as_torch

    dt = d.torch_dtype
    for v in (xv, wv):
        if not isinstance(v, torch.Tensor) or v.dtype != dt or v.layout is not torch.strided:
            return False
        if v.device.type not in ("cuda", "cpu"):
            return False
    if wv.dim() != 2 or xv.dim() < 1 or (form == "addmm" and xv.dim() != 2):
        return False
    n, k = (wv.shape[0], wv.shape[1]) if form == "linear" else (wv.shape[1], wv.shape[0])
    if (n, k) != (d.dims["n"], d.dims["k"]) or xv.shape[-1] != k:
        return False
    if bv is not None and (not isinstance(bv, torch.Tensor) or bv.dim() != 1 or bv.shape[0] != n
                           or bv.dtype != dt):
        return False
    if (form == "addmm") != (d.layout_b == "row"):
        return False
    return not traces_as_torch(d)


def _autocast(graph: torch.fx.Graph) -> bool:
    from .dispatch.common import _any_autocast
    if _any_autocast():
        return True
    return any(n.op == "call_function" and getattr(n.target, "__name__", "") in ("_enter_autocast", "_exit_autocast")
               for n in graph.nodes)


def route(graph: torch.fx.Graph) -> int:
    """Replace each registered weight's ``F.linear`` / ``torch.addmm`` in ``graph`` (dynamo's, before
    autograd) with its dispatcher's ``gemmtune::mm``; returns how many."""
    if not len(_ROUTED) or _autocast(graph):
        return 0
    from .torch_ops import REGISTRY

    routing = routes_now()
    done = 0
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        ops = _operands(node)
        if ops is None:
            continue
        form, x, w, b = ops
        real = _real(w, graph)
        d = _ROUTED.get(real) if real is not None else None
        if d is None:
            continue
        if b is not None and not isinstance(b, torch.fx.Node):
            STATS["kept"] += 1
            continue
        if not _fits(form, d, _val(x), _val(w), _val(b) if b is not None else None):
            STATS["kept"] += 1
            continue
        if not routing:
            STATS["ungraphed"] += 1
            continue
        handle = REGISTRY.register(d)
        with graph.inserting_before(node):
            if form == "linear":
                new = graph.call_function(_routed_linear, (x, w, b, handle))
            else:
                new = graph.call_function(_routed_addmm, (b, x, w, handle))
        new.meta.update({k: v for k, v in node.meta.items() if k in ("example_value", "val", "nn_module_stack",
                                                                     "stack_trace", "source_fn_stack")})
        node.replace_all_uses_with(new)
        graph.erase_node(node)
        done += 1
    STATS["routed"] += done
    return done


__all__ = ["register", "unregister", "route", "state", "install", "STATS"]
