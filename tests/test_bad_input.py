"""Bad input: every case gets a clear per-file message, the run goes on, nothing is lost.

Each test puts the bad file next to a good buggy one (`good.py`, one SL101) and checks both: the
message for the bad file, and that the good file was still checked. Exit status: 1 when
diagnostics remain (SL001 included), 0 when only warnings (a skipped FIFO, a file too large to
analyse) were printed, 130 after Ctrl-C.

The tests run as root in CI, and root ignores file permissions. The permission cases therefore
drop the two capabilities that let root read and write anything (`setpriv --bounding-set
-dac_override,-dac_read_search`), so the kernel applies the file modes to steplint as it would to
any user; `chattr +i` (immutable) is tested too, where the file system supports it.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from steplint.config import Settings
from steplint.engine import fix_source

from conftest import FIXTURES

BUGGY = (FIXTURES / "SL101" / "plain_amp_script.py").read_text().replace("  # expect: SL101", "")
FIXED = fix_source("train.py", BUGGY, Settings()).text
DROP_DAC = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]


def steplint(*args, cwd=None, timeout=300, as_user=False):
    prefix = []
    if as_user and os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("running as root without setpriv: root ignores file permissions")
        prefix = DROP_DAC
    return subprocess.run([*prefix, sys.executable, "-m", "steplint", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout)


def reported(done):
    return {(Path(d["filename"]).name, d["code"]) for d in json.loads(done.stdout)}


def messages(done):
    return {Path(d["filename"]).name: d["message"] for d in json.loads(done.stdout)}


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "good.py").write_text(BUGGY)
    return tmp_path


def check_json(tree, *args, **kwargs):
    return steplint("check", "--output-format", "json", *args, tree, **kwargs)


# -- encodings and contents ------------------------------------------------------------------------


def test_non_utf8_without_a_coding_comment(tree):
    (tree / "legacy.py").write_bytes(b"scaler = None\nname = 'caf\xe9'\n")
    done = check_json(tree)
    assert done.returncode == 1
    assert reported(done) == {("legacy.py", "SL001"), ("good.py", "SL101")}
    assert messages(done)["legacy.py"] == (
        "Cannot decode file as utf-8: invalid byte 0xe9 on line 2 (declare the encoding with a `# -*- coding: ... -*-` comment)"
    )


def test_latin1_with_a_coding_comment_is_linted_and_fixed_in_latin1(tree):
    source = "# -*- coding: latin-1 -*-\n# Entraînement à précision mixte\n" + BUGGY
    (tree / "good.py").write_bytes(source.encode("latin-1"))
    done = check_json(tree)
    assert reported(done) == {("good.py", "SL101")}
    assert steplint("check", "--fix", tree).returncode == 0
    raw = (tree / "good.py").read_bytes()
    assert raw.decode("latin-1") == "# -*- coding: latin-1 -*-\n# Entraînement à précision mixte\n" + FIXED
    assert b"Entra\xeenement \xe0 pr\xe9cision" in raw  # written back in latin-1, not UTF-8


def test_bom_is_kept(tree):
    (tree / "good.py").write_bytes(b"\xef\xbb\xbf" + BUGGY.encode())
    assert reported(check_json(tree)) == {("good.py", "SL101")}
    assert steplint("check", "--fix", tree).returncode == 0
    assert (tree / "good.py").read_bytes() == b"\xef\xbb\xbf" + FIXED.encode()


def test_utf16(tree):
    (tree / "wide.py").write_bytes(BUGGY.encode("utf-16"))
    done = check_json(tree)
    assert reported(done) == {("wide.py", "SL001"), ("good.py", "SL101")}
    assert "UTF-16" in messages(done)["wide.py"]


def test_nul_bytes_are_reported_where_they_are(tree):
    (tree / "nul.py").write_bytes(b"import torch\nscaler = 1\nx = 1\x00\n")
    done = check_json(tree)
    assert reported(done) == {("nul.py", "SL001"), ("good.py", "SL101")}
    [item] = [d for d in json.loads(done.stdout) if d["filename"].endswith("nul.py")]
    assert item["location"] == {"row": 3, "column": 6}
    assert "null bytes" in item["message"]


@pytest.mark.parametrize("content", ["", "   \n\t\n\n", "\n", "\r\n\r\n"], ids=["empty", "whitespace", "newline", "crlf-only"])
def test_empty_and_whitespace_only(tree, content):
    (tree / "blank.py").write_bytes(content.encode())
    done = check_json(tree, "--fix")
    assert reported(done) == set()
    assert (tree / "blank.py").read_bytes() == content.encode()


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_deeply_nested_code_gets_the_syntax_check_and_a_message(tree, jobs):
    """A flat sum of many terms is a syntax tree as deep as it is long: LibCST and the model take
    minutes over it, or overflow the C stack. It is bounded: named in a warning, not analysed,
    and the project index leaves it out too (it has a step to summarise)."""
    terms = " + ".join(f"w{i}" for i in range(1500))
    (tree / "generated.py").write_text(BUGGY + f"\n\ndef total():\n    return {terms}\n")
    done = check_json(tree, "--no-cache", "-j", jobs, timeout=120)
    assert done.returncode == 1 and reported(done) == {("good.py", "SL101")}, done.stderr
    assert "generated.py: not analysed: code nested more than 200 levels deep" in done.stderr
    again = check_json(tree, timeout=120)  # (never answered by the cache: named every time)
    again = check_json(tree, timeout=120)
    assert "generated.py: not analysed" in again.stderr


def test_20_mb_file_gets_the_syntax_check_and_a_message(tree):
    line = "QkFTRTY0IGRhdGEgdGhhdCBtYWtlcyB0aGlzIGZpbGUgaHVnZSBmb3IgdGhlIHRlc3Q=\n"
    blob = BUGGY + 'WEIGHTS = """\n' + line * (20_000_000 // len(line)) + '"""\n'
    (tree / "huge.py").write_text(blob)
    done = check_json(tree, "--fix")
    assert reported(done) == set()  # good.py fixed; huge.py not analysed
    assert "huge.py: not analysed: 20.0 million characters" in done.stderr
    assert (tree / "huge.py").read_text() == blob
    assert (tree / "good.py").read_text() == FIXED
    (tree / "huge.py").write_text(blob + "def broken(:\n")
    assert reported(check_json(tree)) == {("huge.py", "SL001")}


NESTED = {
    "parentheses": "x = " + "(" * 500 + "1" + ")" * 500 + "\n",
    "blocks": "".join("    " * i + "if x:\n" for i in range(500)) + "    " * 500 + "pass\n",
    "elif-chain": "if a:\n    pass\n" + "elif a:\n    pass\n" * 500,
    "unary": "x = " + "-" * 500 + "1\n",
    "conditional": "x = " + "a if b else " * 500 + "c\n",
    "calls": "x = f" + "()" * 500 + "\n",
}


def test_500_deep_nesting(tree):
    for shape, body in NESTED.items():
        (tree / f"deep_{shape}.py").write_text("scaler.step(optimizer)\n" + body)
    done = check_json(tree)
    assert "Traceback" not in done.stderr
    # Python itself refuses the first two; it accepts the others, and so does steplint.
    assert reported(done) == {("deep_parentheses.py", "SL001"), ("deep_blocks.py", "SL001"), ("good.py", "SL101")}
    checked = f" (checked with Python {sys.version_info[0]}.{sys.version_info[1]})"
    assert messages(done)["deep_parentheses.py"] == "Cannot parse: too many nested parentheses" + checked
    assert messages(done)["deep_blocks.py"] == "Cannot parse: too many levels of indentation" + checked


# -- what is not a plain readable file -------------------------------------------------------------


def test_broken_symlink(tree):
    (tree / "dangling.py").symlink_to(tree / "gone.py")
    done = check_json(tree)
    assert reported(done) == {("dangling.py", "SL001"), ("good.py", "SL101")}
    assert messages(done)["dangling.py"] == f"Cannot read file: broken symbolic link (to {tree / 'gone.py'})"


def test_symlink_loops(tree):
    (tree / "self.py").symlink_to(tree / "self.py")
    (tree / "a.py").symlink_to(tree / "b.py")
    (tree / "b.py").symlink_to(tree / "a.py")
    (tree / "sub").mkdir()
    (tree / "sub" / "up").symlink_to(tree)  # a folder loop: links to folders are not followed
    done = check_json(tree, timeout=60)
    assert reported(done) == {("self.py", "SL001"), ("a.py", "SL001"), ("b.py", "SL001"), ("good.py", "SL101")}
    assert set(messages(done).values()) >= {"Cannot read file: symbolic link loop"}


def test_folder_named_like_a_python_file(tree):
    (tree / "x.py").mkdir()
    (tree / "x.py" / "inner.py").write_text(BUGGY)
    assert reported(check_json(tree)) == {("inner.py", "SL101"), ("good.py", "SL101")}
    assert reported(steplint("check", "--output-format", "json", tree / "x.py")) == {("inner.py", "SL101")}


def test_fifo_is_skipped_never_read(tree):
    os.mkfifo(tree / "y.py")
    for target in (tree, tree / "y.py"):  # found in a folder, or named
        done = check_json(target, timeout=60)  # reading a FIFO would block forever
        assert "y.py: skipped: not a regular file (a FIFO)" in done.stderr
    assert reported(check_json(tree, timeout=60)) == {("good.py", "SL101")}


def test_unreadable_file(tree):
    (tree / "secret.py").write_text(BUGGY)
    (tree / "secret.py").chmod(0)
    done = check_json(tree, as_user=True)
    assert reported(done) == {("secret.py", "SL001"), ("good.py", "SL101")}
    assert messages(done)["secret.py"] == "Cannot read file: Permission denied"


# -- writing fixes -----------------------------------------------------------------------------------


def test_fix_of_a_read_only_file(tree):
    (tree / "locked.py").write_text(BUGGY)
    (tree / "locked.py").chmod(0o444)
    done = steplint("check", "--fix", tree, as_user=True)
    assert done.returncode == 1
    assert "locked.py: cannot write the fixed file: it is read-only; the file was left unmodified" in done.stderr
    assert "locked.py:19:9: SL101" in done.stdout  # its diagnostic stays
    assert (tree / "locked.py").read_text() == BUGGY
    assert (tree / "good.py").read_text() == FIXED


def test_fix_in_a_read_only_folder(tree):
    folder = tree / "vendored"
    folder.mkdir()
    (folder / "train.py").write_text(BUGGY)
    folder.chmod(0o555)
    try:
        done = steplint("check", "--fix", tree, as_user=True)
    finally:
        folder.chmod(0o755)
    assert done.returncode == 1
    assert "train.py: cannot write the fixed file (its folder: Permission denied); the file was left unmodified" in done.stderr
    assert (folder / "train.py").read_text() == BUGGY
    assert not list(folder.iterdir())[1:]  # no temporary file left behind
    assert (tree / "good.py").read_text() == FIXED


@pytest.fixture
def immutable():
    marked = []

    def mark(path):
        if not shutil.which("chattr") or subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode:
            pytest.skip("chattr +i is not available here")
        marked.append(path)

    yield mark
    for path in marked:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_fix_of_an_immutable_file_and_in_an_immutable_folder(tree, immutable):
    (tree / "locked.py").write_text(BUGGY)
    folder = tree / "frozen"
    folder.mkdir()
    (folder / "train.py").write_text(BUGGY)
    immutable(tree / "locked.py")
    immutable(folder)
    done = steplint("check", "--fix", tree)
    assert done.returncode == 1
    assert "locked.py: cannot write the fixed file" in done.stderr and "frozen/train.py: cannot write the fixed file" in done.stderr
    assert (tree / "locked.py").read_text() == BUGGY and (folder / "train.py").read_text() == BUGGY
    assert (tree / "good.py").read_text() == FIXED


# -- names -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["my project/train loop.py", "обучение/训练 ü.py", "-x.py"])
def test_awkward_paths(tree, name):
    path = tree / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(BUGGY)
    done = steplint("check", "--output-format", "json", "--", name, cwd=tree)
    assert [(Path(d["filename"]), d["code"]) for d in json.loads(done.stdout)] == [(path.resolve(), "SL101")]
    assert steplint("check", "--fix", "--", name, cwd=tree).returncode == 0
    assert path.read_text() == FIXED


# -- interruption and concurrency ------------------------------------------------------------------


def _many(tree, count):
    paths = []
    for i in range(count):
        path = tree / f"package_{i // 20}" / f"train_{i}.py"
        path.parent.mkdir(exist_ok=True)
        path.write_text(BUGGY)
        paths.append(path)
    return paths


def test_interrupt_during_fix_leaves_every_file_old_or_new(tree):
    """Whenever the SIGINT lands before the run ends (mid-fix, or while it prints and exits), the
    status is 130; wherever it lands, each file is old or new."""
    paths = _many(tree, 240)
    process = subprocess.Popen([sys.executable, "-m", "steplint", "check", "--fix", str(tree)], start_new_session=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while process.poll() is None and time.monotonic() < deadline and not any(p.read_text() == FIXED for p in paths):
        time.sleep(0.05)
    ended_before = process.poll() is not None
    if not ended_before:
        os.killpg(process.pid, signal.SIGINT)  # as Ctrl-C does: the whole process group
    _, err = process.communicate(timeout=300)
    states = [p.read_text() for p in paths]
    assert set(states) <= {BUGGY, FIXED}  # nothing truncated or half-written
    assert not list(tree.rglob(".steplint-*"))  # no temporary file left behind
    if ended_before:
        return  # (the run finished before the signal: nothing interrupted)
    assert process.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err


def test_two_fix_runs_at_once(tree):
    paths = _many(tree, 24)
    command = [sys.executable, "-m", "steplint", "check", "--fix", str(tree)]
    runs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [run.communicate(timeout=600) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], results
    assert all(p.read_text() == FIXED for p in paths + [tree / "good.py"])
    assert not list(tree.rglob(".steplint-*"))


# -- paths -------------------------------------------------------------------------------------------


def test_a_file_name_that_is_not_utf8_is_checked_and_fixed(tree):
    name = os.fsdecode(b"caf\xe9.py")
    (tree / name).write_text(BUGGY)
    for jobs in ("1", "2"):  # (a project index of one file, and the cache, read the name too)
        done = check_json(tree, "-j", jobs)
        assert done.returncode == 1 and reported(done) == {(name, "SL101"), ("good.py", "SL101")}, done.stderr
    done = steplint("check", "--fix", tree)
    assert done.returncode == 0, done.stderr
    assert (tree / name).read_text() == FIXED and (tree / "good.py").read_text() == FIXED


@pytest.mark.parametrize("named", ["deleted.py", "gone/"])
def test_a_path_that_does_not_exist_is_named_and_the_others_are_checked(tree, named):
    """pre-commit and editors hand over files deleted or renamed since: a warning, as ruff gives."""
    done = steplint("check", "--output-format", "json", tree / named, tree / "good.py")
    assert done.returncode == 1
    assert reported(done) == {("good.py", "SL101")}
    assert f"steplint: warning: {tree / named}: no such file or directory" in done.stderr
    clean = tree / "clean.py"
    clean.write_text("x = 1\n")
    assert steplint("check", tree / named, clean).returncode == 0  # the status is what the files found


def test_an_unreadable_folder_is_named_in_a_warning(tree):
    folder = tree / "private"
    folder.mkdir()
    (folder / "train.py").write_text(BUGGY)
    folder.chmod(0)
    try:
        done = check_json(tree, as_user=True)
    finally:
        folder.chmod(0o755)
    assert done.returncode == 1 and reported(done) == {("good.py", "SL101")}
    assert f"steplint: warning: {folder}: cannot read folder: Permission denied; its files were not checked" in done.stderr


# -- stdin -------------------------------------------------------------------------------------------


def stdin_run(data: bytes, *args):
    return subprocess.run([sys.executable, "-m", "steplint", "check", *args, "-"], input=data, capture_output=True, timeout=300)


def test_stdin_that_is_not_utf8_is_sl001_not_a_traceback():
    done = stdin_run(b"scaler = None\nname = 'caf\xe9'\n", "--output-format", "json")
    assert done.returncode == 1 and b"Traceback" not in done.stderr
    [diagnostic] = json.loads(done.stdout)
    assert diagnostic["code"] == "SL001" and "invalid byte 0xe9 on line 2" in diagnostic["message"]
    fixed = stdin_run(b"name = 'caf\xe9'\n", "--fix")
    assert fixed.stdout == b"name = 'caf\xe9'\n" and b"SL001" in fixed.stderr  # the buffer back, unchanged


def test_stdin_with_a_utf8_bom_is_read_as_python_reads_it():
    source = "\ufeff" + BUGGY
    done = stdin_run(source.encode("utf-8"), "--output-format", "json")
    assert [d["code"] for d in json.loads(done.stdout)] == ["SL101"]
    fixed = stdin_run(source.encode("utf-8"), "--fix")
    assert fixed.stdout == ("\ufeff" + FIXED).encode("utf-8")


def test_stdin_fix_keeps_crlf_line_breaks():
    fixed = stdin_run(BUGGY.replace("\n", "\r\n").encode(), "--fix")
    assert fixed.returncode == 0, fixed.stderr
    assert fixed.stdout == FIXED.replace("\n", "\r\n").encode()


# -- the fixed file's identity -------------------------------------------------------------------------


def test_fix_keeps_the_owner_group_and_mode_of_another_users_file(tree):
    if os.geteuid() != 0:
        pytest.skip("only root can make a file another user's")
    (tree / "good.py").chmod(0o640)
    os.chown(tree / "good.py", 12345, 23456)
    done = steplint("check", "--fix", tree)
    assert done.returncode == 0, done.stderr
    after = os.stat(tree / "good.py")
    assert (after.st_uid, after.st_gid, after.st_mode & 0o7777) == (12345, 23456, 0o640)
    assert (tree / "good.py").read_text() == FIXED


def test_fix_keeps_hard_links(tree):
    os.link(tree / "good.py", tree / "linked.txt")
    inode = os.stat(tree / "good.py").st_ino
    done = steplint("check", "--fix", tree / "good.py")
    assert done.returncode == 0, done.stderr
    assert os.stat(tree / "good.py").st_ino == inode and os.stat(tree / "good.py").st_nlink == 2
    assert (tree / "linked.txt").read_text() == FIXED  # the same file under its other name
    assert not [p for p in tree.iterdir() if p.name.startswith(".steplint-")]
