"""Colour: `--color auto|always|never`, NO_COLOR, FORCE_COLOR / CLICOLOR_FORCE; never into a pipe
or `-o FILE` unless `--color always`. A terminal is a real pseudo-terminal."""

import os
import pty
import subprocess
import sys

import pytest

from conftest import FIXTURES

BUGGY = (FIXTURES / "SL101" / "plain_amp_script.py").read_text()
ANSI = "\x1b["


@pytest.fixture
def target(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(BUGGY)
    return path


def environment(**variables):
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "CLICOLOR_FORCE")}
    env.update(variables)
    return env


def piped(*args, **variables):
    return subprocess.run([sys.executable, "-m", "steplint", "check", *map(str, args)], capture_output=True, text=True,
                          env=environment(**variables)).stdout


def on_a_terminal(*args, **variables):
    leader, follower = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "steplint", "check", *map(str, args)], stdout=follower,
                               stderr=subprocess.DEVNULL, env=environment(**variables))
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the other side closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    process.wait()
    os.close(leader)
    return b"".join(chunks).decode()


def test_terminal_gets_colour_by_default(target):
    out = on_a_terminal(target)
    assert "SL101" in out and ANSI in out


def test_no_color_turns_the_terminal_colour_off(target):
    out = on_a_terminal(target, NO_COLOR="1")
    assert "SL101" in out and ANSI not in out


def test_color_never_wins_on_a_terminal(target):
    out = on_a_terminal("--color", "never", target)
    assert "SL101" in out and ANSI not in out


def test_pipe_gets_no_colour(target):
    out = piped(target)
    assert "SL101" in out and ANSI not in out


@pytest.mark.parametrize("variables", [{"FORCE_COLOR": "1"}, {"CLICOLOR_FORCE": "1"}, {"FORCE_COLOR": "1", "NO_COLOR": "1"}])
def test_force_color_colours_a_pipe(target, variables):
    assert ANSI in piped(target, **variables)


def test_force_color_0_does_not_force(target):
    assert ANSI not in piped(target, FORCE_COLOR="0")


def test_color_always_colours_a_pipe_and_never_beats_force_color(target):
    assert ANSI in piped("--color", "always", target, NO_COLOR="1")
    assert ANSI not in piped("--color", "never", target, FORCE_COLOR="1")


def test_output_file_gets_no_colour_even_when_forced(target, tmp_path):
    report = tmp_path / "report.txt"
    piped("-o", report, target, FORCE_COLOR="1")
    text = report.read_text()
    assert "SL101" in text and ANSI not in text
    piped("-o", report, "--color", "always", target)
    assert ANSI in report.read_text()
