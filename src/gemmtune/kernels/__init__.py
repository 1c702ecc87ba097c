"""Kernel families. Each module holds one family: its launcher and its config space.

A family module exposes ``NAME``, ``CONFIG`` (its config dataclass),
``space(problem, device, kind) -> (kept, rejected)``, ``constraint(cfg, problem,
device) -> reason | None``, ``validate(problem, cfg)`` (raises ValueError when the
family cannot run the config at all) and ``run(a, b, out, cfg, *, allow_tf32,
workspace, epilogue)``, where ``epilogue`` is None or a checked
``gemmtune.epilogue.EpilogueArgs`` (bias, activation, residual fused into the store).
"""

from types import ModuleType

import torch

from ..epilogue import EpilogueArgs
from . import aten, decompose_k, persistent, skinny, splitk, triton_mm

FAMILIES: dict[str, ModuleType] = {m.NAME: m for m in (triton_mm, splitk, skinny, persistent, decompose_k, aten)}
TRITON_FAMILIES = ("triton_mm", "splitk", "skinny", "persistent_tma", "decompose_k")


def get(name: str) -> ModuleType:
    try:
        return FAMILIES[name]
    except KeyError:
        raise ValueError(f"unknown kernel family {name!r}; known: {', '.join(FAMILIES)}") from None


def padded_sizes(m: int, n: int, k: int, elsize: int) -> tuple[int, int, int]:
    """(M, N', K') with N and K rounded up to whole 16-byte vectors."""
    per = max(1, 16 // elsize)
    return m, -(-n // per) * per, -(-k // per) * per


def run_choice(choice, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, *,
               allow_tf32: bool = False, workspace=None, epilogue: EpilogueArgs | None = None) -> None:
    """Run one choice into ``out`` (shapes and ``epilogue`` already checked; M, N, K > 0).

    ``pad+`` choices run on zero-padded row-major copies of the operands: K and N rounded up to
    whole 16-byte vectors, so every row starts aligned and no vector straddles a ragged edge (as
    Inductor's pad_mm does). Zero columns of A meet zero rows of B, so the product is unchanged.
    The padded N is storage only: the family runs on the view ``B[:, :N]`` (rows still Np
    apart, so still aligned), masks its N edge and writes straight into ``out`` with the real
    bias and residual. (Computing the padded N into a temporary and copying it out cost one
    more write and read of the output and an allocation per call.)
    """
    fam = get(choice.family)
    if not choice.pad:
        fam.run(a, b, out, choice.config, allow_tf32=allow_tf32, workspace=workspace, epilogue=epilogue)
        return
    M, K = a.shape
    N = b.shape[1]
    _, Np, Kp = padded_sizes(M, N, K, a.element_size())
    ap = torch.nn.functional.pad(a, (0, Kp - K))
    bp = torch.nn.functional.pad(b, (0, Np - N, 0, Kp - K))
    fam.run(ap, bp[:, :N], out, choice.config, allow_tf32=allow_tf32, workspace=workspace, epilogue=epilogue)
