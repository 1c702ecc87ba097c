"""gemmtune collect, defects found by a hunt over gemmtune.collect and cli/collect.py: resuming
(a cut or upper-case .gz, a store's write-ahead log), exports and runs cut short, the sampler a
half-measured shape keeps, the per-GPU collectors (hard stop, claims folder, a GPU twice,
--export-only), the progress counts, and options accepted but wrong or ignored (--dtypes twice,
--groups ',', --store in the dry run or as a .gz, --progress-name a path)."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from gemmtune import cli, collect
from gemmtune.collect import rows as collect_rows
from gemmtune.collect.run import child_argv, prepare_store
from gemmtune.device import DeviceInfo
from gemmtune.problem import Problem
from gemmtune.store import ResultRow, ResultStore, RunContext

H100 = DeviceInfo.lookup("h100")
CTX = RunContext("NVIDIA H200", "9.0", "2.11", "3.6.0", "0.1.0")

# collect's --max-minutes counts from the process's start (process_age_s): in a pytest worker that
# has run for longer than the default 8 minutes, an in-process run measured nothing and said so.
NO_BUDGET = "100000"


def _store(path: Path, n: int) -> Path:
    """A store of ``n`` aten rows (enough pages that a cut .gz ends mid-file)."""
    rows = []
    for i in range(n):
        p = Problem.from_sizes(64, 64, 64 + i, "bf16")
        rows.append(ResultRow(problem_key=p.key, choice_id="aten", family="aten", status="ok", device_ms=1.0,
                              eager_ms=None, rel_err=None, m=p.m, n=p.n, k=p.k, dtype=p.dtype,
                              out_dtype=p.out_dtype, layout="row/row", aligned=True, repeats=5, created_at=1.0))
    with ResultStore(path) as st:
        st.record_many(CTX, rows)
    return path


def _prep_args(resume: Path) -> SimpleNamespace:
    return SimpleNamespace(resume_from=resume, drop_stale_edges=False, drop_launch_bound=False, drop_oom=False)


def test_a_truncated_resume_gz_is_a_clear_error_and_leaves_no_partial_store(tmp_path):
    """--resume-from a cut .gz (a device call killed while it copied the file back): an EOFError
    traceback, and the half-decompressed copy stayed at the store's path, so the next call (with a
    good --resume-from) skipped unpacking and opened the broken copy ('database disk image is
    malformed', or fewer rows than the file given)."""
    gz = tmp_path / "collect.sqlite.gz"
    collect_rows.gzip_file(_store(tmp_path / "s.sqlite", 2000), gz)
    cut = tmp_path / "cut.sqlite.gz"
    cut.write_bytes(gz.read_bytes()[:gz.stat().st_size // 2])
    out = tmp_path / "out"
    out.mkdir()
    store = out / "collect.sqlite"
    with pytest.raises(ValueError, match=r"cut\.sqlite\.gz.*truncated or corrupt"):
        prepare_store(_prep_args(cut), store, out)
    assert not store.exists() and list(out.iterdir()) == []
    prepare_store(_prep_args(gz), store, out)  # the good file, next
    with ResultStore(store) as st:
        assert st.count() == 2000


def test_an_upper_case_gz_resumes_as_the_dry_run_reads_it(tmp_path):
    """The dry run reads STORE.SQLITE.GZ as gzip (store.opened_readonly: case-blind); the real run
    copied it as it was, then refused its own copy: 'not a SQLite database'."""
    gz = tmp_path / "COLLECT.SQLITE.GZ"
    collect_rows.gzip_file(_store(tmp_path / "s.sqlite", 3), gz)
    store = tmp_path / "collect.sqlite"
    prepare_store(_prep_args(gz), store, tmp_path)
    with ResultStore(store) as st:
        assert st.count() == 3


def test_a_shape_holding_only_rows_both_samplers_share_keeps_the_requested_sampler():
    """A shape measured only as far as its cuBLAS row (a hard stop, an interrupted call) matches
    both samples equally: the tie went to 'random' whatever --sampler said, so a --sampler pool
    collection resumed it with a whole-space sample (other compiles, another candidate set)."""
    p = Problem.from_sizes(512, 1024, 4096, "bf16")
    kw = dict(mm=40, splitk=10, pad=0)
    pool = [c.id for c in collect.sample_choices(p, H100, sampler="pool", **kw)]
    rnd = [c.id for c in collect.sample_choices(p, H100, sampler="random", **kw)]
    assert pool != rnd
    for sampler, want in (("pool", pool), ("random", rnd)):
        assert [c.id for c in collect.shape_choices(p, H100, {"aten"}, sampler=sampler, **kw)] == want, sampler


def test_a_collectors_hard_stop_counts_from_the_parents_start(tmp_path):
    """--gpus: each collector gets the minutes left of --max-minutes (it starts later than the
    parent, after the store was prepared), but --hard-stop-minutes went on as given, so each
    collector's hard stop came that much later than the call's, past a device call's end."""
    args = cli.build_parser().parse_args(["collect", "--gpus", "0,1", "--max-minutes", "8",
                                          "--hard-stop-minutes", "9", "--out", str(tmp_path)])
    argv = child_argv(args, "0", tmp_path / "s.sqlite", tmp_path / "claims", 7.0)  # one minute spent
    assert argv[argv.index("--max-minutes") + 1] == "7.0000"
    assert argv[argv.index("--hard-stop-minutes") + 1] == "8.0000"
    # Past it already: a moment, not 0 (which means 'never').
    argv = child_argv(args, "0", tmp_path / "s.sqlite", tmp_path / "claims", -2.0)
    assert float(argv[argv.index("--hard-stop-minutes") + 1]) > 0
    never = cli.build_parser().parse_args(["collect", "--gpus", "0", "--hard-stop-minutes", "0", "--out", str(tmp_path)])
    argv = child_argv(never, "0", tmp_path / "s.sqlite", tmp_path / "claims", 7.0)
    assert argv[argv.index("--hard-stop-minutes") + 1] == "0.0000"  # 0: never, still


def test_a_dtype_given_twice_is_refused(capsys):
    """--dtypes bf16,bfloat16 ran the bf16 phase twice: the dry run counted its candidates twice
    and a run counted every shape twice in shapes_done."""
    assert cli.main(["collect", "--dry-run", "--dtypes", "bf16,fp16,bfloat16", "--limit-shapes", "1"]) == 2
    err = capsys.readouterr().err
    assert "--dtypes" in err and "bfloat16" in err and "twice" in err


def test_an_interrupted_export_leaves_the_last_one_whole(tmp_path, monkeypatch):
    """export() gzipped the store straight onto DIR/collect.sqlite.gz: a call killed (or Ctrl-C)
    during that copy left a cut file in place of the last good export."""
    out = tmp_path / "out"
    out.mkdir()
    store = _store(tmp_path / "s.sqlite", 50)
    collect.export(store, out)
    before = (out / "collect.sqlite.gz").read_bytes()
    real = shutil.copyfileobj

    def cut_short(src, dst, *a, **kw):
        dst.write(src.read(1000))
        raise KeyboardInterrupt

    monkeypatch.setattr(collect_rows.shutil, "copyfileobj", cut_short)
    with pytest.raises(KeyboardInterrupt):
        collect.export(store, out)
    monkeypatch.setattr(collect_rows.shutil, "copyfileobj", real)
    assert (out / "collect.sqlite.gz").read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == sorted(["collect.sqlite.gz", "collect-nvidia-h200.csv.gz"])
    with gzip.open(out / "collect.sqlite.gz") as f:
        assert f.read(16) == b"SQLite format 3\x00"
    head = before[:64]  # the gzip header names the file (gunzip -N), not a temporary one
    assert head[10:head.index(b"\0", 10)] == b"collect.sqlite"


def test_groups_naming_no_group_is_refused(capsys):
    """--groups ',' (or ' , ') selected nothing: a run with 0 shapes, exit 0, nothing said."""
    assert cli.main(["collect", "--list-shapes", "--groups", " , "]) == 2
    assert "--groups" in capsys.readouterr().err


def test_an_interrupted_run_leaves_no_hard_stop_armed(tmp_path, monkeypatch, capsys):
    """Ctrl-C (or any error) inside a batch left the hard-stop watchdog armed: in a process that
    goes on (collect.run from Python, cli.main in a notebook or a test), it fired minutes later on
    the closed store, printed a traceback and os._exit(1)-ed that process."""
    import sys
    import threading

    from gemmtune.api import interpreter_enabled

    if not interpreter_enabled():
        pytest.skip("needs TRITON_INTERPRET=1 (--cpu-interpreter)")

    def interrupted(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(sys.modules["gemmtune.tune"], "tune", interrupted)
    suite = tmp_path / "s.csv"
    suite.write_text("group,name,M,N,K,dtype\ng,s,16,32,64,float16\n")
    before = set(threading.enumerate())
    try:
        rc = cli.main(["collect", "--cpu-interpreter", "--shapes", str(suite), "--dtypes", "fp16", "--mm-sample", "1",
                       "--splitk-sample", "0", "--pad-sample", "0", "--new-sample", "0", "--out", str(tmp_path / "o"),
                       "--hard-stop-minutes", "30", "--max-minutes", NO_BUDGET])
        armed = [t for t in set(threading.enumerate()) - before if isinstance(t, threading.Timer) and t.is_alive()]
    finally:
        for t in set(threading.enumerate()) - before:
            if isinstance(t, threading.Timer):
                t.cancel()  # (on the old code: so that it cannot end this test process later)
    assert rc == 130 and "interrupted" in capsys.readouterr().err
    assert armed == []


def test_rows_added_counts_rows_the_store_gained_not_replaced_ones(tmp_path, monkeypatch):
    """fp32 rows of unknown arithmetic (a version-1 store) are measured again and replaced. The
    progress file counted rows_added from the statuses present after the call only: the old
    'error' rows, all replaced by 'ok' ones, were left out of the difference, so it said n rows
    added to a store that had gained none (rows_in_store unchanged)."""
    import json
    import sys
    from dataclasses import replace as dc_replace

    from gemmtune.api import interpreter_enabled
    from gemmtune.bench.runner import WorkerState, info
    from gemmtune.precision import key_precision_tag

    if not interpreter_enabled():
        pytest.skip("needs TRITON_INTERPRET=1 (--cpu-interpreter)")
    facts = info(WorkerState(device="cpu"))
    ctx = RunContext(facts["device_name"], facts["capability"], facts["torch"], facts["triton"], facts["gemmtune"])
    p = Problem.from_sizes(16, 32, 64, "float32")
    cands = collect.shape_choices(p, H100, None, mm=1, splitk=0, pad=0, sampler="pool")
    seed = [ResultRow(problem_key=p.key, choice_id=c.id, family=c.family, status="error", device_ms=None,
                      eager_ms=None, rel_err=None, m=p.m, n=p.n, k=p.k, dtype=p.dtype, out_dtype=p.out_dtype,
                      layout="row/row", aligned=True, created_at=1.0) for c in cands]  # fp32_precision "": unknown
    out = tmp_path / "o"
    out.mkdir()
    with ResultStore(out / "collect.sqlite") as st:
        st.record_many(ctx, seed)

    def fake_tune(shapes, *, store, table, **kw):  # records an ok row for every candidate of the table
        rows = [dc_replace(r, status="ok", device_ms=1.0, fp32_precision=key_precision_tag(r.problem_key))
                for s in shapes for r in seed if any(tc.choice.id == r.choice_id for tc in table.choices(s.problem))]
        store.record_many(ctx, rows)
        return SimpleNamespace(measured=len(rows), compile_wait_s=0.0)

    monkeypatch.setattr(sys.modules["gemmtune.tune"], "tune", fake_tune)
    suite = tmp_path / "s.csv"
    suite.write_text("group,name,M,N,K,dtype\ng,s,16,32,64,float32\n")
    rc = cli.main(["collect", "--cpu-interpreter", "--shapes", str(suite), "--dtypes", "fp32", "--mm-sample", "1",
                   "--splitk-sample", "0", "--pad-sample", "0", "--new-sample", "0", "--out", str(out),
                   "--no-export", "--hard-stop-minutes", "0", "--max-minutes", NO_BUDGET])
    assert rc == 0
    prog = json.loads((out / "collect-progress.json").read_text())
    n = len(seed)
    assert prog["measured_this_call"] == n and prog["rows_in_store"] == n
    assert prog["rows_added"] == 0
    assert prog["rows_added_by_status"] == {"ok": n, "error": -n}


def test_a_gpu_listed_twice_is_refused(capsys):
    """--gpus 0,0 started two collectors on one GPU, timing against each other (every time of
    both slowed by the other, stored as if alone), both writing collect-progress-gpu0.json."""
    assert cli.main(["collect", "--gpus", "0,1,0", "--list-shapes"]) == 2
    err = capsys.readouterr().err
    assert "--gpus" in err and "0" in err and "twice" in err


def test_gpus_empty_only_the_claim_files_of_the_claims_folder(tmp_path, monkeypatch, capsys):
    """--gpus starts by emptying the claims folder: it unlinked every file there, so --claims
    naming a folder of other files (--claims out, where the store itself lies) deleted them, the
    store included, and a subfolder there stopped the run (IsADirectoryError)."""
    import hashlib
    import sys

    collect_run = sys.modules["gemmtune.collect.run"]  # (gemmtune.collect.run is also the function)

    class Ended:  # a collector that ended at once
        def __init__(self, *a, **kw):
            self.stdout, self.returncode = iter(()), 0

        def wait(self):
            return 0

    monkeypatch.setattr(collect_run.subprocess, "Popen", Ended)
    out = tmp_path / "out"
    out.mkdir()
    _store(out / "collect.sqlite", 3)
    (out / "notes.txt").write_text("mine\n")
    (out / "sub").mkdir()
    stale = out / hashlib.sha1(b"mm:M1-N1-K1:bf16->bf16:row.a/row.a").hexdigest()
    stale.write_text("123 mm:M1-N1-K1:bf16->bf16:row.a/row.a\n")
    assert cli.main(["collect", "--gpus", "0,1", "--cpu-interpreter", "--claims", str(out), "--out", str(out),
                     "--no-export"]) == 0, capsys.readouterr().err
    assert not stale.exists()  # a claim of the last set of processes: gone
    assert (out / "notes.txt").read_text() == "mine\n" and (out / "sub").is_dir()
    with ResultStore(out / "collect.sqlite") as st:
        assert st.count() == 3


@pytest.mark.slow  # two dry runs of one shape (~6 s)
def test_dry_run_counts_what_the_store_given_leaves(tmp_path, capsys):
    """--dry-run --store S: the run resumes from S where it exists (--resume-from is then not
    read), but the dry run read only --resume-from: --store was accepted and ignored, and it said
    every candidate was left."""
    import re

    base = ["collect", "--dry-run", "--dtypes", "bf16", "--limit-shapes", "1"]
    assert cli.main(base) == 0
    total = int(re.search(r"1 shapes, (\d+) candidates", capsys.readouterr().out).group(1))
    _group, _name, m, n, k, layout_b = collect.shape_plan()[0]
    store = tmp_path / "mine.sqlite"
    with ResultStore(store) as st:
        p = Problem.from_sizes(m, n, k, "bf16", layout_b=layout_b)
        st.record_many(CTX, [ResultRow(problem_key=p.key, choice_id="aten", family="aten", status="ok",
                                       device_ms=1.0, eager_ms=None, rel_err=None, m=m, n=n, k=k, dtype=p.dtype,
                                       out_dtype=p.out_dtype, layout=f"row/{layout_b}", aligned=True)])
    assert cli.main([*base, "--store", str(store)]) == 0
    assert f"left after mine.sqlite: {total - 1} candidates on 1 shapes" in capsys.readouterr().out


def test_resuming_from_a_plain_store_keeps_the_rows_of_its_write_ahead_log(tmp_path):
    """A collector killed before its checkpoint (a device call's time out, kill -9) leaves its last
    commits in collect.sqlite-wal. --resume-from that collect.sqlite copied the main file alone:
    every row of the log was lost, without a word (the dry run, which reads through SQLite, still
    counted them as measured). The source is left as it was."""
    import os

    live = ResultStore(tmp_path / "live.sqlite")
    try:
        rows = []
        for i in range(100):
            p = Problem.from_sizes(32, 32, 32 + i, "bf16")
            rows.append(ResultRow(problem_key=p.key, choice_id="aten", family="aten", status="ok", device_ms=1.0,
                                  eager_ms=None, rel_err=None, m=p.m, n=p.n, k=p.k, dtype=p.dtype,
                                  out_dtype=p.out_dtype, layout="row/row", aligned=True))
        live.record_many(CTX, rows)
        crashed = tmp_path / "crashed"
        crashed.mkdir()
        for suffix in ("", "-wal"):  # the files a killed writer leaves: the store and its log
            shutil.copyfile(f"{live.path}{suffix}", crashed / f"collect.sqlite{suffix}")
    finally:
        live.close()
    src = crashed / "collect.sqlite"
    before = {f.name: f.read_bytes() for f in crashed.iterdir()}
    assert os.path.getsize(crashed / "collect.sqlite-wal") > 0
    out = tmp_path / "out"
    out.mkdir()
    prepare_store(_prep_args(src), out / "collect.sqlite", out)
    with ResultStore(out / "collect.sqlite") as st:
        assert st.count() == 100
    assert {f.name: f.read_bytes() for f in crashed.iterdir() if not f.name.endswith("-shm")} == before


@pytest.mark.parametrize("name", ["sub/p.json", "", ".."])
def test_a_progress_name_that_is_no_file_name_is_refused_first(name, capsys):
    """--progress-name is a file name in --out. A path ('sub/p.json') was taken, and failed only at
    the very end of the call, after every batch, and before the export (no collect.sqlite.gz
    came back); --gpus' collectors each wrote 'p-gpuN.json' in --out instead."""
    assert cli.main(["collect", "--list-shapes", "--progress-name", name]) == 2
    assert "--progress-name" in capsys.readouterr().err


def test_export_only_with_gpus_starts_no_collector(tmp_path, monkeypatch, capsys):
    """--export-only beside --gpus was ignored: --gpus started a collector per GPU, each measuring
    for --max-minutes into the store, where only the export was asked for."""
    import sys

    collect_run = sys.modules["gemmtune.collect.run"]
    started = []

    def popen(*a, **kw):
        started.append(a)
        raise AssertionError("a collector was started")

    monkeypatch.setattr(collect_run.subprocess, "Popen", popen)
    gz = tmp_path / "prev.sqlite.gz"
    collect_rows.gzip_file(_store(tmp_path / "s.sqlite", 4), gz)
    out = tmp_path / "out"
    rc = cli.main(["collect", "--gpus", "0,1", "--cpu-interpreter", "--export-only", "--resume-from", str(gz),
                   "--out", str(out)])
    assert started == [] and rc == 0, capsys.readouterr().err
    assert (out / "collect.sqlite.gz").is_file() and (out / "collect-nvidia-h200.csv.gz").is_file()


def test_a_gz_given_for_the_store_is_refused_before_anything_is_written(tmp_path, capsys):
    """--store DIR/collect.sqlite.gz (the compressed store, meant for --resume-from) made a SQLite
    file of that name, filled it, and the export then wrote DIR/collect.sqlite.gz over it: the
    store truncated while it was read."""
    src = _store(tmp_path / "prev.sqlite", 4)
    out = tmp_path / "out"
    rc = cli.main(["collect", "--export-only", "--resume-from", str(src), "--store", str(out / "collect.sqlite.gz"),
                   "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and "--store" in err and "--resume-from" in err, err
    assert not out.exists() or list(out.iterdir()) == []
