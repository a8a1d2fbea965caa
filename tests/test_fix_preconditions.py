"""The preconditions every fix is checked against on the text it would write (steplint/preconditions.py),
and report/fix agreement across fix rounds."""

from steplint.config import Settings
from steplint.engine import fix_source, lint_source
from steplint.fixes import SAFE, Edit, Fix
from steplint.preconditions import violations

LOOP = """def train(model, optimizer, scheduler, scaler, batches):
    for x in batches:
        scaler.scale(model(x)).backward()
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        log(x)
"""


def _insert(text, anchor, content, replace=""):
    start = text.index(anchor)
    return Edit(start, start + len(replace), content)


def _gate(extra=()):
    edits = (
        _insert(LOOP, "scaler.step(", "committed = committed_step(scaler, ", "scaler.step("),
        _insert(LOOP, "scheduler.step()", "if committed:\n            "),
    ) + tuple(extra)
    return Fix("gate", SAFE, edits, gate="committed")


def test_a_gate_that_changes_nothing_else_passes():
    assert violations(LOOP, _gate()) == []


def test_a_gate_that_also_drops_a_statement_is_caught():
    start = LOOP.index("        log(x)")
    dropped = _gate([Edit(start, start + len("        log(x)\n"), "")])
    assert violations(LOOP, dropped) == ["with every update committed, the fixed code would not do what the original does"]


def test_a_gate_that_also_moves_a_statement_into_it_is_caught():
    start = LOOP.index("        log(x)")
    moved = _gate([Edit(start, start + len("        log(x)\n"), ""), _insert(LOOP, "        scaler.update()", "        log(x)\n")])
    assert violations(LOOP, moved) == ["with every update committed, the fixed code would not do what the original does"]


def test_a_flag_set_on_one_branch_only_is_unbound_on_the_other():
    text = LOOP.replace("        scaler.step(optimizer)\n", "        if amp:\n            scaler.step(optimizer)\n        else:\n            optimizer.step()\n")
    edits = (
        _insert(text, "scaler.step(", "committed = committed_step(scaler, ", "scaler.step("),
        _insert(text, "scheduler.step()", "if committed:\n            "),
    )
    assert violations(text, Fix("gate", SAFE, edits, gate="committed")) == ["`committed` may not exist yet where the fix would read it"]
    with_start = edits + (_insert(text, "if amp:", "committed = True\n        "),)
    assert violations(text, Fix("gate", SAFE, with_start, gate="committed")) == []


def test_a_restore_before_the_object_is_built_or_before_it_is_built_again():
    text = "def main(path, model):\n    state = load(path)\n    model.load(state)\n    scaler = GradScaler()\n    return scaler\n"
    restore = Fix("restore", SAFE, (_insert(text, "    scaler = ", "    scaler.load_state_dict(state)\n"),))
    assert violations(text, restore) == ["`scaler` may not exist yet where the fix would read it"]
    built_twice = "def main(path, model):\n    scaler = GradScaler()\n    state = load(path)\n    model.load(state)\n    scaler = GradScaler(2.0)\n    return scaler\n"
    restore = Fix("restore", SAFE, (_insert(built_twice, "    scaler = GradScaler(2.0)", "    scaler.load_state_dict(state)\n"),))
    assert violations(built_twice, restore) == ["`scaler` is built again at line 5, after the fix would restore it"]



# Only the top-level statements a fix touches are parsed again; the verdicts must be those on the whole fixed module.

SCRIPT = """import torch

scaler = torch.amp.GradScaler("cpu")


def helper():
    return 1


for x in batches:
    scaler.scale(model(x)).backward()
    scaler.step(optimizer)
    scaler.update()
    scheduler.step()

state = torch.load(path)
"""


def test_a_module_name_bound_by_a_statement_the_fix_leaves_is_bound():
    gate = Fix("gate", SAFE, (
        _insert(SCRIPT, "scaler.step(", "committed = committed_step(scaler, ", "scaler.step("),
        _insert(SCRIPT, "scheduler.step()", "if committed:\n        "),
    ), gate="committed")
    assert violations(SCRIPT, gate) == []
    too_early = Fix("restore", SAFE, (_insert(SCRIPT, "for x in", "scaler.load_state_dict(state)\n"),))
    assert violations(SCRIPT, too_early) == ["`state` may not exist yet where the fix would read it"]


def test_inserted_text_that_parses_only_with_its_neighbours_is_judged_on_the_whole_module():
    text = "def f():\n    x = 1\n\nprint(1)\n"
    into_the_function = Fix("append", SAFE, (_insert(text, "\nprint", "    y = x\n"),))  # indented after the body: still f's
    assert violations(text, into_the_function) == []
    unclosed = Fix("open", SAFE, (_insert(text, "\nprint", "z = (\n"),))
    assert violations(text, unclosed) == ["the fixed module would not parse"]


def test_rows_after_text_inserted_above_are_those_of_the_original():
    text = "import torch\n\n\ndef main(path):\n    scaler = GradScaler()\n    state = load(path)\n    scaler = GradScaler(2.0)\n    return scaler\n"
    restore = Fix("restore", SAFE, (
        _insert(text, "\n\ndef main", "\ndef committed_step(scaler, optimizer):\n    return True\n"),
        _insert(text, "    scaler = GradScaler(2.0)", "    scaler.load_state_dict(state)\n", "    scaler = GradScaler(2.0)\n"),
        _insert(text, "    return scaler", "    scaler = GradScaler(2.0)\n"),
    ))
    assert violations(text, restore) == ["`scaler` is built again at line 8, after the fix would restore it"]


SAVED_LATER = '''import torch


class Trainer:
    def __init__(self, model):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: min(1.0, (s + 1) / 10))

    def step(self, loss):
        loss.backward()
        self.optimizer.step()
        self.scheduler.step()

    def save(self, path):
        torch.save({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}, path)

    def load(self, path):
        checkpoint = torch.load(path)
        self.model.load_state_dict(checkpoint["model"])
        self.optimizer.load_state_dict(checkpoint["optimizer"])
'''


def test_a_fix_the_first_report_did_not_show_waits_for_the_next_run():
    shown = {d.code: d.fix for d in lint_source("t.py", SAVED_LATER, Settings())}
    assert shown["SL302"] is not None and shown["SL303"] is None  # nothing saves the scheduler yet
    first = fix_source("t.py", SAVED_LATER, Settings(), unsafe_fixes=True)
    assert '"scheduler": self.scheduler.state_dict()' in first.text
    assert "self.scheduler.load_state_dict" not in first.text  # shown without a fix: not changed
    assert [d.code for d in first.remaining if d.fix is not None] == ["SL303"]  # the next report shows it
    second = fix_source("t.py", first.text, Settings(), unsafe_fixes=True)
    assert "self.scheduler.load_state_dict" in second.text



def test_no_scaler_method_is_called_on_a_name_that_holds_a_stand_in_on_some_path():
    # (the fixture's trainer holds a no-op stand-in when its switch is off: the clip is reported, with no fix;
    # with a GradScaler on both paths, the fix is offered)
    from pathlib import Path

    path = Path(__file__).parent.parent / "fixtures" / "SL201" / "grad_scaler_switch_turned_on" / "vae2_trainer.py"
    text = path.read_text()
    always = text.replace("self.grad_scalar = NoScaling2()", 'self.grad_scalar = torch.amp.GradScaler("cuda")')
    for source, fixed in ((text, False), (always, True)):
        found = [d for d in lint_source("vae2_trainer.py", source, Settings()) if d.code == "SL201"]
        assert len(found) == 1 and (found[0].fix is not None) == fixed
        # and the gate of a scheduler after the step, which calls `committed_step(self.grad_scalar, ...)`
        scheduled = source.replace("        self.grad_scalar.update()\n", "        self.grad_scalar.update()\n        self.scheduler.step()\n").replace(
            "        if not cfg.trainer", "        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: min(1.0, s / 100))\n        if not cfg.trainer")
        found = [d for d in lint_source("vae2_trainer.py", scheduled, Settings()) if d.code == "SL101"]
        assert len(found) == 1 and (found[0].fix is not None) == fixed
