"""Configs, choices and the pure functions that build, scale and prune config spaces.

Everything here is a pure function of (problem, device): no CUDA is touched, so
spaces can be listed and filtered on a CPU-only machine.

* ``TileConfig``      a tiled Triton mm config (BLOCK_M/N/K, stages, warps, GROUP_M)
* ``StaticConfig``    triton_static's tile plus its K loop's form (carried, indexed, indexed + odd N wrapped)
* ``SplitKConfig``    a TileConfig plus the K split and the reduction mode
* ``SkinnyConfig``    the decode (skinny-M) bandwidth kernel's strip, K split and inner product
* ``PersistentConfig`` the persistent TMA kernel's tile plus warp specialisation / loop flattening
* ``DecomposeKConfig`` the k-split of DecomposeK, its only parameter
* ``AtenConfig``      torch.mm, no parameters
* ``Choice``          (family, config) with one stable id, e.g. ``triton_mm:BM128-BN128-BK64-S3-W4-G8``

Example::

    >>> from gemmtune.configs import Choice
    >>> Choice.parse("decompose_k:s16").config.split
    16
"""

from __future__ import annotations

import functools
import itertools
import re
from dataclasses import asdict, dataclass, replace
from typing import Union

from .device import DeviceInfo
from .problem import FP8_DTYPES, Problem, element_size

POW2_BLOCKS = (16, 32, 64, 128, 256)
# fp32 accumulator registers per thread above which register pressure spills.
# The per-thread cap is 255 and loads, addresses and the epilogue need the rest;
# 128 accumulators is the largest tile Triton's Hopper configs use (128x256, 8 warps).
MAX_ACC_REGS_PER_THREAD = 128
MIN_BLOCK = 16  # tl.dot needs every block dim >= 16
# fp8 (scaled_mm): Hopper's fp8 wgmma consumes K = 32 per instruction (32 bytes of K, as 16 bf16
# elements are), so fp8 tiles have BLOCK_K >= 32; a 16-deep fp8 tile would leave the instruction
# half empty or not compile. fp8 spaces are the 16-bit tiles with BLOCK_K doubled (``fp8_tile``):
# the same bytes of K per pipeline stage, the same shared memory, twice the K-depth per load.
FP8_MIN_BLOCK_K = 32


def next_pow2(x: int) -> int:
    return 1 if x <= 1 else 1 << (int(x) - 1).bit_length()


def cdiv(a: int, b: int) -> int:
    """ceil(a / b) for host code. ``triton.cdiv`` is a ConstexprFunction in newer Triton: a
    host call costs ~1.4 us (3.9, CPU) against ~40 ns here, which a launcher pays per GEMM and
    the exhaustive spaces pay tens of thousands of times."""
    return -(-a // b)


@dataclass(frozen=True, order=True)
class TileConfig:
    block_m: int
    block_n: int
    block_k: int
    num_stages: int
    num_warps: int
    group_m: int = 8

    @property
    def id(self) -> str:
        return (f"BM{self.block_m}-BN{self.block_n}-BK{self.block_k}"
                f"-S{self.num_stages}-W{self.num_warps}-G{self.group_m}")

    def params(self) -> dict:
        return asdict(self)


class _OnATile:
    """For configs that carry a tile's six fields first (block_m ... group_m) plus knobs of their
    own: the tile alone, as a TileConfig (its id, its shared-memory and register limits). Not a
    TileConfig subclass, so a family that takes a TileConfig never accepts these."""

    @property
    def tile(self) -> TileConfig:
        return TileConfig(self.block_m, self.block_n, self.block_k,
                          self.num_stages, self.num_warps, self.group_m)


@dataclass(frozen=True, order=True)
class SplitKConfig(_OnATile):
    block_m: int
    block_n: int
    block_k: int
    num_stages: int
    num_warps: int
    group_m: int = 8
    split_k: int = 2
    # True: partials summed in a fixed order (bitwise reproducible).
    # False: partials atomically added in fp32 (order, and so rounding, varies).
    deterministic: bool = True

    @property
    def id(self) -> str:
        return f"{self.tile.id}-SK{self.split_k}-{'det' if self.deterministic else 'atomic'}"

    def params(self) -> dict:
        return asdict(self)


@dataclass(frozen=True, order=True)
class SkinnyConfig:
    """The skinny (decode) family: one program per BLOCK_N column strip and K-slice.

    ``dot``: tl.dot on BLOCK_M >= 16 rows (masked past M), else a CUDA-core product.
    ``deterministic`` as in SplitKConfig (only read when ``split_k`` > 1).
    ``stream_k`` > 0: instead of strips x splits, exactly that many programs share all
    (strip, K-block) units evenly (stream-K; tl.dot, atomic reduction); ``split_k`` is then 1.
    ``pdl``: launched with programmatic dependent launch (Hopper and later; one K-slice, on the
    tl.dot path and both CUDA-core layouts, though only the CUDA-core strips were measured in a
    model: gemmtune.pdl): a program loads its first B tile, then waits for the kernel before it, so the
    weight's first bytes stream while that kernel finishes (kernels.skinny says what was measured).
    So B must be written by no kernel still running when it starts (the one launched just before
    it, or an earlier one that let its successors start early): a weight at inference, not a tensor
    computed in the same step (A, the bias and the residual may be). ``pad+`` is refused with it.
    ``flat``: the one-row CUDA-core path (BLOCK_M = 1) holds its product as a 2-D [BN, BK] tile
    with A as one [BK] vector, not as [1, BN, BK]; kernels.skinny says when each layout won.
    ``sum_each`` (``-flat-sum``, with ``flat`` only): that tile is summed over K at every step into
    one fp32 per column, rather than accumulated as a tile and summed once after the loop. With it
    a program may also take BLOCK_M = 2-8 rows, multiplied into B's tile one at a time."""
    block_m: int
    block_n: int
    block_k: int
    split_k: int = 1
    num_stages: int = 1
    num_warps: int = 4
    dot: bool = False
    deterministic: bool = True
    stream_k: int = 0
    pdl: bool = False
    flat: bool = False
    sum_each: bool = False

    @property
    def id(self) -> str:
        return (f"BM{self.block_m}-BN{self.block_n}-BK{self.block_k}-SK{self.split_k}"
                f"-S{self.num_stages}-W{self.num_warps}-{'dot' if self.dot else 'core'}"
                f"-{'det' if self.deterministic else 'atomic'}" + (f"-P{self.stream_k}" if self.stream_k else "")
                + ("-flat" if self.flat else "") + ("-sum" if self.sum_each else "")
                + ("-pdl" if self.pdl else ""))

    def params(self) -> dict:
        return asdict(self)


# triton_static's K-loop and edge forms (StaticConfig.form), each a different compiled loop of the
# same tile. Measured on an H200 (benchmarks/results/2026-11-30-h200-s45, call 6; static forms
# against Inductor's template at one config): no form wins everywhere.
# - "carried": K offsets carried from one iteration to the next, an odd N along a row-major B
#   masked (launch_args.edge_masks). Best at M = 1 (1x50257x768: 30.5 us, indexed 52.1) and on
#   even N.
# - "indexed": offsets recomputed from the K block index, whose trip count is then a compiled-in
#   constant (tiled.py's INDEXED_K). 96x50257x768: 70.9 us, carried 262.2 (3.7x).
# - "indexed_wrap": indexed, and an odd N wrapped (``rn % N``) with its BLOCK_N contiguity
#   stated rather than masked: Inductor's own loop (213 SASS instructions an iteration against
#   476 carried, on 777x1531x2048). 333x4097x1025: 38.8 us, carried 41.2, Inductor 36.7.
# Only the form's timing decides (tuning.plan.static_forms: the tuner times them beside a pick).
STATIC_FORMS = ("carried", "indexed", "indexed_wrap")
_FORM_SUFFIX = {"carried": "", "indexed": "-IX", "indexed_wrap": "-IXW"}


@dataclass(frozen=True, order=True)
class StaticConfig(_OnATile):
    """triton_static's config: a tile (TileConfig's six fields) and the K loop's form
    (STATIC_FORMS). A triton_static Choice built from a TileConfig holds the carried form
    (Choice normalises it), so ids and tables written before forms existed read as before.

    >>> StaticConfig(64, 128, 64, 4, 4, 8, "indexed_wrap").id
    'BM64-BN128-BK64-S4-W4-G8-IXW'
    """
    block_m: int
    block_n: int
    block_k: int
    num_stages: int
    num_warps: int
    group_m: int = 8
    form: str = "carried"

    def __post_init__(self) -> None:
        if self.form not in STATIC_FORMS:
            raise ValueError(f"triton_static form {self.form!r}: expected one of {', '.join(STATIC_FORMS)}")

    @property
    def id(self) -> str:
        return self.tile.id + _FORM_SUFFIX[self.form]

    def params(self) -> dict:
        # The carried form writes no key: tables stay readable by versions without forms.
        p = asdict(self)
        if self.form == "carried":
            del p["form"]
        return p


def tile_of(cfg):
    """The TileConfig a config on a tile runs (a StaticConfig's, a SplitKConfig's, ...); any other
    config (a TileConfig, DecomposeK's, cuBLAS's) as it is."""
    return cfg.tile if isinstance(cfg, _OnATile) else cfg


@dataclass(frozen=True, order=True)
class PersistentConfig(_OnATile):
    """The persistent TMA family (kernels.persistent): a tile, its pipeline, and two loop knobs.

    ``warp_spec``: Triton warp-specialises the tile loop (TMA producer / MMA consumer warps).
    ``flatten``: the tile and K loops are fused, so the pipeline runs across tiles.
    ``epi_split``: the epilogue stores the tile in that many column slices (1, 2 or 4), so the
    TMA store stages BLOCK_N / epi_split columns in shared memory instead of the whole tile;
    the room it frees can hold another stage of operand boxes. On an H100 with triton 3.6 it
    gained nothing over 1 (benchmarks/results/2026-11-27-h100-s18, section 1), so the default
    space leaves it at 1; a choice id (``-E2``, ``-E4``) still reaches it."""
    block_m: int
    block_n: int
    block_k: int
    num_stages: int
    num_warps: int
    group_m: int = 8
    warp_spec: bool = False
    flatten: bool = False
    epi_split: int = 1

    @property
    def id(self) -> str:
        return (self.tile.id + ("-WS" if self.warp_spec else "") + ("-F" if self.flatten else "")
                + (f"-E{self.epi_split}" if self.epi_split != 1 else ""))

    def params(self) -> dict:
        return asdict(self)


@dataclass(frozen=True, order=True)
class DecomposeKConfig:
    split: int

    @property
    def id(self) -> str:
        return f"s{self.split}"

    def params(self) -> dict:
        return asdict(self)


@dataclass(frozen=True, order=True)
class AtenConfig:
    @property
    def id(self) -> str:
        return ""

    def params(self) -> dict:
        return {}


Config = Union[TileConfig, StaticConfig, SplitKConfig, SkinnyConfig, PersistentConfig, DecomposeKConfig, AtenConfig]
CONFIG_TYPES = {"triton_mm": TileConfig, "triton_static": StaticConfig, "splitk": SplitKConfig, "skinny": SkinnyConfig,
                "persistent_tma": PersistentConfig, "decompose_k": DecomposeKConfig, "aten": AtenConfig}

_TILE_RE = re.compile(r"^BM(\d+)-BN(\d+)-BK(\d+)-S(\d+)-W(\d+)-G(\d+)$")
_STATIC_RE = re.compile(r"^BM(\d+)-BN(\d+)-BK(\d+)-S(\d+)-W(\d+)-G(\d+)(-IXW?)?$")
_SPLITK_RE = re.compile(r"^BM(\d+)-BN(\d+)-BK(\d+)-S(\d+)-W(\d+)-G(\d+)-SK(\d+)-(det|atomic)$")
_DK_RE = re.compile(r"^s(\d+)$")
_PERSISTENT_RE = re.compile(r"^BM(\d+)-BN(\d+)-BK(\d+)-S(\d+)-W(\d+)-G(\d+)(-WS)?(-F)?(?:-E(\d+))?$")
_SKINNY_RE = re.compile(r"^BM(\d+)-BN(\d+)-BK(\d+)-SK(\d+)-S(\d+)-W(\d+)-(dot|core)-(det|atomic)(?:-P(\d+))?(-flat)?(-sum)?(-pdl)?$")


PAD_PREFIX = "pad+"


@dataclass(frozen=True, order=True)
class Choice:
    """One runnable candidate: a kernel family and its config.

    ``pad=True`` (id prefix ``pad+``) first copies each operand whose data pointer or
    leading stride is not 16-byte aligned into an aligned buffer, then runs the
    family on the copy. It costs one extra read and write of those operands and an
    allocation per call, and buys 16-byte vector loads: Inductor pads the same way,
    and on an H200 it ran 4095^3 bf16 in 211 us where cuBLAS on the unaligned
    operands took 917 us.
    """

    family: str
    config: Config
    pad: bool = False

    def __post_init__(self) -> None:
        want = CONFIG_TYPES.get(self.family)
        if want is None:
            raise ValueError(f"unknown kernel family {self.family!r}; known: {', '.join(CONFIG_TYPES)}")
        if want is StaticConfig and type(self.config) is TileConfig:
            # triton_static's spaces are triton_mm's tiles: one spelling of the carried form, so
            # that a choice built either way is the same choice (equal, hashed alike).
            object.__setattr__(self, "config", StaticConfig(**asdict(self.config)))
        if not isinstance(self.config, want):
            raise TypeError(f"family {self.family} takes a {want.__name__}, "
                            f"not a {type(self.config).__name__}")
        # The id, made once: a plain str attribute (not a dataclass field, so not compared, hashed
        # or listed), which torch.compile reads as a constant. Traced as the f-string of the
        # config's ints, under dynamic=True those were symbols and the f-string raised; and torch
        # 2.11's dynamo cannot pass a Choice to a function run at trace time.
        object.__setattr__(self, "_id", self._make_id())

    def _make_id(self) -> str:
        cid = self.config.id
        base = f"{self.family}:{cid}" if cid else self.family
        return PAD_PREFIX + base if self.pad else base

    @property
    def id(self) -> str:
        return self._id  # made once in __post_init__; pickling and copying keep it in __dict__

    def __str__(self) -> str:
        return self.id

    def padded(self) -> "Choice":
        return Choice(self.family, self.config, True)

    @property
    def needs_compile(self) -> bool:
        """Whether its first run compiles a Triton kernel: every family but cuBLAS
        ('aten'; its ``pad+`` copy is an eager torch op too)."""
        return self.family != "aten"

    @classmethod
    def parse(cls, text: str) -> "Choice":
        """Parse a choice id such as ``splitk:BM32-BN32-BK256-S3-W4-G8-SK16-det``.

        Raises ValueError that names the bad part and shows the expected form.
        """
        if not isinstance(text, str):
            raise TypeError(f"a choice id must be a string, not {type(text).__name__}")
        if text.strip().startswith(PAD_PREFIX):
            inner = text.strip()[len(PAD_PREFIX):]
            if inner.startswith(PAD_PREFIX):
                raise ValueError(f"choice {text!r}: '{PAD_PREFIX}' may appear once")
            return cls.parse(inner).padded()
        family, _, rest = text.strip().partition(":")
        if family == "aten":
            if rest:
                raise ValueError(f"choice {text!r}: aten takes no parameters (write just 'aten')")
            return cls("aten", AtenConfig())
        if family == "triton_mm":
            m = _TILE_RE.match(rest)
            if m:
                return cls(family, TileConfig(*map(int, m.groups())))
            form = f"{family}:BM<int>-BN<int>-BK<int>-S<int>-W<int>-G<int>"
            if _STATIC_RE.match(rest):
                form += " (the -IX / -IXW K-loop forms are triton_static's)"
        elif family == "triton_static":
            m = _STATIC_RE.match(rest)
            if m:
                *nums, suffix = m.groups()
                loop = {None: "carried", "-IX": "indexed", "-IXW": "indexed_wrap"}[suffix]
                return cls(family, StaticConfig(*map(int, nums), form=loop))
            form = f"{family}:BM<int>-BN<int>-BK<int>-S<int>-W<int>-G<int>[-IX|-IXW]"
        elif family == "splitk":
            m = _SPLITK_RE.match(rest)
            if m:
                *nums, mode = m.groups()
                return cls(family, SplitKConfig(*map(int, nums), deterministic=mode == "det"))
            form = "splitk:BM<int>-BN<int>-BK<int>-S<int>-W<int>-G<int>-SK<int>-(det|atomic)"
        elif family == "skinny":
            m = _SKINNY_RE.match(rest)
            if m:
                *nums, path, mode, progs, flat, sum_each, pdl = m.groups()
                return cls(family, SkinnyConfig(*map(int, nums), dot=path == "dot", deterministic=mode == "det",
                                                stream_k=int(progs or 0), pdl=bool(pdl), flat=bool(flat),
                                                sum_each=bool(sum_each)))
            form = "skinny:BM<int>-BN<int>-BK<int>-SK<int>-S<int>-W<int>-(dot|core)-(det|atomic)[-P<int>][-flat[-sum]][-pdl]"
        elif family == "persistent_tma":
            m = _PERSISTENT_RE.match(rest)
            if m:
                *nums, ws, fl, es = m.groups()
                return cls(family, PersistentConfig(*map(int, nums), warp_spec=bool(ws), flatten=bool(fl),
                                                    epi_split=int(es or 1)))
            form = "persistent_tma:BM<int>-BN<int>-BK<int>-S<int>-W<int>-G<int>[-WS][-F][-E<int>]"
        elif family == "decompose_k":
            m = _DK_RE.match(rest)
            if m:
                return cls(family, DecomposeKConfig(int(m.group(1))))
            form = "decompose_k:s<int>"
        else:
            raise ValueError(f"choice {text!r}: unknown kernel family {family!r}; "
                             f"known: {', '.join(CONFIG_TYPES)}")
        raise ValueError(f"choice {text!r}: malformed parameters {rest!r}; expected {form}")

    @classmethod
    def from_params(cls, family: str, params: dict) -> "Choice":
        """Build from a family name and a parameter dict (as written in lookup tables)."""
        want = CONFIG_TYPES.get(family)
        if want is None:
            raise ValueError(f"unknown kernel family {family!r}; known: {', '.join(CONFIG_TYPES)}")
        try:
            return cls(family, want(**params))
        except TypeError as e:
            raise ValueError(f"bad parameters for {family}: {params!r} ({e})") from None


# --------------------------------------------------------------------- spaces
# The default triton_mm space: the 19 tile configs torch.compile's mm template
# uses by default, plus two wide tiles that suit Hopper's wgmma (128x256, 256x128).
DEFAULT_TILES: tuple[tuple[int, int, int, int, int], ...] = (
    (32, 32, 16, 1, 2), (32, 32, 128, 2, 4), (32, 64, 32, 5, 8), (64, 32, 32, 5, 8),
    (64, 32, 128, 5, 4), (64, 64, 16, 2, 4), (64, 64, 32, 2, 4), (64, 64, 64, 3, 8),
    (64, 64, 128, 5, 4), (64, 128, 32, 3, 4), (64, 128, 32, 4, 8), (64, 128, 64, 3, 4),
    (64, 128, 128, 4, 4), (128, 64, 32, 3, 4), (128, 64, 32, 4, 8), (128, 128, 32, 2, 8),
    (128, 128, 32, 3, 4), (128, 128, 64, 3, 4), (128, 128, 64, 5, 8),
    (128, 256, 64, 3, 8), (256, 128, 64, 3, 8),
)


def default_tiles() -> list[TileConfig]:
    return [TileConfig(*t, group_m=8) for t in DEFAULT_TILES]


def exhaustive_tiles() -> list[TileConfig]:
    """Every BLOCK_M/N/K in 16..256, 1..5 stages, 2/4/8 warps, GROUP_M 1 or 8: 3,750 configs."""
    return [TileConfig(bm, bn, bk, s, w, g) for bm, bn, bk, s, w, g in itertools.product(
        POW2_BLOCKS, POW2_BLOCKS, POW2_BLOCKS, (1, 2, 3, 4, 5), (2, 4, 8), (1, 8))]


def min_block_k(problem: Problem) -> int:
    """The smallest BLOCK_K for ``problem``'s dtype (FP8_MIN_BLOCK_K for fp8, else MIN_BLOCK)."""
    return FP8_MIN_BLOCK_K if problem.dtype in FP8_DTYPES else MIN_BLOCK


def block_k_reason(block_k: int, problem: Problem | None) -> str | None:
    """Why BLOCK_K=``block_k`` cannot serve ``problem``'s dtype (None when it can): an fp8 one needs
    ``FP8_MIN_BLOCK_K``. The one rule the spaces prune by (``tile_constraint``, skinny's tl.dot
    path) and an explicit choice is refused by (the families' ``validate``). Without a problem
    (``validate(None, cfg)``, a config checked on its own) there is no dtype to refuse."""
    if problem is None:
        return None
    least = min_block_k(problem)
    if block_k >= least:
        return None
    if problem.dtype in FP8_DTYPES:
        return (f"BLOCK_K={block_k} < {least}: {problem.dtype} operands need BLOCK_K >= {least}, as Hopper's fp8 "
                "wgmma consumes K = 32 per instruction (configs.FP8_MIN_BLOCK_K)")
    return f"BLOCK_K={block_k} < {least}: tl.dot needs BLOCK_K >= {least}"


def check_block_k(cfg, problem: Problem) -> None:
    """ValueError when ``cfg.block_k`` cannot serve ``problem``'s dtype (``block_k_reason``)."""
    reason = block_k_reason(cfg.block_k, problem)
    if reason:
        raise ValueError(reason)


def fp8_tile(cfg, problem: Problem, cap: int = 256):
    """``cfg`` with BLOCK_K doubled (at most ``cap``) for an fp8 problem; unchanged otherwise."""
    return _doubled_k(cfg, cap) if problem.dtype in FP8_DTYPES else cfg


def _doubled_k(cfg, cap: int = 256):
    return replace(cfg, block_k=min(cap, 2 * cfg.block_k))


def scale_tile(cfg: TileConfig | SplitKConfig, problem: Problem, k_len: int | None = None):
    """Shrink blocks that are far larger than the problem (never below 16).

    A 256-wide block over a 32-wide matrix wastes 7/8 of its work; the block is cut
    to the next power of two of the dimension. Warps shrink with the tile so that
    each warp still owns at least a 16x16 piece of the accumulator. Where the scaled tile
    leaves one row or one column of tiles, GROUP_M becomes CANONICAL_GROUP_M (it orders
    nothing there: ``canonical_group_m``).
    ``k_len`` is the K extent one program reduces (K / split for split-K).
    """
    k_len = problem.k if k_len is None else k_len
    return _scale_tile(cfg, next_pow2(problem.m), next_pow2(problem.n), next_pow2(k_len), min_block_k(problem))


@functools.lru_cache(maxsize=1 << 16)
def _scale_tile(cfg, m2: int, n2: int, k2: int, min_bk: int):
    # Memoised on the powers of two that decide it: the exhaustive spaces scale thousands of
    # configs per shape, and dataclasses.replace costs ~4 us each.
    bm = max(MIN_BLOCK, min(cfg.block_m, m2))
    bn = max(MIN_BLOCK, min(cfg.block_n, n2))
    bk = max(min_bk, min(cfg.block_k, k2))
    warps = max(2, min(cfg.num_warps, bm * bn // 256))
    group = canonical_group_m(cfg.group_m, bm >= m2, bn >= n2)
    if (bm, bn, bk, warps, group) == (cfg.block_m, cfg.block_n, cfg.block_k, cfg.num_warps, cfg.group_m):
        return cfg
    return replace(cfg, block_m=bm, block_n=bn, block_k=bk, num_warps=warps, group_m=group)


# GROUP_M only orders the tiles: groups of GROUP_M rows of tiles are walked column by column, so
# that programs in flight share B's columns in L2. With one row of tiles (M <= BLOCK_M: every
# decode problem) or one column (N <= BLOCK_N), every GROUP_M gives the same order (the pid ->
# (pid_m, pid_n) map of tiled.py and persistent.py is then the identity; tests/test_space.py
# checks it), so two configs that differ only in GROUP_M run the same tiles in the same order:
# the same kernel but for a constexpr. Scaling maps them to one (GROUP_M 8, the default spaces'
# value), so that the exhaustive spaces stop listing each such config twice (GROUP_M is 1 or 8
# there: half of a decode problem's space was twins), and a ranker's top k or --fast's "next"
# pick is never spent on the twin of a config already picked (on 96x50257x768 the shipped H200
# ranker's 10 first triton_static choices were 5 such pairs).
CANONICAL_GROUP_M = 8


def canonical_group_m(group_m: int, one_row: bool, one_column: bool) -> int:
    """``group_m``, or CANONICAL_GROUP_M where the grid has one row or one column of tiles.

    >>> canonical_group_m(1, True, False), canonical_group_m(1, False, False)
    (8, 1)
    """
    return CANONICAL_GROUP_M if one_row or one_column else group_m


def scaled_configs(raw_configs, kind: str, problem: Problem) -> list:
    """``raw_configs(kind)`` scaled to ``problem`` (``scale_tile``; a split-K config over its
    own K-slice, cdiv(K, split_k)), duplicates dropped, first occurrences in order; an fp8
    problem's default configs get BLOCK_K doubled first (``fp8_tile``).

    The result depends on the problem only through the powers of two that ``scale_tile`` reads,
    so it is memoised on those: a model's shapes mostly share them, and building and scaling
    the exhaustive spaces (10,752 split-K configs) took 0.2 s a problem on the CPU."""
    fp8 = kind == "default" and problem.dtype in FP8_DTYPES
    k2 = tuple(next_pow2(cdiv(problem.k, s)) for s in _SPLIT_KEYS)
    return list(_scaled_configs(raw_configs, kind, fp8, next_pow2(problem.m), next_pow2(problem.n), k2,
                                min_block_k(problem)))


# The split_k values whose K-slice length scaled_configs precomputes (1: no split): every split
# the spaces list (kernels.splitk.SPLITS).
_SPLIT_KEYS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


@functools.lru_cache(maxsize=1 << 12)
def _scaled_configs(raw_configs, kind: str, fp8: bool, m2: int, n2: int, k2: tuple, min_bk: int) -> tuple:
    by_split = dict(zip(_SPLIT_KEYS, k2))
    out, seen = [], set()
    for cfg in raw_configs(kind):
        if fp8:
            cfg = _doubled_k(cfg)
        split = getattr(cfg, "split_k", 1)
        if split not in by_split:
            raise ValueError(f"split_k={split} is not one of configs._SPLIT_KEYS {_SPLIT_KEYS}: add it there")
        cfg = _scale_tile(cfg, m2, n2, by_split[split], min_bk)
        if cfg not in seen:
            seen.add(cfg)
            out.append(cfg)
    return tuple(out)


def smem_bytes(cfg: TileConfig | SplitKConfig, problem: Problem) -> int:
    """Shared memory the pipelined operand tiles take: stages x (A tile + B tile)."""
    es = element_size(problem.dtype)
    return max(1, cfg.num_stages) * (cfg.block_m * cfg.block_k + cfg.block_k * cfg.block_n) * es


# A default tile whose pipeline overflows shared memory at the problem's element size is run with
# fewer stages instead of dropped (``fit_stages``), down to FIT_MIN_STAGES. Only fp32 overflows
# today (4-byte elements: 128x128x64 at 5 stages is 320 KB; every bf16 / fp16 / fp8 default tile
# fits), and there the tile that overflowed is the one that wins: on the H200 (session 50,
# call 2, scripts/exp_x3_tiles.py, 3xTF32) BM128-BN128-BK64 with 8 warps at 3 stages was the
# fastest kernel on 6 of 9 large fp32 shapes, 1.87-2.01x SGEMM (4096^3: 1438 us, against 1634 for
# the best tile the space held, BM128-BN64-BK32-S4-W8), and within 2.3% on a seventh; its 4-warp
# twin, which the space did hold, ran 0.58-0.79x SGEMM (3xTF32's split operands and 64
# accumulators per thread spill at 4 warps). Two stages ran 13-20% slower than three there, so a
# tile that fits only at two is dropped as before (128x256x64, 256x128x64: their BK32 twins ran
# 0.74-1.11x SGEMM in the same call).
FIT_MIN_STAGES = 3


def fit_stages(cfg: TileConfig, problem: Problem, smem_limit: int, min_stages: int = FIT_MIN_STAGES):
    """``cfg`` with the most stages (at most its own) whose operand tiles fit ``smem_limit`` bytes
    (``smem_bytes``), or ``cfg`` itself where none of ``min_stages`` or more fits (the
    constraint then rejects it, naming the overflow).

    >>> from gemmtune.problem import Problem
    >>> big = TileConfig(128, 128, 64, 5, 8, 8)
    >>> fit_stages(big, Problem.from_sizes(4096, 4096, 4096, "fp32"), 232448).num_stages
    3
    >>> fit_stages(big, Problem.from_sizes(4096, 4096, 4096, "bf16"), 232448) is big
    True
    """
    if smem_bytes(cfg, problem) <= smem_limit:
        return cfg
    per_stage = smem_bytes(replace(cfg, num_stages=1), problem)
    stages = min(cfg.num_stages, smem_limit // per_stage)
    return replace(cfg, num_stages=stages) if stages >= min_stages else cfg


def acc_regs_per_thread(cfg: TileConfig | SplitKConfig) -> int:
    return cfg.block_m * cfg.block_n // (32 * cfg.num_warps)


# fp8 e4m3 (scaled_mm's B is always e4m3: problem.FP8_B) has tensor-core instructions from Ada
# (sm_89) on; Triton refuses the type below that ("fp8e4nv" is not among sm_80's supported fp8
# types), and so does cuBLASLt's fp8 GEMM behind torch._scaled_mm.
FP8_MIN_CAPABILITY = (8, 9)


def fp8_device_reason(problem: Problem, device: DeviceInfo) -> str | None:
    """Why ``device`` cannot run ``problem``'s fp8 operands (None when it can, or they are not fp8).

    >>> from gemmtune.problem import Problem
    >>> p = Problem.from_sizes(64, 64, 64, "float8_e4m3fn", op="scaled_mm", scale="tensor", layout_b="col")
    >>> fp8_device_reason(p, DeviceInfo.lookup("h100")) is None, fp8_device_reason(p, DeviceInfo.lookup("a100"))[:30]
    (True, 'fp8 operands need compute capa')
    """
    if problem.dtype not in FP8_DTYPES or tuple(device.capability) >= FP8_MIN_CAPABILITY:
        return None
    return (f"fp8 operands need compute capability {FP8_MIN_CAPABILITY[0]}.{FP8_MIN_CAPABILITY[1]} or later "
            f"(fp8 tensor cores, Ada / Hopper); {device.name} is {device.capability_str}")


def tile_constraint(cfg: TileConfig | SplitKConfig, problem: Problem, device: DeviceInfo) -> str | None:
    """Why ``cfg`` cannot run well on ``device`` (None when it can)."""
    reason = fp8_device_reason(problem, device) or block_k_reason(cfg.block_k, problem)
    if reason:
        return reason
    smem = smem_bytes(cfg, problem)
    if smem > device.smem_per_block:
        return (f"shared memory {smem} B = {cfg.num_stages} stages x ({cfg.block_m}x{cfg.block_k} + "
                f"{cfg.block_k}x{cfg.block_n}) x {element_size(problem.dtype)} B exceeds the "
                f"{device.smem_per_block} B per block of {device.name}")
    regs = acc_regs_per_thread(cfg)
    if regs > MAX_ACC_REGS_PER_THREAD:
        return (f"{regs} fp32 accumulator registers per thread ({cfg.block_m}x{cfg.block_n} over "
                f"{cfg.num_warps} warps) exceeds {MAX_ACC_REGS_PER_THREAD}: it would spill")
    if cfg.num_warps * 32 * min(255, regs + 32) > device.regs_per_block:
        return f"{cfg.num_warps} warps need more than the {device.regs_per_block} registers of a block"
    return None


def prune(configs, problem: Problem, device: DeviceInfo, constraint=tile_constraint):
    """Split configs into (kept, rejected) where rejected holds (config, reason) pairs.

    Order is kept and duplicates (after scaling, many configs coincide) are dropped.
    """
    kept, rejected, seen = [], [], set()
    for cfg in configs:
        if cfg in seen:
            continue
        seen.add(cfg)
        reason = constraint(cfg, problem, device)
        if reason is None:
            kept.append(cfg)
        else:
            rejected.append((cfg, reason))
    return kept, rejected


def check_block_sizes(cfg: TileConfig | SplitKConfig) -> None:
    """Raise ValueError when a tile config cannot be compiled at all."""
    for name in ("block_m", "block_n", "block_k"):
        v = getattr(cfg, name)
        if v < MIN_BLOCK or v & (v - 1):
            raise ValueError(f"{name}={v} must be a power of two >= {MIN_BLOCK} (tl.dot and tl.arange need it)")
    if cfg.num_warps not in (1, 2, 4, 8, 16):
        raise ValueError(f"num_warps={cfg.num_warps} must be one of 1, 2, 4, 8, 16")
    if cfg.num_stages < 1 or cfg.group_m < 1:
        raise ValueError(f"num_stages={cfg.num_stages} and group_m={cfg.group_m} must be >= 1")
