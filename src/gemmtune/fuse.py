"""Sibling ``nn.Linear`` layers that read the same input, run as one GEMM (inference).

A Llama-style block projects one normalised input three times (``q_proj``, ``k_proj``,
``v_proj``) and its MLP twice (``gate_proj``, ``up_proj``). At decode each of these is a
memory-bound GEMV of a few MB whose time is mostly a kernel's fixed cost (launch, ramp-up,
tail), and each is one more launch on the host. One GEMM over the concatenated weights reads the
same bytes in one kernel. ``fuse_linears`` finds such siblings by running the model, then:

- concatenates each group's weights (and biases) into one tensor, and makes every member's
  parameter a view into it, so no weight memory is added and ``state_dict``, ``load_state_dict``
  and optimizers see the members' own names and values, as before;
- registers one plain ``nn.Linear`` over that tensor beside the first member (its weight a
  non-persistent buffer, so ``state_dict`` and ``parameters()`` are unchanged), or, where the
  first member's parent is a ModuleList, ModuleDict or Sequential, in the nearest module above
  that is not one (a forward iterates a container's children). ``patch`` and ``tune_model`` see it
  as one more layer, and tune its shape. So does code that walks ``model.modules()``: one that
  updates every ``nn.Linear``'s weight in place (``l.weight.mul_(s)``) updates the members'
  weights twice, through them and through the fused layer's tensor (``unfuse`` before it);
- makes each member return its slice of that one output: the first member called on an input
  computes the fused GEMM, the others take their slice if they are called on the very same
  tensor (identity, and its version counter where torch keeps one).

A member falls back to its own ``F.linear``, and stays correct, whenever the fused output does
not apply: another input tensor, the input modified in place since, a member called twice on one
input, an input of a tensor subclass (FakeTensor, DTensor, ...), gradients needed for the
weights, a forward traced by ``torch.compile`` (dynamo would have to trace the shared state,
and a compiled graph could not see weights rebound after it was made: the layers run unfused
there), weights no longer views of the fused tensor (``model.to(...)``, ``param.data = ...``,
``layer.weight = Parameter(t)``: the group is re-fused on its next call, or runs unfused inside a
CUDA-graph capture), or other tensors in the members' places for a call
(``torch.func.functional_call``: the members run unfused with them, and the group is not
re-fused onto tensors it does not own).

Each member's output is a column slice of the fused output: a view whose rows are strided by the
group's total width (a copy of its own where grad mode is on and the output needs no gradient, so
that a tensor needing one may update it in place, as an unfused layer's). Splitting its last
dimension (``.view(B, S, heads, head_dim)``) and merging its leading ones work as on a contiguous
output; a ``.view`` that merges the last dimension with
another fails, and ``unfuse`` undoes the fusion. Save with ``torch.save`` (shared storage is
kept); ``safetensors`` refuses tensors that share memory, so ``unfuse`` before
``save_pretrained``. ``copy.deepcopy`` clones each parameter on its own, so a copy holds its
fused layers' weights twice until its first call re-fuses them. Fuse before ``patch`` (patch converts the fused layer like any other);
``save_patched(path, model)`` records the groups by name, and ``load_patched`` re-fuses them in a
new process (``fuse_linears(model, groups=...)``).

A member is served the round's slice only if nothing it depends on changed since the round
began: its own weight and bias (the same parameters, at the same place, at the same version
counters), the input's storage and requires_grad, and the grad, inference and autocast modes.
Two changes leave no trace to check: an in-place change of the input under
``torch.inference_mode`` (torch keeps no version counter there), and one made through
``x.data`` (its alias has a counter of its own). Models do neither between sibling projections
(each reads the input as it is), but those are the things this relies on.

Example::

    >>> import torch, gemmtune
    >>> class Attn(torch.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.q, self.k, self.v = (torch.nn.Linear(16, n, bias=False) for n in (16, 8, 8))
    ...     def forward(self, x):
    ...         return self.q(x).sum(-1) + self.k(x).sum(-1) * self.v(x).sum(-1)
    >>> m = Attn(); x = torch.randn(3, 16)
    >>> with torch.no_grad():
    ...     ref = m(x)
    ...     groups = gemmtune.fuse_linears(m, x)
    ...     torch.testing.assert_close(m(x), ref)
    >>> groups
    [FusedGroup(fused='gemmtune_fused_q_k_v', members=('q', 'k', 'v'), n=(16, 8, 8), k=16)]
    >>> sorted(m.state_dict()) == ['k.weight', 'q.weight', 'v.weight']
    True
    >>> gemmtune.unfuse(m), type(m.q).__name__
    (1, 'Linear')
"""

from __future__ import annotations

import re
import threading
import warnings
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import torch
import torch.nn.functional as F
from torch.nn.utils import parametrize

from . import fuse_compile
from .capture import _call, example_passes
from .nn import _is_compiling, _transformed

_autocast = getattr(torch._C, "_is_any_autocast_enabled", None) or (lambda: torch.is_autocast_enabled())
# Held while a group is re-fused (``_Group.refuse``, and ``_fusable``'s check before it). A re-fuse
# rebinds the fused weight, then each member's, then records them: two threads re-fusing one group
# at once (the first calls of a model copied, moved or reloaded, made from a server's threads)
# interleaved those steps and could leave the fused layer reading one new tensor and the members
# viewing another, a state ``_intact`` accepts, so the fused GEMM then kept missing every later
# in-place update of the members' weights (load_state_dict, w.mul_). One lock for all groups: a
# re-fuse is rare, and the lock is not taken where the group is intact (every other call).
_REFUSE_LOCK = threading.RLock()


@dataclass(frozen=True)
class FusedGroup:
    """One fused group: the registered layer's name (under the first member's parent, or the
    nearest module above it that is not a container), the
    members' names in call order, their out_features and the shared in_features."""

    fused: str
    members: tuple[str, ...]
    n: tuple[int, ...]
    k: int


class _Group:
    """A group's fused layer, members and the output of its current round (see module docstring)."""

    def __init__(self, fused: torch.nn.Linear, members: list[torch.nn.Linear], sizes: list[int]):
        self.fused = fused
        self.members = members
        self.sizes = sizes
        self.offsets = [sum(sizes[:i]) for i in range(len(sizes))]
        # The members a round started by member i still has to serve (a copy of this a round:
        # faster than building the set from a range, on a path that is host time)
        self.rest = [frozenset(j for j in range(len(sizes)) if j != i) for i in range(len(sizes))]
        self.round: _Round | None = None
        # The load_state_dict under way (its error list, one object for the whole load) and the
        # members it has loaded: ``loaded`` re-fuses once it has loaded them all.
        self.loading: tuple[list, set[int]] | None = None
        self.gid = fuse_compile.register(self)  # how a traced member names its group

    def take(self, i: int, x: torch.Tensor) -> torch.Tensor:
        # The round is read once into a local: a thread that starts another round meanwhile
        # replaces self.round, not the object this call checks and reads.
        r = self.round
        if (r is not None and x is r.x and i in r.pending and (r.xv is None or x._version == r.xv)
                and r.state == self._state(x) and self._served(i, r) and not (r.spent and r.spent[0])):
            # The claim is one set operation, not a check and then a write: two threads calling one
            # member on one input tensor both passed the check and both got the same tensor object,
            # so an in-place op by one caller on its output (q.mul_(scale)) changed the other's.
            try:
                r.pending.remove(i)
            except KeyError:
                pass  # another thread took this slice since the check: this call computes its own below
            else:
                if not r.pending and self.round is r:
                    self.round = None  # nothing of the round kept alive past its last member
                return r.outs[i]
        m = self.members[i]
        # A tensor subclass (a FakeTensor under export, a DTensor, a quantised tensor), a sparse
        # input, or a torch.func transform / forward-mode AD (vmap's inputs have no storage to point
        # at), runs the member's own F.linear: the fused path reads data pointers and version counters.
        pv = None
        if type(x) is torch.Tensor and x.layout is torch.strided and not _transformed():
            pv = self._fusable_versions()
        if pv is None:
            self.round = None
            return F.linear(x, m.weight, m.bias)
        # forward, not __call__, unless the fused layer has hooks (capture names the GEMM after
        # it through them), and split_with_sizes, not split: 1.5 us and 1.2 us of host time a
        # round less on the CPU machine (an un-graphed decode step is host time).
        f = self.fused
        if f._forward_pre_hooks or f._forward_hooks:
            y = f(x)
        elif type(f) is torch.nn.Linear:
            # Unpatched: its tensors are self.w and self.b (_fusable checked them just now), so
            # F.linear on them, not nn.Linear.forward, whose self.weight / self.bias are buffers
            # here, each found by nn.Module.__getattr__ after a miss in _parameters: 2.6 us a
            # round less on the 2-core CPU machine (5.6 against 3.0 us, 2026-11-29).
            y = F.linear(x, self.w, self.b)
        else:
            y = f.forward(x)  # patched: its own eager path (the tuned kernel or F.linear)
        spent = None
        if y.requires_grad:  # single-output views: a caller may modify its slice in place, as on F.linear's
            outs = tuple(y.narrow(-1, o, n) for o, n in zip(self.offsets, self.sizes))
            spent = [False] if y.grad_fn is not None else None
        elif torch.is_grad_enabled():
            # Grad mode on, y needing no gradient (frozen weights, an input without one): views of
            # y could not be modified in place by a tensor that needs a gradient (``q += lora(x)``,
            # ``k.mul_(scale)``), where each unfused layer's output could: split_with_sizes' views
            # raised "the output of a function that returns multiple views", and narrow's, once a
            # sibling's slice had been so modified, "a leaf Variable that requires grad is being
            # used in an in-place operation". Each member gets a tensor of its own: one copy of the
            # output. Under no_grad and inference_mode (the usual inference) the views below serve.
            outs = tuple(t.clone() for t in y.split_with_sizes(self.sizes, -1))
        else:
            outs = y.split_with_sizes(self.sizes, -1)
        r = _Round(x, None if x.is_inference() else x._version, outs, set(self.rest[i]), self._state(x), pv, spent)
        if spent is not None:
            y.grad_fn.register_prehook(_backward_check(spent, [p for _, p, _ in self.wparams], r.pending))
        self.round = r
        return outs[i]

    @staticmethod
    def _state(x: torch.Tensor) -> tuple:
        """What a round's output depends on beside the input's identity and version and the
        members' parameters (``_served``): the input's storage (``x.data = t`` bumps no version)
        and requires_grad, and the grad, inference and autocast modes it was computed under. Five
        C calls: this is read at the start of a round and at each member it serves."""
        return (x.data_ptr(), x.requires_grad, torch.is_grad_enabled(), torch.is_inference_mode_enabled(),
                _autocast())

    def _versions(self) -> tuple:
        """The members' parameters' version counters: ``param.data = view`` gives a parameter its
        own, so an in-place update through it (an optimizer step, load_state_dict) is not counted
        on the fused tensor's."""
        return tuple(p._version for _, p, _ in self.wparams) + tuple(p._version for _, p, _ in self.bparams)

    def _served(self, i: int, r: _Round) -> bool:
        """Member ``i``'s weight (and bias) still the view the round's output was computed with,
        not updated in place since, and needing no gradient where autograd records."""
        m, p, ptr = self.wparams[i]
        if m._parameters.get("weight") is not p or p.data_ptr() != ptr or p._version != r.pv[i]:
            return False
        bp = None
        if self.bparams:
            m, bp, ptr = self.bparams[i]
            if m._parameters.get("bias") is not bp or bp.data_ptr() != ptr or bp._version != r.pv[len(self.wparams) + i]:
                return False
        return not torch.is_grad_enabled() or not (p.requires_grad or (bp is not None and bp.requires_grad))

    def _fusable(self) -> bool:
        """Whether the fused layer computes what the members would, now: no weight gradient to
        route (the fused weight is a buffer), and every member's weight (and bias) still the view
        into the fused tensor it was made (else re-fused here, outside a CUDA-graph capture)."""
        return self._fusable_versions() is not None

    def _fusable_versions(self) -> tuple | None:
        """The members' parameters' version counters (``_versions``) where the group is fusable
        now (``_fusable``), else None. A round's start needs both: one pass over the parameters
        reads them (``_intact_versions``), 0.5 us a round less on the 2-core CPU machine."""
        if torch.is_grad_enabled() and any(p.requires_grad for m in self.members for p in _params(m)):
            return None  # (not read with gradients off: inference's usual state)
        pv = self._intact_versions()
        if pv is not None:
            return pv
        if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
            return None  # no allocation and rebinding inside a capture: unfused, still correct
        return self._versions() if self._mend() else None

    def _mend(self) -> bool:
        """Re-fuse the group unless it is intact: True where it is intact after, False where the
        members cannot be re-fused (``_refusable``). The check is made again under
        ``_REFUSE_LOCK``: another thread may have re-fused it while this one waited."""
        if self._intact():
            return True
        with _REFUSE_LOCK:
            if self._intact() or self._moved():
                return True
            if not self._refusable():
                return False  # a member's weight of another shape, dtype or device, replaced or parametrized
            self.refuse()
        return True

    def _moved(self) -> bool:
        """Whether the fused tensors' storage moved with every member's parameter still its view at
        its place (``model.share_memory()``: share_memory_ moves a storage in place, to new
        addresses), and if so record the new addresses (no copy). Re-fused instead, the members were
        copied into a new private tensor: the model's sharing silently undone at its next call.
        ``_intact_versions`` reads only the recorded addresses (host time per round): this runs
        where they no longer match."""
        fb, w, b = self.fused._buffers, self.w, self.b
        if w is None:
            # A copy (``__getstate__`` drops the record): its members may still be views of its
            # fused tensor, as pickled with it (torch.multiprocessing sends a shared model to a
            # worker so, torch.save keeps shared storage): re-fused, a worker's model was a private
            # copy that no longer saw the shared weights. (A deepcopy's parameters are clones of
            # their own, no such views: re-fused.)
            w = fb.get("weight")
        if (not isinstance(w, torch.Tensor) or fb.get("weight") is not w or w.shape != (sum(self.sizes), self.fused.in_features)
                or not w.is_contiguous() or (b is not None and (fb.get("bias") is not b or not b.is_contiguous()))):
            return False
        if b is None and any(m._parameters.get("bias") is not None for m in self.members):
            return False
        k, es = w.shape[1], w.element_size()
        for (m, p, _), off, n in zip(self.wparams, self.offsets, self.sizes):
            # w is alive: a parameter starting inside it, of its dtype and layout, is its view
            if (m._parameters.get("weight") is not p or p.dtype != w.dtype or p.shape != (n, k)
                    or p.stride() != w.stride() or p.data_ptr() != w.data_ptr() + off * k * es):
                return False
        for (m, p, _), off, n in zip(self.bparams, self.offsets, self.sizes):
            if (m._parameters.get("bias") is not p or p.dtype != b.dtype or p.shape != (n,)
                    or p.data_ptr() != b.data_ptr() + off * es):
                return False
        self.w = w
        self.wparams = [(m, p, p.data_ptr()) for m, p, _ in self.wparams]
        self.bparams = [(m, p, p.data_ptr()) for m, p, _ in self.bparams]
        self.round = None
        return True

    def _refusable(self) -> bool:
        """Every member's weight (and bias) a Parameter of its own (not parametrized, pruned or
        swapped for a plain or batched tensor by ``torch.func``), of the shape, dtype and device the
        group was made for: else ``refuse`` would cut, cast or rebind the caller's tensors.

        Of its own: the very parameter recorded at the last re-fuse, or one the member registered
        since (``adopt``). ``torch.func.functional_call`` writes other Parameters into the members'
        ``_parameters`` for one call and puts the model's back after it: re-fused onto them, the
        group copied them into a new fused tensor, rebound the caller's tensors into it, and the
        fused layer (what a compiled graph reads) kept computing with them after the call. The
        members run unfused with them instead, and the model is as it was after the call."""
        w0 = self.members[0]._parameters.get("weight")
        if not isinstance(w0, torch.nn.Parameter):
            return False
        k, dt, dev = self.fused.in_features, w0.dtype, w0.device
        # One Parameter in two members' places (``k.weight = q.weight`` after fusing): a re-fuse
        # copies it into both slices and leaves it a view of the last, so the other member's slice
        # of the fused GEMM was a stale copy that missed every later update of the shared weight.
        # Such members run unfused (tied weights are left out at fusion for the same reason).
        ps = [p for m in self.members for p in m._parameters.values() if p is not None]
        if len({id(p) for p in ps}) != len(ps):
            return False
        for i, (m, n) in enumerate(zip(self.members, self.sizes)):
            w, b = m._parameters.get("weight"), m._parameters.get("bias")
            if type(w) is not torch.nn.Parameter or w.shape != (n, k) or w.dtype != dt or w.device != dev:
                return False
            if w is not self.wparams[i][1] or (self.bparams and b is not self.bparams[i][1]):
                return False  # put there for a call (functional_call), not by the member
            if (self.b is not None) != ("bias" in m._parameters and b is not None):
                return False
            if b is not None and (type(b) is not torch.nn.Parameter or b.shape != (n,) or b.dtype != dt
                                  or b.device != dev):
                return False
        return True

    def _intact(self) -> bool:
        """Every member's weight (and bias) still the parameter ``refuse`` made a view into the
        fused tensor, at its place there (``_intact_versions``)."""
        return self._intact_versions() is not None

    def _intact_versions(self) -> tuple | None:
        """The members' parameters' version counters, in ``_versions``' order, where the group
        is intact (``_intact``), else None. This runs once per round (~100 rounds a decode step
        of a small model, whose un-graphed step is host time), so it reads the module
        dictionaries and data pointers directly: through ``m.weight`` and ``.shape`` it took
        3.8 us a round of three on the 2-core CPU machine. The fused tensor is alive, so a
        parameter whose data starts where a view of it would is that view."""
        fb = self.fused._buffers
        if self.w is None or fb.get("weight") is not self.w or (self.b is not None and fb.get("bias") is not self.b):
            return None
        pv = []
        for m, p, ptr in self.wparams:
            if m._parameters.get("weight") is not p or p.data_ptr() != ptr:
                return None
            pv.append(p._version)
        for m, p, ptr in self.bparams:
            if m._parameters.get("bias") is not p or p.data_ptr() != ptr:
                return None
            pv.append(p._version)
        # (a member whose bias was removed keeps a bparams entry: None is not p above)
        if self.b is None and any(m._parameters.get("bias") is not None for m in self.members):
            return None
        return tuple(pv)

    def __getstate__(self) -> dict:
        # A copy (deepcopy, pickle) drops the pending round (it may hold non-leaf tensors, and an
        # input no caller of the copy has) and the data pointers, which name the original's memory:
        # the copy is re-fused on its first call, or, where its members are still views of its
        # fused tensor (torch.load, torch.multiprocessing), only records their addresses (_moved).
        state = self.__dict__.copy()
        state["round"], state["w"], state["loading"] = None, None, None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if "rest" not in state:  # saved by a gemmtune before 2026-11-29, which had no such list
            n = len(self.sizes)
            self.rest = [frozenset(j for j in range(n) if j != i) for i in range(n)]
        self.gid = fuse_compile.register(self)  # a copy is a group of its own to a traced graph

    def adopt(self, i: int) -> None:
        """Record member ``i``'s current weight and bias as its own, where the member put them
        there itself (``FusedLinear.register_parameter``, ``_apply``): the next call re-fuses the
        group onto them (``_refusable``), unless they already lie where the fused tensor's views
        did (``_intact``). The pending round is dropped: it was computed with the parameters
        replaced, whose version counters were another tensor's."""
        with _REFUSE_LOCK:
            m = self.members[i]
            w, b = m._parameters.get("weight"), m._parameters.get("bias")
            # A parameter removed (``layer.bias = None``) keeps its record: the member no longer
            # matches it, and the group runs unfused (``_intact``, ``_refusable``).
            if w is not None:
                wparams = list(self.wparams)  # a new list: a call reading the old one meanwhile sees it whole
                wparams[i] = (m, w, wparams[i][2])
                self.wparams = wparams
            if self.bparams and b is not None:
                bparams = list(self.bparams)
                bparams[i] = (m, b, bparams[i][2])
                self.bparams = bparams
            self.round = None

    def loaded(self, i: int, load: list, prefix: str = "") -> None:
        """Member ``i`` loaded by the ``load_state_dict`` whose error list is ``load`` (one list
        for a whole load, and a new one for each) under key ``prefix``: re-fused once that load
        has loaded every member it reaches (``reached``). It had re-fused at each member's load:
        under ``assign=True`` (which rebinds the members' parameters), a full copy of the group's
        weights per member. A member whose keys the load lacks (``strict=False``) is loaded all
        the same (with nothing), so it still counts."""
        with _REFUSE_LOCK:
            if self.loading is None or self.loading[0] is not load:
                self.loading = (load, set())
            done = self.loading[1]
            done.add(i)
            if not self.reached(i, prefix) <= done:
                return
            self.loading = None
            self._mend()

    def reached(self, i: int, prefix: str) -> set[int]:
        """The members a ``load_state_dict`` that loads member ``i`` under key ``prefix`` visits:
        those under the module it was called on. ``prefix`` is member ``i``'s path from that
        module, so with the members' names in the model they were fused in (``names``) it tells
        which module that was: the model or one above it (every member), a module inside it (the
        members under it: a layer's attention block holds q/k/v but not an MLP member fused with
        them), or the member itself. A prefix that fits no such place (the model restructured since
        fusing) gives ``{i}``: re-fused at this member, as many times as members load, never
        fewer, so a compiled graph never reads a fused tensor the load left stale."""
        names = self.__dict__.get("names")
        path = prefix[:-1] if prefix.endswith(".") else prefix
        if not names or not path:
            return {i}
        full = names[i]
        if path == full or path.endswith("." + full):
            return set(range(len(self.members)))
        if not full.endswith("." + path):
            return {i}
        root = full[:len(full) - len(path)]  # "model.layers.0." for path "self_attn.q_proj"
        return {j for j, n in enumerate(names) if n.startswith(root)}

    def refuse(self) -> None:
        """Concatenate the members' current weights again and make them views into it (normal
        tensors even under inference_mode: the parameters stay usable with autograd after it).
        Under ``_REFUSE_LOCK``: one re-fuse of a group at a time (its comment says why)."""
        with _REFUSE_LOCK:  # (the records below too: they must name what this re-fuse bound)
            with torch.inference_mode(False), torch.no_grad():
                w = torch.cat([m.weight.detach() for m in self.members])
                self.fused.weight = w
                for m, off, n in zip(self.members, self.offsets, self.sizes):
                    m.weight.data = w[off:off + n]
                if "bias" in self.fused._buffers:  # (a group without biases keeps nn.Linear's bias=None parameter)
                    b = torch.cat([m.bias.detach() for m in self.members])
                    self.fused.bias = b
                    for m, off, n in zip(self.members, self.offsets, self.sizes):
                        m.bias.data = b[off:off + n]
            if w.is_cuda:
                # One more kernel after the copies, writing neither tensor: the fused GEMM may be a
                # skinny -pdl strip, which loads its weight before it waits for the kernel just
                # before it; that kernel is then this one, and the copies are complete before it runs.
                torch.zeros(1, device=w.device)
            self.w, self.b = self.fused._buffers["weight"], self.fused._buffers.get("bias")
            self.wparams = [(m, m.weight, m.weight.data_ptr()) for m in self.members]
            self.bparams = [(m, m.bias, m.bias.data_ptr()) for m in self.members] if self.b is not None else []
            self.round = None


def _backward_check(spent: list, weights: list, pending: set):
    """The pre-hook of a fused round's autograd node (the output of its one GEMM, recorded where
    the weights are frozen and the input needs a gradient), run when a backward reaches it:

    - it marks the round spent (``spent[0]``). The members' slices share that node, where unfused
      each call has a graph of its own: a backward through one member's output (``q(x).sum()
      .backward()``) frees the node's saved tensors, and a sibling served the round's slice after
      it raised "Trying to backward through the graph a second time" from its own first backward.
      Later members of a spent round compute their own output (``_Group.take``);
    - it raises torch's error where a member's weight was modified in place since the forward
      (``with torch.no_grad(): layer.weight.mul_(2)``, an EMA or optimizer step on frozen
      weights). The GEMM saved the fused weight, whose version counter such an update of a
      member's parameter (its own counter: ``refuse`` binds it with ``.data``) does not bump: the
      input's gradient was computed with the new weights, silently, where nn.Linear's
      F.linear, which saves the weight itself, raises. Only the members served from the round
      (not in its ``pending`` set) are checked: the others' slices are in no caller's graph, their
      gradient is zero, and unfused their weights were never saved.

    It holds the flag, the weights and the round's pending set only: the round holds the node, so
    a hook holding the round (or a module, which holds the group and its round) would make a
    reference cycle."""
    versions = [w._version for w in weights]

    def hook(grads):
        spent[0] = True
        for i, (w, v) in enumerate(zip(weights, versions)):
            if w._version != v and i not in pending:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified by an inplace "
                    f"operation: a weight of a member of a gemmtune fused group (shape {tuple(w.shape)}) is at "
                    f"version {w._version}; expected version {v} instead (the forward computed the group's fused "
                    "GEMM with it; nn.Linear raises this too)")
        return None

    return hook


class _Round:
    """One input's fused output, its members' slices and which of them are still to be taken
    (``pending``: a set, whose ``remove`` claims a slice for one caller only, ``_Group.take``)."""

    __slots__ = ("x", "xv", "outs", "pending", "state", "pv", "spent")

    def __init__(self, x: torch.Tensor, xv: int | None, outs: tuple, pending: set, state: tuple, pv: tuple,
                 spent: list | None = None):
        # pending: the members still to be served (every one but the round's first; a set of
        # the round's own). spent: None, or [True] once a backward has run through the outputs'
        # autograd node (take)
        self.x, self.xv, self.outs, self.pending, self.state, self.pv, self.spent = x, xv, outs, pending, state, pv, spent


def kinds(members: Iterable[Iterable[str]], sep: str = "+") -> dict[str, int]:
    """How many groups of each kind, a kind being its members' last name parts joined by ``sep``,
    in first-seen order: ``FusedGroup.members`` or the lists bench-model's JSON keeps of them.

    >>> kinds([("l0.attn.q", "l0.attn.k"), ("l1.attn.q", "l1.attn.k"), ("l0.mlp.up", "l0.mlp.gate")])
    {'q+k': 2, 'up+gate': 1}
    """
    out: dict[str, int] = {}
    for names in members:
        key = sep.join(n.rpartition(".")[2] for n in names)
        out[key] = out.get(key, 0) + 1
    return out


def _params(m: torch.nn.Linear) -> list[torch.Tensor]:
    return [m.weight] if m.bias is None else [m.weight, m.bias]


class FusedLinear(torch.nn.Linear):
    """A member of a fused group: an ``nn.Linear`` (same parameters, names and hooks) whose output
    is its slice of the group's one GEMM. ``gemmtune.unfuse`` turns it back into ``nn.Linear``."""

    _gemmtune_group: _Group
    _gemmtune_index: int

    def forward(self, input: torch.Tensor) -> torch.Tensor:  # nn.Linear's name: callers may pass input=
        if _is_compiling():
            return fuse_compile.member_forward(self, input)
        return self._gemmtune_group.take(self._gemmtune_index, input)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs) -> None:
        self.__dict__["_gemmtune_loading"] = True  # register_parameter leaves the re-fuse to loaded()
        try:
            super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                          error_msgs)
        finally:
            self.__dict__.pop("_gemmtune_loading", None)
        # load_state_dict(assign=True), and any load under torch.__future__'s
        # set_swap_module_params_on_conversion(True), rebinds the member's parameters instead of
        # copying into their views of the fused tensor. The eager path would re-fuse at its next
        # call, but a graph compiled before reads the fused tensor and sees no change: so re-fuse
        # at load time, once, when this load has loaded every member (``_Group.loaded``).
        self._gemmtune_group.loaded(self._gemmtune_index, error_msgs, prefix)

    def register_parameter(self, name: str, param: torch.nn.Parameter | None) -> None:
        # ``layer.weight = Parameter(t)`` and load_state_dict(assign=True) come through here: the
        # member's own new parameter, which the group re-fuses onto (functional_call's, written
        # into _parameters directly, it does not: _Group._refusable).
        super().register_parameter(name, param)
        g = self.__dict__.get("_gemmtune_group")
        if g is not None and name in ("weight", "bias"):
            g.adopt(self._gemmtune_index)
            if not self.__dict__.get("_gemmtune_loading"):
                # Re-fused now, not at the next eager call: a graph compiled before reads the fused
                # tensor, and kept computing this member's slice from the old weight, and missed every
                # later in-place update of the new one (session 45's CPU hunt). A load re-fuses once
                # it has loaded every member (``loaded``); a member that cannot be re-fused now (a
                # weight of another shape) runs unfused, as before.
                g._mend()

    def _apply(self, fn, recurse: bool = True):
        # model.to() makes new Parameter objects where it cannot rebind .data (to or from the meta
        # device, set_overwrite_module_params_on_conversion): the member's own, as above.
        out = super()._apply(fn, recurse)
        g = self.__dict__.get("_gemmtune_group")
        if g is not None:
            g.adopt(self._gemmtune_index)
        return out


def _siblings(model: torch.nn.Module, passes: list, fn=None) -> list[list[str]]:
    """Groups of plain nn.Linear names that, in every call of every example pass, were called on
    one input tensor together and with no other layer: each group in call order."""
    names = {mod: name for name, mod in model.named_modules() if type(mod) is torch.nn.Linear}
    calls: list[tuple[str, torch.Tensor | None]] = []

    def pre(mod, args):
        calls.append((names[mod], args[0] if args and isinstance(args[0], torch.Tensor) else None))

    handles = [mod.register_forward_pre_hook(pre) for mod in names]
    try:
        with torch.no_grad():
            if fn is not None:
                fn()
            for x in passes:
                _call(model, x)
    finally:
        for h in handles:
            h.remove()
    # The calls on each input tensor, in runs: a layer called again on a tensor it read starts a
    # new run. All of a tensor's calls made one group, so one example tensor given twice
    # (inputs=[(x,)] * 2, fn running the model twice on one input) made every layer "called twice
    # on one input", and nothing was fused. A layer called twice on one input within a forward
    # (a(x) + a(x) * b(x)) is still left alone: its runs differ ([a], [a, b]).
    by_input: dict[int, list[list[str]]] = {}
    for name, x in calls:  # the tensors are alive in ``calls``: no id is reused
        runs = by_input.setdefault(id(x) if x is not None else id(name), [[]])
        if name in runs[-1]:
            runs.append([])
        runs[-1].append(name)
    seen: dict[str, set[tuple[str, ...]]] = {}
    for group in (run for runs in by_input.values() for run in runs):
        key = tuple(group)
        for name in group:
            seen.setdefault(name, set()).add(key)
    out, done = [], set()
    for name, keys in seen.items():
        if name in done or len(keys) != 1:
            continue
        (key,) = keys
        if len(key) >= 2 and all(seen.get(n) == {key} for n in key):
            out.append(list(key))
            done.update(key)
    return out


def _is_fused_layer(m: torch.nn.Module) -> bool:
    """Whether ``m`` is a group's fused layer (``_fuse`` makes its weight a buffer): a plain
    ``nn.Linear`` that a later pass sees called on its group's input, but never a member of a
    group itself. Its re-fuse would rebind the buffer's data, and the first group, which reads
    that buffer, would no longer see its members' weights (their views stay in the old tensor)."""
    return "weight" in m._buffers


def _partition(names: list[str], mods: dict, shared: set[int]) -> list[list[str]]:
    """The sets of ``names`` (siblings, in call order) that can share one GEMM: same in_features,
    dtype and device, all with a bias or none (GPT-J's q/k/v have none and its fc_in one: the
    three are fused, fc_in runs alone), no parameter shared with another layer (tied weights
    stay where they are), and a weight that is a parameter (not a hook's tensor)."""
    parts: dict[tuple, list[str]] = {}
    for n in names:
        m = mods[n]
        w, b = m.weight, m.bias
        if w.dim() != 2 or any(id(p) in shared for p in _params(m)) or _is_fused_layer(m):
            continue
        if not isinstance(m._parameters.get("weight"), torch.nn.Parameter):
            # A weight a forward pre-hook computes at each call (torch.nn.utils.spectral_norm, the
            # old weight_norm): never the view the group made, so the group never ran fused, its
            # siblings included, and its fused tensor held a copy of the computed weight.
            continue
        if b is not None and (b.dtype != w.dtype or b.device != w.device or b.shape != w.shape[:1]):
            continue
        parts.setdefault((w.shape[1], w.dtype, w.device, b is None), []).append(n)
    return [p for p in parts.values() if len(p) >= 2]


def _check_module(model) -> None:
    # (unfuse and fused_names raised AttributeError from inside: "'dict' object has no attribute 'modules'")
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, not {type(model).__name__}")


def fuse_linears(model: torch.nn.Module, *example_inputs, inputs: Iterable | None = None,
                 fn: Callable[[], object] | None = None,
                 groups: Iterable[Sequence[str]] | None = None) -> list[FusedGroup]:
    """Fuse the sibling ``nn.Linear`` layers of ``model`` (see the module docstring): those that
    ``model(*example_inputs)`` (or each input of ``inputs``, as ``gemmtune.capture`` takes them,
    or ``fn()``, e.g. a closure that runs a prefill and a decode step) called on one input tensor
    together, every time. Or, with ``groups``, the layers named there (each a sequence of member
    names in call order, as ``fused_names`` and ``FusedGroup.members`` give them), without running
    the model: how ``load_patched`` re-fuses a saved model. Returns the groups made (empty when
    there are none). Run it before ``patch`` / ``tune_model``; ``unfuse`` undoes it."""
    _check_module(model)
    passes = example_passes(inputs) if inputs is not None else ([tuple(example_inputs)] if example_inputs else [])
    if groups is not None and (passes or fn is not None):
        raise ValueError("fuse_linears takes example inputs (or fn=) or groups=, not both")
    if not passes and fn is None and groups is None:
        raise ValueError("fuse_linears needs example inputs (fuse_linears(model, x), inputs=[(x1,), ...] or fn=), "
                         "or groups= of layer names: the siblings are the layers a forward pass calls on one tensor")
    counts: dict[int, int] = {}
    for _, p in model.named_parameters(remove_duplicate=False):
        counts[id(p)] = counts.get(id(p), 0) + 1
    shared = {i for i, c in counts.items() if c > 1}
    mods = dict(model.named_modules())
    made = []
    if groups is not None:
        for names in _named_groups(groups, mods, shared):
            made.append(_fuse(model, names, [mods[n] for n in names]))
        return made
    for siblings in _siblings(model, passes, fn):
        for names in _partition(siblings, mods, shared):
            made.append(_fuse(model, names, [mods[n] for n in names]))
    patched = sum(hasattr(m, "_gemmtune_handle") for m in mods.values())
    if patched:
        warnings.warn(f"gemmtune.fuse_linears: {patched} layer(s) of this model were already converted by "
                      "gemmtune.patch and are not fused; fuse first, then patch (patch(..., fuse=True) does both)",
                      RuntimeWarning, stacklevel=2)
    return made


def _named_groups(groups: Iterable[Sequence[str]], mods: dict, shared: set[int]) -> list[list[str]]:
    """``groups`` checked against the model: each names two or more distinct plain ``nn.Linear``
    layers that ``_partition`` keeps together (same in_features, dtype, device, bias or none, no
    shared parameter). A group whose members are already fused together is skipped. Errors name
    the group and the layer."""
    out, used = [], set()
    for g in groups:
        if isinstance(g, str) or not all(isinstance(n, str) for n in g):
            raise TypeError(f"each fused group is a sequence of layer names, got {g!r}")
        names = list(g)
        if len(names) < 2 or len(set(names)) != len(names):
            raise ValueError(f"fused group {names}: needs two or more distinct layers")
        again = used.intersection(names)
        if again:
            raise ValueError(f"fused group {names}: {sorted(again)[0]!r} is in another group of the list too")
        used.update(names)
        missing = [n for n in names if n not in mods]
        if missing:
            raise ValueError(f"fused group {names}: this model has no layer {missing[0]!r}")
        g0 = mods[names[0]].__dict__.get("_gemmtune_group")
        if g0 is not None and len(g0.members) == len(names) and all(m is mods[n] for m, n in zip(g0.members, names)):
            continue  # fused already, as named
        fused = [n for n in names if _is_fused_layer(mods[n])]
        if fused:
            raise ValueError(f"fused group {names}: {fused[0]!r} is a fused layer, not a member of one")
        other = [n for n in names if type(mods[n]) is not torch.nn.Linear]
        if other:
            raise ValueError(f"fused group {names}: {other[0]!r} is a {type(mods[other[0]]).__name__}, not a plain "
                             "torch.nn.Linear (fused or patched already? fuse before patch)")
        if _partition(names, mods, shared) != [names]:
            raise ValueError(f"fused group {names}: its layers cannot share one GEMM (in_features, dtype, device or "
                             "bias differ, a parameter is shared with another layer, or a weight is no parameter but "
                             "a hook's tensor, as under spectral_norm)")
        out.append(names)
    return out


def fused_names(model: torch.nn.Module) -> list[tuple[str, ...]]:
    """The member names of each fused group of ``model``, in call order: what ``save_patched``
    records and ``fuse_linears(model, groups=...)`` takes.

    >>> m = torch.nn.Module(); m.q, m.k = torch.nn.Linear(4, 4), torch.nn.Linear(4, 2)
    >>> _ = fuse_linears(m, groups=[["q", "k"]])
    >>> fused_names(m)
    [('q', 'k')]
    """
    _check_module(model)
    names = {id(m): n for n, m in model.named_modules()}
    out, seen = [], set()
    for mod in model.modules():
        g = mod.__dict__.get("_gemmtune_group")
        if isinstance(mod, FusedLinear) and g is not None and id(g) not in seen:
            seen.add(id(g))
            if all(id(m) in names for m in g.members):
                out.append(tuple(names[id(m)] for m in g.members))
    return out


_CONTAINERS = (torch.nn.ModuleList, torch.nn.ModuleDict, torch.nn.Sequential)


def _fuse(model: torch.nn.Module, names: list[str], members: list[torch.nn.Linear]) -> FusedGroup:
    sizes = [m.weight.shape[0] for m in members]  # not out_features: a replaced weight may not match it
    k = members[0].weight.shape[1]
    w0 = members[0].weight
    fused = torch.nn.Linear(k, sum(sizes), bias=members[0].bias is not None, device="meta", dtype=w0.dtype)
    # The fused tensors are buffers, not parameters, and not saved: the members' parameters (views
    # into them) stay the model's parameters and its state_dict, under their own names. Registered
    # empty here: ``refuse`` concatenates the members' weights into them, once.
    del fused.weight
    fused.register_buffer("weight", None, persistent=False)
    if members[0].bias is not None:
        del fused.bias
        fused.register_buffer("bias", None, persistent=False)
    group = _Group(fused, members, sizes)
    group.names = list(names)  # the members' paths in ``model``: which a load reaches (_Group.reached)
    group.refuse()  # members' parameters become views into the fused tensors (the originals freed)
    parent_name, _, _ = names[0].rpartition(".")
    parent = model.get_submodule(parent_name)
    # Not inside a container (ModuleList, ModuleDict, Sequential): its children are what a forward
    # iterates (``torch.stack([h(x) for h in self.heads])``: MusicGen's lm_heads, Medusa heads), so
    # a fused layer registered there was run as one more head (a wider cat, a failed stack, one key
    # more in a ModuleDict's items()), and changed len() and [-1]. The nearest module above that is
    # not one holds it; the root holds it where every module above is one (a bare container model).
    inner = ""  # the containers' names, then, in the fused layer's: heads -> gemmtune_fused_heads_0_1_2
    while parent_name and isinstance(parent, _CONTAINERS):
        parent_name, _, last = parent_name.rpartition(".")
        inner = f"{last}_{inner}"
        parent = model.get_submodule(parent_name)
    if isinstance(parent, _CONTAINERS):
        warnings.warn(f"gemmtune.fuse_linears: the model is a {type(parent).__name__}, which holds the fused layer of "
                      f"{names} (no module above it can): iterating the model, or len() of it, now sees that layer "
                      "too; wrap the container in a module to keep it out", RuntimeWarning, stacklevel=3)
    short = inner + "_".join(n.rpartition(".")[2] for n in names)
    attr = base = "gemmtune_fused_" + re.sub(r"\W", "_", short)
    i = 2
    while hasattr(parent, attr):
        attr, i = f"{base}_{i}", i + 1
    parent.add_module(attr, fused)
    for i, m in enumerate(members):
        # The class last: a model fused while other threads call it (load_patched of a fused
        # artifact onto a live model) ran FusedLinear.forward before _gemmtune_group was set.
        m._gemmtune_group = group
        m._gemmtune_index = i
        m.__class__ = FusedLinear
    return FusedGroup(f"{parent_name}.{attr}" if parent_name else attr, tuple(names), tuple(sizes), k)


def unfuse(model: torch.nn.Module) -> int:
    """Undo ``fuse_linears``: each member an ``nn.Linear`` with weights of its own again (copied
    out of the fused tensor; one parametrized since it was fused keeps its parametrizations), the
    fused layers removed. Returns the number of groups undone. A group only part of which lies
    inside ``model`` (Phi's q/k/v in the attention and fc1 in the MLP, unfused from one of them) is
    left fused, with a warning: undoing it from here unfused the members outside too and left its
    fused layer, outside, holding a copy of every member's weights."""
    _check_module(model)
    inside = {id(m) for m in model.modules()}
    groups, partial = [], []
    for mod in model.modules():
        g = mod.__dict__.get("_gemmtune_group")
        if isinstance(mod, FusedLinear) and g is not None and all(g is not x for x in groups + partial):
            whole = id(g.fused) in inside and all(id(m) in inside for m in g.members)
            (groups if whole else partial).append(g)
    if partial:
        warnings.warn(f"gemmtune.unfuse left {len(partial)} fused group(s) as they were: part of each lies "
                      "outside this module (call unfuse on a module that holds all of the group, e.g. the "
                      f"model); {len(partial[0].members)} members, the fused layer a "
                      f"{partial[0].fused.out_features}x{partial[0].fused.in_features} Linear",
                      RuntimeWarning, stacklevel=2)
    for g in groups:
        with torch.no_grad():
            for m in g.members:
                # Its parameters, not m.weight: a member parametrized since it was fused
                # (torch.nn.utils.parametrize) keeps its view in parametrizations.weight.original,
                # and its m.weight is a tensor computed anew at each access.
                for p in m.parameters():
                    p.data = p.detach().clone()
                cls = type(m)
                if cls is not FusedLinear and cls.__bases__ == (FusedLinear,) and parametrize.is_parametrized(m):
                    # parametrize made this class over FusedLinear for this module alone (and
                    # remove_parametrizations goes back to its base): it keeps its parametrized
                    # tensors' properties over nn.Linear. Setting __class__ to nn.Linear dropped
                    # them (m.weight then raised AttributeError).
                    cls.__bases__ = (torch.nn.Linear,)
                    cls.__name__ = cls.__qualname__ = "ParametrizedLinear"
                else:
                    m.__class__ = torch.nn.Linear
                del m._gemmtune_group, m._gemmtune_index
        for mod in model.modules():
            for name, child in list(mod.named_children()):
                if child is g.fused:
                    delattr(mod, name)
        g.round = None
    return len(groups)


__all__ = ["fuse_linears", "unfuse", "fused_names", "FusedGroup", "FusedLinear"]
