"""bench.measure: one candidate on one problem -> a Measurement, and the worker's JSON adapter
over it (bench.runner.handle). On a CPU: cuBLAS's stand-in (torch.mm) and the interpreter."""

from __future__ import annotations

import json
import math

import pytest

from gemmtune import kernels
from gemmtune.bench import runner
from gemmtune.bench.measure import (FAILED, RETRYABLE, Measurement, Status, WorkerState, compile_choice, measure,
                                    verify)
from gemmtune.bench.timing import WallTimer
from gemmtune.problem import Problem
from gemmtune.store import STATUSES

# Odd sizes on purpose: nothing divides into tiles evenly.
P = Problem.from_sizes(37, 53, 96, "fp32")


def _state():
    return WorkerState(timer=WallTimer(repeats=3, warmup=0), device="cpu")


def test_ok_is_verified_and_timed():
    state = _state()
    m = measure(P, "aten", state.timer, state=state)
    assert isinstance(m, Measurement) and m.status is Status.OK and m.ok
    assert m.device_ms > 0 and m.repeats == 3 and m.rel_err < 1e-5 and m.representative is False
    assert "not representative" in m.reason
    with pytest.raises(AttributeError):  # frozen
        m.status = Status.WRONG  # type: ignore[misc]


def test_measure_without_a_state_makes_its_own():
    m = measure(P, "aten", WallTimer(repeats=1, warmup=0))
    assert m.ok and m.device_ms > 0


def test_a_wrong_kernel_is_wrong_and_never_timed(monkeypatch):
    fam = kernels.get("aten")
    real_run = fam.run

    def off_by_one(a, b, out, cfg, **kw):  # one wrong element: the max-element check must see it
        real_run(a, b, out, cfg, **kw)
        out.view(-1)[7] += 1000.0

    monkeypatch.setattr(fam, "run", off_by_one)

    class NoTiming:
        def measure(self, *a, **kw):
            raise AssertionError("a wrong kernel must not be timed")

    state = _state()
    m = measure(P, "aten", NoTiming(), state=state)
    assert m.status is Status.WRONG and m.device_ms is None and m.rel_err > 0 and m.reason
    assert verify(P, "aten", state)[1] is None


def test_unwritten_output_is_wrong(monkeypatch):
    """The output is NaN-poisoned before the check, so a kernel that writes nothing fails."""
    monkeypatch.setattr(kernels.get("aten"), "run", lambda a, b, out, cfg, **kw: None)
    assert measure(P, "aten", WallTimer(repeats=1), state=_state()).status is Status.WRONG


def test_a_config_the_family_rejects_is_unsupported():
    """decompose_k's split must divide K (96 % 7 != 0): rejected before any input is made."""
    state = _state()
    m = measure(P, "decompose_k:s7", state.timer, state=state)
    assert m.status is Status.UNSUPPORTED and "divide" in m.reason and state.key is None
    assert compile_choice(P, "decompose_k:s7", state).status is Status.UNSUPPORTED
    assert m.status in FAILED and m.status not in RETRYABLE


def test_an_exception_is_data():
    class Broken:
        def measure(self, *a, **kw):
            raise RuntimeError("the timer broke")

    m = measure(P, "aten", Broken(), state=_state())
    assert m.status is Status.ERROR and "the timer broke" in m.reason and m.traceback


def test_status_values_are_the_stored_words():
    """A StrEnum: the store, tables and JSON keep the words they always held."""
    assert STATUSES == tuple(s.value for s in Status)
    assert set(STATUSES) >= {"ok", "compile_error", "crashed", "timeout", "wrong", "error", "skipped"}
    assert "unsupported" in STATUSES
    for s in Status:
        assert s == s.value and str(s) == s.value and f"{s}" == s.value and Status(s.value) is s
        assert json.dumps({"status": s}) == json.dumps({"status": s.value})
        assert {s.value: 1}[s] == 1  # same hash as the word: Counters and dicts mix them


def test_handle_is_the_json_adapter_over_measure():
    state = _state()
    ok = runner.handle("bench", {"problem": P.key, "choice": "aten", "seed": 3}, state)
    assert ok["status"] == "ok" and type(ok["status"]) is str and ok["device_ms"] > 0
    assert set(ok) == {"status", "device_ms", "eager_ms", "rel_err", "repeats", "spread", "representative",
                       "reason"}
    json.dumps(ok)
    bad = runner.handle("bench", {"problem": P.key, "choice": "decompose_k:s7"}, state)
    assert bad == {"status": "unsupported", "reason": bad["reason"]}
    assert runner.handle("compile", {"problem": P.key, "choice": "aten"}, state) == {"status": "ok"}


def test_to_dict_keeps_nan_free_eager():
    m = Measurement(Status.OK, device_ms=1.0, eager_ms=None, repeats=1, spread=0.0, representative=True)
    d = m.to_dict()
    assert d["eager_ms"] is None and d["reason"] == "" and not any(
        isinstance(v, float) and math.isnan(v) for v in d.values())


@pytest.mark.parametrize("op", ["mm", "bmm"])
@pytest.mark.parametrize("layout", ["row", "col", "strided"])
@pytest.mark.parametrize("aligned", [True, False])
def test_meta_inputs_have_the_real_ones_sizes_strides_and_offsets(op, layout, aligned):
    # Compile workers compile on meta operands (COMPILE_ON_META): Triton specialises on the
    # pointers' 16-byte alignment and the strides, so these must match the real ones exactly.

    from gemmtune.bench.measure import make_inputs

    p = Problem.from_sizes(17, 33, 65, "fp16", layout_a=layout, layout_b="row" if layout == "strided" else layout,
                           aligned_a=aligned, aligned_b=aligned, batch=3 if op == "bmm" else 1, op=op)
    real, meta = make_inputs(p, "cpu", 1, 0)[0], make_inputs(p, "meta", 1, 0)[0]
    for r, m in zip(real, meta):
        assert m.device.type == "meta" and m.shape == r.shape and m.stride() == r.stride() and m.dtype == r.dtype
        assert m.storage_offset() == r.storage_offset() and m.data_ptr() % 16 == r.storage_offset() * r.element_size() % 16


def test_strict_compile_only_never_falls_back_to_a_launch():
    from gemmtune.kernels import tiled

    calls = []

    class Fn:
        def warmup(self, *a, **k):
            raise RuntimeError("cannot just compile")

        def __getitem__(self, grid):
            return lambda *a, **k: calls.append(grid)

    with tiled.compile_only(strict=True):
        with pytest.raises(RuntimeError):
            tiled._launch(Fn(), (1,), (), {})
    assert calls == []
    interpreted = tiled._INTERPRETED
    try:  # the non-strict mode falls back to the launch (off the interpreter, where warmup exists)
        tiled._INTERPRETED = False
        with tiled.compile_only():
            tiled._launch(Fn(), (2,), (), {})
    finally:
        tiled._INTERPRETED = interpreted
    assert calls == [(2,)]


def test_only_large_problems_compile_on_meta(monkeypatch):
    # On the CPU the worker's device is 'cpu': never meta. The size rule itself: a GPU worker takes
    # the meta path from COMPILE_ON_META_BYTES on (tests/test_gpu.py runs both paths).
    from gemmtune.bench import measure

    assert measure.COMPILE_ON_META_BYTES >= 1 << 28
    small = Problem.from_sizes(64, 64, 64, "fp32")
    state = WorkerState(device="cpu")
    assert compile_choice(small, "triton_mm:BM32-BN32-BK32-S2-W4-G8", state).status == "ok"
    assert state.where == "cpu" and state.not_meta == set()
