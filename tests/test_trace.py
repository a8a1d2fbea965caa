"""`steplint trace` draws the map a reader draws by hand.

The expected maps below were written by reading each example's code, not from the tool's output.
They hold the facts of the map (lines, units, what feeds what, diagnostic codes); the prose (the
evidence's and the diagnostics' wording) is checked for presence, not for its words."""

import json
import re
import subprocess
import sys

import pytest

from conftest import FIXTURES, ROOT


def trace(*args, cwd):
    done = subprocess.run([sys.executable, "-m", "steplint", "trace", *args], capture_output=True, text=True, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done.stdout


def trace_json(*paths, cwd):
    document = json.loads(trace("--output-format", "json", *paths, cwd=cwd))
    assert document["version"] == 1
    return document["loops"]


def essentials(loop: dict) -> dict:
    """The map's facts, as a reader writes them down."""
    return {
        "where": f"{loop['file']}:{loop['line']} {loop['function']}",
        "kind": loop["kind"],
        "helpers": [h.split(" ")[0] for h in loop["helpers"]],
        "updates": [(u["line"], u["steps"], u["skippable"], u["commit_signal"]) for u in loop["updates"]],
        "window": (loop["window"]["boundary"], loop["window"]["length"]) if loop["window"] else None,
        "counters": {
            c["name"]: {
                "unit": c["unit"], "declared": c["declared"], "incremented": c["incremented"], "runtime": c["runtime"],
                "feeds": [(x["kind"], x["line"], x["expects"], x["conflict"]) for x in c["consumers"]], "reported": c["reported"],
            }
            for c in loop["counters"]
        },
        "schedulers": [(s["name"], s["line"], s["stepped"], s["basis"]) for s in loop["schedulers"]],
        "checkpoints": [(c["line"], c["keys"], c["stores"]) for c in loop["checkpoints"]],
        "resume needs": {k: v for k, v in loop["resume"]["needs"].items() if v},
        "restores": [r["line"] for r in loop["resume"]["restores"]],
        "diagnostics": [(d["code"], d["line"]) for d in loop["diagnostics"]],
    }


def readme_example() -> str:
    text = (ROOT / "README.md").read_text()
    return next(b for b in re.findall(r"```python\n(.*?)```", text, re.S) if b.startswith("import torch\n\nmodel = torch.nn.Linear(8, 1)"))


# The README's first example: the batch index `i` decides the window; `global_step` advances once per
# window (attempts, skipped ones too) and ends the run; the scheduler steps every batch.
README_MAP = {
    "where": "train.py:10 <module>", "kind": "loop",
    "helpers": [],
    "updates": [(13, "scaler+optimizer", True, "none")],
    "window": ("(i + 1) % accum == 0", "accum"),
    "counters": {
        "i": {"unit": "batches", "declared": False, "incremented": [10], "runtime": "batches", "feeds": [("window", 12, "batches", False)], "reported": []},
        "global_step": {"unit": "windows", "declared": False, "incremented": [16], "runtime": "attempts", "feeds": [("stop", 18, None, False)], "reported": ["SL102"]},
    },
    "schedulers": [("scheduler", 17, "per batch", "committed-updates")],
    "checkpoints": [],
    "resume needs": {"scheduler": ["scheduler"], "scaler": ["scaler"], "counter": ["global_step"]},
    "restores": [],
    "diagnostics": [("SL102", 16), ("SL103", 17)],
}

# Multi-module fixtures: the update is made by a helper of another module, or the checkpoint is written by one.
FIXTURE_MAPS = {
    # amp_step (optim_utils.py) unscales, clips and steps the scaler: the call is the update; the
    # scheduler after it steps once per pass, on skipped updates too.
    "SL101/step_helper_module": [{
        "where": "train.py:12 train", "kind": "loop",
        "helpers": ["amp_step"],
        "updates": [(16, "scaler+optimizer", True, "none")],
        "window": None,
        "counters": {},
        "schedulers": [("scheduler", 17, "per attempted update", "committed-updates")],
        "checkpoints": [],
        "resume needs": {"scheduler": ["scheduler"], "scaler": ["scaler"]},
        "restores": [],
        "diagnostics": [("SL101", 17)],
    }],
    # The checkpoint is built key by key and written by utils.save_on_master; the scheduler steps per epoch.
    "SL302/saver_without_scaler": [{
        "where": "train.py:12 main", "kind": "loop",
        "helpers": [],
        "updates": [(16, "scaler+optimizer", True, "none")],
        "window": None,
        "counters": {},
        "schedulers": [("scheduler", 19, "outside the loop", "committed-updates")],
        "checkpoints": [(22, ["epoch", "model", "optimizer", "scheduler"], {"optimizer": ["optimizer"], "scheduler": ["scheduler"]})],
        "resume needs": {"scheduler": ["scheduler"], "scaler": ["scaler"]},
        "restores": [],
        "diagnostics": [("SL302", 22)],
    }],
    # train_one_epoch's loop steps the scaler; main's epoch loop drives it, steps the scheduler once per
    # epoch, and resumes through ckpt_utils.load_checkpoint, which restores the optimizer only.
    "SL303/split_resume": [
        {
            "where": "train.py:9 train_one_epoch", "kind": "loop",
            "helpers": [],
            "updates": [(14, "scaler+optimizer", True, "none")],
            "window": None, "counters": {}, "schedulers": [], "checkpoints": [],
            "resume needs": {"scaler": ["scaler"]}, "restores": [], "diagnostics": [],
        },
        {
            "where": "train.py:25 main", "kind": "loop",
            "helpers": ["train_one_epoch"],
            "updates": [(26, "scaler+optimizer", True, "none")],
            "window": None, "counters": {},
            "schedulers": [("scheduler", 27, "per helper loop", "committed-updates")],
            "checkpoints": [],
            "resume needs": {"scheduler": ["scheduler"], "scaler": ["scaler"]},
            "restores": [24],
            "diagnostics": [("SL303", 24)],
        },
    ],
    # Two loops, each updating through a helper of amp_helpers.py (the scaler's step is there).
    "SL202/caller_updates": [
        {
            "where": "train.py:8 train", "kind": "loop",
            "helpers": ["backward_and_step"],
            "updates": [(10, "scaler+optimizer", True, "none")],
            "window": None, "counters": {}, "schedulers": [], "checkpoints": [],
            "resume needs": {"scaler": ["scaler"]}, "restores": [], "diagnostics": [],
        },
        {
            "where": "train.py:17 finetune", "kind": "loop",
            "helpers": ["step_only"],
            "updates": [(19, "scaler+optimizer", True, "none")],
            "window": None, "counters": {}, "schedulers": [], "checkpoints": [],
            "resume needs": {"scaler": ["scaler"]}, "restores": [], "diagnostics": [],
        },
    ],
    # OptimizerGroup.step loops over the optimizers of one update: not a training loop. Trainer.train_step
    # is a step function: it updates once per call, through the group's step_main, and steps the
    # scheduler after it, on skipped updates too.
    "SL101/attribute_held_optimizers": [{
        "where": "trainer.py:15 Trainer.train_step", "kind": "step function",
        "helpers": ["OptimizerGroup.step_main"],
        "updates": [(17, "scaler+optimizer", True, "none")],
        "window": None, "counters": {},
        "schedulers": [("self.scheduler", 18, "per attempted update", "committed-updates")],
        "checkpoints": [],
        "resume needs": {"scheduler": ["self.scheduler"], "scaler": ["self.scaler"]},
        "restores": [], "diagnostics": [("SL101", 18)],
    }],
    # amp_step returns whether the update committed; the scheduler runs under that answer.
    "SL101/ok_helper_returns_commit": [{
        "where": "train.py:11 train", "kind": "loop",
        "helpers": ["amp_step"],
        "updates": [(13, "scaler+optimizer", True, "authoritative")],
        "window": None, "counters": {},
        "schedulers": [("scheduler", 15, "per committed update", "committed-updates")],
        "checkpoints": [],
        "resume needs": {"scheduler": ["scheduler"], "scaler": ["scaler"]},
        "restores": [], "diagnostics": [],
    }],
    # clip_gradients clips the still-scaled gradients; unscale_and_clip unscales first.
    "SL201/clip_in_helper": [
        {
            "where": "train.py:9 train", "kind": "loop",
            "helpers": ["clip_gradients"],
            "updates": [(12, "scaler+optimizer", True, "none")],
            "window": None, "counters": {}, "schedulers": [], "checkpoints": [],
            "resume needs": {"scaler": ["scaler"]}, "restores": [], "diagnostics": [("SL201", 11)],
        },
        {
            "where": "train.py:19 train_unscaled", "kind": "loop",
            "helpers": ["unscale_and_clip"],
            "updates": [(22, "scaler+optimizer", True, "none")],
            "window": None, "counters": {}, "schedulers": [], "checkpoints": [],
            "resume needs": {"scaler": ["scaler"]}, "restores": [], "diagnostics": [],
        },
    ],
    # one_step gathers micro-batches and finishes the update through stepping.finish_update; its own
    # `for held in pending` loop only runs backward passes.
    "SL202/ok_finishing_helper": [{
        "where": "steps.py:27 train", "kind": "loop",
        "helpers": ["finish_update", "one_step"],
        "updates": [(28, "scaler+optimizer", True, "none")],
        "window": None, "counters": {}, "schedulers": [], "checkpoints": [],
        "resume needs": {"scaler": ["grad_scaler"]}, "restores": [], "diagnostics": [],
    }],
    # rescale_gradients (a method of the same class) unscales; the loop may then skip step and update.
    "SL202/unscale_in_a_method": [{
        "where": "trainer.py:17 Trainer.train", "kind": "loop",
        "helpers": ["Trainer.rescale_gradients"],
        "updates": [(24, "scaler+optimizer", True, "none")],
        "window": None, "counters": {}, "schedulers": [], "checkpoints": [],
        "resume needs": {"scaler": ["self._scaler"]}, "restores": [], "diagnostics": [("SL202", 20)],
    }],
    # backward_pass scales the loss when it has a scaler; the first two loops step the scaler on that
    # branch and the optimizer on the other; the third steps the optimizer alone, on scaled gradients
    # (it still holds the scaler, whose scale a resume would need).
    "SL203/scaling_helper": [
        {
            "where": "loop.py:10 run_epoch", "kind": "loop",
            "helpers": ["backward_pass"],
            "updates": [(14, "scaler+optimizer", True, "none"), (17, "optimizer", False, "none")],
            "window": None, "counters": {}, "schedulers": [], "checkpoints": [],
            "resume needs": {"scaler": ["grad_scaler"]}, "restores": [], "diagnostics": [],
        },
        {
            "where": "loop.py:22 run_epoch_scaler_first", "kind": "loop",
            "helpers": ["backward_pass"],
            "updates": [(25, "optimizer", False, "none"), (27, "scaler+optimizer", True, "none")],
            "window": None, "counters": {}, "schedulers": [], "checkpoints": [],
            "resume needs": {"scaler": ["grad_scaler"]}, "restores": [], "diagnostics": [],
        },
        {
            "where": "loop.py:33 run_epoch_always_plain", "kind": "loop",
            "helpers": ["backward_pass"],
            "updates": [(35, "optimizer", False, "none")],
            "window": None, "counters": {}, "schedulers": [], "checkpoints": [],
            "resume needs": {"scaler": ["grad_scaler"]}, "restores": [], "diagnostics": [("SL203", 35)],
        },
    ],
    # Both savers of checkpointing.py store the optimizer, the scheduler and the scaler.
    "SL302/ok_saver_stores_scaler": [{
        "where": "train.py:12 main", "kind": "loop",
        "helpers": [],
        "updates": [(14, "scaler+optimizer", True, "none")],
        "window": None, "counters": {},
        "schedulers": [("scheduler", 17, "outside the loop", "committed-updates")],
        "checkpoints": [
            (18, ["epoch", "model", "optimizer", "scaler", "scheduler"], {"optimizer": ["optimizer"], "scaler": ["scaler"], "scheduler": ["scheduler"]}),
            (19, ["optimizer", "scaler", "scheduler"], {"optimizer": ["optimizer"], "scaler": ["scaler"], "scheduler": ["scheduler"]}),
        ],
        "resume needs": {"scheduler": ["scheduler"], "scaler": ["scaler"]},
        "restores": [], "diagnostics": [],
    }],
    # read_back restores the scaler it is handed (only when mixed precision is on).
    "SL303/ok_optional_scaler_argument": [{
        "where": "train.py:15 main", "kind": "loop",
        "helpers": [],
        "updates": [(18, "scaler+optimizer", True, "none")],
        "window": None, "counters": {}, "schedulers": [], "checkpoints": [],
        "resume needs": {"scaler": ["grad_scaler"]}, "restores": [13], "diagnostics": [],
    }],
    # Runner.train_step, a step function: a plain update, then the schedule; the resume is in __init__.
    "SL303/ok_restored_by_keyword": [{
        "where": "runner.py:22 Runner.train_step", "kind": "step function",
        "helpers": [],
        "updates": [(24, "optimizer", False, "none")],
        "window": None, "counters": {},
        "schedulers": [("self.schedule", 26, "per attempted update", "committed-updates")],
        "checkpoints": [],
        "resume needs": {"scheduler": ["self.schedule"]}, "restores": [], "diagnostics": [],
    }],
    # A plain optimizer; the schedule steps per epoch; both are read back before the loop.
    "SL303/ok_star_reexport": [{
        "where": "fit.py:17 fit", "kind": "loop",
        "helpers": [],
        "updates": [(20, "optimizer", False, "none")],
        "window": None, "counters": {},
        "schedulers": [("sched", 21, "outside the loop", "committed-updates")],
        "checkpoints": [],
        "resume needs": {"scheduler": ["sched"]}, "restores": [14, 15], "diagnostics": [],
    }],
    # Trainer.step, a step function: it returns on a skipped update, so the wrapped scheduler and the
    # counter advance per committed update; every 1000 of them it saves through self.save.
    "SL303/ok_wrapped_restore": [{
        "where": "state.py:17 Trainer.step", "kind": "step function",
        "helpers": ["Trainer.save", "WarmupWrapper.step"],  # (the wrapper built in __init__ is followed into its step)
        "updates": [(19, "scaler+optimizer", True, "authoritative")],
        "window": None,
        "counters": {"self.updates": {
            "unit": "updates", "declared": False, "incremented": [24], "runtime": "committed_updates",
            "feeds": [("checkpoint", 25, None, False), ("checkpoint", 29, None, False)], "reported": [],
        }},
        "schedulers": [("self.sched", 23, "per committed update", "committed-updates")],
        "checkpoints": [(26, ["optimizer", "scaler", "sched", "updates"], {"optimizer": ["self.optimizer"], "scaler": ["self.scaler"], "scheduler": ["self.sched", "self.sched.inner"]})],
        "resume needs": {"scheduler": ["self.sched", "self.sched.inner"], "scaler": ["self.scaler"]},
        "restores": [], "diagnostics": [],
    }],
    # run resumes through set_up -> restore (engine.py:27), which restores the optimizer, not the scaler.
    "SL303/resume_in_a_method": [{
        "where": "engine.py:17 Engine.run", "kind": "loop",
        "helpers": [],
        "updates": [(20, "scaler+optimizer", True, "none")],
        "window": None, "counters": {}, "schedulers": [], "checkpoints": [],
        "resume needs": {"scaler": ["self.grad_scaler"]}, "restores": [15], "diagnostics": [("SL303", 31)],
    }],
    # The loss is all-reduced by dist_utils.reduce_mean before the finiteness test; a plain optimizer.
    "SL401/ok_reduce_helper": [{
        "where": "train.py:9 train", "kind": "loop",
        "helpers": ["reduce_mean"],
        "updates": [(16, "optimizer", False, "none")],
        "window": None, "counters": {}, "schedulers": [], "checkpoints": [],
        "resume needs": {}, "restores": [], "diagnostics": [],
    }],
}


def test_readme_example(tmp_path):
    (tmp_path / "train.py").write_text(readme_example())
    assert [essentials(loop) for loop in trace_json("train.py", cwd=tmp_path)] == [README_MAP]


def project_files(folder):
    """The fixture project's modules, without the fixed goldens (`*.fixed.py`)."""
    return sorted(p.name for p in folder.glob("*.py") if not p.name.endswith(".fixed.py"))


@pytest.mark.parametrize("fixture", sorted(FIXTURE_MAPS))
def test_multi_module_fixture(fixture):
    loops = [essentials(loop) for loop in trace_json(*project_files(FIXTURES / fixture), cwd=FIXTURES / fixture)]
    assert loops == FIXTURE_MAPS[fixture]


PROJECTS = sorted(p.relative_to(FIXTURES).as_posix() for p in FIXTURES.glob("*/*") if p.is_dir())


@pytest.mark.parametrize("fixture", PROJECTS)
def test_every_project_fixture_traces(fixture):
    """Every multi-module fixture traces in the three formats; each loop names its file, line and
    function, and each counter carries evidence unless its unit is unknown or it is a batch index."""
    cwd = FIXTURES / fixture
    loops = trace_json(*project_files(cwd), cwd=cwd)
    for loop in loops:
        assert (cwd / loop["file"]).is_file() and loop["line"] > 0 and loop["function"]
        assert loop["updates"]
    text = trace("--color", "never", *project_files(cwd), cwd=cwd)
    markdown = trace("--output-format", "markdown", *project_files(cwd), cwd=cwd)
    assert text.count(": loop in ") + text.count(": step function ") == len(loops) == markdown.count("### ")


def test_text_is_coloured_only_when_asked(tmp_path):
    (tmp_path / "train.py").write_text(readme_example())
    assert "\x1b[" not in trace("train.py", cwd=tmp_path)  # not a terminal
    coloured = trace("--color", "always", "train.py", cwd=tmp_path)
    assert "\x1b[" in coloured and "SL102" in coloured


def test_declared_unit_is_shown_as_declared(tmp_path):
    source = readme_example().replace("global_step += 1            # SL102: counts skipped updates, and ends the run",
                                      "global_step += 1  # steplint: counter=batches")
    assert "steplint: counter=batches" in source
    (tmp_path / "train.py").write_text(source)
    (loop,) = trace_json("train.py", cwd=tmp_path)
    counter = next(c for c in loop["counters"] if c["name"] == "global_step")
    assert (counter["unit"], counter["declared"], counter["runtime"]) == ("batches", True, "batches")
    assert counter["evidence"][0]["why"] == "declared `counter=batches`"


def readme_trace_section() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("## steplint trace: the step-unit map")
    return text[start:text.index("\n## ", start + 1)]


def test_readme_quotes_the_text_output(tmp_path):
    (tmp_path / "train.py").write_text(readme_example())
    quoted = re.search(r"```text\n(.*?)```", readme_trace_section(), re.S).group(1)
    assert trace("train.py", cwd=tmp_path) == quoted + "\n"


def test_readme_documents_every_json_field(tmp_path):
    """The schema in the README names every field the JSON has, and no field it lacks."""
    (tmp_path / "train.py").write_text(readme_example())
    (loop,) = trace_json("train.py", cwd=tmp_path)
    section = readme_trace_section()
    documented = set(re.findall(r"`([a-z_]+)`", section))
    shown = set(loop) | set(loop["updates"][0]) | set(loop["window"]) | set(loop["schedulers"][0]) | set(loop["resume"])
    shown |= {k for c in loop["counters"] for k in c} | {k for c in loop["counters"] for e in c["evidence"] + c["consumers"] for k in e}
    shown |= set(loop["diagnostics"][0])
    assert shown <= documented, shown - documented


def check(*args, cwd):
    return subprocess.run([sys.executable, "-m", "steplint", "check", "--exit-zero", *args], capture_output=True, text=True, cwd=cwd).stdout


def test_show_evidence_lists_the_premises_and_where(tmp_path):
    """SL102 on the README example rests on the skippable update (line 13), the window (line 12) and
    the counter's unit (advanced once per window, line 16); SL103 on the scheduler's role and the window."""
    (tmp_path / "train.py").write_text(readme_example())
    shown = check("--show-evidence", "train.py", cwd=tmp_path)
    sl102 = shown[shown.index(" SL102 "):shown.index(" SL103 ")]
    assert "evidence: `scaler.step(optimizer)` can skip the update" in sl102 and "(train.py:13:9)" in sl102
    assert "evidence: `global_step` counts attempted updates: advanced once per window (`(i + 1) % accum == 0`) (train.py:16:9)" in sl102
    sl103 = shown[shown.index(" SL103 "):]
    assert "evidence: `scheduler` is a scheduler, built by `torch.optim.lr_scheduler.LambdaLR`" in sl103
    assert "runs every batch, while the update runs once per window (`(i + 1) % accum == 0`) (train.py:12:8)" in sl103
    again = check("--show-evidence", "train.py", cwd=tmp_path)  # answered from the cache: the premises kept
    assert again == shown
    assert "evidence" not in check("train.py", cwd=tmp_path)


def test_json_has_evidence_only_when_asked(tmp_path):
    (tmp_path / "train.py").write_text(readme_example())
    plain = json.loads(check("--output-format", "json", "train.py", cwd=tmp_path))
    assert all("evidence" not in d for d in plain) and len(plain) == 2
    asked = json.loads(check("--output-format", "json", "--show-evidence", "train.py", cwd=tmp_path))
    assert [{k: v for k, v in d.items() if k != "evidence"} for d in asked] == plain
    sl102 = next(d for d in asked if d["code"] == "SL102")
    assert {"claim": "`global_step` counts attempted updates: advanced once per window (`(i + 1) % accum == 0`)", "location": {"row": 16, "column": 9}} in sl102["evidence"]


PLATEAU_LOOP = """\
import torch

model = torch.nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, "min")
warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=100)
scaler = torch.amp.GradScaler("cuda")
step = 0
for x, y in [(torch.randn(4, 8), torch.randn(4, 1))] * 50:
    scaler.scale(torch.nn.functional.mse_loss(model(x), y)).backward()
    scaler.step(optimizer)
    scaler.update()
    warmup.step()
    step += 1
    if step % 10 == 0:
        plateau.step(torch.nn.functional.mse_loss(model(x), y).item())
"""


def test_scheduler_stepped_at_evaluation_is_shown_under_its_cadence(tmp_path):
    """A plateau scheduler stepped with a metric every 10 steps is neither per update nor told its position."""
    (tmp_path / "train.py").write_text(PLATEAU_LOOP)
    (loop,) = trace_json("train.py", cwd=tmp_path)
    stepped = [(s["name"], s["line"], s["stepped"], s["cadence"], s["position"]) for s in loop["schedulers"]]
    assert stepped == [
        ("warmup", 13, "per attempted update", None, "counted"),
        ("plateau", 16, "under a cadence", "step % 10 == 0", "metric"),
    ]
    assert "stepped under a cadence (`step % 10 == 0`), basis committed-updates, on a metric" in trace("train.py", cwd=tmp_path)


ACCELERATE_LOOP = """\
import torch
from accelerate import Accelerator


def train(model, loader, accelerate_kwargs, precision):
    accelerator = Accelerator(**accelerate_kwargs)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=100)
    model, optimizer, scheduler, loader = accelerator.prepare(model, optimizer, scheduler, loader)
    for batch in loader:
        with accelerator.accumulate(model):
            accelerator.backward(model(batch).mean())
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()


def train_bf16(model, loader):
    accelerator = Accelerator(mixed_precision="bf16")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for batch in loader:
        accelerator.backward(model(batch).mean())
        optimizer.step()
        optimizer.zero_grad()
"""


def test_prepared_optimizer_and_scheduler_are_accelerates(tmp_path):
    """A prepared optimizer is stepped by accelerate: whether it can skip depends on the Accelerator's
    precision, unknown when the launcher sets it, none under bf16; a prepared scheduler is accelerate's."""
    (tmp_path / "train.py").write_text(ACCELERATE_LOOP)
    first, second = trace_json("train.py", cwd=tmp_path)
    assert [(u["line"], u["steps"], u["skippable"]) for u in first["updates"]] == [(13, "accelerate", None)]
    assert [(s["name"], s["line"], s["stepped"]) for s in first["schedulers"]] == [("scheduler", 14, "by accelerate")]
    assert [(u["line"], u["steps"], u["skippable"]) for u in second["updates"]] == [(24, "accelerate", False)]
    assert "mixed_precision='bf16'" in second["updates"][0]["why"]
    assert "accelerate `optimizer.step()` (line 13): skipping unknown: prepared by `accelerator`" in trace("train.py", cwd=tmp_path)


LOSS_SCALER_LOOP = """\
import torch
from timm.utils import NativeScaler


def train_one_epoch(model, loader, optimizer, accum):
    loss_scaler = NativeScaler()
    for i, batch in enumerate(loader):
        loss = model(batch).mean() / accum
        loss_scaler(loss, optimizer, clip_grad=1.0,
                    parameters=model.parameters(), update_grad=(i + 1) % accum == 0)
        if (i + 1) % accum == 0:
            optimizer.zero_grad()
"""


def test_window_told_to_a_loss_scaler_and_multi_line_code_on_one_line(tmp_path):
    """timm's loss scaler is told the window's last micro-batch as `update_grad=`: that test is the
    window. The call spans two lines; the map quotes it on one."""
    (tmp_path / "train.py").write_text(LOSS_SCALER_LOOP)
    (loop,) = trace_json("train.py", cwd=tmp_path)
    assert (loop["window"]["line"], loop["window"]["boundary"], loop["window"]["length"]) == (10, "(i + 1) % accum == 0", "accum")
    (update,) = loop["updates"]
    assert (update["line"], update["steps"], update["skippable"]) == (9, "loss scaler+optimizer", True)
    assert update["code"] == "loss_scaler(loss, optimizer, clip_grad=1.0, parameters=model.parameters(), update_grad=(i + 1) % accum == 0)"
    assert all(line.startswith(("train.py:", "├", "│", "└")) for line in trace("train.py", cwd=tmp_path).splitlines() if line)


SAVE_AND_EVAL_BLOCKS = """\
import torch


def evaluate(model, data):
    return sum(model(x).mean().item() for x in data)


def train(model, loader, val, optimizer, save_every, eval_every):
    scaler = torch.amp.GradScaler("cuda")
    step = 0
    for batch in loader:
        scaler.scale(model(batch).mean()).backward()
        scaler.step(optimizer)
        scaler.update()
        step += 1
        if step % save_every == 0:
            model.eval()
            torch.save({"model": model.state_dict(), "scaler": scaler.state_dict()}, "last.pt")
            model.train()
        if step % eval_every == 0:
            score = evaluate(model, val)
            torch.save({"model": model.state_dict(), "score": score}, "best.pt")
"""


def test_a_mode_switch_around_a_save_is_not_an_evaluation(tmp_path):
    """`model.eval()` around a save only switches modes: that block feeds a checkpoint; the block that
    calls `evaluate(...)` and then saves feeds both."""
    (tmp_path / "train.py").write_text(SAVE_AND_EVAL_BLOCKS)
    (loop,) = trace_json("train.py", cwd=tmp_path)
    (step,) = [c for c in loop["counters"] if c["name"] == "step"]
    feeds = sorted((x["kind"], x["line"]) for x in step["consumers"])
    assert feeds == [("checkpoint", 16), ("checkpoint", 20), ("eval", 20)]  # the saves themselves do not read `step`


def test_loss_scaling_off_as_run_is_shown_with_its_option(tmp_path):
    fixture = FIXTURES / "SL101" / "ok_amp_flag_no_launch_gives"
    for path in (p for p in fixture.iterdir() if p.is_file()):
        (tmp_path / path.name).write_text(path.read_text())
    (tmp_path / "pyproject.toml").write_text("")  # (the project is this folder, with its README's launches)
    assert "loss scaling is off as run (`--amp` turns it on" in trace("pretrain.py", cwd=tmp_path)
    (tmp_path / "README.md").write_text("python pretrain.py --amp\n")
    assert "may skip" in trace("pretrain.py", cwd=tmp_path)


TWO_EVALUATIONS_UNDER_ONE_TEST = """\
import torch


def train(model, loader, optimizer, evaluate, checkpoint_every):
    scaler = torch.amp.GradScaler("cuda")
    step = 0
    for batch in loader:
        scaler.scale(model(batch).mean()).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        step += 1
        if step % checkpoint_every == 0:
            evaluate(model, "val")
            evaluate(model, "test")
"""


def test_a_test_guarding_two_evaluations_feeds_one_evaluation(tmp_path):
    (tmp_path / "train.py").write_text(TWO_EVALUATIONS_UNDER_ONE_TEST)
    (loop,) = trace_json("train.py", cwd=tmp_path)
    (counter,) = [c for c in loop["counters"] if c["name"] == "step"]
    assert [(c["kind"], c["line"]) for c in counter["consumers"]] == [("eval", 13)]
