"""Fused epilogues: bias, activation and residual applied to the GEMM's fp32 accumulator.

Under torch.compile the ``gemmtune::mm`` custom op is opaque, so Inductor cannot fuse
an elementwise tail into it; and eagerly a bias would be a second kernel reading and
writing the whole output again. So every family applies it itself, in fp32, before the
final cast and store, in this order::

    out[m, n] = act(acc[m, n] + bias[n]) + residual[m, n]

and, for scaled_mm (fp8 operands; gemmtune.scaled), the scales first, in fp32::

    out[m, n] = act(acc[m, n] * scale_a[m] * scale_b[n] + bias[n]) + residual[m, n]

with one scale per operand (``scale='tensor'``) or per row of A and per column of B ('row').

* ``Epilogue`` is the frozen, hashable description (which parts; stable id
  ``bias+gelu_tanh+res``). It selects the kernel's constexprs (``constexprs``): the
  one place where the snake_case fields become HAS_BIAS / ACT / HAS_RES.
* ``EpilogueArgs`` is one call's epilogue: the description plus its tensors (a bias of
  shape (N,) and a residual of shape (M, N), any strides, both of the output's dtype
  and device). ``bind`` checks them and returns None when there is nothing to fuse,
  so a plain mm passes ``epilogue=None`` and compiles to the same kernel as before.

Families take it as one keyword, ``run(a, b, out, cfg, *, ..., epilogue=None)``.

Example::

    >>> Epilogue(bias=True, activation="gelu_tanh").id
    'bias+gelu_tanh'
    >>> Epilogue.parse("bias+silu+res") == Epilogue(True, "silu", True)
    True
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch

from .problem import check_dense, check_not_negated

# Activation names -> the kernels' ACT constexpr. The Triton code (kernels.tiled.activation)
# branches on these numbers; the names are what users and ids see.
ACTIVATIONS = {"none": 0, "gelu_tanh": 1, "gelu_erf": 2, "silu": 3, "relu": 4}
# scaled_mm's scale modes, indexed by the kernels' SCALE constexpr: none, one fp32 scale per
# operand, per-row of A (M,) x per-column of B (N,).
SCALE_MODES = ("none", "tensor", "row")


def check_activation(activation) -> None:
    if not isinstance(activation, str) or activation not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; known: {', '.join(ACTIVATIONS)}")


@dataclass(frozen=True)
class Epilogue:
    """What is fused after the GEMM: ``act(acc + bias) + residual`` (see the module doc)."""

    bias: bool = False
    activation: str = "none"
    residual: bool = False
    scale: str = "none"  # scaled_mm's scales: 'none', 'tensor' or 'row' (SCALE_MODES)

    def __post_init__(self) -> None:
        check_activation(self.activation)
        if self.scale not in SCALE_MODES:
            raise ValueError(f"unknown scale mode {self.scale!r}; known: {', '.join(SCALE_MODES)}")

    @property
    def is_none(self) -> bool:
        return not self.bias and self.activation == "none" and not self.residual and self.scale == "none"

    @property
    def id(self) -> str:
        """``none``, or the parts joined by '+' in application order: ``bias+relu+res``
        (``scale.row+bias`` with scaled_mm's scales)."""
        parts = ([f"scale.{self.scale}"] if self.scale != "none" else []) + (["bias"] if self.bias else []) \
            + ([self.activation] if self.activation != "none" else []) + (["res"] if self.residual else [])
        return "+".join(parts) or "none"

    @classmethod
    def parse(cls, text: str) -> "Epilogue":
        if text == "none":
            return cls()
        parts = text.split("+")
        scale = "none"
        if parts[0].startswith("scale."):
            scale = parts[0].removeprefix("scale.")
            if scale not in SCALE_MODES[1:]:
                raise ValueError(f"bad epilogue id {text!r}: scale.<mode> with mode in {SCALE_MODES[1:]}")
            parts = parts[1:]
            if not parts:
                return cls(scale=scale)
        bias = parts[:1] == ["bias"]
        parts = parts[1:] if bias else parts
        res = parts[-1:] == ["res"]
        parts = parts[:-1] if res else parts
        if len(parts) > 1 or parts == ["none"] or not (bias or res or parts) or (
                parts and parts[0] not in ACTIVATIONS):
            raise ValueError(f"bad epilogue id {text!r}: expected 'none' or e.g. 'bias+gelu_tanh+res' "
                             f"(activations: {', '.join(ACTIVATIONS)})")
        return cls(bias, parts[0] if parts else "none", res, scale)

    def constexprs(self) -> dict:
        """The kernels' epilogue constexprs (SCALE: 0 none, 1 tensor-wise, 2 row-wise)."""
        return {"HAS_BIAS": self.bias, "ACT": ACTIVATIONS[self.activation], "HAS_RES": self.residual,
                "SCALE": SCALE_MODES.index(self.scale)}


NONE = Epilogue()


class EpilogueArgs(NamedTuple):
    """One call's epilogue: its ``Epilogue`` and tensors. Build it with ``bind`` (which checks).
    A NamedTuple because the dispatcher builds one per fused call: 2.4x cheaper than a frozen
    dataclass (0.54 against 1.3 us on the 2-core CI machine)."""

    spec: Epilogue
    bias: torch.Tensor | None = None
    residual: torch.Tensor | None = None
    # scaled_mm's fp32 scales, contiguous: (1,) each for 'tensor'; (M,) and (N,) for 'row'
    # (gemmtune.scaled.bind_scales checks and flattens them).
    scale_a: torch.Tensor | None = None
    scale_b: torch.Tensor | None = None

    def padded(self, extra_n: int) -> "EpilogueArgs":
        """The same epilogue for an output ``extra_n`` columns wider (pad+ choices compute
        on a padded N and cut it off; the padded columns read zeros here)."""
        if extra_n == 0:
            return self
        pad = torch.nn.functional.pad
        sb = self.scale_b
        if sb is not None and self.spec.scale == "row":
            sb = pad(sb, (0, extra_n))
        return EpilogueArgs(self.spec, None if self.bias is None else pad(self.bias, (0, extra_n)),
                            None if self.residual is None else pad(self.residual, (0, extra_n)),
                            self.scale_a, sb)


def _same_device(a: torch.device, b: torch.device) -> bool:
    """``cuda`` and ``cuda:0`` name one GPU when 0 is the current one (torch.device compares them
    unequal); an index-less device means the current one of its type."""
    a, b = torch.device(a), torch.device(b)
    if a.type != b.type:
        return False
    if a.index is None or b.index is None:
        if a.type != "cuda":
            return True
        cur = torch.cuda.current_device()
        return (cur if a.index is None else a.index) == (cur if b.index is None else b.index)
    return a.index == b.index


def bind(m: int, n: int, dtype: torch.dtype, device: torch.device, *, bias: torch.Tensor | None = None,
         activation: str = "none", residual: torch.Tensor | None = None) -> EpilogueArgs | None:
    """Check an epilogue for an (m, n) output of ``dtype`` on ``device``; None if nothing is fused.

    Raises ValueError (wrong shape, device, unknown activation) or TypeError (not a tensor,
    wrong dtype) naming what is wrong.
    """
    check_activation(activation)
    for name, t, shape in (("bias", bias, (n,)), ("residual", residual, (m, n))):
        if t is None:
            continue
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor or None, not {type(t).__name__}")
        check_dense(name, t, "gemmtune's fused epilogue reads")
        if tuple(t.shape) != shape:
            want = "(N,)" if name == "bias" else "(M, N)"
            raise ValueError(f"{name} must have shape {want} = {shape}, got {tuple(t.shape)}")
        if t.dtype != dtype:
            raise TypeError(f"{name} must have the output's dtype {dtype}, got {t.dtype}")
        if not _same_device(t.device, device):
            raise ValueError(f"{name} must be on the output's device {device}, got {t.device}")
        check_not_negated(name, t)
    spec = Epilogue(bias is not None, activation, residual is not None)
    return None if spec.is_none else EpilogueArgs(spec, bias, residual)


# ---------------------------------------------------------------------- torch implementation
def activate_(x: torch.Tensor, activation: str) -> torch.Tensor:
    """``activation`` applied to ``x`` in place (torch ops; aten and the references use it)."""
    if activation == "relu":
        x.relu_()
    elif activation == "silu":
        torch.nn.functional.silu(x, inplace=True)
    elif activation in ("gelu_tanh", "gelu_erf"):
        torch.ops.aten.gelu_(x, approximate="tanh" if activation == "gelu_tanh" else "none")
    else:
        check_activation(activation)
    return x


def apply_(out: torch.Tensor, epi: EpilogueArgs | None, *, bias_done: bool = False) -> torch.Tensor:
    """The epilogue on a finished product ``out``, in place, with torch ops (the aten family, an
    empty K). ``bias_done``: the bias is already in (torch.addmm added it). Scales multiply
    ``out`` first (an empty K's zeros stay zeros)."""
    if epi is None:
        return out
    if epi.spec.scale == "tensor":
        out.mul_(epi.scale_a * epi.scale_b)
    elif epi.spec.scale == "row":
        out.mul_(epi.scale_a[:, None] * epi.scale_b[None, :])
    if epi.bias is not None and not bias_done:
        out.add_(epi.bias)
    activate_(out, epi.spec.activation)
    if epi.residual is not None:
        out.add_(epi.residual)
    return out


def reference(acc: torch.Tensor, bias: torch.Tensor | None = None, activation: str = "none",
              residual: torch.Tensor | None = None) -> torch.Tensor:
    """``act(acc + bias) + residual`` out of place, in ``acc``'s dtype (fp64 for the tests)."""
    x = acc if bias is None else acc + bias.to(acc.dtype)
    if activation == "gelu_tanh":
        x = 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    elif activation == "gelu_erf":
        x = 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))
    elif activation != "none":
        x = activate_(x.clone(), activation)
    return x if residual is None else x + residual.to(x.dtype)


__all__ = ["ACTIVATIONS", "SCALE_MODES", "Epilogue", "EpilogueArgs", "NONE", "bind", "apply_", "activate_", "reference"]
