"""A whole model in one go: capture its GEMMs, tune them in ONE ``tune`` call, patch its layers,
and save one artifact that ``load_patched`` re-applies in a new process without tuning.

``tune_model(model, inputs)`` runs the model on each example input under ``capture``, and
keeps the GEMMs of the layers ``patch`` converts: ``nn.Linear`` (``x @ W.T``: a column-major
B) and HF transformers' ``Conv1D`` (GPT-2: ``x @ W + b`` with W stored [in, out]: a row-major
B). Each distinct layer shape (N, K, dtype, layout of B) becomes one dispatcher whose size
hints are the M values the inputs produced (plus ``extra_m``), and every hint problem of every
layer is tuned in a single ``gemmtune.tune`` call, so a model pays one worker start-up.

Example::

    >>> import torch, gemmtune
    >>> model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 64))
    >>> fake = lambda problems, **kw: {p.key: "aten" for p in problems}   # no GPU here: pick cuBLAS
    >>> ds = gemmtune.tune_model(model, [(torch.randn(4, 64),)], tune_fn=fake)
    >>> sorted(ds)
    [(32, 64, 'float32', 'col'), (64, 32, 'float32', 'col')]
    >>> _ = gemmtune.patch(model, dispatchers=ds)   # every hint chose cuBLAS: left as torch's
    >>> type(model[0]), sorted(gemmtune.nn.dispatchers(model, with_layout=True)) == sorted(ds)
    (<class 'torch.nn.modules.linear.Linear'>, True)
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

import torch

from .capture import capture, unwrapped
from .dispatch import Dispatcher, compile_mm, load
from .problem import Problem
from .jsonio import _UMASK, locked, write_atomic

FORMAT = "gemmtune-patched-model"
SCHEMA_VERSION = 1


def is_conv1d(mod: torch.nn.Module) -> bool:
    """HF transformers' ``Conv1D`` (GPT-2 and relatives): ``x @ weight + bias``, weight [in, out].
    Recognised by name and shape, so gemmtune needs no transformers import."""
    w = getattr(mod, "weight", None)
    return (type(mod).__name__ == "Conv1D" and isinstance(w, torch.Tensor) and w.dim() == 2
            and getattr(mod, "nf", None) == w.shape[1])


def layer_keys(model: torch.nn.Module) -> set[tuple]:
    """(N, K, dtype, layout_b) of every layer ``patch`` would convert."""
    from .problem import dtype_name
    keys = set()
    for mod in model.modules():
        try:
            if type(mod) is torch.nn.Linear and mod.weight.dim() == 2:
                # The weight's shape, not out_features / in_features, as patch reads it: a weight
                # assigned later (a pruned head) does not update them, and the layer's captured
                # GEMMs then matched no key ("did not run in the example passes").
                n, k = mod.weight.shape
                keys.add((n, k, dtype_name(mod.weight.dtype), "col"))
            elif is_conv1d(mod):
                keys.add((mod.weight.shape[1], mod.weight.shape[0], dtype_name(mod.weight.dtype), "row"))
        except TypeError:  # a dtype gemmtune does not multiply: patch warns about it
            continue
    return keys


def _warn_outside_layers(cap, shown: int = 3) -> None:
    """One warning naming the GEMMs of the example passes that no layer ``patch`` converts ran
    (an MoE router's own ``F.linear``, a product of two activations): they stay torch's, and a
    user who expected the whole model tuned should hear so."""
    outside = cap.outside_layers()
    if not outside:
        return
    def place(names: list[str]) -> str:
        said = ", ".join(n or "the model's own forward" for n in names[:2])
        return said + (f" (+{len(names) - 2} more)" if len(names) > 2 else "")

    where = "; ".join(f"{r.op} {r.m}x{r.n}x{r.k} {r.dtype} in {place(names)}" for r, names in outside[:shown])
    more = f"; and {len(outside) - shown} more" if len(outside) > shown else ""
    warnings.warn(f"gemmtune: {len(outside)} GEMM shape(s) ran outside the nn.Linear / Conv1D layers patch "
                  f"converts, so they stay torch's: {where}{more}. gemmtune.tune or compile_mm serves them "
                  "directly", RuntimeWarning, stacklevel=3)


# tune_kwargs that give the tuning call a pool other than the default one (or say how its worker
# starts): a worker started early would not be adopted, only stopped.
_OWN_POOL = ("server", "cluster", "in_process", "workers", "runner", "env", "prestarted")


def _has_gpu() -> bool:
    return torch.cuda.is_available()


def early_workers(tune_fn: Callable | None, prestart: bool | None, tune_kwargs: Mapping) -> list:
    """The benchmark worker of tune_model's one tuning call and its compile workers
    (``gemmtune_entry.spawn.prestart``: the pool adopts what it needs and stops the rest), started
    before its example passes; none (an empty list) where nothing is worth starting. The tuner
    waits for its worker before anything else (``TuneResult.startup_s``: 5.6 and 5.8 s of 13.8
    and 13.7 s tuning calls on Qwen2-0.5B's and Llama-1B's fused decode shapes,
    H200, benchmarks/results/2026-11-30-h200-s41, call 6); started first, its start-up overlaps
    the capture. That saves the capture's time, no more: in bench-model, whose model has run
    before, the capture took 0.1 s, so there it saved nothing measurable. Only for gemmtune.tune's own
    default pool: ``tune_fn`` None (or ``prestart=True``: a tune_fn that passes its keywords on to
    gemmtune.tune), on a machine with a GPU (``gemmtune_entry.spawn.prestart_gpu``; not with
    TRITON_INTERPRET, and ``GEMMTUNE_PRESTART=0`` turns it off)."""
    if prestart is False or (prestart is None and tune_fn is not None):
        return []
    if any(tune_kwargs.get(k) for k in _OWN_POOL) or not _has_gpu():
        return []
    from gemmtune_entry.spawn import prestart as start
    return start(["tune"])


def tune_model(model: torch.nn.Module, inputs: Iterable | None = None, *, fn: Callable | None = None,
               extra_m: Sequence[int] = (), mode: str = "similarity", tune_fn: Callable | None = None,
               verify: bool = True, pdl: bool = False, prestart: bool | None = None,
               **tune_kwargs) -> dict[tuple, Dispatcher]:
    """Dispatchers for every patchable layer shape of ``model``, keyed (N, K, dtype, layout_b),
    from ONE tuning call over the GEMMs ``model(*x)`` ran for each ``x`` in ``inputs`` (a tuple
    of positional arguments; a dict is passed as keyword arguments, a tensor as the one argument),
    or ``fn()``. ``extra_m``: M values to tune beyond those seen (e.g. 1 for decode).
    ``tune_kwargs`` go to ``gemmtune.tune`` (``fast=True``, ``space``, ``families``, ``store``,
    ``progress``...); ``tune_fn`` replaces it (tests, or your own tuner). ``pdl=True``: graphs
    compiled with Inductor's PDL on serve the winning GEMV strips as their ``-pdl`` twins
    (``gemmtune.pdl``; ``patch``'s ``pdl``), and on Hopper the tuning call credits those strips
    ``gemmtune.pdl.PDL_CREDIT`` against cuBLAS (``tune``'s ``pdl_credit``; pass your own to
    override, 0 to turn it off). ``prestart``: start the tuning call's benchmark worker before the
    example passes (``early_workers``; by default when ``tune_fn`` is None)."""
    extra_m = _checked_arguments(model, extra_m, mode)
    if tune_fn is None:
        from .tuning.options import option_names
        unknown = sorted(set(tune_kwargs) - option_names())
        if unknown:  # (gemmtune.tune refused them only after the example passes had run)
            raise TypeError(f"tune_model: unknown keyword(s) {', '.join(map(repr, unknown))}: neither tune_model's "
                            "nor gemmtune.tune's")
    early = early_workers(tune_fn, prestart, tune_kwargs)
    try:
        return _tune_model(model, inputs, fn, extra_m, mode, tune_fn, verify, pdl,
                           dict(tune_kwargs, prestarted=tuple(early)) if early else tune_kwargs)
    finally:
        for w in early:
            w.close()  # stopped unless the tuning call's pool adopted it (the pool stops those)


def _checked_arguments(model, extra_m, mode) -> tuple[int, ...]:
    """``extra_m`` as a tuple, after refusing by name, before the capture and the tuning call, what
    failed later: a non-Module model ("'function' object has no attribute 'named_modules'"), a bare
    ``extra_m=1`` ("'int' object is not iterable"), an M < 1, a float or a bool ("Problem.m must be
    ...", or "hints['m'] ..." after the tuning call), and a bad ``mode`` (refused by compile_mm only
    after the one tuning call had run)."""
    from .capture import int_at_least
    from .dispatch.common import MODES

    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, not {type(model).__name__}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if isinstance(extra_m, (str, bytes)) or not isinstance(extra_m, Iterable):
        raise TypeError(f"extra_m must be a sequence of M values (ints >= 1), e.g. (1,) for decode; got {extra_m!r}")
    extra_m = tuple(extra_m)
    bad = [m for m in extra_m if not (isinstance(m, int) and int_at_least(m, 1))]
    if bad:
        raise ValueError(f"extra_m must hold ints >= 1 (M values to tune beyond those seen), got {bad[0]!r} "
                         f"in {extra_m!r}")
    return extra_m


def _tune_model(model, inputs, fn, extra_m, mode, tune_fn, verify, pdl, tune_kwargs) -> dict[tuple, Dispatcher]:
    cap = capture(model, inputs=inputs, fn=fn)
    _warn_outside_layers(cap)
    wanted = layer_keys(model)
    seen: dict[tuple, set] = {}
    empty = []
    for (n, k, dt, lb), ms in cap.hints().items():
        if 0 in (n, k):  # Linear(0, n) / Linear(k, 0): no product to tune, torch's output is the bias
            empty.append(f"N={n} K={k}")
            continue
        ms = {m for m in ms if m > 0}  # an empty batch has nothing to tune either
        if not ms:
            empty.append(f"M=0 N={n} K={k}")
            continue
        # A B of one column (Linear(K, 1): a gate or a score head) or one row is row- and
        # column-major at once, and capture names it 'row' (operand_layout), where the layer's
        # key says 'col': matched on either, or the layer would miss its hints and patch would
        # tune it anew (a second tuning call, at default M values).
        keys = [key for key in [(n, k, dt, lay) for lay in (("row", "col") if 1 in (n, k) else (lb,))]
                if key in wanted]
        if not keys:
            # A layer whose weight is not stored as its kind's usually is (a transposed view: a
            # Linear's weight W.T.contiguous().T, a Conv1D's tied or converted weight) runs its B
            # in the other layout, which its key does not name. Its dispatcher is still keyed and
            # declared by the layer's kind (patch looks it up so, and a call runs on its own
            # strides), so the M values count for it: such layers were left unpatched, warned
            # about as never run, and a model of only such layers raised "no patchable GEMM ran".
            keys = [key for key in wanted if key[:3] == (n, k, dt)]
        for key in keys:
            seen.setdefault(key, set()).update(ms)
    hints = {key: sorted(ms | set(extra_m)) for key, ms in seen.items()}
    if not hints and empty:
        raise ValueError(f"only GEMMs with a size 0 ran in the example passes ({', '.join(empty)}): nothing to "
                         "tune; such layers stay torch's")
    if not hints:
        converted = sum(hasattr(m, "_gemmtune_handle") for m in model.modules())
        already = (f"; {converted} layer(s) of this model are already patched (to tune again, patch an unpatched "
                   "copy, or pass patch(dispatchers=...) to put these on other dispatchers)") if converted else ""
        raise ValueError(f"no patchable GEMM ran in the example passes ({cap.summary()}); patch converts "
                         f"nn.Linear and transformers' Conv1D layers{already}")
    problems = [Problem.from_sizes(m, n, k, dt, layout_b=lb) for (n, k, dt, lb), ms in hints.items() for m in ms]
    if tune_fn is None:
        from .tune import tune as tune_fn
        if pdl:
            from .pdl import credit_kwargs
            tune_kwargs = credit_kwargs(tune_kwargs)
    result = tune_fn(problems, **tune_kwargs)  # the one tuning call

    def reuse(_problems, **_kw):
        return result

    ds = {key: compile_mm(n=key[0], k=key[1], dtype=key[2], hints={"m": ms}, layout_b=key[3], mode=mode,
                          tune_fn=reuse, verify=verify)
          for key, ms in hints.items()}
    if pdl:
        from .pdl import attach_twins, warn_if_training
        warn_if_training(model, "tune_model")
        attach_twins(ds)
    return ds


def save_patched(path: str | os.PathLike, dispatchers: Mapping[tuple, Dispatcher] | torch.nn.Module, *,
                 binaries: bool = True) -> Path:
    """One artifact for a patched model: ``path`` (an index JSON) plus one dispatcher file per
    layer shape beside it (``<stem>.d/``), each with its compiled kernels on a GPU. ``dispatchers``
    is the patched model itself, or its dispatchers keyed (n, k, dtype, layout_b), or (n, k, dtype)
    as ``gemmtune.nn.dispatchers(model)`` and ``patch(dispatchers=...)`` give them (the layout is
    then the dispatcher's). Given the model, the artifact also records its fused groups
    (``gemmtune.fuse_linears``), which ``load_patched`` then re-fuses in the model it patches."""
    path = Path(path)
    fused: list = []
    if isinstance(dispatchers, torch.nn.Module):
        from .fuse import fused_names
        from .nn import dispatchers as of_model
        # The groups under the model's own names: of a torch.compile wrapper they were
        # '_orig_mod.<name>', which no fresh model has (load_patched raised "cannot re-fuse").
        fused = [list(g) for g in fused_names(unwrapped(dispatchers))]
        dispatchers = of_model(dispatchers, with_layout=True)
        if not dispatchers:
            raise ValueError("save_patched: this model has no patched layer (run gemmtune.patch first)")
    if not re.fullmatch(r"[\w.\-]+", path.stem):
        # load_patched reads the layer files only under such names (no spaces, no '+', no '@')
        raise ValueError(f"cannot save a patched model as {path.name!r}: use letters, digits, '_', '-' and '.' "
                         "in its name")
    keyed = {}
    for key, d in dispatchers.items():
        if not (isinstance(key, tuple) and len(key) in (3, 4)):
            raise ValueError(f"dispatchers must be keyed (n, k, dtype[, layout_b]), got {key!r}")
        keyed[tuple(key) if len(key) == 4 else (*key, d.layout_b)] = d
    folder = path.with_name(path.stem + ".d")
    path.parent.mkdir(parents=True, exist_ok=True)
    _refuse_others_folder(path, folder)
    # Every layer is written into a folder of this save's own, which replaces ``<stem>.d`` only
    # once all are written (then the index): a save that fails half-way leaves the earlier
    # artifact whole, not its index naming layer files of two runs.
    stage = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{folder.name}.", suffix=".tmp"))
    old = None
    try:
        os.chmod(stage, 0o777 & ~_UMASK)  # mkdtemp's 0700 -> what mkdir would have made
        layers = []
        for (n, k, dt, lb), d in sorted(keyed.items()):
            name = f"mm_n{n}_k{k}_{dt}_{lb}.json"
            d.save(stage / name, binaries=binaries)
            layers.append({"n": n, "k": k, "dtype": dt, "layout_b": lb, "file": f"{folder.name}/{name}"})
        doc = {"format": FORMAT, "schema_version": SCHEMA_VERSION, "layers": layers}
        if fused:  # optional: an artifact without it loads as before
            doc["fused"] = fused
        index = json.dumps(doc, indent=1) + "\n"
        (stage / OWNER_FILE).write_text(path.name + "\n")  # whose folder this is (_refuse_others_folder)
        with locked(path):  # two saves to one path swap their folders one after the other
            if folder.exists():
                old = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{folder.name}.", suffix=".old"))
                os.replace(folder, old / folder.name)
            moved = False
            try:
                os.replace(stage, folder)
                moved = True
                return write_atomic(path, index)
            except BaseException:  # the earlier folder back beside the earlier index
                if moved:
                    os.replace(folder, stage)
                if old is not None:
                    os.replace(old / folder.name, folder)
                raise
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


# In a save's layer folder: the name of the index it belongs to. ``m.json`` and ``m`` (or ``m.txt``)
# share the folder ``m.d/``: a second save under the same stem replaced the first's layer files, and
# ``load_patched(model, "m.json")`` then served the other artifact's kernels, every shape check passing
# (session 45's CPU hunt).
OWNER_FILE = ".index"


def _folder_owner(folder: Path) -> str | None:
    try:
        return (folder / OWNER_FILE).read_text().strip() or None
    except OSError:
        return None


def _refuse_others_folder(path: Path, folder: Path) -> None:
    """Raise ValueError when ``folder`` (``<stem>.d``) holds the layers of another index than
    ``path``: by its owner file, or, for a folder saved before owner files, by a sibling artifact
    index of the same stem."""
    if not folder.exists():
        return
    owner = _folder_owner(folder)
    if owner is None:
        for other in path.parent.glob(glob.escape(path.stem) + "*"):
            if other.name == path.name or other.stem != path.stem or not other.is_file():
                continue
            try:
                head = other.read_bytes()[:4096]
            except OSError:
                continue
            if FORMAT.encode() in head:
                owner = other.name
                break
    if owner is not None and owner != path.name:
        raise ValueError(f"cannot save a patched model as {path}: its layer folder {folder} holds the layers of "
                         f"{path.with_name(owner)}, another saved artifact; save under another name, or remove "
                         "that artifact and its folder first")


def load_patched(model: torch.nn.Module, path: str | os.PathLike, *, strict: bool = False,
                 convert_aten_layers: bool = False, pdl: bool = False, example_inputs=None) -> torch.nn.Module:
    """Re-apply a saved ``save_patched`` artifact to ``model`` (same architecture): no tuning, and
    on the same GPU and software no compiles either. Sibling layers saved fused are fused first. Layers with no saved dispatcher are left
    as they are (a warning names them). As in ``patch``, a layer whose dispatcher runs cuBLAS
    for every shape stays torch's own, its dispatcher recorded on it
    (``convert_aten_layers=True`` converts it). ``pdl=True``: graphs compiled with Inductor's PDL
    on serve the saved GEMV strip winners as their ``-pdl`` twins (``gemmtune.pdl``; tune once,
    save, and choose PDL where you serve). ``example_inputs`` (on a GPU): the step gate that
    ``patch(example_inputs=...)`` runs, over these passes (``gemmtune.gate_eager``): each pass's
    tuned eager paths are kept only where its whole un-graphed step is faster with them. Eager
    choices are not saved (host time is this machine's and process's), so a served model measures
    them anew; without ``example_inputs`` each layer decides alone on its first call of a shape.
    After that gate, as after patch's, the layers on cuBLAS for every eager shape go back to torch's
    own class (``gemmtune.nn.retire``; their compiled GEMM still runs on their dispatcher)."""
    from .jsonio import read_json
    from .nn import _patch_layers
    from .problem import dtype_name

    path = Path(path)
    if example_inputs is not None:
        # Refused before the model is touched, as patch refuses them: one tensor or one dict was
        # refused by the gate only after the layers were converted, leaving the model patched
        # by a call that raised.
        from .capture import example_passes
        example_inputs = example_passes(example_inputs)
    doc = read_json(path)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"{path}: not a saved gemmtune patched model (format != {FORMAT!r})")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"{path}: schema_version {doc.get('schema_version')!r}, expected {SCHEMA_VERSION}")
    ds = {}
    layers = doc.get("layers", [])
    if not isinstance(layers, list):
        raise ValueError(f"{path}: malformed 'layers' (a list of objects with n, k, dtype, layout_b, file): "
                         f"got {type(layers).__name__}")
    for i, layer in enumerate(layers):
        try:  # a KeyError / TypeError / int() error named neither the file nor the field
            f = str(layer["file"])
            key = (int(layer["n"]), int(layer["k"]), str(layer["dtype"]), str(layer["layout_b"]))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{path}: malformed 'layers' (a list of objects with n, k, dtype, layout_b, file): "
                             f"layers[{i}]: {type(e).__name__}: {e}") from None
        if ".." in Path(f).parts or Path(f).is_absolute() or not re.fullmatch(r"[\w.\-/]+", f):
            raise ValueError(f"{path}: layer file {f!r} must be a relative path inside the artifact")
        d = load(path.parent / f, strict=strict)
        # The layer file must hold the dispatcher the index lists it for: one edited by hand (or
        # copied from another artifact) to another N, K or dtype was refused only later, by the
        # layer ("dispatcher has N=48, K=32; this Linear needs ..."), naming neither file; one of
        # another B layout (a Linear's W is read as 'col', a Conv1D's as 'row') loaded and served
        # the layer with choices tuned for the other layout.
        got = (d.dims["n"], d.dims["k"], d.dtype, d.layout_b)
        try:
            want = (key[0], key[1], dtype_name(key[2]), key[3])  # an alias ('bf16') names the same dtype
        except TypeError:
            want = key
        if got != want or d.dims["m"] is not None:
            raise ValueError(f"{path}: layer file {f} holds a dispatcher for n={got[0]}, k={got[1]}, {got[2]}, "
                             f"layout_b={got[3]}" + (f", static m={d.dims['m']}" if d.dims["m"] is not None else "")
                             + f"; the index lists it for n={key[0]}, k={key[1]}, {key[2]}, layout_b={key[3]} "
                             "with a dynamic m")
        ds[key] = d
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, not {type(model).__name__}")
    fused = doc.get("fused", [])
    if fused:
        # The fused layers' dispatchers are saved under the fused shapes: the model is fused as
        # it was when saved (by name: no forward pass), then patched.
        from .fuse import fuse_linears
        if not isinstance(fused, list):
            raise ValueError(f"{path}: 'fused' must be a list of layer-name lists")
        try:
            # By the names saved, which are the model's own: into a torch.compile wrapper, those
            # of the module it wraps (its own are '_orig_mod.<name>').
            fuse_linears(unwrapped(model), groups=fused)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{path}: cannot re-fuse this model as saved: {e}") from None
    # Straight to patch's layer pass, so that its warnings say load_patched and the artifact, and
    # point at the caller's line.
    # The artifact's dtypes named: a model loaded in another dtype than it was saved from matches
    # no layer, and "no dispatcher of their shape" alone pointed at the shapes.
    dtypes = ", ".join(sorted({key[2] for key in ds})) or "none"
    if pdl:
        from .pdl import attach_twins, warn_if_training
        warn_if_training(model, "load_patched")
        attach_twins(ds)
    out = _patch_layers(model, None, ds, False, "measure", convert_aten_layers,
                        f"have no dispatcher of their shape and dtype in {path} (its dispatchers: {dtypes})",
                        {}, who="gemmtune.load_patched")
    if example_inputs is not None:
        from .eager_gate import gate_eager
        gate_eager(model, example_inputs, retire=True)
    return out


__all__ = ["tune_model", "save_patched", "load_patched", "layer_keys", "is_conv1d"]
