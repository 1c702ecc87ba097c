"""gemmtune collect and scaled_mm, defects of session 55's hunt: --order spread in the fp32 and fp8
phases, the hard stop's copy of the store shared by every collector of one --out, Ctrl-C leaving
without the export, and scaled_mm's scale check reading values back inside a CUDA graph capture."""

from __future__ import annotations

import gzip
import json
import os
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import gemmtune
from gemmtune import cli, collect
from gemmtune.collect.run import snapshot_path
from gemmtune.collect.shapes import group_after_group, problems_for, shape_plan, spread
from gemmtune.store import ResultRow, ResultStore, RunContext

# collect's --max-minutes counts from the process's start (process_age_s): a pytest worker may be
# older than any default.
NO_BUDGET = "100000"
TINY = ["--mm-sample", "1", "--splitk-sample", "0", "--pad-sample", "0", "--new-sample", "0"]


def _needs_interpreter():
    from gemmtune.api import interpreter_enabled

    if not interpreter_enabled():
        pytest.skip("needs TRITON_INTERPRET=1 (--cpu-interpreter)")


def _interpreter_ctx() -> RunContext:
    from gemmtune.bench.runner import WorkerState, info

    facts = info(WorkerState(device="cpu"))
    return RunContext(facts["device_name"], facts["capability"], facts["torch"], facts["triton"], facts["gemmtune"])


def _ok_rows(shapes, table) -> list[ResultRow]:
    """An ok row for every candidate the batch's table gives its shapes (what tune() would record)."""
    rows = []
    for s in shapes:
        p = s.problem
        for tc in table.choices(p):
            rows.append(ResultRow(problem_key=p.key, choice_id=tc.choice.id, family=tc.choice.family, status="ok",
                                  device_ms=1.0, eager_ms=None, rel_err=None, m=p.m, n=p.n, k=p.k, dtype=p.dtype,
                                  out_dtype=p.out_dtype, layout=f"{p.layout_a}/{p.layout_b}", aligned=True,
                                  repeats=5, created_at=1.0))
    return rows


# ----------------------------------------------------------------------------- --order spread, every phase
def test_spread_phases_take_the_plans_third_dealt_over_the_groups():
    """The fp32 and fp8 phases took every third shape of the dealt list: the plan's 6 groups dealt
    round-robin put the 1st and 4th group (llm, odd) at every third place, so those phases ran
    llm, odd, llm, odd... and the square group got no shape at all. Now they take the plan's third
    (the same problems, fp8's scales included, as --order plan) and deal it over the groups."""
    plan = shape_plan()
    dealt = spread(plan)
    assert group_after_group(dealt) == plan
    for dt in ("float32", "float8_e4m3fn", "float8_e5m2"):
        planned = problems_for(dt, plan)
        spread_phase = problems_for(dt, dealt, order="spread")
        assert sorted(p.key for _, _, p in spread_phase) == sorted(p.key for _, _, p in planned)
        assert spread_phase == spread(planned)  # dealt over the groups
        groups = list(dict.fromkeys(g for g, _, _ in planned))
        assert [g for g, _, _ in spread_phase[:len(groups)]] == groups  # every group in the first round
    # bf16 and fp16 (every shape): the dealt list as it came
    assert [name for _, name, _ in problems_for("bfloat16", dealt, order="spread")] == \
        [f"{s[1]}:bfloat16" for s in dealt]


def test_a_spread_collection_measures_every_phase_dealt_over_the_groups(tmp_path, monkeypatch):
    """The run itself: the shapes each batch's tune() gets, phase by phase, with --order spread and
    --limit-shapes (a new GPU's first call)."""
    _needs_interpreter()
    seen: dict[str, list[str]] = {}

    def fake_tune(shapes, *, store, table, **kw):
        for s in shapes:
            seen.setdefault(s.problem.dtype, []).append(s.group)
        return SimpleNamespace(measured=0, compile_wait_s=0.0)

    monkeypatch.setattr(sys.modules["gemmtune.tune"], "tune", fake_tune)
    rc = cli.main(["collect", "--cpu-interpreter", "--order", "spread", "--limit-shapes", "30", "--dtypes",
                   "fp32,e4m3", *TINY, "--out", str(tmp_path), "--no-export", "--hard-stop-minutes", "0",
                   "--max-minutes", NO_BUDGET])
    assert rc == 0
    groups = list(dict.fromkeys(s[0] for s in shape_plan()))
    assert len(groups) == 6
    for dt in ("float32", "float8_e4m3fn"):
        order = seen[dt]
        assert len(order) == 10  # a third of the 30
        assert order[:6] == groups, (dt, order)  # every group before any comes again
        assert order == [g for g, *_ in spread([(g,) for g in order])]  # round-robin throughout


# ----------------------------------------------------------------------------- hard stop: one copy each
def test_each_collector_has_its_own_hard_stop_copy(tmp_path, monkeypatch):
    """The hard stop copied the store to DIR/collect.snapshot.sqlite, one name for every collector
    of that --out: --gpus' collectors (and two runs into one folder) overwrote each other's copy,
    exported another's as their own, or had it deleted under them. Two collectors, as --gpus starts
    them (each its --progress-name), each hard-stopped: two copies, each deleted after its export."""
    _needs_interpreter()
    from gemmtune.store.maintenance import Maintenance as StoreMaintenance

    copies: list[Path] = []
    real_backup = StoreMaintenance.backup

    def backup(self, path):
        copies.append(Path(path))
        assert not Path(path).exists(), "another collector's copy is there"
        return real_backup(self, path)

    exited = threading.Event()

    def fake_exit(code):  # the hard stop ends the process: here, its thread (os._exit is its last call)
        exited.code = code
        exited.set()

    def fake_tune(shapes, *, store, table, **kw):  # a batch still running when the hard stop comes
        assert exited.wait(60), "the hard stop did not come"
        raise RuntimeError("the batch the hard stop cut")

    monkeypatch.setattr(StoreMaintenance, "backup", backup)
    monkeypatch.setattr(os, "_exit", fake_exit)
    monkeypatch.setattr(sys.modules["gemmtune.tune"], "tune", fake_tune)
    suite = tmp_path / "s.csv"
    suite.write_text("group,name,M,N,K,dtype\ng,s,16,32,64,float16\n")
    out = tmp_path / "out"
    for gpu in ("0", "1"):
        exited.clear()
        with pytest.raises(RuntimeError, match="the hard stop cut"):
            collect.run(cli.build_parser().parse_args(
                ["collect", "--cpu-interpreter", "--shapes", str(suite), "--dtypes", "fp16", *TINY, "--out", str(out),
                 "--store", str(out / "collect.sqlite"), "--progress-name", f"collect-progress-gpu{gpu}.json",
                 "--no-export", "--hard-stop-minutes", "0.0001", "--max-minutes", NO_BUDGET]))
        assert exited.code == 0  # its export went through
        assert json.loads((out / f"collect-progress-gpu{gpu}.json").read_text())["hard_stop"] is True
    assert len(copies) == 2 and copies[0] != copies[1]
    assert all(c.parent == out and "gpu" in c.name for c in copies)
    assert not [p for p in out.iterdir() if "snapshot" in p.name]  # each deleted its own
    # Two processes with one progress name (two runs into one folder): the process tells them apart.
    monkeypatch.setattr(os, "getpid", lambda: 101)
    a = snapshot_path(out, "collect-progress.json")
    monkeypatch.setattr(os, "getpid", lambda: 102)
    assert snapshot_path(out, "collect-progress.json") != a


# ----------------------------------------------------------------------------- Ctrl-C exports
def test_ctrl_c_exports_what_the_store_holds_and_exits_130(tmp_path, monkeypatch, capsys):
    """Ctrl-C in a batch ended the call without the export a normal end writes: the rows it had
    measured were in DIR/collect.sqlite alone, not in collect.sqlite.gz (what the next call resumes
    from), the CSV or the progress file. The first batch records its rows, the second is cut."""
    _needs_interpreter()
    ctx = _interpreter_ctx()
    calls = []

    def fake_tune(shapes, *, store, table, **kw):
        calls.append([s.name for s in shapes])
        if len(calls) > 1:
            raise KeyboardInterrupt
        rows = _ok_rows(shapes, table)
        store.record_many(ctx, rows)
        return SimpleNamespace(measured=len(rows), compile_wait_s=0.0)

    monkeypatch.setattr(sys.modules["gemmtune.tune"], "tune", fake_tune)
    suite = tmp_path / "s.csv"
    suite.write_text("group,name,M,N,K,dtype\ng,a,16,32,64,float16\ng,b,32,32,64,float16\n")
    out = tmp_path / "out"
    rc = cli.main(["collect", "--cpu-interpreter", "--shapes", str(suite), "--dtypes", "fp16", *TINY, "--batch", "1",
                   "--out", str(out), "--hard-stop-minutes", "30", "--max-minutes", NO_BUDGET])
    assert rc == 130 and len(calls) == 2
    assert "interrupted" in capsys.readouterr().err
    with ResultStore(out / "collect.sqlite") as st:
        held = st.count()
    assert held > 0
    plain = tmp_path / "copy.sqlite"
    with gzip.open(out / "collect.sqlite.gz", "rb") as f:
        plain.write_bytes(f.read())
    with ResultStore(plain) as st:
        assert st.count() == held  # the export holds what was measured
    assert list(out.glob("collect-*.csv.gz"))
    prog = json.loads((out / "collect-progress.json").read_text())
    assert prog["finished"] is False and prog["shapes_done"] == 1 and prog["measured_this_call"] == held


def test_ctrl_c_with_no_export_writes_the_progress_file_only(tmp_path, monkeypatch):
    """--no-export (a --gpus collector): Ctrl-C writes its progress file, and raises on."""
    _needs_interpreter()

    def fake_tune(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(sys.modules["gemmtune.tune"], "tune", fake_tune)
    suite = tmp_path / "s.csv"
    suite.write_text("group,name,M,N,K,dtype\ng,a,16,32,64,float16\n")
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        collect.run(cli.build_parser().parse_args(
            ["collect", "--cpu-interpreter", "--shapes", str(suite), "--dtypes", "fp16", *TINY, "--out", str(out),
             "--no-export", "--hard-stop-minutes", "0", "--max-minutes", NO_BUDGET]))
    assert json.loads((out / "collect-progress.json").read_text())["finished"] is False
    assert not (out / "collect.sqlite.gz").exists()


# A collector of --gpus, faked: says it started (its pid, in DIR/started-<gpu>), then waits to be
# stopped, writing the signal it got to DIR/signal-<gpu> and exiting as collect does on it.
FAKE_COLLECTOR = """
import os, signal, sys, time
where, gpu = sys.argv[1], os.environ["CUDA_VISIBLE_DEVICES"]
def stop(signum, frame):
    open(os.path.join(where, "signal-" + gpu), "w").write(str(signum))
    os._exit(128 + signum)
signal.signal(signal.SIGINT, stop)
signal.signal(signal.SIGTERM, stop)
open(os.path.join(where, "started-" + gpu), "w").write(str(os.getpid()))
time.sleep(60)
"""


@pytest.mark.parametrize("sig, rc", [("SIGINT", 130), ("SIGTERM", 143)])
def test_ctrl_c_in_the_gpus_parent_stops_its_collectors_then_exports(tmp_path, monkeypatch, capsys, sig, rc):
    """Ctrl-C (or SIGTERM) in ``collect --gpus N``'s parent, while its collectors ran, left without
    the export a single-GPU call writes on it: what the collectors had measured was in the store
    alone, not in collect.sqlite.gz (what the next call resumes from). Now the parent stops its
    collectors (passing the signal on to one still running after a grace period: here the parent
    alone was signalled), exports, and exits 130 (143)."""
    import signal
    import time

    collect_run = sys.modules["gemmtune.collect.run"]  # (gemmtune.collect.run is the function)
    _needs_interpreter()
    ctx = _interpreter_ctx()
    monkeypatch.setattr(collect_run, "STOP_GRACE_S", 0.5, raising=False)
    monkeypatch.setattr(collect_run, "child_argv",
                        lambda args, gpu, store, claims, left: [sys.executable, "-c", FAKE_COLLECTOR, str(tmp_path)])
    out = tmp_path / "out"
    out.mkdir()
    p = gemmtune.Problem.from_sizes(16, 32, 64, "fp16")
    rows = [ResultRow(problem_key=p.key, choice_id="aten", family="aten", status="ok", device_ms=1.0,
                      eager_ms=None, rel_err=None, m=p.m, n=p.n, k=p.k, dtype=p.dtype, out_dtype=p.out_dtype,
                      layout="row/row", aligned=True, repeats=5, created_at=1.0)]
    with ResultStore(out / "collect.sqlite") as st:  # what the collectors measured before the signal
        st.record_many(ctx, rows)
        held = st.count()
    suite = tmp_path / "s.csv"
    suite.write_text("group,name,M,N,K,dtype\ng,a,16,32,64,float16\n")

    def signal_the_parent():
        t_end = time.monotonic() + 60
        while time.monotonic() < t_end and not all((tmp_path / f"started-{g}").exists() for g in "01"):
            time.sleep(0.05)
        os.kill(os.getpid(), getattr(signal, sig))

    # The signals' own behaviour, whatever an earlier test in this process left installed (CI's
    # full run failed here with both signals swallowed): Ctrl-C raises, SIGTERM has its default
    # action, over which the CLI installs its Terminated handler.
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    kill = threading.Thread(target=signal_the_parent, daemon=True)
    kill.start()
    try:
        got = cli.main(["collect", "--cpu-interpreter", "--gpus", "0,1", "--shapes", str(suite), "--dtypes", "fp16",
                        *TINY, "--out", str(out), "--max-minutes", NO_BUDGET])
    finally:
        signal.signal(signal.SIGINT, handlers[0])
        signal.signal(signal.SIGTERM, handlers[1])
        kill.join(timeout=60)
        for g in "01":  # (before the fix they ran on: ended here, by their pid)
            f = tmp_path / f"started-{g}"
            if f.exists() and not (tmp_path / f"signal-{g}").exists():
                try:
                    os.kill(int(f.read_text()), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
    assert got == rc
    assert "interrupted" in capsys.readouterr().err
    for g in "01":  # each collector was passed the parent's signal and stopped
        assert (tmp_path / f"signal-{g}").read_text() == str(int(getattr(signal, sig)))
    plain = tmp_path / "copy.sqlite"
    with gzip.open(out / "collect.sqlite.gz", "rb") as f:
        plain.write_bytes(f.read())
    with ResultStore(plain) as st:
        assert st.count() == held > 0


# ----------------------------------------------------------------------------- scaled_mm in a capture
def test_scaled_mm_skips_its_finite_check_inside_a_cuda_graph_capture(monkeypatch):
    """check_finite read the scales back to the host (``bool(bad.any())``), which a CUDA graph
    capture forbids: a scaled_mm captured into a graph raised there and broke the capture. It is
    skipped while capturing, by the dispatcher's rule (gemmtune.dispatch.capturing, replaced here:
    no GPU), and kept outside a capture."""
    from gemmtune import dispatch
    from gemmtune.scaled import bind_scales

    nan = torch.tensor([float("nan")])
    one = torch.ones(1)
    asked = []

    def capturing(t):
        asked.append(t.device)
        return True

    monkeypatch.setattr(dispatch, "capturing", capturing)
    epi = bind_scales(4, 4, nan, one, device=torch.device("cpu"), out_dtype=torch.bfloat16)
    assert epi.scale_a.numel() == 1 and asked  # checked for the capture, values not read
    a = torch.randn(16, 32).to(torch.float8_e4m3fn)
    b = torch.randn(16, 32).to(torch.float8_e4m3fn).t()
    out = gemmtune.scaled_mm(a, b, nan, one, out_dtype=torch.bfloat16, choice="aten")
    assert out.shape == (16, 16)

    monkeypatch.setattr(dispatch, "capturing", lambda t: False)
    with pytest.raises(ValueError, match="scale_a holds 1 NaN or infinite"):
        bind_scales(4, 4, nan, one, device=torch.device("cpu"), out_dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="scale_a holds 1 NaN or infinite"):
        gemmtune.scaled_mm(a, b, nan, one, out_dtype=torch.bfloat16, choice="aten")

