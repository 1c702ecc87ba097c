"""``TuneOptions``: every setting of one tuning run, frozen and checked when made.

``gemmtune.tune(problems, **keywords)`` is ``Tuner(TuneOptions(**keywords)).run(problems)``;
the fields are its keywords (see ``gemmtune.tune`` for each one's meaning), so code that
needs to know what a run can be asked (``gemmtune bench``'s modes) reads ``TuneOptions``'s
fields instead of a function signature.

>>> TuneOptions(fast=True).search_space, TuneOptions(fast=True).bspace
('exhaustive', 'FAST')
>>> TuneOptions(benchmark_space="auto").bspace
'AUTO'
>>> "benchmark_space" in option_names()
True
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from .. import kernels
from ..bench import DEFAULT_RUNNER
from ..bench.timing import TIMINGS
from ..jsonio import check_file_target
from .plan import parse_benchmark_space
from .runoff import RUNOFF_MARGIN


@dataclass(frozen=True)
class TuneOptions:
    families: tuple[str, ...] | None = None   # None: every registered family
    space: str = "default"
    store: Any = "gemmtune.sqlite"            # a path or an open ResultStore
    out: str | os.PathLike | None = None
    workers: int | None = None
    timeout: float = 120.0
    compile_workers: int | None = None
    progress: bool = True
    runner: str = DEFAULT_RUNNER
    device: str | None = None
    seed: int = 0
    env: dict | None = None
    table: Any = None                         # a LookupTable or its path
    benchmark_space: str | int = "SAME"
    fast: bool = False
    model: Any = None                         # an object with predict(), or a model file
    retry_failed: bool = False
    timing: str = "standard"
    compile_ahead: int = 2
    overwrite: bool = False
    cluster: Any = None                       # 'local:N', a scheduler address or a distributed.Client
    server: str | os.PathLike | None = None
    deterministic: bool = False               # only choices that give the same bits every call
    min_gain: float = 0.0                     # a non-cuBLAS winner must beat cuBLAS by this fraction
    runoff: float = RUNOFF_MARGIN             # a winner within this of cuBLAS is timed again beside it; 0: never
    in_process: bool = False                  # measure in this process (bench.inprocess): no worker start-up
    prestarted: tuple = ()                    # workers started before the run, adopted by its pool
    pdl_credit: float = 0.0                   # a strip with a -pdl twin ranks this fraction faster (gemmtune.pdl)

    def __post_init__(self):
        if self.families is not None:
            # One string is a family name (or a comma-separated list, as the CLI takes): tuple("aten")
            # made ('a', 't', 'e', 'n'), refused as "unknown kernel family 'a'".
            fams = ([f.strip() for f in self.families.split(",")] if isinstance(self.families, str)
                    else list(self.families))
            fams = tuple(f for f in fams if f != "")
            if not fams:
                # (was read as None, every family: a filter that left nothing searched the whole space)
                raise ValueError(f"families names no family ({self.families!r}); give family names from "
                                 f"{', '.join(kernels.family_names())}, or None for all of them")
            object.__setattr__(self, "families", fams)
        for name in ("fast", "retry_failed", "overwrite", "deterministic", "in_process"):
            v = getattr(self, name)
            if not isinstance(v, bool):
                # bool("False") is True: overwrite="False" replaced the table at ``out``.
                raise TypeError(f"{name} must be True or False, got {v!r}")
        if self.env is not None and not (isinstance(self.env, Mapping) and all(
                isinstance(k, str) and isinstance(v, str) for k, v in self.env.items())):
            # (a list failed as "dictionary update sequence element #0 ...", an int value as "worker
            # 1 of 1 could not be started" once the store had been created)
            raise TypeError(f"env must be a dict of str to str (the workers' extra environment), got {self.env!r}")
        if self.space not in ("default", "exhaustive"):
            # Every family's space() reads kind == 'default' and takes anything else as exhaustive:
            # a typo ran the whole exhaustive search.
            raise ValueError(f"space must be 'default' or 'exhaustive', got {self.space!r}")
        s = self.seed
        if isinstance(s, bool) or not isinstance(s, int):
            # The worker int()s it per candidate: a bad one stored every candidate as a final 'error'.
            raise ValueError(f"seed must be an int, got {s!r}")
        t = self.timeout
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not t > 0:
            # 0 or less killed the worker on every candidate, each stored as a final 'timeout'.
            raise ValueError(f"timeout must be a number of seconds > 0, got {t!r}")
        for name, low in (("workers", 1), ("compile_workers", 0)):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < low):
                # (compile_workers=-1 was taken as given; workers=0 failed once the store existed)
                raise ValueError(f"{name} must be an int >= {low} or None (the default), got {v!r}")
        parse_benchmark_space(self.benchmark_space, self.fast)  # raises on a bad value
        if self.timing not in TIMINGS:
            raise ValueError(f"timing must be one of {', '.join(map(repr, TIMINGS))}, got {self.timing!r}")
        g = self.min_gain
        if isinstance(g, bool) or not isinstance(g, (int, float)) or not 0.0 <= g < 1.0:
            raise ValueError(f"min_gain must be a fraction in [0, 1), e.g. 0.02, got {g!r}")
        r = self.runoff
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0.0 <= r < 1.0:
            raise ValueError(f"runoff must be a fraction in [0, 1) (0: no run-off), e.g. 0.05, got {r!r}")
        c = self.pdl_credit
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0.0 <= c < 0.1:
            raise ValueError(f"pdl_credit must be a fraction in [0, 0.1), e.g. 0.02, got {c!r}")
        if c and self.cluster is not None:
            raise ValueError("pdl_credit is not applied by a cluster run: leave it 0 there")
        if self.in_process and (self.server is not None or self.cluster is not None):
            raise ValueError("in_process measures in this process: it cannot be combined with server or cluster")
        if self.in_process and (self.workers is not None or self.compile_workers not in (None, 0)):
            # Neither pool starts in this process (Tuner._pool, compile_pool_size): the count was
            # dropped without a word, as the CLI's --in-process with --workers refuses.
            raise ValueError(f"in_process measures in this process and starts no worker or compile process: "
                             f"leave workers ({self.workers!r}) and compile_workers ({self.compile_workers!r}) unset")
        if self.server is not None and self.cluster is not None:
            # It was ignored: the cluster's workers measured, and the server named was never asked.
            raise ValueError("--server (a warm worker pool on this host) and --cluster (the cluster's workers "
                             "measure) cannot be combined: give one of them")
        ca = self.compile_ahead
        if not isinstance(ca, int) or isinstance(ca, bool) or ca < 0:
            raise ValueError(f"compile_ahead must be an int >= 0 (shapes compiled ahead), got {ca!r}")
        m = self.model
        if m is not None and not isinstance(m, (str, os.PathLike)) and not callable(getattr(m, "predict", None)):
            raise TypeError(f"model must have a predict(problem, choices) method or be a model file path, "
                            f"not {type(m).__name__}")

    @property
    def bspace(self) -> str | int:
        """benchmark_space parsed: 'SAME', 'DEFAULT', 'AUTO', 'FAST' or k (``fast``: 'FAST')."""
        return parse_benchmark_space(self.benchmark_space, self.fast)

    @property
    def search_space(self) -> str:
        """The space candidates come from: ``space``, or 'exhaustive' with ``fast``."""
        return "exhaustive" if self.fast else self.space

    @property
    def family_names(self) -> tuple[str, ...]:
        """The families searched, each checked to exist (ValueError naming an unknown one)."""
        names = self.families or kernels.family_names()
        for f in names:
            kernels.spec(f)  # ValueError naming an unknown family; imports no Triton
        return names

    def check(self) -> None:
        """What must hold before anything is measured: every family exists, the model file
        exists, ``out``'s directory exists, and ``out`` is a file path other than the store's."""
        for f in self.families or ():
            kernels.spec(f)  # ValueError naming an unknown family
        if isinstance(self.model, (str, os.PathLike)) and not Path(self.model).is_file():
            raise ValueError(f"model file {self.model} does not exist")
        if self.out is not None:
            check_file_target(self.out, "the table")
        store = getattr(self.store, "path", self.store)
        if self.out is not None and isinstance(store, (str, os.PathLike)) \
                and Path(self.out).resolve() == Path(store).resolve():
            # --overwrite would have replaced every measurement with the table
            raise ValueError(f"the table (--out) and the results store (--store) are one file, {self.out}: "
                             "give them different paths")

    def replace(self, **changes) -> "TuneOptions":
        return dataclasses.replace(self, **changes)

    def keywords(self) -> dict:
        """The fields as ``tune``'s keywords."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def option_names() -> frozenset[str]:
    """The keywords ``gemmtune.tune`` takes: TuneOptions's fields."""
    return frozenset(f.name for f in dataclasses.fields(TuneOptions))
