"""The content-hash cache: hits give the same diagnostics, any change misses, bad entries are
rewritten, --no-cache writes nothing, fixing never reads it."""

import shutil
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from steplint import cache
from steplint.config import Settings

from conftest import FIXTURES

FIXTURE = FIXTURES / "SL101" / "plain_amp_script.py"


def steplint(cwd, *args, env=None):
    return subprocess.run([sys.executable, "-m", "steplint", *args], capture_output=True, text=True, cwd=cwd, env=env)


def entries(folder: Path):
    return sorted(p for p in folder.rglob("*") if p.is_file() and len(p.name) == 64)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "train.py").write_text(FIXTURE.read_text())
    return tmp_path


def test_a_hit_gives_the_diagnostics_of_the_first_run(project):
    first = steplint(project, "check", "train.py", "--output-format", "json")
    assert first.returncode == 1 and json.loads(first.stdout)
    assert len(entries(project / ".steplint_cache")) == 1
    second = steplint(project, "check", "train.py", "--output-format", "json")
    assert second.stdout == first.stdout and second.returncode == 1


def test_a_hit_is_answered_without_the_parser(project):
    steplint(project, "check", "train.py")
    probe = "import sys; from steplint.cli import main\ntry: main(['check', 'train.py', '-q'])\nexcept SystemExit as e: print(e.code, 'libcst' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=project)
    assert done.stdout.split()[-2:] == ["1", "False"], done.stdout + done.stderr


def test_the_key_changes_with_the_text_the_settings_the_version_the_path_and_the_dependencies(monkeypatch):
    text = FIXTURE.read_text()
    key = cache.cache_key("train.py", text, Settings())
    assert cache.cache_key("train.py", text, Settings()) == key
    assert cache.cache_key("train.py", text + "\n", Settings()) != key
    assert cache.cache_key("train.py", text, Settings(schedule_basis="tokens")) != key
    assert cache.cache_key("other.py", text, Settings()) != key
    assert cache.cache_key("train.py", text, Settings(), dependencies=("utils: steps scaler",)) != key
    monkeypatch.setattr(cache, "__version__", "999")
    assert cache.cache_key("train.py", text, Settings()) != key


def test_an_edited_file_or_changed_settings_are_analysed_again(project):
    steplint(project, "check", "train.py")
    (project / "train.py").write_text("def train(optimizer):\n    optimizer.step()\n")  # analysed, nothing to report
    assert steplint(project, "check", "train.py").returncode == 0
    (project / "train.py").write_text(FIXTURE.read_text())
    assert steplint(project, "check", "train.py").returncode == 1
    assert steplint(project, "check", "train.py", "--ignore", "SL101").returncode == 0
    assert len(entries(project / ".steplint_cache")) == 3


def test_corrupted_and_foreign_entries_are_ignored_and_rewritten(project):
    expected = steplint(project, "check", "train.py", "--output-format", "json", "--no-cache").stdout
    steplint(project, "check", "train.py")
    [entry] = entries(project / ".steplint_cache")
    for bad in ("{not json", json.dumps({"format": 1, "key": "another", "diagnostics": []}), json.dumps({"format": 1, "key": entry.name, "diagnostics": [{"code": 1}]})):
        entry.write_text(bad)
        assert steplint(project, "check", "train.py", "--output-format", "json").stdout == expected
        assert json.loads(entry.read_text())["key"] == entry.name


def test_no_cache_writes_nothing(project):
    assert steplint(project, "check", "train.py", "--no-cache").returncode == 1
    assert not (project / ".steplint_cache").exists()


def test_cache_dir_setting_and_environment(project, tmp_path_factory):
    (project / "steplint.toml").write_text('cache-dir = "build/lint-cache"\n')
    steplint(project, "check", "train.py")
    assert entries(project / "build" / "lint-cache") and not (project / ".steplint_cache").exists()
    (project / "steplint.toml").write_text("")
    elsewhere = tmp_path_factory.mktemp("cache")
    steplint(project, "check", "train.py", env={**os.environ, cache.ENVIRONMENT: str(elsewhere)})
    assert entries(elsewhere)


def test_a_bad_cache_dir_setting_names_the_key(project):
    (project / "steplint.toml").write_text("cache-dir = 3\n")
    done = steplint(project, "check", "train.py")
    assert done.returncode == 2 and "cache-dir" in done.stderr


def test_fixing_never_serves_cached_results(project):
    before = steplint(project, "check", "train.py", "--output-format", "json")
    assert any(d["fix"] for d in json.loads(before.stdout))
    steplint(project, "check", "train.py", "--fix")
    assert (project / "train.py").read_text() != FIXTURE.read_text()
    after = steplint(project, "check", "train.py", "--output-format", "json")
    fresh = steplint(project, "check", "train.py", "--output-format", "json", "--no-cache")
    assert after.stdout == fresh.stdout != before.stdout


def test_an_edited_rule_misses_the_entries_of_the_old_one(project):
    """An editable install whose rule changed between two runs of one version: a new entry."""
    import steplint.rules.sl101_scheduler_step_on_skipped_update as rule_module

    steplint(project, "check", "train.py")
    rule_file = Path(rule_module.__file__)
    stat = rule_file.stat()
    try:
        os.utime(rule_file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
        steplint(project, "check", "train.py")
    finally:
        os.utime(rule_file, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert len(entries(project / ".steplint_cache")) == 2


def test_files_the_prefilter_skips_are_kept_too_whatever_the_project_says(project):
    (project / "broken.py").write_text("def f(:\n    pass\n")
    (project / "notes.py").write_text("x = 1\n")
    first = steplint(project, "check", ".", "--output-format", "json")
    assert len(entries(project / ".steplint_cache")) == 3
    assert [d["code"] for d in json.loads(first.stdout) if d["filename"].endswith("broken.py")] == ["SL001"]
    (project / "train.py").write_text(FIXTURE.read_text() + "\n\ndef helper(optimizer):\n    optimizer.step()\n")
    second = steplint(project, "check", ".", "--output-format", "json")
    assert len(entries(project / ".steplint_cache")) == 4  # train.py's new entry only: the others hit
    broken = [d for d in json.loads(second.stdout) if d["filename"].endswith("broken.py")]
    assert broken == [d for d in json.loads(first.stdout) if d["filename"].endswith("broken.py")]


def test_a_cache_deleted_while_running_is_made_again(tmp_path):
    """A server outlives `rm -rf .steplint_cache`: its next entries are written, not lost."""
    from steplint import cache

    directory = str(tmp_path / "cache")
    cache.store(directory, "ab" + "0" * 62, [])
    shutil.rmtree(directory)
    cache.store(directory, "ab" + "1" * 62, [])
    assert cache.load(directory, "ab" + "1" * 62) == []
    assert (tmp_path / "cache" / ".gitignore").exists()


@pytest.mark.parametrize("jobs", [(), ("-j", "1"), ("-j", "2"), ("-j", "4")], ids=["default", "1", "2", "4"])
def test_fixing_one_copy_of_a_tree_leaves_the_report_of_the_other(tmp_path, jobs):
    """Research repos keep copies of their scripts (exp_a/, exp_b/). Enough files for the project
    index to summarise them in the pool, so that with two jobs the lints run there too: a warm run
    whose every file the cache answers must still report them all."""
    (tmp_path / ".git").mkdir()
    for copy in ("exp_a", "exp_b"):
        (tmp_path / copy).mkdir()
        for number in range(20):
            (tmp_path / copy / f"train_{number}.py").write_text(FIXTURE.read_text())
    before = steplint(tmp_path, "check", "exp_b", *jobs, "--output-format", "json")
    assert before.returncode == 1 and len(json.loads(before.stdout)) == 20
    fixed = steplint(tmp_path, "check", "exp_a", "--fix", *jobs)
    assert fixed.returncode == 0 and "Fixed 20 errors" in fixed.stdout
    after = steplint(tmp_path, "check", "exp_b", *jobs, "--output-format", "json")
    assert (after.returncode, after.stdout) == (1, before.stdout)
    again = steplint(tmp_path, "check", "exp_b", *jobs, "--output-format", "json")
    assert (again.returncode, again.stdout) == (1, before.stdout)


def test_a_run_over_many_files_reads_the_prefilter_from_the_cache_and_sees_edits(tmp_path):
    # (past _TEXT_FACTS_FROM files, what the run reads off each text by pattern comes from the cache)
    for index in range(70):
        (tmp_path / f"module_{index}.py").write_text(f"def value_{index}():\n    return {index}\n")
    (tmp_path / "train.py").write_text("def train(optimizer):\n    optimizer.step()\n")
    assert steplint(tmp_path, "check", ".").returncode == 0
    facts = json.loads((tmp_path / ".steplint_cache" / "project" / "texts.json").read_text())
    assert len(facts) == 71 and sum(entry["analysed"] for entry in facts.values()) == 1
    (tmp_path / "train.py").write_text(FIXTURE.read_text())  # an edit: a new text, read afresh
    first = steplint(tmp_path, "check", ".", "--output-format", "json")
    second = steplint(tmp_path, "check", ".", "--output-format", "json")
    assert first.returncode == second.returncode == 1
    assert first.stdout == second.stdout and {d["code"] for d in json.loads(first.stdout)} == {"SL101"}
