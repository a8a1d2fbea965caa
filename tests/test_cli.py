"""`steplint check` and `steplint rule` through the real command line."""

import json
import os
import subprocess
import sys
from pathlib import Path


from conftest import FIXTURES, ROOT
from test_fixtures import GOLDEN, INPUTS, NOTEBOOKS, expected

from steplint import notebook

BUGGY = (FIXTURES / "SL101" / "plain_amp_script.py").read_text()


def steplint(*args, cwd=None, input=None):
    return subprocess.run([sys.executable, "-m", "steplint", *args], capture_output=True, text=True, cwd=cwd, input=input)


def test_fixture_tree_reports_exactly_the_markers():
    done = steplint("check", "--output-format", "json", str(FIXTURES))
    assert done.returncode == 1
    reported = {(Path(d["filename"]).resolve(), d["cell"], d["location"]["row"], d["code"]) for d in json.loads(done.stdout)}
    markers = {(p.resolve(), None, row, code) for p in INPUTS for row, code in expected(p.read_text())}
    for p in NOTEBOOKS:  # folders include notebooks by default
        book = notebook.parse(p.read_text(encoding="utf-8"))
        markers |= {(p.resolve(), cell.number, row, code) for cell in book.cells for row, code in expected(cell.original)}
    golden = {p.with_name(p.stem + ".fixed.py").resolve() for p in GOLDEN}
    assert {r for r in reported if r[0] not in golden} == markers
    # A golden file may keep a marked problem that has no fix; it reports nothing unmarked.
    left = {r for r in reported if r[0] in golden}
    assert left <= {(p, None, row, code) for p in golden for row, code in expected(p.read_text())}


def test_json_shape_is_ruffs(tmp_path):
    target = tmp_path / "train.py"
    target.write_text(BUGGY)
    [item] = json.loads(steplint("check", "--output-format", "json", str(target)).stdout)
    assert set(item) == {"code", "message", "filename", "location", "end_location", "fix", "cell", "url", "noqa_row"}
    assert item["cell"] is None  # ruff's key, set for notebooks
    assert item["code"] == "SL101" and item["location"] == {"row": 19, "column": 9}
    assert item["end_location"] == {"row": 19, "column": 25}
    assert item["fix"]["applicability"] == "safe"
    assert all({"content", "location", "end_location"} == set(e) for e in item["fix"]["edits"])
    assert item["url"] is None  # no hosted docs to link to: `steplint rule SL101` prints them


def test_full_output_shows_source_caret_and_fix_without_colour_when_piped(tmp_path):
    target = tmp_path / "train.py"
    target.write_text(BUGGY)
    out = steplint("check", str(target)).stdout
    assert f"{target}:19:9: SL101 " in out
    assert "19 |         scheduler.step()  # expect: SL101" in out
    assert "   |         ^^^^^^^^^^^^^^^^" in out
    assert "= fix: Advance `scheduler` only when the update committed" in out
    assert "\x1b[" not in out
    assert "Found 1 error." in out


def test_exit_codes(tmp_path):
    clean = tmp_path / "clean.py"
    clean.write_text("import torch\nprint(torch.ones(2).sum())\n")
    buggy = tmp_path / "buggy.py"
    buggy.write_text(BUGGY)
    assert steplint("check", str(clean)).returncode == 0
    assert steplint("check", str(buggy)).returncode == 1
    assert steplint("check", "--exit-zero", str(buggy)).returncode == 0
    missing = steplint("check", str(tmp_path / "nope.py"), str(clean))  # a warning; the exit status is the rest's
    assert missing.returncode == 0 and "nope.py: no such file or directory" in missing.stderr
    assert steplint("check", "--select", "XY9", str(clean)).returncode == 2
    assert steplint("check", "--output-format", "xml", str(clean)).returncode == 2


def test_select_and_ignore(tmp_path):
    target = tmp_path / "train.py"
    target.write_text((FIXTURES / "SL102" / "nanogpt_style.py").read_text() + "\n" + BUGGY)
    def codes(*args):
        return {d["code"] for d in json.loads(steplint("check", "--output-format", "json", *args, str(target)).stdout)}
    assert codes() == {"SL101", "SL102", "SL302"}
    assert codes("--select", "SL101") == {"SL101"}
    assert codes("--ignore", "SL101,SL3") == {"SL102"}
    assert codes("--select", "SL1", "--ignore", "SL102") == {"SL101"}
    assert codes("--select", "SL102", "--extend-select", "SL101") == {"SL101", "SL102"}


def test_fix_writes_file_and_second_run_is_clean(tmp_path):
    target = tmp_path / "train.py"
    target.write_text(BUGGY)
    first = steplint("check", "--fix", str(target))
    assert first.returncode == 0, first.stdout
    assert "Fixed 1 error (0 remaining)." in first.stdout
    fixed = target.read_text()
    assert fixed == (FIXTURES / "SL101" / "plain_amp_script.fixed.py").read_text()
    second = steplint("check", "--fix", str(target))
    assert second.returncode == 0 and target.read_text() == fixed


def test_unsafe_fix_needs_the_flag(tmp_path):
    target = tmp_path / "train.py"
    source = (FIXTURES / "SL102" / "nanogpt_style.py").read_text()
    target.write_text(source)
    safe = steplint("check", "--fix", str(target))
    assert safe.returncode == 1 and target.read_text() == source
    assert "1 hidden fix can be enabled with the `--unsafe-fixes` option" in steplint("check", str(target)).stdout  # SL302
    # SL102 stays, without a fix: the cadence check that reads `iter_num` runs before the update
    assert steplint("check", "--fix", "--unsafe-fixes", str(target)).returncode == 1
    assert target.read_text() == (FIXTURES / "SL102" / "nanogpt_style.fixed.py").read_text()


def test_diff_prints_and_writes_nothing(tmp_path):
    target = tmp_path / "train.py"
    target.write_text(BUGGY)
    done = steplint("check", "--diff", str(target))
    assert done.returncode == 1
    assert "+        committed = committed_step(scaler, optimizer)" in done.stdout
    assert "-        scaler.step(optimizer)" in done.stdout
    assert target.read_text() == BUGGY


def test_fix_keeps_mode_bom_and_crlf(tmp_path):
    target = tmp_path / "train.py"
    target.write_bytes(b"\xef\xbb\xbf" + BUGGY.replace("\n", "\r\n").encode())
    target.chmod(0o751)
    assert steplint("check", "--fix", str(target)).returncode == 0
    data = target.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf")
    assert b"\r\n" in data and b"\n" not in data.replace(b"\r\n", b"")
    assert (target.stat().st_mode & 0o777) == 0o751
    golden = (FIXTURES / "SL101" / "plain_amp_script.fixed.py").read_text().replace("\n", "\r\n")
    assert data[3:].decode() == golden


def test_bad_files_are_reported_and_the_run_goes_on(tmp_path):
    (tmp_path / "broken.py").write_text("for step in loader:\n    scaler.step(opt\n")
    (tmp_path / "latin.py").write_bytes(b"# scaler.step\nname = '\xe9'\n")
    (tmp_path / "empty.py").write_text("")
    (tmp_path / "dangling.py").symlink_to(tmp_path / "gone.py")
    (tmp_path / "good.py").write_text(BUGGY)
    done = steplint("check", "--output-format", "json", str(tmp_path))
    assert done.returncode == 1, done.stderr
    found = {(Path(d["filename"]).name, d["code"]) for d in json.loads(done.stdout)}
    assert found == {("broken.py", "SL001"), ("latin.py", "SL001"), ("dangling.py", "SL001"), ("good.py", "SL101")}
    messages = {Path(d["filename"]).name: d["message"] for d in json.loads(done.stdout)}
    assert messages["latin.py"].startswith("Cannot decode file")
    assert messages["dangling.py"].startswith("Cannot read file")


def test_syntax_error_names_the_line(tmp_path):
    target = tmp_path / "broken.py"
    target.write_text("import torch\n\nfor step in loader:\n    scaler.step(opt\n")
    [item] = json.loads(steplint("check", "--output-format", "json", str(target)).stdout)
    assert item["code"] == "SL001" and item["location"]["row"] >= 4
    assert item["message"].startswith("Cannot parse:")


def test_fix_leaves_unparsable_files_alone(tmp_path):
    target = tmp_path / "broken.py"
    text = "scaler.step(opt\n"
    target.write_text(text)
    assert steplint("check", "--fix", str(target)).returncode == 1
    assert target.read_text() == text


def test_discovery_skips_venvs_build_and_gitignored(tmp_path):
    for folder in ("src", ".venv/lib", "build", "node_modules", "ignored", "env"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "train.py").write_text(BUGGY)
    (tmp_path / "env" / "pyvenv.cfg").write_text("home = /usr\n")
    (tmp_path / ".gitignore").write_text("ignored/\n*.gen.py\n")
    (tmp_path / "src" / "x.gen.py").write_text(BUGGY)
    done = steplint("check", "--output-format", "json", ".", cwd=tmp_path)
    files = {d["filename"] for d in json.loads(done.stdout)}
    assert files == {str(tmp_path.resolve() / "src" / "train.py")}  # absolute, as ruff writes them


def test_default_path_is_the_current_folder(tmp_path):
    (tmp_path / "train.py").write_text(BUGGY)
    done = steplint("check", "--output-format", "concise", cwd=tmp_path)
    assert done.returncode == 1 and done.stdout.startswith("train.py:19:9: SL101")


def test_noqa_suppresses(tmp_path):
    target = tmp_path / "train.py"
    target.write_text(BUGGY.replace("# expect: SL101", "# noqa: SL101"))
    assert steplint("check", str(target)).returncode == 0
    target.write_text(BUGGY.replace("# expect: SL101", "# noqa: SL102"))
    assert steplint("check", str(target)).returncode == 1


def test_rule_docs():
    done = steplint("rule", "SL101")
    assert done.returncode == 0
    for heading in ("## What it does", "## Why is this bad?", "## Example", "## Use instead", "## Fix safety", "## References"):
        assert heading in done.stdout
    listing = steplint("rule", "--all").stdout.splitlines()
    modules = sorted(p.name[:5].upper() for p in (ROOT / "rules").glob("sl*.py"))
    assert [line.split()[0] for line in listing] == modules
    assert {"SL001", "SL002", "SL101", "SL105"} <= set(modules)
    as_json = json.loads(steplint("rule", "--all", "--output-format", "json").stdout)
    assert {r["code"] for r in as_json} >= {"SL101", "SL105"}
    assert steplint("rule", "SL999").returncode == 2


def test_version():
    done = steplint("--version")
    assert done.returncode == 0 and "steplint" in done.stdout


def test_installed_wheel_finds_its_rules_from_any_folder(tmp_path):
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--target", str(target), str(ROOT)],
        check=True, capture_output=True,
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(target)
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "train.py").write_text(BUGGY)
    done = subprocess.run([sys.executable, "-m", "steplint", "check", "train.py"], capture_output=True, text=True, cwd=tmp_path / "work", env=env)
    assert done.returncode == 1, done.stderr
    assert "SL101" in done.stdout
    assert (target / "steplint" / "rules" / "sl101_scheduler_step_on_skipped_update.py").exists()


def test_no_output_links_to_a_repository_that_does_not_exist(tmp_path):
    """There is no hosted copy of steplint to link to: outputs carry no link (`steplint rule CODE`
    prints a rule's docs), and the internal-error message asks for the traceback instead."""
    target = tmp_path / "train.py"
    target.write_text(BUGGY)
    outputs = [steplint("check", "--output-format", fmt, str(target)).stdout for fmt in ("json", "sarif", "full", "github")]
    outputs += [steplint("rule", "--all", "--output-format", "json").stdout, steplint("rule", "SL000").stdout]
    outputs.append((ROOT / "README.md").read_text())
    for output in outputs:
        assert "github.com/steplint" not in output
    assert all(d["url"] is None for d in json.loads(outputs[0]))
