"""The hooks in .pre-commit-hooks.yaml, run by the real pre-commit (`pre-commit try-repo`).

pre-commit installs steplint into its own environment from this repository, which needs the
package index: deselect with `-m "not network"` when offline. CI runs it.
"""

import subprocess
import sys

import pytest

from conftest import FIXTURES, ROOT

pytestmark = pytest.mark.network

BUGGY = (FIXTURES / "SL101" / "plain_amp_script.py").read_text().replace("  # expect: SL101", "")
NOTEBOOK = (FIXTURES / "SL101" / "notebook_amp.ipynb").read_text(encoding="utf-8")


def git(*args, cwd):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def steplint_repo():
    """This repository: try-repo installs its HEAD plus uncommitted changes to tracked files."""
    return str(ROOT)


@pytest.fixture
def user_repo(tmp_path):
    git("init", "-q", cwd=tmp_path)
    git("config", "user.email", "dev@example.com", cwd=tmp_path)
    git("config", "user.name", "dev", cwd=tmp_path)
    (tmp_path / "train.py").write_text(BUGGY)
    (tmp_path / "explore.ipynb").write_text(NOTEBOOK, encoding="utf-8")
    (tmp_path / "legacy").mkdir()
    (tmp_path / "legacy" / "old_train.py").write_text(BUGGY)
    (tmp_path / "pyproject.toml").write_text('[tool.steplint]\nextend-exclude = ["legacy"]\n')
    git("add", ".", cwd=tmp_path)
    return tmp_path


def try_repo(repo, hook, cwd):
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", repo, hook, "--all-files", "--verbose"],
        cwd=cwd, capture_output=True, text=True,
    )


def test_check_hook_fails_with_the_diagnostic(steplint_repo, user_repo):
    done = try_repo(steplint_repo, "steplint", user_repo)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "train.py:19:9: SL101" in done.stdout
    assert "explore.ipynb:cell 5:9:5: SL101" in done.stdout  # types_or includes jupyter
    assert "old_train.py" not in done.stdout  # pre-commit passes it explicitly; --force-exclude drops it
    assert (user_repo / "train.py").read_text() == BUGGY


def test_fix_hook_rewrites_the_file(steplint_repo, user_repo):
    done = try_repo(steplint_repo, "steplint-fix", user_repo)
    assert done.returncode == 1  # pre-commit fails a hook that changed files
    fixed = (user_repo / "train.py").read_text()
    assert "committed = committed_step(scaler, optimizer)" in fixed
    assert (user_repo / "explore.ipynb").read_text(encoding="utf-8") == (FIXTURES / "SL101" / "notebook_amp.fixed.ipynb").read_text(encoding="utf-8")
    assert (user_repo / "legacy" / "old_train.py").read_text() == BUGGY
    git("add", ".", cwd=user_repo)
    again = try_repo(steplint_repo, "steplint", user_repo)
    assert again.returncode == 0, again.stdout + again.stderr


def test_the_shipped_hook_pinned_to_a_commit_hash_as_the_readme_says(user_repo):
    """No release tags: `rev:` is the full hash of a commit (`git rev-parse HEAD` in the checkout)."""
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()
    assert "`rev:` the full hash of a\ncommit of it (`git rev-parse HEAD` in the checkout" in (ROOT / "README.md").read_text()
    (user_repo / ".pre-commit-config.yaml").write_text(f"repos:\n  - repo: {ROOT}\n    rev: {head}\n    hooks:\n      - id: steplint\n")
    git("add", ".", cwd=user_repo)
    done = subprocess.run([sys.executable, "-m", "pre_commit", "run", "--all-files"], cwd=user_repo, capture_output=True, text=True)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "train.py:19:9: SL101" in done.stdout
