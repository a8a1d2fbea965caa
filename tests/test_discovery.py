"""Which files a folder run checks: .gitignore (nested), .git/info/exclude, git's global excludes
file, and the exclude / per-file-ignores globs with `[..]` and `{a,b}`, matched as git matches."""

import json
import os
import subprocess
import sys

import pytest

from steplint.globs import expand_braces

from conftest import FIXTURES

BUGGY = (FIXTURES / "SL101" / "plain_amp_script.py").read_text()


def checked(root, *args, env=None):
    done = subprocess.run([sys.executable, "-m", "steplint", "check", "--output-format", "json", *args, "."],
                          cwd=root, capture_output=True, text=True, env=env)
    assert done.returncode in (0, 1), done.stderr
    # JSON filenames are absolute, as ruff writes them
    return {(os.path.relpath(d["filename"], os.path.realpath(root)).replace(os.sep, "/"), d["code"]) for d in json.loads(done.stdout)}


def files(paths):
    return {(p, "SL101") for p in paths}


@pytest.fixture
def repo(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    return tmp_path


def write(root, *names):
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(BUGGY)


def test_character_class_folder_and_escaped_hash(repo):
    write(repo, "Scratch/a.py", "scratch/b.py", "sketch/c.py", "#x.py", "x.py")
    (repo / ".gitignore").write_text("[Ss]cratch/\n\\#x.py\n")
    assert checked(repo) == files(["sketch/c.py", "x.py"])


def test_nested_gitignore_reincludes_and_ignores_below_it(repo):
    write(repo, "gen_a.py", "pkg/gen_keep.py", "pkg/gen_b.py", "pkg/local.py", "top/local.py")
    (repo / ".gitignore").write_text("gen_*.py\n")
    (repo / "pkg" / ".gitignore").write_text("!gen_keep.py\nlocal.py\n")
    assert checked(repo) == files(["pkg/gen_keep.py", "top/local.py"])


def test_git_info_exclude(repo):
    write(repo, "mine_draft.py", "train.py")
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "exclude").write_text("*_draft.py\n")
    assert checked(repo) == files(["train.py"])


def test_global_excludes_file(repo, tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    (home / "git").mkdir()
    (home / "git" / "ignore").write_text("*.scratch.py\n")
    write(repo, "try.scratch.py", "train.py")
    env = dict(os.environ, HOME=str(home), XDG_CONFIG_HOME=str(home), GIT_CONFIG_NOSYSTEM="1")
    assert checked(repo, env=env) == files(["train.py"])


def test_gitignore_applies_without_a_repository(tmp_path):
    write(tmp_path, "a/keep.py", "a/skip.py")
    (tmp_path / "a" / ".gitignore").write_text("skip.py\n")
    assert checked(tmp_path / "a") == files(["keep.py"])


def test_exclude_globs_with_classes_braces_and_folders(tmp_path):
    write(tmp_path, "runs/v1/a.py", "runs/v2/b.py", "runs/v3/c.py", "legacy/old.py", "notebooks/n.py", "train.py")
    (tmp_path / "steplint.toml").write_text('extend-exclude = ["runs/v[12]/", "{legacy,notebooks}/"]\n')
    assert checked(tmp_path) == files(["runs/v3/c.py", "train.py"])


def test_per_file_ignores_with_classes_and_braces(tmp_path):
    write(tmp_path, "scripts/train_a.py", "scripts/eval_b.py", "scripts/other.py", "tools/Tune1.py", "tools/tune2.py")
    (tmp_path / "steplint.toml").write_text(
        '[per-file-ignores]\n"scripts/{train,eval}_*.py" = ["SL101"]\n"tools/[T]une?.py" = ["SL1"]\n'
    )
    assert checked(tmp_path) == files(["scripts/other.py", "tools/tune2.py"])


@pytest.mark.parametrize("pattern, expanded", [
    ("src/{a,b}/*.py", ["src/a/*.py", "src/b/*.py"]),
    ("{a,{b,c}}.py", ["a.py", "b.py", "c.py"]),
    ("{a,b}_{x,y}", ["a_x", "a_y", "b_x", "b_y"]),
    ("x{a}.py", ["x{a}.py"]),
    ("\\{a,b}", ["\\{a,b}"]),
    ("{a,b", ["{a,b"]),
])
def test_brace_expansion(pattern, expanded):
    assert expand_braces(pattern) == expanded
