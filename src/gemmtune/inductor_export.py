"""Export a gemmtune lookup table to torch.compile (Inductor's template lookup table).

Inductor (``torch._inductor.lookup_table``, in torch 2.11 and later) can take, per
matmul, the template configs to use instead of generating and autotuning its own.
Its table is a dict ``{key: [config, ...]}``:

* key: ``"((dtype, [M, K], stride_a), (dtype, [K, N], stride_b))+mm"``, the dtypes,
  shapes and strides of the two inputs as Inductor sees them (``str()`` of that
  tuple, e.g. ``"((torch.bfloat16, [512, 4096], [4096, 1]), (torch.bfloat16, [4096, 512],
  [512, 1]))+mm"``), optionally prefixed with a device key ``"<gcnArchName>+"``.
  For addmm (gemmtune's ``addmm:`` problems, a bias of N), Inductor's ``tuned_addmm`` keys
  its Triton templates by three inputs, the bias expanded to (M, N) with strides [0, 1]
  (N = 1: [1, 1], a realized copy; inductor_keys._bias_strides) first, and its scalars: ``"((dtype, [M, N], [0, 1]), (dtype, [M, K], ...), (dtype, [K, N],
  ...))+alpha=1&beta=1+addmm"`` (torch 2.13's torch/_inductor/kernel/mm.py; on the CPU,
  torch.compile(max-autotune) of F.linear asks for exactly this key and Inductor's own parser
  returns our config, tests/test_addmm.py; a GPU compile with it has not been run yet).
* config: ``{"template_id": ..., **template kwargs}``. One config: Inductor uses it
  without autotuning. Several: it autotunes among those only. No entry: its usual
  choice generation (and max-autotune) as if there were no table.

What gemmtune exports (``convert``; everything else is skipped with a reason):

* ``triton_mm:BMa-BNb-BKc-Sd-We-Gf`` -> ``{"template_id": "triton::mm", "BLOCK_M": a,
  "BLOCK_N": b, "BLOCK_K": c, "num_stages": d, "num_warps": e, "GROUP_M": f,
  "EVEN_K": K % c == 0, "USE_FAST_ACCUM": false, "ACC_TYPE": "tl.float32"}``: Inductor's
  own mm template with our tile;
* ``decompose_k:sN`` -> ``{"template_id": "decompose_k", "k_split": N}``;
* ``aten`` -> ``{"template_id": "aten::mm"}`` (cuBLAS; without it an entry led by
  aten would drop cuBLAS from Inductor's candidates);
* ``persistent_tma:...`` (no ``-WS``/``-F``/``-E2``/``-E4``) -> ``{"template_id": "triton::mm_persistent_tma",
  ...}``: Inductor's persistent TMA template with our tile, the layouts and the GPU's SM count
  (Inductor offers that template only with ``config.triton.enable_persistent_tma_matmul = True``:
  set it, or the entry is ignored; the export notes this);
* ``splitk:...`` skipped: Inductor has no fused split-K mm template;
* for addmm: ``triton_mm`` as above (Inductor adds the bias in the template's epilogue);
  ``decompose_k`` skipped (tuned_addmm offers no decompose_k template); ``aten`` skipped:
  tuned_addmm looks its cuBLAS choices up separately, under the unexpanded bias's key, and
  a miss there keeps them, so cuBLAS stays among Inductor's candidates without an entry;
* ``pad+...`` skipped: Inductor pads on its own (``config.shape_padding``).
* for bmm (``tuned_bmm``, torch/_inductor/kernel/bmm.py): key ``"((dtype, [B, M, K], strides),
  (dtype, [B, K, N], strides))+bmm"`` (the 3-D strides of contiguous / batch-of-transposed
  operands); ``triton_mm`` -> ``{"template_id": "triton::bmm", ...}``: Inductor's bmm template
  (configs from the same mm heuristics, so the same kwargs, plus ``ALLOW_TF32``, which that
  template reads); ``aten`` -> ``{"template_id": "aten::bmm"}``. An operand broadcast over the
  batch (stride 0) is skipped: whether Inductor's bmm sees an expanded view or a copy depends on
  the graph. On the CPU, torch 2.13 under max-autotune asks for exactly this key (tests); a GPU
  compile with it has not been run yet.
* for scaled_mm (``tuned_scaled_mm``, torch/_inductor/kernel/mm.py): key ``"((fp8, [M, K], [K, 1]),
  (torch.float8_e4m3fn, [K, N], [1, K]), (torch.float32, <scale_a shape>, <strides>), (torch.float32,
  <scale_b shape>, <strides>)[, (out dtype, [N], [1])])+scaled_mm"``: the scales and the bias as
  the caller passes them (Inductor unsqueezes them only after the lookup), so one problem has
  several keys, all exported with the same configs (``scale_variants``): tensor-wise () / (1,) /
  (1, 1) scales, row-wise (M, 1) and (1, N) with either contiguous stride of their size-1 dim
  (``w_scale.t()`` gives (1, N) the strides (1, 1)). ``triton_mm`` -> ``triton::mm`` (Inductor's
  mm template, which tuned_scaled_mm offers with a scaling epilogue, bias included; same kwargs
  as mm; BLOCK_K >= 32 and K > 16 as its scaled heuristic requires, else skipped); ``aten`` ->
  ``{"template_id": "aten::_scaled_mm"}`` (cuBLASLt: Inductor then calls ``_scaled_mm(...,
  out=buf)`` without out_dtype, the output's dtype being ``buf``'s, and use_fast_accum False; not
  with a bias and an fp32 output, which CUDA's _scaled_mm refuses);
  ``persistent_tma`` (no bias: tuned_scaled_mm offers no TMA template with one) ->
  ``triton::scaled_mm_device_tma_epilogue_scaling`` with its heuristic's kwargs plus
  ``SCALE_RECIPE_A/B`` (0 tensor-wise, 1 row-wise), which tuned_scaled_mm passes as overrides that
  a lookup hit does not apply (needs ``enable_persistent_tma_matmul``, as for mm); decompose_k,
  splitk, skinny and pad+ are skipped (no such template for scaled_mm). Only A row-major and B
  column-major problems are exported (torch._scaled_mm's and tuned_scaled_mm's rule). Without a
  bias the key holds no out_dtype: e4m3->bf16 and ->fp32 of one shape share it, and the first
  in key order (bf16) keeps it. Nor does it hold use_fast_accum: the entries serve either
  (exported with ``USE_FAST_ACCUM: False``, what gemmtune measured). On the CPU, torch 2.13
  under max-autotune asks for exactly these keys and runs an exported aten entry (tests);
  ``scripts/check_inductor_fp8_lut.py`` checks the Triton entries on a GPU. torch 2.11.0's
  Inductor (read from its wheel) has the same tuned_scaled_mm, key function, template ids and
  heuristics; its lookup renders a template with the table's config alone (2.13 merges it over
  its heuristic's first config), so every config carries the full option set its template reads.

Entries are exported with the choices Inductor can express, in the table's order;
an entry with none is left out (Inductor then tunes that shape itself). Problems are
skipped when Inductor's key cannot express them: out_dtype other than the input
dtype (scaled_mm aside), tf32 (Inductor follows torch.backends.cuda.matmul), strided operands, or an
operand whose alignment differs from a contiguous tensor's (an offset pointer). The
key assumes row = contiguous and col = a transposed contiguous tensor (``w.t()``).
``device_ms`` is not exported: the tile is ours, the kernel is Inductor's template.

Inductor only considers a template it would offer for the shape anyway: Triton
templates need ``mode="max-autotune"`` (or ``max_autotune_gemm``); decompose_k is
offered only when K >= ``config.triton.decompose_k_threshold`` x max(M, N) (32 by
default), and then ``triton::mm`` only when K < twice that. A config for a template
not offered is ignored (the export report notes these).

Use it::

    gemmtune lut export-inductor table.json inductor-lut.json

    import json, torch
    from torch._inductor import config
    from torch._inductor.lookup_table import LookupTableChoices
    config.lookup_table.table = json.load(open("inductor-lut.json"))
    torch._inductor.virtualized.V.set_choices_handler(LookupTableChoices())
    f = torch.compile(lambda a, b: a @ b, mode="max-autotune")

or ``gemmtune.inductor_export.install("table.json")`` (a gemmtune table, converted on the
fly, or an exported Inductor table), which also keeps the table from a GEMM whose K is
dynamic: Inductor looks a dynamic graph up by its size hints, and an entry's ``EVEN_K`` /
``k_split`` hold at its own K only (``lookup_choices_class``; with the plain
``LookupTableChoices`` above, compile such graphs without the table). The choices handler is
per thread: install it in the thread that compiles. ``TORCH_LOGS="+inductor"`` (or
logging at INFO for ``torch._inductor.lookup_table``) shows "lookup hit for mm".
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from . import kernels
from .kernels import aten, decompose_k, persistent, triton_mm
from .inductor_keys import (ADDMM_SCALARS, OP_NAME, SCALED_MM_OP, _TORCH_DTYPES, _inductor_key,  # noqa: F401
                            _mat_key, _strides, check_problem, inductor_key, inductor_keys, scale_variants)
from .kernels.base import Unsupported
from .jsonio import check_file_target, refuse_results_store, write_atomic
from .precision import FP32_PRECISION_ENV, runs_3xtf32
from .problem import Problem
from .table import LookupTable, TableError, TableWarning, as_table, check_provenance, from_json

# Each family's export lives in its module (its inductor_export); the template ids here
# are theirs, for the notes below.
TRITON_MM = triton_mm.INDUCTOR_TEMPLATE
PERSISTENT_TMA = persistent.INDUCTOR_TEMPLATE
TMA_DESCRIPTOR_SIZE = persistent.TMA_DESCRIPTOR_SIZE
DECOMPOSE_K = decompose_k.INDUCTOR_TEMPLATE
ATEN_MM = aten.INDUCTOR_TEMPLATE
TRITON_BMM = triton_mm.INDUCTOR_BMM_TEMPLATE
ATEN_BMM = aten.INDUCTOR_BMM_TEMPLATE
ATEN_SCALED_MM = aten.INDUCTOR_SCALED_MM_TEMPLATE
SCALED_TMA = persistent.INDUCTOR_SCALED_TEMPLATE
DEFAULT_DECOMPOSE_K_THRESHOLD = 32  # torch._inductor.config.triton.decompose_k_threshold's default


@dataclass(frozen=True)
class Skipped:
    key: str
    choice: str | None  # None: the whole problem was skipped
    reason: str

    def __str__(self) -> str:
        return f"{self.key}" + (f" {self.choice}" if self.choice else "") + f": {self.reason}"


@dataclass
class InductorExport:
    """An Inductor table plus what was left out of it, and why."""

    table: dict[str, list[dict]]
    skipped: list[Skipped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    provenance: dict = field(default_factory=dict)


def choice_config(choice, problem: Problem, sm_count: int | None = None) -> dict:
    """The Inductor config for one gemmtune choice; raises Unsupported with the reason.

    ``sm_count``: the SMs of the table's GPU, for the persistent template's grid (NUM_SMS).
    The family's own ``inductor_export`` builds it (kernels/<family>.py)."""
    if choice.pad and problem.op == "scaled_mm":
        raise Unsupported("pad+ choices: Inductor's scaled_mm templates have no pad variant, and its shape "
                          "padding (fx_passes/pad_mm.py) does not pad _scaled_mm")
    if choice.pad:
        raise Unsupported("pad+ choices: Inductor pads operands on its own "
                          "(torch._inductor.config.shape_padding); its templates have no pad variant")
    try:
        family = kernels.get(choice.family)
    except ValueError:
        raise Unsupported(f"family {choice.family}: no Inductor template") from None
    try:
        # What load checks for every entry; a LookupTable built in Python reached here unchecked, and
        # ``decompose_k:s3`` for K = 4096 became k_split 3, a reshape failing deep inside torch.compile.
        kernels.spec(choice.family).validate(problem, choice.config)
    except (ValueError, TypeError) as e:
        raise Unsupported(f"not valid for this problem: {e}") from None
    if choice.family != "aten" and runs_3xtf32(problem):
        # The tile was measured with 3xTF32 products; Inductor's templates take ALLOW_TF32 from
        # torch (off here: IEEE FMA on CUDA cores), another kernel at another speed.
        raise Unsupported(f"fp32 with TF32 off: gemmtune's Triton kernels run 3xTF32 products "
                          f"({FP32_PRECISION_ENV}), Inductor's templates IEEE fp32: the measured "
                          f"ranking does not carry over (tune and export with {FP32_PRECISION_ENV}=ieee "
                          "for an Inductor table)")
    return family.inductor_export(choice, problem, sm_count)


def _sm_count(provenance: dict) -> int | None:
    """The SM count of the GPU a table was tuned on (the persistent templates' NUM_SMS), never the
    exporting machine's: a built-in GPU's, named in the provenance by its full name ('NVIDIA H200')
    or short one ('h200'). None for any other name, where the entry is skipped saying why: the
    fuzzy match of ``DeviceInfo.lookup`` took 'NVIDIA H100 PCIe' (114 SMs) for the 132-SM SXM part,
    and a merged table's joined names (MIXED_SEP) for the first GPU it found, whatever the others'."""
    from .device import named_exactly
    from .table import MIXED_SEP

    name = (provenance or {}).get("device_name") or (provenance or {}).get("device") or ""
    counts = set()
    for part in str(name).split(MIXED_SEP):
        known = named_exactly(part)
        if known is None:
            return None
        counts.add(known.sm_count)
    return counts.pop() if len(counts) == 1 else None  # a merged table's GPUs of other SM counts: none


def _decompose_k_threshold() -> int:
    try:
        from torch._inductor import config as icfg
        return int(icfg.triton.decompose_k_threshold)
    except Exception:  # an older torch or none: the documented default
        return DEFAULT_DECOMPOSE_K_THRESHOLD


def _offered_notes(problem: Problem, configs: list[dict], key: str) -> list[str]:
    """Why Inductor may ignore some exported configs for this shape (it only uses a
    template it would offer anyway; see torch/_inductor/kernel/mm.py tuned_mm)."""
    if problem.op == "scaled_mm":
        return _scaled_notes(problem, configs, key)
    ids = {c["template_id"] for c in configs}
    notes = []
    if PERSISTENT_TMA in ids and not _persistent_enabled():
        # Measured on the H200 with torch 2.11 (scripts/check_inductor_lut.py, 2026-11-24): the
        # exported entry got no lookup hit with the default config; mm fell back to autotuning.
        # tuned_addmm offers the template under the same flag (use_triton_tma_template): noted
        # for addmm too, which returned before this note.
        notes.append(f"{key}: triton::mm_persistent_tma is offered only with "
                     "torch._inductor.config.triton.enable_persistent_tma_matmul = True; Inductor will "
                     "ignore it until that is set")
    if problem.op in ("addmm", "bmm"):
        return notes  # tuned_addmm / tuned_bmm offer their Triton template whenever Triton templates are on
    t = _decompose_k_threshold()
    m, n, k = problem.m, problem.n, problem.k
    if DECOMPOSE_K in ids and not (k >= t * m and k >= t * n):
        notes.append(f"{key}: decompose_k is offered only when K >= {t} x max(M, N) "
                     "(config.triton.decompose_k_threshold); Inductor will ignore it here")
    if TRITON_MM in ids and k >= 2 * t * m and k >= 2 * t * n:
        value, current = _exhaustive_mm_value()
        if current != value:
            notes.append(f"{key}: triton::mm is not offered when K >= {2 * t} x max(M, N) unless "
                         f"config.max_autotune_gemm_search_space == {value!r} (this torch's tuned_mm compares "
                         "that spelling); Inductor will ignore it here")
    return notes


def _exhaustive_mm_value() -> tuple[str, str | None]:
    """(the value of ``config.max_autotune_gemm_search_space`` at which the installed torch's
    tuned_mm offers triton::mm for a K past twice the decompose_k threshold, the value set now).

    Read from tuned_mm's source: torch 2.13 compares it with lower-case 'exhaustive', while the
    config (and TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_SEARCH_SPACE, upper-cased) hold 'EXHAUSTIVE', which
    its heuristics compare: the note told users to set 'EXHAUSTIVE', which does not offer it there.
    A torch whose source does not say (or no Inductor): 'EXHAUSTIVE', the config's own spelling."""
    import inspect
    import re

    value, current = "EXHAUSTIVE", None
    try:
        from torch._inductor import config as icfg
        from torch._inductor.kernel import mm as imm

        current = getattr(icfg, "max_autotune_gemm_search_space", None)
        found = re.search(r"max_autotune_gemm_search_space\s*==\s*[\"']([A-Za-z]+)[\"']",
                          inspect.getsource(imm.tuned_mm))
        if found:
            value = found.group(1)
    except Exception:  # noqa: BLE001 - another torch (or none): the config's documented spelling
        pass
    return value, current


def _scaled_notes(problem: Problem, configs: list[dict], key: str) -> list[str]:
    """tuned_scaled_mm offers its Triton templates for fp8 on sm 8.9+ even without max-autotune
    (use_triton_template(..., check_max_autotune=False)); the device-TMA one only where
    use_triton_tma_template holds."""
    ids = {c["template_id"] for c in configs}
    notes = []
    if SCALED_TMA in ids:
        if not _persistent_enabled():
            notes.append(f"{key}: {SCALED_TMA} is offered only with "
                         "torch._inductor.config.triton.enable_persistent_tma_matmul = True; Inductor will "
                         "ignore it until that is set")
        if problem.k % 16 or problem.k < 32:
            notes.append(f"{key}: {SCALED_TMA} needs K a multiple of 16 and >= 32 for fp8 TMA "
                         "(torch._inductor.utils.can_use_tma); Inductor will ignore it here")
    return notes


def _persistent_enabled() -> bool:
    try:
        from torch._inductor import config as icfg
        return bool(getattr(icfg.triton, "enable_persistent_tma_matmul", False))
    except Exception:  # noqa: BLE001 - no Inductor here: say so in the note
        return False


def convert(table: LookupTable | str | os.PathLike, *, device_key: str | None = None,
            include_aten: bool = True) -> InductorExport:
    """The Inductor table for ``table``, with every skipped problem / choice and why.

    ``device_key``: prefix every key with it (Inductor's device-specific keys, the
    device's ``gcnArchName``); None writes device-agnostic keys (used on any GPU).
    ``include_aten``: export ``aten`` choices as ``aten::mm`` (default). Without it an
    entry whose first choice is aten drops cuBLAS from Inductor's candidates.

    Example::

        >>> from gemmtune.table import LookupTable, TableChoice
        >>> from gemmtune.configs import Choice
        >>> from gemmtune.problem import Problem
        >>> p = Problem.from_sizes(32, 32, 28672, "bf16")
        >>> t = LookupTable({}, {p.key: [TableChoice(Choice.parse("decompose_k:s14"))]})
        >>> convert(t).table
        {'((torch.bfloat16, [32, 28672], [28672, 1]), (torch.bfloat16, [28672, 32], [32, 1]))+mm': [{'template_id': 'decompose_k', 'k_split': 14}]}
    """
    table = as_table(table)
    out = InductorExport({}, provenance=dict(table.provenance))
    sm_count = _sm_count(table.provenance)
    owner: dict[str, str] = {}  # Inductor key -> the gemmtune key whose entry it holds
    for key, tcs in sorted(table.entries.items()):
        problem = Problem.from_key(key)
        try:
            ikeys = inductor_keys(problem, device_key)
        except Unsupported as e:
            out.skipped.append(Skipped(key, None, str(e)))
            continue
        # scaled_mm keys can be another problem's: without a bias the key holds no out_dtype
        # (e4m3->bf16 and e4m3->fp32 of one shape share all their keys), and M = N = 1 row-wise
        # scales are (1, 1) ones, as tensor-wise (1, 1) are. The first in key order (bf16 before
        # fp32) keeps a shared key; a problem left with none is skipped.
        taken = [k for k in ikeys if k in owner]
        ikeys = [k for k in ikeys if k not in owner]
        if not ikeys:
            out.skipped.append(Skipped(key, None, f"Inductor's keys for it are {owner[taken[0]]}'s too (a "
                                                  "scaled_mm key holds no out_dtype without a bias, and (1, 1) "
                                                  "scales read alike tensor- or row-wise): that entry is kept"))
            continue
        if taken:
            out.notes.append(f"{key}: {len(taken)} of its Inductor keys are {owner[taken[0]]}'s too; "
                             "that entry is kept there")
        configs = []
        for tc in tcs:
            if tc.choice.family == "aten" and not include_aten and not tc.choice.pad:
                out.skipped.append(Skipped(key, tc.choice.id, "aten left out (include_aten=False)"))
                continue
            try:
                cfg = choice_config(tc.choice, problem, sm_count)
            except Unsupported as e:
                out.skipped.append(Skipped(key, tc.choice.id, str(e)))
                continue
            # One config once: Inductor compiles and benchmarks each entry it is given, and one tile's
            # triton_mm choice and triton_static forms (configs.STATIC_FORMS) are all its triton::mm.
            if cfg in configs:
                out.notes.append(f"{key}: {tc.choice.id} exports as an earlier choice's config; listed once")
            else:
                configs.append(cfg)
        if not configs:
            out.skipped.append(Skipped(key, None, "no choice Inductor can express: entry left out, "
                                                  "Inductor tunes this shape itself"))
            continue
        for ikey in ikeys:
            out.table[ikey] = [dict(c) for c in configs]
            owner[ikey] = key
        out.notes += _offered_notes(problem, configs, key)
    return out


def to_inductor(table: LookupTable | str | os.PathLike, *, device_key: str | None = None) -> dict:
    """Inductor's table (``config.lookup_table.table``) for the entries it can express."""
    return convert(table, device_key=device_key).table


def unavailable_reason() -> str | None:
    """None when the installed torch has Inductor's template lookup table, else why not."""
    try:
        import torch
    except Exception as e:  # pragma: no cover - torch is a dependency
        return f"torch cannot be imported ({e})"
    try:
        from torch._inductor import config as icfg
        import torch._inductor.lookup_table as lt
    except Exception as e:
        return (f"torch {torch.__version__} has no torch._inductor.lookup_table "
                f"({type(e).__name__}: {e}); Inductor's template lookup table needs torch 2.11 or later")
    if not hasattr(lt, "LookupTableChoices") or not hasattr(getattr(icfg, "lookup_table", None), "table"):
        return (f"torch {torch.__version__}'s torch._inductor.lookup_table lacks LookupTableChoices or "
                "config.lookup_table.table; this export targets that interface (torch 2.11+)")
    return None


class NothingToExport(ValueError):
    """Every entry of the table was skipped and ``path`` already held a file, left as it was."""


def export(table: LookupTable | str | os.PathLike, path: str | os.PathLike, *,
           device_key: str | None = None, include_aten: bool = True, force: bool = False) -> InductorExport:
    """Write the Inductor table as JSON (``json.load`` it into config.lookup_table.table).

    Raises RuntimeError when the installed torch has no Inductor lookup table, unless
    ``force`` (writing for another machine's newer torch).

    Example::

        >>> r = export("table.json", "inductor-lut.json")   # doctest: +SKIP
        >>> len(r.table), [str(s) for s in r.skipped]        # doctest: +SKIP
    """
    reason = unavailable_reason()
    if reason is not None and not force:
        raise RuntimeError(f"cannot export for torch.compile: {reason}. "
                           "Use force=True (--force) to write the file for another machine's torch.")
    path = Path(path)
    _refuse_gemmtune_table(path)
    # A read-only file there (chmod 444) was replaced all the same: the atomic rename needs only the
    # directory writable. tune --out refuses one (check_file_target), and so does this now.
    check_file_target(path, "the Inductor table")
    result = convert(table, device_key=device_key, include_aten=include_aten)
    if not result.table and path.exists():
        # Nothing exportable (every entry skipped): writing '{}' replaced an existing table there.
        raise NothingToExport(f"nothing to export ({len(result.skipped)} entries skipped); {path} left as it was")
    # One key per line, sorted: exported tables diff as well as gemmtune's own.
    lines = ["{"]
    items = sorted(result.table.items())
    for i, (k, v) in enumerate(items):
        lines.append(f"  {json.dumps(k)}: {json.dumps(v, sort_keys=True)}" + ("," if i < len(items) - 1 else ""))
    lines.append("}")
    write_atomic(path, "\n".join(lines) + "\n")
    return result


def _refuse_gemmtune_table(path: Path) -> None:
    """Raise ValueError when ``path`` holds a gemmtune lookup table: ``export(t, t)`` (or an OUT
    naming another tuned table) replaced it with Inductor's format, and the table was lost. Likewise
    a SQLite file (a results store: every measurement), which is no JSON."""
    refuse_results_store(path, "the Inductor table")
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):  # no file, or not a JSON one: nothing of ours to lose
        return  # (RecursionError: arrays nested 10^5 deep, which json.loads does not turn into a ValueError)
    if isinstance(doc, dict) and "schema_version" in doc and "entries" in doc:
        raise ValueError(f"{path} is a gemmtune lookup table: writing the Inductor table there would replace it; "
                         "give another output file")


def read_inductor_table(path: str | os.PathLike) -> dict[str, list[dict]]:
    """Read an exported Inductor table, checking its shape (key -> list of configs with template_id)."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError) as e:  # RecursionError: nested 10^5 deep, a traceback
        raise TableError(f"{path}: cannot read an Inductor lookup table: {type(e).__name__}: {str(e)[:200]}") from None
    return _checked_inductor_table(doc, path)


def _checked_inductor_table(doc, where) -> dict[str, list[dict]]:
    """``doc`` when it has an Inductor table's shape (key -> list of configs with template_id), else
    a TableError naming ``where``."""
    if not isinstance(doc, dict):
        raise TableError(f"{where}: an Inductor lookup table is a JSON object, not {type(doc).__name__}")
    if "schema_version" in doc and "entries" in doc:
        # A gemmtune table read as Inductor's failed on its first field: "schema_version: must be a
        # list of configs", which named neither table.
        raise TableError(f"{where}: a gemmtune lookup table, not an Inductor one: install() converts it, "
                         "or export it with gemmtune lut export-inductor")
    for k, v in doc.items():
        if not isinstance(k, str) or not isinstance(v, list) or not all(
                isinstance(c, dict) and isinstance(c.get("template_id"), str) for c in v):
            raise TableError(f"{where}: {k}: must be a list of configs, each with a string template_id")
    return doc


def _symbolic_k(kernel_inputs) -> bool:
    """Whether the GEMM ``kernel_inputs`` pose has a K that is not one static size (a graph
    compiled with K dynamic); where they do not say (no ``mnk_symbolic``), whether any input size
    is symbolic."""
    def static(x) -> bool:
        return isinstance(x, int) or bool(getattr(x, "is_number", False))

    mnk = getattr(kernel_inputs, "mnk_symbolic", None)
    if mnk is not None:
        try:
            return not static(mnk()[2])
        except Exception:  # noqa: BLE001 - inputs this torch lays out otherwise: the general check
            pass
    return not all(static(x) for shape in kernel_inputs.shapes_symbolic() for x in shape)


def lookup_choices_class():
    """Inductor's ``LookupTableChoices`` with one rule more, the choices handler ``install`` sets:
    no config for a GEMM whose K is symbolic. Inductor keys a dynamic graph's lookup by its size
    hints, so a graph compiled with K dynamic found the entry exported for its hint and took configs
    that hold at that K only (``EVEN_K: True``, a ``decompose_k`` split dividing it), then ran them
    at every K: an unmasked K loop reads past the operands (tests/test_dispatch_hunt.py). Such a
    GEMM gets Inductor's own choices, as with no table; dynamic M or N keep the table's configs,
    which mask both. Built when called: importing Inductor costs seconds."""
    from torch._inductor.lookup_table import LookupTableChoices

    class ExactKLookupTableChoices(LookupTableChoices):
        def lookup_template_configs(self, kernel_inputs, op_name, template_uids, template_hash_map=None):
            if _symbolic_k(kernel_inputs):
                return {}
            return super().lookup_template_configs(kernel_inputs, op_name, template_uids, template_hash_map)

    return ExactKLookupTableChoices


def install(source, *, device_key: str | None = None, choices=None) -> dict:
    """Point torch.compile at a table: sets ``torch._inductor.config.lookup_table.table``
    and installs Inductor's ``LookupTableChoices`` (gemmtune's subclass, ``lookup_choices_class``:
    no config where K is symbolic), or ``choices``, as this thread's choices handler. Returns the
    Inductor table installed.

    ``source``: a gemmtune LookupTable, table path or parsed table document (converted; its
    provenance is checked against the visible GPU; entries it cannot express warn, TableWarning),
    an Inductor table dict, or an exported file. ``device_key``: convert's, for a gemmtune table
    only (ValueError with an Inductor table, installed as it is).
    Raises RuntimeError when the installed torch has no Inductor lookup table.

    Example::

        >>> install("table.json")                               # doctest: +SKIP
        >>> f = torch.compile(lambda a, b: a @ b, mode="max-autotune")  # doctest: +SKIP
    """
    reason = unavailable_reason()
    if reason is not None:
        raise RuntimeError(f"cannot install a lookup table into torch.compile: {reason}")
    import torch
    from torch._inductor import config as icfg
    from torch._inductor.virtualized import V

    if isinstance(source, dict) and "schema_version" in source:
        # A gemmtune table's document (json.load of table.json) was installed as it was, as if it
        # were Inductor's: no key of it matched, and torch.compile tuned as without a table, silently.
        source = from_json(source, "<gemmtune table document>")
    if isinstance(source, dict):
        # Checked here: a value that is not a list of configs raised deep inside torch.compile.
        itable = _checked_inductor_table(source, "<Inductor table>")
        if device_key:
            raise ValueError(_device_key_unused(device_key, "the Inductor table given"))
    else:
        itable = None
        if not isinstance(source, (LookupTable, str, os.PathLike)):
            # pathlib's "expected str, bytes or os.PathLike object, not NoneType" named neither
            # install nor what it takes (install(load_or_none(bad_path)) passes None).
            raise TypeError(f"install: source must be a gemmtune LookupTable, a table document or Inductor "
                            f"table (dict), or a path to either, not {type(source).__name__}")
        if not isinstance(source, LookupTable):
            try:
                head = json.loads(Path(source).read_text())
            except (OSError, ValueError, RecursionError) as e:  # RecursionError: nested 10^5 deep
                raise TableError(f"{source}: cannot read: {type(e).__name__}: {str(e)[:200]}") from None
            if not (isinstance(head, dict) and "schema_version" in head):
                itable = read_inductor_table(source)
        if itable is None:
            lut = as_table(source)
            if torch.cuda.is_available():
                import triton
                check_provenance(lut, torch.cuda.get_device_name(), triton.__version__)
            r = convert(lut, device_key=device_key)
            # convert's skips were dropped without a word here (lut export-inductor lists them): a
            # table of split-K tiles installed an empty table, and torch.compile tuned as without one.
            _warn_left_out(r, lut)
            itable = r.table
        elif device_key:
            raise ValueError(_device_key_unused(device_key, source))
    icfg.lookup_table.table = itable
    V.set_choices_handler(choices if choices is not None else lookup_choices_class()())
    return itable


def _device_key_unused(device_key: str, source) -> str:
    # The prefix is written by convert; an exported Inductor table is installed as it is, and the
    # argument was dropped without a word (the keys stayed device-agnostic, or another device's).
    return (f"device_key {device_key!r} applies to a gemmtune table being converted; {source} is an Inductor "
            "table, installed as it is: export it again with --device-key, or leave device_key out")


def _warn_left_out(r: InductorExport, lut: LookupTable) -> None:
    """One TableWarning naming the entries of ``lut`` that ``install`` leaves out, and why."""
    whole = [s for s in r.skipped if s.choice is None]
    if not whole:
        return
    import warnings

    shown = "; ".join(str(s) for s in whole[:3]) + ("; ..." if len(whole) > 3 else "")
    warnings.warn(f"install: {len(whole)} of {len(lut.entries)} entries of {lut.source or 'the table'} left out, "
                  f"Inductor tunes those shapes itself ({shown}); gemmtune lut export-inductor lists every skip",
                  TableWarning, stacklevel=3)


def uninstall() -> None:
    """Undo ``install``: no lookup table, and Inductor's default choices handler for this thread
    (its ``inductor_choices_class`` when configured). A no-op where Inductor has no lookup table."""
    if unavailable_reason() is not None:
        return
    from torch._inductor import config as icfg
    from torch._inductor.choices import InductorChoices
    from torch._inductor.virtualized import V

    icfg.lookup_table.table = None
    cls = getattr(icfg, "inductor_choices_class", None)
    V.set_choices_handler(cls() if cls is not None else InductorChoices())


@contextlib.contextmanager
def installed(source, **kwargs):
    """``install(source, **kwargs)`` for the ``with`` block, then the table and choices handler
    found before it (nothing installed before: ``uninstall``): compile inside.

    Example::

        >>> with installed("table.json"):                                   # doctest: +SKIP
        ...     y = torch.compile(model, mode="max-autotune")(x)
    """
    # The table and this thread's handler as they were: ``uninstall`` cleared both, and an inner
    # block (or the end of one) dropped a table set by hand or by an outer ``installed``.
    previous = _current_install()
    itable = install(source, **kwargs)
    try:
        yield itable
    finally:
        if previous is None:
            uninstall()
        else:
            from torch._inductor import config as icfg
            from torch._inductor.virtualized import V

            icfg.lookup_table.table, handler = previous
            V.set_choices_handler(handler)


def _current_install():
    """(config.lookup_table.table, this thread's choices handler), or None without Inductor's lookup table."""
    if unavailable_reason() is not None:
        return None
    from torch._inductor import config as icfg
    from torch._inductor.virtualized import V

    return icfg.lookup_table.table, V.choices
