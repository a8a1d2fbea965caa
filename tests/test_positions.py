"""Positions computed per top-level statement are LibCST's PositionProvider positions, node for node."""

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from steplint.model.positions import Positions
from steplint.model.structure import walk_module
from steplint.model.syntax import children, forget_children
from steplint.source import Source

from conftest import FIXTURES

EXAMPLES = sorted(p for p in FIXTURES.glob("SL*/*.py")) + sorted(Path(__file__).parent.glob("loops/*.py"))

AWKWARD = '''#!/usr/bin/env python
# header comment

import torch ; import math


@property
# between decorator and def
@staticmethod
def f(x,
      y):  # trailing
    return (x +
            y)
    # footer of f at its indentation

# leading comment of the class
class C:
    \"\"\"Doc.\"\"\"

    def m(self): return [
        1,
    ]
if True: a = 1; b = 2
x = """
multi-line
string"""  ;  y = \\
    3
'''


def _check(text: str) -> Positions:
    forget_children()
    module = cst.parse_module(text)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    positions = Positions(Source("t.py", text), module, walk_module(module))
    for top in module.body:
        for node in _every_node(top):
            if node in expected:
                assert positions[node] == expected[node], cst.Module([]).code_for_node(node)
    return positions


def _every_node(top):
    stack = [top]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(children(node))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_positions_match_libcst(path):
    positions = _check(path.read_text())
    assert not positions._whole_module  # placed statement by statement, never the whole module


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_positions_match_libcst_on_awkward_layout(newline):
    positions = _check(AWKWARD.replace("\n", newline))
    assert not positions._whole_module


def test_a_node_outside_every_statement_is_placed_with_the_whole_module():
    text = "# header\nx = 1\n"
    module = cst.parse_module(text)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    positions = Positions(Source("t.py", text), module, walk_module(module))
    assert positions[module] == expected[module]
    assert positions._whole_module
