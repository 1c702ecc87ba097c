"""The README's complete CPU examples run as written.

A ```python block that starts with ``import torch`` and names no CUDA device is a whole program a
new user can paste on a CPU machine: each one runs here, in a scratch directory, and what it
prints matches the values its comments promise (`# <value>` after a print)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def cpu_examples() -> list[tuple[int, str]]:
    text = README.read_text()
    blocks = [(text[:m.start()].count("\n") + 2, m.group(1))
              for m in re.finditer(r"```python\n(.*?)```", text, re.S)]
    return [(line, code) for line, code in blocks if code.startswith("import torch") and "cuda" not in code]


def test_there_are_cpu_examples():
    assert len(cpu_examples()) >= 2


@pytest.mark.parametrize("line,code", cpu_examples(), ids=lambda v: f"line{v}" if isinstance(v, int) else "")
def test_cpu_example_runs(line, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"README.md:{line}", "exec"), {"__name__": "__readme__"})
    printed = out.getvalue().splitlines()
    prints = [ln for ln in code.splitlines() if ln.startswith("print(")]
    assert len(printed) == len(prints), f"README.md:{line}: one line per print() expected"
    for stmt, got in zip(prints, printed):
        m = re.search(r"\)\s*#\s*(.+?)\s*$", stmt)
        if m is None:
            continue
        want = m.group(1)  # the value, or the value then ': why'
        assert got == want or want.startswith(got + ":"), f"README.md:{line}: printed {got!r}, promised {want!r}"


def test_bash_examples_that_take_hours_on_a_cpu_say_gpu():
    """A README command that tunes a whole bundled suite (public, bmm) takes hours in the CPU
    interpreter: `gemmtune tune --preset bmm` was listed with no GPU mark between two marked lines,
    and printed its first progress line after 44 s on 2 cores. Each such line says GPU, in its own
    comment or in a '# GPU only' heading above it in its block. The mark is `# GPU`, or GPU before
    ':', ';', ')' or the line's end: `tune --preset public --cluster local:2` passed only through
    its comment's "worker i on GPU i"."""
    text = README.read_text()
    for m in re.finditer(r"```bash\n(.*?)```", text, re.S):
        gpu_heading = False
        for line in m.group(1).splitlines():
            if line.startswith("#"):
                gpu_heading = gpu_heading or "GPU only" in line
                if "any machine" in line:
                    gpu_heading = False
                continue
            if re.search(r"gemmtune (tune|bench)\b.*--preset (public|bmm)\b", line):
                assert gpu_heading or re.search(r"#\s*GPU\b|\bGPU(?=[:;)]|\s*$)", line), line


def readme_commands() -> list[str]:
    """Every `gemmtune ...` command in the README's ```bash blocks, GPU ones included: a line
    continued with a backslash joined, each `&&` / `;` part on its own, comments cut off."""
    text = README.read_text()
    cmds = []
    for m in re.finditer(r"```bash\n(.*?)```", text, re.S):
        for line in m.group(1).replace("\\\n", " ").splitlines():
            if line.lstrip().startswith("#"):
                continue
            for part in re.split(r"&&|;", line.split(" #")[0]):
                hit = re.search(r"(?:^|\s|bin/)gemmtune\s+(.*)$", part.strip().rstrip("&").strip())
                if hit:
                    cmds.append(hit.group(1))
    return cmds


def test_every_readme_command_parses():
    """A README command with a flag its subcommand does not take (renamed, or a typo) fails on
    every machine with 'unrecognized arguments', GPU or not, and no run of the CPU examples
    catches the GPU-only ones. Parsing needs no GPU: each command line goes through the CLI's
    own parser."""
    import shlex

    from gemmtune import cli

    cmds = readme_commands()
    assert len(cmds) > 50
    for cmd in cmds:
        argv = shlex.split(cmd)
        try:
            cli.build_parser().parse_args(argv)
        except SystemExit as e:
            assert e.code == 0 and argv == ["--version"], f"README: `gemmtune {cmd}` does not parse"


def test_every_help_example_parses():
    """The example command lines in the subcommands' --help texts (collect's epilog) parse with
    the CLI's own parser, as the README's do: a renamed flag left in a help text fails users who
    copy it."""
    import argparse
    import shlex

    from gemmtune import cli

    parser = cli.build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    cmds = []
    for sp in subs.choices.values():
        for line in ((sp.description or "") + "\n" + (sp.epilog or "")).splitlines():
            hit = re.search(r"(?:^|\s)gemmtune\s+([a-z][-a-z]*\s.*|[a-z][-a-z]*)$", line.split(" #")[0].strip())
            if hit:
                cmds.append(hit.group(1))
    assert cmds, "no examples found in the help texts"
    for cmd in cmds:
        argv = []
        for tok in shlex.split(cmd):  # "..." elides a value after an option, else the rest of the line
            if tok == "...":
                if argv and argv[-1].startswith("--"):
                    argv.append("X")
                continue
            argv.append(tok)
        try:
            cli.build_parser().parse_args(argv)
        except SystemExit:
            pytest.fail(f"--help example `gemmtune {cmd}` does not parse")


def _slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"[`*_]|\[|\]\([^)]*\)", "", heading.strip().lower())
    return re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", text))


def test_relative_links_resolve():
    """Every relative link in the README, `[text](path)` or `[text](path#anchor)`, names a file or
    folder of the repository, and its anchor a heading of that file (or of the README for a bare
    `#anchor`): a results folder renamed or a heading reworded leaves a link that 404s on GitHub."""
    root = README.parent
    text = README.read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", re.sub(r"```.*?```", "", text, flags=re.S))
    local = [t for t in links if not re.match(r"[a-z]+:", t)]
    assert len(local) > 20
    for target in local:
        path, _, anchor = target.partition("#")
        dest = root / path if path else README
        assert dest.exists(), f"README links to {target}: no such file"
        if anchor:
            headings = re.findall(r"^#+\s+(.*)$", dest.read_text(), re.M)
            assert anchor in {_slug(h) for h in headings}, f"README links to {target}: no such heading"


def _parsers():
    import argparse

    from gemmtune import cli

    parser = cli.build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))

    def options(p) -> set[str]:
        found = {o for a in p._actions for o in a.option_strings}
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):  # lut's own subcommands
                for child in a.choices.values():
                    found |= options(child)
        return found

    return {name: options(p) for name, p in subs.choices.items()}


def test_inline_commands_take_their_flags():
    """The README's prose names options in inline code: `gemmtune tune --min-gain 0.02`,
    `space --kind`, `bench-model --in-process-tuning`. The ```bash test above parses only whole
    command lines in blocks; these are fragments (`--op addmm --shape …`), so each `--flag` is
    checked against its subcommand's parser, and a bare `--flag` against every subcommand's and
    the options the repository's scripts declare (`--max-size` of scripts/fuzz_patch.py)."""
    per_command = _parsers()
    anywhere = set().union(*per_command.values())
    root = README.parent
    for script in (root / "scripts").rglob("*.py"):
        anywhere |= set(re.findall(r"add_argument\(\s*\"(--[a-z][-a-z0-9]*)\"", script.read_text()))
    prose = re.sub(r"```.*?```", "", README.read_text(), flags=re.S)
    commands = "|".join(sorted(per_command, key=len, reverse=True))
    checked = 0
    for span in re.findall(r"`([^`\n]+)`", prose):
        if "pytest" in span:
            continue
        flags = re.findall(r"(?<![\w-])(--[a-z][-a-z0-9]*)", span)
        hit = re.match(rf"(?:(?:\.venv/bin/)?gemmtune\s+)?({commands})(?=\s|$)", span)
        for flag in flags:
            checked += 1
            if hit:
                assert flag in per_command[hit.group(1)], f"README: `{span}`: {hit.group(1)} takes no {flag}"
            else:
                assert flag in anywhere, f"README: `{span}`: no command or script takes {flag}"
    assert checked > 50


FAMILIES = "triton_mm|triton_static|splitk|skinny|persistent_tma|decompose_k|aten"


def test_choice_ids_parse():
    """Every choice id the README spells out (`splitk:BM32-…-SK128-atomic`, `decompose_k:s16`)
    parses: a config's id format that changes leaves examples that raise on every machine."""
    from gemmtune.configs import Choice

    ids = set(re.findall(rf"(?<![\w+])((?:pad\+)?(?:{FAMILIES}):[A-Za-z0-9][A-Za-z0-9-]*)", README.read_text()))
    assert len(ids) >= 5
    for choice in sorted(ids):
        assert str(Choice.parse(choice)) == choice, choice


def test_python_blocks_import_the_modules_they_use():
    """A ```python block that no test runs (it needs a GPU, a model or a file of yours) still
    compiles, and imports the modules it calls (torch, gemmtune, transformers): pasted into a
    fresh interpreter on a GPU it otherwise stops at a NameError before the first GEMM. Names
    the text around a block supplies (`model`, the `a`, `b` of the first example) are its
    reader's; the modules are not."""
    import ast

    text = README.read_text()
    blocks = [(text[:m.start()].count("\n") + 2, m.group(1))
              for m in re.finditer(r"```python\n(.*?)```", text, re.S)]
    assert len(blocks) >= 10
    wrong = []
    for line, code in blocks:
        tree = ast.parse(code, f"README.md:{line}")
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                imported |= {(a.asname or a.name).split(".")[0] for a in node.names}
        used = {n.value.id for n in ast.walk(tree)
                if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}
        missing = sorted(used & {"torch", "gemmtune", "transformers"} - imported)
        if missing:
            wrong.append(f"README.md:{line} uses {', '.join(missing)} without importing it")
    assert not wrong, "; ".join(wrong)
