"""Options ruff users reach for, through the real command line: rule lookup by name, --fix-only,
fixable/unfixable, --show-settings/--show-files, the CLI's exclude and per-file-ignores, `extend`,
--isolated, --ignore-noqa, --add-noqa=REASON."""

import json
import subprocess
import sys

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
