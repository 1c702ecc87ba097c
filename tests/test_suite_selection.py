"""Suite selection and suite CSVs that dropped or misread part of a user's input without a word
(session 45's CPU hunt; each test failed before): ``tune --groups`` with a space after a comma or
a group that matches nothing, a column header padded with spaces, and scaled_mm's columns on a
row of another op."""

from __future__ import annotations

import argparse
import warnings

import pytest

from gemmtune import cli
from gemmtune.shapes import load_csv


def _shape_args(**kw) -> argparse.Namespace:
    base = dict(shape=None, suite=None, preset="public", groups=None, limit=None, op="mm", scale=None,
                out_dtype=None, bias=None)
    return argparse.Namespace(**{**base, **kw})


def test_tune_groups_with_a_space_after_the_comma_keeps_both_groups_or_says_why():
    """``tune --groups "decode, splitk"`` tuned the decode shapes only: ' splitk' (with its space)
    matched no group and was dropped without a word (collect strips the names; family_list too)."""
    from gemmtune.cli.common import shapes_of

    try:
        groups = {s.group for s in shapes_of(_shape_args(groups="decode, splitk"))}
    except ValueError as e:  # refusing it, naming the group, would do too
        assert "splitk" in str(e)
        return
    assert groups == {"decode", "splitk"}


def test_tune_groups_naming_no_group_of_the_suite_is_an_error_before_tuning(monkeypatch, capsys):
    """``tune --preset public --groups decode,split_k`` (a typo) tuned the 7 decode shapes and never
    said that split_k matched nothing; ``bench`` and ``collect`` refuse an unknown group."""
    import sys

    tune_mod = sys.modules["gemmtune.tune"]  # the module (gemmtune.tune is also the function)

    def no_tuning(*a, **kw):
        raise AssertionError("tune ran: the unknown group was dropped silently")

    monkeypatch.setattr(tune_mod, "tune", no_tuning)
    rc = cli.main(["tune", "--preset", "public", "--groups", "decode,split_k", "--store", "/nonexistent/s.sqlite"])
    err = capsys.readouterr().err
    assert rc == 2 and "split_k" in err, err


# ------------------------------------------------------------------ suite CSVs
@pytest.mark.parametrize("header, value, attr, want", [
    ("group,name,M,N,K,dtype, layout_b", "col", "layout_b", "col"),  # a space after the comma
    ("group,name,M,N,K,dtype,layout_b ", "col", "layout_b", "col"),  # a space before it
    ("group,name,M,N,K,dtype,op ", "addmm", "op", "addmm"),
])
def test_a_suite_column_name_padded_with_spaces_is_read_or_refused(tmp_path, header, value, attr, want):
    """An optional column whose header has a space (' layout_b', 'op ') passed the unknown-column
    check (which strips names) but was then looked up unstripped: every row was tuned row-major /
    as a plain mm, with no warning (the required columns with a space are refused)."""
    f = tmp_path / "suite.csv"
    f.write_text(f"{header}\ng,a,16,16,16,fp16,{value}\n")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            [s] = load_csv(f)
        except ValueError:
            return  # refused: fine
    said = [str(x.message) for x in w if attr in str(x.message)]
    assert getattr(s.problem, attr) == want or said, (s.problem.key, [str(x.message) for x in w])


@pytest.mark.parametrize("column, value", [("out_dtype", "fp32"), ("bias", "1"), ("scale", "row")])
def test_scaled_mm_columns_on_a_plain_row_are_refused_not_ignored(tmp_path, column, value):
    """A suite row of an fp16 mm with out_dtype fp32 (or bias 1, scale row) loaded as a plain
    fp16->fp16 mm: the column is read for scaled_mm rows only and ignored elsewhere, silently
    (a batch on a non-bmm row is refused, naming the column)."""
    f = tmp_path / "suite.csv"
    f.write_text(f"group,name,M,N,K,dtype,{column}\ng,a,16,16,16,fp16,{value}\n")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            [s] = load_csv(f)
        except ValueError as e:
            assert column in str(e)
            return
    assert any(column in str(x.message) for x in w), (s.problem.key, "the column was ignored without a word")


def test_a_plain_row_may_state_the_default_of_scaled_mms_columns(tmp_path):
    """What the repository's own suites write on mm rows (empty fields), and the 'off' spellings,
    still load."""
    f = tmp_path / "suite.csv"
    f.write_text("group,name,M,N,K,dtype,op,scale,out_dtype,bias\n"
                 "g,a,16,16,16,fp16,mm,,,\ng,b,16,16,16,fp16,addmm,none,float16,false\n")
    a, b = load_csv(f)
    assert (a.problem.op, b.problem.op, b.problem.dtype) == ("mm", "addmm", "float16")
