"""Lookup tables: format round trip, validation (fuzzed), trust policy, merge/diff,
tune(table=...), the `gemmtune lut` CLI and the export to torch.compile (Inductor).

Everything runs on a CPU (the tune test in the Triton interpreter, which conftest
selects). The Inductor export is checked against the installed torch's own lookup
code: a CPU compile with a LookupTableChoices subclass that gives the CPU a device
key (Inductor's lookup is CUDA-only) records the keys Inductor really asks for and
what its own parser returns for our table.
"""

from __future__ import annotations

import copy
import inspect
import json
import re
import sys
import warnings
from pathlib import Path

import pytest
import torch
import triton
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import cpu_lookup_choices
import gemmtune
from gemmtune import cli
from gemmtune import inductor_export as ie
from gemmtune.configs import Choice
from gemmtune.device import DeviceInfo
from gemmtune.problem import Problem
from gemmtune.store import ResultStore
from gemmtune.table import (LookupTable, TableChoice, TableError, TableWarning, check_provenance, diff,
                            from_json, load, load_or_none, loads, merge, provenance, required_choices)
from gemmtune.tune import candidates

H100 = "NVIDIA H100 80GB HBM3"
H200 = "NVIDIA H200"
A100 = "NVIDIA A100-SXM4-80GB"
INTERP = "cpu (Triton interpreter)"
HAS_CUDA = torch.cuda.is_available()
NEEDS_INDUCTOR_LUT = pytest.mark.skipif(ie.unavailable_reason() is not None,
                                        reason=f"this torch cannot take a lookup table: {ie.unavailable_reason()}")
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def prov(device=H100, produced_by="tuned", triton_v="3.6.0", capability="9.0") -> dict:
    return provenance(device, capability, "2.11.0", triton_v, "0.1.0", produced_by)


def P(m, n, k, dtype="bf16", out_dtype=None, **kw) -> Problem:
    return Problem.from_sizes(m, n, k, dtype, out_dtype, **kw)


def tc(cid: str, ms: float | None = None) -> TableChoice:
    return TableChoice(Choice.parse(cid), ms)


def doc_with(entries: list, device=H100) -> dict:
    return {"schema_version": 1, "provenance": prov(device), "entries": entries}


def load_doc(doc, path="t.json") -> LookupTable:
    return from_json(doc, path)


# ------------------------------------------------------------------ strategies
@st.composite
def problems(draw) -> Problem:
    dtype = draw(st.sampled_from(["float16", "bfloat16", "float32"]))
    out = draw(st.sampled_from([dtype, "float32"]))
    dims = st.one_of(st.integers(1, 64), st.integers(1, 6000))
    ks = st.one_of(dims, st.integers(1, 48).map(lambda x: 128 * x))  # K with divisors: decompose_k splits
    p = Problem.from_sizes(draw(dims), draw(dims), draw(ks), dtype, out,
                           layout_a=draw(st.sampled_from(["row", "col", "strided"])),
                           layout_b=draw(st.sampled_from(["row", "col", "strided"])),
                           allow_tf32=dtype == "float32" and draw(st.booleans()))
    if p.layout_a != "strided" and draw(st.booleans()):
        # an offset data pointer: unaligned although the strides are
        p = Problem(p.m, p.n, p.k, p.dtype, p.out_dtype, p.layout_a, p.layout_b, False, p.aligned_b,
                    p.allow_tf32)
    return p


DEVICES = {H100: "h100", A100: "a100", INTERP: "h100", "Some Future GPU": "h100"}
positive_ms = st.one_of(st.none(), st.floats(min_value=1e-300, max_value=1e6, allow_nan=False,
                                             allow_infinity=False, exclude_min=False))


@st.composite
def tables(draw) -> LookupTable:
    device = draw(st.sampled_from(sorted(DEVICES)))
    dev = DeviceInfo.lookup(DEVICES[device])
    t = LookupTable(prov(device, draw(st.sampled_from(["tuned", "predicted", "by-hand", "merged"]))))
    for p in draw(st.lists(problems(), max_size=4, unique_by=lambda p: p.key)):
        cands = candidates(p, ["triton_mm", "splitk", "decompose_k"], "default", dev)
        groups: dict[str, list] = {}  # by family (pad+ apart): rare families get drawn too
        for c in cands:
            groups.setdefault(("pad+" if c.pad else "") + c.family, []).append(c)
        one = st.sampled_from(sorted(groups)).flatmap(lambda g: st.sampled_from(groups[g]))
        picked = draw(st.lists(one, min_size=1, max_size=4, unique_by=lambda c: c.id))
        t.entries[p.key] = [TableChoice(c, draw(positive_ms)) for c in picked]
    return t


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda ch: st.lists(ch, max_size=3) | st.dictionaries(st.text(max_size=8), ch, max_size=3),
    max_leaves=8)


def _paths(node, path=()):
    yield path
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, path + (i,))


def _get(node, path):
    for p in path:
        node = node[p]
    return node


# ------------------------------------------------------------------ round trip
@FUZZ
@given(table=tables())
def test_round_trip_save_load_is_equal(table, tmp_path_factory):
    path = tmp_path_factory.mktemp("rt") / "t.json"
    table.save(path)
    back = load(path)
    assert back == table
    assert back.provenance == table.provenance
    assert path.read_text() == back.dumps()  # stable: a second save writes the same bytes
    assert loads(table.dumps()) == table


def test_pad_choices_round_trip(tmp_path):
    p = P(33, 65, 4095)  # odd N and K: both operands unaligned
    assert not p.aligned_a
    t = LookupTable(prov(), {p.key: [tc("pad+triton_mm:BM32-BN64-BK64-S3-W4-G8", 0.5), tc("pad+aten", 0.7),
                                     tc("aten")]})
    t.save(tmp_path / "t.json")
    assert load(tmp_path / "t.json") == t


def test_file_is_diff_friendly(tmp_path):
    t = LookupTable(prov(), {P(64, 64, 64).key: [tc("aten", 0.01)], P(32, 32, 8192).key: [tc("decompose_k:s8")]})
    lines = t.save(tmp_path / "t.json").read_text().splitlines()
    entry_lines = [ln for ln in lines if '"key"' in ln]
    assert len(entry_lines) == 2                      # one entry per line
    assert "M32-N32-K8192" in entry_lines[0]          # sorted by key
    assert lines[2].startswith('  "provenance": {"capability"')  # sorted keys


# ------------------------------------------------------------------ fuzzing: always TableError
def _assert_table_error_or_ok(fn, path="fuzz.json"):
    try:
        fn()
    except TableError as e:
        msg = str(e)
        assert msg.startswith(f"{path}: ") and len(msg) > len(path) + 4, msg
        assert len(msg) < 5000, "a message should stay readable"


@FUZZ
@given(table=tables(), data=st.data())
def test_mutated_documents_raise_table_error(table, data):
    doc = table.to_json()
    paths = list(_paths(doc))
    path = data.draw(st.sampled_from(paths))
    op = data.draw(st.sampled_from(["delete", "replace", "add", "wrap"]))
    mutated = copy.deepcopy(doc)
    if not path:
        mutated = data.draw(json_values) if op != "wrap" else [mutated]
    else:
        parent, last = _get(mutated, path[:-1]), path[-1]
        if op == "delete":
            del parent[last]
        elif op == "replace":
            parent[last] = data.draw(json_values)
        elif op == "wrap":
            parent[last] = [parent[last]]
        else:
            target = parent[last]
            if isinstance(target, dict):
                target[data.draw(st.text(min_size=1, max_size=8))] = data.draw(json_values)
            elif isinstance(target, list):
                target.append(data.draw(json_values))
            else:
                parent[last] = data.draw(json_values)
    _assert_table_error_or_ok(lambda: from_json(mutated, "fuzz.json"))
    # The same document through the text path (JSON can hold NaN: json.dumps writes it).
    _assert_table_error_or_ok(lambda: loads(json.dumps(mutated), "fuzz.json"))


@FUZZ
@given(table=tables(), data=st.data())
def test_garbage_bytes_and_truncation_raise_table_error(table, data):
    raw = bytearray(table.dumps().encode())
    op = data.draw(st.sampled_from(["truncate", "flip", "insert"]))
    i = data.draw(st.integers(0, len(raw) - 1))
    if op == "truncate":
        raw = raw[:i]
    elif op == "flip":
        raw[i] = data.draw(st.integers(0, 255))
    else:
        raw[i:i] = data.draw(st.binary(min_size=1, max_size=8))
    _assert_table_error_or_ok(lambda: loads(bytes(raw), "fuzz.json"))


@FUZZ
@given(value=json_values)
def test_any_json_value_raises_table_error(value):
    with pytest.raises(TableError):
        from_json(value, "fuzz.json")


@pytest.mark.parametrize("text", ["[" * 100_000, '{"schema_version": 1' + "0" * 5000 + "}", "", "\ufeff{}",
                                  '{"schema_version": 1, "schema_version": 1}'])
def test_pathological_text_raises_table_error(text):
    with pytest.raises(TableError, match=r"^fuzz\.json: "):
        loads(text, "fuzz.json")


# ------------------------------------------------------------------ exact messages
KEY = "mm:M16-N16-K64:fp16->fp16:row.a/row.a"


def _entry_err(choices, key=KEY, device=H100) -> str:
    with pytest.raises(TableError) as ei:
        load_doc(doc_with([{"key": key, "choices": choices}], device))
    return str(ei.value)


def test_message_unknown_family():
    assert _entry_err([{"id": "foo:bar"}]) == (
        f"t.json: entries[0] ({KEY}).choices[0].id: choice 'foo:bar': unknown kernel family 'foo'; "
        "known: triton_mm, triton_static, splitk, skinny, persistent_tma, decompose_k, aten")


def test_message_decompose_k_split_not_dividing_k():
    assert _entry_err([{"id": "aten"}, {"id": "decompose_k:s3"}]) == (
        f"t.json: entries[0] ({KEY}).choices[1].id: decompose_k:s3: decompose_k split=3 does not divide K=64")


def test_message_shared_memory_over_the_named_device():
    key = P(4096, 4096, 4096).key
    big = "triton_mm:BM256-BN256-BK128-S5-W8-G8"
    assert _entry_err([{"id": big}], key) == (
        f"t.json: entries[0] ({key}).choices[0].id: {big} cannot run on {H100} (provenance.device_name): "
        "shared memory 655360 B = 5 stages x (256x128 + 128x256) x 2 B exceeds the 232448 B per block "
        f"of {H100}")
    # An unknown GPU (here the interpreter) has no limits to check against: accepted.
    load_doc(doc_with([{"key": key, "choices": [{"id": big}]}], INTERP))


def test_message_non_canonical_key_and_choice():
    bad = "mm:M16-N16-K64:half->fp16:row.a/row.a"
    assert _entry_err([{"id": "aten"}], bad) == (
        f"t.json: entries[0] ({bad}).key: problem key {bad!r} is not canonical; did you mean {KEY!r}?")
    assert _entry_err([{"id": "triton_mm:BM016-BN16-BK16-S1-W2-G8"}]) == (
        f"t.json: entries[0] ({KEY}).choices[0].id: 'triton_mm:BM016-BN16-BK16-S1-W2-G8' is not canonical; "
        "did you mean 'triton_mm:BM16-BN16-BK16-S1-W2-G8'?")


def test_strided_key_marked_aligned_is_refused_and_the_unaligned_one_served():
    """A strided operand is never aligned (problem.operand_aligned), so 'strided.a' is a key no
    tensors pose: a table entry for it loaded and was never looked up, without a word. It is refused
    on load now, naming the key and the one the tensors pose ('strided.u', valid and served)."""
    import torch

    a = torch.randn(64, 128)[:, ::2]  # (64, 64), neither dim contiguous
    posed = Problem.from_tensors(a, torch.randn(64, 64)).key
    assert posed == "mm:M64-N64-K64:fp32->fp32:strided.u/row.a"
    for bad, operand in (("mm:M64-N64-K64:fp32->fp32:strided.a/row.a", "A (strided.a)"),
                         ("mm:M64-N64-K64:fp32->fp32:row.a/strided.a", "B (strided.a)"),
                         ("bmm:B2-M64-N64-K64:fp32->fp32:bcast_strided.a/row.a", "A (bcast_strided.a)")):
        good = bad.replace("strided.a", "strided.u")
        with pytest.raises(TableError) as e:
            load_doc(doc_with([{"key": bad, "choices": [{"id": "aten"}]}], INTERP))
        assert str(e.value) == (
            f"t.json: entries[0] ({bad}).key: problem key {bad!r} is not canonical: a strided operand is never "
            f"aligned, so no tensors pose {operand}; did you mean {good!r}?")
        load_doc(doc_with([{"key": good, "choices": [{"id": "aten"}]}], INTERP))
    # Built from sizes with aligned_a=True, it is the problem the tensors pose.
    assert Problem.from_sizes(64, 64, 64, "fp32", layout_a="strided", aligned_a=True).key == posed
    assert Problem(64, 64, 64, "float32", layout_a="strided").key == posed


def test_message_fields_and_types():
    assert _entry_err([{"id": "aten", "device_ms": "0.1"}]) == (
        f"t.json: entries[0] ({KEY}).choices[0].device_ms: must be a positive finite number, got '0.1'")
    assert _entry_err([{"id": "aten", "ms": 1}]) == f"t.json: entries[0] ({KEY}).choices[0]: unknown field(s) ['ms']"
    assert _entry_err([{"id": "aten"}, {"id": "aten"}]) == (
        f"t.json: entries[0] ({KEY}).choices[1].id: 'aten' is listed twice")
    assert _entry_err([]) == f"t.json: entries[0] ({KEY}).choices: must be a non-empty list"
    d = doc_with([])
    d["schema_version"] = True
    with pytest.raises(TableError, match=re.escape("t.json: schema_version: expected 1, got True")):
        load_doc(d)
    d = doc_with([])
    del d["provenance"]["triton"]
    with pytest.raises(TableError, match=re.escape("t.json: provenance.triton: missing or not a string (got None)")):
        load_doc(d)


def test_message_file_level(tmp_path):
    with pytest.raises(TableError, match=re.escape(f"{tmp_path / 'nope.json'}: cannot read: No such file")):
        load(tmp_path / "nope.json")
    f = tmp_path / "trunc.json"
    f.write_text(LookupTable(prov(), {KEY: [tc("aten")]}).dumps()[:-20])
    with pytest.raises(TableError, match=re.escape(f"{f}: not valid JSON: ") + r".* at line \d+ column \d+"):
        load(f)
    f.write_bytes(b'{"schema_version": \xff}')
    with pytest.raises(TableError, match=re.escape(f"{f}: not UTF-8 text: byte 19")):
        load(f)


def test_save_refuses_a_table_load_would_refuse(tmp_path):
    t = LookupTable(prov(), {KEY: [tc("decompose_k:s3")]})
    with pytest.raises(TableError, match="does not divide K=64"):
        t.save(tmp_path / "t.json")
    assert not (tmp_path / "t.json").exists()


# ------------------------------------------------------------------ trust policy
def _warns(fn) -> list[str]:
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        fn()
    return [str(x.message) for x in w if issubclass(x.category, TableWarning)]


def test_provenance_same_gpu_and_triton_minor_is_trusted():
    t = LookupTable(prov(H100, triton_v="3.6.0"), {KEY: [tc("aten", 0.1)]})
    assert _warns(lambda: check_provenance(t, "nvidia h100 80gb hbm3", "3.6.1")) == []
    assert t.trusted


@pytest.mark.parametrize("device, triton_v, needles", [
    (H200, "3.6.0", [repr(H100), repr(H200), "untrusted"]),
    (H100, "3.5.2", ["'3.6.0'", "'3.5.2'", "MAJOR.MINOR"]),
    (H200, "4.6.0", [repr(H200), "'4.6.0'"]),
])
def test_provenance_other_gpu_or_triton_warns_and_untrusts(device, triton_v, needles):
    t = LookupTable(prov(H100, triton_v="3.6.0"), {KEY: [tc("aten", 0.1)]}, source="t.json")
    msgs = _warns(lambda: check_provenance(t, device, triton_v))
    assert msgs and all(m.startswith("t.json: ") for m in msgs)
    assert all(any(n in m for m in msgs) for n in needles), msgs
    assert not t.trusted
    assert required_choices(t, Problem.from_key(KEY)) == [Choice.parse("aten")]  # still usable


def test_provenance_mixed_triton_versions_warn():
    t = LookupTable(prov(H100, triton_v="3.6.0 + 3.5.1"))
    assert len(_warns(lambda: check_provenance(t, H100, "3.6.0"))) == 1 and not t.trusted


def test_load_or_none_warns_once_per_path_and_returns_none(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    msgs = _warns(lambda: [load_or_none(bad) for _ in range(3)])
    assert len(msgs) == 1
    assert str(bad) in msgs[0] and "default heuristic" in msgs[0]
    assert _warns(lambda: load_or_none(bad)) == []
    assert load_or_none(bad) is None
    missing = tmp_path / "missing.json"
    assert len(_warns(lambda: (load_or_none(missing), load_or_none(missing)))) == 1
    assert _warns(lambda: load_or_none(tmp_path / "other.json", on_error="ignore")) == []
    good = LookupTable(prov(H100), {KEY: [tc("aten", 0.1)]}).save(tmp_path / "good.json")
    assert _warns(lambda: load_or_none(good)) == []
    msgs = _warns(lambda: load_or_none(good, device_name=H200, triton_version="3.6.0"))
    assert len(msgs) == 1 and "untrusted" in msgs[0]


def test_required_choices():
    p = P(32, 32, 8192)
    t = LookupTable(prov(), {p.key: [tc("decompose_k:s8", 0.01), tc("aten", 0.02)]})
    assert [c.id for c in required_choices(t, p)] == ["decompose_k:s8", "aten"]
    assert required_choices(t, P(32, 32, 4096)) == []
    assert required_choices(None, p) == []


# ------------------------------------------------------------------ merge and diff
P1, P2, P3 = P(512, 512, 4096), P(32, 32, 28672), P(64, 64, 64)
TILE = "triton_mm:BM128-BN64-BK128-S2-W4-G4"


def test_merge_keeps_the_faster_measured_choice_first():
    a = LookupTable(prov(), {P1.key: [tc(TILE, 0.020), tc("aten", 0.025)], P3.key: [tc("aten", 0.001)]})
    b = LookupTable(prov(), {P1.key: [tc("aten", 0.019)], P2.key: [tc("decompose_k:s14", 0.004)]})
    guess = LookupTable(prov(produced_by="predicted"), {P1.key: [tc("triton_mm:BM64-BN64-BK64-S3-W4-G8", 0.001)]})
    m = merge([a, b, guess])
    assert m.provenance["produced_by"] == "merged" and m.provenance["device_name"] == H100
    assert m.entries[P1.key] == [tc("aten", 0.019), tc(TILE, 0.020), tc("triton_mm:BM64-BN64-BK64-S3-W4-G8")]
    assert m.entries[P2.key] == [tc("decompose_k:s14", 0.004)] and m.entries[P3.key] == [tc("aten", 0.001)]
    assert m.measured
    assert loads(m.dumps()) == m


def test_merge_refuses_mixed_devices():
    a = LookupTable(prov(H100), {P1.key: [tc("aten", 0.02)]}, source="a.json")
    b = LookupTable(prov(A100, capability="8.0"), {P1.key: [tc("aten", 0.03)]}, source="b.json")
    with pytest.raises(TableError) as ei:
        merge([a, b])
    assert H100 in str(ei.value) and A100 in str(ei.value) and "--allow-mixed-devices" in str(ei.value)
    m = merge([a, b], allow_mixed_devices=True)
    assert m.provenance["device_name"] == f"{H100} + {A100}" and m.provenance["capability"] == "9.0 + 8.0"
    # A mixed table never matches one GPU: its times are untrusted everywhere.
    assert _warns(lambda: check_provenance(m, H100, "3.6.0")) and not m.trusted


def test_diff_lists_added_removed_changed_with_time_deltas():
    a = LookupTable(prov(), {P1.key: [tc(TILE, 0.020), tc("aten", 0.025)], P3.key: [tc("aten", 0.001)]})
    b = LookupTable(prov(triton_v="3.7.0"), {P1.key: [tc("aten", 0.019)], P2.key: [tc("decompose_k:s14", 0.004)]})
    d = diff(a, b)
    assert set(d.added) == {P2.key} and set(d.removed) == {P3.key} and set(d.changed) == {P1.key}
    lines = d.lines()
    assert "  provenance.triton: '3.6.0' -> '3.7.0'" in lines
    assert f"+ {P2.key}: decompose_k:s14 (0.004 ms)" in lines
    assert f"- {P3.key}: aten (0.001 ms)" in lines
    assert (f"~ {P1.key}: {TILE} (0.02 ms) -> aten (0.019 ms)  delta -0.001 ms (-5.0%)  "
            f"[{TILE}, aten] -> [aten]") in lines
    assert lines[-1] == "1 added, 1 removed, 1 changed"
    assert not diff(a, copy.deepcopy(a)) and diff(a, a).lines() == ["no differences in entries"]


# ------------------------------------------------------------------ tune(table=...)
@pytest.mark.filterwarnings("ignore::gemmtune.table.TableWarning")  # on a GPU the table's device differs
def test_tune_with_a_table_benchmarks_only_listed_choices(tmp_path):
    one, two, free = P(16, 16, 64, "fp16"), P(16, 32, 64, "fp16"), P(32, 16, 64, "fp16")
    pair = ["triton_mm:BM16-BN16-BK16-S1-W2-G8", "aten"]
    table = LookupTable(provenance(INTERP, "interp", torch.__version__, triton.__version__, "0.1.0", "by-hand"),
                        {one.key: [tc("decompose_k:s2")], two.key: [tc(c) for c in pair]})
    table.save(tmp_path / "lut.json")
    store = tmp_path / "s.sqlite"
    r = gemmtune.tune([one, two, free], families=["triton_mm"], store=store, table=str(tmp_path / "lut.json"),
                      out=tmp_path / "out.json", progress=False)
    with ResultStore(store) as db:
        ran = {k: {row.choice_id for _, row in db.rows(problem_key=k)} for k in (one.key, two.key, free.key)}
    assert ran[one.key] == {"decompose_k:s2"}          # one choice: only it, timed once
    assert ran[two.key] == set(pair)                   # several: only those
    dev = DeviceInfo.from_torch() if HAS_CUDA else DeviceInfo.lookup("h100")
    assert ran[free.key] == {c.id for c in candidates(free, ["triton_mm"], "default", dev)}  # no entry: normal
    s1, s2, s3 = r.shapes
    assert (s1.tried, s1.best, s1.failed) == (1, "decompose_k:s2", 0) and s1.best_ms > 0
    assert s2.tried == 2 and s2.best in pair
    assert s3.tried == len(ran[free.key]) > 2
    assert [t.choice.id for t in r.table.choices(one)] == ["decompose_k:s2"]   # the result table has a time
    assert r.table.choices(one)[0].device_ms is not None


def test_tune_refuses_a_bad_table_before_writing_anything(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": 2}')
    store = tmp_path / "s.sqlite"
    with pytest.raises(TableError, match="schema_version: expected 1, got 2"):
        gemmtune.tune([P(16, 16, 64, "fp16")], store=store, table=bad, progress=False)
    assert not store.exists()
    rc = cli.main(["tune", "--shape", "16x16x64:fp16", "--table", str(bad), "--store", str(store), "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("gemmtune tune: error: ") and "schema_version" in err
    assert not store.exists()


# ------------------------------------------------------------------ the lut CLI
def _main(argv, capsys) -> tuple[int, str, str]:
    rc = cli.main(argv)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


@pytest.fixture
def two_tables(tmp_path):
    a = LookupTable(prov(), {P1.key: [tc(TILE, 0.020), tc("aten", 0.025)], P3.key: [tc("aten", 0.001)]})
    b = LookupTable(prov(), {P1.key: [tc("aten", 0.019)], P2.key: [tc("decompose_k:s14", 0.004)]})
    return a.save(tmp_path / "a.json"), b.save(tmp_path / "b.json")


def test_cli_lut_validate(tmp_path, capsys, two_tables):
    a, b = two_tables
    rc, out, _ = _main(["lut", "validate", str(a), str(b)], capsys)
    assert rc == 0 and out.count("OK ") == 2 and "2 entries, tuned on NVIDIA H100" in out
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc_with([{"key": KEY, "choices": [{"id": "decompose_k:s3"}]}])))
    rc, out, _ = _main(["lut", "validate", str(a), str(bad)], capsys)
    assert rc == 1
    assert f"FAIL {bad}: entries[0] ({KEY}).choices[0].id: decompose_k:s3: decompose_k split=3 " in out
    assert f"OK   {a}" in out


def test_cli_lut_show(capsys, two_tables):
    rc, out, _ = _main(["lut", "show", str(two_tables[0])], capsys)
    flat = " ".join(out.split())
    assert rc == 0
    for needle in (P1.key, TILE, "aten", "0.02", "0.025", "device_name=NVIDIA H100 80GB HBM3", "produced_by=tuned"):
        assert needle in flat, needle


def test_cli_lut_merge(tmp_path, capsys, two_tables):
    a, b = two_tables
    out_path = tmp_path / "m.json"
    rc, out, _ = _main(["lut", "merge", str(out_path), str(a), str(b)], capsys)
    assert rc == 0 and "3 entries merged from 2 tables" in out
    m = load(out_path)
    assert m.provenance["produced_by"] == "merged" and m.entries[P1.key][0] == tc("aten", 0.019)
    other = LookupTable(prov(A100, capability="8.0"), {P3.key: [tc("aten", 0.002)]}).save(tmp_path / "c.json")
    rc, _, err = _main(["lut", "merge", str(tmp_path / "m2.json"), str(a), str(other)], capsys)
    assert rc == 2 and "refusing to merge tables from different GPUs" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "m2.json").exists()
    rc, _, _ = _main(["lut", "merge", "--allow-mixed-devices", str(tmp_path / "m2.json"), str(a), str(other)],
                     capsys)
    assert rc == 0 and load(tmp_path / "m2.json").provenance["device_name"] == f"{H100} + {A100}"


def test_cli_lut_merge_never_replaces_a_table_it_was_not_given(tmp_path, capsys, two_tables):
    """``lut merge a.json b.json`` (read as "merge b into a") used to replace a's entries with b's:
    OUT must be among the inputs, or --overwrite given."""
    a, b = two_tables
    before = a.read_text()
    rc, _, err = _main(["lut", "merge", str(a), str(b)], capsys)
    assert rc == 2 and "exists and is not one of the tables merged" in err and len(err.splitlines()) == 1
    assert a.read_text() == before
    rc, out, _ = _main(["lut", "merge", str(a), str(a), str(b)], capsys)  # merge into a
    assert rc == 0 and "3 entries merged from 2 tables" in out and set(load(b).entries) <= set(load(a).entries)
    rc, _, _ = _main(["lut", "merge", "--overwrite", str(a), str(b)], capsys)
    assert rc == 0 and set(load(a).entries) == set(load(b).entries)


def test_cli_lut_diff(capsys, two_tables):
    a, b = two_tables
    rc, out, _ = _main(["lut", "diff", str(a), str(b)], capsys)
    assert rc == 1 and "delta -0.001 ms (-5.0%)" in out and out.strip().endswith("1 added, 1 removed, 1 changed")
    rc, out, _ = _main(["lut", "diff", str(a), str(a)], capsys)
    assert rc == 0 and out.strip() == "no differences in entries"
    rc, _, err = _main(["lut", "diff", str(a), str(Path(a).with_name("nope.json"))], capsys)
    assert rc == 2 and "cannot read" in err


# ------------------------------------------------------------------ Inductor export
MIXED = LookupTable(prov(), {
    P1.key: [tc(TILE, 0.02), tc("aten", 0.025)],
    P2.key: [tc("splitk:BM32-BN32-BK128-S4-W4-G8-SK64-atomic", 0.003), tc("decompose_k:s14", 0.004)],
    P(33, 65, 4095).key: [tc("pad+triton_mm:BM64-BN64-BK64-S3-W4-G8", 0.03)],
    P(64, 64, 64, "bf16", "fp32").key: [tc("aten")],
    P(64, 64, 64, "fp32", allow_tf32=True).key: [tc("aten")],
    P(64, 64, 64, layout_a="strided").key: [tc("aten")],
    P(64, 64, 80).key: [tc("triton_mm:BM32-BN32-BK32-S2-W4-G8")],
})


# The rest of the option set Inductor's mm heuristics build: torch 2.11 renders the
# template with the lookup config alone and needs them.
FULL_OPTS = {"USE_FAST_ACCUM": False, "ACC_TYPE": "tl.float32"}


def test_convert_expresses_what_it_can_and_says_why_not():
    r = ie.convert(MIXED)
    k1 = "((torch.bfloat16, [512, 4096], [4096, 1]), (torch.bfloat16, [4096, 512], [512, 1]))+mm"
    k2 = "((torch.bfloat16, [32, 28672], [28672, 1]), (torch.bfloat16, [28672, 32], [32, 1]))+mm"
    k3 = "((torch.bfloat16, [64, 80], [80, 1]), (torch.bfloat16, [80, 64], [64, 1]))+mm"
    assert r.table == {
        k1: [{"template_id": "triton::mm", "BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 128, "GROUP_M": 4,
              "num_stages": 2, "num_warps": 4, "EVEN_K": True, **FULL_OPTS}, {"template_id": "aten::mm"}],
        k2: [{"template_id": "decompose_k", "k_split": 14}],
        k3: [{"template_id": "triton::mm", "BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 8,
              "num_stages": 2, "num_warps": 4, "EVEN_K": False, **FULL_OPTS}],  # 80 % 32: masked K loop
    }
    reasons = {(s.key, s.choice): s.reason for s in r.skipped}
    assert "no fused split-K" in reasons[(P2.key, "splitk:BM32-BN32-BK128-S4-W4-G8-SK64-atomic")]
    assert "pads operands on its own" in reasons[(P(33, 65, 4095).key, "pad+triton_mm:BM64-BN64-BK64-S3-W4-G8")]
    assert "entry left out" in reasons[(P(33, 65, 4095).key, None)]
    assert "out_dtype" in reasons[(P(64, 64, 64, "bf16", "fp32").key, None)]
    assert "tf32" in reasons[(P(64, 64, 64, "fp32", allow_tf32=True).key, None)]
    assert "strided" in reasons[(P(64, 64, 64, layout_a="strided").key, None)]
    offset = Problem(64, 64, 64, "bfloat16", aligned_a=False)
    assert "offset data pointer" in ie.convert(LookupTable(prov(), {offset.key: [tc("aten")]})).skipped[0].reason
    assert ie.to_inductor(MIXED) == r.table
    assert list(ie.to_inductor(MIXED, device_key="NVIDIA H100")) == [f"NVIDIA H100+{k}" for k in sorted(r.table)]
    no_aten = ie.convert(MIXED, include_aten=False).table[k1]
    assert [c["template_id"] for c in no_aten] == ["triton::mm"]


def test_convert_notes_templates_inductor_would_not_offer():
    t = LookupTable(prov(), {P(512, 512, 4096).key: [tc("decompose_k:s8")],
                             P(32, 32, 28672).key: [tc("triton_mm:BM32-BN32-BK128-S3-W4-G8")]})
    notes = ie.convert(t).notes
    assert any("decompose_k is offered only when K >= 32 x max(M, N)" in n for n in notes)
    assert any("triton::mm is not offered when K >= 64 x max(M, N)" in n for n in notes)


@NEEDS_INDUCTOR_LUT
def test_export_names_inductors_templates_and_parameters():
    """Our template ids and parameter names are those of the installed torch's templates."""
    from torch._inductor.kernel.mm import aten_mm, decompose_k_subgraph_template, mm_template

    assert (mm_template.uid, decompose_k_subgraph_template.uid, aten_mm.uid) == (ie.TRITON_MM, ie.DECOMPOSE_K,
                                                                                  ie.ATEN_MM)
    assert "k_split" in inspect.signature(decompose_k_subgraph_template.generate).parameters
    src = Path(torch._inductor.__file__).parent / "kernel" / "templates" / "triton_mm.py.jinja"
    if src.exists():
        text = src.read_text()
        for name in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "EVEN_K"):
            assert re.search(rf"\b{name}\b", text), name


@NEEDS_INDUCTOR_LUT
def test_export_through_inductors_own_lookup_on_cpu(tmp_path):
    """Compile two mms on the CPU with our exported table installed: Inductor asks for
    exactly our keys, its own parser returns exactly our configs, and the aten::mm
    entry is a lookup hit that computes the right product."""
    from torch._inductor import config as icfg

    row, col = P(64, 96, 128), P(64, 96, 128, layout_b="col")
    t = LookupTable(prov(INTERP), {row.key: [tc("triton_mm:BM32-BN32-BK64-S2-W4-G4"), tc("decompose_k:s2"),
                                             tc("aten")], col.key: [tc("aten")]})
    path = tmp_path / "inductor.json"
    exported = ie.export(t.save(tmp_path / "t.json"), path)
    assert ie.read_inductor_table(path) == exported.table == json.loads(path.read_text())
    seen = {"keys": [], "lookups": []}

    # The CPU offers only aten::mm: ask Inductor's parser for every template we export.
    lookup = cpu_lookup_choices(seen, [ie.TRITON_MM, ie.DECOMPOSE_K, ie.ATEN_MM])

    a = torch.randn(64, 128, dtype=torch.bfloat16)
    b = torch.randn(128, 96, dtype=torch.bfloat16)
    w = torch.randn(96, 128, dtype=torch.bfloat16)
    old_caches = icfg.force_disable_caches
    try:
        installed = ie.install(path, choices=lookup)
        assert installed == exported.table and icfg.lookup_table.table == exported.table
        icfg.force_disable_caches = True
        torch._dynamo.reset()
        o1, o2 = torch.compile(lambda x, y, z: (x @ y, x @ z.t()))(a, b, w)
    finally:
        ie.uninstall()
        icfg.force_disable_caches = old_caches
        torch._dynamo.reset()
    k_row, k_col = ie.inductor_key(row), ie.inductor_key(col)
    assert k_row in seen["keys"] and k_col in seen["keys"]
    strip = [{k: v for k, v in c.items() if k != "template_id"} for c in exported.table[k_row]]
    assert {"triton::mm": [strip[0]], "decompose_k": [strip[1]], "aten::mm": [strip[2]]} in seen["lookups"]
    assert {"aten::mm": [{}]} in seen["lookups"]
    torch.testing.assert_close(o1, a @ b)
    torch.testing.assert_close(o2, a @ w.t())


def test_export_without_inductor_lookup_table_raises(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch._inductor.lookup_table", None)  # as in a torch without it
    reason = ie.unavailable_reason()
    assert reason and "has no torch._inductor.lookup_table" in reason
    with pytest.raises(RuntimeError, match="cannot export for torch.compile: .*has no torch._inductor.lookup_table"):
        ie.export(MIXED, tmp_path / "i.json")
    assert not (tmp_path / "i.json").exists()
    with pytest.raises(RuntimeError, match="cannot install"):
        ie.install(MIXED)
    ie.export(MIXED, tmp_path / "i.json", force=True)   # for another machine's torch
    assert json.loads((tmp_path / "i.json").read_text()) == ie.to_inductor(MIXED)
    src = MIXED.save(tmp_path / "t.json")
    rc, _, err = _main(["lut", "export-inductor", str(src), str(tmp_path / "j.json")], capsys)
    assert rc == 2 and "has no torch._inductor.lookup_table" in err and len(err.splitlines()) == 1


@NEEDS_INDUCTOR_LUT
def test_cli_lut_export_inductor(tmp_path, capsys):
    src = MIXED.save(tmp_path / "t.json")
    rc, out, _ = _main(["lut", "export-inductor", str(src), str(tmp_path / "i.json")], capsys)
    assert rc == 0 and "3 Inductor entries" in out and "skipped " in out
    assert json.loads((tmp_path / "i.json").read_text()) == ie.to_inductor(MIXED)
    only_splitk = LookupTable(prov(), {P2.key: [tc("splitk:BM32-BN32-BK128-S4-W4-G8-SK64-atomic")]})
    rc, out, _ = _main(["lut", "export-inductor", str(only_splitk.save(tmp_path / "s.json")),
                        str(tmp_path / "e.json")], capsys)
    assert rc == 1 and "0 Inductor entries" in out


def test_export_persistent_tma_as_inductors_persistent_template():
    """persistent_tma maps to Inductor's mm_persistent_tma template with the layouts and the
    table GPU's SM count; warp specialisation / flattening has no Inductor knob and is skipped."""
    plain = "persistent_tma:BM128-BN256-BK64-S3-W8-G8"
    pc = P(4096, 4096, 4096, layout_b="col")
    t = LookupTable(prov(), {pc.key: [tc(plain, 0.1), tc(plain + "-WS", 0.11)]})
    r = ie.convert(t)
    (cfgs,) = r.table.values()
    assert cfgs == [{"template_id": "triton::mm_persistent_tma", "BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64,
                     "GROUP_M": 8, "num_stages": 3, "num_warps": 8, "EVEN_K": True, **FULL_OPTS,
                     "A_ROW_MAJOR": True, "B_ROW_MAJOR": False, "NUM_SMS": 132, "TMA_SIZE": 128,
                     "TMA_EXPERIMENTAL_API": False}]
    assert any("none of these knobs" in s.reason for s in r.skipped)
    assert any("enable_persistent_tma_matmul" in n for n in r.notes)
    unknown = LookupTable({**prov(), "device_name": "Some GPU"}, {pc.key: [tc(plain)]})
    assert "SM count" in ie.convert(unknown).skipped[0].reason


@NEEDS_INDUCTOR_LUT
def test_export_persistent_names_match_inductors_template():
    from torch._inductor.kernel.mm import persistent_tma_mm_template

    assert persistent_tma_mm_template.uid == ie.PERSISTENT_TMA
    src = Path(torch._inductor.__file__).parent / "kernel" / "templates" / "triton_persistent_tma_mm.py.jinja"
    if src.exists():
        text = src.read_text()
        for name in ("A_ROW_MAJOR", "B_ROW_MAJOR", "NUM_SMS", "TMA_SIZE", "TMA_EXPERIMENTAL_API", "GROUP_M"):
            assert re.search(rf"\b{name}\b", text), name
