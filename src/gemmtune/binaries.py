"""Compiled kernel binaries: bundle the ones this process launched, restore them elsewhere.

Triton keeps every compiled kernel in its on-disk cache (``$TRITON_CACHE_DIR``, by
default ``~/.triton/cache``), one directory per kernel variant holding the binary
(cubin), its metadata JSON and a group file that tells Triton the files belong
together. When a JIT function is launched, Triton hashes the source, the
constexprs and the argument specialisation, and looks that directory up before it
compiles anything. So a variant restored into the cache directory of another
process or machine is *loaded* on its first launch, not compiled: no tuning and no
compilation in the new process.

``bundle(dest)`` copies the cache directories of every variant of gemmtune's own
kernels that this process holds in memory (so: the ones it launched), and of the C
launcher modules Triton built for them, into ``dest``;
``restore(src)`` copies them into this process's Triton cache directory, skipping
the ones already there. A restored variant is only ever a cache *hit* when it was
built for the same kernel source, Triton version and GPU architecture (they are
part of Triton's hash); anything else is simply compiled on first launch, so a
stale bundle costs time, never correctness.

Only Triton's default file cache is supported; with a custom
``TRITON_CACHE_MANAGER`` (a remote cache, say) ``restore`` copies nothing and says
why, and kernels compile on first launch as usual.

Example::

    >>> from gemmtune import binaries
    >>> names = binaries.bundle("mm.json.kernels")     # after the kernels ran  # doctest: +SKIP
    >>> binaries.restore("mm.json.kernels")            # in a new process        # doctest: +SKIP
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from .jsonio import _UMASK

# Files Triton leaves in a cache directory that are not part of the kernel.
_SKIP = ("lock",)


def cache_dir() -> Path | None:
    """This process's Triton file-cache directory, or None if Triton uses another cache manager."""
    try:
        from triton import knobs

        if knobs.cache.manager_class is not None:
            return None
        d = knobs.cache.dir
    except (ImportError, AttributeError):  # older triton: no knobs module
        if os.environ.get("TRITON_CACHE_MANAGER"):
            return None
        from triton.runtime.cache import default_cache_dir

        d = os.environ.get("TRITON_CACHE_DIR") or default_cache_dir()
    return Path(d) if d else None


def _jit_functions() -> list:
    """gemmtune's Triton kernels (the JIT functions whose variants a dispatcher launches)."""
    from .kernels import tiled

    return [v for v in vars(tiled).values() if hasattr(v, "run") and hasattr(v, "fn")]


def _compiled(fn) -> list:
    """Compiled kernels a JIT function holds in memory, across devices and triton versions."""
    caches = getattr(fn, "device_caches", None)
    if caches is not None:  # triton >= 3.0: device -> (kernel_cache, ...)
        return [k for entry in caches.values() for k in entry[0].values()]
    return [k for per_dev in getattr(fn, "cache", {}).values() for k in per_dev.values()]


def _module_file(obj) -> str | None:
    """The file of the extension module behind ``obj``: a module, one of its functions, or
    an object whose ``launch`` is one (Triton's launcher). None when there is none."""
    for cand in (obj, getattr(obj, "launch", None)):
        if cand is None:
            continue
        mod = cand if hasattr(cand, "__file__") else getattr(cand, "__self__", None)
        path = getattr(mod, "__file__", None)
        if isinstance(path, str):
            return path
    return None


def _driver_utils():
    """Triton's active driver utilities (its compiled ``cuda_utils`` module), or None."""
    try:
        from triton.runtime import driver

        return getattr(driver.active, "utils", None)
    except Exception:  # no GPU driver (CPU, interpreter): nothing was compiled
        return None


def host_module_dirs(kernels: list) -> set[Path]:
    """Cache directories of the host-side modules Triton compiled to launch ``kernels``.

    Before a compiled kernel's first launch Triton builds C glue with the system
    compiler and keeps it in the same cache: a launcher per kernel signature (triton
    3.x up to 3.6: ``__triton_launcher.so``) and the driver's ``cuda_utils`` module.
    A bundle without them leaves a new process compiling C on its first calls (on an
    H200 with triton 3.6: 3 such builds, ~350 ms on a first call). Only directories
    inside this process's Triton file cache count."""
    cache = cache_dir()
    if cache is None:
        return set()
    cache = cache.resolve()
    out: set[Path] = set()
    objs = [getattr(k, "run", None) for k in kernels] + [getattr(_driver_utils(), "load_binary", None)]
    for obj in objs:
        path = _module_file(obj) if obj is not None else None
        if path:
            d = Path(path).resolve().parent
            if d.parent == cache and d.is_dir():
                out.add(d)
    return out


def loaded_dirs() -> list[Path]:
    """Cache directories of every variant of gemmtune's kernels compiled or loaded in this
    process, and of the host-side modules Triton built to launch them."""
    out: set[Path] = set()
    kernels = [k for fn in _jit_functions() for k in _compiled(fn)]
    for kernel in kernels:
        group = getattr(kernel, "metadata_group", None) or {}
        for path in group.values():
            p = Path(path).parent
            if p.is_dir():
                out.add(p)
    if kernels:
        out |= host_module_dirs(kernels)
    return sorted(out)


def bundle(dest: str | os.PathLike, dirs: list[Path] | None = None) -> list[str]:
    """Copy the kernel directories (default: ``loaded_dirs()``) into ``dest``; return their names.

    ``dest`` is replaced as a whole, so a bundle never mixes old and new kernels. The old bundle
    is moved aside, not deleted, until the new one is in its place: deleting it first left a
    process killed during that delete with neither."""
    dest = Path(dest)
    dirs = loaded_dirs() if dirs is None else [Path(d) for d in dirs]
    dest.parent.mkdir(parents=True, exist_ok=True)
    # A temp folder of this writer's own: two processes saving one bundle never fill each other's.
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp"))
    os.chmod(tmp, 0o777 & ~_UMASK)  # mkdtemp's 0700 -> what mkdir would have made
    names, old = [], None
    try:
        for d in dirs:
            files = [f for f in d.iterdir() if f.is_file() and f.name not in _SKIP and not f.name.startswith("tmp.")]
            if not files:
                continue
            (tmp / d.name).mkdir()
            for f in files:
                shutil.copy2(f, tmp / d.name / f.name)
            names.append(d.name)
        if dest.exists():
            old = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".old")) / dest.name
            os.replace(dest, old)
        os.replace(tmp, dest)
    except BaseException:
        if old is not None and old.exists() and not dest.exists():
            os.replace(old, dest)  # the new one did not get there: the old one goes back
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if old is not None:
            shutil.rmtree(old.parent, ignore_errors=True)
    return sorted(names)


def restore(src: str | os.PathLike, names: list[str] | None = None) -> tuple[int, str]:
    """Copy bundled kernel directories into this process's Triton cache.

    Returns (directories copied, a one-line note). Directories already in the cache are
    left as they are; a missing bundle or a non-file cache copies nothing and says why."""
    src = Path(src)
    if not src.is_dir():
        return 0, f"no kernel binaries at {src}: kernels compile on first launch"
    target = cache_dir()
    if target is None:
        return 0, "Triton uses a custom cache manager: binaries not restored, kernels compile on first launch"
    wanted = [src / n for n in names] if names is not None else sorted(p for p in src.iterdir() if p.is_dir())
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as e:  # a cache folder this process cannot make (read-only home, disk full): compile instead
        return 0, f"cannot use the Triton cache {target} ({e.strerror or e}): kernels compile on first launch"
    copied = 0
    for d in wanted:
        if not d.is_dir():
            continue
        out = target / d.name
        if out.exists():
            continue
        try:
            stage = Path(tempfile.mkdtemp(dir=target, prefix=f"{d.name}.tmp."))  # one per call, threads too
        except OSError as e:  # an unwritable cache, a full disk: what is restored stays, the rest compiles
            return copied, (f"{copied} kernel binaries restored into {target}, then {e.strerror or e}: the rest "
                            "compile on first launch")
        tmp = stage / d.name
        try:
            shutil.copytree(d, tmp)
            os.replace(tmp, out)  # atomic: a concurrent reader sees all files or none
            copied += 1
        except OSError:  # another process restored it first
            pass
        finally:
            shutil.rmtree(stage, ignore_errors=True)
    return copied, f"{copied} kernel binaries restored into {target}"
