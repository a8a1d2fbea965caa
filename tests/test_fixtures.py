"""Tests generated from fixtures/: each file reports exactly its `# expect:` markers, and each
`*.fixed.py` golden file is what `--fix --unsafe-fixes` makes of its input. Notebooks
(`*.ipynb`, golden `*.fixed.ipynb`) carry their markers in code cells, located as (cell, row). A folder of fixtures
(`fixtures/SL303/split_resume/`) is one project: its files are linted with its project index."""

import re
from functools import lru_cache
from pathlib import Path

import pytest

from steplint import notebook
from steplint.config import Settings
from steplint.engine import fix_source, lint_source
from steplint.fixes import reparses
from steplint.project.build import build_index
from steplint.rule import all_rules

from conftest import FIXTURES

_MARKER = re.compile(r"#\s*expect:\s*(SL\d{3}(?:\s*,\s*SL\d{3})*)")

# (a project fixture is one folder, which may hold packages: `SL101/<project>/lib/lr_scheduler.py`)
INPUTS = sorted(p for p in FIXTURES.glob("SL*/**/*.py") if not p.name.endswith(".fixed.py"))
GOLDEN = [p for p in INPUTS if p.with_name(p.stem + ".fixed.py").exists()]
NOTEBOOKS = sorted(p for p in FIXTURES.glob("SL*/*.ipynb") if not p.name.endswith(".fixed.ipynb"))
GOLDEN_NOTEBOOKS = [p for p in NOTEBOOKS if p.with_name(p.stem + ".fixed.ipynb").exists()]


def _id(path: Path) -> str:
    return str(path.relative_to(FIXTURES))


def _code(path: Path) -> str:
    return path.relative_to(FIXTURES).parts[0]


@lru_cache(maxsize=None)
def _project(folder: Path):
    files = sorted(p for p in folder.rglob("*.py") if not p.name.endswith(".fixed.py"))
    return build_index([str(p) for p in files], str(folder), cache=False)


def project(path: Path):
    """The project context of a fixture in a folder; None for a single-file fixture."""
    if path.parent.parent == FIXTURES:
        return None
    folder = FIXTURES / path.relative_to(FIXTURES).parts[0] / path.relative_to(FIXTURES).parts[1]
    return _project(folder).context_for(str(path))


def expected(text: str) -> set:
    found = set()
    for row, line in enumerate(text.splitlines(), start=1):
        match = _MARKER.search(line)
        if match:
            found |= {(row, code.strip()) for code in match.group(1).split(",")}
    return found


@pytest.mark.parametrize("path", INPUTS, ids=_id)
def test_reports_exactly_the_markers(path):
    text = path.read_text()
    reported = {(d.row, d.code) for d in lint_source(str(path), text, Settings(), project(path))}
    assert reported == expected(text)


@pytest.mark.parametrize("path", GOLDEN, ids=_id)
def test_fix_matches_golden_file(path):
    result = fix_source(str(path), path.read_text(), Settings(), unsafe_fixes=True, project=project(path))
    golden = path.with_name(path.stem + ".fixed.py").read_text()
    assert result.text == golden
    assert reparses(result.text)
    assert not [d for d in result.remaining if d.fix is not None and d.fix.applies(True)]  # a fixpoint


@pytest.mark.parametrize("path", GOLDEN, ids=_id)
def test_second_fix_changes_nothing(path):
    golden = path.with_name(path.stem + ".fixed.py").read_text()
    again = fix_source(str(path), golden, Settings(), unsafe_fixes=True, project=project(path))
    assert again.text == golden
    assert again.fixed == []


@pytest.mark.parametrize("path", GOLDEN, ids=_id)
def test_fix_keeps_crlf_line_endings(path):
    crlf = path.read_text().replace("\n", "\r\n")
    golden = path.with_name(path.stem + ".fixed.py").read_text().replace("\n", "\r\n")
    assert fix_source(str(path), crlf, Settings(), unsafe_fixes=True, project=project(path)).text == golden


def _cell_markers(book: notebook.Notebook) -> set:
    return {(cell.number, row, code) for cell in book.cells for row, code in expected(cell.original)}


def _fixed_notebook(path: Path, text: str):
    book = notebook.parse(text)
    result = fix_source(str(path), book.source, Settings(), unsafe_fixes=True)
    return book, result, notebook.rewrite(book, result.text) if result.text != book.source else text


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_id)
def test_notebook_reports_exactly_the_markers(path):
    book = notebook.parse(path.read_text(encoding="utf-8"))
    found = notebook.located(book.source, lint_source(str(path), book.source, Settings()))
    assert {(d.cell, d.row, d.code) for d in found} == _cell_markers(book)
    assert _cell_markers(book)


@pytest.mark.parametrize("path", GOLDEN_NOTEBOOKS, ids=_id)
def test_notebook_fix_matches_golden_file(path):
    _, result, written = _fixed_notebook(path, path.read_text(encoding="utf-8"))
    assert written == path.with_name(path.stem + ".fixed.ipynb").read_text(encoding="utf-8")
    assert not [d for d in result.remaining if d.code in ("SL101", "SL102", "SL103", "SL104")]


@pytest.mark.parametrize("path", GOLDEN_NOTEBOOKS, ids=_id)
def test_notebook_second_fix_changes_nothing_and_cells_compile(path):
    golden = path.with_name(path.stem + ".fixed.ipynb").read_text(encoding="utf-8")
    book, result, written = _fixed_notebook(path, golden)
    assert written == golden and result.fixed == []
    for cell in book.cells:  # each code cell, escapes masked, is Python on its own
        compile(cell.text, f"{path.name}:cell {cell.number}", "exec")


def test_every_rule_has_positive_and_negative_fixtures():
    for code, rule in all_rules().items():
        if rule.check is None:
            continue
        files = [p for p in INPUTS if _code(p) == code]
        marked = [p for p in files if any(c == code for _, c in expected(p.read_text()))]
        silent = [p for p in files if not expected(p.read_text())]
        assert marked, f"{code} has no fixture with a `# expect: {code}` marker"
        assert silent, f"{code} has no negative fixture"
