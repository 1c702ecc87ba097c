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

__version__ = "0.1.0"

from .api import default_choice, families, interpreter_enabled, matmul, space
from .device import DeviceInfo
from .problem import Problem
from .configs import AtenConfig, Choice, DecomposeKConfig, SkinnyConfig, SplitKConfig, TileConfig
from .epilogue import Epilogue
from .scaled import scaled_mm
from .tune import TuneResult, tune
from . import nn
from .dispatch import Dispatcher, compile_bmm, compile_mm, load
from .nn import patch
from .capture import Capture, capture
from .modeltune import load_patched, save_patched, tune_model

__all__ = [
    "__version__", "capture", "Capture", "tune_model", "save_patched", "load_patched", "matmul", "compile_mm", "compile_bmm",
    "load", "Dispatcher", "patch", "nn", "families", "space", "default_choice", "interpreter_enabled",
    "tune", "TuneResult", "DeviceInfo", "Problem", "Choice", "TileConfig", "SplitKConfig", "SkinnyConfig",
    "DecomposeKConfig", "AtenConfig", "Epilogue", "scaled_mm",
]
