"""Session 59 experiment (GPU host; runs anywhere): which statement of gemmtune.nn.Linear's memoized
F.linear path makes a patched Llama decode step dearer than a plain one on the GPU host (session 58,
call 4: +193 us a step, ~1.7 us a layer; the same model with each forward cut to F.linear alone was not
dearer). The patched model's layers get forwards that add the path's statements one at a time; paired
single steps against the plain model (diag_linear_host._paired_steps). floor_b, a second deep copy with the
floor's forward, shows what a copy alone moves a step.

    python scripts/sessions/exp_forward_ladder.py --device cuda --dtype bfloat16 --features 2048 --steps 300
"""
from __future__ import annotations

import argparse
import copy
import sys
import warnings

import torch
import torch.nn.functional as F

from gemmtune import nn as gnn

sys.path.insert(0, "scripts")
from diag_linear_host import _Floor, _paired_steps, plain_and_patched  # noqa: E402

_ATEN = gnn._ATEN
_is_compiling = torch.compiler.is_compiling
_KEY = torch.Size((1, 1, 64))
_SHARED: dict = {}


class _Memo(gnn.Linear):
    """The memo lookup, then F.linear on _parameters."""
    def forward(self, x):
        if self._gemmtune_paths.get(x.shape) is _ATEN:
            ps = self._parameters
            return F.linear(x, ps["weight"], ps["bias"])
        return super().forward(x)


class _MemoCheck(gnn.Linear):
    """_Memo behind the compile check."""
    def forward(self, x):
        if not _is_compiling():
            if self._gemmtune_paths.get(x.shape) is _ATEN:
                ps = self._parameters
                return F.linear(x, ps["weight"], ps["bias"])
        return super().forward(x)


class _MemoCheckIn(gnn.Linear):
    """_MemoCheck with the parameters' presence tested as the shipped path does."""
    def forward(self, x):
        if not _is_compiling():
            p = self._gemmtune_paths.get(x.shape)
            if p is _ATEN:
                if type(self) is _MemoCheckIn:
                    ps = self._parameters
                    if "weight" in ps and "bias" in ps:
                        return F.linear(x, ps["weight"], ps["bias"])
        return super().forward(x)


class _Shape(gnn.Linear):
    """The floor after reading x.shape (what building the memo's key costs alone)."""
    def forward(self, x):
        x.shape  # noqa: B018 - the read is what is timed
        ps = self._parameters
        return F.linear(x, ps["weight"], ps["bias"])


class _GetConst(gnn.Linear):
    """The floor after a memo lookup of a fixed key (the lookup without x.shape)."""
    def forward(self, x):
        if self._gemmtune_paths.get(_KEY) is _ATEN:
            ps = self._parameters
            return F.linear(x, ps["weight"], ps["bias"])
        return super().forward(x)


class _Numel(gnn.Linear):
    """A memo keyed by x.numel() (an int: no torch.Size built)."""
    def forward(self, x):
        if self._gemmtune_numel.get(x.numel()) is _ATEN:
            ps = self._parameters
            return F.linear(x, ps["weight"], ps["bias"])
        return super().forward(x)


class _GetNoSuper(gnn.Linear):
    """_Memo with its fallback named without super() (no __class__ cell in the function)."""
    def forward(self, x):
        if self._gemmtune_paths.get(x.shape) is _ATEN:
            ps = self._parameters
            return F.linear(x, ps["weight"], ps["bias"])
        return gnn.Linear.forward(self, x)


class _Contains(gnn.Linear):
    """The memo read with `in` and a subscript: no call before F.linear (session 59, call 2: each variant
    with a .get() call cost 125-190 us a step, x.shape alone nothing)."""
    def forward(self, x):
        s = x.shape
        paths = self._gemmtune_paths
        if s in paths and paths[s] is _ATEN:
            ps = self._parameters
            return F.linear(x, ps["weight"], ps["bias"])
        return gnn.Linear.forward(self, x)


class _ContainsCheck(gnn.Linear):
    """_Contains behind the compile check (two Python calls)."""
    def forward(self, x):
        if not _is_compiling():
            s = x.shape
            paths = self._gemmtune_paths
            if s in paths and paths[s] is _ATEN:
                ps = self._parameters
                return F.linear(x, ps["weight"], ps["bias"])
        return gnn.Linear.forward(self, x)


class _SubscriptCheck(gnn.Linear):
    """The shipped path's shape with no call but the compile check: the memo read by subscript (a KeyError
    for a new shape; atomic, where `in` then a subscript is not) and the class read as an attribute."""
    def forward(self, x):
        if not _is_compiling():
            try:
                p = self._gemmtune_paths[x.shape]
            except KeyError:
                p = None
            if p is _ATEN and self.__class__ is _SubscriptCheck:
                ps = self._parameters
                if "weight" in ps and "bias" in ps:
                    return F.linear(x, ps["weight"], ps["bias"])
        return gnn.Linear.forward(self, x)


class _Shared(gnn.Linear):
    """_Contains reading one dict that every layer of the model shares (hot in the CPU's caches: 113 reads a
    step) in place of each layer's own (read once a step): whether call 3's cost of any memo read (+175 to
    +205 us a step, 1.5-1.8 us a layer, against ~0.1 us timed alone) is cache misses on cold per-layer objects."""
    def forward(self, x):
        s = x.shape
        paths = _SHARED
        if s in paths and paths[s] is _ATEN:
            ps = self._parameters
            return F.linear(x, ps["weight"], ps["bias"])
        return gnn.Linear.forward(self, x)


class _LastShape(gnn.Linear):
    """The last ATEN shape held as a plain attribute and compared (one object read, no dict)."""
    def forward(self, x):
        if x.shape == self._gemmtune_last:
            ps = self._parameters
            return F.linear(x, ps["weight"], ps["bias"])
        return gnn.Linear.forward(self, x)


class _NumelAttr(gnn.Linear):
    """The last ATEN numel held as a plain attribute and compared."""
    def forward(self, x):
        if x.numel() == self._gemmtune_n:
            ps = self._parameters
            return F.linear(x, ps["weight"], ps["bias"])
        return gnn.Linear.forward(self, x)


def _hot_forward(check):
    """The shipped fast path after session 59's fix (the hot shape, then the table) behind ``check``:
    None for no compile check."""
    size = torch.Size

    def forward(self, x):
        if check is None or not check():
            s = x.shape
            p = _ATEN if type(s) is size and s == self._gemmtune_hot else self._gemmtune_paths.get(s)
            if p is _ATEN:
                if type(self) is cls:
                    ps = self._parameters
                    if "weight" in ps and "bias" in ps:
                        return F.linear(x, ps["weight"], ps["bias"])
        return gnn.Linear.forward(self, x)
    cls = type("_Hot", (gnn.Linear,), {"forward": forward})
    return cls


class _SplitHot(gnn.Linear):
    """For the next session: the fixed fast path as a small function of its own, everything else one call
    away (call 6 left ~1 us a layer above the floor unexplained; one hypothesis is the shipped forward's
    length: its bytecode and inline caches span more cache lines than this)."""
    def forward(self, x):
        if not _is_compiling():
            s = x.shape
            if type(s) is _SIZE and s == self._gemmtune_hot and type(self) is _SplitHot:
                ps = self._parameters
                if "weight" in ps and "bias" in ps:
                    return F.linear(x, ps["weight"], ps["bias"])
        return gnn.Linear.forward(self, x)


_SIZE = torch.Size
_HotCheck = _hot_forward(torch.compiler.is_compiling)
_HotDyn = _hot_forward(torch.compiler.is_dynamo_compiling)
_HotNoCheck = _hot_forward(None)


class _Getattr(gnn.Linear):
    """nn.Linear's own body (two Module.__getattr__ reads) under gemmtune's class."""
    def forward(self, x):
        return F.linear(x, self.weight, self.bias)


def _hooks_on() -> dict:
    """What would make a call inside a forward dearer: a profile or trace function, a sys.monitoring tool
    with events on, a custom frame evaluator (dynamo's), a torch function mode."""
    out = {"profile": repr(sys.getprofile()), "trace": repr(sys.gettrace()),
           "modes": [type(m).__name__ for m in torch.overrides._get_current_function_mode_stack()]}
    mon = getattr(sys, "monitoring", None)
    if mon is not None:
        out["monitoring"] = {i: (mon.get_tool(i), mon.get_events(i)) for i in range(6) if mon.get_tool(i)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--variants", default="floor,shape,get_const,memo,numel,memo_check_in,getattr,floor_b",
                    help="comma-separated, after plain and patched")
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    ph, fns = plain_and_patched(a.features, getattr(torch, a.dtype), a.device)
    global _KEY  # noqa: PLW0603 - the fixed key of _GetConst, the input shape of this run
    _KEY = torch.Size((1, 1, a.features))
    variants = {"floor": _Floor, "shape": _Shape, "get_const": _GetConst, "memo": _Memo, "numel": _Numel,
                "memo_check_in": _MemoCheckIn, "getattr": _Getattr, "get_nosuper": _GetNoSuper, "contains": _Contains,
                "contains_check": _ContainsCheck, "subscript_check": _SubscriptCheck, "shared": _Shared, "last_shape": _LastShape,
                "numel_attr": _NumelAttr, "hot_check": _HotCheck, "hot_dyn": _HotDyn,
                "hot_nocheck": _HotNoCheck, "split_hot": _SplitHot, "floor_b": _Floor}
    for name in a.variants.split(","):
        cls = variants[name]
        m = copy.deepcopy(fns["patched"])
        for mod in m.modules():
            if isinstance(mod, gnn.Linear):
                mod.__class__ = cls
                mod._gemmtune_numel = {}
                mod._gemmtune_last = mod._gemmtune_n = None
        fns[name] = m
    with torch.no_grad():
        for m in fns.values():
            for _ in range(3):
                ph.run(m)
            for mod in m.modules():  # the numel memo from the shape memo the warm-up filled
                if isinstance(mod, gnn.Linear):
                    mod._gemmtune_numel = {torch.Size(s).numel(): p for s, p in mod._gemmtune_paths.items()}
                    _SHARED.update(mod._gemmtune_paths)
                    # the decode shape (1, 1, in_features): the last one a step reads
                    mod._gemmtune_last = torch.Size((1, 1, mod.in_features))
                    mod._gemmtune_n = mod.in_features
                    assert set(mod._gemmtune_paths.values()) <= {_ATEN}, mod._gemmtune_paths
    seen = []
    layer = fns["patched"].model.layers[0].self_attn.q_proj
    h = layer.register_forward_pre_hook(lambda mod, args: seen.append(_hooks_on()))
    with torch.no_grad():
        ph.run(fns["patched"])
    h.remove()
    print("inside a layer's forward:", seen[-1])
    print(f"Llama 16 layers hidden {a.features} {a.dtype} on {a.device}, decode b1; torch {torch.__version__}, "
          f"python {sys.version.split()[0]}")
    _paired_steps(fns, ph, a.steps, a.device)


if __name__ == "__main__":
    main()
