"""``gemmtune bench``: the side-by-side benchmark (gemmtune against cuBLAS, Inductor
max-autotune, TunableOp and nvMatmulHeuristics on one GPU). Its parts live in
``gemmtune.bench`` (suite, modes, ceilings, rounds, inductor, tunableop, nvmmh, records,
settings); this module re-exports their names for scripts and code written against it.
"""

from __future__ import annotations

from .bench.ceilings import (CEILING_N, COPY_BYTES, GEMV_K, READ_BYTES, WRITE_BYTES, read_ceiling,  # noqa: F401
                             load_ceilings, measure_ceilings, save_ceilings, write_ceiling)
from .bench.inductor import INDUCTOR_MODE, AutotuneLog, compile_inductor, inductor_choice  # noqa: F401
from .bench.modes import (EXTRA_MODE_NAMES, NVMMH_TOPK, OPTIONAL_MODES, TUNE_MODES, extra_modes,  # noqa: F401
                          supported_modes, tune_phase)
from .bench.nvmmh import _nvmmh_gpu, nvmmh_choices, nvmmh_to_choice  # noqa: F401
from .bench.records import timer_text  # noqa: F401
from .bench.rounds import ROUNDS, aggregate, make_entry, rotation, round_robin, timer_count, verified_launch  # noqa: F401
from .bench.settings import ProcessSettings, bench_settings  # noqa: F401
from .bench.suite import CUDA_ERROR, measure_shape, run  # noqa: F401
from .bench.tunableop import TunableOp  # noqa: F401
