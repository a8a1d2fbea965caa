"""A run summarises only the modules connected by imports to the modules it lints, and that changes
nothing a lint sees: the import reading errs towards more names than LibCST's, and the contexts from
the connected modules equal those from every module of the project."""

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from steplint.engine import needs_analysis
from steplint.model.syntax import ImportMap
from steplint.project.build import build_index
from steplint.project.reach import _imported

ROOT = Path(__file__).resolve().parent.parent
TORCH = Path(importlib.util.find_spec("torch").origin).parent
FIXTURE_PROJECTS = sorted(p for p in (ROOT / "fixtures").glob("*/*") if p.is_dir())


def _python_files():
    yield from sorted((ROOT / "steplint").rglob("*.py"))
    yield from sorted((ROOT / "fixtures").rglob("*.py"))
    for folder in ("optim", "nn/modules", "nn/parallel", "distributed/fsdp", "utils/data"):
        yield from sorted((TORCH / folder).glob("*.py"))


def test_every_import_libcst_sees_is_read():
    """Over steplint's own code, the fixtures and a part of torch: no name LibCST's ImportMap reads
    is missing from what the pattern reads."""
    missed = {}
    for path in _python_files():
        text = path.read_text(encoding="utf-8")
        try:
            imports = ImportMap(cst.parse_module(text))
        except cst.ParserSyntaxError:
            continue
        left = (set(imports.names.values()) | set(imports.star_modules)) - set(_imported(text))
        if left:
            missed[str(path)] = sorted(left)
    assert missed == {}


def test_tricky_import_statements():
    text = textwrap.dedent('''\
        import a.b as c, d  # import e
        from .pkg import (f as g,
            h,  # i
        )
        x = 1; import j.k
        from l \\
            import m
        from ..n import *
        if x: from o import p
        reimport_q = 2
        ''')
    assert set(_imported(text)) >= {"a.b", "d", ".pkg.f", ".pkg.h", "j.k", "l.m", "..n", "o.p"}
    assert not {"c", "g", "i", "reimport_q", ".pkg"} & set(_imported(text))


def _write(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


CONNECTED_AND_NOT = {
    "pkg/__init__.py": "from .steps import amp_step\n",
    "pkg/steps.py": '''
        def amp_step(scaler, optimizer, loss):
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        ''',
    "train.py": '''
        import torch
        from pkg import amp_step

        def main(model, loader):
            optimizer = torch.optim.AdamW(model.parameters())
            scaler = torch.amp.GradScaler("cuda")
            scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 10)
            for batch in loader:
                amp_step(scaler, optimizer, model(batch).mean())
                scheduler.step()
        ''',
    # Not imported by, and not importing, anything above: its calls of its own `amp_step` resolve
    # into itself, and nothing it says reaches train.py.
    "tools/bench.py": '''
        import torch

        def amp_step(scaler, optimizer, loss):
            optimizer.step()

        def run(model, optimizer):
            scaler = object()
            amp_step(scaler, optimizer, model(1))
            torch.save({"model": model.state_dict()}, "x.pt")
        ''',
}


def _contexts(root: Path, analysed):
    files = sorted(str(p) for p in root.rglob("*.py"))
    built = build_index(files, str(root), cache=False, analysed=[str(root / a) for a in analysed])
    return {str(p.relative_to(root)): built.context_for(str(p)) for p in map(Path, files)}, built


@pytest.mark.parametrize("project", FIXTURE_PROJECTS + ["written"], ids=lambda p: p if isinstance(p, str) else f"{p.parent.name}/{p.name}")
def test_the_connected_modules_tell_each_lint_what_the_whole_project_tells(project, tmp_path):
    if project == "written":
        _write(tmp_path, CONNECTED_AND_NOT)
        project = tmp_path
    linted = [str(p.relative_to(project)) for p in sorted(project.rglob("*.py")) if needs_analysis(p.read_text())]
    everything, _ = _contexts(project, [])
    for name in linted:  # each file linted alone, as pre-commit and the editor do
        alone, _ = _contexts(project, [name])
        assert alone[name] == everything[name], name
    together, _ = _contexts(project, linted)
    assert {n: together[n] for n in linted} == {n: everything[n] for n in linted}


def test_a_single_file_run_summarises_its_component_only(tmp_path):
    _write(tmp_path, CONNECTED_AND_NOT)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    run = subprocess.run([sys.executable, "-m", "steplint", "check", "--output-format", "concise", "train.py"], cwd=tmp_path, capture_output=True, text=True)
    assert "train.py:11:9: SL101" in run.stdout, run.stdout + run.stderr
    summaries = json.loads((tmp_path / ".steplint_cache" / "project" / "summaries.json").read_text())
    assert sorted({entry["path"] for entry in summaries.values()}) == ["pkg/__init__.py", "pkg/steps.py", "train.py"]
