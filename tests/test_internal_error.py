"""One file never aborts a run: an exception inside steplint becomes SL000 for that file.

No real input raises once a bug is fixed, so the crash is made by replacing one rule's check with
one that raises on one file; steplint itself runs in-process through its real command line.
"""

import dataclasses
import json

import pytest
from click.testing import CliRunner

from steplint.cli import main
from steplint.rule import all_rules

from conftest import FIXTURES

BUGGY = (FIXTURES / "SL101" / "plain_amp_script.py").read_text().replace("  # expect: SL101", "")


@pytest.fixture
def crashing_rule(monkeypatch):
    """SL101's check raises on files named crash.py and works as usual elsewhere."""
    rule = all_rules()["SL101"]
    original = rule.check

    def check(model):
        if model.source.path.endswith("crash.py"):
            raise KeyError("no role for 'scaler'")
        return original(model)

    monkeypatch.setitem(all_rules(), "SL101", dataclasses.replace(rule, function=check, module=None))


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "crash.py").write_text(BUGGY)
    (tmp_path / "train.py").write_text(BUGGY)
    return tmp_path


def run(*args):
    return CliRunner().invoke(main, ["check", *map(str, args)])


def test_internal_error_is_one_diagnostic_and_the_other_files_are_checked(crashing_rule, tree):
    done = run("--output-format", "json", tree)
    assert done.exit_code == 2
    reported = {(d["filename"].rsplit("/", 1)[-1], d["code"]) for d in json.loads(done.stdout)}
    assert reported == {("crash.py", "SL000"), ("train.py", "SL101")}
    [internal] = [d for d in json.loads(done.stdout) if d["code"] == "SL000"]
    assert internal["message"].startswith("Internal error, this file was not checked: KeyError: \"no role for 'scaler'\"")
    assert "please report it" in internal["message"]
    assert "Traceback" not in done.stdout + done.stderr
    assert "crash.py: internal error, reported as SL000 (`steplint check -v` prints the traceback)" in done.stderr


def test_verbose_prints_the_traceback(crashing_rule, tree):
    done = run("-v", tree / "crash.py")
    assert done.exit_code == 2
    assert "Traceback (most recent call last)" in done.stderr and "KeyError" in done.stderr


def test_exit_zero_makes_internal_errors_exit_0_with_the_report_complete(crashing_rule, tree):
    done = run("--exit-zero", "--output-format", "json", tree)
    assert done.exit_code == 0
    assert sorted(d["code"] for d in json.loads(done.stdout)) == ["SL000", "SL101"]


def test_fix_leaves_the_crashing_file_unmodified_and_fixes_the_others(crashing_rule, tree):
    done = run("--fix", tree)
    assert done.exit_code == 2
    assert (tree / "crash.py").read_text() == BUGGY
    assert "committed_step(scaler, optimizer)" in (tree / "train.py").read_text()


def test_internal_error_is_reported_whatever_the_selection(crashing_rule, tree):
    done = run("--select", "SL101", "--ignore", "SL000", "--output-format", "concise", tree / "crash.py")
    assert done.exit_code == 2
    assert "crash.py:1:1: SL000 Internal error" in done.stdout


def test_stdin_internal_error_returns_the_buffer_unchanged(crashing_rule):
    done = CliRunner().invoke(main, ["check", "--fix", "--stdin-filename", "crash.py", "-"], input=BUGGY)
    assert done.exit_code == 2
    assert done.stdout == BUGGY
    assert "SL000" in done.stderr


def test_the_ultralytics_shaped_checkpoint_no_longer_aborts_the_run(tmp_path):
    """`torch.save({**self.ckpt, **updates}, f)` raised AttributeError and lost every file's results."""
    (tmp_path / "a_saver.py").write_text((FIXTURES / "SL302" / "ok_spread_checkpoint.py").read_text())
    (tmp_path / "train.py").write_text(BUGGY)
    done = run("--exit-zero", "--output-format", "json", tmp_path)
    assert done.exit_code == 0
    assert [(d["filename"].rsplit("/", 1)[-1], d["code"]) for d in json.loads(done.stdout)] == [("train.py", "SL101")]


def test_rule_sl000_documents_the_exit_status():
    done = CliRunner().invoke(main, ["rule", "SL000"])
    assert done.exit_code == 0
    assert "# internal-error (SL000)" in done.stdout
    assert "exit with status 2" in done.stdout and "--exit-zero" in done.stdout


def test_a_crash_while_indexing_the_project_loses_only_that_module_s_summary(monkeypatch, tree):
    import steplint.project.summarize as summarize_module

    original = summarize_module.summarize

    def summarize(model, relative):
        if relative.endswith("crash.py"):
            raise AttributeError("'IfExp' object has no attribute 'func'")
        return original(model, relative)

    monkeypatch.setattr(summarize_module, "summarize", summarize)
    done = run("--output-format", "json", "--no-cache", tree)
    assert done.exit_code == 1, done.output
    reported = {(d["filename"].rsplit("/", 1)[-1], d["code"]) for d in json.loads(done.stdout)}
    assert reported == {("crash.py", "SL101"), ("train.py", "SL101")}
