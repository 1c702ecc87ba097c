"""splitk: split-K in one launch, for small M*N with a long K.

Each program reduces one K-slice of one output tile into fp32; the last program to
arrive at a tile combines the partials in fp32 and writes the output (see
tiled.py). This is the tool for shapes like 32x32x28672, where a plain tiled mm
has one program for the whole output and leaves 131 of 132 SMs idle.

``SplitKConfig.deterministic`` picks a fixed reduction order (bitwise reproducible
run to run) or fp32 atomics (order varies, the last program reads one tile instead
of S). A deterministic grid that one wave holds (at most one program per SM) is
summed by all of a tile's programs at once after they have all stored their partial
(SPLIT_MODE 3, ``tile_epilogue.parallel_fixup``, a cooperative launch); a larger one by
its last arriver, slice 0..S-1 (SPLIT_MODE 1). Measured on an H100 (2026-11-26,
benchmarks/results/2026-11-26-h100-splitk-reduce): 128x128x32768 bf16 with 64x64 tiles
and S=32 took 27 us the mode-1 way and 13 us the mode-3 way, the same as the atomics.
"""

from __future__ import annotations

import threading

import torch

from ..problem import Problem
from ..configs import SplitKConfig
from ..epilogue import EpilogueArgs
from .base import Unsupported
from .launch_args import gpu_sm_count, stream_key
from .tiled import launch_tiled, prepare_direct, tile_kwargs
# The family's pure part (configs, space, constraint, launch plan, model row): kept in splitk_spec so that
# planning imports no Triton (kernels.spec); the family's names as before.
from .splitk_spec import (  # noqa: F401
    BMM_WHY, CONFIG, DEFAULT_TILES, MAX_WORKSPACE_BYTES, MIN_SLICE, NAME, SPLITS, constraint,
    features_row, k_per_split, plan, raw_configs, scaled, space, validate)


def _default_stream_key(device: torch.device) -> int:
    index = device.index if device.index is not None else torch.cuda.current_device()
    return int(torch.cuda.default_stream(index).cuda_stream)


def _capturing(device: torch.device) -> bool:
    return device.type == "cuda" and torch.cuda.is_current_stream_capturing()


class SplitKWorkspace:
    """Scratch for the fused split-K kernel: fp32 partials and per-tile arrival counters.

    The kernel returns counters (and the atomic-mode accumulator) to zero itself, so
    one workspace serves any number of launches on one stream, CUDA-graph replays
    included. Eager launches keep buffers per (device, current stream): launches on two
    streams never share scratch, so a dispatcher may run on concurrent streams.

    Inside a CUDA-graph capture a launch takes a buffer that eager launches have already
    zeroed (this stream's, else the default stream's, else another's: the usual warm-up runs
    on a side stream), so that the graph needs no fill node. Only where none is large enough
    is one allocated in the capture; its fill is then a node of that graph, and it is zeroed
    on its first eager use, and a later capture that takes it before then zeroes it in its own
    graph too. A graph shares its buffer with the stream it came from: replay it
    where that stream's eager launches cannot run at the same time (replays of two graphs
    on two concurrent streams share too).

    Buffers only grow, by at least doubling, and a buffer that a larger one replaces is kept
    (``retired_bytes``), never freed: a CUDA graph captured with it writes there on every replay,
    and freed memory would be handed to another tensor that the replay then overwrites. Doubling
    bounds what is kept to the size of the live buffer.
    """

    def __init__(self) -> None:
        self._bufs: dict[tuple, torch.Tensor] = {}
        self._retired: list[torch.Tensor] = []
        # Slots whose buffer was allocated inside a CUDA-graph capture: its zero fill is a node
        # of that graph and has not run, so an eager launch zeroes it first, and no other
        # capture borrows it.
        self._unzeroed: set[tuple] = set()
        # Two threads growing one slot at once would both retire the old buffer and drop one
        # new buffer unretired (perhaps already captured in a graph).
        self._lock = threading.Lock()

    def _get(self, key: tuple, numel: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        slot = (key, device, stream_key(device))
        buf = self._bufs.get(slot)
        if buf is not None and buf.numel() >= numel and slot not in self._unzeroed:
            return buf  # the common case: no lock
        with self._lock:
            if _capturing(device):
                return self._for_capture(slot, numel, dtype)
            buf = self._bufs.get(slot)
            if buf is None or buf.numel() < numel:
                buf = self._allocate(slot, numel, dtype)
            elif slot in self._unzeroed:
                buf.zero_()
            self._unzeroed.discard(slot)
            return buf

    def _allocate(self, slot: tuple, numel: int, dtype: torch.dtype) -> torch.Tensor:
        old = self._bufs.get(slot)
        if old is not None:
            self._retired.append(old)
            numel = max(numel, 2 * old.numel())
        buf = torch.zeros(max(numel, 1), dtype=dtype, device=slot[1])
        self._bufs[slot] = buf
        return buf

    def _for_capture(self, slot: tuple, numel: int, dtype: torch.dtype) -> torch.Tensor:
        key, device, _ = slot
        own = self._bufs.get(slot)
        if own is not None and own.numel() >= numel:
            if slot in self._unzeroed:
                # Allocated in a capture, this one or an earlier one that no eager launch on this
                # stream followed (two captures before any warm-up at that size). Only the graph
                # that allocated it holds its fill node, and another graph may replay first: this
                # graph zeroes it too (one memset node; the kernels leave it zeroed anyway, so a
                # second fill in one graph is only redundant).
                own.zero_()
            return own
        default = _default_stream_key(device)
        lenders = sorted((s for s, b in self._bufs.items()
                          if s[:2] == (key, device) and s not in self._unzeroed and b.numel() >= numel),
                         key=lambda s: s[2] != default)
        if lenders:
            return self._bufs[lenders[0]]
        buf = self._allocate(slot, numel, dtype)
        self._unzeroed.add(slot)
        return buf

    @property
    def retired_bytes(self) -> int:
        """Bytes held by buffers that larger ones replaced (kept for captured CUDA graphs)."""
        return sum(t.numel() * t.element_size() for t in self._retired)

    def interrupted(self, device: torch.device) -> None:
        """A launch that used this workspace on ``device`` and the current stream raised: it may
        have stopped part way (an exception inside the grid, Ctrl-C in the CPU interpreter), with
        arrival counters and atomic partials left behind, which made the next launch through this
        workspace wrong (max error 16-24 on 16x64x16, session 45's CPU hunt). Those buffers are
        zeroed at their next eager use."""
        here = (device, stream_key(device))
        with self._lock:
            self._unzeroed.update(s for s in self._bufs if s[1:] == here)

    def partials(self, numel: int, deterministic: bool, device: torch.device) -> torch.Tensor:
        # Separate buffers: mode 1 leaves partials behind, mode 2 needs zeros.
        return self._get(("ws", deterministic), numel, torch.float32, device)

    def counters(self, numel: int, device: torch.device) -> torch.Tensor:
        return self._get(("locks",), numel, torch.int32, device)


# The CPU interpreter runs SPLIT_MODE 3 without its wait (programs run one after another there) and
# has no SMs: grids of up to this many programs take mode 3 on it, larger ones mode 1, so that the
# CPU tests run both deterministic paths.
INTERPRETER_WAVE = 16


def one_wave(device: torch.device) -> int:
    """How many programs the deterministic split-K runs as one resident wave (SPLIT_MODE 3) on
    ``device``: its SM count on a GPU (one program per SM always fits: every config's shared memory
    and registers are checked against one SM's; meta operands: the current GPU's, launch_args.gpu_sm_count),
    INTERPRETER_WAVE on the CPU."""
    sms = gpu_sm_count(device)
    return INTERPRETER_WAVE if sms is None else sms


def split_mode(cfg: SplitKConfig, programs: int, wave: int) -> int:
    """The tiled kernel's SPLIT_MODE for a split launch of ``programs``: 2 (atomics) unless
    deterministic; then 3 if one wave of ``wave`` programs holds the grid, else 1.

    >>> from gemmtune.configs import SplitKConfig
    >>> [split_mode(SplitKConfig(64, 64, 64, 3, 4, 8, 32, det), 128, 132) for det in (False, True)]
    [2, 3]
    >>> split_mode(SplitKConfig(64, 64, 64, 3, 4, 8, 32, True), 256, 132)
    1
    """
    if not cfg.deterministic:
        return 2
    return 3 if programs <= wave else 1


def cooperative_refused(error: BaseException) -> bool:
    """Whether a launch failed because its cooperative grid could not be resident at once (CUDA's
    "too many blocks in cooperative launch": fewer SMs than counted, e.g. under MPS or green
    contexts). Nothing ran then, so the same launch can be made the SPLIT_MODE 1 way instead."""
    return isinstance(error, RuntimeError) and "cooperative" in str(error).lower()


def _in_mode(launch, mode: int):
    """``(launch(mode), mode)``; when the GPU refuses SPLIT_MODE 3's cooperative launch,
    ``(launch(1), 1)``: the same deterministic sum, by the last arriver. Other errors raise."""
    try:
        return launch(mode), mode
    except RuntimeError as e:
        if mode != 3 or not cooperative_refused(e):
            raise
        return launch(1), 1


def prepare(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, cfg: SplitKConfig, *,
            allow_tf32: bool = False, workspace: SplitKWorkspace | None = None,
            epilogue: EpilogueArgs | None = None):
    """Launch once into ``out`` and return ``(matches(a, b), launch(a, b, out))`` for cheap
    repeated launches at this problem (kernels.tiled.prepare_direct), or None; with an
    ``epilogue`` both take it as a keyword (``epilogue=e``). The workspace buffers are
    looked up on every launch: they may have grown meanwhile."""
    p = plan(a.shape[0], b.shape[1], a.shape[1], cfg)
    per, splits, numel, tiles = p["k_per_split"], p["splits"], p["workspace_numel"], p["tiles"]
    kw = tile_kwargs(cfg, allow_tf32)
    if splits == 1:
        d = prepare_direct(a, b, out, k_per_split=a.shape[1], epilogue=epilogue, **kw)
        return None if d is None else (d.matches, d)
    if workspace is None:
        return None  # a fresh workspace per call: nothing to gain
    det, dev = cfg.deterministic, a.device
    partials, counters = workspace.partials, workspace.counters
    d, mode = _in_mode(lambda m: prepare_direct(a, b, out, k_per_split=per, split_mode=m,
                                                ws=partials(numel, det, dev), locks=counters(tiles, dev),
                                                epilogue=epilogue, **kw),
                       split_mode(cfg, tiles * splits, one_wave(dev)))
    if d is None:
        return None

    def matches(a, b, epilogue=None):
        return d.matches(a, b, partials(numel, det, dev), epilogue)

    def launch(a, b, c, epilogue=None):
        ws, locks = partials(numel, det, dev), counters(tiles, dev)
        # The prepared launch in its mode; a later refusal (the GPU shared since) the mode-1 way.
        _in_mode(lambda m: d(a, b, c, ws, locks, epilogue) if m == mode else
                 launch_tiled(a, b, c, k_per_split=per, split_mode=m, ws=ws, locks=locks, epilogue=epilogue, **kw),
                 mode)
    return matches, launch


def run(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, cfg: SplitKConfig, *,
        allow_tf32: bool = False, workspace: SplitKWorkspace | None = None,
        epilogue: EpilogueArgs | None = None) -> None:
    """Split-K into ``out``; the ``epilogue`` (gemmtune.epilogue) runs once per tile, on the
    complete fp32 sum, in the program that writes the tile."""
    p = plan(a.shape[0], b.shape[1], a.shape[1], cfg)
    per, splits, numel, tiles = p["k_per_split"], p["splits"], p["workspace_numel"], p["tiles"]
    kw = tile_kwargs(cfg, allow_tf32)
    if splits == 1:
        launch_tiled(a, b, out, k_per_split=a.shape[1], epilogue=epilogue, **kw)
        return
    ws = workspace or SplitKWorkspace()  # a fresh one is correct, only slower
    try:
        _in_mode(lambda m: launch_tiled(a, b, out, k_per_split=per, split_mode=m,
                                        ws=ws.partials(numel, cfg.deterministic, a.device),
                                        locks=ws.counters(tiles, a.device), epilogue=epilogue, **kw),
                 split_mode(cfg, tiles * splits, one_wave(a.device)))
    except BaseException:
        ws.interrupted(a.device)
        raise


def inductor_export(choice, problem: Problem, sm_count: int | None = None) -> dict:
    raise Unsupported("splitk: Inductor has no fused split-K mm template "
                      "(its decompose_k is gemmtune's decompose_k family)")
