"""gemmtune: find, verify and serve the fastest GEMM kernel for every shape on this GPU.

Quick use::

    import torch, gemmtune
    a = torch.randn(32, 28672, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(28672, 32, device="cuda", dtype=torch.bfloat16)
    c = gemmtune.matmul(a, b)                          # default heuristic (split-K here)
    c = gemmtune.matmul(a, b, choice="decompose_k:s16")  # one chosen kernel
    p = gemmtune.Problem.from_tensors(a, b)
    print([ch.id for ch in gemmtune.space(p, "splitk")][:3])
"""

__version__ = "0.2.0"

# Every public name, from the module that defines it, imported on first use (PEP 562): importing
# them all took 0.55 s beyond torch on the 2-core CPU machine (Triton and the kernels 0.35 s of it),
# which every ``gemmtune`` command paid (``gemmtune.cli`` is inside this package) although a tune's
# parent process only plans, ranks and records. ``from gemmtune import X`` and ``gemmtune.X`` are
# unchanged; a name's module is imported when the name is first read.
_LAZY = {
    "default_choice": "api", "families": "api", "interpreter_enabled": "api", "matmul": "api", "space": "api",
    "DeviceInfo": "device", "Problem": "problem",
    "AtenConfig": "configs", "Choice": "configs", "DecomposeKConfig": "configs", "SkinnyConfig": "configs",
    "SplitKConfig": "configs", "TileConfig": "configs",
    "Epilogue": "epilogue", "scaled_mm": "scaled",
    "Dispatcher": "dispatch", "compile_bmm": "dispatch", "compile_mm": "dispatch", "load": "dispatch",
    "patch": "nn", "gate_eager": "eager_gate", "refresh_weights": "kernels.padcache",
    "fuse_linears": "fuse", "unfuse": "fuse",
    "load_patched": "modeltune", "save_patched": "modeltune", "tune_model": "modeltune",
}

# Imported now: ``tune`` and ``capture`` are functions named like their modules, and importing a
# submodule sets the package's attribute to the module (a later ``from .tune import ...`` would
# turn ``gemmtune.tune`` into the module), unless the function was bound first, as here. Neither
# imports Triton.
from .tune import TuneResult, tune  # noqa: E402
from .capture import Capture, capture  # noqa: E402


def __getattr__(name: str):
    import importlib

    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    elif name in ("nn", "pdl"):
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "__version__", "capture", "Capture", "tune_model", "save_patched", "load_patched", "matmul", "compile_mm", "compile_bmm",
    "load", "Dispatcher", "patch", "nn", "families", "space", "default_choice", "interpreter_enabled",
    "tune", "TuneResult", "DeviceInfo", "Problem", "Choice", "TileConfig", "SplitKConfig", "SkinnyConfig",
    "DecomposeKConfig", "AtenConfig", "Epilogue", "scaled_mm", "refresh_weights", "fuse_linears", "unfuse", "pdl",
    "gate_eager",
]
