"""What a run says besides the diagnostics: the rule catalogue's columns, no Python files found,
hidden unsafe fixes, and which `# noqa` codes SL002 judges."""

import json
import re
import subprocess
import sys

from steplint.rule import all_rules

from conftest import FIXTURES


def steplint(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "steplint", *map(str, args)], capture_output=True, text=True, cwd=cwd)


def test_rule_catalogue_columns_are_aligned_and_apart():
    lines = steplint("rule", "--all").stdout.splitlines()
    rules = all_rules()
    assert len(lines) == len(rules)
    starts = set()
    for line, rule in zip(lines, rules.values()):
        cells = re.split(r"\s{2,}", line, maxsplit=3)
        assert cells[:2] == [rule.code, rule.name] and cells[3] == rule.summary, line
        starts.add(tuple(line.index(cell) for cell in cells[1:3]))
    assert len(starts) == 1  # every name and every fix word start in the same column


def test_no_python_files_is_a_warning(tmp_path):
    (tmp_path / "README.md").write_text("# nothing to check\n")
    done = steplint("check", tmp_path)
    assert done.returncode == 0
    assert "warning: No Python files found under the given path(s)" in done.stderr


def test_hidden_unsafe_fixes_are_counted_with_and_without_fix(tmp_path):
    target = tmp_path / "train.py"
    target.write_text((FIXTURES / "SL102" / "nanogpt_style.py").read_text())
    found = json.loads(steplint("check", "--output-format", "json", target).stdout)
    hidden = sum(1 for d in found if d["fix"] and d["fix"]["applicability"] == "unsafe")
    assert hidden >= 1
    line = f"{hidden} hidden {'fix' if hidden == 1 else 'fixes'} can be enabled with the `--unsafe-fixes` option."
    assert line in steplint("check", target).stdout
    assert line in steplint("check", "--fix", target).stdout
    assert "can be enabled with the `--unsafe-fixes` option" not in steplint("check", "--fix", "--unsafe-fixes", target).stdout


def test_unused_noqa_judges_steplint_codes_only(tmp_path):
    target = tmp_path / "module.py"
    target.write_text(
        "import torch\n"
        "torch.save({}, 'x.pt')  # noqa: SLOT000\n"
        "torch.save({}, 'y.pt')  # noqa: SLF001, SL101\n"
        "torch.save({}, 'z.pt')  # noqa: SL999\n"
    )
    found = json.loads(steplint("check", "--output-format", "json", target).stdout)
    assert [(d["location"]["row"], d["message"]) for d in found] == [
        (3, "Unused `noqa` directive (suppresses nothing: `SL101`)"),
        (4, "Unused `noqa` directive (suppresses nothing: `SL999`)"),
    ]


MULTI_LINE_CONDITION = '''import torch


def train(model, loader, optimizer, scheduler):
    scaler = torch.amp.GradScaler("cuda")
    for batch in loader:
        scaler.scale(model(batch).mean()).backward()
        scale_before = scaler.get_scale()
        scaler.step(optimizer)
        scaler.update()
        if (scaler.get_scale()
                == scale_before):
            scheduler.step()
'''


def test_a_condition_written_on_two_lines_is_quoted_on_one(tmp_path):
    target = tmp_path / "train.py"
    target.write_text(MULTI_LINE_CONDITION)
    text = steplint("check", "--output-format", "concise", target).stdout
    found = json.loads(steplint("check", "--output-format", "json", target).stdout)
    quoting = [d["message"] for d in found if "scale_before" in d["message"]]
    assert quoting and all("\n" not in message for message in quoting)
    assert "`scaler.get_scale() == scale_before`" in quoting[0]
    assert sum("SL105" in line for line in text.splitlines()) == 1 and "scaler.get_scale() == scale_before`" in text
