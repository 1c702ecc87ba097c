"""gemmtune.provenance: one Provenance and one set of rules for tables, dispatchers and models."""

from __future__ import annotations

import dataclasses

import pytest

from gemmtune import table
from gemmtune.provenance import DISPATCH, MODEL, TABLE, Policy, Provenance, major_minor

H100 = "NVIDIA H100 80GB HBM3"
H200 = "NVIDIA H200"
BASE = Provenance(H200, "9.0", "2.11.0+cu130", "3.6.0", "0.1.0", "2026-11-23T00:00:00Z", "tuned")


def test_frozen_and_round_trips_through_a_dict():
    with pytest.raises(dataclasses.FrozenInstanceError):
        BASE.triton = "3.7.0"  # type: ignore[misc]
    assert Provenance.from_dict(BASE.to_dict()) == BASE
    assert tuple(BASE.to_dict()) == table.PROVENANCE_FIELDS  # the table format's fields, in order
    assert Provenance.from_dict({"device_name": H200, "triton": 3}) == Provenance(H200, triton="3")


def test_major_minor_moved_but_still_importable_from_table():
    assert table.major_minor is major_minor
    assert major_minor("2.11.0+cu130") == (2, 11) and major_minor(" 3.6.1 ") == (3, 6)
    assert major_minor("nightly") is None and major_minor("") is None


@pytest.mark.parametrize("policy", [TABLE, DISPATCH, MODEL])
def test_patch_releases_match(policy):
    assert BASE.mismatches(dataclasses.replace(BASE, torch="2.11.1", triton="3.6.2", created="x"), policy) == []


def test_each_policy_checks_what_its_user_checked():
    other = Provenance(H100, "9.0", "2.10.0", "3.5.0")
    assert BASE.mismatches(other, TABLE) == ["device", "triton"]
    assert BASE.mismatches(other, DISPATCH) == ["device", "triton", "torch"]
    assert BASE.mismatches(other, MODEL) == ["device", "triton"]
    # The dispatcher also compares capabilities; the table, by name only.
    cap = dataclasses.replace(BASE, capability="9.1")
    assert BASE.mismatches(cap, DISPATCH) == ["device"] and BASE.mismatches(cap, TABLE) == []
    # Names compare without case and surrounding spaces; aliases only for models.
    assert BASE.mismatches(dataclasses.replace(BASE, device_name=" nvidia h200 "), TABLE) == []
    short = dataclasses.replace(BASE, device_name="h200")
    assert BASE.mismatches(short, MODEL) == [] and BASE.mismatches(short, TABLE) == ["device"]


def test_unparseable_versions():
    odd = dataclasses.replace(BASE, triton="nightly")
    assert BASE.mismatches(odd, TABLE) == ["triton"] and BASE.mismatches(odd, DISPATCH) == ["triton"]
    # Two unparseable versions: a table trusts neither; a dispatcher sees no difference.
    assert odd.mismatches(odd, TABLE) == ["triton"] and odd.mismatches(odd, DISPATCH) == []


def test_cpu_and_interpreter_are_one_device():
    interp = Provenance("cpu (Triton interpreter)", "interp", "2.13.0", "3.6.0")
    plain = Provenance("cpu", "cpu", "2.13.0", "3.6.0")
    for policy in (TABLE, DISPATCH, MODEL, Policy(capability=True, aliases=True)):
        assert interp.mismatches(plain, policy) == [] and plain.mismatches(interp, policy) == []
        assert interp.mismatches(dataclasses.replace(BASE, torch="2.13.0"), policy)[:1] == ["device"]


def test_current_is_this_machine():
    cur = Provenance.current("by-hand")
    assert cur.produced_by == "by-hand" and cur.created and major_minor(cur.torch) and major_minor(cur.triton)
    assert cur.mismatches(Provenance.current(), DISPATCH) == []


def test_the_dispatcher_and_the_table_word_the_same_mismatches():
    from gemmtune.dispatch import provenance_mismatches

    saved = dataclasses.replace(BASE, device_name=H100, torch="2.10.0").to_dict()
    msgs = provenance_mismatches(saved, BASE.to_dict())
    assert len(msgs) == 2 and H100 in msgs[0] and "torch 2.10.0" in msgs[1]
    t = table.LookupTable(saved, {})
    with pytest.warns(table.TableWarning):
        assert len(table.check_provenance(t, H200, "3.6.1")) == 1
    assert not t.trusted
