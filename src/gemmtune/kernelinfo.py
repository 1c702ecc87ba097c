"""What a kernel choice compiles to, without a GPU: registers, spills, shared memory, load widths.

Why: a kernel below its floor usually shows why in its compiled code (narrow global loads, no
software pipeline, no wgmma, spills: the tiled kernel's 1000^3 case lost 4x to scalar loads;
split-K on 200x200x20000 ran at 217 registers and 12.5% occupancy). Triton compiles for any
NVIDIA target on a machine with no GPU (its wheel ships ptxas, cuobjdump and nvdisasm), so these
facts cost no device time: ``gemmtune inspect CHOICE --shape MxNxK:dtype --arch 90``. From the
SASS, "LDG in flight": how many global loads a warp issues before it must wait on one, the
memory-level parallelism a bandwidth-bound loop lives on (``ldg_in_flight``).

How: the choice runs as in the tuner (``kernels.run_choice``) on CPU tensors of the problem's
shape and layout (never initialised, never read), with every Triton launch intercepted
(``kernels.tiled.offline``). Each launch is then specialised by Triton's own binder (alignment
and the value-1 rules of the installed triton, as if the tensors were on a GPU: CPU
allocations of 16 bytes or more are 16-byte aligned, as CUDA's are) and compiled for
the target. Triton's private compile internals differ between versions; where they do not
fit, the error says so.

The speed itself still needs the GPU: this says what the compiler made, not how fast it runs.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .configs import Choice
from .device import BUILTIN
from .problem import Problem

# Counted in the PTX: (label, pattern).
PTX_COUNTS = (
    ("ld.global.v4", r"\bld\.global[.\w:]*\.v4\."),
    ("ld.global.v2", r"\bld\.global[.\w:]*\.v2\."),
    ("ld.global scalar", r"\bld\.global(?![.\w:]*\.v[24]\.)[.\w:]*\s"),
    ("cp.async", r"\bcp\.async\.(?:ca|cg)\."),
    ("tma loads", r"\bcp\.async\.bulk\.tensor\.\w+\.shared"),
    ("wgmma", r"\bwgmma\.mma_async\."),
    ("mma.sync", r"\bmma\.sync\."),
    ("atom/red", r"\b(?:atom|red)\.global\."),
    ("st.global", r"\bst\.global\."),
    # Barriers: a layout conversion through shared memory puts them in a loop. skinny's 3-D one-row
    # product had 4-10 in its K loop, its -flat twin none (session 39).
    ("bar.sync", r"\b(?:bar|barrier)\.sync\b"),
)
_RES = re.compile(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)")


# Shared memory one block may use, by compute capability (CUDA's per-block opt-in maximum): a
# kernel asking for more compiles but cannot launch (triton raises OutOfResources at the launch).
# inspect compiles without launching, so it says so beside the figure (the server/inspect hunt:
# 1.5 MB was shown as a plain number).
# The built-in devices' limits (device.BUILTIN: sm_80, sm_90), and the archs no built-in device has.
MAX_SHARED_PER_BLOCK = {86: 101376, 87: 166912, 89: 101376,
                        **{10 * d.capability[0] + d.capability[1]: d.smem_per_block for d in BUILTIN}}


def shared_note(arch: int, shared_bytes: int) -> str | None:
    """Why a kernel of ``shared_bytes`` cannot launch on ``arch``; None where it fits or the
    limit is not known here.

    >>> shared_note(90, 1572864)
    "needs 1572864 B of shared memory, above sm_90's 232448 B: it cannot launch"
    >>> shared_note(90, 98304) is None, shared_note(75, 10**7) is None
    (True, True)
    """
    limit = MAX_SHARED_PER_BLOCK.get(arch)
    if limit is None or shared_bytes <= limit:
        return None
    return f"needs {shared_bytes} B of shared memory, above sm_{arch}'s {limit} B: it cannot launch"


@dataclass
class KernelInfo:
    """One compiled launch: its kernel's name, target, launch grid and what the compiler made."""
    name: str
    arch: int
    grid: tuple
    num_warps: int
    num_stages: int | None
    registers: int | None
    spill_bytes: int | None   # local memory per thread (spills and stack arrays)
    shared_bytes: int
    counts: dict = field(default_factory=dict)
    asm: dict = field(default_factory=dict, repr=False)

    def row(self) -> dict:
        return {"kernel": self.name, "arch": f"sm_{self.arch}", "grid": "x".join(map(str, self.grid)),
                "warps": self.num_warps, "stages": self.num_stages, "registers": self.registers,
                "spill B": self.spill_bytes, "shared B": self.shared_bytes, **self.counts,
                **({"note": note} if (note := shared_note(self.arch, self.shared_bytes)) else {})}


def count_ptx(ptx: str) -> dict:
    """PTX_COUNTS over ``ptx``: instruction lines only (``//`` comments and directives skipped).

    >>> count_ptx("ld.global.v4.b32 {%r1,%r2,%r3,%r4}, [%rd1];\\n ld.global.b16 %rs1, [%rd2];")["ld.global.v4"]
    1
    >>> count_ptx("ld.global.nc.L1::evict_last.v2.b32 {%r1,%r2}, [%rd1];")["ld.global.v2"]
    1
    >>> count_ptx("bar.sync 0;\\n barrier.sync 1;\\n // bar.sync in a comment")["bar.sync"]
    2
    """
    body = "\n".join(line.split("//")[0] for line in ptx.splitlines())
    return {label: len(re.findall(pat, body)) for label, pat in PTX_COUNTS}


_SASS_INSN = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);")
_SASS_REG = re.compile(r"\bR(\d+)(?:\.64)?\b")
_LDG_WIDTH = {".128": 4, ".64": 2}


def _sass_regs(operand_text: str) -> set[int]:
    """The general registers an instruction's operands name (a ``.64`` pair counts both)."""
    regs = set()
    for m in _SASS_REG.finditer(operand_text):
        n = int(m.group(1))
        regs.update((n, n + 1) if m.group(0).endswith(".64") else (n,))
    return regs


def ldg_in_flight(sass: str) -> int:
    """The most global loads (LDG) a warp has issued before it must wait on one of them: walking
    the SASS in order, a load is outstanding from its LDG until an instruction names one of its
    destination registers (a use, or a write that has to wait for it); a branch, barrier or exit
    ends every outstanding load. A bandwidth-bound loop needs many loads in flight: skinny's
    BN2-BK2048-W2 -flat-sum strip kept 2 of a step's 12 in flight (one 64-bit pointer a chunk) and
    ran at 38% of DRAM bandwidth, where the same tile built from a row pointer plus immediates
    kept 6 and ran at 61% (H200, session 40).

    >>> ldg_in_flight('''
    ...   /*0010*/  LDG.E.128 R4, desc[UR6][R2.64] ;
    ...   /*0020*/  @!P1 LDG.E.128 R8, desc[UR6][R2.64+0x400] ;
    ...   /*0030*/  FFMA R20, R4, R5, R20 ;
    ...   /*0040*/  LDG.E.128 R4, desc[UR6][R2.64+0x800] ;
    ...   /*0050*/  FFMA R20, R9, R6, R20 ;
    ...   /*0060*/  BRA `(.L_x_0) ;
    ... ''')
    2
    """
    outstanding: list[set[int]] = []
    peak = 0
    for m in _SASS_INSN.finditer(sass):
        op, operands = m.group(1), m.group(2)
        if op.startswith("LDG"):
            addr = _sass_regs(operands.split(",", 1)[1]) if "," in operands else set()
            outstanding = [regs for regs in outstanding if not regs & addr]
            dest = re.match(r"\s*R(\d+)", operands)
            if dest:
                width = next((w for suffix, w in _LDG_WIDTH.items() if suffix in op), 1)
                outstanding.append(set(range(int(dest.group(1)), int(dest.group(1)) + width)))
                peak = max(peak, len(outstanding))
        elif op.startswith(("BRA", "BAR", "EXIT", "RET", "CALL", "WARPSYNC")):
            outstanding = []
        elif outstanding:
            named = _sass_regs(operands)
            outstanding = [regs for regs in outstanding if not regs & named]
    return peak


def _run_tool(cubin: bytes, knob: str, args: list[str], tool: str | None) -> subprocess.CompletedProcess | None:
    """Run one of the CUDA tools Triton ships (``knob``: its name under ``triton.knobs.nvidia``,
    unless ``tool`` gives the path) on ``cubin``, written to a temporary file; None when the tool
    is missing or does not run."""
    import tempfile
    if tool is None:
        try:
            from triton import knobs
            tool = getattr(knobs.nvidia, knob).path
        except Exception:  # another triton's API: no such fact, the rest still stands
            return None
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        try:
            return subprocess.run([tool, *args, f.name], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return None


def sass(cubin: bytes, tool: str | None = None) -> str | None:
    """A cubin's SASS from ``nvdisasm`` (the one Triton ships), or None when that tool is missing."""
    r = _run_tool(cubin, "nvdisasm", ["-c"], tool)
    return r.stdout if r is not None and r.returncode == 0 else None


def resources(cubin: bytes, tool: str | None = None) -> tuple[int | None, int | None]:
    """(registers, local bytes per thread: its stack frame plus other local memory) of a cubin,
    from ``cuobjdump --dump-resource-usage`` (the one Triton ships), or (None, None) when that tool
    is missing."""
    r = _run_tool(cubin, "cuobjdump", ["--dump-resource-usage"], tool)
    m = _RES.search(r.stdout) if r is not None else None
    # STACK counted too: ptxas puts register spills in the stack frame, so LOCAL alone read 0 for a
    # kernel at 255 registers with a 7,840-byte frame and 3,618 STL instructions (inspect said
    # "spill B 0" for triton_mm:BM512-BN512-BK256-S3-W8-G8).
    return (int(m.group(1)), int(m.group(2)) + int(m.group(4))) if m else (None, None)


def operands(problem: Problem) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Uninitialised CPU operands of ``problem`` in its layouts (nothing reads them); a bmm's are
    3-D, an operand laid out ``bcast_*`` one matrix expanded over the batch (batch stride 0).

    >>> from gemmtune.problem import Problem
    >>> a, b, out = operands(Problem.from_sizes(8, 16, 32, "fp16", layout_b="bcast_col", op="bmm", batch=4))
    >>> tuple(a.shape), tuple(b.shape), b.stride(), tuple(out.shape)
    ((4, 8, 32), (4, 32, 16), (0, 1, 32), (4, 8, 16))
    """
    m, n, k = problem.m, problem.n, problem.k
    batch = problem.batch if problem.op == "bmm" else None
    a = _matrix(m, k, problem.layout_a, problem.torch_dtype, batch)
    b = _matrix(k, n, problem.layout_b, problem.torch_dtype_b, batch)
    return a, b, torch.empty(*(() if batch is None else (batch,)), m, n, dtype=problem.torch_out_dtype)


def _matrix(rows: int, cols: int, layout: str, dtype: torch.dtype, batch: int | None) -> torch.Tensor:
    """A (rows x cols) operand laid out as ``layout`` ('row', 'col', or a bmm's 'bcast_' + one),
    with a leading batch dim when ``batch`` is given."""
    one = layout.startswith("bcast_")
    col = layout.removeprefix("bcast_") == "col"
    lead = () if batch is None else (1 if one else batch,)
    t = torch.empty(*lead, cols, rows, dtype=dtype).transpose(-1, -2) if col else torch.empty(*lead, rows, cols, dtype=dtype)
    return t.expand(batch, rows, cols) if one else t


def _compile(fn, grid, args, kwargs, arch: int) -> KernelInfo:
    """Specialise one intercepted launch with the installed triton's binder and compile it for
    ``sm_<arch>``."""
    try:
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource, compile as tcompile, make_backend
        from triton.runtime.jit import create_function_from_signature
    except ImportError as e:
        raise RuntimeError(f"this triton lacks the compile internals inspect uses: {e}") from None
    target = GPUTarget("cuda", arch, 32)
    backend = make_backend(target)
    kwargs = dict(kwargs)
    try:
        binder = create_function_from_signature(fn.signature, fn.params, backend)
        bound, spec, options = binder(*args, **kwargs)
        options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound, spec, options)
    except (AttributeError, TypeError) as e:
        import triton
        raise RuntimeError(f"triton {triton.__version__}: its launch internals differ from the ones inspect "
                           f"knows ({type(e).__name__}: {e})") from None
    k = tcompile(ASTSource(fn, signature, constexprs, attrs), target=target, options=options.__dict__)
    regs, local = resources(k.asm["cubin"]) if "cubin" in k.asm else (None, None)
    counts = count_ptx(k.asm.get("ptx", ""))
    code = sass(k.asm["cubin"]) if "cubin" in k.asm else None
    if code is not None:
        counts["LDG in flight"] = ldg_in_flight(code)
    md = k.metadata
    return KernelInfo(name=getattr(md, "name", fn.__name__), arch=arch,
                      grid=tuple(grid) if isinstance(grid, (tuple, list)) else (grid,),
                      num_warps=md.num_warps, num_stages=getattr(md, "num_stages", None),
                      registers=regs, spill_bytes=local, shared_bytes=md.shared,
                      counts=counts, asm=dict(k.asm) | ({"sass": code} if code is not None else {}))


def inspect_choice(choice: Choice | str, problem: Problem, arch: int = 90) -> list[KernelInfo]:
    """Every Triton kernel ``choice`` launches at ``problem``, compiled for ``sm_<arch>``; [] for
    a choice that launches none (cuBLAS). Needs TRITON_INTERPRET unset."""
    from . import kernels
    from .kernels import tiled
    from .kernels.splitk import SplitKWorkspace
    if tiled._INTERPRETED:
        raise RuntimeError("inspect compiles real kernels: run it without TRITON_INTERPRET=1")
    if isinstance(choice, str):
        choice = Choice.parse(choice)
    if choice.config is not None:
        kernels.get(choice.family).validate(problem, choice.config)
        if getattr(choice.config, "pdl", False):  # (on a GPU, skinny checks the device itself)
            from .kernels.skinny import check_pdl_device
            check_pdl_device((arch // 10, arch % 10), f"sm_{arch}")
    a, b, out = operands(problem)
    with tiled.offline() as launches:
        # The problem's own TF32 setting, as the tuner runs it (bench.measure): without it a "+tf32"
        # fp32 problem was inspected as 3xTF32 products and, for a pad+ choice, on a K-major copy of
        # B (precision.pads_b_kmajor) where the tuned kernel read TF32 products off a row-major copy
        # (Problem.padded).
        kernels.run_choice(choice, a, b, out, allow_tf32=problem.allow_tf32, workspace=SplitKWorkspace())
    return [_compile(fn, grid, args, kwargs, arch) for fn, grid, args, kwargs in launches]


def dump(infos: list[KernelInfo], folder: str | Path, stem: str) -> list[Path]:
    """Write each kernel's TTIR, TTGIR, LLIR, PTX and SASS under ``folder`` as ``stem.<i>.<kind>``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, info in enumerate(infos):
        for kind in ("ttir", "ttgir", "llir", "ptx", "sass"):
            if kind in info.asm:
                p = folder / f"{stem}.{i}.{kind}"
                p.write_text(info.asm[kind])
                paths.append(p)
    return paths


__all__ = ["KernelInfo", "count_ptx", "ldg_in_flight", "sass", "resources", "operands", "inspect_choice", "dump",
           "PTX_COUNTS"]
