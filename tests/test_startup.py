"""Start-up: printing the version or a rule's docs, and checking a file with nothing to analyse,
never import LibCST; nor does a check of .py files import the notebook support or pathspec until a
notebook or a pattern needs them (each run in a fresh interpreter)."""

import subprocess
import sys

import pytest

PROBE = "import sys\nfrom steplint.cli import main\ntry:\n    main({args!r})\nexcept SystemExit as e:\n    print('exit', e.code, {module!r} in sys.modules)\n"


def loads_libcst(args, cwd):
    return loads("libcst", args, cwd)


def loads(module, args, cwd):
    """(exit code, whether `module` was imported) of `steplint ARGS` in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", PROBE.format(args=args, module=module)], capture_output=True, text=True, cwd=cwd)
    exit_line = done.stdout.strip().splitlines()[-1].split()
    assert exit_line[0] == "exit", done.stdout + done.stderr
    return exit_line[1], exit_line[2] == "True"


@pytest.mark.parametrize("args", [["--version"], ["rule", "SL101"], ["rule", "--all"]])
def test_commands_without_analysis_do_not_import_libcst(args, tmp_path):
    assert loads_libcst(args, tmp_path) == ("0", False)


def test_a_file_without_candidate_text_is_checked_without_libcst(tmp_path):
    (tmp_path / "plain.py").write_text("import math\n\n\ndef area(r):\n    return math.pi * r * r\n")
    assert loads_libcst(["check", "plain.py", "--no-cache"], tmp_path) == ("0", False)


def test_a_file_with_candidate_text_is_analysed(tmp_path):
    (tmp_path / "train.py").write_text("def train(opt):\n    opt.step()\n")
    assert loads_libcst(["check", "train.py", "--no-cache"], tmp_path) == ("0", True)


@pytest.mark.parametrize("module", ["steplint.notebook", "pathspec"])
def test_a_check_of_one_python_file_leaves_out_what_it_does_not_use(module, tmp_path):
    (tmp_path / "plain.py").write_text("import math\n")
    assert loads(module, ["check", "plain.py", "--no-cache"], tmp_path) == ("0", False)


def test_a_notebook_and_an_ignore_file_bring_them_in(tmp_path):
    (tmp_path / "a.ipynb").write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    (tmp_path / ".gitignore").write_text("build/\n")
    (tmp_path / ".git").mkdir()
    assert loads("steplint.notebook", ["check", "--no-cache", "."], tmp_path) == ("0", True)
    assert loads("pathspec", ["check", "--no-cache", "."], tmp_path) == ("0", True)


def test_the_registry_read_from_the_declarations_is_what_the_rule_modules_declare():
    import importlib

    from steplint.rule import Rule, all_rules

    registry = all_rules()
    for found in registry.values():
        declared = [r for r in vars(importlib.import_module(found.module)).values() if isinstance(r, Rule) and r.code == found.code]
        assert [(r.code, r.name, r.summary, r.fix, r.doc) for r in declared] == [(found.code, found.name, found.summary, found.fix, found.doc)]
    assert len(registry) == len({r.module for r in registry.values()})  # (one rule per module)
