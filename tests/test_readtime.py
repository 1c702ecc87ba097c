"""gemmtune.bench.readtime: the read reference of a memory-bound shape (a kernel that only reads as many
bytes as the shape's inputs hold, timed in the shape's rounds). The tests run on the device at hand (the
CPU: Triton's interpreter). They check that the kernel reads every element exactly once, that the bench
record carries it only where it means something, and what the report makes of it. No test times
anything: the figures are in benchmarks/results/2026-12-03-h200-s60."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gemmtune import benchmark, report
from gemmtune.bench import readtime
from gemmtune.bench import suite as bench_suite
from gemmtune.problem import Problem
from gemmtune.shapes import Shape


@pytest.mark.parametrize("nbytes,sms", [(2 * 12345, 4), (2 * 2048, 1), (2, 3), (2 * 7 * 2048 + 6, 2)])
def test_every_element_is_read_once(nbytes, sms, device):
    r = readtime.StreamRead(nbytes, 2, device, sms, seed=3)
    assert r.numel == nbytes // 2 and r.programs <= max(1, sms) * readtime.PROGRAMS_PER_SM
    for i in range(2):
        r.launch(i)
        want = r.bufs[i].double().sum().item()
        # fp32 partial sums of fp16 values: exact to fp32's rounding over the elements
        assert r.total() == pytest.approx(want, rel=1e-4, abs=1e-3 * r.numel ** 0.5)
    assert r.bufs[0].abs().sum() > 0  # random values, not zeros
    r.close()
    assert r.bufs == []


@pytest.mark.parametrize("numel", [1, 2047, 2048, 2049, 10**6 + 3, 132 * 8 * 2048 * 5 + 1])
@pytest.mark.parametrize("sms", [1, 4, 132])
def test_grid_covers_every_element_with_no_idle_program(numel, sms):
    programs, per = readtime.grid_for(numel, sms)
    assert per % readtime.BLOCK == 0 and programs <= sms * readtime.PROGRAMS_PER_SM
    assert programs * per >= numel and (programs - 1) * per < numel


def _state(device):
    from gemmtune.bench.runner import WorkerState
    from gemmtune.bench.timing import WallTimer
    return WorkerState(timer=WallTimer(repeats=1), device=device)


CEILINGS = {"copy": {"gbps": 4000.0}, "mm": {"float16": {"tflops": 800.0}}}


def test_a_gemv_shape_gets_the_read_in_its_rounds(device):
    shape = Shape("decode", "gemv", Problem.from_sizes(1, 96, 1024, "fp16", layout_b="col"))
    p = shape.problem
    rec = benchmark.measure_shape(shape, _state(device), CEILINGS, {}, {}, seed=0, inductor_log=None, rounds=2)
    assert rec["bound"] == "memory" and rec["cublas"]["status"] == "ok"
    r = rec["read"]
    assert r["status"] == "ok" and r["bytes"] == p.min_bytes - p.write_bytes == 2 * (1024 + 96 * 1024)
    assert r["kernel"]["ms"] > 0 and r["kernel"]["round_ms"]
    assert "read" not in rec["methods"]  # a reference, not a method: no speedup, no target counts it
    line = report.read_line(rec)
    assert "0.2 MB" in line and "of the floor" in line and "of that read" in line


@pytest.mark.parametrize("dims", [(17, 33, 65), (512, 512, 512)], ids=["writes-15%", "compute-bound"])
def test_no_read_where_it_means_nothing(dims, device):
    shape = Shape("odd", "x", Problem.from_sizes(*dims, "fp16"))
    rec = benchmark.measure_shape(shape, _state(device), CEILINGS, {}, {}, seed=0, inductor_log=None, rounds=1)
    assert "read" not in rec and report.read_line(rec) == ""


def test_a_failed_read_leaves_the_methods_timed(monkeypatch, device):
    def boom(*a, **k):
        raise torch.cuda.OutOfMemoryError("no room for the read buffers")
    monkeypatch.setattr(bench_suite, "StreamRead", boom)
    shape = Shape("decode", "gemv", Problem.from_sizes(1, 96, 1024, "fp16", layout_b="col"))
    rec = benchmark.measure_shape(shape, _state(device), CEILINGS, {}, {}, seed=0, inductor_log=None, rounds=1)
    assert rec["read"] == {"status": "error", "reason": "OutOfMemoryError: no room for the read buffers"}
    assert rec["cublas"]["kernel"]["ms"] > 0
    assert report.read_line(rec) == " The read reference failed: OutOfMemoryError: no room for the read buffers."


def test_the_report_gives_the_read_beside_the_floor():
    rec = {"group": "decode", "name": "o", "m": 8, "n": 4096, "k": 4096, "dtype": "bfloat16", "floor_ms": 0.00771,
           "bound": "memory", "cublas": {"status": "ok", "choice": "aten", "kernel": {"ms": 0.01303, "spread": 0.01}},
           "methods": {}, "read": {"status": "ok", "bytes": 33_554_432, "programs": 1056, "block": 2048,
                                   "kernel": {"ms": 0.0097, "spread": 0.01}}}
    line = report.read_line(rec)
    assert line == (" A kernel that only reads its inputs (33.6 MB) took 9.70 µs in the same rounds, 79% of the floor;"
                    " the best kernel ran at 74% of that read.")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_the_read_is_captured_and_replayed_with_the_methods_on_a_gpu():
    """The CUDA-graph path: the read's launch is captured once and replayed in every round, on as
    many rotating buffers as the shape has input sets."""
    from gemmtune.bench.runner import WorkerState
    from gemmtune.bench.timing import CudaGraphTimer

    shape = Shape("decode", "gemv", Problem.from_sizes(1, 4096, 4096, "bf16", layout_b="col"))
    state = WorkerState(timer=CudaGraphTimer(replays=8))
    rec = benchmark.measure_shape(shape, state, CEILINGS, {}, {}, seed=0, inductor_log=None)
    r = rec["read"]
    assert r["status"] == "ok" and r["bytes"] == 2 * (4096 + 4096 * 4096)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    assert r["programs"] == readtime.grid_for(r["bytes"] // 2, sms)[0]
    assert r["kernel"]["ms"] > 0 and r["kernel"]["repeats"] == 8 and rec["cublas"]["kernel"]["ms"] > 0



_FIXTURE = Path(__file__).parent / "data" / "bench_fixture.json"


def _doc_with_reads() -> dict:
    """The recorded bench fixture's two splitk shapes as decode shapes with a read reference at 80% of
    gemmtune's kernel time, and one other shape without."""
    doc = report.load_bench(_FIXTURE)
    shapes = [s for s in doc["shapes"] if s["group"] == "splitk"][:2]
    for s in shapes:
        s["group"] = "decode"
        ms = 0.8 * s["methods"]["gemmtune"]["kernel"]["ms"]
        s["read"] = {"status": "ok", "bytes": 1000, "programs": 8, "block": 2048, "kernel": {"ms": ms, "spread": 0.0}}
    other = next(s for s in doc["shapes"] if s["group"] not in ("splitk", "decode"))
    doc["shapes"] = shapes + [other]
    return doc


def test_group_geomean_of_the_read_reference():
    doc = _doc_with_reads()
    gs = report.group_speedups(doc, "gemmtune")
    assert gs["decode"]["read"] == pytest.approx(0.8) and gs["decode"]["read_n"] == 2
    other = doc["shapes"][2]["group"]
    assert gs[other]["read"] is None and gs[other]["read_n"] == 0 and gs["all"]["read_n"] == 2
    sec = report.render_markdown(doc).split("## Geomean % of the read reference", 1)[1].split("\n## ", 1)[0]
    table = [[c.strip() for c in ln.strip("|").split("|")] for ln in sec.splitlines() if ln.startswith("|")]
    head, rows = table[0], {r[0]: dict(zip(table[0], r)) for r in table[2:]}
    assert set(rows) == {"decode", "all"}  # a group with no read reference has no row
    assert rows["decode"]["gemmtune default"] == "80%" and head[1] == "cuBLAS"


def test_no_read_table_without_reads():
    doc = report.load_bench(_FIXTURE)
    assert not any("read" in s for s in doc["shapes"])
    assert "read reference" not in report.render_markdown(doc)
