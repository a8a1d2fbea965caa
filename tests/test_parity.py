"""Options ruff users reach for, through the real command line: rule lookup by name, --fix-only,
fixable/unfixable, --show-settings/--show-files, the CLI's exclude and per-file-ignores, `extend`,
--isolated, --ignore-noqa, --add-noqa=REASON."""

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import FIXTURES

BUGGY = (FIXTURES / "SL101" / "plain_amp_script.py").read_text()
FIXED = (FIXTURES / "SL101" / "plain_amp_script.fixed.py").read_text()


def steplint(*args, cwd=None, input=None):
    return subprocess.run([sys.executable, "-m", "steplint", *args], capture_output=True, text=True, cwd=cwd, input=input)


def codes(done):
    assert done.returncode in (0, 1), done.stderr
    return sorted((d["filename"].rsplit("/", 1)[-1], d["code"]) for d in json.loads(done.stdout))


def test_rule_by_kebab_case_name_is_the_rule_by_code():
    by_code = steplint("rule", "SL101")
    listing = json.loads(steplint("rule", "--all", "--output-format", "json").stdout)
    name = next(r["name"] for r in listing if r["code"] == "SL101")
    by_name = steplint("rule", name)
    assert by_name.returncode == 0 and by_name.stdout == by_code.stdout
    assert steplint("rule", name.upper()).stdout == by_code.stdout
    unknown = steplint("rule", "no-such-rule")
    assert unknown.returncode == 2 and "no-such-rule" in unknown.stderr


def test_fix_only_fixes_and_reports_nothing_else(tmp_path):
    target = tmp_path / "train.py"
    target.write_text(BUGGY)
    preview = steplint("check", "--fix-only", "--diff", "train.py", cwd=tmp_path)
    assert preview.returncode == 1 and preview.stdout.startswith("---") and target.read_text() == BUGGY
    done = steplint("check", "--fix-only", "--output-format", "concise", "train.py", cwd=tmp_path)
    assert done.returncode == 0 and "SL101" not in done.stdout and "Fixed 1 error." in done.stdout
    assert target.read_text() == FIXED
    again = steplint("check", "--fix-only", "train.py", cwd=tmp_path)
    assert again.returncode == 0 and "No errors fixed." in again.stdout
    target.write_text(BUGGY)
    assert steplint("check", "--fix-only", "--exit-non-zero-on-fix", "train.py", cwd=tmp_path).returncode == 1


@pytest.mark.parametrize("how", ["config", "command line"])
def test_unfixable_rule_keeps_its_diagnostic_and_loses_its_fix(tmp_path, how):
    target = tmp_path / "train.py"
    target.write_text(BUGGY)
    args = ["--unfixable", "SL101"] if how == "command line" else []
    if how == "config":
        (tmp_path / "steplint.toml").write_text('unfixable = ["SL101"]\n')
    concise = steplint("check", "--output-format", "concise", *args, "train.py", cwd=tmp_path)
    assert "SL101" in concise.stdout and "[*]" not in concise.stdout
    [item] = json.loads(steplint("check", "--output-format", "json", *args, "train.py", cwd=tmp_path).stdout)
    assert item["fix"] is None
    assert steplint("check", "--fix", *args, "train.py", cwd=tmp_path).returncode == 1
    assert target.read_text() == BUGGY
    steplint("check", "--fix", "--fixable", "SL2", "train.py", cwd=tmp_path)  # --fixable narrows too
    assert target.read_text() == BUGGY


def test_fixable_from_the_config_and_extend_fixable(tmp_path):
    target = tmp_path / "train.py"
    target.write_text(BUGGY)
    (tmp_path / "steplint.toml").write_text('fixable = ["SL2"]\n')
    assert "[*]" not in steplint("check", "--output-format", "concise", "train.py", cwd=tmp_path).stdout
    steplint("check", "--fix", "--extend-fixable", "SL101", "train.py", cwd=tmp_path)
    assert target.read_text() == FIXED


@pytest.fixture
def project(tmp_path):
    for name in ("train.py", "legacy/old.py", "scratch/try.py", "tools/eval.py"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(BUGGY)
    (tmp_path / ".gitignore").write_text("scratch/\n")
    return tmp_path


def shown(done, root):
    assert done.returncode == 0, done.stderr
    return [Path(line).relative_to(root.resolve()).as_posix() for line in done.stdout.splitlines()]


def test_show_files_after_gitignore_exclude_and_include(project):
    assert shown(steplint("check", "--show-files", cwd=project), project) == ["legacy/old.py", "tools/eval.py", "train.py"]
    (project / "steplint.toml").write_text('extend-exclude = ["legacy/"]\nrespect-gitignore = false\n')
    assert shown(steplint("check", "--show-files", cwd=project), project) == ["scratch/try.py", "tools/eval.py", "train.py"]
    # --exclude replaces `exclude`; the configured extend-exclude stays
    assert shown(steplint("check", "--show-files", "--exclude", "tools", cwd=project), project) == ["scratch/try.py", "train.py"]


def test_show_settings_names_the_file_and_the_resolved_values(project):
    (project / "steplint.toml").write_text('ignore = ["SL104"]\nunfixable = ["SL101"]\n[per-file-ignores]\n"tools/*.py" = ["SL1"]\n')
    done = steplint("check", "--show-settings", "tools/eval.py", cwd=project)
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    assert lines[0] == f"Resolved settings for: {(project / 'tools' / 'eval.py').resolve()}"
    assert lines[1] == f"Settings path: {(project / 'steplint.toml').resolve()}"
    assert 'ignore = ["SL104"]' in lines and 'unfixable = ["SL101"]' in lines
    enabled = next(line for line in lines if line.startswith("enabled-rules = "))
    assert '"SL201"' in enabled and '"SL101"' not in enabled and '"SL104"' not in enabled  # per-file-ignores of this file
    fixable = next(line for line in lines if line.startswith("fixable-rules = "))
    assert '"SL101"' not in fixable and '"SL201"' in fixable


def test_command_line_exclude_and_per_file_ignores(project):
    everything = codes(steplint("check", "--output-format", "json", cwd=project))
    assert everything == [("eval.py", "SL101"), ("old.py", "SL101"), ("train.py", "SL101")]
    assert codes(steplint("check", "--output-format", "json", "--extend-exclude", "legacy", "--per-file-ignores", "tools/*.py:SL101",
                          cwd=project)) == [("train.py", "SL101")]
    # --exclude replaces the defaults (and the configured list); named files are checked unless --force-exclude
    assert codes(steplint("check", "--output-format", "json", "--exclude", "legacy,tools", "legacy/old.py", cwd=project)) == [("old.py", "SL101")]
    assert codes(steplint("check", "--output-format", "json", "--exclude", "legacy", "--force-exclude", "legacy/old.py", cwd=project)) == []
    bad = steplint("check", "--per-file-ignores", "tools/*.py", cwd=project)
    assert bad.returncode == 2 and "GLOB:CODES" in bad.stderr


def test_force_exclude_from_the_config(project):
    (project / "steplint.toml").write_text('extend-exclude = ["legacy/"]\nforce-exclude = true\n')
    assert codes(steplint("check", "--output-format", "json", "legacy/old.py", cwd=project)) == []


def test_extend_merges_a_base_relative_to_the_file_that_names_it(tmp_path):
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "base.toml").write_text('ignore = ["SL101"]\nunfixable = ["SL2"]\n')
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(BUGGY)
    (project / "steplint.toml").write_text('extend = "../shared/base.toml"\nextend-select = []\n')
    assert codes(steplint("check", "--output-format", "json", cwd=project)) == []
    settings = steplint("check", "--show-settings", cwd=project).stdout
    assert 'unfixable = ["SL2"]' in settings
    (project / "steplint.toml").write_text('extend = "../shared/base.toml"\nignore = []\n')  # this file's keys win
    assert codes(steplint("check", "--output-format", "json", cwd=project)) == [("train.py", "SL101")]


def test_extend_cycle_is_a_config_error_naming_the_files(tmp_path):
    (tmp_path / "a.toml").write_text('extend = "b.toml"\n')
    (tmp_path / "b.toml").write_text('extend = "a.toml"\n')
    (tmp_path / "train.py").write_text(BUGGY)
    done = steplint("check", "--config", "a.toml", cwd=tmp_path)
    assert done.returncode == 2
    assert "cycle" in done.stderr and "a.toml" in done.stderr and "b.toml" in done.stderr
    (tmp_path / "b.toml").write_text('extend = "missing.toml"\n')
    missing = steplint("check", "--config", "a.toml", cwd=tmp_path)
    assert missing.returncode == 2 and "missing.toml" in missing.stderr


def test_isolated_ignores_the_configuration(tmp_path):
    (tmp_path / "train.py").write_text(BUGGY)
    (tmp_path / "steplint.toml").write_text('ignore = ["SL101"]\n')
    assert codes(steplint("check", "--output-format", "json", cwd=tmp_path)) == []
    assert codes(steplint("check", "--output-format", "json", "--isolated", cwd=tmp_path)) == [("train.py", "SL101")]
    both = steplint("check", "--isolated", "--config", "steplint.toml", cwd=tmp_path)
    assert both.returncode == 2


def test_ignore_noqa_reports_what_noqa_suppresses(tmp_path):
    target = tmp_path / "train.py"
    target.write_text(BUGGY)
    assert steplint("check", "--add-noqa", "train.py", cwd=tmp_path).returncode == 0
    assert codes(steplint("check", "--output-format", "json", cwd=tmp_path)) == []
    assert codes(steplint("check", "--output-format", "json", "--ignore-noqa", cwd=tmp_path)) == [("train.py", "SL101")]
    (tmp_path / "other.py").write_text("x = 1  # noqa: SL101\n")  # unused, but under --ignore-noqa no noqa is read
    assert codes(steplint("check", "--output-format", "json", "--ignore-noqa", cwd=tmp_path)) == [("train.py", "SL101")]


def test_add_noqa_with_a_reason_merges_and_never_corrupts(tmp_path):
    target = tmp_path / "train.py"
    lines = BUGGY.splitlines(True)
    [first] = json.loads(steplint("check", "--output-format", "json", "-", input=BUGGY).stdout)
    noqa_row = first["noqa_row"]
    lines[noqa_row - 1] = lines[noqa_row - 1].rstrip("\n") + "  # noqa: E501\n"
    source = "".join(lines)
    target.write_text(source)
    done = steplint("check", "--add-noqa=reviewed by hand", "train.py", cwd=tmp_path)
    assert done.returncode == 0 and "Added 1 noqa directive." in done.stdout
    text = target.read_text()
    assert text.splitlines()[noqa_row - 1].endswith("  # noqa: E501, SL101 reviewed by hand")
    compile(text, "train.py", "exec")
    assert [a for a, b in zip(text.splitlines(), source.splitlines()) if a != b] == [text.splitlines()[noqa_row - 1]]
    again = steplint("check", "--add-noqa=again", "train.py", cwd=tmp_path)
    assert "Added 0 noqa directives." in again.stdout and target.read_text() == text
    assert steplint("check", "train.py", cwd=tmp_path).returncode == 0
    # Without `=`, the next word is a path, as in ruff
    (tmp_path / "second.py").write_text(BUGGY)
    assert steplint("check", "--add-noqa", "second.py", cwd=tmp_path).returncode == 0
    assert (tmp_path / "second.py").read_text().splitlines()[noqa_row - 1].endswith("  # noqa: SL101")


def test_check_help_is_grouped_as_ruffs():
    done = steplint("check", "--help")
    assert done.returncode == 0
    headings = [line[:-1] for line in done.stdout.splitlines() if line.endswith(":") and not line.startswith(" ")]
    assert headings == ["Options", "Rule selection", "File selection", "Miscellaneous", "Log levels", "Global options"]
    sections = {}
    for line in done.stdout.splitlines():
        if line in (h + ":" for h in headings):
            current = line[:-1]
        elif line.startswith("  -"):
            sections.setdefault(current, []).append(line.split()[0].rstrip(","))
    assert "--fixable" in sections["Rule selection"] and "--extend-exclude" in sections["File selection"]
    assert "--isolated" in sections["Global options"] and "--fix" in sections["Options"]
    listed = [o for names in sections.values() for o in names]
    assert len(listed) == len(set(listed))


def _lines_of(process):
    """The process's stdout lines, read by a thread so that a wait for one is bounded."""
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout], daemon=True).start()
    return lines


def _wait_for(lines, wanted, seconds=120):
    """Lines up to the first that holds `wanted`; fails after `seconds` (a bound, not a timing)."""
    seen = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=1)
        except queue.Empty:
            continue
        seen.append(line)
        if wanted in line:
            return seen
    raise AssertionError(f"no {wanted!r} in {seen!r}")


def test_watch_checks_again_when_a_file_changes(tmp_path):
    target = tmp_path / "train.py"
    target.write_text(BUGGY)
    process = subprocess.Popen([sys.executable, "-m", "steplint", "check", "--watch", "--no-cache", "--output-format", "concise", "train.py"],
                               cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        lines = _lines_of(process)
        first = _wait_for(lines, "Found 1 error")
        assert any("train.py:" in line and "SL101" in line for line in first)
        target.write_text(FIXED)
        assert not any("SL101" in line for line in _wait_for(lines, "All checks passed!"))
        target.write_text(BUGGY)  # and again: the watch goes on
        assert any("SL101" in line for line in _wait_for(lines, "Found 1 error"))
        (tmp_path / "steplint.toml").write_text('ignore = ["SL101"]\n')  # a new configuration is read
        _wait_for(lines, "All checks passed!")
        assert process.poll() is None
    finally:
        process.terminate()
        process.wait(timeout=30)
