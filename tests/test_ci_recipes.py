"""The README's CI recipes, as written: the steplint commands of the GitHub Actions and GitLab jobs
produce the files their upload and report steps name, in the formats those read; the pinned-commit
pre-commit configuration runs with the real pre-commit."""

import json
import os
import shlex
import subprocess
import sys

import jsonschema
import pytest
import yaml

from conftest import FIXTURES, ROOT
from test_output_formats import CODE_QUALITY
from test_readme_truth import blocks

BUGGY = (FIXTURES / "SL101" / "plain_amp_script.py").read_text().replace("  # expect: SL101", "")


def recipes():
    return [yaml.safe_load(block) for block in blocks("### In CI", "yaml")]


def run_as_written(command: str, cwd):
    """A recipe's `steplint ...` line, run with this Python's steplint."""
    words = shlex.split(command)
    assert words[0] == "steplint"
    return subprocess.run([sys.executable, "-m", "steplint", *words[1:]], cwd=cwd, capture_output=True, text=True)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "train.py").write_text(BUGGY)
    return tmp_path


def test_install_lines_are_requirements_pip_reads():
    from packaging.requirements import Requirement

    github = [step["run"] for step in next(iter(recipes()[0]["jobs"].values()))["steps"] if step.get("run", "").startswith("pip install")]
    gitlab = [line for line in recipes()[1]["steplint"]["script"] if line.startswith("pip install")]
    for line in github + gitlab:
        [spec] = shlex.split(line)[2:]
        requirement = Requirement(spec.replace("REPOSITORY_URL", f"file://{ROOT}").replace("COMMIT_SHA", "0" * 40))
        assert requirement.name == "steplint" and requirement.url.startswith("git+file://")


def test_github_job_annotates_and_uploads_the_sarif_it_wrote(project):
    [job] = recipes()[0]["jobs"].values()
    commands = [step["run"] for step in job["steps"] if step.get("run", "").startswith("steplint")]
    annotate, sarif = commands
    done = run_as_written(annotate, project)
    assert done.returncode == 1 and done.stdout.startswith("::error title=SL101,file=train.py,line=19,")
    assert run_as_written(sarif, project).returncode == 0
    [upload] = [step for step in job["steps"] if step.get("uses", "").startswith("github/codeql-action/upload-sarif")]
    report = json.loads((project / upload["with"]["sarif_file"]).read_text())
    assert report["version"] == "2.1.0" and [r["ruleId"] for r in report["runs"][0]["results"]] == ["SL101"]
    assert job["permissions"]["security-events"] == "write"


def test_gitlab_job_writes_the_code_quality_report_it_declares(project):
    job = recipes()[1]["steplint"]
    [command] = [line for line in job["script"] if line.startswith("steplint")]
    done = run_as_written(command, project)
    assert done.returncode == 1
    report = json.loads((project / job["artifacts"]["reports"]["codequality"]).read_text())
    jsonschema.validate(report, CODE_QUALITY)
    assert [(i["check_name"], i["location"]["path"]) for i in report] == [("SL101", "train.py")]
    assert job["artifacts"]["when"] == "always"


@pytest.mark.network
def test_precommit_at_a_pinned_commit_runs_as_written(tmp_path):
    """pre-commit clones this repository at its HEAD commit (what the recipe's COMMIT_SHA stands for)
    and installs steplint from it, which needs the package index."""
    config = recipes()[2]
    [repo] = config["repos"]
    repo["repo"] = str(ROOT)
    repo["rev"] = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    project = tmp_path / "project"
    project.mkdir()
    (project / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    (project / "train.py").write_text(BUGGY)
    (project / "pyproject.toml").write_text('[tool.steplint]\nunfixable = ["SL1"]\n')
    for command in (["init", "-q"], ["add", "."]):
        subprocess.run(["git", *command], cwd=project, check=True)
    env = dict(os.environ, PRE_COMMIT_HOME=str(tmp_path / "cache"))

    def pre_commit():
        return subprocess.run([sys.executable, "-m", "pre_commit", "run", "--all-files"], cwd=project, capture_output=True, text=True, env=env)

    # Nothing is fixable here: the --fix-only hook passes and leaves the files, the check hook reports them.
    first = pre_commit()
    assert first.returncode == 1, first.stdout + first.stderr
    lines = first.stdout.splitlines()
    assert any(line.startswith("steplint (fix)") and line.endswith("Passed") for line in lines), first.stdout
    assert "train.py:19:9: SL101" in first.stdout and (project / "train.py").read_text() == BUGGY
    # With the fixes allowed, the fix hook fixes (pre-commit fails a hook that changed files), and the next run passes.
    (project / "pyproject.toml").write_text("[tool.steplint]\n")
    subprocess.run(["git", "add", "."], cwd=project, check=True)
    fixing = pre_commit()
    assert fixing.returncode == 1 and "files were modified by this hook" in fixing.stdout
    assert (project / "train.py").read_text() != BUGGY
    subprocess.run(["git", "add", "."], cwd=project, check=True)
    passed = pre_commit()
    assert passed.returncode == 0, passed.stdout + passed.stderr
