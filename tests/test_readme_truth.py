"""README.md says what is true: the showcase snippet, pasted verbatim, gives the diagnostics its
comments announce and `--fix --unsafe-fixes` gives the loop shown after it; the pre-commit
configuration, as written, runs with the real pre-commit."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT

README = (ROOT / "README.md").read_text()
BUGGY = (FIXTURES / "SL101" / "plain_amp_script.py").read_text().replace("  # expect: SL101", "")


def blocks(section: str, language: str):
    text = README[README.index(section):]
    text = text[: text.find("\n## ", 1)] if "\n## " in text[1:] else text
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def steplint(*args, cwd):
    return subprocess.run([sys.executable, "-m", "steplint", *args], capture_output=True, text=True, cwd=cwd)


@pytest.fixture
def showcase(tmp_path):
    before, after = blocks("## What it finds, and the fix", "python")[:2]
    (tmp_path / "train.py").write_text(before)
    return tmp_path, before, after


def test_showcase_reports_what_its_comments_announce(showcase):
    folder, before, _ = showcase
    announced = {(row, code) for row, line in enumerate(before.splitlines(), 1) for code in re.findall(r"# (SL\d{3}):", line)}
    assert {code for _, code in announced} == {"SL102", "SL103"}
    done = steplint("check", "--output-format", "json", "train.py", cwd=folder)
    assert {(d["location"]["row"], d["code"]) for d in json.loads(done.stdout)} == announced


def test_showcase_fix_gives_the_loop_shown(showcase):
    folder, before, after = showcase
    done = steplint("check", "--fix", "--unsafe-fixes", "train.py", cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr
    fixed = (folder / "train.py").read_text()
    assert fixed.endswith(after)
    assert fixed.count("def committed_step(scaler, optimizer):") == 1  # the helper, once, after the imports
    assert fixed.startswith("import torch\n\n\ndef committed_step(scaler, optimizer):")
    setup = before[len("import torch\n"): before.index("for i, ")].lstrip("\n")
    assert fixed[: -len(after)].endswith(setup)
    assert steplint("check", "train.py", cwd=folder).returncode == 0


def test_precommit_configuration_runs_as_written(tmp_path):
    [config] = blocks("### pre-commit", "yaml")
    bin_folder = Path(sys.executable).parent
    if not (bin_folder / "steplint").exists():
        pytest.skip("steplint is not installed next to this Python (pip install -e .), as the README asks")
    env = dict(os.environ, PATH=f"{bin_folder}{os.pathsep}{os.environ['PATH']}", PRE_COMMIT_HOME=str(tmp_path / "cache"))
    repo = tmp_path / "project"
    repo.mkdir()
    (repo / ".pre-commit-config.yaml").write_text(config)
    (repo / "train.py").write_text(BUGGY)
    (repo / "explore.ipynb").write_text((FIXTURES / "SL101" / "notebook_amp.ipynb").read_text())
    (repo / "notes.txt").write_text("not python\n")
    for command in (["init", "-q"], ["add", "."]):
        subprocess.run(["git", *command], cwd=repo, check=True)

    def pre_commit():
        return subprocess.run([sys.executable, "-m", "pre_commit", "run", "--all-files"], cwd=repo, capture_output=True, text=True, env=env)

    failed = pre_commit()
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "train.py:19:9: SL101" in failed.stdout
    assert "explore.ipynb:cell " in failed.stdout and "SL101" in failed.stdout  # notebooks are checked too
    subprocess.run([sys.executable, "-m", "steplint", "check", "--fix", "train.py", "explore.ipynb"], cwd=repo, check=True, capture_output=True)
    passed = pre_commit()
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "steplint" in passed.stdout and "Passed" in passed.stdout


def test_configuration_sample_copied_as_is_keeps_the_default_rules_on(tmp_path):
    """Pasted into a project, the sample changes what it shows (SL104 ignored, ...) and nothing else:
    SL102 still reports an update counter that counts skipped updates."""
    [sample, top_level] = blocks("### Configuration", "toml")
    (tmp_path / "pyproject.toml").write_text(sample)
    (tmp_path / "train.py").write_text((FIXTURES / "SL102" / "nanogpt_style.py").read_text())
    done = steplint("check", "--output-format", "json", "train.py", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "SL102" in {d["code"] for d in json.loads(done.stdout)}


def test_steplint_toml_takes_the_keys_at_the_top_level(tmp_path):
    [_, top_level] = blocks("### Configuration", "toml")
    (tmp_path / "steplint.toml").write_text(top_level)
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "run.py").write_text(BUGGY)
    (tmp_path / "train.py").write_text(BUGGY)
    done = steplint("check", "--output-format", "json", ".", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert {(d["filename"].replace(os.sep, "/").split(str(tmp_path).replace(os.sep, "/") + "/")[-1], d["code"]) for d in json.loads(done.stdout)} == {("train.py", "SL101")}


def test_each_commented_setting_of_the_sample_is_a_valid_setting_once_uncommented(tmp_path):
    """The sample's `# key = value` lines are offered to be switched on: each one, switched on alone, is read."""
    [sample, _] = blocks("### Configuration", "toml")
    commented = [line for line in sample.splitlines() if re.match(r"# [a-z-]+ = ", line)]
    assert {line.split()[1] for line in commented} >= {"recipe", "extend", "target-version"}
    (tmp_path / "base.toml").write_text('ignore = ["SL105"]\n')  # what `extend = "../base.toml"` names
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(BUGGY)
    for line in commented:
        (project / "pyproject.toml").write_text(sample.replace(line, line[2:], 1))
        done = steplint("check", "--show-settings", "train.py", cwd=project)
        assert done.returncode == 0, (line, done.stderr)
        key, value = line[2:].split("#")[0].split(" = ")
        if key.strip() != "extend":  # (merged away: the base's keys show instead)
            shown = value.strip().strip('"').replace("py3", "3.")
            assert re.search(rf"^{key.strip()} = \"?{re.escape(shown)}\"?$", done.stdout, re.M), (line, done.stdout)


def test_the_usage_block_names_options_and_formats_the_commands_take(tmp_path):
    [usage] = re.findall(r"## Usage\n\n```\n(.*?)```", README, re.S)
    helps = {command: steplint(command, "--help", cwd=tmp_path).stdout for command in ("check", "rule")}
    for line in usage.splitlines():
        command = "rule" if line.startswith("steplint rule") else "check"
        for option in re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", line.split("  #")[0]):
            assert option in helps[command] or line.startswith("steplint --version"), (option, line)
    listed = re.search(r"`steplint check --help` lists the options under ruff's headings \(([^)]*)\)", README).group(1)
    headings = re.split(r",\s+", listed)
    assert [h for h in headings if f"\n{h}:\n" not in helps["check"]] == [], headings
    (tmp_path / "train.py").write_text(BUGGY)
    formats = re.search(r"--output-format ([\w|-]+)", usage).group(1).split("|")
    assert len(formats) == 12
    for name in formats:
        assert steplint("check", "--output-format", name, "train.py", cwd=tmp_path).returncode == 1, name
    for line in usage.splitlines():
        if line.startswith("steplint ") and not line.startswith("steplint check"):
            words = line.split("  #")[0].split("[")[0].split()
            done = steplint(*words[1:], cwd=tmp_path)
            assert done.returncode == 0 and done.stdout, (line, done.stderr)


def test_the_step_counters_snippet_prints_what_its_comments_show(tmp_path):
    """The snippet in a real AMP loop (4 micro-batches per update), its `...` the loop's own step,
    and wandb a stand-in that keeps what it is given."""
    [snippet] = blocks("### Step counters in your logs", "python")
    loop_step = (
        "    scaler.scale(model(batch).pow(2).mean()).backward()\n"
        "    if (step + 1) % 4 == 0:\n"
        "        scaler.step(optimizer)\n"
        "        scaler.update()\n"
        "        optimizer.zero_grad()\n"
        "        scheduler.step()\n"
    )
    assert "    ...  " in snippet
    program = "\n".join([
        "import torch",
        "model = torch.nn.Linear(8, 1)",
        "optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)",
        "scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)",
        "scaler = torch.amp.GradScaler('cpu')",
        "loader = [torch.randn(2, 8) for _ in range(401)]",
        "class wandb:",
        "    logged = []",
        "    log = logged.append",
        "",
        re.sub(r"    \.\.\. .*\n", loop_step, snippet),
        "import json; print(json.dumps(list(wandb.logged[-1])))",
    ])
    (tmp_path / "snippet.py").write_text(program)
    done = subprocess.run([sys.executable, "snippet.py"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    printed = done.stdout.splitlines()
    shown = re.search(r"print\(counters\)\s+# (.*)", snippet).group(1)
    shape = re.sub(r"=[\d.]+", r"=[\\d.]+", shown)
    assert len(printed) == 6 and all(re.fullmatch(shape, line) for line in printed[:-1]), (shape, printed)
    assert printed[-2] == "batches=401 attempts=100 committed=100 skipped=0 scale=65536 lr=0.0003"
    listed = re.findall(r"\w+", snippet[snippet.index("wandb.log(counters.as_dict())") + len("wandb.log(counters.as_dict())"):])
    assert json.loads(printed[-1]) == listed
