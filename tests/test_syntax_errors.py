"""Every syntax error is SL001, at Python's own position, whether or not the prefilter skips the file."""

import ast
import json
import subprocess
import sys

import pytest
from pathlib import Path

from steplint.config import Settings
from steplint.engine import lint_source

from conftest import FIXTURES

BROKEN = {
    "unclosed_paren": "x = 1\ny = (2,\n",
    "bad_def": "x = 1\n\n\ndef f(:\n    pass\n",
    "missing_indent": "if x:\npass\n",
    "tabs_and_spaces": "if x:\n\tif y:\n        pass\n",
    "stray_dedent": "if x:\n        a\n    b\n",
    "bad_escape_name": "x = '\\N{NO SUCH NAME}'\n",
    "keyword_target": "class = 1\n",
    "non_ascii_before_error": "s = 'üü'; def f(: pass\n",
    "generator_argument": "f(a for a in b, c)\n",
}


def python_position(text):
    try:
        ast.parse(text)
    except SyntaxError as error:
        return error.lineno, error.offset
    raise AssertionError("expected a syntax error")


@pytest.mark.parametrize("training_words", [False, True], ids=["prefilter-skips", "prefilter-passes"])
@pytest.mark.parametrize("name", sorted(BROKEN))
def test_reported_at_pythons_position(name, training_words):
    text = ("scaler.step(optimizer)  # a word the prefilter looks for\n" if training_words else "") + BROKEN[name]
    [diagnostic] = lint_source("broken.py", text, Settings())
    assert diagnostic.code == "SL001"
    assert (diagnostic.row, diagnostic.column) == python_position(text)


def test_def_on_line_4_is_4_7_as_python_says(tmp_path):
    (tmp_path / "plain.py").write_text(BROKEN["bad_def"])
    done = subprocess.run([sys.executable, "-m", "steplint", "check", "--output-format", "concise", str(tmp_path / "plain.py")],
                          capture_output=True, text=True)
    assert done.returncode == 1
    assert f"{tmp_path / 'plain.py'}:4:7: SL001 Cannot parse: invalid syntax" in done.stdout
    assert "All checks passed" not in done.stdout


def test_syntax_python_accepts_but_libcst_rejects_is_sl001_with_libcsts_message():
    # LibCST 1.0.1 rejects a parenthesised annotated target, which Python accepts.
    text = "scaler.step(optimizer)\n(x): int = 1\n"
    ast.parse(text)
    [diagnostic] = lint_source("new_syntax.py", text, Settings())
    assert diagnostic.code == "SL001" and diagnostic.row == 2
    assert "steplint's parser, LibCST, does not support this syntax yet" in diagnostic.message


def test_valid_file_without_training_words_has_nothing_to_report():
    assert lint_source("ok.py", "x = '\\d'\nprint(x)\n", Settings()) == []


def test_python_warnings_are_not_printed(tmp_path):
    (tmp_path / "escapes.py").write_text("pattern = '\\d+'\n")
    done = subprocess.run([sys.executable, "-m", "steplint", "check", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0 and "SyntaxWarning" not in done.stderr


def test_unparsable_files_in_json_carry_the_position(tmp_path):
    (tmp_path / "a.py").write_text(BROKEN["unclosed_paren"])
    done = subprocess.run([sys.executable, "-m", "steplint", "check", "--output-format", "json", str(tmp_path)],
                          capture_output=True, text=True)
    [item] = json.loads(done.stdout)
    assert (item["code"], item["location"]) == ("SL001", {"row": 2, "column": 5})
    assert "'(' was never closed" in item["message"]


BUGGY = (FIXTURES / "SL101" / "plain_amp_script.py").read_text().replace("  # expect: SL101", "")


def _check(folder, *paths):
    return subprocess.run([sys.executable, "-m", "steplint", "check", "--no-cache", "--output-format", "json", *paths], capture_output=True, text=True, cwd=folder)


# -- files CPython accepts -----------------------------------------------------------------------------


def test_a_form_feed_before_a_nested_blocks_indentation_is_no_syntax_error(tmp_path):
    """Python's tokenizer resets the indentation at a form feed; LibCST's rejected the nested block."""
    source = BUGGY.replace("        with torch.autocast", "\f        with torch.autocast")
    compile(source, "train.py", "exec")
    (tmp_path / "train.py").write_text(source)
    done = _check(tmp_path, "train.py")
    assert [(d["code"], d["location"]["row"]) for d in json.loads(done.stdout)] == [("SL101", 19)]


def test_a_form_feed_before_a_statement_keeps_its_quoted_span_and_its_fix(tmp_path):
    source = BUGGY.replace("        scaler.step(optimizer)\n", "\f        scaler.step(optimizer)\n")
    (tmp_path / "train.py").write_text(source)
    [diagnostic] = json.loads(_check(tmp_path, "train.py").stdout)
    assert "`scaler.step(optimizer)` skipped" in diagnostic["message"] and diagnostic["fix"] is not None
    fixed = subprocess.run([sys.executable, "-m", "steplint", "check", "--fix", "train.py"], capture_output=True, text=True, cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    text = (tmp_path / "train.py").read_text()
    assert "\f        committed = committed_step(scaler, optimizer)\n" in text
    compile(text, "train.py", "exec")


def test_a_latin1_coding_cookie_with_cr_line_breaks_is_read(tmp_path):
    source = ("# -*- coding: latin-1 -*-\n# r\xe9glages\n" + BUGGY).replace("\n", "\r")
    compile(source.encode("latin-1"), "train.py", "exec")
    (tmp_path / "train.py").write_bytes(source.encode("latin-1"))
    done = _check(tmp_path, "train.py")
    assert [d["code"] for d in json.loads(done.stdout)] == ["SL101"], done.stdout


# -- the project's Python ------------------------------------------------------------------------------

NEWER = "type Pair[T] = tuple[T, T]\n\n\ndef first[T](pair: Pair[T]) -> T:\n    return pair[0]\n"  # PEP 695, Python 3.12
RUNNING = f"{sys.version_info[0]}.{sys.version_info[1]}"


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the running Python parses 3.12's grammar itself")
@pytest.mark.parametrize("config", [("pyproject.toml", '[project]\nname = "demo"\nrequires-python = ">=3.12"\n'),
                                    ("steplint.toml", 'target-version = "py312"\n'),
                                    ("pyproject.toml", '[project]\nname = "demo"\n')])
def test_syntax_newer_than_the_running_python_is_analysed_not_called_broken(tmp_path, config):
    """Python 3.12's grammar (PEP 695 here) is checked on LibCST's parse where the project does not declare an
    older Python; where it does, the file is broken for that Python."""
    (tmp_path / "generic.py").write_text(NEWER + BUGGY)
    (tmp_path / "train.py").write_text(BUGGY)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\nrequires-python = ">=3.9"\n')
    broken = _check(tmp_path, ".")
    assert [d["code"] for d in json.loads(broken.stdout) if d["filename"].endswith("generic.py")] == ["SL001"]
    assert f"(checked with Python {RUNNING})" in json.loads(broken.stdout)[0]["message"]
    (tmp_path / config[0]).write_text(config[1])
    done = _check(tmp_path, ".")
    assert done.returncode == 1 and [(Path(d["filename"]).name, d["code"]) for d in json.loads(done.stdout)] == [("generic.py", "SL101"), ("train.py", "SL101")], done.stdout
    assert "not analysed" not in done.stderr and "Traceback" not in done.stderr
    [fixable] = [d for d in json.loads(done.stdout) if d["filename"].endswith("train.py")]
    [unfixable] = [d for d in json.loads(done.stdout) if d["filename"].endswith("generic.py")]
    assert fixable["fix"] is not None and unfixable["fix"] is None
    assert f"no fix: Python {RUNNING}, which runs steplint, cannot parse the module to check the fix" in unfixable["message"]


def test_the_target_version_setting_is_checked(tmp_path):
    (tmp_path / "steplint.toml").write_text('target-version = "3.12"\n')
    (tmp_path / "train.py").write_text(BUGGY)
    done = _check(tmp_path, ".")
    assert done.returncode == 2 and "target-version" in done.stderr


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the running Python parses 3.12's grammar itself")
@pytest.mark.parametrize("configured", ["no configuration", "steplint.toml at the root", "--config"])
def test_each_file_is_checked_against_its_own_projects_python(tmp_path, configured):
    """Two sub-projects under one configuration: the new one's PEP 695 code is said to need its
    Python, and is analysed on LibCST's parse; the old one's is a syntax error for the Python it declares."""
    for project, required in (("new", ">=3.12"), ("old", ">=3.9")):
        (tmp_path / project).mkdir()
        (tmp_path / project / "pyproject.toml").write_text(f'[project]\nname = "{project}"\nrequires-python = "{required}"\n')
        (tmp_path / project / "generic.py").write_text(NEWER)
    arguments = ["."]
    if configured != "no configuration":
        (tmp_path / "steplint.toml").write_text('ignore = ["SL104"]\n')
    if configured == "--config":
        arguments = ["--config", "steplint.toml", "."]
    done = _check(tmp_path, *arguments)
    reported = [(d["filename"].replace(str(tmp_path), ""), d["code"]) for d in json.loads(done.stdout)]
    assert reported == [("/old/generic.py", "SL001")], done.stdout
    assert f"(checked with Python {RUNNING})" in json.loads(done.stdout)[0]["message"]
    assert "not analysed" not in done.stderr


@pytest.mark.parametrize("setting, root_python, sub_python", [("", "3.9", "3.12"), ('target-version = "py313"\n', "3.13", "3.13")])
def test_show_settings_gives_each_files_python(tmp_path, setting, root_python, sub_python):
    """`target-version` is the configuration's, for every file under it; without it each file has its own project's."""
    (tmp_path / "pyproject.toml").write_text(f'[project]\nname = "demo"\nrequires-python = ">=3.9"\n\n[tool.steplint]\n{setting}')
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "pyproject.toml").write_text('[project]\nname = "sub"\nrequires-python = "~=3.12"\n')
    for path, python in (("train.py", root_python), ("sub/train.py", sub_python)):
        (tmp_path / path).write_text(BUGGY)
        done = subprocess.run([sys.executable, "-m", "steplint", "check", "--show-settings", path], capture_output=True, text=True, cwd=tmp_path)
        assert f'\ntarget-version = "{python}"\n' in done.stdout, (path, done.stdout)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the running Python parses 3.12's f-strings itself")
@pytest.mark.parametrize("declared", ["", 'requires-python = ">=3.9"\n'])
def test_an_f_string_only_python_3_12_parses_is_not_called_broken(tmp_path, declared):
    """PEP 701: quotes inside an f-string's braces are valid from Python 3.12 on. Where the project declares no
    older Python the file is analysed; where it does, it is left unanalysed with a warning, as before."""
    (tmp_path / "pyproject.toml").write_text(f'[project]\nname = "demo"\n{declared}')
    report = 'def line(task):\n    return f"{task["name"]}: {task["loss"]:.3f}"\n'
    (tmp_path / "report.py").write_text(report + BUGGY)
    (tmp_path / "train.py").write_text(BUGGY)
    done = _check(tmp_path, ".")
    reported = [(Path(d["filename"]).name, d["code"]) for d in json.loads(done.stdout)]
    if declared:
        assert reported == [("train.py", "SL101")], done.stdout
        assert f"report.py: not analysed: Python {RUNNING}, which runs steplint, cannot parse an f-string in it" in done.stderr
    else:
        assert reported == [("report.py", "SL101"), ("train.py", "SL101")], done.stdout
        assert "not analysed" not in done.stderr
