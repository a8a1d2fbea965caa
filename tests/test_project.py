"""The project index: calls resolved across modules (package-relative, `import utils`, src layout,
re-exports), effects composed through calls (bounded, cycle-safe), summaries as plain data cached by
content hash, and the CLI following a single file or a stdin buffer into its project."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from steplint.cache import code_signature
from steplint.config import Settings
from steplint.effects import PASSED_NONE
from steplint.engine import lint_source
from steplint.project import summary as s
from steplint.project.build import SummaryStore, build_index, project_files

TRAIN = '''
import torch

{import_line}


def main(model, loader, args):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cuda")
    for batch in loader:
        scaler.scale(model(batch).mean()).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
    {call}


def warm_start(model, path):
    """The script can resume: its checkpoints are read back."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    optimizer.load_state_dict(torch.load(path)["optimizer"])
    return optimizer
'''

SAVER = '''
import torch


def save_checkpoint(path, model, optimizer):
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, path)
'''


def write(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def lint_project(root, name):
    files = sorted(str(p) for p in root.rglob("*.py"))
    built = build_index(files, str(root), cache=False)
    path = root / name
    return lint_source(str(path), path.read_text(), Settings(), built.context_for(str(path)))


def saver_project(tmp_path, train_name, saver_name, import_line, call):
    write(tmp_path, {saver_name: SAVER, train_name: TRAIN.format(import_line=import_line, call=call)})
    return [d for d in lint_project(tmp_path, train_name) if d.code == "SL302"]


def test_package_relative_import(tmp_path):
    write(tmp_path, {"pkg/__init__.py": ""})
    found = saver_project(tmp_path, "pkg/train.py", "pkg/ckpt.py", "from .ckpt import save_checkpoint", 'save_checkpoint("a.pt", model, optimizer)')
    assert [d.row for d in found] == [15]
    assert "saved by `save_checkpoint` in pkg/ckpt.py:5" in found[0].message


def test_module_attribute_call_of_a_sibling_script(tmp_path):
    found = saver_project(tmp_path, "scripts/train.py", "scripts/ckpt.py", "import ckpt", 'ckpt.save_checkpoint("a.pt", model, optimizer)')
    assert [d.row for d in found] == [15]


def test_src_layout_and_reexport_through_the_package(tmp_path):
    write(tmp_path, {"src/proj/__init__.py": "from .io.ckpt import save_checkpoint\n", "src/proj/io/__init__.py": ""})
    found = saver_project(tmp_path, "src/proj/train.py", "src/proj/io/ckpt.py", "from proj import save_checkpoint", 'save_checkpoint("a.pt", model, optimizer)')
    assert [d.row for d in found] == [15]


def test_unresolved_saver_stays_silent(tmp_path):
    found = saver_project(tmp_path, "train.py", "other.py", "from elsewhere import save_checkpoint", 'save_checkpoint("a.pt", model, optimizer)')
    assert found == []


def test_recursive_helpers_compose_a_bounded_set_of_effects(tmp_path):
    write(tmp_path, {
        "a.py": '''
            from b import pong


            def ping(scaler, optimizer, n):
                scaler.step(optimizer)
                if n:
                    pong(scaler, optimizer, n - 1)
            ''',
        "b.py": '''
            from a import ping


            def pong(scaler, optimizer, n):
                scaler.update()
                if n:
                    ping(scaler, optimizer, n - 1)
            ''',
        "main.py": '''
            import torch
            from a import ping


            def main(model):
                ping(torch.amp.GradScaler("cuda"), torch.optim.SGD(model.parameters(), lr=0.1), 3)
            ''',
    })
    built = build_index([str(p) for p in tmp_path.glob("*.py")], str(tmp_path), cache=False)
    actions = [e.action for e in built.index.effects("a.py", "ping")]
    assert actions.count(s.SCALER_UPDATE) == 1 and s.UPDATE in actions
    assert len(actions) < 10


def test_summaries_are_plain_data(tmp_path):
    write(tmp_path, {"ckpt.py": SAVER})
    built = build_index([str(tmp_path / "ckpt.py")], str(tmp_path))
    summary = built.index.modules["ckpt.py"]
    store = SummaryStore(str(tmp_path / ".steplint_cache"))  # read back from the JSON the run wrote
    [key] = list(store.data)
    assert isinstance(store.data[key], dict) and store[key] == summary
    [save] = [e for e in summary.functions["save_checkpoint"].effects if e.action == s.SAVE]
    assert save.contents["optimizer"][0] == "param:optimizer"


def steplint(*args, cwd, input=None):
    return subprocess.run([sys.executable, "-m", "steplint", *args], capture_output=True, text=True, cwd=cwd, input=input)


def test_single_file_and_stdin_follow_the_project_and_the_cache_follows_the_text(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    write(tmp_path, {"ckpt.py": SAVER, "train.py": TRAIN.format(import_line="from ckpt import save_checkpoint", call='save_checkpoint("a.pt", model, optimizer)')})
    first = steplint("check", "--output-format", "concise", "train.py", cwd=tmp_path)
    assert "train.py:15:5: SL302" in first.stdout
    piped = steplint("check", "--output-format", "concise", "--stdin-filename", "train.py", "-", cwd=tmp_path, input=(tmp_path / "train.py").read_text())
    assert "train.py:15:5: SL302" in piped.stdout
    assert (tmp_path / ".steplint_cache" / "project" / "summaries.json").exists()
    # The saver learns to store the scaler: the warm cache must not keep the old summary.
    write(tmp_path, {"ckpt.py": SAVER.replace("def save_checkpoint(path, model, optimizer):", "def save_checkpoint(path, model, optimizer, scaler):")
                     .replace('optimizer.state_dict()}', 'optimizer.state_dict(), "scaler": scaler.state_dict()}')})
    write(tmp_path, {"train.py": TRAIN.format(import_line="from ckpt import save_checkpoint", call='save_checkpoint("a.pt", model, optimizer, scaler)')})
    again = steplint("check", "--output-format", "concise", "train.py", cwd=tmp_path)
    assert again.returncode == 0, again.stdout


def test_project_of_one_file_is_bounded(tmp_path):
    (tmp_path / ".git").mkdir()
    for i in range(5):
        write(tmp_path, {f"m{i}.py": "x = 1\n"})
    root, files, cut = project_files(str(tmp_path / "m0.py"), limit=3)
    assert root == str(tmp_path) and len(files) == 3 and cut


def test_unmarked_folder_reads_its_packages_only(tmp_path):
    write(tmp_path, {"script.py": "", "pkg/__init__.py": "", "pkg/helpers.py": "", "unrelated/deep/other.py": ""})
    _, files, _ = project_files(str(tmp_path / "script.py"))
    assert sorted(p[len(str(tmp_path)) + 1:] for p in files) == ["pkg/__init__.py", "pkg/helpers.py", "script.py"]


def test_an_edited_summarizer_misses_the_old_summaries(tmp_path):
    """An editable install whose summarizer changed between two runs of one version summarises again
    (a stale summary kept a re-exported loader unresolved in the corpus)."""
    import steplint.project.summarize as summarizer

    write(tmp_path, {"ckpt.py": SAVER})
    build_index([str(tmp_path / "ckpt.py")], str(tmp_path))
    summaries = tmp_path / ".steplint_cache" / "project" / "summaries.json"
    first = set(json.loads(summaries.read_text()))
    source = Path(summarizer.__file__)
    stat = source.stat()
    try:
        os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
        code_signature.cache_clear()
        build_index([str(tmp_path / "ckpt.py")], str(tmp_path))
    finally:
        os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        code_signature.cache_clear()
    second = set(json.loads(summaries.read_text()))
    assert len(first) == len(second) == 1 and first != second


BUILDER = """
import torch


def build(args, model):
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    scheduler = None
    if args.decay_every:
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=args.decay_every)
    return optimizer, scheduler
"""

BUILT_BY_THE_HELPER = """
import torch

from builder import build


def main(args, model, loader):
    optimizer, scheduler = build(args, model)
    if args.resume:
        optimizer.load_state_dict(torch.load(args.resume)["optimizer"])
    for batch in loader:
        model(batch).mean().backward()
        optimizer.step()
        optimizer.zero_grad()
        if scheduler is not None:
            scheduler.step()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, args.out)
"""


def test_roles_come_back_from_a_helper_that_returns_a_tuple_and_may_return_none(tmp_path):
    write(tmp_path, {"builder.py": BUILDER, "train.py": BUILT_BY_THE_HELPER})
    found = {d.code: d for d in lint_project(tmp_path, "train.py")}
    assert set(found) == {"SL302", "SL303"}
    assert "`scheduler`" in found["SL302"].message
    # (None where the recipe has no decay: the entry the fix adds reads it only where it exists)
    (edit,) = found["SL302"].fix.edits
    assert "scheduler.state_dict() if scheduler is not None else None" in edit.content


def test_a_scheduler_the_resume_helper_replays_is_not_named_missing():
    """The helper fast-forwards the scheduler it is handed (a loop of `scheduler.step()` that trains
    nothing): the resume and the checkpoint owe only the scaler (fixtures/SL303/replayed_by_the_checkpoint_helper)."""
    folder = Path(__file__).parent.parent / "fixtures" / "SL303" / "replayed_by_the_checkpoint_helper"
    found = lint_project(folder, "train_prior_fitting.py")
    messages = {d.code: d.message for d in found}
    assert set(messages) == {"SL302", "SL303"}
    assert all("`scaler`" in m and "scheduler" not in m for m in messages.values()), messages


# An algorithm's script that declares its loss-scaling switch true by default, then copies its YAML
# config onto its options, with the trainer in a module of its own (TorchSSL's layout).
COPIED_CONFIG_SCRIPT = '"""Each algorithm\'s script declares its options, then copies its YAML config onto them: every config of\nthe project sets `mixed_prec_semi: False`, and the launch script passes `--mixed_prec_semi False` to\nwhichever algorithm it runs (`python ${method}.py`). The declared default (`True`) is taken by no\nrun, so the trainer\'s scaled branch never runs and its scheduler steps after plain updates."""\nimport argparse\n\nimport torch\nimport yaml\n\nfrom trainers.semi import SemiTrainer\n\n\ndef copy_config_onto(args, path):\n    if path:\n        with open(path) as handle:\n            for key, value in yaml.safe_load(handle).items():\n                setattr(args, key, value)\n\n\nif __name__ == "__main__":\n    parser = argparse.ArgumentParser()\n    parser.add_argument("--semi_cfg", type=str, default="")\n    parser.add_argument("--mixed_prec_semi", type=lambda text: text == "True", default=True)\n    parser.add_argument("--semi_iters", type=int, default=1000)\n    args = parser.parse_args()\n    copy_config_onto(args, args.semi_cfg)\n    net = torch.nn.Linear(8, 4)\n    optimizer = torch.optim.SGD(net.parameters(), lr=0.03)\n    SemiTrainer(net, optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda it: 1 - it / args.semi_iters)).train(args, [])\n'
COPIED_CONFIG_TRAINER = 'import torch\n\n\nclass SemiTrainer:\n    def __init__(self, net, optimizer, scheduler):\n        self.net, self.optimizer, self.scheduler = net, optimizer, scheduler\n\n    def train(self, args, batches):\n        scaler = torch.amp.GradScaler("cuda")\n        for inputs, targets in batches:\n            loss = torch.nn.functional.cross_entropy(self.net(inputs), targets)\n            if args.mixed_prec_semi:\n                scaler.scale(loss).backward()\n                scaler.step(self.optimizer)\n                scaler.update()\n            else:\n                loss.backward()\n                self.optimizer.step()\n            self.scheduler.step()\n            self.net.zero_grad()\n'


def copied_config_project(root, amp_values):
    files = {"consistency.py": COPIED_CONFIG_SCRIPT, "trainers/__init__.py": "", "trainers/semi.py": COPIED_CONFIG_TRAINER,
             "scripts/run_all.sh": "method=$1\nfor size in 250 4000; do\n\tpython ${method}.py --semi_iters ${size} --mixed_prec_semi False\ndone\n"}
    for index, value in enumerate(amp_values):
        files[f"configs/semi_{index}.yaml"] = f"semi_iters: 2000\nmixed_prec_semi: {value}\n"
    write(root, files)
    return {d.code for d in lint_project(root, "trainers/semi.py")}


def test_a_true_default_no_run_takes_leaves_the_switch_off(tmp_path):
    # every config sets the key false, and the launch line naming its script through a variable passes it false
    assert copied_config_project(tmp_path, ["False", "False"]) == set()


def test_a_config_that_turns_the_switch_on_is_a_run_with_it(tmp_path):
    assert copied_config_project(tmp_path, ["False", "True"]) == {"SL101"}


def test_a_parameter_every_call_leaves_at_one_integer_has_that_value(tmp_path):
    trainer = """
        import torch


        class Trainer:
            def __init__(self, model, accum=1, warmup=100, every=10):
                self.model, self.accum, self.warmup, self.every = model, accum, warmup, every
                self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        """
    calls = {
        "agree.py": "import argparse\nfrom trainer import Trainer\nargparse.ArgumentParser().add_argument('--epochs')\nTrainer(None, accum=1)\nTrainer(None, 1, warmup=5)\n",
        "star.py": "import argparse\nfrom trainer import Trainer\nargparse.ArgumentParser().add_argument('--epochs')\nTrainer(None, **{'every': 3})\n",
    }
    write(tmp_path, {"trainer.py": trainer, **calls})
    files = sorted(str(p) for p in tmp_path.rglob("*.py"))
    values = build_index(files, str(tmp_path), cache=False).context_for(str(tmp_path / "trainer.py")).parameter_values
    # (accum: 1 in every call; warmup: 5 in one, its default of 100 in the other; every: hidden by `**`)
    assert values == {}  # the call through `**` hides what reaches each parameter
    (tmp_path / "star.py").unlink()
    files = sorted(str(p) for p in tmp_path.rglob("*.py"))
    values = build_index(files, str(tmp_path), cache=False).context_for(str(tmp_path / "trainer.py")).parameter_values
    # (and `model`: `None` as written in both calls)
    assert values == {"Trainer.__init__": {"model": PASSED_NONE, "accum": 1, "every": 10}}


def test_a_switch_every_seen_call_turns_off_is_unknown_while_a_module_with_no_summary_may_call_too(tmp_path):
    """`fit(amp=False)` in the one summarised caller makes the scaler off as run; a second caller that passes
    the prefilter by no word (`fit(model, amp=True)` alone) may switch it on, and then nothing is decided."""
    trainer = """
        import torch


        def fit(model, loader, amp=True):
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 10)
            scaler = torch.cuda.amp.GradScaler(enabled=amp)
            for x in loader:
                scaler.scale(model(x).mean()).backward()
                scaler.step(optimizer)
                scaler.update()
                scheduler.step()
        """
    seen = "import torch\nfrom trainer import fit\nmodel = torch.nn.Linear(2, 2)\nfit(model, [], amp=False)\ntorch.save(model.state_dict(), 'm.pt')\n"
    write(tmp_path, {"trainer.py": trainer, "seen.py": seen})

    def reported():
        files = sorted(str(p) for p in tmp_path.rglob("*.py"))
        context = build_index(files, str(tmp_path), cache=False).context_for(str(tmp_path / "trainer.py"))
        return [d.code for d in lint_source(str(tmp_path / "trainer.py"), (tmp_path / "trainer.py").read_text(), Settings(), context)]

    assert reported() == []
    # (a module with no summary that imports another name of the module calls no `fit` unseen)
    (tmp_path / "trainer.py").write_text((tmp_path / "trainer.py").read_text() + "\n\ndef describe():\n    return 'fit'\n")
    (tmp_path / "report.py").write_text("from trainer import describe\nprint(describe())\n")
    assert reported() == []
    (tmp_path / "unseen.py").write_text("from trainer import fit\nfit(None, [], amp=True)\n")
    assert reported() == ["SL101"]
