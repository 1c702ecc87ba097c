"""Process-wide settings the bench changes for a while, and puts back.

``ProcessSettings`` remembers each environment variable or attribute it sets; ``bench_settings``
is the bench's own set: TF32 off for true fp32 rows, fresh Triton and Inductor caches under a
scratch folder (so every tuning time includes its compilation) and, unless Inductor is left
out, Inductor's caches disabled. Leaving the block restores each of them, also after an error.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

class ProcessSettings(contextlib.ExitStack):
    """Process-wide settings changed for a while: each ``setenv`` / ``setattr`` remembers the
    value it replaced, and leaving the block puts them all back (in reverse order), also when
    the block raises; ``callback`` adds any other undo step.

        >>> import os
        >>> with ProcessSettings() as s:
        ...     s.setenv("GEMMTUNE_DOCTEST", "1")
        >>> "GEMMTUNE_DOCTEST" in os.environ
        False
    """

    def setenv(self, name: str, value: str) -> None:
        old = os.environ.get(name)
        self.callback(_restore_env, name, old)
        os.environ[name] = value

    def setattr(self, obj, name: str, value) -> None:
        old = getattr(obj, name)
        self.callback(setattr, obj, name, old)
        setattr(obj, name, value)


def _restore_env(name: str, old: str | None) -> None:
    if old is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = old


@contextlib.contextmanager
def bench_settings(scratch: str | os.PathLike, *, inductor: bool = True):
    """The process-wide settings of one bench run, put back when the block ends (or raises):
    ``torch.backends.cuda.matmul.allow_tf32`` off (fp32 rows are true fp32 for every method),
    ``TRITON_CACHE_DIR`` and ``TORCHINDUCTOR_CACHE_DIR`` in ``scratch`` (fresh caches: every
    tuning time includes its compilation) and, with ``inductor``, Inductor's caches disabled
    (``torch._inductor.config.force_disable_caches``: its tuning is paid in full on every
    shape). Yields the ProcessSettings, for the caller's further changes (undone with these).

    >>> import torch, tempfile
    >>> before = torch.backends.cuda.matmul.allow_tf32, os.environ.get("TRITON_CACHE_DIR")
    >>> with bench_settings(tempfile.mkdtemp(), inductor=False):
    ...     torch.backends.cuda.matmul.allow_tf32
    False
    >>> (torch.backends.cuda.matmul.allow_tf32, os.environ.get("TRITON_CACHE_DIR")) == before
    True
    """
    import torch

    scratch = Path(scratch)
    with ProcessSettings() as settings:
        settings.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
        settings.setenv("TRITON_CACHE_DIR", str(scratch / "triton-bench"))
        settings.setenv("TORCHINDUCTOR_CACHE_DIR", str(scratch / "inductor"))
        if inductor:
            import torch._inductor.config as icfg
            settings.setattr(icfg, "force_disable_caches", True)
        yield settings
