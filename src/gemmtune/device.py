"""Device facts that config spaces need: SMs, shared memory, registers, capability.

They come from torch when a GPU is present (``DeviceInfo.from_torch()``), and
otherwise from a built-in table chosen by name (``DeviceInfo.lookup("h100")``),
so that config spaces and the models can be computed on a CPU-only machine.

The table's limits are the CUDA programming guide's per-architecture numbers;
the peak rates are datasheet figures used only as priors by the analytic model
(the benchmark measures its own ceilings on the machine).

Example::

    >>> from gemmtune.device import DeviceInfo
    >>> DeviceInfo.lookup("H200").sm_count
    132
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

import torch


@dataclass(frozen=True)
class DeviceInfo:
    name: str
    sm_count: int
    smem_per_block: int  # bytes, the opt-in maximum one program (CTA) may use
    regs_per_sm: int
    regs_per_block: int
    capability: tuple[int, int]
    l2_bytes: int
    # Datasheet priors (dense, no sparsity); 0 when unknown.
    peak_tflops_16: float = 0.0
    peak_tflops_32: float = 0.0
    mem_bw_gbps: float = 0.0

    @property
    def capability_str(self) -> str:
        return f"{self.capability[0]}.{self.capability[1]}"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["capability"] = list(self.capability)
        return d

    @classmethod
    def from_torch(cls, index: int | None = None) -> "DeviceInfo":
        """Facts of the visible CUDA device ``index`` (default: current), read from torch.

        Rates come from the built-in table when the name matches one of its GPUs.
        """
        if not torch.cuda.is_available():
            raise RuntimeError("no CUDA device is visible; use DeviceInfo.lookup(name) on a CPU")
        idx = torch.cuda.current_device() if index is None else index
        p = torch.cuda.get_device_properties(idx)
        known = _match(p.name)
        smem = getattr(p, "shared_memory_per_block_optin", 0) or (known.smem_per_block if known else 49152)
        regs_sm = getattr(p, "regs_per_multiprocessor", 0) or 65536
        return cls(
            name=p.name,
            sm_count=p.multi_processor_count,
            smem_per_block=int(smem),
            regs_per_sm=int(regs_sm),
            regs_per_block=65536,
            capability=(p.major, p.minor),
            l2_bytes=int(getattr(p, "L2_cache_size", 0) or (known.l2_bytes if known else 0)),
            peak_tflops_16=known.peak_tflops_16 if known else 0.0,
            peak_tflops_32=known.peak_tflops_32 if known else 0.0,
            mem_bw_gbps=known.mem_bw_gbps if known else 0.0,
        )

    @classmethod
    def lookup(cls, name: str) -> "DeviceInfo":
        """A built-in device by (fuzzy) name: 'h100', 'NVIDIA H200', 'a100-80gb', ...

        Raises ValueError naming the known devices when nothing matches.
        """
        known = _match(name)
        if known is None:
            raise ValueError(
                f"unknown GPU {name!r}; built-in devices: h100, h200, a100 "
                f"({', '.join(d.name for d in BUILTIN)}; pass one of these, or run on the GPU so its "
                "facts are read from torch)"
            )
        return known


# Limits: CUDA C programming guide, compute capability tables (8.0 / 9.0).
# Rates: NVIDIA datasheets (SXM parts, dense). L2: as torch reports it.
BUILTIN: tuple[DeviceInfo, ...] = (
    DeviceInfo("NVIDIA H100 80GB HBM3", 132, 232448, 65536, 65536, (9, 0), 50 * 2**20,
               989.0, 67.0, 3350.0),
    DeviceInfo("NVIDIA H200", 132, 232448, 65536, 65536, (9, 0), 60 * 2**20,
               989.0, 67.0, 4800.0),
    DeviceInfo("NVIDIA A100-SXM4-80GB", 108, 166912, 65536, 65536, (8, 0), 40 * 2**20,
               312.0, 19.5, 2039.0),
)

# Device memory of the built-in GPUs (datasheets: 80 GB HBM3, 141 GB HBM3e, 80 GB HBM2e), for
# refusing problems that cannot be allocated when no GPU is present to ask.
BUILTIN_MEMORY_BYTES: dict[str, int] = {
    "NVIDIA H100 80GB HBM3": 80 * 10**9, "NVIDIA H200": 141 * 10**9, "NVIDIA A100-SXM4-80GB": 80 * 10**9,
}

_PATTERNS = (
    (re.compile(r"h100", re.I), 0),
    (re.compile(r"h200", re.I), 1),
    (re.compile(r"a100", re.I), 2),
)


def _match(name: str) -> DeviceInfo | None:
    for pat, i in _PATTERNS:
        if pat.search(name):
            return BUILTIN[i]
    return None


def named_exactly(name: str) -> DeviceInfo | None:
    """The built-in device called exactly ``name`` (its full name or short one, case and
    surrounding spaces aside), else None: unlike ``DeviceInfo.lookup``'s fuzzy match, which takes
    'NVIDIA H100 PCIe' (114 SMs) for the 132-SM SXM part.

    >>> named_exactly(" nvidia h200 ").sm_count, named_exactly("h100").name, named_exactly("NVIDIA H100 PCIe")
    (132, 'NVIDIA H100 80GB HBM3', None)
    """
    name = name.strip().lower()
    return next((BUILTIN[i] for pat, i in _PATTERNS if name in (pat.pattern, BUILTIN[i].name.lower())), None)


def current_or(name: str | None = None) -> DeviceInfo:
    """The visible GPU when there is one, else the built-in device ``name`` (default H100).

    This is the documented fallback for CPU-only machines: config spaces are
    computed for the named GPU so they match what a later GPU run would use.
    """
    if name is not None:
        return DeviceInfo.lookup(name)
    if torch.cuda.is_available():
        return DeviceInfo.from_torch()
    return BUILTIN[0]
