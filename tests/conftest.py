"""Shared test setup: Triton's CPU interpreter when there is no GPU, fresh seeds, the device.

TRITON_INTERPRET must be set before triton.jit decorates gemmtune's kernels (the
decorator picks the interpreter at definition time), so it is set here, at conftest
import, before any test module imports gemmtune.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import sys
import zlib
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():
    # Only without a GPU: on a GPU machine the same tests compile real kernels.
    os.environ["TRITON_INTERPRET"] = "1"

# The package is not installed in every environment (src layout): when `import gemmtune`
# would fail, make it find this checkout's sources. An installed (or PYTHONPATH) copy wins.
SRC = Path(__file__).resolve().parents[1] / "src"
if importlib.util.find_spec("gemmtune") is None:
    sys.path.insert(0, str(SRC))

HAS_CUDA = torch.cuda.is_available()


def _interpreter_index_shim() -> None:
    """Triton before 3.9 (3.6 on the GPU machine) has its interpreter turn a scalar into a Python
    int with ``int(array)`` on a one-element array, which numpy 2.4 refuses ("only 0-dimensional
    arrays can be converted"; numpy 1.26 warned): every ``range()`` over a program-id-derived bound
    failed, 26 CPU-lane tests on the H200 machine (2026-11-29). The conversion, made on the one
    element. Tests only: gemmtune itself leaves triton as it is."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return
    try:
        import numpy as np
        import triton
        from triton.runtime import interpreter
    except ImportError:
        return
    if tuple(int(p) for p in triton.__version__.split(".")[:2] if p.isdigit()) >= (3, 9):
        return
    original = getattr(interpreter, "_patch_lang_tensor", None)
    if original is None or getattr(original, "_gemmtune_shim", False):
        return

    def index(self):
        data = np.asarray(self.handle.data)
        if data.size != 1:
            raise TypeError(f"only single-element tensors can be converted to an index, got shape {data.shape}")
        return int(data.reshape(-1)[0])

    def patched(tensor, scope):
        original(tensor, scope)  # the scope has recorded the attribute to restore afterwards
        tensor.__index__ = index

    patched._gemmtune_shim = True
    interpreter._patch_lang_tensor = patched


_interpreter_index_shim()


_DEVICE_CALL = '''    def __call__(self, *args, **kwargs):
        # This is a device function call
        _patch_lang(self.fn)
        fn = self.rewrite()
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            raise InterpreterError(repr(e)) from e
'''


def _interpreter_nested_call_shim() -> None:
    """Triton's interpreter patches ``triton.language`` for the interpreter at each launch (and
    restores it after), then again at every call of a ``@triton.jit`` helper inside the kernel
    (ours, and tl.sum, tl.zeros, tl.cdiv, ...), in every program of the grid: an
    ``inspect.getmembers`` scan of tl or tl.core, tl.math and the tensor class each time. After
    the first such call in a launch, a helper's patching finds nothing left to patch and re-sets
    the same closures (the restore at the launch's end is untouched by it). The scans were 37%
    of the time of a skinny GEMV launch (2.4 -> 1.5 s, the output bitwise the same; triton 3.9).
    Here a helper's call skips them where the launch running in this thread has patched every
    language module the helper sees, itself or at an earlier helper's call; any other call is
    triton's own. Tests only, and only where triton's helper-call method is the one above, word
    for word; the kernels run the same operations either way."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return
    try:
        import inspect
        import threading

        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:
        return
    grid_call = interpreter.GridExecutor.__call__
    device_call = interpreter.InterpretedFunction.__call__
    if getattr(device_call, "_gemmtune_shim", False):
        return
    try:
        if inspect.getsource(device_call) != _DEVICE_CALL:
            return
    except (OSError, TypeError):
        return
    langs = (tl, tl.core)
    state = threading.local()
    seen: dict = {}

    def langs_of(fn) -> frozenset:
        if fn not in seen:
            seen[fn] = frozenset(id(v) for v in fn.__globals__.values() if any(v is lang for lang in langs))
        return seen[fn]

    def launch(self, *args, **kwargs):
        stack = state.__dict__.setdefault("patched", [])
        stack.append(set(langs_of(self.fn)))
        try:
            return grid_call(self, *args, **kwargs)
        finally:
            stack.pop()

    def call(self, *args, **kwargs):
        stack = getattr(state, "patched", None)
        mine = langs_of(self.fn)
        if not stack or not mine or not mine <= stack[-1]:  # (no tl at all: triton's own assert)
            if stack and mine:
                stack[-1] |= mine  # patched by the call below, until the launch's end at least
            return device_call(self, *args, **kwargs)
        fn = self.rewrite()
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            raise interpreter.InterpreterError(repr(e)) from e

    call._gemmtune_shim = True
    interpreter.GridExecutor.__call__ = launch
    interpreter.InterpretedFunction.__call__ = call


_interpreter_nested_call_shim()

# Under pytest-xdist (`-n 2`, the README's test command) every worker is its own process, and
# each would start torch's intra-op pool with one thread per core: split the cores instead.
_XDIST_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _XDIST_WORKERS > 1:
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // _XDIST_WORKERS))


def _split_lightgbm_threads() -> None:
    """The LightGBM ranker's default thread count, split over the xdist workers as torch's is.

    ``_LGBMRanker`` takes ``min(os.cpu_count(), 8)`` threads unless told; on the 2-core CI
    machine that is 2 in each of 2 workers, and LightGBM's OpenMP threads spin waiting for a
    core the other worker holds: one ranker fit on the test sample took 11-12 s with 2 threads
    beside a busy core and 0.75 s with 1 (2026-11-30). Only the default changes (a ``threads=``
    given is kept); the fits are deterministic either way (``deterministic``, ``force_row_wise``)."""
    if _XDIST_WORKERS <= 1:
        return
    try:
        from gemmtune.model import regressors
    except ImportError:
        return
    init = regressors._LGBMRanker.__init__
    if getattr(init, "_gemmtune_split", False):
        return
    per_worker = max(1, min((os.cpu_count() or 1) // _XDIST_WORKERS, 8))

    def split_init(self, *args, threads=None, **kwargs):
        init(self, *args, threads=threads or per_worker, **kwargs)

    split_init._gemmtune_split = True
    regressors._LGBMRanker.__init__ = split_init


_split_lightgbm_threads()


def _axis(axis) -> list[tuple]:
    """(value, id) pairs of one parametrize axis: a list of values or pytest.params, or
    (values, id function)."""
    values, idfn = axis if isinstance(axis, tuple) else (axis, None)
    return [(v.values[0], v.id) if isinstance(v, type(pytest.param(0))) else (v, idfn(v) if idfn else str(v))
            for v in values]


def covering(*axes, full: int = 2) -> list:
    """The product of ``axes`` as pytest.params (ids as stacked parametrize decorators give,
    first axis first), all but a covering subset marked ``slow``.

    The first ``full`` axes run in full in the fast lane; for each of their combinations the
    fast lane runs one combination of the other axes, rotating, so that every value of every
    axis still runs there (the slow lane runs the whole product). Written for the interpreter's
    kernel matrices, whose full products cost most of the fast lane's time.
    """
    heads = list(itertools.product(*map(_axis, axes[:full])))
    tails = list(itertools.product(*map(_axis, axes[full:])))
    out = []
    for i, head in enumerate(heads):
        for t, tail in enumerate(tails):
            row = (*head, *tail)
            out.append(pytest.param(*(v for v, _ in row), id="-".join(x for _, x in row),
                                    marks=() if t == i % len(tails) else pytest.mark.slow))
    return out


@pytest.fixture(autouse=True)
def _fresh_seed(request):
    """A different, reproducible seed per test: inputs are fresh random, never zeros.

    crc32 of the node id (not hash(), which is salted per process) so a failure
    reproduces with the same inputs on the next run.
    """
    seed = zlib.crc32(request.node.nodeid.encode())
    torch.manual_seed(seed)
    return seed


@pytest.fixture
def device() -> str:
    return "cuda" if HAS_CUDA else "cpu"


def make_operand(rows: int, cols: int, layout: str = "row", dtype=torch.float16,
                 device: str = "cpu") -> torch.Tensor:
    """A random (rows, cols) operand lying in memory as ``layout`` says.

    row      contiguous
    col      a transposed view: x.t() of a contiguous (cols, rows) tensor
    strided  every other column of a (rows, 2*cols) tensor: no unit stride
    offset   contiguous, but starting one element into its storage, so the data
             pointer is not 16-byte aligned (nor is the leading stride when cols is odd)
    """
    if layout == "row":
        return torch.randn(rows, cols, dtype=dtype, device=device)
    if layout == "col":
        return torch.randn(cols, rows, dtype=dtype, device=device).t()
    if layout == "strided":
        return torch.randn(rows, 2 * cols, dtype=dtype, device=device)[:, ::2]
    if layout == "offset":
        buf = torch.randn(rows * cols + 1, dtype=dtype, device=device)
        return buf[1:].view(rows, cols)
    raise ValueError(f"unknown layout {layout!r}")


@pytest.fixture
def operand(device):
    """Factory fixture: operand(rows, cols, layout, dtype) on the test device."""
    def make(rows: int, cols: int, layout: str = "row", dtype=torch.float16) -> torch.Tensor:
        return make_operand(rows, cols, layout, dtype, device)
    return make


def cpu_lookup_choices(seen: dict, ask: list[str]):
    """Inductor's LookupTableChoices made to work on the CPU, for export tests: it gives the CPU a
    device key and reads the installed table (Inductor's lookup is CUDA-only otherwise), records
    every lookup key Inductor builds in ``seen["keys"]``, and also asks Inductor's own parser for
    the ``ask`` template ids (the CPU offers few templates) into ``seen["lookups"]``."""
    from torch._inductor import config as icfg
    from torch._inductor.lookup_table import LookupTableChoices

    class CpuLookup(LookupTableChoices):
        @staticmethod
        def _get_device_key(device):
            return "cpu-test"

        def _get_lookup_table(self):
            return icfg.lookup_table.table or {}

        def make_lookup_key(self, kernel_inputs, op_name, include_device=False):
            key = super().make_lookup_key(kernel_inputs, op_name, include_device)
            seen["keys"].append(key)
            return key

        def lookup_template_configs(self, kernel_inputs, op_name, template_uids, template_hash_map=None):
            seen["lookups"].append(super().lookup_template_configs(kernel_inputs, op_name, ask, template_hash_map))
            return super().lookup_template_configs(kernel_inputs, op_name, template_uids, template_hash_map)

    return CpuLookup()


@pytest.fixture(scope="module")
def client():
    """A Dask client of two single-threaded worker processes (GPU i each on a GPU machine), shared
    by a cluster test module's tests (tests/test_cluster.py, tests/test_cluster_hunt.py). Those
    modules skip themselves without dask[distributed]."""
    import distributed

    from gemmtune.cluster import local_cluster

    env = {} if os.environ.get("TRITON_INTERPRET") is None else {"TRITON_INTERPRET": "1"}
    with local_cluster(2, env=env) as cluster, distributed.Client(cluster) as c:
        c.wait_for_workers(2, timeout=120)
        yield c


def run_cli(argv, capsys):
    """(exit code, stdout, stderr) of ``gemmtune`` run with ``argv`` in this process; a usage
    error's SystemExit (the parser's) gives its code."""
    from gemmtune import cli

    try:
        rc = cli.main(argv)
    except SystemExit as e:
        rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err
