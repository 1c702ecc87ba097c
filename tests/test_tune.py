"""The tuner end to end: faults through the whole pipeline, kill -9 and resume,
the CLI in the interpreter, and bad input.

On a machine without a GPU everything runs in Triton's CPU interpreter (conftest
sets TRITON_INTERPRET=1); the tuner then shapes its config spaces for the
built-in H100.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import torch

import gemmtune
from gemmtune import cli
from gemmtune.problem import Problem
from gemmtune.shapes import Shape, preset
from gemmtune.configs import Choice
from gemmtune.store import COLUMNS, STATUSES, ResultStore
from gemmtune.table import load as load_table
from gemmtune.tune import FAILED

SRC = Path(__file__).resolve().parents[1] / "src"
HAS_CUDA = torch.cuda.is_available()
FAULT_RUNNER = "gemmtune.bench.faults:handle"


def _cli_env() -> dict:
    env = dict(os.environ)  # carries TRITON_INTERPRET=1 from conftest on a CPU machine
    env["PYTHONPATH"] = str(SRC) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("GEMMTUNE_FAULTS", None)
    return env


def _cli(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gemmtune.cli", *args], cwd=cwd, env=_cli_env(),
                          capture_output=True, text=True, timeout=timeout)


def _flat(text: str) -> str:
    """Console output with all whitespace runs collapsed (rich wraps and pads)."""
    return " ".join(text.split())


def _counts(stdout: str) -> tuple[int, int]:
    m = re.search(r"(\d+) measured, (\d+) reused", _flat(stdout))
    assert m, f"no 'N measured, M reused' line in:\n{stdout}"
    return int(m.group(1)), int(m.group(2))


def _sql(path: Path, query: str) -> list[tuple]:
    con = sqlite3.connect(str(path), timeout=30)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


def _duplicates(path: Path) -> list[tuple]:
    return _sql(path, "SELECT problem_key, choice_id, COUNT(*) FROM results "
                      "GROUP BY problem_key, choice_id HAVING COUNT(*) > 1")


# ------------------------------------------------------------------ faults through the tuner
@pytest.mark.slow
def test_faults_through_the_tuner(tmp_path):
    problem = Problem.from_sizes(16, 16, 64, "fp16")
    space_ids = [c.id for c in gemmtune.space(problem, "triton_mm", device="h100")]
    assert len(space_ids) >= 6
    faulted = {space_ids[0]: "abort", space_ids[2]: "hang", space_ids[3]: "raise", space_ids[5]: "wrong"}
    expected_status = {"abort": "crashed", "hang": "timeout", "raise": "error", "wrong": "wrong"}
    store, out = tmp_path / "s.sqlite", tmp_path / "t.json"
    # runoff=0: the faults are the subject; the winner asserted below is the store's fastest row, and
    # the second run's is the first's. A run-off (tuning.runoff) times a non-cuBLAS winner within its
    # margin of cuBLAS again, beside cuBLAS, and may keep either, run to run. Never on the CPU (the
    # interpreted candidates take ~20 ms here, cuBLAS ~0.01 ms), but on a GPU cuBLAS takes a few us on
    # this shape, under runoff.SHORT_MS, where the margin is 25%; a run-off that kept cuBLAS failed the
    # best_ms assert below (forced on the CPU by making a tile's stored time the fastest).

    t0 = time.monotonic()
    r = gemmtune.tune([problem], families=["triton_mm"], store=store, out=out, runner=FAULT_RUNNER,
                      env={"GEMMTUNE_FAULTS": json.dumps(faulted)}, timeout=4, progress=False, runoff=0)
    elapsed = time.monotonic() - t0

    want_ids = {"aten", *space_ids}
    with ResultStore(store) as db:
        rows = {row.choice_id: row for _, row in db.rows(problem_key=problem.key)}
        assert db.count() == len(want_ids)
    assert set(rows) == want_ids, "the store must hold a row for every candidate, failures included"
    for cid, row in rows.items():
        if cid in faulted:
            assert row.status == expected_status[faulted[cid]], (cid, row)
            assert row.reason.strip(), (cid, row)
            assert row.device_ms is None, (cid, row)
        else:
            assert row.status == "ok", (cid, row)
            assert row.device_ms is not None and row.device_ms > 0, (cid, row)
    assert "SIGABRT" in rows[space_ids[0]].reason
    assert "injected fault" in rows[space_ids[3]].reason
    assert rows[space_ids[5]].rel_err is not None and rows[space_ids[5]].rel_err > 1e-2

    [s] = r.shapes
    assert s.tried == len(want_ids)
    assert s.failed == 4
    assert s.statuses == {"ok": len(want_ids) - 4, "crashed": 1, "timeout": 1, "error": 1, "wrong": 1}
    assert r.measured == len(want_ids) and r.reused == 0
    assert s.best is not None and s.best not in faulted
    assert rows[s.best].status == "ok"
    assert s.best_ms == min(row.device_ms for row in rows.values() if row.status == "ok")
    assert s.aten_ms == rows["aten"].device_ms

    table = load_table(out)
    assert [tc.choice.id for tc in table.choices(problem)] == [s.best]
    assert r.table_path == out and r.store_path == store
    if not HAS_CUDA:
        assert r.representative is False
    assert elapsed < 90, f"fault run took {elapsed:.1f} s"

    # A second run reuses everything, failures included: nothing is re-measured.
    r2 = gemmtune.tune([problem], families=["triton_mm"], store=store, out=out, runner=FAULT_RUNNER,
                       env={"GEMMTUNE_FAULTS": json.dumps(faulted)}, timeout=4, progress=False, runoff=0)
    assert (r2.measured, r2.reused) == (0, len(want_ids))
    assert r2.shapes[0].best == s.best and r2.shapes[0].failed == 4

    # retry_failed with the faults gone: the crash, hang and error are measured again
    # (and now pass); the wrong result stays recorded as wrong, nothing else re-runs.
    r3 = gemmtune.tune([problem], families=["triton_mm"], store=store, out=out, runner=FAULT_RUNNER,
                       env={"GEMMTUNE_FAULTS": json.dumps({space_ids[5]: "wrong"})}, timeout=4,
                       progress=False, retry_failed=True, runoff=0)
    assert (r3.measured, r3.reused) == (3, len(want_ids) - 3)
    assert r3.shapes[0].statuses == {"ok": len(want_ids) - 1, "wrong": 1}
    with ResultStore(store) as db:
        assert db.count() == len(want_ids)
        again = {row.choice_id: row for _, row in db.rows(problem_key=problem.key)}
    for cid in (space_ids[0], space_ids[2], space_ids[3]):
        assert again[cid].status == "ok" and again[cid].device_ms > 0, again[cid]
    assert again[space_ids[1]].created_at == rows[space_ids[1]].created_at  # not re-measured


# ------------------------------------------------------------------ kill -9 and resume
def _children(pid: int) -> list[int]:
    """Pids of the live direct children of ``pid`` (Linux /proc)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                state, ppid = (d / "stat").read_text().rsplit(")", 1)[1].split()[:2]
            except OSError:
                continue
            if int(ppid) == pid and state != "Z":
                out.append(int(d.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


KILL_ARGS = ["tune", "--shape", "16x16x256:fp16", "--families", "triton_mm,decompose_k", "-q"]


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_kill_9_and_resume(tmp_path, capfd, monkeypatch):
    store, out = tmp_path / "S.sqlite", tmp_path / "T.json"
    args = KILL_ARGS + ["--store", str(store), "--out", str(out)]
    log = open(tmp_path / "killed.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "gemmtune.cli", *args], cwd=tmp_path, env=_cli_env(),
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    workers: list[int] = []
    con = None
    try:
        # Poll the store until a few rows are in, then take SQLite's write lock: the
        # tuner blocks on its next record(), so the kill lands mid-run for certain
        # (the whole sweep takes well under a second in the interpreter).
        deadline = time.monotonic() + 120
        while True:
            assert time.monotonic() < deadline, "the tuner recorded no rows within 120 s"
            assert proc.poll() is None, (
                "the tuner finished before it could be killed:\n" + (tmp_path / "killed.log").read_text())
            if store.exists():
                try:
                    if con is None:
                        con = sqlite3.connect(str(store), timeout=30, isolation_level=None)
                    if con.execute("SELECT COUNT(*) FROM results").fetchone()[0] >= 3:
                        con.execute("BEGIN IMMEDIATE")
                        break
                except sqlite3.OperationalError:
                    pass  # the schema is not there yet
            time.sleep(0.005)
        before = {cid: (status, created, ms) for cid, status, created, ms in con.execute(
            "SELECT choice_id, status, created_at, device_ms FROM results")}
        assert proc.poll() is None, "the tuner exited while the store was locked"
        workers = _children(proc.pid)
        assert workers, "expected the tuner to have a worker process"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
    finally:
        if con is not None:
            if con.in_transaction:
                con.execute("ROLLBACK")
            con.close()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        log.close()
        # Workers run in sessions of their own (so the pool can kill a hung one with
        # its children): the tuner's group kill does not reach them. With their pipe
        # gone they should exit on their own; give them a moment, then make sure.
        t_end = time.monotonic() + 15
        while any(_alive(w) for w in workers) and time.monotonic() < t_end:
            time.sleep(0.05)
        leftover = [w for w in workers if _alive(w)]
        for w in leftover:
            try:
                os.killpg(w, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert not leftover, f"worker(s) {leftover} outlived the killed tuner by 15 s"
    assert 3 <= len(before)

    # Resume: the same command, run to completion.
    res = _cli(args, tmp_path)
    assert res.returncode == 0, res.stderr
    measured, reused = _counts(res.stdout)
    assert reused == len(before), res.stdout
    assert measured >= 1

    # An uninterrupted run into a fresh store, the reference: the same command's main() in this
    # process (its benchmark worker still a subprocess; the killed run and its resume are the
    # commands as processes), which saves a child's torch import.
    fresh_store, fresh_out = tmp_path / "fresh.sqlite", tmp_path / "fresh.json"
    monkeypatch.chdir(tmp_path)  # where the child ran
    capfd.readouterr()
    rc2, out2, err2 = _main(KILL_ARGS + ["--store", str(fresh_store), "--out", str(fresh_out)], capfd)
    assert rc2 == 0, err2
    fresh_measured, fresh_reused = _counts(out2)
    assert fresh_reused == 0

    n_resumed = _sql(store, "SELECT COUNT(*) FROM results")[0][0]
    n_fresh = _sql(fresh_store, "SELECT COUNT(*) FROM results")[0][0]
    assert n_resumed == n_fresh == fresh_measured
    assert reused + measured == n_fresh
    assert len(before) < n_fresh, "the kill should have landed before the sweep was complete"
    assert _duplicates(store) == []
    assert set(_sql(store, "SELECT choice_id FROM results")) == set(_sql(fresh_store, "SELECT choice_id FROM results"))

    # Rows measured before the kill were kept as they were, not measured again.
    after = {cid: (status, created, ms) for cid, status, created, ms in _sql(
        store, "SELECT choice_id, status, created_at, device_ms FROM results")}
    for cid, row in before.items():
        assert after[cid] == row, (cid, row, after[cid])
    assert {s for s, _, _ in after.values()} <= set(STATUSES)

    # Both runs wrote a table for the shape.
    assert set(load_table(out).entries) == set(load_table(fresh_out).entries) == {
        Problem.from_sizes(16, 16, 256, "fp16").key}


# ------------------------------------------------------------------ the CLI end to end
@pytest.mark.slow
def test_cli_end_to_end_smoke(tmp_path, capfd, monkeypatch):
    # The command's main() in this process (the benchmark worker is still a subprocess): a
    # `python -m gemmtune.cli` child cost another torch import, and the module's entry point as a
    # command is run by the kill -9 test above and tests/test_cli.py. capfd: the worker's own
    # stderr (a traceback there) is read too, as the child's was.
    monkeypatch.chdir(tmp_path)  # where the child ran
    store, out, summ = tmp_path / "s.sqlite", tmp_path / "t.json", tmp_path / "summary.json"
    rc, stdout, stderr = _main(["tune", "--preset", "smoke", "--families", "splitk,decompose_k",
                                "--store", str(store), "--out", str(out), "--summary", str(summ), "-q"], capfd)
    assert rc == 0, stderr
    assert "Traceback" not in stderr, stderr
    flat = _flat(stdout)
    if not HAS_CUDA:
        assert "NOT representative" in flat, stdout

    shapes = preset("smoke")
    assert len(shapes) == 2

    table = load_table(out)
    doc = json.loads(out.read_text())
    assert doc["schema_version"] == 1
    runoffs = {r["key"]: r["runoff"] for r in json.loads(summ.read_text())["shapes"]}
    prov = table.provenance
    assert prov["produced_by"] == "tuned"
    assert prov["gemmtune"] == gemmtune.__version__
    assert prov["torch"] == torch.__version__
    if not HAS_CUDA:
        assert prov["device_name"] == "cpu (Triton interpreter)"
    assert set(table.entries) == {s.problem.key for s in shapes}

    with ResultStore(store) as db:
        all_rows = db.rows()
        assert all_rows
        contexts = {c for c, _ in all_rows}
        assert len(contexts) == 1
        [ctx] = contexts
        assert ctx.device_name == prov["device_name"]
        for s in shapes:
            rows = db.done(ctx, s.problem.key)
            assert "aten" in rows
            assert {r.status for r in rows.values()} <= set(STATUSES)
            assert any(r.family == "splitk" for r in rows.values())
            assert any(r.family == "decompose_k" for r in rows.values())
            [tc] = table.entries[s.problem.key]
            assert Choice.parse(tc.choice.id) == tc.choice
            best = db.best(ctx, s.problem.key)
            # The table holds the store's fastest row, unless that row beat cuBLAS by less than the
            # run-off margin and cuBLAS then won the interleaved run-off (tuning.runoff): on the CPU
            # interpreter aten and pad+aten differ by a few percent, either way from run to run.
            ro = runoffs[s.problem.key]
            if ro and "kept" in ro:
                assert set(ro["ms"]) == {best.choice_id, "aten"}, ro
                assert tc.choice.id == ro["kept"]
            else:
                assert tc.choice.id == best.choice_id
                assert tc.device_ms == pytest.approx(best.device_ms)
            assert s.name in flat  # the summary names each shape
        n = db.count()
        assert _counts(stdout) == (n, 0)
        # Every row has a status; failures carry a reason.
        for _, r in all_rows:
            assert r.status in STATUSES
            if r.status in FAILED:
                assert r.reason

        csv_path = tmp_path / "x.csv"
        assert db.export(csv_path) == n
    with open(csv_path, newline="") as f:
        records = list(csv.reader(f))
    assert tuple(records[0]) == COLUMNS
    assert len(records) == n + 1
    status_col = COLUMNS.index("status")
    assert {r[status_col] for r in records[1:]} <= set(STATUSES)


# ------------------------------------------------------------------ bad input
def _main(argv, capsys) -> tuple[int, str, str]:
    rc = cli.main(argv)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _one_line_error(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got:\n{err}"
    assert "Traceback" not in err
    assert lines[0].startswith("gemmtune tune: error:"), lines[0]
    return lines[0]


@pytest.mark.parametrize("argv, needle", [
    (["--shape", "12x"], "bad shape '12x'"),
    (["--shape", "16x16x64:fp7"], "fp7"),
    (["--preset", "nope"], "unknown preset 'nope'"),
    (["--shape", "16x16x64:fp16", "--families", "nope"], "unknown kernel family 'nope'"),
    (["--shape", "16x16x64:fp16", "--families", "triton_mm,nope"], "unknown kernel family 'nope'"),
    (["--preset", "smoke", "--groups", "nosuchgroup"], "--groups: no group nosuchgroup"),
])
def test_cli_bad_input(tmp_path, capsys, argv, needle):
    store = tmp_path / "s.sqlite"
    rc, out, err = _main(["tune", *argv, "--store", str(store), "--out", str(tmp_path / "t.json"), "-q"],
                         capsys)
    assert rc == 2
    line = _one_line_error(err)
    assert needle in line, line
    # Bad input is caught before anything is written.
    assert not store.exists()
    assert not (tmp_path / "t.json").exists()


def test_cli_suite_missing_column_names_the_file(tmp_path, capsys):
    suite = tmp_path / "suite.csv"
    suite.write_text("group,name,M,N,dtype\ng,a,16,16,float16\n")
    store = tmp_path / "s.sqlite"
    rc, _, err = _main(["tune", "--suite", str(suite), "--store", str(store), "-q"], capsys)
    assert rc == 2
    line = _one_line_error(err)
    assert str(suite) in line and "K" in line, line
    assert not store.exists()


def test_cli_suite_bad_row_names_file_and_line(tmp_path, capsys):
    suite = tmp_path / "suite.csv"
    suite.write_text("group,name,M,N,K,dtype\ng,a,16,16,64,float16\ng,b,16,sixteen,64,float16\n")
    rc, _, err = _main(["tune", "--suite", str(suite), "--store", str(tmp_path / "s.sqlite"), "-q"], capsys)
    assert rc == 2
    assert f"{suite}:3" in _one_line_error(err)


def test_cli_missing_suite_file(tmp_path, capsys):
    suite = tmp_path / "nope.csv"
    rc, _, err = _main(["tune", "--suite", str(suite), "--store", str(tmp_path / "s.sqlite"), "-q"], capsys)
    assert rc == 2
    assert str(suite) in _one_line_error(err)


def test_cli_store_in_missing_directory(tmp_path, capsys):
    store = tmp_path / "nodir" / "s.sqlite"
    rc, _, err = _main(["tune", "--shape", "16x16x64:fp16", "--families", "decompose_k",
                        "--store", str(store), "--out", str(tmp_path / "t.json"), "-q"], capsys)
    assert rc == 2
    assert "does not exist" in _one_line_error(err)


def test_cli_out_in_missing_directory_fails_early(tmp_path, capsys):
    out = tmp_path / "nodir" / "t.json"
    store = tmp_path / "s.sqlite"
    try:
        rc, _, err = _main(["tune", "--shape", "16x16x64:fp16", "--families", "decompose_k",
                            "--store", str(store), "--out", str(out), "-q"], capsys)
    except OSError as e:
        pytest.fail(f"escaped as {type(e).__name__}: {e}")
    assert rc == 2
    assert str(out.parent) in _one_line_error(err)


def test_cli_bad_shape_in_a_real_process(tmp_path):
    # The same through the real entry point: exit status 2, one line, no traceback.
    res = _cli(["tune", "--shape", "12x", "--store", str(tmp_path / "s.sqlite")], tmp_path, timeout=120)
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert "bad shape '12x'" in _one_line_error(res.stderr)
    assert res.stdout == ""
    assert not (tmp_path / "s.sqlite").exists()


# ------------------------------------------------------------------ the Python API
@pytest.mark.parametrize("problems, where", [
    (["16x16x64"], "problems[0]"),
    ([Problem.from_sizes(16, 16, 64, "fp16"), (16, 16, 64)], "problems[1]"),
    ([None], "problems[0]"),
])
def test_tune_rejects_wrong_problem_types(tmp_path, problems, where):
    store = tmp_path / "s.sqlite"
    with pytest.raises(TypeError, match=re.escape(where) + r".*Problem or a Shape"):
        gemmtune.tune(problems, store=store, progress=False)
    assert not store.exists()


def test_tune_rejects_a_bare_problem(tmp_path):
    # A single Problem instead of a list of them.
    with pytest.raises(TypeError):
        gemmtune.tune(Problem.from_sizes(16, 16, 64, "fp16"), store=tmp_path / "s.sqlite", progress=False)
    assert not (tmp_path / "s.sqlite").exists()


def test_tune_rejects_unknown_family(tmp_path):
    with pytest.raises(ValueError, match="unknown kernel family 'nope'"):
        gemmtune.tune([Problem.from_sizes(16, 16, 64, "fp16")], families=["nope"],
                      store=tmp_path / "s.sqlite", progress=False)
    assert not (tmp_path / "s.sqlite").exists()


def test_tune_accepts_shapes_and_an_open_store(tmp_path):
    # A Shape keeps its name; a ResultStore passed in stays open for the caller.
    p = Problem.from_sizes(16, 16, 64, "fp16")
    with ResultStore(tmp_path / "s.sqlite") as db:
        r = gemmtune.tune([Shape("g", "tiny", p)], families=["decompose_k"], store=db, progress=False)
        assert db.count() == r.shapes[0].tried >= 1   # still usable: not closed by tune()
    [s] = r.shapes
    assert (s.name, s.group) == ("tiny", "g")
    assert s.best is not None and s.failed == 0
    assert r.table is not None and r.table_path is None
    assert math.isfinite(s.best_ms) and s.best_ms > 0


# ------------------------------------------------------------------ timing profiles
def test_tune_rejects_an_unknown_timing_profile(tmp_path):
    store = tmp_path / "s.sqlite"
    with pytest.raises(ValueError, match=r"timing must be one of 'standard', 'quick', got 'fastest'"):
        gemmtune.tune([Problem.from_sizes(16, 16, 64, "fp16")], store=store, timing="fastest", progress=False)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="compile_ahead"):
            gemmtune.tune([Problem.from_sizes(16, 16, 64, "fp16")], store=store, compile_ahead=bad,
                          progress=False)
    assert not store.exists()  # rejected before anything is written


def _repeats_of(timer) -> int:
    return timer.replays if hasattr(timer, "replays") else timer.repeats


def test_quick_timing_reaches_the_worker(tmp_path):
    # The stored repeats are what the worker's timer counted: the quick profile's when
    # tune(timing="quick"), the standard one's by default.
    from gemmtune.bench.timing import timer_profiles

    profiles = timer_profiles(HAS_CUDA)
    quick, standard = _repeats_of(profiles["quick"]), _repeats_of(profiles["standard"])
    assert quick < standard
    p = Problem.from_sizes(16, 16, 512, "fp16")  # aten + two decompose_k splits
    for timing, want in (("quick", quick), ("standard", standard)):
        store = tmp_path / f"{timing}.sqlite"
        r = gemmtune.tune([p], families=["decompose_k"], store=store, timing=timing, progress=False)
        assert r.shapes[0].statuses == {"ok": 3}, r.shapes[0].statuses
        with ResultStore(store) as db:
            ok = [row for _, row in db.rows(status="ok")]
        assert ok and {row.repeats for row in ok} == {want}, (timing, [(r.choice_id, r.repeats) for r in ok])


# ------------------------------------------------------------------ compiling ahead of benchmarking
OVERLAP_PROBLEMS = [Problem.from_sizes(16, 16, 64, "fp16"), Problem.from_sizes(32, 16, 64, "fp16"),
                    Problem.from_sizes(16, 32, 128, "fp16")]
OVERLAP_FAULTS = {"decompose_k:s4": "compile_error", "decompose_k:s2": "raise"}


def _overlap_table():
    import triton

    from gemmtune.table import LookupTable, TableChoice, provenance

    entries = {}
    for p in OVERLAP_PROBLEMS:
        ids = ["aten", "decompose_k:s2", "decompose_k:s4", "decompose_k:s8"]
        ids += [c.id for c in gemmtune.space(p, "triton_mm", device="h100")[:2]]
        entries[p.key] = [TableChoice(Choice.parse(i)) for i in ids]
    prov = provenance("cpu (Triton interpreter)", "interp", torch.__version__, triton.__version__,
                      gemmtune.__version__, "by-hand")
    return LookupTable(prov, entries)


def _calls(log: Path) -> list[tuple[float, str, str, str]]:
    out = []
    for line in log.read_text().splitlines():
        t, _pid, op, key, choice = line.split(" ")
        out.append((float(t), op, key, choice))
    return out


def _tune_overlap(tmp_path: Path, name: str, **kw):
    store, log = tmp_path / f"{name}.sqlite", tmp_path / f"{name}.log"
    env = {"GEMMTUNE_FAULTS": json.dumps(OVERLAP_FAULTS), "GEMMTUNE_CALL_LOG": str(log)}
    r = gemmtune.tune(OVERLAP_PROBLEMS, store=store, table=_overlap_table(), runner=FAULT_RUNNER, env=env,
                      timeout=60, progress=False, **kw)
    with ResultStore(store) as db:
        rows = {(row.problem_key, row.choice_id): row for _, row in db.rows()}
    return r, rows, _calls(log)


@pytest.mark.slow
def test_compiling_ahead_gives_the_same_store_as_separate_phases(tmp_path):
    table = _overlap_table()
    want = {(p.key, tc.choice.id) for p in OVERLAP_PROBLEMS for tc in table.entries[p.key]}
    ahead, rows_a, calls_a = _tune_overlap(tmp_path, "ahead", compile_workers=2)          # compile_ahead=2
    phased, rows_p, calls_p = _tune_overlap(tmp_path, "phased", compile_workers=2, compile_ahead=0)
    plain, rows_n, _ = _tune_overlap(tmp_path, "plain", compile_workers=0)              # no compile pool

    def statuses(rows):
        return {k: (r.status, r.family) for k, r in rows.items()}

    assert set(rows_a) == want
    assert statuses(rows_a) == statuses(rows_p) == statuses(rows_n)
    for (key, cid), row in rows_a.items():
        expect = {"decompose_k:s4": "compile_error", "decompose_k:s2": "error"}.get(cid, "ok")
        assert row.status == expect, (key, cid, row)
        assert (row.device_ms is not None) == (expect == "ok"), row
    assert all("fails to compile" in rows_a[(p.key, "decompose_k:s4")].reason for p in OVERLAP_PROBLEMS)
    for r in (ahead, phased, plain):
        assert [s.statuses for s in r.shapes] == [{"ok": 4, "compile_error": 1, "error": 1}] * 3
        assert [s.name for s in r.shapes] == [s.name for s in plain.shapes]
        assert all(s.best is not None and s.best not in OVERLAP_FAULTS for s in r.shapes)
        assert all(s.tune_s > 0 for s in r.shapes)
    assert ahead.reused == phased.reused == plain.reused == 0
    assert ahead.measured == phased.measured == 5 * 3   # compile failures are recorded, not benchmarked
    assert plain.measured == 6 * 3

    for calls in (calls_a, calls_p):
        compiled = Counter((k, c) for _, op, k, c in calls if op == "compile")
        benched = Counter((k, c) for _, op, k, c in calls if op == "bench")
        needs = Counter((k, c) for k, c in want if c != "aten")
        assert compiled == needs, "every candidate is compiled exactly once (cuBLAS: never)"
        failing = {(p.key, "decompose_k:s4") for p in OVERLAP_PROBLEMS}
        assert benched == Counter(want - failing), "a candidate that fails to compile is never benchmarked"

    def first(calls, op, key):
        return min(t for t, o, k, _ in calls if o == op and k == key)

    def last(calls, op, key):
        return max(t for t, o, k, _ in calls if o == op and k == key)

    p0, p1 = OVERLAP_PROBLEMS[0].key, OVERLAP_PROBLEMS[1].key
    # Ahead: the next shape compiles while this one is benchmarked; phased: only after.
    assert first(calls_a, "compile", p1) < last(calls_a, "bench", p0)
    assert first(calls_p, "compile", p1) > last(calls_p, "bench", p0)

    # Resume and retry_failed keep their meaning: nothing to redo, then the errors only.
    again = gemmtune.tune(OVERLAP_PROBLEMS, store=tmp_path / "ahead.sqlite", table=table, runner=FAULT_RUNNER,
                          env={"GEMMTUNE_FAULTS": json.dumps(OVERLAP_FAULTS)}, compile_workers=2, progress=False)
    assert (again.measured, again.reused) == (0, len(want))
    retry = gemmtune.tune(OVERLAP_PROBLEMS, store=tmp_path / "ahead.sqlite", table=table, runner=FAULT_RUNNER,
                          env={"GEMMTUNE_FAULTS": json.dumps({"decompose_k:s4": "compile_error"})},
                          compile_workers=2, progress=False, retry_failed=True)
    assert (retry.measured, retry.reused) == (3, len(want) - 3)  # the 3 errors; compile errors stay
    assert [s.statuses for s in retry.shapes] == [{"ok": 5, "compile_error": 1}] * 3


@pytest.mark.slow
def test_a_shape_that_cannot_be_planned_fails_on_its_turn_not_before(tmp_path):
    # Planning runs ahead of benchmarking; an error planning a later shape still surfaces
    # only when that shape's turn comes, after the shapes before it are in the store.
    good, bad = Problem.from_sizes(16, 16, 1024, "fp16"), Problem.from_sizes(16, 16, 2048, "fp16")

    class Picky:
        def predict(self, problem, choices):
            if problem.key == bad.key:
                raise RuntimeError("cannot rank this one")
            return list(range(len(choices)))

    store = tmp_path / "s.sqlite"
    with pytest.raises(RuntimeError, match="cannot rank this one"):
        gemmtune.tune([good, bad], families=["decompose_k"], benchmark_space=1, model=Picky(), store=store,
                      compile_workers=2, progress=False)
    with ResultStore(store) as db:
        assert {row.choice_id for _, row in db.rows(problem_key=good.key)} == {"aten", "decompose_k:s2"}
        assert db.rows(problem_key=bad.key) == []


def test_usable_cpus_follows_the_affinity_set(monkeypatch):
    import os

    from gemmtune.tune import usable_cpus

    assert 1 <= usable_cpus() <= (os.cpu_count() or 1)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3, 4, 5}, raising=False)
    assert usable_cpus() == 3  # pinned to 3 cores (taskset): 3, whatever the machine has

    def no_api(pid):
        raise AttributeError("sched_getaffinity")

    monkeypatch.setattr(os, "sched_getaffinity", no_api, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 7)
    assert usable_cpus() == 7


@pytest.mark.slow
def test_cublas_is_timed_while_the_triton_candidates_compile(tmp_path):
    # cuBLAS needs no compiling: the benchmark worker times it while the compile workers
    # are still busy, instead of waiting for the shape's whole compile job.
    from gemmtune.bench.faults import SLOW_COMPILE_S
    from gemmtune.table import LookupTable, TableChoice, provenance

    import triton

    p = Problem.from_sizes(16, 16, 64, "fp16")
    ids = ["aten", "decompose_k:s2", "decompose_k:s4"]
    prov = provenance("cpu (Triton interpreter)", "interp", torch.__version__, triton.__version__,
                      gemmtune.__version__, "by-hand")
    table = LookupTable(prov, {p.key: [TableChoice(Choice.parse(i)) for i in ids]})
    log = tmp_path / "calls.log"
    env = {"GEMMTUNE_FAULTS": json.dumps({"decompose_k:s2": "slow_compile"}), "GEMMTUNE_CALL_LOG": str(log)}
    r = gemmtune.tune([p], store=tmp_path / "s.sqlite", table=table, runner=FAULT_RUNNER, env=env,
                      compile_workers=2, timeout=60, progress=False)
    assert r.shapes[0].statuses == {"ok": 3}
    assert r.compile_workers == 2 and 0 < r.startup_s < r.wall_s
    calls = _calls(log)
    slow_start = min(t for t, op, _, c in calls if op == "compile" and c == "decompose_k:s2")
    aten = [t for t, op, _, c in calls if op == "bench" and c == "aten"]
    dk = [t for t, op, _, c in calls if op == "bench" and c.startswith("decompose_k")]
    assert len(aten) == 1 and len(dk) == 2
    assert aten[0] < slow_start + SLOW_COMPILE_S, "cuBLAS waited for the slow compile"
    assert min(dk) >= slow_start + SLOW_COMPILE_S, "a candidate was timed before its compile job ended"
    assert not any(op == "compile" and c == "aten" for _, op, _, c in calls), "cuBLAS sent to a compile worker"


@pytest.mark.parametrize("requested, cpus, on_gpu, per_shape, ahead, want", [
    (None, 32, True, [1], 2, 0),                # one compile in all: the benchmark worker compiles
    (None, 32, True, [3], 2, 0),                # --fast, one aligned shape (3 compiles): no compile pool
    (None, 32, True, [2, 2], 2, 0),             # 4 compiles in all: none
    (None, 32, True, [8], 2, 8),                # --fast, one unaligned shape (up to 8): a pool
    (None, 32, True, [1] * 29, 2, 3),           # one candidate per shape in flight
    (None, 32, True, [5, 5], 2, 10),            # top-5 of two shapes
    (None, 32, True, [20] * 29, 2, 16),         # capped at 16
    (None, 6, True, [None] * 29, 2, 6),         # whole spaces: capped at the usable cores
    (None, 32, True, [1, 9, 2, 7, 1], 2, 16),   # the three largest: 9 + 7 + 2 = 18, capped at 16
    (None, 32, True, [1, 9, 2, 7, 1], 1, 16),   # 9 + 7
    (None, 32, True, [3, 2, 1], 1, 5),          # 3 + 2
    (None, 32, True, [0, 0], 2, 0),             # only cuBLAS (a table of aten entries): none
    (None, 32, True, [2, None], 2, 16),         # one shape's whole space: no cap
    (None, 32, True, [5] * 29, 0, 5),           # compile_ahead 0: one shape in flight
    (None, 32, False, [None] * 29, 2, 0),       # the CPU interpreter compiles nothing ahead
    (4, 32, True, [1], 2, 4),                   # asked for: as given
])
def test_compile_pool_size(requested, cpus, on_gpu, per_shape, ahead, want):
    from gemmtune.tune import compile_pool_size

    assert compile_pool_size(requested, cpus=cpus, on_gpu=on_gpu, per_shape=per_shape, compile_ahead=ahead) == want


def test_compiles_at_most_counts_a_table_entry_or_k():
    from gemmtune.table import LookupTable, TableChoice
    from gemmtune.tune import _compiles_at_most

    p, q = Problem.from_sizes(32, 32, 8192, "bf16"), Problem.from_sizes(64, 64, 4096, "bf16")
    t = LookupTable({}, {p.key: [TableChoice(Choice.parse(i)) for i in ("aten", "decompose_k:s8", "pad+aten")]})
    assert _compiles_at_most(t, p, "SAME") == 1     # cuBLAS, padded or not, compiles nothing
    assert _compiles_at_most(t, q, "SAME") is None  # no entry: its whole space
    assert _compiles_at_most(t, q, 5) == 5
    assert _compiles_at_most(None, p, 1) == 1
    odd = Problem.from_sizes(33, 97, 41, "fp16")  # unaligned: each pick may bring its twin, the
    # other path's first choice, and the first tile pick its 2 other triton_static forms
    assert _compiles_at_most(None, odd, 1) == 6 and _compiles_at_most(None, odd, "SAME") is None
    assert _compiles_at_most(None, odd, 1, forms=False) == 4


def test_tune_doctests():
    import doctest
    import importlib

    attempted = 0
    for name in ("plan", "options", "executor", "recorder", "results"):
        res = doctest.testmod(importlib.import_module(f"gemmtune.tuning.{name}"))
        assert res.failed == 0, name
        attempted += res.attempted
    assert attempted > 0


def test_progress_without_a_terminal_prints_plain_periodic_lines():
    """Not a TTY (a log file, CI): plain lines with done/total and an ETA, throttled, plus the last."""
    import io

    from gemmtune.tune import _Progress
    buf = io.StringIO()
    with _Progress(True, stream=buf, every_s=0.0, tty=False) as bar:
        t = bar.task("  shape_a", 4)
        for _ in range(4):
            bar.advance(t)
    lines = buf.getvalue().splitlines()
    # A task's start is a line of its own: the first candidate of a shape can take a minute in
    # the interpreter (a bmm preset run printed nothing for 44 s), and a log names the shape.
    assert lines[0].startswith("[gemmtune]   shape_a: 0/4") and "ETA" not in lines[0]
    assert lines[1].startswith("[gemmtune]   shape_a: 1/4") and "ETA" in lines[1]
    assert lines[-1].startswith("[gemmtune]   shape_a: 4/4") and "ETA" not in lines[-1]
    buf = io.StringIO()
    with _Progress(True, stream=buf, every_s=3600.0, tty=False) as bar:
        t = bar.task("shapes", 3)
        for _ in range(3):
            bar.advance(t)
        bar.task("  nothing_to_measure", 0)  # every candidate reused: no start line
    lines = buf.getvalue().splitlines()
    assert len(lines) == 2 and "0/3" in lines[0] and "3/3" in lines[1]  # throttled: its start and its end
    buf = io.StringIO()
    with _Progress(False, stream=buf, tty=False) as bar:
        bar.advance(bar.task("x", 2))
    assert buf.getvalue() == ""


@pytest.mark.slow
def test_two_tuners_on_one_store_split_the_work(tmp_path):
    """Two processes tune the same shapes against one store at the same time: together they
    measure each candidate once (claims in the store), and both end with every result."""
    import json
    import subprocess
    import sys as _sys

    store = tmp_path / "shared.sqlite"
    code = ("import json, sys, gemmtune\n"
            "from gemmtune.problem import Problem\n"
            "ps = [Problem.from_sizes(24, 40, 64, 'fp16'), Problem.from_sizes(8, 16, 96, 'fp16')]\n"
            f"r = gemmtune.tune(ps, families=['triton_mm', 'aten'], store={str(store)!r}, progress=False)\n"
            "print(json.dumps({'measured': r.measured, 'reused': r.reused,"
            " 'best': [s.best for s in r.shapes], 'tried': [s.tried for s in r.shapes]}))\n")
    env = dict(os.environ, TRITON_INTERPRET="1")
    procs = [subprocess.Popen([_sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for _ in range(2)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
        outs.append(json.loads(out.strip().splitlines()[-1]))
    total = outs[0]["tried"]
    assert outs[1]["tried"] == total  # both see every candidate's result
    distinct = sum(total)
    with ResultStore(store) as db:
        assert db.count() == distinct
    # Each candidate measured by exactly one of them; the other reused it.
    assert outs[0]["measured"] + outs[1]["measured"] == distinct
    assert outs[0]["best"] == outs[1]["best"]


def test_in_process_tuning_starts_no_worker(tmp_path, monkeypatch):
    """tune(in_process=True) measures in this process (bench.inprocess): no WorkerPool is made,
    every candidate is verified and timed as a worker would, a runner's exception is a recorded
    failure; it cannot be combined with a server."""
    import gemmtune.tuning.tuner as tuner_mod
    from gemmtune.bench import workers as workers_mod

    def no_pool(*a, **k):
        raise AssertionError("in_process must not start a worker pool")
    monkeypatch.setattr(tuner_mod, "WorkerPool", no_pool)
    monkeypatch.setattr(workers_mod, "WorkerPool", no_pool)
    p = Problem.from_sizes(16, 24, 64, "fp16")
    victim = [c.id for c in gemmtune.space(p, "triton_mm", device="h100")][0]
    monkeypatch.setenv("GEMMTUNE_FAULTS", json.dumps({victim: "raise"}))
    import gemmtune.bench.faults as faults
    monkeypatch.setattr(faults, "_FAULTS", None)  # re-read from the environment
    r = gemmtune.tune([p], families=["triton_mm", "aten"], store=tmp_path / "s.sqlite", progress=False,
                      in_process=True, runner="gemmtune.bench.faults:handle")
    [s] = r.shapes
    assert s.best is not None and s.tried >= 3 and s.failed == 1
    assert r.startup_s < 5 and r.compile_workers == 0
    with pytest.raises(ValueError, match="in_process .* server"):
        gemmtune.tune([p], store=tmp_path / "t.sqlite", progress=False, in_process=True, server="/tmp/none.sock")


def test_a_table_with_no_entry_for_any_shape_warns(tmp_path):
    """--table whose keys are all other problems (another dtype, layout, suite) tuned every shape
    with the usual candidates and said nothing; a table that covers a shape does not warn."""
    import warnings

    import triton
    from gemmtune.table import LookupTable, TableChoice, provenance

    p = Problem.from_sizes(16, 16, 64, "fp32")
    prov = provenance("cpu (Triton interpreter)", "interp", torch.__version__, triton.__version__,
                      gemmtune.__version__, "by-hand")
    other = LookupTable(prov, {Problem.from_sizes(16, 16, 64, "fp16").key: [TableChoice(Choice.parse("aten"))]})
    # families as one string: a name (it was iterated: "unknown kernel family 'a'")
    with pytest.warns(RuntimeWarning, match=r"has no entry for any of the 1 shape\(s\)"):
        r = gemmtune.tune([p], store=tmp_path / "a.sqlite", table=other, families="aten", in_process=True,
                          progress=False)
    assert r.shapes[0].statuses == {"ok": 1}
    covering = LookupTable(prov, {p.key: [TableChoice(Choice.parse("aten"))]})
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        gemmtune.tune([p], store=tmp_path / "b.sqlite", table=covering, families=["aten"], in_process=True,
                      progress=False)
    from gemmtune.tuning.options import TuneOptions
    assert TuneOptions(families="aten, triton_mm").families == ("aten", "triton_mm")


def _interp_table(problems):
    """A by-hand table for ``problems`` (aten each), made on this machine."""
    import triton
    from gemmtune.table import LookupTable, TableChoice, provenance

    prov = provenance("cpu (Triton interpreter)", "interp", torch.__version__, triton.__version__,
                      gemmtune.__version__, "by-hand")
    return LookupTable(prov, {p.key: [TableChoice(Choice.parse("aten"))] for p in problems})


def test_a_table_covering_some_shapes_says_which_are_tuned_in_full(tmp_path, capsys):
    """--table covering only some of the shapes tuned the rest in full with no word: which ones,
    and why the run took far longer than the table promised, was left to guess. Once a run, a
    progress line gives the counts and the first five uncovered keys; the result and its printed
    summary carry the counts. Not a warning: a partial table is a normal thing to tune with."""
    import warnings

    from gemmtune.tune import render, summary
    from rich.console import Console

    ps = [Problem.from_sizes(16, 16, 16 * (i + 1), "fp32") for i in range(7)]
    lut = _interp_table(ps[:1])
    path = lut.save(tmp_path / "t.json")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        r = gemmtune.tune(ps + ps[1:2], store=tmp_path / "a.sqlite", table=path, families="aten", in_process=True)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if "lookup table" in ln]
    assert lines == [f"[gemmtune] the lookup table {path} covers 1 of the 7 shapes; the other 6 have no entry and "
                     "are tuned in full: " + ", ".join(p.key for p in ps[1:6]) + " and 1 more"], err
    cov = r.table_coverage
    assert (cov.covered, cov.total, cov.uncovered, cov.source) == (1, 7, tuple(p.key for p in ps[1:]), str(path))
    assert summary(r)["table_coverage"] == {"covered": 1, "total": 7, "uncovered": [p.key for p in ps[1:]]}
    console = Console(file=__import__("io").StringIO(), width=400)
    render(r, console)
    assert "; lookup table covered 1 of 7 shapes" in console.file.getvalue()
    # Without progress (tune(progress=False), the CLI's -q) no line; the result still says it.
    r = gemmtune.tune(ps[:2], store=tmp_path / "a.sqlite", table=lut, families="aten", in_process=True,
                      progress=False)
    assert capsys.readouterr().err == "" and (r.table_coverage.covered, r.table_coverage.total) == (1, 2)
    assert r.table_coverage.line() == ("the lookup table covers 1 of the 2 shapes; the other has no entry and is "
                                       f"tuned in full: {ps[1].key}")


def test_a_table_covering_every_shape_or_none_reports_as_before(tmp_path, capsys):
    """A table that covers every shape adds no line and no warning (its coverage is in the result);
    one that covers none still warns, and prints no partial-coverage line beside the warning."""
    import warnings

    ps = [Problem.from_sizes(16, 16, 32, "fp32"), Problem.from_sizes(16, 16, 64, "fp32")]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        r = gemmtune.tune(ps, store=tmp_path / "a.sqlite", table=_interp_table(ps), families="aten",
                          in_process=True)
    assert "lookup table" not in capsys.readouterr().err
    assert (r.table_coverage.covered, r.table_coverage.total, r.table_coverage.uncovered) == (2, 2, ())
    other = _interp_table([Problem.from_sizes(16, 16, 64, "fp16")])
    with pytest.warns(RuntimeWarning, match=r"has no entry for any of the 2 shape\(s\)"):
        r = gemmtune.tune(ps, store=tmp_path / "a.sqlite", table=other, families="aten", in_process=True)
    assert "[gemmtune] the lookup table" not in capsys.readouterr().err
    assert (r.table_coverage.covered, r.table_coverage.total) == (0, 2)
    r = gemmtune.tune(ps, store=tmp_path / "a.sqlite", families="aten", in_process=True, progress=False)
    assert r.table_coverage is None


def test_a_run_with_everything_stored_starts_no_worker(tmp_path, monkeypatch):
    """Without a GPU the tuner knows what its worker would report (tuning.tuner.local_report),
    so a run whose every result is in the store starts no worker: each start is a second torch
    import (~1-2.2 s on the 2-core CI machine), which the suite paid in every such run. A run
    that has something to measure still starts one, on its first task."""
    from gemmtune.bench import workers

    store = tmp_path / "s.sqlite"
    probs = [Problem(8, 8, 8, "float16")]
    first = gemmtune.tune(probs, store=store, families=["aten"], progress=False)
    assert first.measured == 1
    spawned = []
    real = workers.spawn_worker
    monkeypatch.setattr(workers, "spawn_worker", lambda *a, **k: spawned.append(a) or real(*a, **k))
    again = gemmtune.tune(probs, store=store, families=["aten"], progress=False)
    assert (again.measured, again.reused, again.shapes[0].best) == (0, 1, "aten")
    assert again.context == first.context
    assert spawned == []
    more = gemmtune.tune(probs + [Problem(8, 8, 16, "float16")], store=store, families=["aten"], progress=False)
    assert (more.measured, more.reused) == (1, 1)
    assert len(spawned) == 1


def test_the_local_report_is_the_workers_own(tmp_path):
    """What the tuner computes in place of asking its worker must be what the worker says (the
    run context keys every stored row: a drift would split one device's results in two)."""
    from gemmtune.bench.workers import WorkerPool
    from gemmtune.tuning.options import TuneOptions
    from gemmtune.tuning.tuner import local_report

    env = {"TRITON_INTERPRET": "1"}
    with WorkerPool(1, env=env, gpus=[]) as pool:
        assert local_report(TuneOptions(), [], env) == pool.info()
    # Elsewhere the worker is asked: a GPU's facts, another runner, a server, in-process, or a
    # worker environment that does not run the interpreter.
    assert local_report(TuneOptions(), ["0"], env) is None
    assert local_report(TuneOptions(runner="my.module:run"), [], env) is None
    assert local_report(TuneOptions(in_process=True), [], env) is None
    assert local_report(TuneOptions(server="127.0.0.1:1"), [], env) is None
    assert local_report(TuneOptions(), [], {"TRITON_INTERPRET": "0"}) is None
    assert local_report(TuneOptions(prestarted=(object(),)), [], env) is None
