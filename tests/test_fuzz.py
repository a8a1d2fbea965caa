"""A bounded, repeatable sample of benchmarks/fuzz.py: generated and mutated programs (and
notebooks) through lint and fix, round by round. The full runs are `python benchmarks/fuzz.py N`."""

import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import fuzz  # noqa: E402

SAMPLE = 60


def test_sample_of_fuzzed_programs_holds():
    report = fuzz.run(SAMPLE, seed=13, jobs=1, timeout=300)
    assert report.tried == SAMPLE
    assert dict(report.failures) == {}, report.examples
    assert report.held + report.timeouts + report.skipped == SAMPLE
    assert report.fixed > 0  # the sample reaches the fix checks, not only the linting


def test_sample_covers_every_kind_of_program():
    kinds = {fuzz.program(13, i)[0] for i in range(SAMPLE)}
    assert kinds == {"hypothesmith", "mutant", "notebook"}


def test_mutants_are_repeatable_and_differ_from_their_fixture():
    assert fuzz.program(13, 7) == fuzz.program(13, 7)
    originals = {text.encode("utf-8") for text in fuzz.seed_programs()}
    assert any(fuzz.program(13, i)[1] not in originals for i in range(5))


def test_a_string_of_many_parts_is_analysed_not_raised():
    """Found by the fuzz run over the standard library (pydoc_data/topics.py): LibCST's metadata
    recursed once per part of an implicitly concatenated string and raised RecursionError. Positions
    are now computed on demand, without that metadata: the file is analysed (nothing to report)."""
    from steplint.config import Settings
    from steplint.engine import fix_source, lint_source

    text = "import torch\nscaler = torch.amp.GradScaler()\nTOPICS = {'save': 'line'\n" + "".join(f"    ' part {i}'\n" for i in range(1500)) + "}\n"
    compile(text, "topics.py", "exec")
    assert lint_source("topics.py", text, Settings()) == []
    assert fix_source("topics.py", text, Settings(), unsafe_fixes=True).text == text


def test_update_with_more_arguments_is_reported_without_a_fix():
    """Found while fixing a fuzz failure (a comment inside `scaler.step(...)` was dropped by the
    fix): the rewrite also dropped any argument after the optimizer, which GradScaler passes on to
    optimizer.step(). committed_step takes none, so no fix is offered for such a call."""
    from steplint.config import Settings
    from steplint.engine import fix_source, lint_source

    text = (
        "def fit(net, opt, sched, scaler, batches, closure):\n"
        "    for x in batches:\n"
        "        scaler.scale(net(x).mean()).backward()\n"
        "        scaler.step(opt, closure)\n"
        "        scaler.update()\n"
        "        sched.step()\n"
    )
    [found] = [d for d in lint_source("fit.py", text, Settings()) if d.code == "SL101"]
    assert found.fix is None
    assert fix_source("fit.py", text, Settings(), unsafe_fixes=True).text == text


@pytest.mark.parametrize(
    "call, code",
    [("scaler.step(opt)\n        if old_scale <= scaler.get_scale(  # read after update\n        ):", "SL105"),
     ("opt.step(  # the plain step\n        )\n        if True:", "SL203")],
)
def test_an_expression_holding_a_comment_is_reported_without_a_fix(call, code):
    """Found by fuzzing: SL105 replaced a guessed condition, SL203 an `optimizer.step()` call, with
    the comments inside their brackets; such an expression keeps its diagnostic and gets no fix."""
    from steplint.config import Settings
    from steplint.engine import lint_source

    text = (
        "import torch\n\n\n"
        "def fit(net, sched, batches):\n"
        "    opt = torch.optim.SGD(net.parameters(), lr=0.1)\n"
        "    scaler = torch.amp.GradScaler('cuda')\n"
        "    for x in batches:\n"
        "        old_scale = scaler.get_scale()\n"
        "        scaler.scale(net(x).mean()).backward()\n"
        f"        {call}\n"
        "            sched.step()\n"
        "        scaler.update()\n"
    )
    found = [d for d in lint_source("fit.py", text, Settings()) if d.code == code]
    assert found and all(d.fix is None for d in found)
    assert [d.fix for d in lint_source("fit.py", text.replace("  # read after update", "").replace("  # the plain step", ""), Settings()) if d.code == code][0] is not None
