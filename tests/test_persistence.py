"""Persistence: ways a table, store or artifact lost or misrepresented a user's results.
CPU only; each test failed before its fix."""

from __future__ import annotations

import json
import threading
import warnings

import pytest
import torch

import gemmtune
from gemmtune import cli
from gemmtune.configs import Choice
from gemmtune.jsonio import locked
from gemmtune.problem import Problem
from gemmtune.store import ResultRow, ResultStore, RunContext
from gemmtune.table import LookupTable, TableChoice, load, provenance

H100 = "NVIDIA H100 80GB HBM3"
P1 = Problem.from_sizes(32, 32, 64, "bf16")
P2 = Problem.from_sizes(64, 32, 64, "bf16")
P3 = Problem.from_sizes(128, 32, 64, "bf16")


def _table(entries: dict) -> LookupTable:
    return LookupTable(provenance(H100, "9.0", "2.11.0", "3.6.0", "0.1.0"),
                       {p.key: [TableChoice(Choice.parse("aten"), ms)] for p, ms in entries.items()})


# ------------------------------------------------------------------ lut merge and the table lock
def test_lut_merge_into_a_table_waits_for_a_run_writing_it(tmp_path):
    """``gemmtune lut merge T T other.json`` read T, merged and wrote it without the lock that
    ``tune --out T`` holds around its own read-merge-write: a tune finishing meanwhile lost its
    entries (or the merge lost other.json's), with no error."""
    out, other = tmp_path / "t.json", tmp_path / "other.json"
    _table({P1: 0.01}).save(out)
    _table({P2: 0.02}).save(other)
    errors: list[BaseException] = []

    def merge_cli():
        try:
            assert cli.main(["lut", "merge", str(out), str(out), str(other)]) == 0
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    t = threading.Thread(target=merge_cli)
    with locked(out):  # a tune run writing its winners into the same table (recorder.write_table)
        mine = load(out)
        t.start()
        t.join(timeout=3)  # the merge must wait for the lock, not write between our read and write
        mine.entries[P3.key] = [TableChoice(Choice.parse("aten"), 0.03)]
        mine.save(out)
    t.join()
    assert not errors, errors
    assert set(load(out).entries) == {P1.key, P2.key, P3.key}


# ------------------------------------------------------------------ symlinks
def test_locked_through_a_symlink_excludes_a_writer_of_its_target(tmp_path):
    """Two runs merging into one table, one through a symlink to it: the lock file was named after
    the path given, so the two took different locks and dropped each other's entries."""
    target = tmp_path / "real.json"
    target.write_text("{}")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    entered = threading.Event()

    def other():
        with locked(link):
            entered.set()

    with locked(target):
        t = threading.Thread(target=other)
        t.start()
        got_in = entered.wait(timeout=1.0)
    t.join()
    assert not got_in, "locked(link) was taken while locked(target) was held"


def test_write_atomic_through_a_symlink_writes_its_target(tmp_path):
    """A table saved through a symlink (table.json -> shared/h100.json) replaced the link with a
    plain file: the shared table never got the new entries, and the link was gone."""
    shared = tmp_path / "shared"
    shared.mkdir()
    target = shared / "h100.json"
    _table({P1: 0.01}).save(target)
    link = tmp_path / "table.json"
    link.symlink_to(target)
    _table({P1: 0.01, P2: 0.02}).save(link)
    assert link.is_symlink()
    assert set(load(target).entries) == {P1.key, P2.key}


# ------------------------------------------------------------------ store paths
def _row(i: int) -> ResultRow:
    return ResultRow(problem_key=P1.key, choice_id=f"c{i}", family="aten", status="ok", device_ms=0.1,
                     eager_ms=0.1, rel_err=0.0, m=32, n=32, k=64, dtype="bfloat16", out_dtype="bfloat16",
                     layout="row/row", aligned=True)


CTX = RunContext("cpu", "cpu", "2.11.0", "3.6.0", "0.1.0")


@pytest.mark.parametrize("name", ["file:r.sqlite", "file:r.sqlite?mode=memory"])
def test_store_name_that_reads_as_an_sqlite_uri_is_a_file_name(tmp_path, monkeypatch, name):
    """SQLite here is built to read ``file:`` names as URIs: ``ResultStore("file:r.sqlite")``
    opened ``r.sqlite`` (another file than the one checked), and ``file:r.sqlite?mode=memory``
    kept every result in memory: gone when the store closed, without an error."""
    monkeypatch.chdir(tmp_path)
    with ResultStore(name) as s:
        s.record(CTX, _row(0))
    assert (tmp_path / name).is_file()
    with ResultStore(name) as s:
        assert s.count() == 1


# ------------------------------------------------------------------ dispatcher provenance
def test_dispatcher_resaved_on_another_machine_does_not_claim_its_decisions_verified(tmp_path, monkeypatch):
    """A dispatcher tuned on an A100, loaded here (decisions re-verified here) and saved again kept
    its A100 provenance and wrote those decisions as verified: loaded back on the A100 they ran
    there without a check, as if verified on that GPU."""
    from gemmtune.dispatch import ProvenanceWarning, common, load as dload

    tune = lambda problems, **kw: {p.key: "aten" for p in problems}  # noqa: E731
    d = gemmtune.compile_mm(n=16, k=32, dtype="fp32", hints={"m": [8]}, tune_fn=tune)
    d(torch.randn(5, 32), torch.randn(32, 16))
    path = d.save(tmp_path / "mm.json", binaries=False)
    doc = json.loads(path.read_text())
    a100 = dict(doc["provenance"], device_name="NVIDIA A100-SXM4-80GB", capability="8.0")
    doc["provenance"] = a100
    (tmp_path / "a100.json").write_text(json.dumps(doc))
    with pytest.warns(ProvenanceWarning):
        here = dload(tmp_path / "a100.json")
    a, b = torch.randn(5, 32), torch.randn(32, 16)
    here(a, b)
    assert here.decision(m=5).verified  # verified on this machine
    here.save(tmp_path / "resaved.json", binaries=False)
    # Back on the A100:
    monkeypatch.setattr(common, "_current_provenance", lambda produced_by: dict(a100))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        back = dload(tmp_path / "resaved.json")
    assert not back.decision(m=5).verified


# ------------------------------------------------------------------ hand-edited choices
def _saved_dispatcher(tmp_path):
    """A saved dispatcher whose hint M=32 runs a Triton tile and whose one decision (M=5, nearest
    hint 8) is cuBLAS: saved and loaded without running any Triton kernel."""
    winners = {8: "aten", 32: "triton_mm:BM16-BN16-BK16-S1-W2-G8"}
    tune = lambda problems, **kw: {p.key: winners[p.m] for p in problems}  # noqa: E731
    d = gemmtune.compile_mm(n=16, k=32, dtype="fp32", hints={"m": [8, 32]}, tune_fn=tune)
    d(torch.randn(5, 32), torch.randn(32, 16))
    return d.save(tmp_path / "mm.json", binaries=False)


@pytest.mark.parametrize("bad, why", [
    ("nosuch:BM16-BN16", "unknown kernel family 'nosuch'"),
    ("triton_mm:BM16-BN16", "malformed parameters 'BM16-BN16'"),
    ("triton_mm:BM12-BN16-BK16-S1-W2-G8", "block_m=12 must be a power of two"),  # check_block_sizes
    ("decompose_k:s5", "split=5 does not divide K=32"),                          # the shape's own rule
])
def test_a_hand_edited_choice_that_cannot_run_is_refused_at_load(tmp_path, bad, why):
    """A saved hint (or decision) edited to a choice its family rejects at that shape loaded without
    complaint: as a hint it was skipped at every first sight, silently; as a verified decision it
    raised at the shape's first call from inside the launch ("arange's range must be a power of 2")."""
    import re

    from gemmtune.dispatch import load as dload

    path = _saved_dispatcher(tmp_path)
    assert dload(path).hint_choices[1].choice.id == "triton_mm:BM16-BN16-BK16-S1-W2-G8"  # as saved: loads
    for field, where in (("hint_choices", "hint_choices[1] (M=32, N=16, K=32)"),
                         ("decisions", "M=5, N=16, K=32")):
        doc = json.loads(path.read_text())
        entry = doc[field][1 if field == "hint_choices" else 0]
        entry["choice"] = bad
        edited = tmp_path / f"edited_{field}.json"
        edited.write_text(json.dumps(doc))
        with pytest.raises(ValueError) as e:
            dload(edited)
        msg = str(e.value)
        assert msg.startswith(str(edited)), msg
        for part in (where, bad, why):
            assert re.search(re.escape(part), msg), (part, msg)


def test_a_dispatcher_built_by_hand_refuses_a_choice_its_family_rejects():
    from gemmtune.configs import DecomposeKConfig, TileConfig
    from gemmtune.dispatch import Decision, Dispatcher, HintChoice

    ok = HintChoice((8, 16, 32), Choice.parse("aten"))
    kw = dict(dims={"n": 16, "k": 32}, dtype="fp32", hints={"m": [8]})
    Dispatcher(hint_choices=[ok], **kw)
    with pytest.raises(ValueError, match=r"hint_choices\[0\] \(M=8, N=16, K=32\): choice triton_mm:BM64-BN16-BK8"):
        Dispatcher(hint_choices=[HintChoice((8, 16, 32), Choice("triton_mm", TileConfig(64, 16, 8, 1, 2, 8)))], **kw)
    with pytest.raises(ValueError, match=r"the decision for M=3, N=16, K=30: choice decompose_k:s4 .*does not divide"):
        Dispatcher(hint_choices=[ok], decisions={(3, 16, 30): Decision(Choice("decompose_k", DecomposeKConfig(4)),
                                                                     "similarity", verified=True)}, **kw)
    # A bmm decision (batch, M, N, K) is checked as a bmm: split-K refuses one.
    with pytest.raises(ValueError, match="splitk does not serve bmm"):
        Dispatcher(hint_choices=[ok], decisions={(2, 8, 16, 32): Decision(
            Choice.parse("splitk:BM16-BN16-BK16-S1-W2-G8-SK2-det"), "similarity", verified=True)}, **kw)


def test_load_patched_refuses_a_layer_file_with_a_choice_that_cannot_run(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.Linear(48, 16))
    tune = lambda problems, **kw: {p.key: "aten" for p in problems}  # noqa: E731
    path = gemmtune.save_patched(tmp_path / "m.json", gemmtune.tune_model(model, [(torch.randn(4, 32),)],
                                                                         tune_fn=tune), binaries=False)
    gemmtune.load_patched(torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.Linear(48, 16)), path)
    layer = tmp_path / json.loads(path.read_text())["layers"][0]["file"]
    doc = json.loads(layer.read_text())
    doc["hint_choices"][0]["choice"] = "splitk:BM16-BN16-BK24-S1-W2-G8-SK2-det"
    layer.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r"m\.d/mm_n\d+_k\d+_float32_\w+\.json: .*hint_choices\[0\].*"
                                         r"splitk:BM16-BN16-BK24-S1-W2-G8-SK2-det cannot run there: block_k=24"):
        gemmtune.load_patched(torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.Linear(48, 16)), path)


# ------------------------------------------------------------------ inductor export
def test_export_inductor_refuses_to_overwrite_a_gemmtune_table(tmp_path):
    """``gemmtune lut export-inductor t.json t.json`` (or OUT naming another gemmtune table)
    replaced the tuned table with Inductor's format: the table was gone."""
    from gemmtune import inductor_export as ie

    t = _table({P1: 0.01}).save(tmp_path / "t.json")
    before = t.read_text()
    with pytest.raises(ValueError, match="gemmtune lookup table"):
        ie.export(t, t, force=True)
    assert t.read_text() == before
    other = _table({P2: 0.02}).save(tmp_path / "other.json")
    with pytest.raises(ValueError, match="gemmtune lookup table"):
        ie.export(t, other, force=True)
    ie.export(t, tmp_path / "inductor.json", force=True)  # a new file, or an Inductor table, is fine
    ie.export(t, tmp_path / "inductor.json", force=True)
    # A results store there (``export-inductor t.json gemmtune.sqlite``) was replaced too: every measurement lost.
    with ResultStore(tmp_path / "s.sqlite"):
        pass
    store_bytes = (tmp_path / "s.sqlite").read_bytes()
    with pytest.raises(ValueError, match="results store"):
        ie.export(t, tmp_path / "s.sqlite", force=True)
    assert (tmp_path / "s.sqlite").read_bytes() == store_bytes


# ------------------------------------------------------------------ save_patched
def test_a_failed_save_patched_leaves_the_existing_artifact_as_it_was(tmp_path, monkeypatch):
    """save_patched wrote each layer's dispatcher into ``<stem>.d/`` in place, then the index: a
    save that failed after the first layer (a full disk, an interrupt, a GPU error in warm-up)
    left the old index naming layer files of two different runs (or GPUs)."""
    from gemmtune.dispatch import Dispatcher

    model = torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.Linear(48, 16))
    tune = lambda problems, **kw: {p.key: "aten" for p in problems}  # noqa: E731
    first = gemmtune.tune_model(model, [(torch.randn(4, 32),)], tune_fn=tune)
    path = gemmtune.save_patched(tmp_path / "m.json", first, binaries=False)
    before = {p.relative_to(tmp_path): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}

    second = gemmtune.tune_model(model, [(torch.randn(4, 32),), (torch.randn(9, 32),)], tune_fn=tune)
    real_save, calls = Dispatcher.save, []

    def failing_save(self, p, **kw):
        calls.append(p)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real_save(self, p, **kw)

    monkeypatch.setattr(Dispatcher, "save", failing_save)
    with pytest.raises(OSError):
        gemmtune.save_patched(path, second, binaries=False)
    after = {p.relative_to(tmp_path): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert after == before
    monkeypatch.setattr(Dispatcher, "save", real_save)

    def failing_index(p, data):  # every layer written, the index write fails
        raise OSError(28, "No space left on device", str(p))

    from gemmtune import modeltune
    monkeypatch.setattr(modeltune, "write_atomic", failing_index)
    with pytest.raises(OSError):
        gemmtune.save_patched(path, second, binaries=False)
    after = {p.relative_to(tmp_path): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert after == before
    monkeypatch.undo()
    gemmtune.save_patched(path, second, binaries=False)  # and a save that succeeds replaces it whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.d", "m.json"]
    fresh = torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.Linear(48, 16))
    gemmtune.load_patched(fresh, path)


def test_export_with_nothing_exportable_leaves_an_existing_file(tmp_path):
    """``export-inductor T OUT --no-aten`` on a table of cuBLAS entries only wrote '{}' over OUT
    (an earlier export there was lost) and exited 1."""
    from gemmtune import inductor_export as ie

    t = _table({P1: 0.01}).save(tmp_path / "t.json")
    out = tmp_path / "inductor.json"
    ie.export(t, out, force=True)  # with aten: one entry
    before = out.read_text()
    with pytest.raises(ValueError, match="nothing to export"):
        ie.export(t, out, include_aten=False, force=True)
    assert out.read_text() == before
    new = tmp_path / "new.json"
    assert ie.export(t, new, include_aten=False, force=True).table == {} and json.loads(new.read_text()) == {}


# ------------------------------------------------------------------ malformed files, every loader
def _dispatcher_file(tmp_path):
    tune = lambda problems, **kw: {p.key: "aten" for p in problems}  # noqa: E731
    d = gemmtune.compile_mm(n=16, k=32, dtype="fp32", hints={"m": [8]}, tune_fn=tune)
    return d.save(tmp_path / "mm.json", binaries=False)


def _patched_file(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.Linear(48, 16))
    tune = lambda problems, **kw: {p.key: "aten" for p in problems}  # noqa: E731
    ds = gemmtune.tune_model(model, [(torch.randn(4, 32),)], tune_fn=tune)
    return gemmtune.save_patched(tmp_path / "m.json", ds, binaries=False)


def _fresh_model():
    return torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.Linear(48, 16))


@pytest.mark.parametrize("text", ["[" * 100_000, "1" * 5000], ids=["nested-deep", "5000-digit-int"])
@pytest.mark.parametrize("loader", ["dispatcher", "patched", "model"])
def test_json_the_parser_rejects_outside_json_errors_is_named_as_such(tmp_path, loader, text):
    """read_json caught only JSONDecodeError: arrays nested 10^5 deep raised a RecursionError
    traceback from inside json, and a 5,000-digit integer int's bare ValueError ('Exceeds the
    limit (4300 digits) for integer string conversion'), naming no file."""
    from gemmtune.model import LearnedModel, ModelError

    path = tmp_path / "bad.json"
    path.write_text(text)
    load = {"dispatcher": gemmtune.load, "patched": lambda p: gemmtune.load_patched(_fresh_model(), p),
            "model": LearnedModel.load}[loader]
    with pytest.raises(ModelError if loader == "model" else ValueError, match=f"{path}: not valid JSON"):
        load(path)


@pytest.mark.parametrize("dims", [16, "n=16", None, [16, 32]])
def test_a_dispatcher_file_whose_dims_is_not_an_object_is_named(tmp_path, dims):
    """"dims": 16 (hand-edited) raised AttributeError: 'int' object has no attribute 'get' from
    Dispatcher's constructor, naming neither the file nor the field."""
    path = _dispatcher_file(tmp_path)
    doc = json.loads(path.read_text())
    doc["dims"] = dims
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=f"{path}: malformed dispatcher file: 'dims' is missing or not an object"):
        gemmtune.load(path)


@pytest.mark.parametrize("field, value, why", [("m", 1.5, "a size must be an int, got 1.5"),
                                                ("m", True, "a size must be an int, got True"),
                                                ("k", 0, "k=0 where this dispatcher has static K=32"),
                                                ("n", 17, "n=17 where this dispatcher has static N=16")])
def test_a_hand_edited_hint_size_is_refused_naming_the_file(tmp_path, field, value, why):
    """A hint's size edited to 1.5 or true loaded as 1 (an int() of it); one contradicting a
    static dim (K=0 in a K=32 dispatcher) loaded and that hint, measured at another shape, ranked
    among the real ones. Both are refused, naming the file."""
    path = _dispatcher_file(tmp_path)
    doc = json.loads(path.read_text())
    doc["hint_choices"][0]["sizes"][field] = value
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=f"{path}: malformed dispatcher file: .*{why}"):
        gemmtune.load(path)


@pytest.mark.parametrize("edit, value", [("dtype", "bfloat16"), ("dims", {"m": None, "n": 48, "k": 32}),
                                         ("layout_b", "row")])
def test_load_patched_names_a_layer_file_that_is_not_the_one_its_index_lists(tmp_path, edit, value):
    """A layer file edited (or copied from another artifact) to another dtype or shape loaded, and the
    layer then refused it: 'dtype: dispatcher multiplies torch.bfloat16, the weight is torch.float32'
    (a TypeError) or 'dispatcher has N=48, K=32; this Linear needs ...', naming neither file."""
    path = _patched_file(tmp_path)
    layer = tmp_path / json.loads(path.read_text())["layers"][0]["file"]
    doc = json.loads(layer.read_text())
    doc[edit] = value
    if edit == "dims":
        for h in doc["hint_choices"]:
            h["sizes"].update(n=48, k=32)
    layer.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=f"{path}: layer file .*{layer.name} holds a dispatcher for .*"
                                         "the index lists it for n=16, k=48, float32, layout_b=col"):
        gemmtune.load_patched(_fresh_model(), path)


@pytest.fixture(scope="module")
def _training_set():
    from gemmtune.model.data import load_dataset, split_by_shape
    from test_model import SAMPLE

    return split_by_shape(load_dataset(SAMPLE), 0.2, 0)[0]


@pytest.mark.parametrize("where, value", [(("provenance", "device", "sm_count"), "132"),
                                          (("provenance", "device", "capability"), []),
                                          (("provenance", "domain", "problems"), 7),
                                          (("params", "features", 0, 0), 10**30),
                                          (("family",), ["gbt"])])
def test_a_hand_edited_model_file_is_refused_naming_the_file(tmp_path, _training_set, where, value):
    """LearnedModel.load checked the params but not what its constructor computes with: a provenance
    device field of the wrong type raised TypeError / IndexError from analytic.py, a 10^30 feature
    index OverflowError from numpy, a list family 'unhashable type: list': none named the file."""
    from gemmtune.model import LearnedModel, ModelError
    from gemmtune.model.learned import fit

    path = fit(_training_set, kind="gbt", seed=0)[0].save(tmp_path / "m.json")
    doc = json.loads(path.read_text())
    obj = doc
    for k in where[:-1]:
        obj = obj[k]
    obj[where[-1]] = value
    path.write_text(json.dumps(doc))
    with pytest.raises(ModelError, match=f"{path}: "):
        LearnedModel.load(path)


def test_a_ranker_save_that_fails_leaves_the_earlier_model_loadable(tmp_path, _training_set, monkeypatch):
    """A ranker saves its booster, then the JSON that records the booster's sha256. A save failing
    at the JSON (a full disk) left the earlier JSON beside the new booster, and the earlier model no
    longer loaded: "its booster file 'r.lgbm.txt' does not match the model JSON ...: stale or edited"."""
    pytest.importorskip("lightgbm")
    from gemmtune.model import LearnedModel
    from gemmtune.model import learned
    from gemmtune.model.learned import fit

    first, second = (fit(_training_set, kind="lgbm_rank", seed=s)[0] for s in (0, 1))
    assert first.regressor.to_text() != second.regressor.to_text()
    path = first.save(tmp_path / "r.json")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    real = learned.write_atomic

    def full_disk_at_the_json(p, data):
        if p == path:
            raise OSError(28, "No space left on device", str(p))
        return real(p, data)

    monkeypatch.setattr(learned, "write_atomic", full_disk_at_the_json)
    with pytest.raises(OSError):
        second.save(path)
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert LearnedModel.load(path).regressor.to_text() == first.regressor.to_text()
    second.save(path)  # and a save that succeeds replaces both
    assert LearnedModel.load(path).regressor.to_text() == second.regressor.to_text()


def test_inductor_export_and_reader_name_a_file_nested_too_deep_for_json(tmp_path):
    """json.loads raises RecursionError, not a ValueError, for arrays nested 10^5 deep: exporting
    over such a file, or reading it as an Inductor table, ended in a RecursionError traceback."""
    from gemmtune import inductor_export as ie
    from gemmtune.table import TableError

    t = _table({P1: 0.01}).save(tmp_path / "t.json")
    deep = tmp_path / "inductor.json"
    deep.write_text("[" * 100_000)
    with pytest.raises(TableError, match=f"{deep}: cannot read an Inductor lookup table: RecursionError"):
        ie.read_inductor_table(deep)
    ie.export(t, deep, force=True)  # not JSON: nothing of ours there, written over
    assert ie.read_inductor_table(deep)
