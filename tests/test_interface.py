"""Configuration, suppression, output formats and stdin, through the real command line."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES

BUGGY = (FIXTURES / "SL101" / "plain_amp_script.py").read_text().replace("  # expect: SL101", "")
COUNTER = (
    (FIXTURES / "SL102" / "nanogpt_style.py").read_text()
    .replace("  # expect: SL102", "").replace("  # expect: SL302", "")
    .replace('"iter_num": iter_num}', '"iter_num": iter_num, "scaler": scaler.state_dict()}')
)


def steplint(*args, cwd=None, input=None):
    return subprocess.run([sys.executable, "-m", "steplint", *args], capture_output=True, text=True, cwd=cwd, input=input)


def codes(done):
    return sorted((Path(d["filename"]).name, d["code"]) for d in json.loads(done.stdout))


@pytest.fixture
def project(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(BUGGY)
    (tmp_path / "src" / "pretrain.py").write_text(COUNTER)
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "legacy.py").write_text(BUGGY)
    return tmp_path


# -- configuration ----------------------------------------------------------------------------------


def test_pyproject_select_ignore_and_per_file_ignores(project):
    (project / "pyproject.toml").write_text(
        '[project]\nname = "demo"\n\n[tool.steplint]\nselect = ["SL1"]\nignore = ["SL102"]\n'
        '[tool.steplint.per-file-ignores]\n"scripts/*" = ["SL101"]\n'
    )
    done = steplint("check", "--output-format", "json", ".", cwd=project)
    assert codes(done) == [("train.py", "SL101")]
    # found upward from a checked subfolder too
    assert codes(steplint("check", "--output-format", "json", "src", cwd=project)) == [("train.py", "SL101")]
    assert codes(steplint("check", "--output-format", "json", "train.py", cwd=project / "src")) == [("train.py", "SL101")]


def test_fix_honours_the_configuration(project):
    (project / "pyproject.toml").write_text('[tool.steplint.per-file-ignores]\n"scripts/*" = ["SL101"]\n')
    steplint("check", "--fix", ".", cwd=project)
    assert "committed_step" in (project / "src" / "train.py").read_text()
    assert (project / "scripts" / "legacy.py").read_text() == BUGGY


def test_steplint_toml_wins_over_pyproject(project):
    (project / "pyproject.toml").write_text('[tool.steplint]\nselect = ["SL102"]\n')
    (project / "steplint.toml").write_text('select = ["SL101"]\n')
    assert {c for _, c in codes(steplint("check", "--output-format", "json", ".", cwd=project))} == {"SL101"}


def test_config_option_and_command_line_overrides(project):
    config = project / "ci.toml"
    config.write_text('ignore = ["SL101"]\n')
    assert {c for _, c in codes(steplint("check", "--output-format", "json", "--config", str(config), ".", cwd=project))} == {"SL102"}
    over = steplint("check", "--output-format", "json", "--config", str(config), "--select", "SL101", ".", cwd=project)
    assert codes(over) == []  # --select replaces the selection; the file's ignore still applies
    assert {c for _, c in codes(steplint("check", "--output-format", "json", "--ignore", "SL102", ".", cwd=project))} == {"SL101"}


@pytest.mark.parametrize(
    "body,key",
    [
        ('selct = ["SL101"]\n', "selct"),
        ('select = ["SL999"]\n', "SL999"),
        ('select = "SL101"\n', "select"),
        ('schedule-basis = "steps"\n', "schedule-basis"),
        ('fix-gate = "magic"\n', "fix-gate"),
        ('[per-file-ignores]\n"a.py" = ["XX1"]\n', "per-file-ignores"),
        ('[roles]\nschedular = ["x"]\n', "roles.schedular"),
        ("select = [\n", "invalid TOML"),
    ],
)
def test_bad_configuration_exits_2_naming_file_and_key(project, body, key):
    (project / "steplint.toml").write_text(body)
    done = steplint("check", ".", cwd=project)
    assert done.returncode == 2
    assert "steplint.toml" in done.stderr and key in done.stderr


def test_bad_pyproject_names_the_table(project):
    (project / "pyproject.toml").write_text('[tool.steplint]\nextend_exclude = ["x"]\n')
    done = steplint("check", ".", cwd=project)
    assert done.returncode == 2 and "pyproject.toml [tool.steplint]" in done.stderr and "extend_exclude" in done.stderr


@pytest.mark.parametrize("body", ['[tool.steplint]\nselect = ["SL101"\n', '[project]\nname = "x\n[tool.steplint]\nselect = ["SL101"]\n'])
def test_a_pyproject_that_is_not_toml_is_an_error_naming_file_and_position(project, body):
    """Not a silent fallback to the defaults: it may hold the project's steplint table."""
    (project / "pyproject.toml").write_text(body)
    for args in (["."], ["-", "--stdin-filename", "src/train.py"]):
        done = steplint("check", *args, cwd=project, input="x = 1\n")
        assert done.returncode == 2, done.stderr
        assert re.search(r"pyproject\.toml: invalid TOML: .*\((at line \d+, column \d+|at end of document)\)", done.stderr), done.stderr
        assert "Traceback" not in done.stderr


def test_schedule_basis_setting_and_intent_comment(project):
    assert codes(steplint("check", "--output-format", "json", "src/train.py", cwd=project)) == [("train.py", "SL101")]
    (project / "steplint.toml").write_text('schedule-basis = "tokens"\n')
    assert codes(steplint("check", "--output-format", "json", "src/train.py", cwd=project)) == []


def test_fix_gate_import(project):
    (project / "steplint.toml").write_text('fix-gate = "import"\n')
    steplint("check", "--fix", "src/train.py", cwd=project)
    fixed = (project / "src" / "train.py").read_text()
    assert "from steplint.runtime import committed_step\n" in fixed
    assert "def committed_step" not in fixed
    assert steplint("check", "src/train.py", cwd=project).returncode == 0


def test_declared_role_names(tmp_path):
    source = BUGGY.replace("scheduler = LambdaLR(", "warmup_policy = make_policy(").replace("scheduler.step()", "warmup_policy.step()")
    (tmp_path / "train.py").write_text(source)
    assert codes(steplint("check", "--output-format", "json", ".", cwd=tmp_path)) == []
    (tmp_path / "steplint.toml").write_text('[roles]\nscheduler = ["warmup_policy"]\n')
    assert codes(steplint("check", "--output-format", "json", ".", cwd=tmp_path)) == [("train.py", "SL101")]


UNKNOWN_FRAMEWORK = """\
from fastwrap import Wrapper


def train(model, optimizer, loader, scheduler):
    wrapper = Wrapper(loss_scale="dynamic")
    model, booster_optimizer = wrapper.wrap(model, optimizer)
    for batch in loader:
        wrapper.backward(model(batch).mean(), booster_optimizer)
        booster_optimizer.step()
        scheduler.step()
        booster_optimizer.zero_grad()
"""


def test_declared_skippable_optimizer(tmp_path):
    (tmp_path / "train.py").write_text(UNKNOWN_FRAMEWORK)
    assert codes(steplint("check", "--output-format", "json", ".", cwd=tmp_path)) == []  # a step steplint cannot tell skips
    (tmp_path / "steplint.toml").write_text('[roles]\nskippable-optimizer = ["booster_optimizer"]\n')
    done = steplint("check", "--output-format", "json", ".", cwd=tmp_path)
    assert codes(done) == [("train.py", "SL101")]
    [item] = json.loads(done.stdout)
    assert item["fix"] is None and "declares this optimizer skippable" in item["message"]


COLOSSAL = """\
from colossalai.booster import Booster
from colossalai.booster.plugin import LowLevelZeroPlugin


def train(model, optimizer, loader, scheduler):
    booster = Booster(plugin=LowLevelZeroPlugin(precision="{precision}"))
    model, booster_optimizer, *_ = booster.boost(model, optimizer)
    for batch in loader:
        booster.backward(model(batch).mean(), booster_optimizer)
        booster_optimizer.step()
        scheduler.step()
        booster_optimizer.zero_grad()
"""


def test_colossalai_fp16_steps_are_skippable_without_a_signal(tmp_path):
    (tmp_path / "train.py").write_text(COLOSSAL.format(precision="fp16"))
    done = steplint("check", "--output-format", "json", ".", cwd=tmp_path)
    [item] = json.loads(done.stdout)
    assert item["code"] == "SL101" and item["fix"] is None and "no signal of the skip" in item["message"]
    (tmp_path / "train.py").write_text(COLOSSAL.format(precision="bf16"))
    assert codes(steplint("check", "--output-format", "json", ".", cwd=tmp_path)) == []


def test_exclude_extend_exclude_and_force_exclude(project):
    (project / "steplint.toml").write_text('extend-exclude = ["scripts"]\n')
    assert {f for f, _ in codes(steplint("check", "--output-format", "json", ".", cwd=project))} == {"train.py", "pretrain.py"}
    explicit = steplint("check", "--output-format", "json", "scripts/legacy.py", cwd=project)
    assert codes(explicit) == [("legacy.py", "SL101")]  # named explicitly: checked, as ruff does
    forced = steplint("check", "--output-format", "json", "--force-exclude", "scripts/legacy.py", cwd=project)
    assert codes(forced) == [] and forced.returncode == 0


# -- suppression ------------------------------------------------------------------------------------


def test_noqa_on_the_last_line_of_a_multiline_statement(tmp_path):
    source = BUGGY.replace("        scheduler.step()\n", "        scheduler.step(\n        )  # noqa: SL101\n")
    (tmp_path / "train.py").write_text(source)
    assert steplint("check", "train.py", cwd=tmp_path).returncode == 0


def test_bare_noqa_and_file_level_exemption(tmp_path):
    (tmp_path / "a.py").write_text(BUGGY.replace("        scheduler.step()\n", "        scheduler.step()  # noqa\n"))
    (tmp_path / "b.py").write_text("# steplint: noqa\n" + BUGGY)
    assert steplint("check", ".", cwd=tmp_path).returncode == 0


def test_unused_noqa_is_reported_and_fixed_leaving_other_tools_codes(tmp_path):
    source = (FIXTURES / "SL101" / "ok_already_gated.py").read_text()
    source = source.replace("            scheduler.step()\n", "            scheduler.step()  # noqa: SL101, E501\n")
    source = source.replace("    step = 0\n", "    step = 0  # noqa: SL102\n")
    target = tmp_path / "train.py"
    target.write_text(source)
    found = json.loads(steplint("check", "--output-format", "json", "train.py", cwd=tmp_path).stdout)
    assert [(d["code"], d["location"]["row"]) for d in found] == [("SL002", 7), ("SL002", 14)]
    assert steplint("check", "--fix", "train.py", cwd=tmp_path).returncode == 0
    fixed = target.read_text()
    assert "scheduler.step()  # noqa: E501\n" in fixed
    assert "    step = 0\n" in fixed


def test_add_noqa_inserts_and_appends(tmp_path):
    target = tmp_path / "train.py"
    source = COUNTER.replace("    iter_num += 1\n", "    iter_num += 1  # noqa: E225\n") + "\n" + BUGGY
    target.write_text(source)
    done = steplint("check", "--add-noqa", "train.py", cwd=tmp_path)
    # SL102 and SL101, and SL302: the combined module's scheduler is missing from the checkpoint
    assert done.returncode == 0 and "Added 3 noqa directives." in done.stdout + done.stderr
    text = target.read_text()
    assert '"ckpt.pt")  # noqa: SL302\n' in text
    assert "    iter_num += 1  # noqa: E225, SL102\n" in text
    assert "        scheduler.step()  # noqa: SL101\n" in text
    assert steplint("check", "train.py", cwd=tmp_path).returncode == 0


# -- output formats ---------------------------------------------------------------------------------


def test_json_lines(project):
    lines = steplint("check", "--output-format", "json-lines", ".", cwd=project).stdout.splitlines()
    items = [json.loads(line) for line in lines]
    assert sorted(i["code"] for i in items) == ["SL101", "SL101", "SL102"]


def test_sarif_has_the_required_structure(project):
    log = json.loads(steplint("check", "--output-format", "sarif", ".", cwd=project).stdout)
    assert log["version"] == "2.1.0" and "$schema" in log
    [run] = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "steplint"
    rule_ids = [r["id"] for r in driver["rules"]]
    assert {"SL101", "SL102"} <= set(rule_ids)
    for rule in driver["rules"]:
        assert rule["shortDescription"]["text"] and "helpUri" not in rule  # no hosted docs to link to
    assert len(run["results"]) == 3
    for result in run["results"]:
        assert result["message"]["text"]
        assert rule_ids[result["ruleIndex"]] == result["ruleId"]
        [location] = result["locations"]
        region = location["physicalLocation"]["region"]
        assert location["physicalLocation"]["artifactLocation"]["uri"].endswith(".py")
        assert region["startLine"] >= 1 and region["startColumn"] >= 1
        for fix in result.get("fixes", []):
            assert fix["description"]["text"]
            for change in fix["artifactChanges"]:
                assert change["artifactLocation"]["uri"]
                for replacement in change["replacements"]:
                    assert set(replacement["deletedRegion"]) >= {"startLine", "startColumn"}
                    assert "text" in replacement["insertedContent"]
    assert any("fixes" in r for r in run["results"])


def test_github_workflow_commands(project):
    out = steplint("check", "--output-format", "github", ".", cwd=project).stdout
    pattern = re.compile(r"^::error title=(SL\d{3}),file=([^,:]+),line=(\d+),col=(\d+),endLine=(\d+),endColumn=(\d+)::(.+)$")
    lines = out.splitlines()
    assert len(lines) == 3
    for line in lines:
        match = pattern.match(line)
        assert match, line
        assert match.group(7).startswith(f"{match.group(2)}:{match.group(3)}:{match.group(4)}: {match.group(1)} ")


def test_output_file_statistics_and_quiet(project):
    done = steplint("check", "--output-format", "json", "--output-file", "report.json", ".", cwd=project)
    assert done.returncode == 1 and done.stdout == ""
    assert len(json.loads((project / "report.json").read_text())) == 3
    stats = steplint("check", "--statistics", ".", cwd=project).stdout
    assert re.search(r"^2\tSL101\t\[\*\] scheduler-step-on-skipped-update$", stats, re.M)
    assert re.search(r"^1\tSL102\tcounter-counts-skipped-updates$", stats, re.M)  # no fix: a cadence check reads it first
    quiet = steplint("check", "-q", "--output-format", "concise", ".", cwd=project).stdout
    assert "Found" not in quiet and len(quiet.splitlines()) == 3


def test_show_fixes_and_exit_non_zero_on_fix(tmp_path):
    (tmp_path / "train.py").write_text(BUGGY)
    done = steplint("check", "--fix", "--show-fixes", "--exit-non-zero-on-fix", "train.py", cwd=tmp_path)
    assert done.returncode == 1
    assert "- train.py:\n    1 × SL101 (scheduler-step-on-skipped-update)" in done.stdout
    assert steplint("check", "--fix", "--exit-non-zero-on-fix", "train.py", cwd=tmp_path).returncode == 0


# -- stdin ------------------------------------------------------------------------------------------


def test_stdin_reports_under_the_given_name(project):
    done = steplint("check", "--output-format", "concise", "--stdin-filename", "src/train.py", "-", cwd=project, input=BUGGY)
    assert done.returncode == 1 and done.stdout.startswith("src/train.py:19:9: SL101")


def test_stdin_fix_prints_the_fixed_source(project):
    done = steplint("check", "--fix", "--stdin-filename", "src/train.py", "-", cwd=project, input=BUGGY)
    assert done.returncode == 0
    assert "committed = committed_step(scaler, optimizer)" in done.stdout
    assert (project / "src" / "train.py").read_text() == BUGGY  # nothing written


def test_stdin_applies_per_file_ignores_of_the_name(project):
    (project / "pyproject.toml").write_text('[tool.steplint.per-file-ignores]\n"scripts/*" = ["SL101"]\n')
    done = steplint("check", "--stdin-filename", "scripts/legacy.py", "-", cwd=project, input=BUGGY)
    assert done.returncode == 0
    fixed = steplint("check", "--fix", "--stdin-filename", "scripts/legacy.py", "-", cwd=project, input=BUGGY)
    assert fixed.stdout == BUGGY


# -- progress ---------------------------------------------------------------------------------------


def test_progress_on_a_terminal_only_for_large_runs(tmp_path):
    for i in range(320):
        (tmp_path / f"m{i}.py").write_text("x = 1\n")
    primary, secondary = os.openpty()
    try:
        done = subprocess.run([sys.executable, "-m", "steplint", "check", "--output-format", "json", "."], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=secondary, text=True)
        os.close(secondary)
        err = b""
        while True:
            try:
                chunk = os.read(primary, 4096)
            except OSError:
                break
            if not chunk:
                break
            err += chunk
    finally:
        os.close(primary)
    assert b"checked 320/320 files" in err
    assert json.loads(done.stdout) == []  # machine output untouched
    piped = steplint("check", ".", cwd=tmp_path)
    assert "checked" not in piped.stderr


ATTEMPT_COUNTER = """\
import torch


def train(model, loader, optimizer, scheduler, save, args):
    scaler = torch.amp.GradScaler("cuda")
    global_step = 0
    if args.resume:  # (checkpoints that no run resumes from are exports: their names feed nothing)
        optimizer.load_state_dict(torch.load(args.resume)["optimizer"])
    for batch in loader:
        scaler.scale(model(batch).mean()).backward()
        scale_before = scaler.get_scale()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        if scale_before <= scaler.get_scale():
            scheduler.step()
        global_step += 1
        if global_step % args.save_steps == 0:
            save(model, global_step)
        warmup = min(1.0, global_step / args.warmup_steps)
        for group in optimizer.param_groups:
            group["lr"] = args.lr * warmup
"""


def test_hf_trainer_recipe_keeps_attempt_counters_quiet_but_not_lr_counters(tmp_path):
    (tmp_path / "train.py").write_text(ATTEMPT_COUNTER)
    assert ("train.py", "SL102") in codes(steplint("check", "--output-format", "json", ".", cwd=tmp_path))
    (tmp_path / "steplint.toml").write_text('recipe = "hf-trainer"\n')
    assert ("train.py", "SL102") in codes(steplint("check", "--output-format", "json", ".", cwd=tmp_path))  # it moves the LR
    (tmp_path / "train.py").write_text(ATTEMPT_COUNTER.split("        warmup =")[0])
    assert ("train.py", "SL102") not in codes(steplint("check", "--output-format", "json", ".", cwd=tmp_path))
    (tmp_path / "steplint.toml").unlink()
    assert ("train.py", "SL102") in codes(steplint("check", "--output-format", "json", ".", cwd=tmp_path))
    (tmp_path / "steplint.toml").write_text('recipe = "fairseq"\n')
    done = steplint("check", ".", cwd=tmp_path)
    assert done.returncode == 2 and "recipe" in done.stderr
