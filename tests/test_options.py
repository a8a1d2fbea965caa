"""Options as run (steplint.model.options): a test of an option that no launch gives is decided by the
option's declared default, also through the forms training scripts write it in."""

import libcst as cst
import pytest

from steplint.config import Settings
from steplint.model import build_model
from steplint.project.context import ModuleContext
from steplint.source import Source, parser_text

PARSER = """
import argparse
parser = argparse.ArgumentParser()
parser.add_argument("--precision", default=None)
parser.add_argument("--fp32", action="store_true")
parser.add_argument("--save-every", type=int, default=None)
parser.add_argument("--amp-dtype", default="float16")
parser.add_argument("--gradient-norm", type=float, default=-1.0)
parser.add_argument("--accumulation", type=int, default=1)
args = parser.parse_args()
"""


def off_as_run(condition: str, launched=()):
    text = PARSER + f"\n\ndef train(args):\n    flag = {condition}\n    return flag\n"
    context = ModuleContext("train.py", launch_options=list(launched))
    model = build_model(Source("train.py", text), cst.parse_module(parser_text(text)), Settings(), context)
    scope = next(s for s in model.structure.scopes if s.name == "train")
    return model.roles.command_line.off_as_run(cst.parse_expression("flag"), scope)


@pytest.mark.parametrize("condition, option", [
    ("args.precision is not None", "--precision"),
    ("args.precision == 'fp16'", "--precision"),
    ("not args.fp32 and False or args.precision", None),  # (a form not evaluated: may be on)
    ("isinstance(args.save_every, int)", "--save_every"),
    ("bool(args.precision)", "--precision"),
    ("args.amp_dtype != 'float16'", "--amp_dtype"),
    ("args.gradient_norm > 0.0", "--gradient_norm"),
    ("args.accumulation > 1", "--accumulation"),
])
def test_a_test_of_an_option_no_launch_gives_is_decided_by_its_default(condition, option):
    assert off_as_run(condition) == option


@pytest.mark.parametrize("condition", [
    "args.precision is None", "not args.fp32", "args.amp_dtype == 'float16'", "args.unknown is not None", "args.gradient_norm < 0",
    "args.accumulation >= 1", "args.precision > 0",  # (None > 0 raises where it runs: not a test the run takes as false)
])
def test_a_test_its_default_makes_true_or_an_undeclared_option_is_not_off(condition):
    assert off_as_run(condition) is None


def test_an_option_a_launch_gives_may_be_on():
    assert off_as_run("args.precision is not None", launched=["precision"]) is None
    assert off_as_run("args.precision is not None", launched=["fp32"]) == "--precision"


def test_a_local_assigned_twice_is_not_followed():
    text = PARSER + "\n\ndef train(args):\n    flag = args.precision is not None\n    flag = True\n    return flag\n"
    context = ModuleContext("train.py", launch_options=[])
    model = build_model(Source("train.py", text), cst.parse_module(parser_text(text)), Settings(), context)
    scope = next(s for s in model.structure.scopes if s.name == "train")
    assert model.roles.command_line.off_as_run(cst.parse_expression("flag"), scope) is None


def test_an_option_given_under_another_long_name_may_be_on():
    text = PARSER.replace('"--precision", default=None', '"--precision", "--mp", default=None') + "\n\ndef train(args):\n    return args.precision\n"
    for launched, off in ((["mp"], None), (["lr"], "--precision")):
        model = build_model(Source("train.py", text), cst.parse_module(parser_text(text)), Settings(), ModuleContext("train.py", launch_options=launched))
        assert model.roles.command_line.off_as_run(cst.parse_expression("args.precision is not None"), None) == off


# -- options and switches declared outside the module's own parser -------------------------------------

def _model(text: str, context: ModuleContext):
    return build_model(Source("train.py", text), cst.parse_module(parser_text(text)), Settings(), context)


def test_config_key_read_as_false_only_when_every_config_sets_it_false(tmp_path):
    from steplint.project.launches import read_launches

    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "base.json").write_text('{"train": {"fp16_run": false, "epochs": 10}, "data": {"amp": true}}')
    (tmp_path / "configs" / "asr.yaml").write_text("train_conf:\n    use_fp16: false  # fp32\n    accum_grad: 4\nmodel:\n  amp: false\n")
    launches = read_launches(str(tmp_path))
    assert launches.switched_off() == ["train.fp16_run", "train_conf.use_fp16"]  # (`amp` is set true in one file)
    context = ModuleContext("train.py", **launches.context_of("train.py"))
    model = _model("import torch\n", context)
    module = model.structure.scopes[0]
    lines = model.roles.command_line
    assert lines.off_as_run(cst.parse_expression("hps.train.fp16_run"), module) == "config:train.fp16_run"
    assert lines.off_as_run(cst.parse_expression("conf['train_conf']['use_fp16']"), module) == "config:train_conf.use_fp16"
    assert lines.off_as_run(cst.parse_expression("cfg.model.amp"), module) is None
    assert lines.off_as_run(cst.parse_expression("fp16_run"), module) is None  # (the config object itself is not named)


def test_a_key_a_launch_line_or_the_code_sets_true_is_not_off(tmp_path):
    from steplint.project.launches import keys_set_true, read_launches

    assert keys_set_true("python train.py ++train_conf.use_fp16=true lr=1e-3") == {"use_fp16"}
    assert keys_set_true('cfg.AMP.ENABLED = True\nconfig["amp"] = 1\nif x == True: pass\nbuild(fp16_run=True)') == {"ENABLED", "amp", "fp16_run"}
    (tmp_path / "base.yaml").write_text("train_conf:\n  use_fp16: false\n")
    (tmp_path / "run.sh").write_text("python train.py ++train_conf.use_fp16=true\n")
    assert read_launches(str(tmp_path)).switched_off() == []


MODULE_GLOBALS = """
import torch
dtype = "bfloat16"
amp_dtype = "float16" if torch.cuda.is_bf16_supported() else "bfloat16"
exec(open("configurator.py").read())
scaler = torch.amp.GradScaler("cuda", enabled=(dtype == "float16"))
"""


@pytest.mark.parametrize("contested, given, off", [([], [], "constant:dtype"), (["dtype"], [], None), ([], ["dtype"], None)])
def test_a_global_set_once_to_a_literal_is_that_literal_unless_a_config_or_launch_may_change_it(contested, given, off):
    model = _model(MODULE_GLOBALS, ModuleContext("train.py", launch_options=given, contested_globals=contested))
    module = model.structure.scopes[0]
    assert model.roles.command_line.off_as_run(cst.parse_expression('dtype == "float16"'), module) == off
    assert model.roles.command_line.off_as_run(cst.parse_expression('amp_dtype == "float16"'), module) is None


SWITCHES = """
import torch
def train(config, trainer, kwargs):
    amp = config.get("amp", False)
    flag = amp
    return flag
"""


@pytest.mark.parametrize("expression, set_true, given, off", [
    ("flag", [], [], "unproven:amp"),  # (through a local set once from `config.get("amp", False)`)
    ("flag", ["amp"], [], None),  # some config, launch line or code sets it true
    ("flag", [], ["amp"], None),  # a launch gives --amp
    ("trainer.cfg.use_amp", [], [], "unproven:use_amp"),
    ("kwargs.get('fp16', True)", [], [], None),  # (on unless something turns it off)
    ("config", [], [], None),  # (a name handed in: its callers' say)
])
def test_a_loss_scaling_switch_nothing_turns_on_is_unproven(expression, set_true, given, off):
    model = _model(SWITCHES, ModuleContext("train.py", launch_options=given, switches_set_true=set_true))
    scope = next(s for s in model.structure.scopes if s.name == "train")
    assert model.roles.command_line.unproven(cst.parse_expression(expression), scope) == off


def test_no_launch_facts_no_verdict():
    model = _model(SWITCHES, ModuleContext("train.py"))
    scope = next(s for s in model.structure.scopes if s.name == "train")
    assert model.roles.command_line.unproven(cst.parse_expression("trainer.cfg.use_amp"), scope) is None


def test_a_precision_key_is_read_with_the_values_every_config_gives_it(tmp_path):
    from steplint.project.launches import read_launches

    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "a.yaml").write_text("train:\n  amp_dtype: fp32 # fp32, fp16 or bf16\n  precision: FP16\n")
    (tmp_path / "configs" / "b.yaml").write_text("train:\n  amp_dtype: 'fp32'\n  precision: FP16\n  half_dtype: fp32\n")
    (tmp_path / "configs" / "c.json").write_text('{"train": {"precision": "FP16", "mixed_dtype": "16"}, "model": {"mixed_dtype": 16}}')
    launches = read_launches(str(tmp_path))
    launches.note_code("cfg.train.half_dtype = other\n")
    context = ModuleContext("train.py", **launches.context_of("train.py"))
    module_text = (
        "import torch\n\ndef train(args):\n    if args.train.amp_dtype == 'fp32':\n        dtype = torch.float32\n"
        "    elif args.train.amp_dtype == 'fp16':\n        dtype = torch.float16\n    else:\n        raise ValueError()\n    return dtype\n"
    )
    model = _model(module_text, context)
    lines = model.roles.command_line
    train = next(scope for scope in model.structure.scopes if scope.name == "train")
    # every config gives `fp32`, quoted or not: the comparison is decided, and so is the local set in the chain
    assert lines.value_as_run(cst.parse_expression("args.train.amp_dtype == 'fp32'"), train) == (True, "config:train.amp_dtype")
    assert lines.value_as_run(cst.parse_expression("dtype == torch.float32"), train) == (True, "config:train.amp_dtype")
    assert lines.value_as_run(cst.parse_expression("dtype != torch.half"), train) == (True, "config:train.amp_dtype")
    # values compare as written: `FP16` is not `fp16`
    assert lines.value_as_run(cst.parse_expression("args.train.precision == 'fp16'"), train) == (False, "config:train.precision")
    # a key the code assigns is not decided by the configs; nor a key given as a string and as a number
    assert lines.value_as_run(cst.parse_expression("args.train.half_dtype == 'fp32'"), train)[0] is ...
    assert lines.value_as_run(cst.parse_expression("args.mixed_dtype == 16"), train)[0] is ...
    assert lines.value_as_run(cst.parse_expression("args.train.mixed_dtype == '16'"), train) == (True, "config:train.mixed_dtype")


def test_a_comparison_with_a_precision_is_a_test_of_loss_scaling():
    from steplint.model.options import _names_loss_scaling

    for text, expected in (("dtype == torch.half", True), ("cfg.mode == 'fp16'", True), ("args.x == [1, 2]", False), ("args.mode == 'train'", False)):
        assert _names_loss_scaling(cst.parse_expression(text)) is expected, text


def test_and_or_of_decided_tests_are_decided():
    text = PARSER + "\n\ndef train(args, half):\n    return args.fp32\n"
    model = build_model(Source("train.py", text), cst.parse_module(parser_text(text)), Settings(), ModuleContext("train.py", launch_options=["lr"]))
    lines, module = model.roles.command_line, model.structure.scopes[0]
    for expression, expected in (("half and args.fp32", False), ("args.fp32 and half", False), ("half or not args.fp32", True),
                                 ("half or args.fp32", ...), ("half and not args.fp32", ...), ("args.fp32 or args.accumulation > 1", False)):
        assert lines.value_as_run(cst.parse_expression(expression), module)[0] == expected, expression


def test_a_yaml_type_tag_is_not_part_of_the_value(tmp_path):
    from steplint.project.launches import read_launches

    (tmp_path / "a.yaml").write_text("train:\n  use_amp: !!bool False  # fp32\n  precision_dtype: !!str fp32\n")
    launches = read_launches(str(tmp_path))
    assert launches.switched_off() == ["train.use_amp"]
    assert launches.configured_values()["train.precision_dtype"] == ["fp32"]


def test_apex_initialized_disabled_in_every_call_scales_nothing():
    for enabled, off in (("False", True), ("True", False), ("args.fp16", True), ("flag", False)):
        text = (PARSER.replace('parser.add_argument("--fp32", action="store_true")', 'parser.add_argument("--fp32", action="store_true")\nparser.add_argument("--fp16", action="store_true")')
                + f"\nfrom apex import amp\n\ndef setup(model, optimizer, flag):\n    return amp.initialize(model, optimizer, enabled={enabled})\n")
        model = build_model(Source("train.py", text), cst.parse_module(parser_text(text)), Settings(), ModuleContext("train.py", launch_options=["lr"]))
        assert (model.roles.apex_disabled is not None) == off, enabled


@pytest.mark.parametrize("option, takes_a_run_value", [
    ("--precision", True),  # default None: the value (a path, an epoch) comes with the run
    ("--gradient-norm", True),  # default -1.0: a sentinel no run's value is
    ("--fp32", False),  # a flag, off unless a launch gives it
    ("--accumulation", False),  # default 1: a value runs use as it is
    ("--amp-dtype", False),
    ("--undeclared", False),
])
def test_value_options_are_those_whose_default_is_no_runs_value(option, takes_a_run_value):
    """A restore under such an option (`--load_epoch N`, default -1) is the resume run after a crash."""
    text = PARSER + "\n"
    model = build_model(Source("train.py", text), cst.parse_module(parser_text(text)), Settings(), ModuleContext("train.py", launch_options=[]))
    assert model.roles.command_line.value_option(option) is takes_a_run_value
