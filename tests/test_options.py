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
